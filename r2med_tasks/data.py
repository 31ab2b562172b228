"""Task data: the corpus, the queries a component may see, and the relevance judgments.

Data comes from R2MED's JSONL layout (``corpus.jsonl``, ``query.jsonl``, ``qrels.jsonl``), either
a local folder or the Hugging Face hub at a pinned revision. Both go through one validator, so a
bad row gets the same one-line error naming where it is. The answer-bearing query fields
(``doc_id``, ``answer``) are dropped here: no component can ever see them.

A local corpus is large (hundreds of MB) and most warm runs need only its document ids (a cached
index keyed on the corpus checksum). So each file is hashed once per process (``file_sha256``,
memoized on the file's stat; a run hashes its later tasks' files ahead, on a background thread),
and once a corpus has been parsed and validated its ids are cached under the run's cache folder,
keyed by the file's content hash: a later load with that cache reads only the ids, the queries and
the judgments, and the corpus texts are parsed on first use, after checking that the file still
holds the content loaded.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import atomic
from .errors import UserError, reason
from .runs import id_problem, shown, unwritable

FILES = ("corpus.jsonl", "query.jsonl", "qrels.jsonl")
HUB_CONFIGS = ("corpus", "query", "qrels")


@dataclass(frozen=True)
class Query:
    """What a component sees of a query: its id, its text and what a rewriter generated for it.

    ``generated`` holds the rewriter's documents with reasoning traces already stripped;
    ``method`` says how they were made ("hyde", "query2doc", "lamer", ...), and ``reasoning``
    that they are a reasoning model's extracted answer, which the published runs combined with
    the query differently (see ``r2med_tasks.combine``).
    """

    id: str
    text: str
    generated: tuple[str, ...] = ()
    method: str = ""
    reasoning: bool = False


class Corpus:
    """Documents in source order. ``checksum`` identifies the content (the corpus file's hash, or
    the hub path at its pinned revision); caches of indexes and embeddings key on it.

    ``texts`` may stay in the corpus file until first read (``Corpus.in_file``): a component that
    needs only ids (a cached index) never pays for parsing hundreds of MB.
    """

    def __init__(self, ids: list[str], texts: list[str], checksum: str) -> None:
        self.ids, self.checksum = ids, checksum
        self._texts: list[str] | None = texts
        self._file: Path | None = None

    @classmethod
    def in_file(cls, ids: list[str], path: Path, checksum: str) -> Corpus:
        """The validated corpus file ``path`` whose content hashes to ``checksum`` and whose ids are
        ``ids``; its texts are parsed on first access."""
        corpus = cls(ids, [], checksum)
        corpus._texts, corpus._file = None, path
        return corpus

    @property
    def texts(self) -> list[str]:
        if self._texts is None:
            self._texts = _texts_in(self._file, self.checksum)
        return self._texts

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"Corpus({len(self.ids)} documents, checksum={self.checksum[:16]})"


@dataclass
class TaskData:
    corpus: Corpus
    queries: list[Query]
    qrels: dict[str, dict[str, int]]
    revision: str
    source: str
    warnings: list[str] = field(default_factory=list)
    folder: Path | None = None  # the local folder it came from (rewriters read published outputs there)


@dataclass
class Rows:
    """Parsed rows of one input, with ``where(i)`` naming row ``i``'s place for messages."""

    values: list[Any]
    name: str
    where: Callable[[int], str]


