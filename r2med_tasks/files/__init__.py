"""Files on disk, written so nothing is lost and read so nothing hangs. The lowest layer: it imports
nothing of r2med but ``errors``."""
