"""Rows into task data, checked, so a bad row of a local folder or of the hub gets the same
one-line error naming where it is. The answer-bearing query fields (``doc_id``, ``answer``) are
dropped here: no component can ever see them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .datafiles import Rows
from ..errors import UserError
from ..scoring.runs import id_problem, shown, unwritable
from .taskdata import Corpus, Query, TaskData


def _field(rows: Rows, i: int, name: str, kind: type) -> Any:
    row = rows.values[i]
    if not isinstance(row, dict):
        raise UserError(f"{rows.where(i)}: expected a JSON object, got {type(row).__name__}")
    if name not in row or row[name] is None:
        raise UserError(f"{rows.where(i)}: missing field '{name}'")
    value = row[name]
    if kind is str and isinstance(value, int) and not isinstance(value, bool) and name in ID_FIELDS:
        return str(value)  # numeric ids are ids all the same; a number is no text
    if kind is int:
        number = _integer(value)
        if number is None:
            raise UserError(f"{rows.where(i)}: field '{name}' must be an integer, got {shown(value, 40)}")
        return number
    if not isinstance(value, kind):
        raise UserError(f"{rows.where(i)}: field '{name}' must be a {'string' if kind is str else kind.__name__}, "
                        f"got {type(value).__name__} {shown(value, 40)}")
    return value


ID_FIELDS = ("id", "q_id", "p_id")  # fields whose numbers are read as ids ("text": 123 is refused)


def column(rows: Rows, name: str, kind: type) -> list[Any]:
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
    """Refuse any id a run could not be written, read back, fused or scored with."""
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
    corpus = Corpus(*corpus_columns(corpus_rows, source), corpus_checksum)
    return task_data(corpus, query_rows, qrels_rows, revision=revision, source=source)


def corpus_columns(corpus_rows: Rows, source: str) -> tuple[list[str], list[str]]:
    """A corpus's ids and texts, validated: ids TREC-safe and unique, texts strings, at least one."""
    ids = column(corpus_rows, "id", str)
    _trec_ids(corpus_rows, ids, "document")
    _unique(corpus_rows, ids, "document")
    texts = column(corpus_rows, "text", str)
    if not ids:
        raise UserError(f"{source}: {corpus_rows.name} is empty; a task needs at least one document")
    if not any(map(str.strip, texts)):  # every document would tie: scores from ties, never a ranking
        raise UserError(f"{corpus_rows.name}: every document's text is empty or only whitespace; nothing to "
                        "retrieve (is it the right file, complete?)")
    return ids, texts


def task_data(corpus: Corpus, query_rows: Rows, qrels_rows: Rows, *, revision: str, source: str) -> TaskData:
    """A validated corpus's task: its queries and judgments, validated (of the corpus, only the ids
    are read)."""
    ids = corpus.ids
    query_ids = column(query_rows, "id", str)
    _trec_ids(query_rows, query_ids, "query")
    _unique(query_rows, query_ids, "query")
    texts = column(query_rows, "text", str)
    if not all(map(str.strip, texts)):  # nothing to search for: it would be scored from ties
        i = next(i for i, text in enumerate(texts) if not text.strip())
        raise UserError(f"{query_rows.where(i)}: query {shown(query_ids[i])} has no text (empty or only whitespace); "
                        "write its question, or remove the row and its judgments")
    queries = [Query(qid, text) for qid, text in zip(query_ids, texts)]
    if not queries:
        raise UserError(f"{source}: {query_rows.name} is empty; a task needs at least one query")

    # As the published evaluation scored (BEIR's, full qrels): judgments of documents the corpus
    # lacks are kept (they count in recall and nDCG's ideal ranking), all-0 queries are kept
    # (scored 0); only unjudged queries and judgments of unknown queries are left out.
    doc_set, query_set = set(ids), set(query_ids)
    qrels: dict[str, dict[str, int]] = {}
    unknown_q = absent = absent_relevant = 0
    columns = [column(qrels_rows, name, kind) for name, kind in (("q_id", str), ("p_id", str), ("score", int))]
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
    written_as_text = [i for i, row in enumerate(qrels_rows.values) if isinstance(row, dict)
                       and isinstance(row.get("score"), str)]
    if written_as_text:
        warnings.append(f"{qrels_rows.where(written_as_text[0])}: {len(written_as_text)} grade(s) written as text "
                        f"({shown(qrels_rows.values[written_as_text[0]]['score'], 20)}); read as the integers they "
                        "spell")
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


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Judgments from R2MED's qrels.jsonl or a TREC qrels file (``qid 0 docid relevance``), checked
    as the task data's judgments are."""
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
