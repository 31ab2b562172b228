"""A task folder's files in R2MED's JSONL layout, parsed and hashed. A local corpus is hundreds of
MB and most warm runs need only its checksum and ids, so each file is hashed once per process, in
the same read that parses it, or ahead on a background thread.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError

FILES = ("corpus.jsonl", "query.jsonl", "qrels.jsonl")
GENERATED_FILE = "query_with_hydoc.jsonl"  # <task folder>/<method>/<llm>/, as R2MED publishes them


@dataclass
class Rows:
    """Parsed rows of one input, with ``where(i)`` naming row ``i``'s place for messages."""

    values: list[Any]
    name: str
    where: Callable[[int], str]


def read_jsonl(path: Path) -> tuple[Rows, str]:
    """A JSONL file's rows and sha256. The whole file is parsed at once; only when that fails is it
    parsed line by line, to name the bad line."""
    key = _stat_key(path)
    known = _DIGESTS.get(key)
    fast = _read_jsonl_fast(path, hashing=known is None)
    if fast is not None:
        rows, digest = Rows(fast[0], str(path), lambda i: f"{path}:{i + 1}"), fast[1]
    else:
        rows, digest = _read_jsonl_json(path, hashing=known is None)
    if digest is None:
        if _stat_key(path) != key:  # written to while being read: read what it holds now
            return read_jsonl(path)
        digest = known
    _remember(path, key, digest)
    return rows, digest


def _read_jsonl_json(path: Path, *, hashing: bool) -> tuple[Rows, str | None]:
    """``json`` for any file: its rows and sha256, or the one-line error naming the bad line."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise _unreadable(path, e) from None
    digest = hashlib.sha256(data).hexdigest() if hashing else None
    return parse_jsonl(data, str(path)), digest


def parse_jsonl(data: bytes, name: str) -> Rows:
    """The rows of JSONL bytes read from ``name``, or the one-line error naming the bad line."""
    try:
        text = data.decode("utf-8").rstrip()
    except UnicodeDecodeError as e:
        lineno = data[: e.start].count(b"\n") + 1
        raise UserError(f"{name}:{lineno}: not UTF-8 text; re-encode the file as UTF-8") from None
    del data
    try:  # JSON strings cannot hold a raw newline, so in valid JSONL every newline separates values
        values = json.loads("[" + text.replace("\n", ",") + "]") if text else []
        if len(values) == (text.count("\n") + 1 if text else 0):
            return Rows(values, name, lambda i: f"{name}:{i + 1}")
    except ValueError:  # JSONDecodeError, or a number beyond Python's digit limit: found line by line
        pass
    lines = text.split("\n")
    linenos = [n for n, line in enumerate(lines, 1) if line.strip()]
    values = []
    for n in linenos:
        try:
            values.append(json.loads(lines[n - 1]))
        except json.JSONDecodeError as e:
            raise UserError(f"{name}:{n}: not valid JSON ({e.msg}); fix or remove that line") from None
        except ValueError:  # Python's limit on the digits of an integer
            raise UserError(f"{name}:{n}: a number with too many digits; fix or remove that line") from None
    return Rows(values, name, lambda i: f"{name}:{linenos[i]}")


def _read_jsonl_fast(path: Path, *, hashing: bool) -> tuple[list[Any], str | None] | None:
    """orjson, a line at a time while the file streams in, for the usual well-formed file; ``None``
    for anything else, where the rows could differ from ``json``'s (orjson reads integers beyond 64
    bits as floats) or a bad line must be named.
    """
    try:
        import orjson
    except ImportError:
        return None
    digest, values, tail, blank = hashlib.sha256() if hashing else None, [], b"", False
    loads, append = orjson.loads, values.append
    try:
        with path.open("rb") as f:
            while block := f.read(1 << 24):
                if digest is not None:
                    digest.update(block)
                lines = (tail + block).split(b"\n")
                tail = lines.pop()
                for line in lines:
                    if blank or not line.strip():  # only trailing blank lines are allowed
                        blank = True
                        if line.strip():
                            return None
                        continue
                    append(loads(line))
        if tail.strip():
            if blank:
                return None
            append(loads(tail))
    except (OSError, orjson.JSONDecodeError):
        return None
    if any(type(row) is not dict or not all(type(v) in (str, int, bool) or v is None for v in row.values())
           for row in values):
        return None
    return values, digest.hexdigest() if digest is not None else None


_DIGESTS: dict[tuple, str] = {}  # stat key of a file version -> its sha256


def _stat_key(path: Path) -> tuple | None:
    """What changes whenever a file's content may have: its place, size, times and inode."""
    try:
        st = path.stat()
        return str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns
    except OSError:
        return None


