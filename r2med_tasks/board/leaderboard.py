"""One ranked table of R2MED systems: the published leaderboard, your runs, and MTEB results.

Published rows come from the leaderboard snapshot shipped with the package (r2med.github.io @c85a571,
2025-08-16, plus BGE-Reasoner-Embed-0928, whose per-dataset values are its paper's, arXiv 2510.08252
Table 3). Averages are computed, never copied: each dataset's nDCG@10 ×100 rounded to 2 decimals,
then the mean rounded half-up, the convention that reproduces every published average. A system with all eight
datasets (or, for published rows, a published average) ranks by that average, ties in the order
listed; systems missing datasets come after, marked.

The authors' repository (R2MED/R2MED) holds the published runs with every metric, including runs
that are not leaderboard rows (``published.py``, shipped as ``data/published/``): ``published_rows``
gives the leaderboard's rows (``which="leaderboard"``, the default) or those and the repository's
other runs and the runs of R2MED published in other papers (``which="all"``, kind ``paper``:
``data/published/papers.json``); each row says which it is (``kind``) and where its figures come from.

Published rows come from the package only. ``results/r2med-leaderboard__*`` and
``results/r2med-repository__*`` are generated copies of them for mteb users, and the package ships
the sha256 of each of their files (``data/published/files.sha256``): a results folder whose record
claims to be published adds nothing when its files are exactly those (the shipped copy), and is
shown as a run, with a warning, when they are not. Nothing in a folder makes or changes a
published row.

Rows are keyed by identity, never by display name: a result is one model at one revision in one
configuration (mteb's experiment) on official or local data, so the same system written by mteb and
by r2med-run is one row, and option variants are rows of their own, labelled by what differs. A
run joins a published row only when it ran that row's command on R2MED's official data.

Runs on other data (local files: ``Row.local``) are never ranked among the board's rows: they are a
section of their own, after the board's, ranked among themselves (:func:`ranked`,
:func:`section_ranks`), in every format.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import html
import io
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..scoring.evaluation import SCORE_FAMILIES, leaderboard_average, leaderboard_value
from ..files.bounded import MalformedJSON, UnreadableFile, read_bytes, unit_score
from ..results.layout import MAX_TASK_RESULT_BYTES, RunFolder, runs_under
from .published import PUBLISHED_CSV, PUBLISHED_KINDS, mteb_record, paper_runs, published_runs, shipped_files
from .published import provenance as run_provenance
from ..results.identity import canonical, differences
from ..tasks.specs import PINNED_REVISIONS, R2MED_TASKS, SHORT_NAMES
from ..terminal import number, printable


@dataclass
class Row:
    system: str
    rewriter: str = "-"
    retriever: str = "-"
    reranker: str = "-"
    scores: dict[str, float] = field(default_factory=dict)  # task name -> nDCG@10 ×100 (2 decimals)
    published_average: float | None = None  # for rows whose per-dataset values were never published
    source: str = ""
    notes: list[str] = field(default_factory=list)
    command: str = ""  # the command that reproduces the row (a published row's, or a run's stored one)
    key: tuple = ()  # the identity rows merge on
    config: dict | None = None  # a run's configuration, as r2med-run recorded it
    display_name: str = ""  # a run's pipeline name without its variant (published rows match on it)
    local: bool = False  # scored on data other than R2MED's at mteb's pinned revisions
    kind: str = "run"  # "leaderboard" (a leaderboard row), "repository" (a run of the authors' repository only),
    # "paper" (a run published in another paper), "run"
    provenance: list[str] = field(default_factory=list)  # where a published row's figures come from
    mteb: bool = False  # from the MTEB results repository (--mteb-results, or its shipped record), not your runs
    model_meta: dict | None = None  # the model's facts where the row carries them (the shipped MTEB record's)
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # task name -> every metric shipped (0-1)
    joined: list[Row] = field(default_factory=list)  # your runs of this published row's configuration
    components: dict = field(default_factory=dict)  # a run's stages as recorded: kind -> component, label, members
    # What a run's per-query files say (published rows and MTEB results have none: all stay empty or None).
    per_query: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)  # task -> query -> nDCG@10
    data: dict[str, dict] = field(default_factory=dict, repr=False)  # task -> stored data identity
    judged: dict[str, float] = field(default_factory=dict)  # task -> mean judged@10 (0-1)
    condensed: dict[str, float] = field(default_factory=dict)  # task -> condensed-list nDCG@10 ×100 (2 decimals)
    ci: dict[str, list[float]] = field(default_factory=dict)  # task -> 95% interval of nDCG@10 ×100 (add_intervals)
    average_ci: list[float] | None = None  # 95% interval of the average over the shown tasks ×100 (add_intervals)
    tied: bool | None = None  # not separable from the best comparable row (mark_ties); None: not comparable
    tie_p: float | None = None  # Holm-adjusted p-value against the best row (None for the best itself)
    tie_best: str | None = None  # the best row of the comparison group (its system)
    costs: dict[str, dict] = field(default_factory=dict, repr=False)  # task -> what computing it cost (RunFolder.cost)
    # task -> whether its judgments hold only relevant documents (no grade 0): judged@10 is then P@10
    relevant_only: dict[str, bool] = field(default_factory=dict)
    placeholders: dict[str, str] = field(default_factory=dict)  # a word of the command -> what to put there

    def component_names(self, kind: str) -> list[str]:
        """The names and labels a filter on ``kind`` matches: the shown label, the recorded component
        and its members' (``--retriever st`` finds a hybrid of bm25 and st)."""
        stage = self.components.get(kind)
        stage = stage if isinstance(stage, dict) else {}
        members = stage.get("members") if isinstance(stage.get("members"), list) else []
        return [getattr(self, kind), *(str(stage[k]) for k in ("component", "label") if stage.get(k)),
                *(str(m[k]) for m in members if isinstance(m, dict) for k in ("component", "label") if m.get(k))]

    @property
    def live_command(self) -> str:
        """For a row of a search agent's published generations (``-o source=``), the command that
        runs the agent live instead, searching the task's corpus (R2MED did not say which corpus its
        agents searched, so the replay is the exact reproduction); empty for any other row."""
        return live_command(self.command) if self.kind != "run" else ""

    @property
    def origin(self) -> str:
        """Where the row comes from, as the HTML page filters: leaderboard, repository, paper, mteb, run, local."""
        if self.local:
            return "local"
        return self.kind if self.kind in PUBLISHED_KINDS else "mteb" if self.mteb else "run"

    @property
    def section(self) -> str:
        """The part of the board the row is ranked in: ``"board"`` (everything on R2MED's official
        data, published rows included), or ``"local"`` (a run on other data: ranked among the
        local rows only, never between the board's)."""
        return LOCAL_SECTION if self.local else BOARD_SECTION

    @property
    def complete(self) -> bool:
        return all(t.name in self.scores for t in R2MED_TASKS)

    @property
    def average(self) -> float | None:
        if self.complete:
            return leaderboard_average([self.scores[t.name] for t in R2MED_TASKS])
        return self.published_average

    def average_over(self, tasks: list[str]) -> float | None:
        """The leaderboard's average over these datasets (all eight: the published one if need be)."""
        if all(t in self.scores for t in tasks):
            return leaderboard_average([self.scores[t] for t in tasks])
        return self.average if len(tasks) == len(R2MED_TASKS) else None

    @property
    def judged_at_10(self) -> float | None:
        """The mean over the row's datasets of their judged@10 (0-1); None when one has none (a
        published row, an MTEB result, a per-query file written before r2med kept judged@10)."""
        return self.judged_over(list(self.scores))

    def judged_over(self, tasks: list[str]) -> float | None:
        """The mean judged@10 over those of ``tasks`` the row has, None unless each of them has one."""
        present = [t for t in tasks if t in self.scores]
        if not present or any(t not in self.judged for t in present):
            return None
        return sum(self.judged[t] for t in present) / len(present)

    def judged_means(self, tasks: list[str]) -> str | None:
        """What the row's judged@10 over ``tasks`` is: ``"P@10"`` when each of those it has is judged
        with relevant documents only (no grade 0: every judged document is relevant, so judged@10
        counts relevant documents and the condensed nDCG@10 measures no holes), ``"coverage"`` when
        none is, ``"mixed"`` otherwise; None unless each has a judged@10 and says which."""
        present = [t for t in tasks if t in self.scores]
        if not present or any(t not in self.judged or t not in self.relevant_only for t in present):
            return None
        kinds = {self.relevant_only[t] for t in present}
        return JUDGED_MEANS[kinds.pop()] if len(kinds) == 1 else "mixed"

    @property
    def usd_per_query(self) -> float | None:
        """Dollars of LLM use per scored query over the row's datasets (0.0: no LLM called); None when
        a dataset has no cost record or no per-query scores, or a price was unknown."""
        usd = [(c["usage"] or {"usd": 0.0})["usd"] for c in self._costs()]
        return None if not usd or None in usd else sum(usd) / self._n_queries()

    @property
    def seconds_per_query(self) -> float | None:
        """Wall seconds of the recorded stages per scored query over the row's datasets (None as above)."""
        costs = self._costs()
        return sum(sum(c["seconds"].values()) for c in costs) / self._n_queries() if costs else None

    def _costs(self) -> list[dict]:
        """The cost records of all the row's datasets, or none unless each has one and its per-query scores."""
        tasks = list(self.scores)
        if not tasks or any(t not in self.costs or t not in self.per_query for t in tasks):
            return []
        return [self.costs[t] for t in tasks]

    def _n_queries(self) -> int:
        return sum(len(self.per_query[t]) for t in self.scores)

    @property
    def tie_mark(self) -> str:
        """"≈" for a row statistically tied for first (the best of its comparison group, or not
        separable from it: :func:`mark_ties`), else empty."""
        return TIE_MARK if self.tied else ""