def read_jsonl(path: Path) -> tuple[Rows, str]:
    """Parse a JSONL file and return its rows and the file's sha256.

    One ``json.loads`` parses the whole file; only when that fails is it parsed line by line, to
    name the bad line. A file this process hashed already and that is unchanged since (see
    ``file_sha256``) is not hashed again.
    """
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
    """``json`` for any file: its rows and (``hashing``, else ``None``) its sha256, or the one-line
    error naming the bad line."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise _unreadable(path, e) from None
    digest = hashlib.sha256(data).hexdigest() if hashing else None
    try:
        text = data.decode("utf-8").rstrip()
    except UnicodeDecodeError as e:
        lineno = data[: e.start].count(b"\n") + 1
        raise UserError(f"{path}:{lineno}: not UTF-8 text; re-encode the file as UTF-8") from None
    del data
    try:  # JSON strings cannot hold a raw newline, so in valid JSONL every newline separates values
        values = json.loads("[" + text.replace("\n", ",") + "]") if text else []
        if len(values) == (text.count("\n") + 1 if text else 0):
            return Rows(values, str(path), lambda i: f"{path}:{i + 1}"), digest
    except ValueError:  # JSONDecodeError, or a number beyond Python's digit limit: found line by line
        pass
    lines = text.split("\n")  # blank lines, a line holding two values, or bad JSON: go line by line
    linenos = [n for n, line in enumerate(lines, 1) if line.strip()]
    values = []
    for n in linenos:
        try:
            values.append(json.loads(lines[n - 1]))
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{n}: not valid JSON ({e.msg}); fix or remove that line") from None
        except ValueError:  # Python's limit on the digits of an integer
            raise UserError(f"{path}:{n}: a number with too many digits; fix or remove that line") from None
    return Rows(values, str(path), lambda i: f"{path}:{linenos[i]}"), digest


def _read_jsonl_fast(path: Path, *, hashing: bool) -> tuple[list[Any], str | None] | None:
    """orjson (compiled), a line at a time while the file streams in, for the usual well-formed file:
    the rows and (``hashing``, else ``None``) the file's sha256, or ``None`` for anything else.

    The rows are exactly what ``_read_jsonl_json`` returns; ``None`` leaves the file
    to that path (which names a bad line): a missing file, blank lines, invalid JSON or UTF-8, NaN
    and lone surrogates (orjson rejects them), and rows holding floats or nested values (orjson
    reads integers beyond 64 bits as floats, ``json`` as integers).
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


_DIGESTS: dict[tuple, str] = {}  # file_sha256's memo: the stat key of a file version -> its sha256


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
    """The file's sha256, computed once per process for each version of the file (its stat): a
    run's data identity and its loading share one read of each file, and a file changed between
    them is hashed again. A hash started by :func:`hash_ahead` is waited for, not redone."""
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
    """Start hashing the data files of ``folders`` on a background thread, so a run's later tasks
    find their data identity ready: hashlib releases the GIL, and the hashing overlaps the work on
    earlier tasks. (A daemon thread: it never holds up the exit of a run that stops early.)"""
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


_AHEAD: dict[tuple, Future] = {}  # hash_ahead's hashes, by the stat key of the file version


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            h.update(block)  # hashlib releases the GIL: other threads run meanwhile
    return h.hexdigest()


def _field(rows: Rows, i: int, name: str, kind: type) -> Any:
    row = rows.values[i]
    if not isinstance(row, dict):
        raise UserError(f"{rows.where(i)}: expected a JSON object, got {type(row).__name__}")
    if name not in row or row[name] is None:
        raise UserError(f"{rows.where(i)}: missing field '{name}'")
    value = row[name]
    if kind is str and isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # numeric ids are ids all the same
    if kind is int:
        number = _integer(value)
        if number is None:
            raise UserError(f"{rows.where(i)}: field '{name}' must be an integer, got {shown(value, 40)}")
        return number
    if not isinstance(value, kind):
        raise UserError(f"{rows.where(i)}: field '{name}' must be a {kind.__name__}, got {type(value).__name__}")
    return value


def _column(rows: Rows, name: str, kind: type) -> list[Any]:
    """One field of every row, checked; the fast path for well-formed data, row by row otherwise."""
    try:
        values = [row[name] for row in rows.values]
        if all(type(v) is kind for v in values):
            return values
    except (KeyError, TypeError):
        pass
    return [_field(rows, i, name, kind) for i in range(len(rows.values))]


