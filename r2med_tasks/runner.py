"""Evaluate a pipeline over tasks: load data, rewrite, retrieve, rerank, score, write.

A task whose stored results have the run's identity (``results.py``) is reused, unless
overwriting; any other is computed, with one line saying what changed. Results are written
atomically after each task, so a killed run resumes where it stopped and nothing finished is lost.
Each results folder is locked for the run, so two processes never interleave one folder.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .combine import default_query
from .components import RerankDepth, ReportsUsage, combines_generated
from .context import CompositeContext, Context
from .datafiles import hash_ahead
from .taskdata import Query, TaskData
from .errors import FILE_PROBLEMS, PluginError, UserError
from .evaluation import check_run, score
from .journal import Journal
from .layout import GENERATIONS
from .llm import RetryLine, Usage
from .outcomes import RunOutcome, TaskOutcome, average_ci
from .pipelines import STAGE_ORDER, Pipeline, Stage, without_secrets
from .results import ResultFolder, Status, locked
from .runs import rank
from .tasks import TaskSpec


LOADING = "Loading model"  # a phase inside another (context.loading()): timed apart, as the "load" stage
STAGES = {LOADING: "load", "Rewriting queries": "rewrite", "Encoding corpus": "index", "Encoding queries": "search",
          "Reranking": "rerank", "Scoring": "score"}  # phase -> the stage a cost file times (layout.COST_STAGES)


_APPENDING = threading.Lock()


class Phases:
    """Wall-clock phases of one task, in the shape mteb stores as ``evaluation_phases``; and, for its
    cost file, how deep each phase nests and what LLM usage the components it called added
    (``phase(name, *components)``: those that report usage, ``ReportsUsage``)."""

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
    def __call__(self, name: str, *components: Any):
        watched = [(c, c.usage, c.usage.tally()) if isinstance(c.usage, Usage) else (c, None, None)
                   for c in components if isinstance(c, ReportsUsage)]
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


def _added(watched: list[tuple[Any, Usage | None, Usage | None]]) -> Usage | None:
    """The usage the watched components added since their tallies were taken: what a component's
    tally holds now, less what it held (when it is the same tally; a new one is all new)."""
    total = None
    for component, before, tally in watched:
        now = component.usage
        if not isinstance(now, Usage):
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


class SubProgress:
    """The bars a component asks for through ``context.progress(description, total)``, which
    returns ``advance(n)``; they vanish when the call that asked for them returns."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.bars = progress, []

    def __call__(self, description: str, total: int):
        bar = self.progress.add_task(f"  {description}", total=total)
        self.bars.append(bar)
        return lambda n: self.progress.advance(bar, n)

    def clear(self) -> None:
        for bar in self.bars:
            self.progress.remove_task(bar)
        self.bars.clear()


def retry_row(progress: Progress) -> RetryLine:
    """The run's API retries (``Context.retries``) as one row of the progress display, replaced by
    each retry and hidden while none waits: not a printed line per retry."""
    row = progress.add_task("", total=None, visible=False)
    return RetryLine(lambda line: progress.update(row, description=f"  [yellow]{escape(line or '')}[/]",
                                                  visible=line is not None))


@contextmanager
def calling(stage: Stage, task: TaskSpec, what: str, context: Context):
    """Turn a component's crash into a one-line error naming the plugin, the task and the step;
    its progress bars go when the call ends."""
    try:
        yield
    except UserError:
        raise
    except OSError as e:
        if e.filename is not None and e.errno in FILE_PROBLEMS:  # a file it wrote or read (a full disk, an
            raise  # unwritable cache): the error names the file and what to do, not the plugin
        raise PluginError(f"{stage.label} failed while {what} {task.name}: {type(e).__name__}: {e} "
                          "(rerun with --debug for the traceback)") from e
    except Exception as e:
        hint = (" (its methods take the arguments of docs/plugins.md#component-interfaces, task= and context= "
                "among them)" if isinstance(e, TypeError) and "unexpected keyword argument" in str(e) else "")
        raise PluginError(f"{stage.label} failed while {what} {task.name}: {type(e).__name__}: {e}{hint} "
                          "(rerun with --debug for the traceback)") from e
    finally:
        if isinstance(context.progress, SubProgress):
            context.progress.clear()