TIE_MARK = "≈"
PUBLISHED_CHOICES = ("leaderboard", "all", "none")
BOARD_SECTION, LOCAL_SECTION = "board", "local"
SECTIONS = (BOARD_SECTION, LOCAL_SECTION)  # in this order, each ranked on its own
LOCAL_TITLE = ("Local data: runs on data other than R2MED's official release, ranked among themselves "
               "(not comparable with the board's rows, whose ranks they never change)")
JUDGED_MEANS = {True: "P@10", False: "coverage"}  # what judged@10 is, by whether only relevant documents are judged
P_AT_10_NOTE = ("Judged@10 is P@10 where the judgments hold only relevant documents (no grade 0, as R2MED's): "
                "every judged document is relevant, so judged@10 counts the relevant documents of the top 10 "
                "(not holes), and the condensed nDCG@10 is not a hole measure there (it scores the run's "
                "relevant documents found anywhere in its list).")
DATA_DIR_PLACEHOLDER = "DATA_DIR"  # the word a printed command has for a local data folder it cannot name


def published_rows(path: Path = PUBLISHED_CSV, which: str = "leaderboard") -> list[Row]:
    """The published rows: the leaderboard's (``which="leaderboard"``), those, the authors'
    repository's other runs and the runs published in other papers (``"all"``), or none."""
    if which not in PUBLISHED_CHOICES:
        raise ValueError(f"which={which!r}: one of {', '.join(PUBLISHED_CHOICES)}")
    if which == "none":
        return []
    linked = {r["name"]: r for r in published_runs("leaderboard")}
    rows = []
    with path.open(encoding="utf-8", newline="") as f:
        for record in csv.DictReader(f):
            scores = {t.name: float(record[t.short_name]) for t in R2MED_TASKS if record[t.short_name].strip()}
            run = linked.get(record["name"])
            row = Row(record["name"], record["rewriter"], record["retriever"], record["reranker"], scores,
                      source=f"published ({record['source'].split(' (')[0].split(';')[0]})",
                      command=record.get("command") or "", key=("published", record["name"].lower()),
                      kind="leaderboard", provenance=[record["source"], *(run_provenance(run) if run else [])],
                      metrics=_run_metrics(run) if run else
                      {t: {"ndcg_at_10": round(v / 100, 6)} for t, v in scores.items()})
            if not row.complete:
                row.published_average = float(record["avg"])
                row.notes.append("average only: per-dataset values not published")
            rows.append(row)
    if which == "all":
        rows += [repository_row(run) for run in published_runs("repository")]
        rows += [paper_row(run) for run in paper_runs()]
    return rows


def paper_row(run: dict) -> Row:
    """A run published in another paper, as a row (its nDCG@10 ×100 as printed; its printed average
    when the paper's per-dataset values are not given)."""
    scores = {t.name: float(run["ndcg_at_10"][t.short_name]) for t in R2MED_TASKS if t.short_name in run["ndcg_at_10"]}
    row = Row(run["name"], run["rewriter"], run["retriever"], run["reranker"], scores,
              source=f"published ({run['source']})", command=run["command"], key=("published", run["name"].lower()),
              kind="paper", provenance=list(run["provenance"]),
              metrics={t: {"ndcg_at_10": round(v / 100, 6)} for t, v in scores.items()})
    if not row.complete:
        row.published_average = float(run["average"])
        row.notes.append("average only: per-dataset values not transcribed")
    if run.get("note"):
        row.notes.append(run["note"])
    return row


def repository_row(run: dict) -> Row:
    """A run of the authors' repository that is not a leaderboard row, as a row (nDCG@10 ×100)."""
    scores = {t.name: leaderboard_value(run["metrics"][t.short_name]["ndcg_at_10"]) for t in R2MED_TASKS}
    commit = next(reversed(run["files"]))
    row = Row(run["name"], run["rewriter"], run["retriever"], run["reranker"], scores,
              source=f"published (R2MED/R2MED results @{commit})", command=run["command"],
              key=("published", run["name"].lower()), kind="repository", provenance=run_provenance(run),
              metrics=_run_metrics(run))
    if run.get("note"):
        row.notes.append(run["note"])
    return row


def _run_metrics(run: dict) -> dict[str, dict[str, float]]:
    """A published run's metrics keyed by mteb task name, as the authors report them."""
    return {t.name: dict(run["metrics"][t.short_name]) for t in R2MED_TASKS if t.short_name in run["metrics"]}


def published_row(system: str) -> Row | None:
    """The published row of this name (as the leaderboard spells it, any case), if there is one."""
    return next((r for r in published_rows() if r.system.lower() == system.lower()), None)


def published_row_for(system: str, config: dict) -> Row | None:
    """The published row a run of ``config`` reproduces: the row of that name whose command builds
    exactly that configuration. (Whether the run used official data is the caller's to check.)"""
    row = published_row(system)
    if row is None or not row.command:
        return None
    return row if command_config(row.command) == canonical(config) else None


