"""Runs, the one shape of retrieval output, and TREC run files.

``Run`` is ``query id -> {document id: score}``: what retrievers and rerankers return, what is
fused, scored and stored. A dict keeps insertion order, and that order is the rank order: a
component's own order breaks its score ties, :func:`rank` puts each query best first, and
:func:`read_trec` and :func:`write_trec` keep the order of the rank column.

The one place that reads or writes TREC files (``qid Q0 docid rank score tag``, one document per
line), for the runner, the results folders, fusion, ``r2med fuse`` and the ``run-file`` retriever.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from . import atomic

Run = dict[str, dict[str, float]]


def rank(run: Run, k: int) -> Run:
    """Each query's ``k`` best documents, best first; ties keep the order the component gave."""
    return {qid: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:k]) for qid, docs in run.items()}


def read_trec(path: str | Path) -> Run:
    """Read a TREC run, each query ordered by its rank column.

    Blank lines are skipped and columns may be separated by any whitespace. A malformed line
    (not 6 columns, a rank that is not an integer, a score that is not a finite number), a rank given
    twice in a query, a document listed twice in a query, a file that is not UTF-8 or holds no line
    raises ``ValueError`` in one line naming ``file:line`` or the file."""
    path = Path(path)
    rows: dict[str, list[tuple[int, str, float, int]]] = {}
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); a TREC run file is text") from None
    if not any(line.strip() for line in lines):
        raise ValueError(f"{path}: empty; a TREC run file has a line 'qid Q0 docid rank score tag' per document")
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        cols = line.split()
        where = f"{path}:{lineno}"
        if len(cols) != 6:
            raise ValueError(f"{where}: expected 6 columns 'qid Q0 docid rank score tag', got {len(cols)}")
        qid, _, doc_id, rank_s, score_s, _ = cols
        try:
            position = int(rank_s)
        except ValueError:
            raise ValueError(f"{where}: rank {rank_s!r} is not an integer") from None
        try:
            score = float(score_s)
        except ValueError:
            raise ValueError(f"{where}: score {score_s!r} is not a number") from None
        if not math.isfinite(score):
            raise ValueError(f"{where}: score {score_s!r} is not a finite number")
        rows.setdefault(qid, []).append((position, doc_id, score, lineno))
    run: Run = {}
    for qid, entries in rows.items():
        entries.sort(key=lambda e: e[0])
        for (r0, _, _, l0), (r1, _, _, l1) in zip(entries, entries[1:]):
            if r0 == r1:
                raise ValueError(f"{path}:{max(l0, l1)}: query {qid!r} has rank {r1} twice (also line {min(l0, l1)})")
        docs_seen: dict[str, int] = {}
        for _, d, _, ln in sorted(entries, key=lambda e: e[3]):
            if d in docs_seen:
                raise ValueError(f"{path}:{ln}: query {qid!r} lists document {d!r} twice (also line {docs_seen[d]})")
            docs_seen[d] = ln
        run[qid] = {d: s for _, d, s, _ in entries}
    return run


def unwritable(ids: list[str]) -> int | None:
    """Position of the first id a TREC file cannot hold (empty, or holding whitespace, which
    separates its columns), or ``None``; one C-level scan for the usual all-good list."""
    if all(ids) and not _WHITESPACE.search("".join(ids)):
        return None
    return next(i for i, x in enumerate(ids) if not x or _WHITESPACE.search(x))


def write_trec(path: str | Path, run: Run, tag: str) -> None:
    """Write ``run`` atomically as a TREC run: ranks from 1 in each query's order, scores as
    ``repr(float)`` (full precision, so reading the file back gives the same floats)."""
    for kind, values in (("tag", [tag]), ("query id", list(run)),
                         *(("document id", list(docs)) for docs in run.values())):
        bad = unwritable(values)
        if bad is not None:
            raise ValueError(f"{kind} {values[bad]!r} is empty or contains whitespace; it cannot go in a TREC file")
    lines = [f"{qid} Q0 {doc_id} {position} {float(score)!r} {tag}"
             for qid, docs in run.items() for position, (doc_id, score) in enumerate(docs.items(), 1)]
    atomic.write_lines(Path(path), lines)


_WHITESPACE = re.compile(r"\s")
