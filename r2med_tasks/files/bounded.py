"""Reading files that may hold anything: results folders and run files come from anywhere, so a
named pipe must not hang a reader, a link to ``/dev/zero`` must not fill memory, deep JSON must not
overflow the stack, and a ``true`` must not rank as a score.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

MAX_JSON_DEPTH = 32  # r2med's and mteb's files nest fewer than 10 levels



class UnreadableFile(ValueError):
    """A file a reader refuses; ``str()`` says why in a few words (the caller names the file)."""


class MissingFile(UnreadableFile):
    """No file there (or a link to nothing)."""


class MalformedJSON(UnreadableFile):
    """A readable file that is not JSON, or JSON nested deeper than :data:`MAX_JSON_DEPTH`."""


_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFCHR: "a device",
          stat.S_IFBLK: "a device", stat.S_IFSOCK: "a socket"}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a file")


def read_bytes(path: Path, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them; anything else is refused
    before anything is read."""
    try:
        before = os.stat(path)
        if not stat.S_ISREG(before.st_mode):
            raise UnreadableFile(f"{_kind(before.st_mode)}, not a regular file")
        if before.st_size > limit:
            raise UnreadableFile(f"{before.st_size:,} bytes, over the {limit:,}-byte limit for such a file")
        # O_NONBLOCK: should a FIFO replace the file in between, opening it does not wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise MissingFile("no such file") from None
    except OSError as e:
        raise UnreadableFile(e.strerror or type(e).__name__) from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise UnreadableFile(f"{_kind(opened.st_mode)}, not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise UnreadableFile(e.strerror or type(e).__name__) from None
    finally:
        os.close(fd)
    if size > limit:  # it grew while being read
        raise UnreadableFile(f"over the {limit:,}-byte limit for such a file")
    return b"".join(chunks)


def read_text(path: Path, limit: int) -> str:
    """:func:`read_bytes` as UTF-8 text."""
    return utf8(read_bytes(path, limit))


def utf8(data: bytes) -> str:
    """A file's bytes, read already, as UTF-8 text; :class:`UnreadableFile` saying where they are not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnreadableFile(f"not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_json(path: Path, limit: int) -> Any:
    """The JSON value in ``path``, nested at most :data:`MAX_JSON_DEPTH` deep."""
    return parse_json(read_text(path, limit))


def parse_json(text: str | bytes) -> Any:
    """The JSON value ``text`` holds, nested at most :data:`MAX_JSON_DEPTH` deep."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedJSON(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise MalformedJSON(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as e:  # JSONDecodeError, and an integer of more digits than Python converts
        raise MalformedJSON(f"not JSON ({str(e)[:120]})") from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth(value) > MAX_JSON_DEPTH:
        raise MalformedJSON(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def read_json_object(path: Path, limit: int) -> dict[str, Any]:
    """:func:`read_json`, which must be an object."""
    value = read_json(path, limit)
    if not isinstance(value, dict):
        raise MalformedJSON(f"not a JSON object (a {type(value).__name__})")
    return value


def _depth(value: Any) -> int:
    """How deep ``value``'s lists and objects nest (iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def unit_score(value: Any) -> float | None:
    """``value`` as a score (a finite number in [0, 1], not a boolean), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a float's range
        return None
    return number if math.isfinite(number) and 0.0 <= number <= 1.0 else None