def command_config(command: str | list[str]) -> dict | None:
    """The configuration an ``r2med-run`` command builds, parsed as ``r2med-run`` parses it (None
    when it cannot be built here)."""
    return _command_check(command)[0]


def _command_check(command: str | list[str]) -> tuple[dict | None, str | None]:
    """(configuration, None) of a command, or (None, why it cannot be built here)."""
    from ..errors import UserError
    from ..running.pipelines import build_pipeline
    from ..running.request import parse_command

    try:
        request = parse_command(command).request
        built = build_pipeline(_installed_registry(), list(request.components), list(request.options), top_k=request.top_k,
                               device=request.device)
        return canonical(built.config()), None
    except UserError as e:
        return None, str(e)


@functools.cache
def _installed_registry():
    """The installed plugins' registry, as ``r2med_tasks.api.registry`` builds it (api imports this
    module, so it is built here), built once: every run's command is checked against it."""
    from ..running.discovery import get_plugins
    from ..running.registry import build_registry

    return build_registry(get_plugins())


def result_rows(folder: Path, warn, *, mteb: bool = False, shipped: list[Path] | None = None) -> list[Row]:
    """Rows from a results folder in mteb's layout (r2med-run's or mteb's own ResultCache), one per
    model, revision, experiment and kind of data (official or local); ``mteb``: the folder is the
    MTEB results repository's.

    Everything in the folder is untrusted. A file that is not a readable mteb TaskResult (not a
    regular file, over 10 MB, not JSON, nested too deep, no test score), or whose nDCG@10 is not a
    score (a finite real number between 0 and 1: not a boolean, not a string), is skipped with one
    warning naming it: a ranking must not show it silently. Metrics that are no scores are left out
    of what a row shows.

    A folder never makes a published row (those are the package's own, :func:`published_rows`): a
    folder claiming to be one is either the shipped copy of the published results (its files are
    those of the package's manifest: it adds nothing, and is appended to ``shipped``) or, with one
    warning, shown as a run. Everything a row says of a run (name, components, command) is the
    run's stored record.
    """
    systems: dict[tuple, Row] = {}
    folders: dict[tuple, RunFolder] = {}
    skipped = 0  # (mteb) files of other tasks, left unread
    for run in runs_under(folder):
        files = run.task_files()
        if mteb:  # the MTEB results repository: R2MED's files only, chosen by name; no other file is opened
            skipped += sum(p.stem not in SHORT_NAMES for p in files)
            files = [p for p in files if p.stem in SHORT_NAMES]
            if not files:
                continue
        record = run.record()
        claimed = "published" in record
        if claimed and shipped_copy(run):
            if shipped is not None:
                shipped.append(run.path)
            continue
        if claimed:
            warn(f"{run.path}: claims to be a published row but is not the shipped record; shown as a run")
        for path in files:
            read = _task_result(run, path, warn)
            if read is None:
                continue
            task, main, test, revision = read
            identity = run.identity(task)
            if identity:
                official = identity["data"].get("official") is True
            else:  # written by mteb, or before identities: official when at mteb's pinned revision
                official = revision == PINNED_REVISIONS[task]
            key = (*run.key()[:3], not official)
            if key not in systems:
                systems[key] = _run_row(run, record, key, local=not official)
                systems[key].mteb = mteb
                if claimed:
                    systems[key].notes.append("claims to be a published row but is not the shipped record")
                folders[key] = run
            systems[key].scores[task] = leaderboard_value(main)
            systems[key].metrics[task] = _metrics(path, test, warn)
            _read_per_query(systems[key], run, task, main, identity, warn)
            cost = run.cost(task) if identity else None
            if cost is None:
                systems[key].costs.pop(task, None)
            else:
                systems[key].costs[task] = cost
        for path, why in run.problems().items():
            warn(f"{path}: {why}; not read")
    for key, row in systems.items():
        if row.kind == "run":
            row.command, note, row.placeholders = recorded_command(folders[key].record(), list(row.scores),
                                                                   output=folder, local=row.local)
            if note:
                row.notes.append(note)
    if skipped:
        warn(f"{folder}: {skipped} result files of other tasks skipped unread (only R2MED's are read)")
    return list(systems.values())


def mteb_record_rows(path: Path | None = None) -> list[Row]:
    """MTEB's R2MED results as the package ships them (:func:`r2med_tasks.board.published.mteb_record`:
    the MTEB results repository at one commit), as ``--mteb-results`` reads that repository's
    folders: one row per model, revision, experiment and kind of data (a result at a dataset
    revision other than mteb's pinned one is local data), with the same identity (they merge with
    your runs of the model and revision, and with ``--mteb-results`` rows), name and source
    (``mteb``); labelled with the record's commit and date, and carrying the model's facts."""
    record = mteb_record() if path is None else mteb_record(path)
    label = f"MTEB results ({record['repository']}@{record['commit'][:7]}, {record['commit_date'][:10]})"
    rows: dict[tuple, Row] = {}
    for model in record["models"]:
        kwargs = model.get("experiment_kwargs") or {}
        name = model["name"] + (f" ({', '.join(f'{k}={v}' for k, v in sorted(kwargs.items()))})" if kwargs else "")
        for task, result in model["tasks"].items():
            local = result.get("dataset_revision") != PINNED_REVISIONS[task]
            key = (model["name"], model["revision"], model["experiment"], local)
            if key not in rows:
                rows[key] = Row(name, retriever=model["name"].split("/")[-1],
                                source=("local data: " if local else "") + label, key=key, display_name=name,
                                local=local, mteb=True, model_meta=dict(model["model_meta"]))
            row = rows[key]
            row.scores[task] = leaderboard_value(result["main_score"])
            ndcg = unit_score(result.get("ndcg_at_10"))
            row.metrics[task] = {} if ndcg is None else {"ndcg_at_10": ndcg}
            where = f"{record['repository']}@{record['commit'][:7]}:{model['folder']}"
            if where not in row.provenance:
                row.provenance.append(where)
    return list(rows.values())


def _read_per_query(row: Row, run: RunFolder, task: str, main: float, identity: dict | None, warn) -> None:
    """A run's per-query scores of ``task`` into ``row`` (nDCG@10, judged@10, condensed nDCG@10),
    with the data identity they were scored on: what its intervals and ties are computed from. Only
    a task r2med wrote (it has a stored identity) has them; a per-query file that is no such table,
    holds a value that is no score, or whose nDCG@10 does not average to the TaskResult's (mteb
    keeps 5 decimals) is left out with one warning: the row then shows no interval for the task."""
    from ..errors import UserError
    from ..scoring.evaluation import COVERAGE, MAIN_SCORE, RELEVANT_ONLY

    path = run.per_query(task)
    row.per_query.pop(task, None)  # (another folder of the same identity wrote this task's score)
    row.data.pop(task, None)
    row.judged.pop(task, None)
    row.condensed.pop(task, None)
    row.relevant_only.pop(task, None)
    if identity is None or not path.exists():
        return
    try:
        table = run.per_query_scores(task, (MAIN_SCORE, *COVERAGE))
    except UserError as e:
        warn(f"{e}; no interval or tie for this task")
        return
    if not table:
        warn(f"{path}: no query; no interval or tie for this task")
        return
    values = [v for r in table.values() for v in r.values()]
    if any(not 0.0 <= v <= 1.0 for v in values):  # (NaN too)
        warn(f"{path}: a value that is not a score between 0 and 1; no interval or tie for this task")
        return
    ndcg = {q: r[MAIN_SCORE] for q, r in table.items()}
    if abs(sum(ndcg.values()) / len(ndcg) - main) > 5.1e-6:
        warn(f"{path}: its nDCG@10 values average {sum(ndcg.values()) / len(ndcg):.5f}, not the TaskResult's "
             f"{main:.5f}; no interval or tie for this task")
        return
    row.per_query[task], row.data[task] = ndcg, identity["data"]
    for column, into, scale in (("judged_at_10", row.judged, float), ("ndcg_at_10_condensed", row.condensed,
                                                                       leaderboard_value)):
        if all(column in r for r in table.values()):
            into[task] = scale(sum(r[column] for r in table.values()) / len(table))
    if all(RELEVANT_ONLY in r for r in table.values()):  # (a file written before r2med recorded it: unknown)
        row.relevant_only[task] = all(r[RELEVANT_ONLY] == 1.0 for r in table.values())


