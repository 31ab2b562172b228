"""What computing a task cost: its timed phases, the seconds per stage and the LLM usage added;
kept apart from the runner so a task's cost file has one definition.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any

from ..components.context import LLMCalls
from ..llm.usage import Usage


LOADING = "Loading model"  # a phase inside another (context.loading()): timed apart, as the "load" stage
STAGES = {LOADING: "load", "Rewriting queries": "rewrite", "Encoding corpus": "index", "Encoding queries": "search",
          "Reranking": "rerank", "Scoring": "score"}  # phase -> the stage a cost file times (layout.COST_STAGES)


_APPENDING = threading.Lock()


class Phases:
    """Wall-clock phases of one task, in the shape mteb stores as ``evaluation_phases``; and, for its
    cost file, how deep each phase nests and what LLM usage the stages it ran added
    (``phase(name, *calls)``: those stages' ``LLMCalls``)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        # each item's enclosing phases (outermost first; how deep it nests) and the usage added in it
        self.marks: list[tuple[tuple[str, ...], Usage | None]] = []
        self._nesting = threading.local()  # stages that overlap (index while rewriting) nest apart

    @property
    def _open(self) -> list[str]:
        """The phases open in this thread, outermost first."""
        if not hasattr(self._nesting, "open"):
            self._nesting.open = []
        return self._nesting.open

    @contextmanager
    def __call__(self, name: str, *calls: LLMCalls):
        watched = [(c, c.usage, c.usage.tally()) if c.usage is not None else (c, None, None) for c in calls]
        start = time.time()
        around = tuple(self._open)
        self._open.append(name)
        try:
            yield
        finally:
            self._open.pop()
        with _APPENDING:  # items and marks stay pairs
            self.items.append({"name": name, "start": start, "end": time.time(), "split": "test",
                               "subset": "default"})
            self.marks.append((around, _added(watched)))

    def cost(self, since: int = 0) -> dict[str, Any]:
        """``{"seconds": {stage: s}, "usage": {...} or None}`` of the phases recorded from item
        ``since`` on (a saved run's, inside the task's): seconds of the outermost ones only (a phase
        inside another is part of its time), but a model's loading, which counts as "load" and not
        in the stage it happened in; usage of all (None when no component reported any)."""
        marks = self.marks[since:]
        top = min((len(around) for around, _ in marks), default=0)
        seconds: dict[str, float] = {}
        usage: Usage | None = None
        for item, (around, added) in zip(self.items[since:], marks):
            stage = STAGES.get(item["name"])
            took = max(0.0, item["end"] - item["start"])
            if stage is not None and len(around) == top:
                seconds[stage] = seconds.get(stage, 0.0) + took
            elif stage == "load":  # inside a stage: its own time, taken out of that stage's
                seconds["load"] = seconds.get("load", 0.0) + took
                outer = STAGES.get(around[top])
                if outer is not None:
                    seconds[outer] = seconds.get(outer, 0.0) - took
            if added is not None:
                usage = added if usage is None else usage + added
        return {"seconds": {k: round(max(0.0, v), 3) for k, v in seconds.items()},
                "usage": usage.to_json() if usage is not None else None}


def _added(watched: list[tuple[LLMCalls, Usage | None, Usage | None]]) -> Usage | None:
    """The usage the watched stages added since their tallies were taken: what a stage's tally
    holds now, less what it held (a tally made since is all new)."""
    total = None
    for calls, before, tally in watched:
        now = calls.usage
        if now is None:
            continue
        added = now - tally if now is before and tally is not None else now.tally()
        total = added if total is None else total + added
    return total


def with_recorded(cost: dict[str, Any], recorded: dict[str, Any] | None) -> dict[str, Any]:
    """A cost with an earlier one added (a reused first stage's, as its cost file recorded it)."""
    if recorded is None:
        return cost
    seconds = dict(recorded["seconds"])
    for stage, s in cost["seconds"].items():
        seconds[stage] = round(seconds.get(stage, 0.0) + s, 3)
    usages = [u for u in (recorded["usage"], cost["usage"]) if u is not None]
    usage = None
    if usages:
        usage = {k: sum(u.get(k) or 0 for u in usages) for k in dict.fromkeys(k for u in usages for k in u)
                 if k != "usd"}
        usage["usd"] = None if any(u["usd"] is None for u in usages) else round(sum(u["usd"] for u in usages), 10)
    return {"seconds": seconds, "usage": usage}
