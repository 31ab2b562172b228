"""The append-only journal's group commit: appends from concurrent threads share one write and one
fsync, and each returns only once an fsync covering its lines is done."""

from __future__ import annotations

import json
import os
import stat
import threading
import time

import pytest

from r2med_tasks.files import journal as journal_module
from r2med_tasks.errors import UserError
from r2med_tasks.files.journal import Journal

from conftest import wait_until


@pytest.fixture
def fsyncs(monkeypatch):
    """Each fsync of a journal file: the file's size when it was done (slowed, as a busy disk's)."""
    done: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        time.sleep(0.02)
        real(fd)
        if stat.S_ISREG(os.fstat(fd).st_mode):  # not the folder's (fsynced once, when the file is made)
            done.append(os.fstat(fd).st_size)

    monkeypatch.setattr(journal_module.os, "fsync", fsync)
    return done


def test_concurrent_appends_share_fsyncs_and_return_once_durable(tmp_path, fsyncs):
    path = tmp_path / "j.jsonl"
    journal = Journal(path, "a journal")
    durable_when_returned: list[bool] = []

    def append(n: int) -> None:
        for i in range(5):
            journal.append([{"writer": n, "i": i, "text": "x" * (50 + n)}])
            data = path.read_bytes()
            end = data.index(b"\n", data.index(f'"writer": {n}, "i": {i},'.encode())) + 1  # its line's end
            durable_when_returned.append(any(size >= end for size in list(fsyncs)))  # an fsync covered it

    threads = [threading.Thread(target=append, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records, skipped, _ = journal.read()
    assert skipped == 0
    assert sorted((r["writer"], r["i"]) for r in records) == [(n, i) for n in range(16) for i in range(5)]
    assert len(durable_when_returned) == 80 and all(durable_when_returned)
    assert len(fsyncs) < 40  # 80 appends; one fsync each would be 80 (about 6 to 20 here)
    for n in range(16):  # each writer's lines in its order
        assert [r["i"] for r in records if r["writer"] == n] == list(range(5))


def test_one_append_alone_is_written_and_fsynced_at_once(tmp_path, fsyncs):
    path = tmp_path / "j.jsonl"
    Journal(path, "a journal").append([{"a": 1}, {"b": 2}])
    assert fsyncs == [path.stat().st_size] and [json.loads(line) for line in path.read_text().splitlines()] == \
        [{"a": 1}, {"b": 2}]


def test_a_failed_write_fails_every_append_it_held(tmp_path, monkeypatch):
    path = tmp_path / "j.jsonl"
    journal = Journal(path, "a journal")
    journal.append([{"first": True}])
    real, calls = os.write, []
    entered, release = threading.Event(), threading.Event()

    def write(fd: int, data: bytes) -> int:
        calls.append(data)
        if len(calls) == 1:  # the first write holds the others back until they have queued
            entered.set()
            release.wait(5)
            return real(fd, data)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal_module.os, "write", write)
    errors: list[str] = []

    def append(n: int) -> None:
        try:
            journal.append([{"n": n}])
        except UserError as e:
            errors.append(str(e))

    first = threading.Thread(target=append, args=(0,))
    first.start()
    entered.wait(5)
    others = [threading.Thread(target=append, args=(n,)) for n in range(1, 5)]
    for t in others:
        t.start()
    wait_until(lambda: len(getattr(journal._open, "parts", ())) == 4)  # all four queued behind the first write
    release.set()
    for t in [first, *others]:
        t.join(5)
    assert len(calls) == 2  # the four went out together, and failed together
    assert len(errors) == 4 and all("No space left on device" in e and str(path) in e for e in errors)
    monkeypatch.setattr(journal_module.os, "write", real)
    journal.append([{"after": True}])  # the journal still works
    assert [r for r in journal.read()[0]] == [{"first": True}, {"n": 0}, {"after": True}]