def add_intervals(rows: list[Row], tasks: list[str]) -> None:
    """Each row's 95% percentile bootstrap intervals (10,000 resamples of its queries,
    ``default_rng(0)``; :mod:`r2med_tasks.scoring.uncertainty`), ×100 and rounded to 2 decimals like its
    scores, computed on the unrounded per-query nDCG@10: ``ci`` per shown task it has per-query
    scores for, and ``average_ci``, of its average over ``tasks`` (each task's queries resampled
    within the task), when it has per-query scores for all of them. Runs joined to a published row
    get theirs too; rows without per-query scores (published ones) keep none."""
    from ..scoring.uncertainty import average_interval_of, mean_interval, x100

    for row in [r for top in rows for r in (top, *top.joined)]:
        row.ci = {t: ci for t in tasks if t in row.per_query  # none over one query: nothing to resample
                  if (ci := x100(mean_interval(list(row.per_query[t].values())))) is not None}
        row.average_ci = x100(average_interval_of({t: list(row.per_query[t].values()) for t in tasks})) \
            if tasks and all(t in row.per_query for t in tasks) else None


def mark_ties(rows: list[Row], tasks: list[str], *, alpha: float | None = None, trials: int = 10000,
              seed: int = 0) -> None:
    """Which rows cannot be told apart from the best, on the average over ``tasks``.

    Rows are comparable when they have per-query scores for every task in ``tasks`` scored on the same
    data (the same stored data identities). In each group of two or more comparable rows, the best is
    the one with the highest average (the first listed on equal averages, as ranked); every other row
    is compared with it by a paired sign-flip randomization test on the difference of averages
    (``significance.average_randomization``: 10,000 trials, ``seed`` 0, on the queries both scored), and
    the p-values are adjusted with Holm's method over the family of those comparisons. A row is
    ``tied`` when its adjusted p-value is at least 0.05, the best row is tied (the top of its group),
    and ``tie_p`` / ``tie_best`` say against what. A row that is in no such group (a published row,
    a lone run) has ``tied`` None.
    """
    from ..scoring.significance import ALPHA, ties_with_best

    groups: dict[str, list[Row]] = {}
    for row in rows:
        row.tied = row.tie_p = row.tie_best = None
        if tasks and all(t in row.per_query for t in tasks):
            groups.setdefault(json.dumps([row.data[t] for t in tasks], sort_keys=True), []).append(row)
    for members in groups.values():
        if len(members) < 2:
            continue
        best = min(range(len(members)), key=lambda i: (-members[i].average_over(tasks), i))
        result = ties_with_best({i: [r.per_query[t] for t in tasks] for i, r in enumerate(members)}, best,
                                alpha=ALPHA if alpha is None else alpha, trials=trials, seed=seed)
        for i, row in enumerate(members):
            row.tied, row.tie_p, row.tie_best = result[i]["tied"], result[i]["p_holm"], members[best].system


def _task_result(run: RunFolder, path: Path, warn) -> tuple[str, float, dict, object] | None:
    """(task, nDCG@10, the test scores, dataset revision) of an R2MED TaskResult, or None: not an
    R2MED task's (quietly), or not a TaskResult with a score (with one warning)."""
    try:
        data = run.task_result(path)
    except MalformedJSON as e:
        warn(f"{path}: not an mteb TaskResult with a test score ({e}); skipped")
        return None
    except UnreadableFile as e:
        warn(f"{path}: {e}; skipped")
        return None
    task, scores = data.get("task_name"), data.get("scores")
    tests = scores.get("test") if isinstance(scores, dict) else None
    test = tests[0] if isinstance(tests, list) and tests else None
    if not isinstance(task, str) or not isinstance(test, dict) or "main_score" not in test:
        missing = "task_name" if not isinstance(task, str) else "scores.test[0].main_score"
        warn(f"{path}: not an mteb TaskResult with a test score (no {missing}); skipped")
        return None
    if task not in SHORT_NAMES:
        return None  # another benchmark's task
    raw = test["main_score"]
    main = unit_score(raw)
    if main is None:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            warn(f"{path}: nDCG@10 {_shown(raw)} is not a number (a {type(raw).__name__}); skipped")
        else:
            warn(f"{path}: nDCG@10 {_shown(raw)} is not a score between 0 and 1; skipped")
        return None
    return task, main, test, data.get("dataset_revision")


def _metrics(path: Path, test: dict, warn) -> dict[str, float]:
    """The metrics of a test score block that are scores (finite reals in [0, 1]); one warning
    naming the file when a metric of a family that is always a score (nDCG, MAP, recall, precision,
    MRR, hit rate, accuracy) holds something else. Others (mteb's normalised AUCs, which can be
    negative; texts, lists) are not shown."""
    shown, bad = {}, []
    for name, value in test.items():
        if name == "main_score":
            continue
        score = unit_score(value)
        if score is not None:
            shown[name] = score
        elif SCORE_FAMILIES.match(str(name)) and not isinstance(value, (str, list, dict)) and value is not None:
            bad.append(f"{name} {_shown(value)}")
    if bad:
        warn(f"{path}: {', '.join(bad[:3])}{f' (and {len(bad) - 3} more)' if len(bad) > 3 else ''} not a score "
             "between 0 and 1; left out")
    return shown


