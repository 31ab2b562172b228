"""An append-only JSONL journal of finished work (LLM answers, reranker scores), written as the work
finishes, so a killed run loses at most the records being written and a rerun redoes nothing else.

Each ``append`` writes its lines with one ``os.write`` on an ``O_APPEND`` descriptor and fsyncs, so
appends from several threads or processes never mix. A line that does not parse as a JSON object
(the last one, cut by a kill) is skipped on reading; an append first ends such a cut line (leaving
a blank line at worst, when another writer was mid-line), so later lines stay readable.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from .errors import UserError


class Journal:
    def __init__(self, path: str | os.PathLike, what: str) -> None:
        """``what`` names the journal in messages ("the generation cache")."""
        self.path, self.what = Path(path), what
        self._lock = threading.Lock()

    def read(self) -> tuple[list[dict[str, Any]], int, bool]:
        """The records, in file order; how many lines did not parse; whether the last one was cut."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return [], 0, False
        except OSError as e:
            raise UserError(f"cannot read {self.what} {self.path}: {e.strerror or e}") from None
        records, skipped, cut = [], 0, False
        lines = raw.split(b"\n")
        last = lines.pop()  # b"" when the file ends with a newline; else a line cut by a kill (or complete)
        for line, is_last in [(line, False) for line in lines] + [(last, True)]:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, UnicodeDecodeError):
                record = None
            if isinstance(record, dict):
                records.append(record)
            else:
                skipped += 1
                cut = cut or is_last
        return records, skipped, cut

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append ``records`` as JSON lines and fsync them before returning."""
        if not records:
            return
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        with self._lock:
            created = not self.path.exists()
            if created:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            elif not self._ends_with_newline():
                data = b"\n" + data
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
            try:
                fd = os.open(self.path, flags, 0o644)
                try:
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

    def _ends_with_newline(self) -> bool:
        try:
            with open(self.path, "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() == 0:
                    return True
                f.seek(-1, os.SEEK_END)
                return f.read(1) == b"\n"
        except OSError:
            return True

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
