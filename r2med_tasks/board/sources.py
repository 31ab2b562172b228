"""Where the leaderboard's rows come from, and what a row is: the published rows the package ships,
users' results folders and MTEB results clones (untrusted: a folder never makes or changes a
published row), and the command that reproduces a run, checked by rebuilding its pipeline.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..scoring.evaluation import SCORE_FAMILIES, leaderboard_average, leaderboard_value
from ..files.bounded import MalformedJSON, UnreadableFile, read_bytes, unit_score
from ..components.overlap import OVERLAP_KEY, overlap_notes
from ..results.folder import ResultsFolder, runs_under
from .sections import BOARD_SECTION, ELSEWHERE_SECTION, LOCAL_SECTION
from ..results.layout import MAX_TASK_RESULT_BYTES
from .published import PUBLISHED_CSV, PUBLISHED_KINDS, mteb_record, paper_runs, published_runs, shipped_files
from .published import provenance as run_provenance
from ..results.identity import canonical, differences
from ..tasks.specs import PINNED_REVISIONS, R2MED_TASKS, SHORT_NAMES


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
    models: dict = field(default_factory=dict)  # a run's models as recorded: kind -> name, revision (run-file's: its content)
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
    costs: dict[str, dict] = field(default_factory=dict, repr=False)  # task -> what computing it cost (ResultsFolder.cost)
    # task -> whether its judgments hold only relevant documents (no grade 0): judged@10 is then P@10
    relevant_only: dict[str, bool] = field(default_factory=dict)
    placeholders: dict[str, str] = field(default_factory=dict)  # a word of the command -> what to put there
    # training data overlapping a task's source, as its models or its paper's record say (components.overlap)
    overlaps: list[dict[str, str]] = field(default_factory=list)
    # a local row's shown datasets, the ones it is ranked among (runs over other datasets are ranked apart)
    peers: tuple[str, ...] = ()

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
        """The part of the board the row is ranked in (:data:`.sections.SECTIONS`): ``"board"`` (the seed
        leaderboard's rows and your runs on R2MED's official data), ``"elsewhere"`` (rows published
        elsewhere: other papers', the authors' repository's other runs, MTEB's results), or
        ``"local"`` (a run on other data). Each is ranked on its own, so the leaderboard's rows
        keep their ranks whatever else is shown."""
        if self.local:
            return LOCAL_SECTION
        return BOARD_SECTION if self.origin in ("leaderboard", "run") else ELSEWHERE_SECTION

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
    def reasoning_tokens_per_query(self) -> float | None:
        """Reasoning tokens the LLMs reported per scored query over the row's datasets (0.0: none
        reported, or no LLM called; None as above)."""
        costs = self._costs()
        return sum((c["usage"] or {}).get("reasoning_tokens", 0) for c in costs) / self._n_queries() if costs else None

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


PUBLISHED_CHOICES = ("leaderboard", "papers", "all", "none")
JUDGED_MEANS = {True: "P@10", False: "coverage"}  # what judged@10 is, by whether only relevant documents are judged
DATA_DIR_PLACEHOLDER = "DATA_DIR"  # the word a printed command has for a local data folder it cannot name


def published_rows(path: Path = PUBLISHED_CSV, which: str = "leaderboard") -> list[Row]:
    """The published rows: the leaderboard's (``which="leaderboard"``), those and the runs published
    in other papers (``"papers"``), those and the authors' repository's other runs (``"all"``), or none."""
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
    if which in ("all", "papers"):
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
    if run["first_stage"] != "-":
        row.notes.append(f"reranks {run['first_stage']} with {run['llm']} ({run['paper']}, {run['table']})")
    if run.get("note"):
        row.notes.append(run["note"])
    row.overlaps = overlap_notes(run.get(OVERLAP_KEY)) or []
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


@functools.cache  # a published row's command is built once per process, however often runs are compared with it
def command_config(command: str) -> dict | None:
    """The configuration a published row's ``r2med-run`` command builds, parsed as ``r2med-run``
    parses it (None when it cannot be built here)."""
    return _command_check(command)[0]


def _command_check(command: str | list[str]) -> tuple[dict | None, str | None]:
    """(configuration, None) of a stored command, or (None, why it cannot be built here)."""
    from ..errors import UserError
    from ..running.pipelines import build_pipeline
    from ..running.request import parse_command

    try:
        request = parse_command(command)
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
    """Rows from a results folder in mteb's layout, one per model, revision, experiment and kind of
    data; ``mteb``: the folder is the MTEB results repository's. Everything in it is untrusted: a file
    that is not a readable mteb TaskResult, or whose nDCG@10 is not a score, is skipped with one
    warning naming it, never silently. A folder never makes a published row: one claiming to be
    published is either the shipped copy (appended to ``shipped``) or, with one warning, a run."""
    systems: dict[tuple, Row] = {}
    folders: dict[tuple, ResultsFolder] = {}
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
    """MTEB's R2MED results as the package ships them, read as ``--mteb-results`` reads that
    repository's folders, with the same identity (so they merge with your runs of the model and
    revision, and with ``--mteb-results`` rows); labelled with the record's commit."""
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


def _read_per_query(row: Row, run: ResultsFolder, task: str, main: float, identity: dict | None, warn) -> None:
    """A run's per-query scores of ``task`` into ``row``, with the data identity they were scored
    on: what its intervals and ties are computed from. A per-query file that is no such table, holds
    no score, or does not average to the TaskResult's nDCG@10 is left out with one warning."""
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


def _task_result(run: ResultsFolder, path: Path, warn) -> tuple[str, float, dict, object] | None:
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


def shipped_copy(run: ResultsFolder) -> bool:
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


def _run_row(run: ResultsFolder, record: dict, key: tuple, local: bool) -> Row:
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
               components=stages, models=record["models"] if isinstance(record.get("models"), dict) else {},
               overlaps=recorded_overlaps(stages))


def recorded_overlaps(stages: dict[str, dict]) -> list[dict[str, str]]:
    """The training-overlap notes a run's record keeps for its stages and their members, each with
    the model it is about (the stage's label); a record's notes that are no such list are left out."""
    from ..running.pipelines import STAGE_ORDER

    out = []
    for stage in STAGE_ORDER:
        entry = stages.get(stage, {})
        members = entry.get("members") if isinstance(entry.get("members"), list) else []
        for part in (entry, *(m for m in members if isinstance(m, dict))):
            for note in overlap_notes(part.get(OVERLAP_KEY)) or []:
                note = {"model": str(part.get("label") or part.get("component") or stage), **note}
                if note not in out:
                    out.append(note)
    return out



def recorded_command(record: dict, tasks: list[str], *, output: Path | None = None,
                     local: bool = False) -> tuple[str, str | None, dict[str, str]]:
    """The command a run's record stores, with what makes it this run's (``--tasks``, ``--output``,
    the ``--data-dir`` or a placeholder), so that rerun as printed it reuses every task; else a note
    saying why there is none. An ``r2med-run`` command is checked by building it with the installed
    plugins, so a printed command never runs another system."""
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


# The published agents' LLMs (``-o source=``) and the models a live run serves in their place.
AGENT_MODELS = {("search-o1", "qwq-32b"): "Qwen/QwQ-32B", ("search-o1", "qwen3-32b"): "Qwen/Qwen3-32B",
                ("search-r1", "qwen-7b-ins"): "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-ppo",
                ("search-r1", "qwen-3b-ins"): "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-3b-it-em-ppo"}


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