Folders = dict[bool, tuple[ResultFolder, "ResultFolder | None"]]  # local data? -> (pipeline's, first stage's)


def result_folders(pipeline: Pipeline, output: Path, *, local: bool) -> tuple[ResultFolder, ResultFolder | None]:
    """Where a run writes the tasks of one kind of data (local files or the hub): the pipeline's
    folder, and its first stage's when it reranks."""
    first = ResultFolder(output, pipeline.first_stage().spec(), local=local) if "reranker" in pipeline.stages \
        else None
    return ResultFolder(output, pipeline.spec(), local=local), first


def plan(pipeline: Pipeline, tasks: list[TaskSpec], *, output: Path, data_dir: Path | None,
         overwrite: bool) -> dict[str, Any]:
    """What a run would do, without loading data or models: stages, folders, and per task whether
    its stored results have this run's identity (reused) or not (computed, and why)."""
    only_task = len(tasks) == 1
    folders: Folders = {}
    planned = []
    for t in tasks:
        try:
            local = t.local_folder(data_dir, only_task=only_task) is not None
            data = t.data_identity(data_dir, only_task=only_task)
        except UserError as e:  # the run itself will stop here; the plan says why and goes on
            local, data = data_dir is not None, {"official": False}
            status = Status(False, f"its data cannot be read: {e}")
            folder = _claimed(folders, pipeline, output, local)[0]
        else:
            folder = _claimed(folders, pipeline, output, local)[0]
            status = folder.status(t.name, folder.spec.task_identity(t.name, data))
        planned.append({"task": t.name, "alias": t.short_name, "group": t.group, "official_data": data["official"],
                        "results_dir": str(folder.path),
                        "status": "reuse" if status.reuse and not overwrite else "compute",
                        "reason": "--overwrite" if overwrite and status.reuse else status.reason})
    folder = next(iter(folders.values()))[0]
    stages = [{"kind": s.spec.kind, "component": s.spec.name, "plugin": s.entry.plugin.name,
               "options": {k: without_secrets(s.options[k]) for k in sorted(s.options)},
               **({"member_options": s.member_options} if s.member_options else {})} for s in pipeline.ordered()]
    return {
        "pipeline": folder.display_name, "label": folder.label, "model_name": folder.name,
        "revision": folder.revision, "experiment": folder.experiment, "experiment_kwargs": folder.spec.variant,
        "results_dirs": [str(f.path) for f, _ in folders.values()], "top_k": pipeline.top_k, "stages": stages,
        "first_stage_dirs": [str(f.path) for _, f in folders.values() if f is not None],
        "tasks": planned,
    }


@contextmanager
def writing(folders: Sequence[ResultFolder], on_wait) -> Iterator[None]:
    """Hold every folder's lock and claim it (its configuration checked, a killed writer's temp
    files removed) for the tasks written inside; a folder no task was written to is not left
    behind. Every writer of results goes through here: a run, a composite member's saved run, a
    fusion of saved runs (``r2med fuse``)."""
    with locked(list(folders), on_wait):
        try:
            for folder in folders:
                folder.claim()
            yield
        finally:
            for folder in folders:
                folder.prune()


def cached_outcome(folder: ResultFolder, task: TaskSpec, data_id: dict) -> TaskOutcome:
    """A reused task's outcome, as it was computed; what mteb reads beside it is put back if lost."""
    folder.repair_run_settings(task.name)
    return TaskOutcome.read(task, folder, status="cached", official_data=data_id["official"])