def _remember(path: Path, key: tuple | None, digest: str) -> None:
    """Memoize ``digest`` as the hash of the file version ``key``, unless the file changed meanwhile."""
    if key is not None and _stat_key(path) == key:
        _DIGESTS[key] = digest


def file_sha256(path: Path) -> str:
    """The file's sha256, computed once per process for each version of the file (its stat): a run's
    data identity and its loading share one read."""
    key = _stat_key(path)
    if key in _DIGESTS:
        return _DIGESTS[key]
    ahead = _AHEAD.pop(key, None)
    if ahead is not None and ahead.exception() is None:
        digest = ahead.result()
    else:  # not hashed ahead, or it failed there: here its error names the file
        try:
            digest = _sha256_of(path)
        except OSError as e:
            raise _unreadable(path, e) from None
    _remember(path, key, digest)
    return digest


def hash_ahead(folders: Iterable[Path]) -> None:
    """Hash the data files of ``folders`` on a daemon thread, so a run's later tasks find their data
    identity ready (hashlib releases the GIL)."""
    todo = []
    for path in (folder / name for folder in folders for name in FILES):
        key = _stat_key(path)
        if key is not None and key not in _DIGESTS and key not in _AHEAD:
            _AHEAD[key] = Future()
            todo.append((path, _AHEAD[key]))

    def hash_all() -> None:
        for path, future in todo:
            try:
                future.set_result(_sha256_of(path))
            except BaseException as e:  # file_sha256 hashes it again and reports it
                future.set_exception(e)

    if todo:
        threading.Thread(target=hash_all, name="r2med-hash-ahead", daemon=True).start()


_AHEAD: dict[tuple, Future] = {}


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def _unreadable(path: Path, e: OSError) -> UserError:
    what = ("file not found" if isinstance(e, FileNotFoundError) else
            "a folder, not a file" if isinstance(e, IsADirectoryError) else f"cannot read it ({e.strerror or e})")
    return UserError(f"{path}: {what} (R2MED's layout needs the files {', '.join(FILES)} in one folder)")


def generated_rows(rows: Rows | list, queries: Iterable[Any], *, task: str, own: bool = False,
                   name: str = "") -> dict[str, dict]:
    """The row of each query of ``task`` in generations as R2MED publishes them (``parse_jsonl``'s rows
    of a ``query_with_hydoc.jsonl``, or a list of a hub split's rows, from ``name``), checked once for
    every reader: a query id given twice with other content is refused, identical repeats count
    once, a query without a generated document (``hy_doc``) is refused. Rows not the task's ``own``
    (a local file, which may be any task's) must also be the task's queries only, each with the
    task's query text where they give one (``text``)."""
    if not isinstance(rows, Rows):
        rows = Rows(list(rows), name, lambda i: f"{name} row {i + 1}")
    queries = list(queries)
    texts = {q.id: " ".join(q.text.split()) for q in queries}
    table: dict[str, dict] = {}
    first: dict[str, int] = {}
    for i, row in enumerate(rows.values):
        if not isinstance(row, dict) or row.get("id") is None:
            raise UserError(f"{rows.where(i)}: not a generation (an object with id and hy_doc); fix or remove "
                            "that line")
        qid = str(row["id"])
        if qid in table:
            if row != table[qid]:
                raise UserError(f"{rows.where(i)}: query {qid!r} again, with other content than "
                                f"{rows.where(first[qid])}; keep one line per query")
            continue
        if not own and qid not in texts:
            raise UserError(f"{rows.where(i)}: query {qid!r} is not a query of {task}; is the file another task's? "
                            f"Give the generations written for {task} (its queries only)")
        text = row.get("text")
        if not own and isinstance(text, str) and " ".join(text.split()) != texts[qid]:
            raise UserError(f"{rows.where(i)}: query {qid!r} has another text than {task}'s; the file was written "
                            f"for another task or another version of its data: give the generations of this data")
        table[qid], first[qid] = row, i
    missing = [q.id for q in queries if not isinstance(table.get(q.id, {}).get("hy_doc"), str)]
    if missing:
        raise UserError(f"{rows.name}: no generated document (field hy_doc) for {len(missing)} of {len(queries)} "
                        f"queries (e.g. {missing[0]!r})")
    return table
