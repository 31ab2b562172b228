"""What a run produced: one type per task and one per run, with one serialisation.

``r2med-run --json``, the Python API (``r2med_tasks.evaluate``) and ``r2med sweep``'s board all
show these, so a task's outcome has one shape wherever it is read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TaskOutcome:
    """One task of a run: its nDCG@10, the queries scored, whether it was computed now or reused
    (``"computed"``/``"cached"``), whether its data is R2MED's official data (the hub's, at mteb's
    pinned revision), and the results folder it is in."""

    task: str  # mteb's task name
    alias: str  # the short name --tasks takes
    group: str | None
    ndcg_at_10: float
    n_queries: int
    status: str
    official_data: bool
    results_dir: str

    @property
    def ndcg_at_10_x100(self) -> float:
        """As the leaderboard shows it: ×100, rounded to 2 decimals."""
        from .evaluation import leaderboard_value

        return leaderboard_value(self.ndcg_at_10)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ndcg_at_10_x100": self.ndcg_at_10_x100}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskOutcome:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


@dataclass
class RunOutcome(Mapping[str, TaskOutcome]):
    """A run: its pipeline's name and results folders, and task name -> :class:`TaskOutcome`
    (``outcome["Biology"]`` also finds a task by the name ``--tasks`` takes)."""

    display_name: str
    label: str
    model_name: str
    revision: str
    experiment: str | None
    results_dirs: list[str]
    tasks: list[TaskOutcome] = field(default_factory=list)
    command: str | None = None  # the r2med-run line that reproduces the run (None: no command can)
    summaries: list[str] = field(default_factory=list)  # the components' closing lines (LLM usage)

    def __getitem__(self, task: str) -> TaskOutcome:
        from .tasks import normalize

        for o in self.tasks:
            if task == o.task or normalize(task) in (normalize(o.task), normalize(o.alias)):
                return o
        raise KeyError(task)

    def __iter__(self) -> Iterator[str]:
        return iter(o.task for o in self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        shown = ", ".join(f"{o.task}: {o.ndcg_at_10:.4f}" for o in self.tasks)
        return f"RunOutcome({self.label!r}, {{{shown}}})"

    @property
    def official_data(self) -> bool:
        return bool(self.tasks) and all(o.official_data for o in self.tasks)

    def task_results(self) -> dict[str, Any]:
        """mteb's TaskResult of each task, as mteb reads it from disk."""
        from pathlib import Path

        from .mteb_adapter import read_task_result

        return {o.task: read_task_result(Path(o.results_dir) / f"{o.task}.json") for o in self.tasks}

    def average_x100(self) -> float:
        """The leaderboard's average over the run's tasks."""
        from .evaluation import leaderboard_average

        return leaderboard_average([o.ndcg_at_10_x100 for o in self.tasks])

    def to_json(self) -> dict[str, Any]:
        return {"pipeline": self.display_name, "label": self.label, "model_name": self.model_name,
                "revision": self.revision, "experiment": self.experiment, "results_dirs": self.results_dirs,
                "command": self.command, "summaries": self.summaries, "official_data": self.official_data,
                "tasks": [o.to_json() for o in self.tasks],
                "average_ndcg_at_10_x100": self.average_x100() if self.tasks else None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunOutcome:
        return cls(data["pipeline"], data["label"], data["model_name"], data["revision"], data["experiment"],
                   list(data["results_dirs"]), [TaskOutcome.from_json(t) for t in data["tasks"]], data["command"],
                   list(data["summaries"]))
