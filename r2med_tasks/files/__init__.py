"""Files on disk, written so nothing is lost: atomic writes (``atomic``), bounded reads of files that
may hold anything (``bounded``), append-only journals of finished work (``journal``) and one process
per results folder (``locking``). The lowest layer: it imports nothing of r2med but ``errors``."""
