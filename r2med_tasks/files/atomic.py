"""Atomic file writes: a temp file in the target folder, then ``os.replace``, so a run killed at any
moment leaves the old file or the new one, never half of one. A new file gets the mode a plain
``open()`` gives, so results can be shared (``tempfile.mkstemp`` would make every file ``0600``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _temp_file(path: Path) -> tuple[int, Path]:
    """A new temp file beside ``path``, open for writing. Temp files a killed process of this host
    left behind go first, so they never pile up."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(path)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    while True:
        tmp = path.parent / f".{path.name}.{_HOST}-{os.getpid()}-{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            os.fchmod(fd, mode)
        return fd, tmp


_HOST = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:24] or "host"


def _remove_orphans(path: Path) -> None:
    """Remove ``path``'s temp files whose writer, a process of this host, no longer runs."""
    prefix = f".{path.name}.{_HOST}-"
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            try:
                os.unlink(path.parent / name)
            except OSError:
                pass


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        return True
    return True


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """An OSError that names no file (ENOSPC from ``write``/``fsync``) names ``path``, so the one-line
    error can say where."""
    try:
        yield
    except OSError as e:
        if e.filename is None and e.errno is None and _SHORT_WRITE.search(str(e)):  # numpy's tofile, cut short
            raise OSError(_short_write_errno(), os.strerror(_short_write_errno()), str(path)) from e
        if e.filename is None and e.errno is not None:
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise


_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


def _short_write_errno() -> int:
    """Why a write came out short: the file-size limit (``ulimit -f``) when one is set, else a full disk."""
    import errno
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return errno.EFBIG if soft != resource.RLIM_INFINITY else errno.ENOSPC


@contextmanager
def replacing(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that becomes ``path`` when the block ends without error."""
    fd, tmp = _temp_file(path)
    try:
        with naming(path), os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_all(files: Iterable[tuple[Path, bytes]]) -> None:
    """Several files replaced together: all are written first, so a failed write (a full disk)
    replaces nothing; a kill while they are put in place leaves each file whole, old or new."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in files:
            fd, tmp = _temp_file(path)
            staged.append((tmp, path))
            with naming(path), os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in staged:
        os.replace(tmp, path)


def write_bytes(path: Path, data: bytes) -> None:
    with replacing(path) as f:
        f.write(data)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any, *, indent: int | None = 2) -> None:
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False, default=str) + "\n")