def _claimed(folders: Folders, pipeline: Pipeline, output: Path,
             local: bool) -> tuple[ResultFolder, ResultFolder | None]:
    """The folders of one kind of data, made (and their claims checked) on first use."""
    if local not in folders:
        folders[local] = result_folders(pipeline, output, local=local)
        for claimed in folders[local]:
            if claimed is not None:
                claimed.check_claim()
    return folders[local]


def run_pipeline(pipeline: Pipeline, tasks: list[TaskSpec], *, output: Path, data_dir: Path | None,
                 overwrite: bool, context: Context, console: Console) -> RunOutcome:
    """Evaluate ``pipeline`` on ``tasks``; ``context`` is what every component call gets (the runner
    adds the task's corpus, progress bars and kept rows, and a composite's services: its members'
    saved runs). Tasks on local data and tasks on the hub's data go to folders of their own."""
    run = _Run(pipeline, tasks, output=output, data_dir=data_dir, overwrite=overwrite, console=console)
    local = run.local_folders()  # a task missing from --data-dir stops the run before any folder is made
    folders: Folders = {}
    for task in tasks:
        _claimed(folders, pipeline, output, run.is_local(task))
    with writing([f for pair in folders.values() for f in pair if f is not None], run.waiting):
        outcomes = run.tasks_in(folders, context, local)
    main = next(iter(folders.values()))[0]
    return RunOutcome(main.display_name, main.label, main.name, main.revision, main.experiment,
                      [str(f.path) for f, _ in folders.values()], outcomes, average_ci=average_ci(outcomes))


@dataclass
class _Current:
    """The task being evaluated, as saved runs and held-out scoring see it."""

    task: TaskSpec
    data: TaskData
    data_id: dict
    held_out: set[str] | None = None
    extra_scores: dict | None = None
    kept: dict[str, list[dict]] = field(default_factory=dict)  # what components asked to keep (context.keep)
    generations: list[dict] = field(default_factory=list)  # what the LLMs wrote (context.generated), as it came
    journal: Journal | None = None  # where they are appended as they come (the results folder's)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def generated(self, record: dict) -> None:
        """One query's generation record, kept and appended to the journal at once (fsynced when
        this returns; outside the lock, so the records of concurrent queries share a write)."""
        if not isinstance(record, dict) or not isinstance(record.get("query_id"), str):
            raise PluginError("context.generated(record): a dict with a 'query_id' string "
                              "(r2med_tasks.llm.records.record builds one)")
        row = json.loads(json.dumps(record, default=str, allow_nan=False))  # strict JSON, as read back
        with self.lock:
            self.generations.append(row)
        if self.journal is not None:
            self.journal.append([row])

    def kept_with_generations(self, *stages: str) -> dict[str, list[dict]]:
        """What the components kept, and the generation records of ``stages`` in the queries' order
        (each stage's, rewriter first)."""
        order = {q.id: i for i, q in enumerate(self.data.queries)}
        with self.lock:
            rows = [r for r in self.generations if r.get("stage") in stages]
        rows.sort(key=lambda r: (STAGE_ORDER.index(r["stage"]), order.get(r["query_id"], len(order))))  # stable
        return {**self.kept, **({GENERATIONS: rows} if rows else {})}