def _integer(value: Any) -> int | None:
    """An integer written as one (``2``, ``2.0``, ``"2"``); None for anything else (``1.5``, ``true``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _trec_ids(rows: Rows, ids: list[str], what: str) -> None:
    """Ids go into TREC run files, whose columns are whitespace-separated, and into pytrec_eval,
    which ends an id at NUL and crashes on a lone surrogate: refuse any a run could not be
    written, read back, fused or scored with (``runs.id_problem``)."""
    i = unwritable(ids)
    if i is None:
        return
    raise UserError(f"{rows.where(i)}: {what} id {shown(ids[i])} {id_problem(ids[i])}")


MAX_GRADE = 2**31 - 1  # pytrec_eval keeps a grade in a C int: a larger one wraps around or overflows


def _relevance(rows: Rows, scores: list[int]) -> None:
    """Relevance grades are integers from 0 to ``MAX_GRADE``, as pytrec_eval reads them."""
    if not scores or (min(scores) >= 0 and max(scores) <= MAX_GRADE):
        return
    i = next(i for i, s in enumerate(scores) if not 0 <= s <= MAX_GRADE)
    raise UserError(f"{rows.where(i)}: field 'score' is {_grade_text(scores[i])}; {GRADES}")


GRADES = f"relevance must be an integer >= 0 (and at most {MAX_GRADE})"


def _grade_text(grade: int) -> str:
    text = str(grade)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"


def _unique(rows: Rows, ids: list[str], what: str) -> None:
    if len(set(ids)) == len(ids):
        return
    first: dict[str, int] = {}
    for i, doc_id in enumerate(ids):
        if doc_id in first:
            raise UserError(f"{rows.where(i)}: duplicate {what} id {doc_id!r} (first at {rows.where(first[doc_id])})")
        first[doc_id] = i


def build_task_data(corpus_rows: Rows, query_rows: Rows, qrels_rows: Rows, *, revision: str,
                    corpus_checksum: str, source: str) -> TaskData:
    """Validate rows into TaskData."""
    corpus = Corpus(*_corpus_columns(corpus_rows, source), corpus_checksum)
    return _task_data(corpus, query_rows, qrels_rows, revision=revision, source=source)


def _corpus_columns(corpus_rows: Rows, source: str) -> tuple[list[str], list[str]]:
    """A corpus's ids and texts, validated: ids TREC-safe and unique, texts strings, at least one."""
    ids = _column(corpus_rows, "id", str)
    _trec_ids(corpus_rows, ids, "document")
    _unique(corpus_rows, ids, "document")
    texts = _column(corpus_rows, "text", str)
    if not ids:
        raise UserError(f"{source}: {corpus_rows.name} is empty; a task needs at least one document")
    if not any(map(str.strip, texts)):  # every document would tie: scores from ties, never a ranking
        raise UserError(f"{corpus_rows.name}: every document's text is empty or only whitespace; nothing to "
                        "retrieve (is it the right file, complete?)")
    return ids, texts


def _task_data(corpus: Corpus, query_rows: Rows, qrels_rows: Rows, *, revision: str, source: str) -> TaskData:
    """A validated corpus's task: its queries and judgments, validated (of the corpus, only the ids
    are read)."""
    ids = corpus.ids
    query_ids = _column(query_rows, "id", str)
    _trec_ids(query_rows, query_ids, "query")
    _unique(query_rows, query_ids, "query")
    texts = _column(query_rows, "text", str)
    if not all(map(str.strip, texts)):  # nothing to search for: it would be scored from ties
        i = next(i for i, text in enumerate(texts) if not text.strip())
        raise UserError(f"{query_rows.where(i)}: query {shown(query_ids[i])} has no text (empty or only whitespace); "
                        "write its question, or remove the row and its judgments")
    queries = [Query(qid, text) for qid, text in zip(query_ids, texts)]
    if not queries:
        raise UserError(f"{source}: {query_rows.name} is empty; a task needs at least one query")

    # Scored as the published evaluation scored (BEIR's EvaluateRetrieval over pytrec_eval with the
    # full qrels): judgments naming documents the corpus lacks are kept (they count in recall and in
    # nDCG's ideal ranking, never retrieved), queries whose judgments are all 0 are kept (scored 0),
    # and only queries without any judgment, or judgments of unknown queries, are left out.
    doc_set, query_set = set(ids), set(query_ids)
    qrels: dict[str, dict[str, int]] = {}
    unknown_q = absent = absent_relevant = 0
    columns = [_column(qrels_rows, name, kind) for name, kind in (("q_id", str), ("p_id", str), ("score", int))]
    _trec_ids(qrels_rows, columns[0], "query")
    _trec_ids(qrels_rows, columns[1], "document")
    _relevance(qrels_rows, columns[2])
    for i, (qid, pid, score) in enumerate(zip(*columns)):
        if qid not in query_set:
            unknown_q += 1
            continue
        if pid not in doc_set:
            absent += 1
            absent_relevant += score > 0
        judgments = qrels.setdefault(qid, {})
        before = judgments.setdefault(pid, score)
        if before != score:  # the same judgment twice changes nothing; two grades are an error
            first = next(j for j in range(i) if columns[0][j] == qid and columns[1][j] == pid)
            also = qrels_rows.where(first)[len(qrels_rows.name):]  # ":12" (a file's line) or " row 12" (the hub's)
            raise UserError(_conflict(qrels_rows.where(i), qid, pid, score,
                                      f"line {also[1:]}" if also.startswith(":") else also.strip(), before))

    warnings = []
    if unknown_q:
        warnings.append(f"{source}: ignored {unknown_q} {qrels_rows.name} rows naming unknown queries")
    if absent:
        warnings.append(
            f"{source}: {absent} {qrels_rows.name} rows ({absent_relevant} relevant) name documents missing from "
            "the corpus; kept, as in the published evaluation: they count in recall and nDCG but are never retrieved"
        )
    judged = [q for q in queries if q.id in qrels]
    if len(judged) < len(queries):
        warnings.append(
            f"{source}: {len(queries) - len(judged)} of {len(queries)} queries have no judgment "
            "and are not evaluated"
        )
    unjudged = sum(1 for q in judged if not any(s > 0 for s in qrels[q.id].values()))
    if unjudged and unjudged < len(judged):
        warnings.append(
            f"{source}: {unjudged} of {len(judged)} evaluated queries have no relevant document; they score 0 "
            "and count in the averages, as in the published evaluation"
        )
    if unjudged == len(judged) and unknown_q:
        raise UserError(f"{qrels_rows.name}: no judged query left to evaluate: {unknown_q} rows name unknown "
                        "queries; are the task's files from one dataset and complete?")
    if unjudged == len(judged):
        raise UserError(f"{source}: no query has a relevant document in {qrels_rows.name}; nothing to evaluate")
    if not any(s > 0 and pid in doc_set for qid in qrels for pid, s in qrels[qid].items()):
        raise UserError(f"{qrels_rows.name}: no relevant judgment names a document of the corpus ({absent} rows "
                        "name documents missing from it); are the task's files from one dataset and complete?")
    qrels = {q.id: qrels[q.id] for q in judged}
    return TaskData(corpus, judged, qrels, revision, source, warnings)


