"""Two-click reproductions with a verdict, as pyserini's: ``reproduce(row)`` runs a published row's
command and judges each figure, per dataset and for the average: **OK** as printed (within 0.005),
**OKish** within the tolerance of the row's kind (lexical retrieval reproduces exactly; neural
encoders differ in the last bits between machines; an API model may change behind its name),
**FAIL** beyond it. A reproduction is kept in its results folder, so those made so far form a
matrix. A run on data other than R2MED's official data gets no verdict: it shows its own scores, the
datasets its data folder lacked and what a verdict needs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..files import atomic
from ..errors import UserError
from ..tasks.specs import R2MED_TASKS
from .verdicts import API, LEXICAL, TOLERANCES, VERDICTS, Tolerance

@dataclass
class Check:
    """One figure: ``expected`` (published) and ``got`` (×100), their difference and its verdict."""

    task: str
    expected: float
    got: float | None
    difference: float | None = None
    verdict: str | None = None


@dataclass
class Reproduction:
    """A published row's reproduction: its command, the kind of tolerance, a check per dataset and
    for the average, the overall verdict (the worst), where the results are, and a note when there
    is nothing to compare against."""

    row: str
    rank: int | None
    command: str
    tolerance: Tolerance
    tasks: list[Check] = field(default_factory=list)
    average: Check | None = None
    results_dir: str | None = None
    official: bool = True
    note: str | None = None
    lacked: list[str] = field(default_factory=list)  # the row's datasets the run's --data-dir did not hold
    date: str = ""

    @property
    def verdict(self) -> str | None:
        verdicts = [c.verdict for c in [*self.tasks, *([self.average] if self.average else [])] if c.verdict]
        return max(verdicts, key=VERDICTS.index) if verdicts else None

    def to_json(self) -> dict[str, Any]:
        return {"row": self.row, "rank": self.rank, "command": self.command, "verdict": self.verdict,
                "tolerance": asdict(self.tolerance), "tasks": [asdict(c) for c in self.tasks],
                "average": asdict(self.average) if self.average else None, "results_dir": self.results_dir,
                "official_data": self.official, "lacked": self.lacked, "note": self.note, "date": self.date}


def published_row_of(reference: str):
    """The published row ``reference`` names: its name as the leaderboard spells it (any case), or
    its rank on the published board (``r2med leaderboard``'s published rows); with its rank."""
    from .leaderboard import ranked
    from .sources import published_rows

    board = ranked(published_rows(which="leaderboard"))
    text = reference.strip()
    if text.isdigit():
        rank = int(text)
        if not 1 <= rank <= len(board):
            raise UserError(f"reproduce {reference}: no such rank; the board has ranks 1 to {len(board)}")
        return board[rank - 1], rank
    every = published_rows(which="all")
    row = next((r for r in every if r.system.lower() == text.lower()), None)
    if row is None:
        close = [r.system for r in every if text.lower() in r.system.lower()][:3]
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise UserError(f"reproduce {reference!r}: no published row of that name{hint}; `r2med leaderboard "
                        "--published all` lists them")
    rank = next((i for i, r in enumerate(board, 1) if r.system == row.system), None)
    return row, rank


def tolerance_for(command: str) -> Tolerance:
    """The tolerance of a row's kind, from the components its command runs."""
    from ..running.request import parse_command

    components = parse_command(command).components
    names = {c.split(":")[-1] for c in components}
    if names & set(API):
        return TOLERANCES["api"]
    retrievers_and_rerankers = names - {"hyde", "query2doc", "lamer", "search-o1", "search-r1"}
    return TOLERANCES["lexical"] if retrievers_and_rerankers <= set(LEXICAL) else TOLERANCES["neural"]


def reproduction_plan(reference: str) -> Reproduction:
    """What reproducing ``reference`` runs and expects, without running it (``--dry-run``)."""
    row, rank = published_row_of(reference)
    if not row.command:
        raise UserError(f"reproduce {row.system!r}: the row has no command that reproduces it (its note: "
                        f"{'; '.join(row.notes) or 'none'})")
    shown = [t for t in R2MED_TASKS if t.name in row.scores]
    average = row.average if row.average is not None else row.published_average
    return Reproduction(row.system, rank, row.command, tolerance_for(row.command),
                        [Check(t.short_name, row.scores[t.name], None) for t in shown],
                        Check("Average", average, None) if average is not None else None)


def reproduce(reference: str, *, console, output: Path | None = None, data_dir: Path | None = None,
              cache_dir: Path | None = None, log=lambda line: None) -> Reproduction:
    """Run ``reference``'s command (its results under ``output``, its data from ``data_dir`` when
    given, else the hub's at mteb's pinned revisions) and judge each figure; the reproduction is
    kept in the run's results folder."""
    from dataclasses import replace

    from ..results.folder import ResultsFolder
    from ..results.layout import DEFAULT_OUTPUT
    from ..running.request import execute, parse_command

    planned = reproduction_plan(reference)
    request = parse_command(planned.command)
    request = replace(request, output=output or request.output or DEFAULT_OUTPUT,
                      data_dir=data_dir if data_dir is not None else request.data_dir,
                      cache_dir=cache_dir if cache_dir is not None else request.cache_dir)
    outcome = execute(request, console=console, log=log)
    planned.results_dir = outcome.results_dirs[0]
    planned.date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    by_short = {o.alias: o for o in outcome.tasks}
    if not all(o.official_data for o in outcome.tasks):  # the run's own scores, no verdict
        planned.official = False
        for check in planned.tasks:
            got = by_short.get(check.task)
            check.got = None if got is None else round(got.ndcg_at_10_x100, 4)
        planned.lacked = [c.task for c in planned.tasks if c.task not in by_short]
        lacked = (f"; {', '.join(planned.lacked)} ({len(planned.lacked)} of {len(planned.tasks)} datasets) not in "
                  f"{request.data_dir}, not run" if planned.lacked else "")
        planned.note = ("the run read other data than R2MED's at mteb's pinned revisions, so no verdict: its own "
                        f"scores are shown beside the published ones{lacked}. A verdict needs R2MED's data from the "
                        "hub at mteb's pinned revisions: run without --data-dir")
        return planned
    for check in planned.tasks:
        got = by_short.get(check.task)
        if got is not None:
            _judge(check, got.ndcg_at_10_x100, planned.tolerance)
    if planned.average is not None and all(c.got is not None for c in planned.tasks) and \
            len(planned.tasks) == len(R2MED_TASKS):
        _judge(planned.average, outcome.average_x100(), planned.tolerance)
    atomic.write_json(ResultsFolder(Path(planned.results_dir)).reproduction_file, planned.to_json())
    return planned


def _judge(check: Check, got: float | None, tolerance: Tolerance) -> None:
    if got is None or not math.isfinite(got):
        return
    check.got = round(got, 4)
    check.difference = round(got - check.expected, 4)
    check.verdict = tolerance.verdict(got - check.expected)