class _Run:
    """One ``run_pipeline`` call: its tasks, and the saved runs its components ask for."""

    def __init__(self, pipeline: Pipeline, tasks: list[TaskSpec], *, output: Path, data_dir: Path | None,
                 overwrite: bool, console: Console) -> None:
        self.pipeline, self.tasks, self.output, self.data_dir = pipeline, tasks, output, data_dir
        self.overwrite, self.console = overwrite, console
        self.subpipelines: dict[int, Pipeline] = {}  # id of a composite's member -> its saved runs' pipeline
        self.fresh: set[tuple[Path, str]] = set()  # saved runs computed in this run (reused under --overwrite)

    def waiting(self, message: str) -> None:
        self.console.print(f"[yellow]waiting:[/] {escape(message)}", soft_wrap=True)

    def tasks_in(self, folders: Folders, context: Context, local: list[Path]) -> list[TaskOutcome]:
        outcomes = []
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        # Bars only on a terminal: elsewhere (a log file, a pipe) they would leave blank lines.
        with Progress(*columns, console=self.console, transient=True, disable=not self.console.is_terminal) \
                as progress:
            bar = progress.add_task("", total=len(self.tasks))
            context = context.with_(progress=SubProgress(progress), retries=retry_row(progress))
            hash_ahead(local)
            for task in self.tasks:
                folder, first_folder = folders[self.is_local(task)]
                data_id = task.data_identity(self.data_dir, only_task=self.only_task)
                status = folder.status(task.name, folder.spec.task_identity(task.name, data_id))
                if status.reuse and not self.overwrite:
                    outcomes.append(cached_outcome(folder, task, data_id))
                else:
                    if status.reason and not self.overwrite:
                        self.console.print(f"{escape(task.short_name)}: recomputing, {escape(status.reason)}",
                                           soft_wrap=True)

                    def step(text: str, _task=task) -> None:
                        progress.update(bar, description=f"{_task.short_name}: {text}")
                    _, _, official = self.evaluate(task, folder, first_folder, step=step, context=context)
                    outcomes.append(TaskOutcome.read(task, folder, status="computed", official_data=official))
                progress.advance(bar)
        return outcomes

    def local_folders(self) -> list[Path]:
        """The local data folders of the run's tasks (none for the hub's); a one-line UserError
        for the first task that has none in ``--data-dir``."""
        folders = [task.local_folder(self.data_dir, only_task=self.only_task) for task in self.tasks]
        return [f for f in folders if f is not None]

    def is_local(self, task: TaskSpec) -> bool:
        """Whether the task's data is read from local files (its results then go to the local-data tree)."""
        return task.local_folder(self.data_dir, only_task=self.only_task) is not None

    @property
    def only_task(self) -> bool:
        return len(self.tasks) == 1

    def evaluate(self, task: TaskSpec, folder: ResultFolder, first_folder: ResultFolder | None, *, step,
                 context: Context) -> tuple[float, int, bool]:
        """Compute and save one task; returns its nDCG@10, number of scored queries and whether its
        data is R2MED's official data."""
        pipeline = self.pipeline
        started = time.time()
        phase = Phases()
        step("loading data")
        with phase("Data loading"):
            data: TaskData = task.load(self.data_dir, only_task=self.only_task, cache_dir=context.cache_dir)
        data_id = task.data_identity(self.data_dir, only_task=self.only_task, revision=data.revision)
        journal = Journal(folder.generations_journal(task.name), "the generation records")
        journal.path.unlink(missing_ok=True)  # a killed run's: this run's come again (its answers from the cache)
        current = _Current(task, data, data_id, journal=journal)
        context = self.task_context(context, current, phase, step)
        for warning in data.warnings:
            self.console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)

        reused = first_folder is not None and not self.overwrite and reusable(first_folder, task, data_id)
        first_cost = None
        if reused:
            step("first stage from its saved run")
            ranked = first_folder.read_run(task.name)  # a reranker reuses the first stage, never recomputes it
            first_cost = first_folder.cost(task.name)  # what computing it cost, counted in this task's
            for record in first_folder.generations(task.name):  # and what its LLM wrote, kept with this task's
                current.generated(record)
        else:
            ranked = first_stage(pipeline, task, data, phase, step, context)
        if current.held_out is not None:  # a component tuned on these queries: never scored on them
            data = _without(data, current.held_out)
            ranked = {q: d for q, d in ranked.items() if q in data.qrels}
        if first_folder is not None and not reused:
            save(first_folder, task, ranked, data.qrels, data.revision, data_id, started, phase,  # for the leaderboard and rerankers
                  kept=current.kept_with_generations("rewriter", "retriever"))

        extra_scores = dict(current.extra_scores or {})
        if "reranker" in pipeline.stages:
            ranked = rerank_stage(pipeline.stages["reranker"], task, data, ranked, phase, step, context, pipeline.top_k)
            extra_scores["previous_results_model_meta"] = {"model_name": first_folder.name,  # as mteb records it
                                                           "revision": first_folder.revision}
        empty = [qid for qid, docs in ranked.items() if not docs]
        if empty:
            self.console.print(f"[yellow]warning:[/] {task.name}: {len(empty)} queries got no documents; "
                               "they score 0 in the averages")
        step("scoring")
        ndcg, n = save(folder, task, ranked, data.qrels, data.revision, data_id, started, phase, extra_scores,
                        kept=current.kept_with_generations(*STAGE_ORDER), first_cost=first_cost)
        journal.path.unlink(missing_ok=True)  # the records are in <Task>.generations.jsonl now
        return ndcg, n, data_id["official"]

    def task_context(self, context: Context, current: _Current, phase: Phases, step) -> CompositeContext:
        """The context of one task's component calls: its corpus and kept rows, and for composites
        the run's tasks, their members' saved runs and held-out scoring (each component gets what
        its kind may see: ``for_component``)."""

        def saved_run(member, *, task: TaskSpec | None = None, queries: Sequence[Query] | None = None):
            return self.saved_run(member, task or current.task, queries, current, context, phase, step)

        def tuning_judgments(task: TaskSpec, query_ids) -> dict[str, dict[str, int]]:
            qrels = current.data.qrels if task.name == current.task.name else \
                task.load(self.data_dir, only_task=self.only_task, cache_dir=context.cache_dir).qrels
            return {q: dict(qrels[q]) for q in query_ids if q in qrels}

        def hold_out(query_ids, **scores) -> int:
            current.held_out = set(query_ids)
            current.extra_scores = scores
            return sum(1 for q in current.data.qrels if q not in current.held_out)

        def keep(name: str, rows: list[dict]) -> None:
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,40}", name):
                raise PluginError(f"context.keep({name!r}): a name of lower-case letters, digits, - and _")
            if name == GENERATIONS:
                raise PluginError(f"context.keep({name!r}): the harness writes that file from "
                                  "context.generated(record); keep your rows under another name")
            current.kept[name] = [dict(row) for row in rows]

        return context.with_(corpus=current.data.corpus, keep=keep, generated=current.generated,
                             loading=lambda: phase(LOADING)).composed(
            tasks=tuple(self.tasks), saved_run=saved_run, tuning_judgments=tuning_judgments, hold_out=hold_out)

    def saved_run(self, member: Any, task: TaskSpec, queries, current: _Current, context: Context, phase: Phases,
                  step):
        """The run of this run's rewriter + ``member`` (a retriever the harness created for a
        composite) on ``task``: from its own results folder when its identity matches, else computed
        (with ``queries`` when given: already rewritten) and saved there."""
        sub = self.subpipeline(member)
        folder = ResultFolder(self.output, sub.spec(), local=self.is_local(task))
        here = task.name == current.task.name
        data_id = current.data_id if here else task.data_identity(self.data_dir, only_task=self.only_task)
        with writing([folder], self.waiting):
            key = (folder.path, task.name)
            if (key in self.fresh or not self.overwrite) and reusable(folder, task, data_id):
                return folder.read_run(task.name)
            started, since = time.time(), len(phase.items)  # its cost: the phases from here on
            data = current.data if here else task.load(self.data_dir, only_task=self.only_task,
                                                       cache_dir=context.cache_dir)
            if not here:
                data_id = task.data_identity(self.data_dir, only_task=self.only_task, revision=data.revision)
                context = context.with_(corpus=data.corpus)
            if queries is None:
                ranked = first_stage(sub, task, data, phase, step, context)
            else:
                step(f"indexing {len(data.corpus):,} documents ({sub.retriever.spec.name})")
                index_stage(sub, task, data, phase, context)
                ranked = search_stage(sub, task, data, list(queries), phase, step, context)
            save(folder, task, ranked, data.qrels, data.revision, data_id, started, phase, since=since)
            self.fresh.add(key)
            return ranked

    def subpipeline(self, member: Any) -> Pipeline:
        """This run's rewriter (the same instance) + a composite's member (its stage, as the harness
        created it), once per run."""
        if id(member) not in self.subpipelines:
            found = [m for stage in self.pipeline.ordered() for m in stage.members if m.instance is member]
            if not found:
                raise PluginError(f"context.saved_run({type(member).__name__} object): not a member the harness "
                                  "created for a composite (saved_run takes one of the retrievers its factory got)")
            stages = {"retriever": found[0]}
            if "rewriter" in self.pipeline.stages:
                stages = {"rewriter": self.pipeline.stages["rewriter"], **stages}
            self.subpipelines[id(member)] = Pipeline(stages, self.pipeline.top_k)
        return self.subpipelines[id(member)]