def _conflict(where: str, qid: str, pid: str, grade: int, first: str, first_grade: int) -> str:
    return (f"{where}: query {shown(qid)} judges document {shown(pid)} {grade}, but {first} judges it {first_grade}; "
            "keep one judgment per query and document")


def local_revision(folder: Path) -> str:
    """A local folder's revision, the checksum of its three files, without parsing them."""
    return _revision([file_sha256(folder / name) for name in FILES])


def _unreadable(path: Path, e: OSError) -> UserError:
    what = ("file not found" if isinstance(e, FileNotFoundError) else
            "a folder, not a file" if isinstance(e, IsADirectoryError) else f"cannot read it ({e.strerror or e})")
    return UserError(f"{path}: {what} (R2MED's layout needs the files {', '.join(FILES)} in one folder)")


def _revision(digests: list[str]) -> str:
    return "sha256-" + hashlib.sha256("".join(digests).encode()).hexdigest()[:16]


def load_local(folder: Path, *, cache_dir: Path | None = None) -> TaskData:
    """Load a folder in R2MED's layout; its revision is a checksum of the three files' content.

    With ``cache_dir``, a corpus validated before (its ids are cached under its content hash) is
    not parsed: its texts load on first access. Without, everything is parsed now.
    """
    corpus_file, ids = folder / FILES[0], None
    if cache_dir is not None:
        checksum = file_sha256(corpus_file)
        ids = _cached_ids(cache_dir, checksum)
    if ids is None:
        corpus_rows, checksum = read_jsonl(corpus_file)
    (query_rows, query_digest), (qrels_rows, qrels_digest) = (read_jsonl(folder / name) for name in FILES[1:])
    if ids is None:  # the corpus is checked first, as build_task_data checks it
        corpus = Corpus(*_corpus_columns(corpus_rows, str(folder)), checksum)
        if cache_dir is not None:
            _cache_ids(cache_dir, corpus)
    else:
        corpus = Corpus.in_file(ids, corpus_file, checksum)
    data = _task_data(corpus, query_rows, qrels_rows, revision=_revision([checksum, query_digest, qrels_digest]),
                      source=str(folder))
    data.folder = folder
    return data


IDS_FORMAT = 2  # bump with the ids file's layout or the corpus checks: a cached id list skips those checks


def _ids_file(cache_dir: Path, checksum: str) -> Path:
    return cache_dir / "corpus" / f"{checksum}-{IDS_FORMAT}.ids"


def _cache_ids(cache_dir: Path, corpus: Corpus) -> None:
    """Keep a validated corpus's ids for the next load of the same content: a line of JSON
    (``count``, ``sha256`` of the rest, so a truncated or damaged file is noticed and rewritten),
    then an id a line (ids hold no whitespace). A cache that cannot be written costs the next run a
    parse, nothing else."""
    body = "".join(f"{doc_id}\n" for doc_id in corpus.ids).encode("utf-8", "surrogatepass")
    header = json.dumps({"count": len(corpus.ids), "sha256": hashlib.sha256(body).hexdigest()}).encode()
    try:
        atomic.write_bytes(_ids_file(cache_dir, corpus.checksum), header + b"\n" + body)
    except OSError:
        pass


