"""Errors a user can fix. The CLI prints them as one line and exits with status 2."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path


class UserError(Exception):
    """A mistake in input, options or installed plugins; the message says what and where."""


class PluginError(UserError):
    """A plugin misbehaved (bad output, failed to load); the message names the plugin."""


def reason(e: BaseException, limit: int = 200) -> str:
    """An exception as one short line, "Type: first line of its message", for a UserError to quote."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:limit]}" if first else type(e).__name__


_ADVICE = {
    errno.ENOSPC: "no space left on the device; free space or write elsewhere",
    errno.EDQUOT: "disk quota exceeded; free space or write elsewhere",
    errno.EFBIG: "file too large for the file-size limit (ulimit -f) or the file system; raise the limit or write "
                 "elsewhere",
    errno.EACCES: "permission denied; choose a location you can write (or read), or fix its permissions",
    errno.EPERM: "operation not permitted; choose a location you can write, or fix its permissions",
    errno.EROFS: "read-only file system; choose a writable location",
    errno.EISDIR: "is a folder where a file is expected; name a file, or replace the folder with one",
    errno.ENOENT: "no such file or folder",
    errno.ENAMETOOLONG: "file name too long; choose a shorter path",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n) and run again",
    errno.EIO: "input/output error; check the device",
}
WRITING = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)  # errors only ever met writing
# A file system's refusals: the user fixes them (space, limits, permissions, paths), not a plugin's author.
FILE_PROBLEMS = frozenset({*_ADVICE, errno.ENOTDIR, errno.EEXIST})


def os_problem(e: OSError, option: str | None = None) -> str:
    """An OSError as "path: what happened; what to do", naming the path the user knows (not the
    hidden temp file beside it); ``option`` (``--cache-dir``) is suggested when another place would do."""
    raw = e.filename2 if e.filename2 is not None and e.errno in (errno.EISDIR, errno.ENOTDIR) else e.filename
    path = shown_path(raw) if raw is not None else None
    what = _ADVICE.get(e.errno, f"{e.strerror or type(e).__name__}")
    if e.errno in (errno.ENOTDIR, errno.EEXIST) and raw is not None:  # EEXIST: mkdir where a file is
        blocker = next((p for p in (Path(os.fsdecode(raw)), *Path(os.fsdecode(raw)).parents) if p.is_file()), None)
        if blocker:
            return f"{blocker} is a file, not a folder; choose another path"
        what = "not a folder; choose a folder"
    if path is None:
        return f"writing the command's output: {what}"
    if option and e.errno in WRITING:
        what += f" (e.g. another {option})"
    return f"{path}: {what}"


def shown_path(name) -> str:
    """A path as the user knows it: ``dir/.name.<tag>.tmp`` (an atomic write's temp file) is ``dir/name``."""
    path = Path(os.fsdecode(name))
    match = re.fullmatch(r"\.(.+)\.[A-Za-z0-9_.-]{6,60}\.tmp", path.name)
    return str(path.with_name(match.group(1)) if match else path)
