"""What became of a sweep's jobs: the live view, and at the end one leaderboard."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..results.outcomes import RunOutcome
from .plan import Job


@dataclass
class Outcome:
    """What became of a job: its run, or one line saying why it failed; and what it printed."""

    job: Job
    run: RunOutcome | None = None
    error: str | None = None
    attempts: int = 1
    log: str = ""

    @classmethod
    def of(cls, job: Job, result: dict[str, Any]) -> Outcome:
        """From ``run_job``'s dict."""
        run = RunOutcome.from_json(result["run"]) if "run" in result else None
        return cls(job, run, result.get("error"), log=result.get("log", ""))


class Board:
    """The live view's state: each job queued, running (since when, which attempt), done or failed."""

    def __init__(self, jobs: list[Job], clock: Callable[[], float] = time.time) -> None:
        self.jobs = jobs
        self.clock = clock
        self.state = {j.index: "queued" for j in jobs}
        self.started: dict[int, float] = {}
        self.attempts = {j.index: 0 for j in jobs}
        self.outcomes: dict[int, Outcome] = {}

    def start(self, index: int, attempts: int | None = None) -> None:
        if self.state[index] in ("done", "failed"):
            return
        self.state[index] = "running"
        self.started.setdefault(index, self.clock())
        self.attempts[index] = attempts if attempts is not None else self.attempts[index] + 1

    def finish(self, outcome: Outcome) -> None:
        index = outcome.job.index
        outcome.attempts = max(1, self.attempts[index])
        self.state[index] = "failed" if outcome.error else "done"
        self.outcomes[index] = outcome

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for v in self.state.values() if v == s) for s in ("queued", "running", "done", "failed")}

    def render(self, width: int = 100):
        """The live view as a rich table of the running and failed jobs, fitting ``width`` columns.
        Called at every refresh, so the times tick between changes of state."""
        from rich.markup import escape
        from rich.table import Table

        from ..board.render import shorten

        counts = self.counts()
        table = Table(title=", ".join(f"{n} {s}" for s, n in counts.items()), title_justify="left")
        now = self.clock()
        shown = [j for j in self.jobs if self.state[j.index] in ("running", "failed")][:30]
        rows = []
        for j in shown:
            state = self.state[j.index]
            retry = f" (attempt {self.attempts[j.index]})" if self.attempts[j.index] > 1 else ""
            since = elapsed(now - self.started[j.index]) if state == "running" and j.index in self.started else ""
            rows.append([j.pipeline, ",".join(j.tasks), state + retry, since])
        others = [max([len(col), *(len(r[i]) for r in rows)]) for i, col in enumerate(("Task", "State", "Time"), 1)]
        room = max(20, width - sum(others) - 3 * 4 - 1)  # an edge and a space either side of a column
        table.add_column("Pipeline", no_wrap=True, max_width=room)
        for col in ("Task", "State", "Time"):
            table.add_column(col, no_wrap=True, justify="right" if col == "Time" else "left")
        for pipeline, tasks, state, since in rows:
            table.add_row(escape(shorten(pipeline, room)), escape(tasks), state, since)
        return table


def elapsed(seconds: float) -> str:
    """A running job's time: 7s, 1m05s, 2h03m."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class BoardRow:
    """One results folder the sweep wrote or reused: its label and nDCG@10 ×100 per task."""

    label: str
    results_dir: str
    scores: dict[str, float] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)

    def average(self, tasks: list[str]) -> float | None:
        from ..scoring.evaluation import leaderboard_average

        return leaderboard_average([self.scores[t] for t in tasks]) if all(t in self.scores for t in tasks) else None


def merged_board(outcomes: list[Outcome]) -> tuple[list[BoardRow], list[str]]:
    """What the sweep ran as one leaderboard: a row per results folder, rows missing a task last."""
    rows: dict[str, BoardRow] = {}
    tasks: list[str] = []
    for o in outcomes:
        if o.run is None or o.error:
            continue
        for t in o.run.tasks:
            row = rows.setdefault(t.results_dir, BoardRow(o.run.label, t.results_dir))
            row.scores[t.alias] = t.ndcg_at_10_x100
            row.statuses[t.alias] = t.status
            if t.alias not in tasks:
                tasks.append(t.alias)
    ranked = sorted(rows.values(), key=lambda r: (r.average(tasks) is None, -(r.average(tasks) or 0.0)))
    return ranked, tasks