def _cached_ids(cache_dir: Path, checksum: str) -> list[str] | None:
    """The ids ``_cache_ids`` kept for the corpus content ``checksum``; None when there are none, or
    the file is not whole."""
    try:
        header, _, body = _ids_file(cache_dir, checksum).read_bytes().partition(b"\n")
        ids = body.decode("utf-8", "surrogatepass").split("\n")[:-1]
        if json.loads(header) == {"count": len(ids), "sha256": hashlib.sha256(body).hexdigest()}:
            return ids
    except (OSError, ValueError):
        pass
    return None


def _texts_in(path: Path, checksum: str) -> list[str]:
    """The texts of the corpus file ``path``, loaded earlier as the content ``checksum``, once the
    file is seen to hold that content still."""
    try:
        rows, digest = read_jsonl(path)
    except UserError:
        digest = None
    if digest != checksum:
        raise UserError(f"{path}: changed during the run (it no longer holds the corpus loaded at the start); "
                        "rerun once the file is complete")
    return _column(rows, "text", str)


def load_hub(path: str, revision: str) -> TaskData:
    """Load a dataset repo's three configs at a pinned revision, as mteb's R2MED loader does."""
    label = f"{path}@{revision[:7]}"
    try:
        import datasets

        with _quiet_hub():
            tables = {
                config: datasets.load_dataset(path, name=config, split=config, revision=revision)
                for config in HUB_CONFIGS
            }
    except Exception as e:  # the hub client raises many types for "unreachable" or "missing"
        raise UserError(
            f"cannot load {label} from the Hugging Face hub ({reason(e, 160)}); "
            "without hub access pass --data-dir DIR holding R2MED's files, or run --tasks sample"
        ) from None

    def rows(config: str) -> Rows:
        return Rows(tables[config].to_list(), f"{label} config '{config}'",
                    lambda i: f"{label} config '{config}' row {i}")

    return build_task_data(
        *(rows(c) for c in HUB_CONFIGS),
        revision=revision,
        corpus_checksum=hashlib.sha256(f"{path}@{revision}".encode()).hexdigest(),
        source=label,
    )


@contextmanager
def _quiet_hub():
    """No hub client warnings (a line per connection retry) while loading: a failure ends in one
    error line that says what to do."""
    import logging

    loggers = [logging.getLogger(name) for name in ("huggingface_hub", "datasets")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Judgments from R2MED's qrels.jsonl or a TREC qrels file (``qid 0 docid relevance``), all of
    them: as everywhere else, a query whose judgments are all 0 is scored (0), as published.

    Checked as the task data's judgments are: ids as ``runs.id_problem`` says, grades integers from 0
    to ``MAX_GRADE``, one grade per query and document (the same judgment twice is kept once); a
    problem is a one-line ``UserError`` naming ``file:line``."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise UserError(f"{path}: {'no such file' if isinstance(e, FileNotFoundError) else e.strerror or e}; "
                        "--qrels takes a qrels.jsonl or TREC qrels file") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text (at byte {e.start}); re-encode the file as UTF-8") from None
    table: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            if line.lstrip().startswith("{"):
                row = json.loads(line)
                qid, pid, rel = _qrels_id(row["q_id"]), _qrels_id(row["p_id"]), _integer(row["score"])
            else:
                qid, _, pid, rel = line.split()[:4]
                rel = _integer(rel)
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{path}:{n}: expected a qrels.jsonl row or 'qid 0 docid relevance'") from None
        for what, value in (("query", qid), ("document", pid)):
            if id_problem(value):
                raise UserError(f"{path}:{n}: {what} id {shown(value)} {id_problem(value)}")
        if rel is None or not 0 <= rel <= MAX_GRADE:
            raise UserError(f"{path}:{n}: {GRADES}")
        before = table.setdefault(qid, {}).setdefault(pid, rel)
        first = first_line.setdefault((qid, pid), n)
        if before != rel:
            raise UserError(_conflict(f"{path}:{n}", qid, pid, rel, f"line {first}", before))
    return table


def _qrels_id(value: Any) -> str:
    """An id of a qrels.jsonl row: text, or an integer written as one (as the task data takes them)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    raise TypeError(value)