def reusable(folder: ResultFolder, task: TaskSpec, data_id: dict) -> bool:
    return folder.status(task.name, folder.spec.task_identity(task.name, data_id)).reuse


def save(folder: ResultFolder, task: TaskSpec, ranked, qrels: dict, revision: str, data_id: dict, started: float,
         phase: Phases, extra_scores: dict | None = None, kept: dict[str, list[dict]] | None = None, *,
         since: int = 0, first_cost: dict | None = None, costs: bool = True) -> tuple[float, int]:
    """Score a run against the task's judgments (``qrels``, of the data at ``revision``) and write
    it, with its identity (and what its components kept, and its cost: the phases from item
    ``since`` on, plus a reused first stage's recorded ``first_cost``; none without ``costs``: a
    fusion of saved runs, whose cost is theirs), as ``folder``'s result for the task; returns the
    main score and the number of scored queries."""
    with phase("Scoring"):
        scores, per_query = score(ranked, qrels)
    scores.update(extra_scores or {})
    folder.write(task.name, revision, folder.spec.task_identity(task.name, data_id), scores, ranked, per_query,
                 evaluation_time=time.time() - started, phases=list(phase.items), kept=kept,
                 cost=with_recorded(phase.cost(since), first_cost) if costs else None)
    return scores["main_score"], len(per_query)


