"""Runs, the one shape of retrieval output, and TREC run files (the one place that reads or writes
them). A ``Run``'s dict order is its rank order: a component's own order breaks its score ties.
"""

from __future__ import annotations

import errno
import math
import re
from pathlib import Path

from ..files import atomic

DEFAULT_TOP_K = 100  # documents a run keeps per query unless told

Run = dict[str, dict[str, float]]


def rank(run: Run, k: int) -> Run:
    """Each query's ``k`` best documents, best first; ties keep the order the component gave."""
    return {qid: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:k]) for qid, docs in run.items()}


MAX_RUN_BYTES = 2 * 1024**3  # a run of 1,000 documents for 10,000 queries is about 600 MB; R2MED's, 1 MB


def read_trec(path: str | Path, data: bytes | None = None) -> Run:
    """Read a TREC run, each query ordered by its rank column; ``data``: the file's bytes when they
    were read already (a component's ``context.input``). A malformed line, a rank or document given
    twice in a query, or a file that is not UTF-8 text raises ``ValueError`` in one line naming
    ``file:line``."""
    from ..files.bounded import MissingFile, UnreadableFile, read_text, utf8

    path = Path(path)
    rows: dict[str, list[tuple[int, str, float, int]]] = {}
    try:
        text = read_text(path, MAX_RUN_BYTES) if data is None else utf8(data)
    except MissingFile:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path)) from None
    except UnreadableFile as e:
        raise ValueError(f"{path}: {e}; a TREC run file is a text file") from None
    lines = text.split("\n")
    if not any(line.strip() for line in lines):
        raise ValueError(f"{path}: empty; a TREC run file has a line 'qid Q0 docid rank score tag' per document")
    checking = _BAD_CHAR.search(text) is not None  # then lines are checked one by one
    del text
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        cols = line.split()
        where = f"{path}:{lineno}"
        if len(cols) != 6:
            raise ValueError(f"{where}: expected 6 columns 'qid Q0 docid rank score tag', got {len(cols)}")
        qid, _, doc_id, rank_s, score_s, _ = cols
        if checking and _BAD_CHAR.search(line):
            for kind, value in (("query id", qid), ("document id", doc_id)):
                if id_problem(value):
                    raise ValueError(f"{where}: {kind} {shown(value)} {id_problem(value)}")
            bad = _BAD_CHAR.search(line).group()
            raise ValueError(f"{where}: holds the control character U+{ord(bad):04X}; a TREC run file is plain text")
        try:
            position = int(rank_s)
        except ValueError:
            raise ValueError(f"{where}: rank {shown(rank_s, 30)} is not an integer") from None
        try:
            score = float(score_s)
        except ValueError:
            raise ValueError(f"{where}: score {shown(score_s, 30)} is not a number") from None
        if not math.isfinite(score):
            raise ValueError(f"{where}: score {shown(score_s, 30)} is not a finite number")
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
    """Position of the first id that cannot be an id, or ``None``; one C-level scan for the usual
    all-good list. The one check of every id that enters."""
    if all(ids) and not _BAD_ID.search("".join(ids)):
        return None
    return next(i for i, x in enumerate(ids) if not x or _BAD_ID.search(x))


def id_problem(value: str) -> str | None:
    """What is wrong with ``value`` as a query or document id, and what to do, or ``None``. NUL ends
    an id inside pytrec_eval ("d1\\0x" would be scored as "d1") and a lone surrogate crashes it;
    other code points (format characters, private use) survive UTF-8, TREC files and pytrec_eval."""
    if not value or _WHITESPACE.search(value):
        return ("is empty or contains whitespace, which TREC run files cannot hold; use an id without spaces, tabs "
                "or newlines")
    found = _BAD_ID.search(value)
    if found is None:
        return None
    char = found.group()
    code = f"U+{ord(char):04X}"
    if char == "\0":
        return (f"contains a NUL character ({code}), which would make it collide with other ids when scored; "
                "remove it")
    if "\ud800" <= char <= "\udfff":
        return (f"contains a lone surrogate ({code}), which is not valid Unicode text and cannot be written as UTF-8; "
                "fix the id")
    return f"contains the control character {code}; an id is printable text, remove it"


def shown(value: object, limit: int = 80) -> str:
    """``value`` for a message: its escaped ``repr``, a long text cut."""
    if isinstance(value, str) and len(value) > limit:
        text = repr(value[:limit])
        return f"{text[:-1]}...{text[-1]} ({len(value):,} characters)"
    return repr(value)


def write_trec(path: str | Path, run: Run, tag: str) -> None:
    """Write ``run`` atomically as a TREC run."""
    atomic.write_text(Path(path), trec_text(run, tag))


def trec_text(run: Run, tag: str) -> str:
    """``run`` as a TREC run file, scores in full precision so reading it back gives the same floats."""
    for kind, values in (("tag", [tag]), ("query id", list(run)),
                         *(("document id", list(docs)) for docs in run.values())):
        bad = unwritable(values)
        if bad is not None:
            raise ValueError(f"{kind} {shown(values[bad])} {id_problem(values[bad])}")
    return "".join(f"{qid} Q0 {doc_id} {position} {float(score)!r} {tag}\n"
                   for qid, docs in run.items() for position, (doc_id, score) in enumerate(docs.items(), 1))


_WHITESPACE = re.compile(r"\s")
# What an id may not hold: whitespace, C0 and C1 control characters, DEL and lone surrogates.
_BAD_ID = re.compile(r"[\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# What no column of a TREC line may hold: the same, less whitespace (which separates columns).
_BAD_CHAR = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ud800-\udfff]")