def _shown(value: object, limit: int = 40) -> str:
    """A number or text from a file in a message: its repr (a number's as a float's, where it
    fits one), shortened."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            value = float(value)
        except OverflowError:  # (JSON's readers give integers of at most 4300 digits)
            pass
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def shipped_copy(run: RunFolder) -> bool:
    """Whether ``run`` is a copy of the published results this package ships (``results/`` of the
    repository): a ``<org__system>/published`` folder whose files are exactly those of the
    package's manifest, byte for byte (their sha256). Reads regular files only, within a TaskResult's
    size."""
    if run.local or run.in_experiment:
        return False
    prefix = f"{run.path.parent.name}/{run.path.name}/"
    expected = {name[len(prefix):]: digest for name, digest in shipped_files().items() if name.startswith(prefix)}
    if not expected:
        return False
    found = []
    for where, folders, files in os.walk(run.path):  # follows no link to a folder
        if any(os.path.islink(os.path.join(where, f)) for f in folders):
            return False
        found += [Path(where, f).relative_to(run.path).as_posix() for f in files]
        if len(found) > len(expected):
            return False
    if set(found) != set(expected):
        return False
    try:
        return all(hashlib.sha256(read_bytes(run.path / name, MAX_TASK_RESULT_BYTES)).hexdigest() == digest
                   for name, digest in expected.items())
    except UnreadableFile:
        return False


def _run_row(run: RunFolder, record: dict, key: tuple, local: bool) -> Row:
    meta = run.model_meta()
    name = record.get("label") or record.get("name") or meta.get("name") or key[0]
    kwargs = meta.get("experiment_kwargs")
    if not record and isinstance(kwargs, dict) and kwargs:  # an mteb experiment, named as mteb names it
        name = f"{name} ({', '.join(f'{k}={v}' for k, v in sorted(kwargs.items()))})"
    config = record.get("config") if isinstance(record.get("config"), dict) else None
    components = record.get("components") if isinstance(record.get("components"), dict) else {}
    stages = {k: v if isinstance(v, dict) else {} for k, v in components.items()}
    labels = {k: str(stages.get(k, {}).get("label") or "-") for k in ("rewriter", "retriever", "reranker")}
    if not components:  # results r2med did not write: the model is the retriever
        labels["retriever"] = str(meta.get("name") or key[0]).split("/")[-1]
    return Row(str(name), labels["rewriter"], labels["retriever"], labels["reranker"],
               source=("local data: " if local else "") + str(run.path), key=key, config=config,
               display_name=str(record.get("name") or name), local=local, kind="run", provenance=[str(run.path)],
               components=stages)


def recorded_command(record: dict, tasks: list[str], *, output: Path | None = None,
                     local: bool = False) -> tuple[str, str | None, dict[str, str]]:
    """The command a run's record stores, for the run's ``tasks`` (mteb names), with what makes
    it this run's: ``--tasks`` when it has fewer than the eight datasets, ``--output`` when its
    results folder (``output``, where they were found) is not the default ``results``, and for a
    run on ``local`` data the ``--data-dir`` it read, as given (:func:`recorded_data_dir`; a
    placeholder where it cannot be printed). Rerun as printed (a placeholder filled in), it reuses
    every task. Also a note when there is no command to show (no command can build the run, or the
    stored one no longer builds the stored configuration: a plugin's defaults changed since), and
    each placeholder with what to put there. An ``r2med-run`` command is checked by building it
    with the installed plugins, so a printed command never runs another system."""
    from ..running.request import command_line

    words = record.get("command")
    if "published" in record or not isinstance(record.get("config"), dict):
        return "", None, {}
    if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
        note = record.get("command_note")
        return "", f"no command: {note}" if isinstance(note, str) and note else "no command recorded", {}
    if words[0] != "r2med-run":
        return shlex.join(words), None, {}
    built, problem = _command_check(words)
    if built is None:
        return "", f"no command: its recorded command no longer builds here ({problem})", {}
    if built != canonical(record.get("config")):
        changed = "; ".join(differences(record.get("config") or {}, built))
        return "", f"no command: its recorded command now builds another configuration ({changed})", {}
    every = {t.name for t in R2MED_TASKS}
    shown = None if set(tasks) == every else [SHORT_NAMES.get(t, t) for t in sorted(tasks, key=_task_order)]
    data_dir, placeholders = recorded_data_dir(record, tasks) if local else (None, {})
    return command_line(words, tasks=shown, data_dir=data_dir, output=output), None, placeholders


def recorded_data_dir(record: dict, tasks: list[str]) -> tuple[Path, dict[str, str]]:
    """The ``--data-dir`` a run on local data read for ``tasks``, as its record keeps it
    (``data_dirs``, written by ``r2med-run``) when it is one folder given as a relative path;
    else :data:`DATA_DIR_PLACEHOLDER`, with what to put there and why it is not printed (an
    absolute path is the machine's and its user's own; an earlier r2med recorded none)."""
    stored = record.get("data_dirs")
    given = {stored.get(t) if isinstance(stored, dict) else None for t in tasks}
    if len(given) == 1 and isinstance(folder := next(iter(given)), str) and portable_path(folder):
        return Path(folder), {}
    if not all(isinstance(g, str) for g in given):
        why = "the run's record does not name it (results written by an earlier r2med)"
    elif len(given) > 1:
        why = "the run's datasets were read from different folders (rerun each with its own)"
    else:
        why = "recorded as an absolute path of the machine it ran on (its r2med/pipeline.json, data_dirs)"
    return Path(DATA_DIR_PLACEHOLDER), {
        DATA_DIR_PLACEHOLDER: f"the folder of local data the run read (its --data-dir): {why}"}


def portable_path(text: str) -> bool:
    """Whether a recorded path can be printed in a command others may run: relative (to the folder
    the run was started in), not a user's home (``~``) and nothing a terminal would act on."""
    return bool(text) and not Path(text).is_absolute() and not text.startswith("~") and text.isprintable() \
        and not re.match(r"^[A-Za-z]:[\\/]", text)


def _task_order(task: str) -> int:
    names = [t.name for t in R2MED_TASKS]
    return names.index(task) if task in names else len(names)


def merge(rows: list[Row]) -> list[Row]:
    """One row per identity; a later source with different numbers adds a note to the first. A run
    joins a published row only when it is that row's configuration on official data: the row of
    the run's name, else a row named by it and a parenthesis ("NV-Embed-v2 + monoBERT
    (rerank_k=100)", a repository run of another setting)."""
    merged: dict[tuple, Row] = {}
    commands: dict[str, dict | None] = {}
    for row in rows:
        key = row.key
        if row.config is not None and not row.local:
            name = row.display_name.lower()
            published_keys = [k for k in merged if len(k) == 2 and k[0] == "published"]  # (a run's key has 4 parts)
            candidates = [merged[k] for k in published_keys if k[1] == name]
            candidates += [merged[k] for k in published_keys if k[1].startswith(name + " (")]
            for published in candidates:
                if not published.command:
                    continue
                if published.command not in commands:
                    commands[published.command] = command_config(published.command)
                if commands[published.command] == canonical(row.config):
                    key = published.key
                    break
        if key not in merged:
            merged[key] = row
            continue
        first = merged[key]
        if key != row.key:  # a run of a published row's configuration: pages show it beside the row
            first.joined.append(row)
        differing = [SHORT_NAMES[t] for t in row.scores if t in first.scores and abs(first.scores[t] - row.scores[t]) > 1e-9]
        if differing:
            first.notes.append(f"{row.source} differs on {', '.join(differing)}")
        if first.kind != "run":
            continue  # a published row's figures are the published ones: a run never fills one in
        for task, value in row.scores.items():
            if task not in first.scores and task in row.per_query:  # its per-query scores come with it
                first.per_query[task], first.data[task] = row.per_query[task], row.data[task]
                for mine, theirs in ((first.judged, row.judged), (first.condensed, row.condensed),
                                     (first.relevant_only, row.relevant_only)):
                    if task in theirs:
                        mine[task] = theirs[task]
            first.scores.setdefault(task, value)
    return list(merged.values())


def ranked(rows: list[Row]) -> list[Row]:
    """The board's rows, then the local rows (:data:`SECTIONS`), each section ranked on its own:
    systems with an average first (highest first, ties in listed order), then the incomplete. A
    run on local data never ranks between the board's rows, nor moves a published row's rank."""
    out = []
    for section in SECTIONS:
        rows_in = [r for r in rows if r.section == section]
        with_average = [r for r in rows_in if r.average is not None]
        without = [r for r in rows_in if r.average is None]
        with_average.sort(key=lambda r: -r.average)
        without.sort(key=lambda r: -(sum(r.scores.values()) / max(len(r.scores), 1)))
        out += with_average + without
    return out


def section_ranks(rows: list) -> list[int]:
    """Each row's rank within its section (:attr:`Row.section`), for rows in rank order: the
    board's rows 1, 2, …, the local rows 1, 2, … again."""
    seen: dict[str, int] = {}
    ranks = []
    for row in rows:
        section = getattr(row, "section", BOARD_SECTION)
        seen[section] = seen.get(section, 0) + 1
        ranks.append(seen[section])
    return ranks


def select(rows: list[Row], *, tasks: list[str] | None = None, rewriter: str | None = None,
           retriever: str | None = None, reranker: str | None = None, top: int | None = None,
           include_local: bool = False) -> tuple[list[Row], list[str]]:
    """Filters; ``tasks`` (mteb task names) narrows the columns and the average to those datasets,
    and ranks by their average, each section apart (:func:`ranked`); ``top``: the first rows of each
    section. Runs on local data are left out unless ``include_local``."""
    tasks = [t.name for t in R2MED_TASKS if tasks is None or t.name in tasks]

    def has(text: str | None, *values: str) -> bool:
        return text is None or any(text.lower() in v.lower() for v in values)

    out = [r for r in rows if (include_local or not r.local) and has(rewriter, *r.component_names("rewriter"))
           and has(retriever, *r.component_names("retriever"), r.system)
           and has(reranker, *r.component_names("reranker"))]
    if len(tasks) < len(R2MED_TASKS):  # rank by these datasets' own average (stable: ties keep the overall order)
        out.sort(key=lambda r: (SECTIONS.index(r.section), r.average_over(tasks) is None,
                                -(r.average_over(tasks) or 0.0)))
    if top:  # the first of each section
        out = [r for section in SECTIONS for r in [r for r in out if r.section == section][:top]]
    return out, tasks


# Dataset headers of the terminal table, short enough for 120 columns (explained in its caption).
ABBREVIATIONS = {"Biology": "Bio", "Bioinformatics": "Binf", "Medical-Sciences": "MedSc", "MedXpertQA-Exam": "MedXQ",
                 "MedQA-Diag": "MedQA", "PMC-Treatment": "PMC-T", "PMC-Clinical": "PMC-C", "IIYi-Clinical": "IIYi"}
ORIGINS = {"leaderboard": "board", "repository": "repo", "paper": "paper", "mteb": "mteb", "run": "run",
           "local": "local"}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """A text cell that a spreadsheet will not run: one starting like a formula gets a leading
    apostrophe (OWASP's advice against CSV injection), control characters are shown escaped."""
    return printable("'" + text if text.startswith(FORMULA_START) else text)


MARKDOWN_SYNTAX = re.compile(r"([\\`*_\[\]()!~|])")


def markdown_cell(text: str) -> str:
    """A text cell for a markdown table, shown as the text it is: HTML escaped (no markup or
    script), and each character markdown gives a meaning in a cell backslash-escaped (``|``: no
    extra cell; ``[``, ``]``, ``(``, ``)``, ``!``: no link or image; ``*``, ``_``, ``~``, backticks:
    no emphasis or code); control characters shown escaped."""
    return MARKDOWN_SYNTAX.sub(r"\\\1", html.escape(printable(text), quote=False))


# The published agents' LLMs (``-o source=``) and the models a live run serves in their place.
AGENT_MODELS = {("search-o1", "qwq-32b"): "Qwen/QwQ-32B", ("search-o1", "qwen3-32b"): "Qwen/Qwen3-32B",
                ("search-r1", "qwen-7b-ins"): "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-ppo",
                ("search-r1", "qwen-3b-ins"): "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-3b-it-em-ppo"}
LIVE_PREFIX = "live: "  # a line of the --commands table after the table, which sweeps do not run


def live_command(command: str) -> str:
    """``r2med-run --plugin search-o1 -o source=qwq-32b --plugin bm25`` as the live run:
    ``... -o llm=vllm:Qwen/QwQ-32B ...`` (empty for any other command)."""
    words = shlex.split(command) if command else []
    for i, word in enumerate(words[:-2]):
        if word == "--plugin" and words[i + 2] == "-o" and words[i + 3:i + 4] and \
                (words[i + 1], words[i + 3].removeprefix("source=")) in AGENT_MODELS:
            model = AGENT_MODELS[words[i + 1], words[i + 3].removeprefix("source=")]
            return shlex.join([*words[:i + 3], f"llm=vllm:{model}", *words[i + 4:]])
    return ""


def records_of(rows: list[Row], tasks: list[str], commands: bool = False) -> tuple[list[str], list[list]]:
    """Header and one record per row, in rank order, as the text formats show them; a row's rank is
    its rank within its section (:func:`section_ranks`: the board's, then the local rows')."""
    ranks = section_ranks(rows)
    if commands:
        return ["Rank", "System", "Avg", "Command", "Live command", "Placeholders"], [
            [i, r.system, r.average_over(tasks), r.command or None, r.live_command or None,
             placeholder_text(r.placeholders)] for i, r in zip(ranks, rows)]
    header = ["Rank", "System", "Rewriter", "Retriever", "Reranker", "Avg", "Avg 95% CI", "Tied",
              *(SHORT_NAMES[t] for t in tasks), "Judged@10", "Judged@10 is", "USD/query", "Seconds/query", "Source"]
    records = []
    for i, r in zip(ranks, rows):
        avg = r.average_over(tasks)
        marks = ("" if avg is not None else " (incomplete)") + ("; " + "; ".join(r.notes) if r.notes else "")
        records.append([i, r.system, r.rewriter, r.retriever, r.reranker, avg, interval_text(r.average_ci),
                        TIED_TEXT[r.tied], *(r.scores.get(t) for t in tasks), r.judged_over(tasks),
                        r.judged_means(tasks), cost_text(r.usd_per_query), cost_text(r.seconds_per_query),
                        r.source + marks])
    return header, records


TIED_TEXT = {True: "yes", False: "no", None: None}  # the Tied column (None: no per-query scores to compare)


def interval_text(ci: list[float] | None) -> str | None:
    """An interval as the text formats show it: "38.12–44.90"."""
    return None if ci is None else f"{number(ci[0])}–{number(ci[1])}"


def cost_text(value: float | None) -> str | None:
    """A cost or time per query as the text formats show it: 6 significant digits ("0.000213")."""
    return None if value is None else f"{value:.6g}"


def placeholder_text(placeholders: dict[str, str]) -> str | None:
    """A command's placeholders as one cell: "DATA_DIR: the folder of local data …"."""
    return "; ".join(f"{word}: {what}" for word, what in placeholders.items()) or None


def json_records(rows: list[Row], tasks: list[str], commands: bool = False) -> list[dict]:
    """One object per row, in rank order, as ``--format json`` writes them: the text formats'
    columns under snake_case keys (the datasets' under their short names; ``rank``, the row's rank
    within its ``section``, ``"board"`` or ``"local"``), whether the row is on local data and,
    unless ``commands``, its statistics as numbers (with ``commands``: each placeholder of its
    command, and what to put there)."""
    header, records = records_of(rows, tasks, commands)
    keys = ([h.lower().replace(" ", "_") for h in header] if commands else
            ["rank", "system", "rewriter", "retriever", "reranker", "average", "average_ci", "tied",
             *(SHORT_NAMES[t] for t in tasks), "judged_at_10", "judged_at_10_is", "usd_per_query",
             "seconds_per_query", "source"])
    keys = ["average" if k == "avg" else k for k in keys]

    def extra(r: Row) -> dict:  # the statistics as numbers (the records hold their text)
        if commands:
            return {"placeholders": dict(r.placeholders)}
        return {"kind": r.kind, "origin": r.origin, "provenance": r.provenance, "average_ci": r.average_ci,
                "tied": r.tied, "tie_p": r.tie_p, "tie_best": r.tie_best,
                "ci": {SHORT_NAMES[t]: r.ci[t] for t in tasks if t in r.ci},
                "judged": {SHORT_NAMES[t]: r.judged[t] for t in tasks if t in r.judged},
                "ndcg_at_10_condensed": {SHORT_NAMES[t]: r.condensed[t] for t in tasks if t in r.condensed},
                "only_relevant_judged": {SHORT_NAMES[t]: r.relevant_only[t] for t in tasks if t in r.relevant_only},
                "usd_per_query": r.usd_per_query, "seconds_per_query": r.seconds_per_query}
    return [{**dict(zip(keys, rec)), "section": r.section, "local_data": r.local, **extra(r)}
            for rec, r in zip(records, rows)]


@dataclass
class Leaderboard:
    """The leaderboard as ``r2med leaderboard`` shows it (:func:`r2med_tasks.rank_systems`): ``rows``
    ranked and filtered, in rank order (the board's rows, then the local rows, each section ranked
    on its own: :attr:`Row.section`), each with its ties and intervals marked; ``tasks``, the
    datasets shown (mteb task names), whose average ranks; ``warnings``, what reading the folders
    skipped or doubted, one line each."""

    rows: list[Row]
    tasks: list[str]
    warnings: list[str] = field(default_factory=list)
    reproductions: list[dict] = field(default_factory=list)  # r2med reproduce's verdicts kept in the folders

    def records(self, *, commands: bool = False) -> list[dict]:
        """The rows as ``--format json`` writes them (:func:`json_records`)."""
        return json_records(self.rows, self.tasks, commands)

    def render(self, fmt: str = "table", *, commands: bool = False, wide: bool = False, width: int = 120,
               data_dir: Path | None = None) -> str:
        """The text ``--format`` writes (:func:`render`); ``data_dir``: for the HTML page's per-query
        view, the folder runs on local data read (their grades)."""
        return render(self.rows, self.tasks, fmt, commands=commands, wide=wide, width=width, data_dir=data_dir,
                      reproductions=self.reproductions)


def render(rows, tasks: list[str], fmt: str, commands: bool = False, wide: bool = False, width: int = 120,
           data_dir: Path | None = None, reproductions: list[dict] | None = None) -> str:
    """The leaderboard as text in one format (table, markdown, csv, json, html); ``commands``: rank,
    system, average and the command reproducing each published row; ``wide``: the terminal table
    with every column (else one that fits 120 columns). The local rows are a section of their own
    in each: below the board's under their own title (table, markdown, the page), or marked
    ``local`` in the ``Section`` column (csv) and ``section`` field (json)."""
    if fmt == "html":
        from .html import render_html

        return render_html(rows, tasks, data_dir=data_dir, reproductions=reproductions or [])
    if fmt == "json":
        return json.dumps(json_records(rows, tasks, commands), indent=2) + "\n"
    header, records = records_of(rows, tasks, commands)

    def cell(v):
        return "" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)

    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*header, "Section"])
        writer.writerows([[csv_cell(v) if isinstance(v, str) else cell(v) for v in rec] + [r.section]
                          for rec, r in zip(records, rows)])
        return buffer.getvalue()
    if fmt == "markdown":
        def table(part: list[list]) -> list[str]:
            return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                    *("| " + " | ".join(markdown_cell(cell(v)) for v in rec) + " |" for rec in part)]

        lines = []
        for section in SECTIONS:
            part = [rec for rec, r in zip(records, rows) if r.section == section]
            if part and section == LOCAL_SECTION:
                lines += ["", f"**{markdown_cell(LOCAL_TITLE)}**", ""]
            if part or section == BOARD_SECTION and not rows:
                lines += table(part)
        notes = _notes(rows, tasks, commands=commands, wide=True)
        return "\n".join(lines + ([""] + [markdown_cell(n) for n in notes] if notes else [])) + "\n"
    return terminal_table(rows, tasks, header, records, commands=commands, wide=wide, width=width)


