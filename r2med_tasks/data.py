"""Task data: the corpus, the queries a component may see, and the relevance judgments.

Data comes from R2MED's JSONL layout (``corpus.jsonl``, ``query.jsonl``, ``qrels.jsonl``), either
a local folder or the Hugging Face hub at a pinned revision. Both go through one validator, so a
bad row gets the same one-line error naming where it is. The answer-bearing query fields
(``doc_id``, ``answer``) are dropped here: no component can ever see them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .errors import UserError

FILES = ("corpus.jsonl", "query.jsonl", "qrels.jsonl")
HUB_CONFIGS = ("corpus", "query", "qrels")

Row = tuple[str, Any]  # (where the row is, for messages; the parsed row)


@dataclass(frozen=True)
class Query:
    """What a component sees of a query: its id, its text and documents a rewriter generated."""

    id: str
    text: str
    generated: tuple[str, ...] = ()


@dataclass
class Corpus:
    ids: list[str]
    texts: list[str]

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def checksum(self) -> str:
        """Content hash of ids and texts; caches of indexes and embeddings key on it."""
        h = hashlib.sha256()
        for doc_id, text in zip(self.ids, self.texts):
            h.update(doc_id.encode())
            h.update(b"\x1f")
            h.update(text.encode())
            h.update(b"\x1e")
        return h.hexdigest()


@dataclass
class TaskData:
    corpus: Corpus
    queries: list[Query]
    qrels: dict[str, dict[str, int]]
    revision: str
    source: str
    warnings: list[str] = field(default_factory=list)


def read_jsonl(path: Path) -> Iterator[Row]:
    try:
        f = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(
            f"{path}: file not found (R2MED's layout needs {', '.join(FILES)} in one folder)"
        ) from None
    with f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{where}: not valid JSON ({e.msg}); fix or remove that line") from None
            except UnicodeDecodeError:
                raise UserError(f"{where}: not UTF-8 text; re-encode the file as UTF-8") from None


def _field(where: str, row: Any, name: str, kind: type) -> Any:
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if name not in row or row[name] is None:
        raise UserError(f"{where}: missing field '{name}'")
    value = row[name]
    if kind is str and isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # numeric ids are ids all the same
    if kind is int:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise UserError(f"{where}: field '{name}' must be an integer, got {value!r}") from None
    if not isinstance(value, kind):
        raise UserError(f"{where}: field '{name}' must be a {kind.__name__}, got {type(value).__name__}")
    return value


def _unique_ids(rows: Iterable[Row], what: str) -> Iterator[tuple[str, str, dict]]:
    seen: dict[str, str] = {}
    for where, row in rows:
        doc_id = _field(where, row, "id", str)
        if doc_id in seen:
            raise UserError(f"{where}: duplicate {what} id {doc_id!r} (first at {seen[doc_id]})")
        seen[doc_id] = where
        yield where, doc_id, row


def build_task_data(
    corpus_rows: Iterable[Row],
    query_rows: Iterable[Row],
    qrels_rows: Iterable[Row],
    *,
    revision: str,
    source: str,
    names: tuple[str, str, str] = FILES,
) -> TaskData:
    """Validate rows into TaskData; ``names`` label the three inputs in messages."""
    ids, texts = [], []
    for where, doc_id, row in _unique_ids(corpus_rows, "document"):
        ids.append(doc_id)
        texts.append(_field(where, row, "text", str))
    if not ids:
        raise UserError(f"{source}: {names[0]} is empty; a task needs at least one document")

    queries = [Query(qid, _field(where, row, "text", str)) for where, qid, row in _unique_ids(query_rows, "query")]
    if not queries:
        raise UserError(f"{source}: {names[1]} is empty; a task needs at least one query")

    doc_set, query_set = set(ids), {q.id for q in queries}
    qrels: dict[str, dict[str, int]] = {}
    unknown_q = unknown_d = 0
    for where, row in qrels_rows:
        qid = _field(where, row, "q_id", str)
        pid = _field(where, row, "p_id", str)
        score = _field(where, row, "score", int)
        if qid not in query_set:
            unknown_q += 1
        elif pid not in doc_set:
            unknown_d += 1
        else:
            qrels.setdefault(qid, {})[pid] = score

    warnings = []
    if unknown_q or unknown_d:
        warnings.append(
            f"{source}: ignored {unknown_q + unknown_d} {names[2]} rows naming "
            f"{unknown_q} unknown queries and {unknown_d} unknown documents"
        )
    judged = [q for q in queries if any(s > 0 for s in qrels.get(q.id, {}).values())]
    if len(judged) < len(queries):
        warnings.append(
            f"{source}: {len(queries) - len(judged)} of {len(queries)} queries have no relevant "
            "document and are not evaluated"
        )
    if not judged:
        raise UserError(f"{source}: no query has a relevant document in {names[2]}; nothing to evaluate")
    qrels = {q.id: qrels[q.id] for q in judged}
    return TaskData(Corpus(ids, texts), judged, qrels, revision, source, warnings)


def local_checksum(folder: Path) -> str:
    h = hashlib.sha256()
    for name in FILES:
        path = folder / name
        if path.exists():
            h.update(path.read_bytes())
    return "sha256-" + h.hexdigest()[:16]


def load_local(folder: Path) -> TaskData:
    """Load a folder in R2MED's layout; its revision is a checksum of the files' content."""
    return build_task_data(
        *(read_jsonl(folder / name) for name in FILES),
        revision=local_checksum(folder),
        source=str(folder),
        names=tuple(str(folder / n) for n in FILES),
    )


def load_hub(path: str, revision: str) -> TaskData:
    """Load a dataset repo's three configs at a pinned revision, as mteb's R2MED loader does."""
    label = f"{path}@{revision[:7]}"
    try:
        import datasets

        tables = {
            config: datasets.load_dataset(path, name=config, split=config, revision=revision)
            for config in HUB_CONFIGS
        }
    except Exception as e:  # the hub client raises many types for "unreachable" or "missing"
        reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise UserError(
            f"cannot load {label} from the Hugging Face hub ({type(e).__name__}: {reason[:160]}); "
            "without hub access pass --data-dir DIR holding R2MED's files, or run --tasks sample"
        ) from None

    def rows(config: str) -> Iterator[Row]:
        for i, row in enumerate(tables[config]):
            yield f"{label} config '{config}' row {i}", row

    return build_task_data(
        *(rows(c) for c in HUB_CONFIGS),
        revision=revision,
        source=label,
        names=tuple(f"{label} config '{c}'" for c in HUB_CONFIGS),
    )