def _without(data: TaskData, held_out: set[str]) -> TaskData:
    """The task without the held-out queries."""
    qrels = {q: r for q, r in data.qrels.items() if q not in held_out}
    return TaskData(data.corpus, [q for q in data.queries if q.id in qrels], qrels, data.revision, data.source,
                    data.warnings)


def first_stage(pipeline: Pipeline, task: TaskSpec, data: TaskData, phase: Phases, step, context: Context):
    """[rewriter] -> retriever: each query's top-k documents. The corpus is indexed while the
    rewriter works (the index does not depend on the queries), so a run takes as long as the slower
    of the two; search starts once every query is rewritten, so each query's results are those the
    two stages give one after the other."""
    if "rewriter" not in pipeline.stages:
        step(f"indexing {len(data.corpus):,} documents ({pipeline.retriever.spec.name})")
        index_stage(pipeline, task, data, phase, context)
        return search_stage(pipeline, task, data, data.queries, phase, step, context)
    stage = pipeline.stages["rewriter"]
    indexing = Background(lambda: index_stage(pipeline, task, data, phase, context.with_(
        progress=SubProgress(context.progress.progress) if isinstance(context.progress, SubProgress)
        else context.progress)))
    step(f"rewriting queries ({stage.spec.name}) while indexing {len(data.corpus):,} documents "
         f"({pipeline.retriever.spec.name})")
    with phase("Rewriting queries", stage.instance), calling(stage, task, "rewriting queries of", context):
        queries = stage.instance.rewrite(data.queries, task=task, context=stage_context(stage, context))
    if sorted(q.id for q in queries) != sorted(q.id for q in data.queries):
        raise PluginError(f"{stage.label} must return one rewritten query per input query")
    if not indexing.done():
        step(f"indexing {len(data.corpus):,} documents ({pipeline.retriever.spec.name})")
    indexing.result()
    return search_stage(pipeline, task, data, queries, phase, step, context)