def _notes(rows, tasks: list[str], *, commands: bool, wide: bool) -> list[str]:
    """The lines below a table that say what some of its cells mean: each command's placeholders
    (``commands``), and where judged@10 is P@10 (``wide``: the table has the column). (None names
    the program: ``r2med sweep`` reads a line that does as a command.)"""
    if commands:
        return [f"{word} in #{rank} {row.system} ({row.section}): {what}"
                for rank, row in zip(section_ranks(rows), rows) for word, what in row.placeholders.items()]
    if wide and any(r.judged_means(tasks) in ("P@10", "mixed") for r in rows):
        return [P_AT_10_NOTE]
    return []


def terminal_table(rows, tasks, header, records, *, commands: bool, wide: bool, width: int = 120) -> str:
    """The rich table as text. By default it fits ``width`` (≤ 120) columns: rank, system (on at
    most two lines, shortened at a word boundary), source, average (≈: tied for first) and
    the datasets under short headers, as many as fit beside a system column of at least
    :data:`SYSTEM_MIN` characters (the caption names those left out); ``wide`` (or ``--format
    json``) has every column: rewriter, retriever, reranker, the statistics, the source's path and
    notes. The local rows come after the board's, under a line of their own ("Local data"),
    ranked from 1 among themselves."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    def cell(v):
        return "" if v is None else f"{v:.2f}" if isinstance(v, float) else printable(v)

    live, left_out, tied = [], [], False
    if commands:  # the live commands below the table, where a sweep of the table does not run them
        live = [f"{LIVE_PREFIX}#{rec[0]} {rec[1]}: {rec[4]}" for rec in records if rec[4]]
        header, records = header[:4], [rec[:4] for rec in records]
    if not (wide or commands):
        tied = any(getattr(r, "tied", None) for r in rows)
        shown = _fitting(rows, tasks, width, tied)
        left_out = [t for t in tasks if t not in shown]
        header = ["#", "System", "Src", "Avg", *(ABBREVIATIONS[SHORT_NAMES[t]] for t in shown)]
        records = [[i, r.system, ORIGINS[r.origin], _average_cell(r, tasks, tied), *(r.scores.get(t) for t in shown)]
                   for i, r in zip(section_ranks(rows), rows)]
        labels = [LOCAL_LABEL] if any(getattr(r, "local", False) for r in rows) else []
        system_width = min(SYSTEM_MAX, max([6, *(len(printable(r.system)) for r in rows), *map(len, labels)]),
                           max(1, width - _width_without_system(rows, tasks, shown, tied)))
        for rec in records:
            rec[1] = two_lines(printable(rec[1]), system_width)
    table = Table(title="R2MED leaderboard: nDCG@10 ×100", title_justify="left", box=box.SIMPLE_HEAD,
                  caption_justify="left")
    numeric = {"Rank", "#", "Avg", "Judged@10", "USD/query", "Seconds/query", *SHORT_NAMES.values(),
               *ABBREVIATIONS.values()}
    for col in header:
        table.add_column(col, justify="right" if col in numeric else "left",
                         no_wrap=col in numeric or not (wide or commands),
                         overflow="fold" if col == "Command" or wide else "ellipsis",
                         max_width=None if wide or col != "System" else SYSTEM_MAX)
    local = any(getattr(r, "local", False) for r in rows)
    for rec, row in zip(records, rows):  # (the default table's System cells are printable already, wrapped on purpose)
        if getattr(row, "local", False) and row is next(r for r in rows if getattr(r, "local", False)):
            if row is not rows[0]:
                table.add_section()
            table.add_row("", LOCAL_LABEL, *([""] * (len(header) - 2)))
        table.add_row(*(escape(v if i == 1 and not (wide or commands) else cell(v)) for i, v in enumerate(rec)))
    if not (wide or commands):
        table.caption = ("  ".join(f"{ABBREVIATIONS[SHORT_NAMES[t]]}={SHORT_NAMES[t]}" for t in tasks if t not in left_out) +
                         (f"\nNot shown at {width} columns: {', '.join(SHORT_NAMES[t] for t in left_out)} (a wider "
                          "terminal or --wide shows them)." if left_out else "") +
                         "\nSrc: board = leaderboard, repo = authors' repository, paper = another paper, run = "
                         "your run, mteb = MTEB results, local = local data. No Avg: incomplete. " +
                         (f"{TIE_MARK}: tied for first (not separable from the best row). " if tied else "") +
                         "--wide: every column." + (f"\n{LOCAL_TITLE}." if local else ""))
    console = Console(file=io.StringIO(), width=1000 if wide else width, highlight=False, color_system=None,
                      force_terminal=False)
    console.print(table, crop=False)
    notes = ([f"{LOCAL_TITLE}."] if local and (wide or commands) else []) + _notes(rows, tasks, commands=commands,
                                                                                   wide=wide)
    if notes:
        console.print()
        for line in notes:
            console.print(printable(line), soft_wrap=True, markup=False)
    if live:
        console.print("The search agents' rows replay their published generations (R2MED did not say which "
                      "corpus its agents searched); to run the agents live, searching the task's corpus:",
                      soft_wrap=True)
        for line in live:
            console.print(printable(line), soft_wrap=True, markup=False)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines()) + "\n"


LOCAL_LABEL = "Local data"  # the terminal table's line above the local rows (LOCAL_TITLE below says what they are)
SYSTEM_MIN, SYSTEM_MAX = 18, 40  # the terminal table's System column: datasets give way below the minimum


def _average_cell(row, tasks, tied: bool) -> str:
    avg = row.average_over(tasks)
    text = "" if avg is None else f"{avg:.2f}"
    return f"{text} {TIE_MARK if getattr(row, 'tied', None) else ' '}" if tied else text


def _width_without_system(rows, tasks: list[str], shown: list[str], tied: bool) -> int:
    """The terminal table's width less its System column's text: every other column's widest cell
    (the average is over ``tasks``; ``shown``: the datasets with a column), and the box's spacing (an
    edge, and a space either side of each column)."""
    widths = [len(str(max(len(rows), 1))), max([3, *(len(ORIGINS[r.origin]) for r in rows)]),
              max([3, *(len(_average_cell(r, tasks, tied)) for r in rows)])]
    for t in shown:
        widths.append(max([len(ABBREVIATIONS[SHORT_NAMES[t]]), *(len(f"{r.scores[t]:.2f}") for r in rows if t in r.scores)]))
    return sum(widths) + 3 * (len(widths) + 1) + 1


def _fitting(rows, tasks: list[str], width: int, tied: bool) -> list[str]:
    """The datasets that fit in ``width`` beside rank, a System column of at least
    :data:`SYSTEM_MIN`, source and average: the first ones, in the table's order."""
    shown = list(tasks)
    while shown and _width_without_system(rows, tasks, shown, tied) + SYSTEM_MIN > width:
        shown.pop()
    return shown


