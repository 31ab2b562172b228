"""Atomic file writes: a temp file in the target folder, then ``os.replace``.

A run killed at any moment therefore leaves either the old file or the new one, never half of one.
A new file gets the mode a plain ``open()`` gives (``0666`` less the umask: ``0644`` under umask
022), so results can be shared; a replaced file keeps its mode. (``tempfile.mkstemp`` would make
every file ``0600``, whatever the umask.)
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _temp_file(path: Path) -> tuple[int, Path]:
    """A new empty ``.<name>.<random>.tmp`` beside ``path``, open for writing, with the mode a
    plain ``open(path, "w")`` would leave ``path`` with."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            os.fchmod(fd, mode)
        return fd, tmp


@contextmanager
def _naming(path: Path) -> Iterator[None]:
    """An OSError that names no file (ENOSPC from ``write``/``fsync``) names ``path``: the file the
    user's run was writing, so the one-line error can say where."""
    try:
        yield
    except OSError as e:
        if e.filename is None and e.errno is not None:
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise


@contextmanager
def replacing(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that becomes ``path`` when the block ends without error."""
    fd, tmp = _temp_file(path)
    try:
        with _naming(path), os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes) -> None:
    with replacing(path) as f:
        f.write(data)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any, *, indent: int | None = 2) -> None:
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False, default=str) + "\n")


def write_lines(path: Path, lines: Iterable[str]) -> None:
    write_text(path, "".join(line + "\n" for line in lines))
