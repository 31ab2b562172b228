"""Atomic file writes: a temp file in the target folder, then ``os.replace``.

A run killed at any moment therefore leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def replacing(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that becomes ``path`` when the block ends without error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
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
