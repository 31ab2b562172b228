"""What a run produced: one type per task and one per run, with one serialisation, so a task's
outcome has one shape wherever it is read (``--json``, the Python API, the sweep's board).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .identity import PipelineSpec


@dataclass(frozen=True)
class TaskOutcome:
    """One task of a run, read from its results folder's files, so a task reused from an earlier run
    reports what it reported when computed. ``ndcg_at_10_ci``: the 95% percentile bootstrap interval
    of the mean nDCG@10 over queries (10,000 resamples, ``default_rng(0)``), on the unrounded
    per-query values. ``only_relevant_judged``: the judgments hold no grade 0 (as R2MED's), so
    ``judged_at_10`` is P@10 and ``ndcg_at_10_condensed`` no measure of holes."""

    task: str  # mteb's task name
    alias: str  # the short name --tasks takes
    group: str | None
    ndcg_at_10: float
    n_queries: int
    status: str
    official_data: bool
    results_dir: str
    judged_at_10: float | None = None  # share of each query's top 10 that is judged (0-1), mean over queries
    ndcg_at_10_condensed: float | None = None  # nDCG@10 over judged documents only (0-1), mean over queries
    ndcg_at_10_ci: list[float] | None = None  # [lo, hi] of the mean nDCG@10, ×100, 2 decimals
    usage: dict[str, Any] | None = None  # LLM requests, tokens and dollars (None: no LLM called)
    seconds: dict[str, float] | None = None  # wall seconds per stage
    only_relevant_judged: bool | None = None  # no grade 0 in the judgments: judged@10 is P@10
    # per stage, the LLM answers its generation records hold and how many it could not use (None: no record)
    llm_answers: dict[str, dict[str, int]] | None = None

    @classmethod
    def read(cls, task, folder, *, status: str, official_data: bool) -> TaskOutcome:
        """The outcome of ``task`` from the results folder it was written to: how a reused task's
        outcome is built (a task computed now is built by :meth:`written`, equal to what this reads)."""
        from ..scoring.evaluation import COVERAGE, MAIN_SCORE
        from .folder import ResultsFolder

        run = folder if isinstance(folder, ResultsFolder) else ResultsFolder(Path(folder))
        result = run.task_result(run.task_json(task.name))
        return cls._of(task, run, float(result["scores"]["test"][0]["main_score"]),
                       run.per_query_scores(task.name, (MAIN_SCORE, *COVERAGE)), run.cost(task.name),
                       run.generations(task.name), status=status, official_data=official_data)

    @classmethod
    def written(cls, task, folder, scores: Mapping[str, Any], rows: dict[str, dict[str, float]],
                cost: dict[str, Any] | None, records: Sequence[dict[str, Any]] = (), *,
                official_data: bool) -> TaskOutcome:
        """The outcome of ``task`` computed now, from what was written to ``folder`` (``records``:
        its generation records): equal to what :meth:`read` reads back, without reading."""
        from ..mteb_adapter import stored_score

        main = float(stored_score(scores["main_score"]))  # as the TaskResult holds it
        return cls._of(task, folder, main, rows, cost, records, status="computed", official_data=official_data)

    @classmethod
    def _of(cls, task, run, main: float, rows: dict[str, dict[str, float]], cost: dict[str, Any] | None,
            records: Sequence[dict[str, Any]], *, status: str, official_data: bool) -> TaskOutcome:
        from ..scoring.evaluation import MAIN_SCORE, RELEVANT_ONLY
        from ..scoring.uncertainty import mean_interval, x100

        if not rows:
            raise ValueError(f"{run.per_query(task.name)}: no query")

        def mean(column: str) -> float | None:
            values = [row[column] for row in rows.values() if column in row]
            return sum(values) / len(values) if len(values) == len(rows) else None

        cost = cost or {}
        relevant_only = mean(RELEVANT_ONLY)
        return cls(task.name, task.short_name, task.group, main, len(rows), status, official_data, str(run.path),
                   judged_at_10=mean("judged_at_10"), ndcg_at_10_condensed=mean("ndcg_at_10_condensed"),
                   ndcg_at_10_ci=x100(mean_interval([row[MAIN_SCORE] for row in rows.values()])),
                   usage=cost.get("usage"), seconds=cost.get("seconds"),
                   only_relevant_judged=None if relevant_only is None else relevant_only == 1.0,
                   llm_answers=llm_answers(records))

    @property
    def ndcg_at_10_x100(self) -> float:
        """As the leaderboard shows it: ×100, rounded to 2 decimals."""
        from ..scoring.evaluation import leaderboard_value

        return leaderboard_value(self.ndcg_at_10)

    def to_json(self) -> dict[str, Any]:
        """Each key says its scale: ``ndcg_at_10`` in [0, 1]; ``_x100`` keys ×100, as the board shows."""
        data = asdict(self)
        data["ndcg_at_10_ci_x100"] = data.pop("ndcg_at_10_ci")
        return {**data, "ndcg_at_10_x100": self.ndcg_at_10_x100}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskOutcome:
        data = {**data, "ndcg_at_10_ci": data.get("ndcg_at_10_ci_x100")}
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})  # (older JSON: defaults)


def llm_answers(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]] | None:
    """Per stage, ``{"answers": n, "unusable": m}``: the answers (samples) of its generation records
    and how many of them it could not use; None without a record of an LLM's (a record without
    samples is a rewritten query no LLM answered)."""
    out: dict[str, dict[str, int]] = {}
    for record in records:
        samples, unusable = record.get("samples"), record.get("unusable")
        if not isinstance(samples, list):
            continue
        counts = out.setdefault(str(record.get("stage")), {"answers": 0, "unusable": 0})
        counts["answers"] += len(samples)
        counts["unusable"] += unusable if type(unusable) is int and unusable > 0 else 0  # an older record: none
    return out or None


def stored_rows(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """``evaluation.score``'s per-query metrics as ``ResultsFolder.per_query_scores`` reads them back
    from the file: by query, as floats."""
    from ..scoring.evaluation import COVERAGE, MAIN_SCORE

    return {qid: {c: float(m[c]) for c in (MAIN_SCORE, *COVERAGE) if c in m} for qid, m in sorted(per_query.items())}


def average_ci(tasks: list[TaskOutcome], computed: Mapping[str, dict[str, dict[str, float]]] | None = None
               ) -> list[float] | None:
    """The 95% interval of a run's average nDCG@10, ×100, the queries of each task resampled within
    the task. Read from the per-query files, so a reused task counts as it did when computed, but for
    the tasks in ``computed`` (task name -> the rows just written). None for no task."""
    from ..scoring.evaluation import MAIN_SCORE
    from .folder import ResultsFolder
    from ..scoring.uncertainty import average_interval_of, x100

    if not tasks:
        return None
    per_task = {}
    for o in tasks:
        rows = (computed or {}).get(o.task) or ResultsFolder(Path(o.results_dir)).per_query_scores(o.task, (MAIN_SCORE,))
        per_task[o.task] = [row[MAIN_SCORE] for row in rows.values()]
    return x100(average_interval_of(per_task))


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
    average_ci: list[float] | None = None  # [lo, hi] of the average's 95% interval, ×100 (:func:`average_ci`)
    # What the run ran, carried from it (its configuration, command, ...: what its record holds), which
    # the summary compares with a published row's; not in the JSON (None in an outcome read back from it).
    spec: PipelineSpec | None = field(default=None, repr=False, compare=False)

    def __getitem__(self, task: str) -> TaskOutcome:
        from ..tasks.specs import normalize

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
        from .folder import ResultsFolder
        from ..mteb_adapter import read_task_result

        return {o.task: read_task_result(ResultsFolder(o.results_dir).task_json(o.task)) for o in self.tasks}

    def average_x100(self) -> float:
        """The leaderboard's average over the run's tasks."""
        from ..scoring.evaluation import leaderboard_average

        return leaderboard_average([o.ndcg_at_10_x100 for o in self.tasks])

    def totals(self) -> dict[str, Any]:
        """The run's cost summed over its tasks (reused ones as recorded when computed): ``usage``
        (each count summed; ``usd`` None when a task's is unknown; None when no task called an LLM),
        ``seconds`` per stage (None when no task recorded any), ``queries`` scored and
        ``llm_answers`` per stage (:func:`llm_answers`; None when no task kept a generation record)."""
        usages = [o.usage for o in self.tasks if o.usage]
        usage = None
        if usages:
            usage = {k: sum(u.get(k) or 0 for u in usages) for k in dict.fromkeys(k for u in usages for k in u)
                     if k != "usd"}
            usage["usd"] = None if any(u.get("usd") is None for u in usages) else sum(u["usd"] for u in usages)
        seconds: dict[str, float] | None = None
        for o in self.tasks:
            for stage, value in (o.seconds or {}).items():
                seconds = seconds if seconds is not None else {}
                seconds[stage] = seconds.get(stage, 0.0) + value
        answers: dict[str, dict[str, int]] = {}
        for o in self.tasks:
            for stage, counts in (o.llm_answers or {}).items():
                total = answers.setdefault(stage, {"answers": 0, "unusable": 0})
                for key in total:
                    total[key] += counts.get(key, 0)
        return {"usage": usage, "seconds": seconds, "queries": sum(o.n_queries for o in self.tasks),
                "llm_answers": answers or None}

    def to_json(self) -> dict[str, Any]:
        return {"pipeline": self.display_name, "label": self.label, "model_name": self.model_name,
                "revision": self.revision, "experiment": self.experiment, "results_dirs": self.results_dirs,
                "command": self.command, "summaries": self.summaries, "official_data": self.official_data,
                "tasks": [o.to_json() for o in self.tasks],
                "average_ndcg_at_10_x100": self.average_x100() if self.tasks else None,
                "average_ndcg_at_10_ci_x100": self.average_ci}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunOutcome:
        return cls(data["pipeline"], data["label"], data["model_name"], data["revision"], data["experiment"],
                   list(data["results_dirs"]), [TaskOutcome.from_json(t) for t in data["tasks"]], data["command"],
                   list(data["summaries"]), data.get("average_ndcg_at_10_ci_x100"))
