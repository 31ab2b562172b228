"""One process at a time per results folder: a ``flock``, which the kernel drops however its process
ends, so a killed run never leaves a stale lock. The file names its holder for a waiting run.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .atomic import naming


@contextmanager
def folder_lock(path: Path, on_wait: Callable[[str], None]) -> Iterator[None]:
    """Hold ``path``'s lock for the block; when another process holds it, call ``on_wait`` with a
    description of the holder once, then wait for it."""
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    try:
        with naming(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:  # a full disk, a file-size limit: nothing of this attempt is left behind
        for folder in made:  # deepest first
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait(holder(path))
            fcntl.flock(fd, fcntl.LOCK_EX)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S"),
              "program": os.path.basename(sys.argv[0])}  # not its arguments: they may hold a secret
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
        except OSError:  # only shown to a waiting run: a full disk is no reason to stop
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


def holder(path: Path) -> str:
    """Who holds the lock, as the holder recorded it."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {info['pid']} on {info['host']} since {info['since']} ({info['program']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"