def two_lines(text: str, width: int) -> str:
    """``text`` wrapped at word boundaries (spaces, else hyphens too; a single long word folded)
    into at most two lines of ``width`` characters; where it needs more, its paths keep their last
    part (``…/name``) and the second line is shortened with :func:`shorten`."""
    import textwrap

    if len(text) <= width:
        return text
    for hyphens, fold, paths in ((False, False, False), (True, False, False), (True, True, False),
                                 (True, False, True)):  # what it takes to fit
        if paths:
            text = " ".join(_path_tail(word) for word in text.split(" "))
        lines = textwrap.wrap(text, width, break_long_words=fold, break_on_hyphens=hyphens)
        if len(lines) <= 2 and all(len(line) <= width for line in lines):
            break
    if not lines or not text.startswith(lines[0]) or len(lines[0]) > width:
        return shorten(text, width)
    rest = text[len(lines[0]):].strip()
    return f"{lines[0].rstrip()}\n{shorten(rest, width)}" if rest else lines[0]


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut only where a reader expects it: first each path
    (a word with a ``/``: a model's folder, a hub id) keeps only its last part (``…/all-MiniLM-L6-v2``,
    an option keeping its ``name=``), the longest first; then the text ends at the last word boundary
    that fits (a space; within a long word, a ``-`` or ``_``) with ``…``. Only a single word with no
    boundary is cut where it must."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    words = text.split(" ")
    for i in sorted(range(len(words)), key=lambda i: -len(words[i])):
        if len(" ".join(words)) <= width:
            break
        words[i] = _path_tail(words[i])
    text = " ".join(words)
    if len(text) <= width:
        return text
    room = width - 1
    cut = text.rfind(" ", 0, room + 1)
    if cut < room / 2:  # a long word: its own boundaries, never inside a path (but in its last part, if need be)
        start = text.rfind(" ", 0, room) + 1
        word = text[start:text.find(" ", start) if " " in text[start:] else len(text)]
        inner = max(text.rfind("-", 0, room + 1), text.rfind("_", 0, room + 1))
        if "/" not in word or cut <= 0 and inner > start + word.rfind("/"):
            cut = max(cut, inner)
    if cut <= 0:
        return text[:room] + "…"
    return text[:cut].rstrip(" +-_·,;:/") + "…"


def _path_tail(word: str) -> str:
    """A path's last part: ``/data/models/all-MiniLM-L6-v2`` as ``…/all-MiniLM-L6-v2``,
    ``model=/data/x/y`` as ``model=…/y`` (unchanged when that is no shorter)."""
    name, eq, value = word.partition("=")
    if not eq or "/" not in value or "/" in name:
        name, eq, value = "", "", word
    parts = [p for p in value.split("/") if p]
    tail = f"{name}{eq}…/{parts[-1]}" if len(parts) > 1 else word
    return tail if len(tail) < len(word) else word
