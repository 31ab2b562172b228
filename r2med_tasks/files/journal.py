"""An append-only JSONL journal of finished work, so a killed run loses at most the records being
written and a rerun redoes nothing else.

An ``append`` returns once its lines are written with one ``os.write`` on an ``O_APPEND``
descriptor (so writers never mix) and fsynced. Threads are group-committed: appends arriving during
a write go out together in the next one, so writers never queue for an fsync each. A line cut by a
kill is dropped from the file on reading, with one warning, and its work is done again.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from . import atomic
from ..errors import UserError

log = logging.getLogger(__name__)


def _record(line: bytes) -> dict[str, Any] | None:
    """The JSON object a line holds; None for anything else (garbage, a cut line, a bare value)."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def _line(record: dict[str, Any]) -> bytes:
    """``record`` as one JSON line, ASCII-escaped when it holds a lone surrogate (which a server may
    send), read back the same either way."""
    text = json.dumps(record, ensure_ascii=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(record) + "\n").encode("ascii")


class _Batch:
    """Appends that go out in one write and fsync; they wait on their own ``ready``, so only they
    are woken."""

    __slots__ = ("parts", "done", "error", "ready")

    def __init__(self, lock: threading.Lock) -> None:
        self.parts: list[bytes] = []
        self.done = False
        self.error: BaseException | None = None
        self.ready = threading.Condition(lock)


class Journal:
    def __init__(self, path: str | os.PathLike, what: str) -> None:
        """``what`` names the journal in messages ("the generation cache")."""
        self.path, self.what = Path(path), what
        self._lock = threading.Lock()
        self._open: _Batch | None = None  # the appends waiting for the next write
        self._writing = False

    def read(self) -> tuple[list[dict[str, Any]], int, bool]:
        """The records, in file order; how many lines did not parse; whether the last one was cut.
        Unreadable lines are dropped from the file, with one warning."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return [], 0, False
        except OSError as e:
            raise UserError(f"cannot read {self.what} {self.path}: {e.strerror or e}") from None
        records, skipped, cut = [], 0, False
        lines = raw.split(b"\n")
        last = lines.pop()  # b"" when the file ends with a newline
        for line, is_last in [(line, False) for line in lines] + [(last, True)]:
            if not line.strip():
                continue
            record = _record(line)
            if record is not None:
                records.append(record)
            else:
                skipped += 1
                cut = cut or is_last
        if skipped:
            dropped = self._drop_unreadable()  # 0 when the "cut" line was one being written
            if dropped:
                log.warning("%s %s: skipped %d unreadable line(s) (an interrupted write, or damage); what they "
                            "held is computed again", self.what, self.path, dropped)
        return records, skipped, cut

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append ``records`` as JSON lines and fsync them before returning."""
        if not records:
            return
        data = b"".join(_line(r) for r in records)
        with self._lock:
            batch = self._open
            if batch is None:
                batch = self._open = _Batch(self._lock)
            batch.parts.append(data)
            while self._writing and not batch.done:  # ours goes in the next write
                batch.ready.wait()
            if not batch.done:  # this thread writes the batch
                self._open, self._writing = None, True
                self._lock.release()
                try:
                    self._write(b"".join(batch.parts))
                except BaseException as e:  # every append of the batch raises it
                    batch.error = e
                finally:
                    self._lock.acquire()
                    self._writing = False
                    batch.done = True
                    batch.ready.notify_all()
                    if self._open is not None:  # one of the appends that came meanwhile leads the next
                        self._open.ready.notify()
        if batch.error is not None:
            raise batch.error

    def _write(self, data: bytes) -> None:
        """Append ``data`` (whole lines) with one ``os.write`` and fsync it."""
        try:
            fd, created = self._open_for_append()
            try:
                if not created and not self._ends_with_newline(fd):
                    data = b"\n" + data
                written = os.write(fd, data)
                while written < len(data):  # only when the disk is (nearly) full
                    written += os.write(fd, data[written:])
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                self._fsync_dir()
        except OSError as e:
            raise UserError(f"cannot append to {self.what} {self.path}: {e.strerror or e}") from None

    def _open_for_append(self) -> tuple[int, bool]:
        """An ``O_APPEND`` descriptor holding a shared lock, so it is not the file a concurrent
        ``_drop_unreadable`` is replacing; and whether it was created."""
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
        while True:
            created = not self.path.exists()
            if created:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, flags, 0o666)
            fcntl.flock(fd, fcntl.LOCK_SH)
            if self._is_current(fd):
                return fd, created
            os.close(fd)  # replaced meanwhile: append to the new file

    def _is_current(self, fd: int) -> bool:
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)

    def _drop_unreadable(self) -> int:
        """Rewrite the journal without its unreadable lines once no append is under way, so the
        warning is not repeated on every read; how many there were."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not self._is_current(fd):
                return 0  # another reader dropped them already
            with open(fd, "rb", closefd=False) as f:
                lines = [line for line in f.read().split(b"\n") if line.strip()]
            kept = [line for line in lines if _record(line) is not None]
            if len(kept) < len(lines):
                try:
                    atomic.write_bytes(self.path, b"".join(line + b"\n" for line in kept))
                except OSError as e:
                    log.debug("%s: unreadable lines kept (%s)", self.path, e)
            return len(lines) - len(kept)
        finally:
            os.close(fd)

    @staticmethod
    def _ends_with_newline(fd: int) -> bool:
        size = os.fstat(fd).st_size
        return size == 0 or os.pread(fd, 1, size - 1) == b"\n"

    def _fsync_dir(self) -> None:
        try:
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass  # not supported everywhere (Windows)
        finally:
            os.close(fd)