class Background:
    """``work()`` in a thread of its own, started at once; ``result()`` waits for it and raises what
    it raised. A daemon thread: a failed or interrupted run does not wait for it to exit."""

    def __init__(self, work) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True, name="r2med-index")
        self._thread.start()

    def _run(self, work) -> None:
        try:
            work()
        except BaseException as e:  # re-raised in the caller's thread
            self._error = e

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def stage_context(stage: Stage, context: Context) -> Context:
    """What a stage's component gets of ``context`` (``Stage.context``), its generation records
    marked with the stage and the component that wrote them."""
    context = stage.context(context)
    generated = context.generated

    def mark(record: dict) -> None:
        if isinstance(record, dict):
            record = {"query_id": record.get("query_id"), "stage": stage.spec.kind, "component": stage.spec.name,
                      **{k: v for k, v in record.items() if k not in ("stage", "component")}}
        generated(record)

    return context.with_(generated=mark)


def index_stage(pipeline: Pipeline, task: TaskSpec, data: TaskData, phase: Phases, context: Context) -> None:
    """The retriever indexes (encodes) the task's corpus."""
    retriever = pipeline.retriever
    with phase("Encoding corpus", retriever.instance), calling(retriever, task, "indexing", context):
        retriever.instance.index(data.corpus, task=task, context=retriever.context(context))


def search_stage(pipeline: Pipeline, task: TaskSpec, data: TaskData, queries: list[Query], phase: Phases, step,
                 context: Context):
    """The retriever, its corpus indexed, over (rewritten) queries: each query's top-k documents."""
    retriever = pipeline.retriever
    if not combines_generated(retriever.instance):  # the documented default, never silence
        queries = [Query(q.id, default_query(q)) if q.generated else q for q in queries]
    step(f"searching {len(queries)} queries")
    with phase("Encoding queries", retriever.instance), calling(retriever, task, "searching", context):
        run = retriever.instance.search(queries, task=task, top_k=pipeline.top_k,
                                        context=stage_context(retriever, context))
    check_run(run, data.qrels, set(data.corpus.ids), component=retriever.label)
    return rank(run, pipeline.top_k)


def rerank_stage(stage: Stage, task: TaskSpec, data: TaskData, ranked, phase: Phases, step, context: Context,
            depth: int):
    """Re-score each query's first ``rerank_k`` documents (the original query text, as published);
    only they are scored, as published, unless ``-o keep_tail=true`` keeps the rest below them in
    their first-stage order."""
    k = (stage.instance.rerank_k if isinstance(stage.instance, RerankDepth) else None) or depth
    keep_tail = {**stage.spec.defaults, **stage.options}["keep_tail"]  # the stage's option, not the reranker's
    step(f"reranking the top {k} ({stage.spec.name})")
    candidates = {qid: dict(list(docs.items())[:k]) for qid, docs in ranked.items()}
    with phase("Reranking", stage.instance), calling(stage, task, "reranking", context):
        reranked = stage.instance.rerank(data.queries, data.corpus, candidates, task=task,
                                         context=stage_context(stage, context))
    check_run(reranked, data.qrels, set(data.corpus.ids), component=stage.label)
    out = {}
    for qid, docs in ranked.items():
        scores, order = reranked.get(qid, {}), list(docs)
        head = [(d, float(scores[d])) for d in order[:k] if d in scores]
        head.sort(key=lambda item: -item[1])  # stable: ties keep the first stage's order
        floor = min((s for _, s in head), default=0.0)
        tail = order[k:] if keep_tail else ()
        out[qid] = dict(head) | {d: floor - i - 1.0 for i, d in enumerate(tail)}
    return out
