"""Evaluate a pipeline over tasks: load data, rewrite, retrieve, rerank, score, write. A task whose
stored results have the run's identity is reused, unless overwriting; any other is computed, with
one line saying what changed. The pipeline's identity is computed once per run and each task's data
source resolved once, then carried to every folder, task and the run's outcome. Results are written
atomically after each task, so a killed run resumes where it stopped; each results folder is locked
for the run, so two processes never interleave one folder.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ..components.context import Context
from ..components.inputs import TaskInputs, read_inputs
from ..tasks.datafiles import hash_ahead
from ..tasks.taskdata import Query, TaskData
from ..errors import FILE_PROBLEMS, PluginError, UserError
from ..scoring.evaluation import score
from ..files.journal import Journal
from ..results.folder import ResultsFolder, Status, locked
from ..results.identity import PipelineSpec
from ..results.layout import GENERATIONS
from ..results.outcomes import RunOutcome, TaskOutcome, average_ci, stored_rows
from .pipelines import STAGE_ORDER, Pipeline, Stage, without_secrets
from .costs import LOADING, Phases, with_recorded
from .display import RunDisplay, SubProgress
from .received import Answers, checked_rewrites, checked_run
from ..scoring.runs import Run, rank
from ..tasks.specs import TaskSource, TaskSpec


@contextmanager
def calling(stage: Stage, task: TaskSpec, what: str, context: Context,
            inputs: Inputs | None = None) -> Iterator[Context]:
    """The stage's context for one call of its component (:func:`stage_context`). A crash becomes
    a one-line error naming the plugin, the task and the step; its progress bars go when the call
    ends; the LLM answers it handed over are judged when it returns (``received.Answers``)."""
    answers = Answers(stage.label)
    try:
        yield stage_context(stage, context, answers, inputs)
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
    answers.judge(task, context.log)


Folders = dict[bool, tuple[ResultsFolder, "ResultsFolder | None"]]  # local data? -> (pipeline's, first stage's)
Specs = tuple[PipelineSpec, "PipelineSpec | None"]  # a pipeline's, and its first stage's when it reranks
Inputs = dict[int, TaskInputs]  # id of a stage -> the input files it named for one task, read
Served = dict[str, "dict | None"]  # LLM model -> what its server serves beyond its name; absent: not asked


def read_task_inputs(pipeline: Pipeline, task: TaskSpec, folder: Path | None, context: Context,
                     known: Inputs | None = None) -> Inputs:
    """The input files each stage of ``pipeline`` names for ``task`` (its component's ``inputs(task,
    folder=)``; ``folder``: the task's local data folder), read once: ``known`` are not read again."""
    inputs = dict(known or {})
    for stage in pipeline.ordered():
        if id(stage) not in inputs:
            with calling(stage, task, "naming the input files of", context):
                inputs[id(stage)] = read_inputs(stage.instance, task, folder, who=stage.label)
    return inputs


def served_llms(pipeline: Pipeline) -> dict[str, str]:
    """{model: spec} of the LLMs whose servers serve ``pipeline``'s stages (``Stage.served_llms``)."""
    return {name: spec for stage in pipeline.ordered() for name, spec in stage.served_llms().items()}


def ask_served(pipeline: Pipeline, context: Context) -> tuple[Served, dict[str, str]]:
    """What each LLM server of ``pipeline`` serves beyond the model's name, asked as the generation
    cache asks it (``served_model()``, one ``GET /models`` a run, shared with the stage's calls), so
    results and cached answers tell two servings apart alike; and, by model, why a server could
    not be asked (its stage's stored results are then reused unchecked)."""
    served: Served = {}
    unchecked: dict[str, str] = {}
    for name, spec in served_llms(pipeline).items():
        try:
            client = context.chat_clients(spec)
            if not callable(getattr(client, "served_model", None)):  # keyed by its name alone, as in the cache
                served[name] = None
                continue
            if callable(getattr(client, "share_served", None)):
                client.share_served(context.served)
            served[name] = client.served_model().identity()
        except UserError as e:
            unchecked[name] = str(e)
    return served, unchecked


def task_identity(folder: ResultsFolder, pipeline: Pipeline, task: TaskSpec, data_id: dict, inputs: Inputs,
                  served: Served) -> dict[str, Any]:
    """The identity of ``pipeline``'s result for ``task`` in ``folder`` (``PipelineSpec.task_identity``):
    the task's data, the files its stages read for the task (``inputs``) and what their LLM servers
    serve (``served``; a model not asked keeps what the stored result holds, unchecked)."""
    files = {s.spec.kind: inputs[id(s)].identity() for s in pipeline.ordered() if id(s) in inputs and inputs[id(s)].files}
    section, stored = {}, None
    for name in served_llms(pipeline):
        if name in served:
            if served[name] is not None:
                section[name] = served[name]
            continue
        if stored is None:
            found = (folder.identity(task.name) or {}).get("served")
            stored = found if isinstance(found, dict) else {}
        if name in stored:
            section[name] = stored[name]
    return folder.spec.task_identity(task.name, data_id, files, section)


def specs_of(pipeline: Pipeline) -> Specs:
    """A pipeline's identity, record and command (``Pipeline.spec``), and its first stage's when it
    reranks: computed once per run, and carried to its folders and its outcome."""
    first = pipeline.first_stage().spec() if "reranker" in pipeline.stages else None
    return pipeline.spec(), first


def result_folders(specs: Specs, output: Path, *, local: bool) -> tuple[ResultsFolder, ResultsFolder | None]:
    """Where a run writes the tasks of one kind of data (local files or the hub): the pipeline's
    folder, and its first stage's when it reranks (:func:`specs_of`)."""
    spec, first_spec = specs
    first = ResultsFolder.for_pipeline(output, first_spec, local=local) if first_spec is not None else None
    return ResultsFolder.for_pipeline(output, spec, local=local), first


def plan(pipeline: Pipeline, tasks: list[TaskSpec], *, output: Path, data_dir: Path | None,
         overwrite: bool, context: Context) -> dict[str, Any]:
    """What a run would do, without loading data or models: stages, folders, and per task whether
    its stored results have this run's identity (reused) or not (computed, and why)."""
    only_task = len(tasks) == 1
    specs = specs_of(pipeline)
    folders: Folders = {}
    planned = []
    for t in tasks:
        try:
            source = t.source(data_dir, only_task=only_task)
            local, data = source.local, source.identity()
        except UserError as e:  # the run itself will stop here; the plan says why and goes on
            local, data = data_dir is not None, {"official": False}
            status = Status(False, f"its data cannot be read: {e}")
            folder = _claimed(folders, specs, output, local)[0]
        else:
            folder = _claimed(folders, specs, output, local)[0]
            try:  # a dry run asks no server: what a model's server serves is the stored result's
                inputs = read_task_inputs(pipeline, t, source.folder, context)
            except UserError as e:
                status = Status(False, f"its input files cannot be read: {e}")
            else:
                status = folder.status(t.name, task_identity(folder, pipeline, t, data, inputs, {}))
        planned.append({"task": t.name, "alias": t.short_name, "group": t.group, "official_data": data["official"],
                        "results_dir": str(folder.path),
                        "status": "reuse" if status.reuse and not overwrite else "compute",
                        "reason": "--overwrite" if overwrite and status.reuse else status.reason})
    folder = next(iter(folders.values()))[0]
    stages = [{"kind": s.spec.kind, "component": s.spec.name, "plugin": s.entry.plugin.name,
               "options": {k: without_secrets(s.options[k]) for k in sorted(s.options)},
               **({"member_options": s.member_options} if s.member_options else {})} for s in pipeline.ordered()]
    return {
        "pipeline": folder.spec.display_name, "label": folder.spec.label, "model_name": folder.model_name,
        "revision": folder.revision, "experiment": folder.experiment, "experiment_kwargs": folder.spec.variant,
        "results_dirs": [str(f.path) for f, _ in folders.values()], "top_k": pipeline.top_k, "stages": stages,
        "first_stage_dirs": [str(f.path) for _, f in folders.values() if f is not None],
        "tasks": planned,
    }


@contextmanager
def writing(folders: Sequence[ResultsFolder], on_wait) -> Iterator[None]:
    """Hold every folder's lock and claim it for the tasks written inside; a folder no task was
    written to is not left behind. Every writer of results goes through here."""
    with locked(list(folders), on_wait):
        try:
            for folder in folders:
                folder.claim()
            yield
        finally:
            for folder in folders:
                folder.prune()


def cached_outcome(folder: ResultsFolder, task: TaskSpec, data_id: dict) -> TaskOutcome:
    """A reused task's outcome, as it was computed; what mteb reads beside it is put back if lost."""
    folder.repair_run_settings(task.name)
    return TaskOutcome.read(task, folder, status="cached", official_data=data_id["official"])


def _claimed(folders: Folders, specs: Specs, output: Path, local: bool) -> tuple[ResultsFolder, ResultsFolder | None]:
    """The folders of one kind of data, made (and their claims checked) on first use."""
    if local not in folders:
        folders[local] = result_folders(specs, output, local=local)
        for claimed in folders[local]:
            if claimed is not None:
                claimed.check_claim()
    return folders[local]


def run_pipeline(pipeline: Pipeline, tasks: list[TaskSpec], *, output: Path, data_dir: Path | None,
                 overwrite: bool, context: Context, console: Console) -> RunOutcome:
    """Evaluate ``pipeline`` on ``tasks``; ``context`` is what every component call gets (the runner
    adds the task's corpus, progress bars and kept rows, and a composite's services: its members'
    saved runs). Tasks on local data and tasks on the hub's data go to folders of their own. The
    outcome carries the run's spec (its configuration and command) to whoever reports it."""
    run = _Run(pipeline, tasks, output=output, data_dir=data_dir, overwrite=overwrite, console=console)
    folders: Folders = {}
    for source in run.sources.values():
        _claimed(folders, run.specs, output, source.local)
    with writing([f for pair in folders.values() for f in pair if f is not None], run.display.waiting):
        outcomes = run.tasks_in(folders, context)
    main = next(iter(folders.values()))[0]
    spec = run.specs[0]
    return RunOutcome(spec.display_name, spec.label, main.model_name, main.revision, main.experiment,
                      [str(f.path) for f, _ in folders.values()], outcomes,
                      average_ci=average_ci(outcomes, computed=run.computed), spec=spec)


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
        if not isinstance(record.get("query_id"), str):
            raise PluginError(f"context.generated({record.get('query_id')!r}, ...): the query id must be a string")
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
    """One ``run_pipeline`` call: its pipeline's specs (:func:`specs_of`) and its tasks' data sources,
    each resolved once, and the saved runs its components ask for."""

    def __init__(self, pipeline: Pipeline, tasks: list[TaskSpec], *, output: Path, data_dir: Path | None,
                 overwrite: bool, console: Console) -> None:
        self.pipeline, self.tasks, self.output, self.data_dir = pipeline, tasks, output, data_dir
        self.overwrite, self.display = overwrite, RunDisplay(console)
        # task name -> where its data is read from; a task missing from --data-dir stops the run here,
        # before any folder is made
        self.sources: dict[str, TaskSource] = {}
        for task in tasks:
            self.source(task)
        self.specs = specs_of(pipeline)
        self.subpipelines: dict[int, tuple[Pipeline, PipelineSpec]] = {}  # id of a composite's member -> its saved runs'
        self.fresh: set[tuple[Path, str]] = set()  # saved runs computed in this run (reused under --overwrite)
        self.computed: dict[str, dict[str, dict[str, float]]] = {}  # task computed now -> its per-query rows
        self.inputs: dict[str, Inputs] = {}  # task -> its stages' input files, read on first use
        self.served: Served | None = None  # asked once, when the first task's stored result is checked
        self.unchecked: dict[str, str] = {}  # model -> why its server was not asked (told once, on a reuse)

    def source(self, task: TaskSpec) -> TaskSource:
        """Where ``task``'s data is read from, resolved on first use: a task of the run's at its
        start, another (a composite's saved run of it) when first asked for."""
        if task.name not in self.sources:
            self.sources[task.name] = task.source(self.data_dir, only_task=len(self.tasks) == 1)
        return self.sources[task.name]

    def inputs_of(self, task: TaskSpec, pipeline: Pipeline, context: Context) -> Inputs:
        """The input files ``pipeline``'s stages name for ``task``, each read once a run."""
        self.inputs[task.name] = read_task_inputs(pipeline, task, self.source(task).folder, context,
                                                  self.inputs.get(task.name))
        return self.inputs[task.name]

    def identity(self, folder: ResultsFolder, pipeline: Pipeline, task: TaskSpec, data_id: dict,
                 context: Context, *, saving: bool = False) -> dict[str, Any]:
        """``pipeline``'s identity for ``task`` in ``folder`` (:func:`task_identity`). Its LLM servers
        are asked once a run, when a stored result could be reused or one is written (by then its
        stage has asked them: no request more)."""
        if self.served is None and (saving or folder.identity(task.name) is not None):
            self.served, self.unchecked = ask_served(self.pipeline, context)
        return task_identity(folder, pipeline, task, data_id, self.inputs_of(task, pipeline, context),
                             self.served or {})

    def tell_unchecked(self) -> None:
        """One line per LLM whose server could not be asked, when results of its stage are reused."""
        for name, why in self.unchecked.items():
            self.display.data_warning(f"{name}: the served model was not checked ({why}); its stored results "
                                      "are reused as they are")
        self.unchecked = {}

    def tasks_in(self, folders: Folders, context: Context) -> list[TaskOutcome]:
        """Each task's outcome: a reused one's read from its folder, a computed one's as computed."""
        outcomes = []
        with self.display.tasks(len(self.tasks)) as bars:
            context = context.with_(progress=bars.components, retries=bars.retries)
            hash_ahead([s.folder for s in self.sources.values() if s.folder is not None])
            for task in self.tasks:
                source = self.sources[task.name]
                folder, first_folder = folders[source.local]
                data_id = source.identity()
                status = folder.status(task.name, self.identity(folder, self.pipeline, task, data_id, context))
                if status.reuse and not self.overwrite:
                    self.tell_unchecked()
                    outcomes.append(cached_outcome(folder, task, data_id))
                else:
                    if status.reason and not self.overwrite:
                        self.display.recomputing(task, status.reason)
                    outcomes.append(self.evaluate(task, folder, first_folder, step=bars.step(task), context=context))
                bars.advance()
        return outcomes

    def evaluate(self, task: TaskSpec, folder: ResultsFolder, first_folder: ResultsFolder | None, *, step,
                 context: Context) -> TaskOutcome:
        """Compute and save one task; its outcome is built from what was computed and written, equal
        to what reading the folder back gives (``TaskOutcome.written``)."""
        pipeline, source = self.pipeline, self.sources[task.name]
        started = time.time()
        phase = Phases()
        step("loading data")
        with phase("Data loading"):
            data: TaskData = source.load(cache_dir=context.cache_dir)
        data_id = source.identity(data.revision)
        journal = Journal(folder.generations_journal(task.name), "the generation records")
        journal.path.unlink(missing_ok=True)  # a killed run's: this run's come again (its answers from the cache)
        current = _Current(task, data, data_id, journal=journal)
        context = self.task_context(context, current, phase, step)
        for warning in data.warnings:
            self.display.data_warning(warning)

        first = pipeline.first_stage()
        first_identity = self.identity(first_folder, first, task, data_id, context) if first_folder else None
        reused = first_folder is not None and not self.overwrite and reusable(first_folder, task, first_identity)
        inputs = self.inputs_of(task, pipeline, context)
        first_cost = None
        if reused:
            self.tell_unchecked()
            step("first stage from its saved run")
            ranked = first_folder.read_run(task.name)  # a reranker reuses the first stage, never recomputes it
            first_cost = first_folder.cost(task.name)  # what computing it cost, counted in this task's
            for record in first_folder.generations(task.name):  # and what its LLM wrote, kept with this task's
                current.generated(record)
        else:
            ranked = Stages(pipeline, task, data, context, phase=phase, step=step, inputs=inputs).first()
        if current.held_out is not None:  # a component tuned on these queries: never scored on them
            data = _without(data, current.held_out)
            ranked = {q: d for q, d in ranked.items() if q in data.qrels}
        if first_folder is not None and not reused:
            first_identity = self.identity(first_folder, first, task, data_id, context, saving=True)
            save(first_folder, task, ranked, data.qrels, data.revision, first_identity, started, phase,  # for the leaderboard and rerankers
                 kept=current.kept_with_generations("rewriter", "retriever"), data_dir=self.data_dir)

        extra_scores = dict(current.extra_scores or {})
        if "reranker" in pipeline.stages:
            ranked = Stages(pipeline, task, data, context, phase=phase, step=step, inputs=inputs).rerank(ranked)
            extra_scores["previous_results_model_meta"] = {"model_name": first_folder.model_name,  # as mteb records it
                                                           "revision": first_folder.revision}
        empty = [qid for qid, docs in ranked.items() if not docs]
        if empty:
            self.display.no_documents(task, len(empty))
        step("scoring")
        identity = self.identity(folder, pipeline, task, data_id, context, saving=True)
        kept = current.kept_with_generations(*STAGE_ORDER)
        scores, rows, cost = save(folder, task, ranked, data.qrels, data.revision, identity, started, phase,
                                  extra_scores, kept=kept, first_cost=first_cost, data_dir=self.data_dir)
        journal.path.unlink(missing_ok=True)  # the records are in <Task>.generations.jsonl now
        self.computed[task.name] = rows
        return TaskOutcome.written(task, folder, scores, rows, cost, kept.get(GENERATIONS, []),
                                   official_data=data_id["official"])

    def task_context(self, context: Context, current: _Current, phase: Phases, step) -> Context:
        """The context of one task's component calls: its corpus, kept rows and generation records,
        and, for composites, the run's tasks, their members' saved runs and held-out scoring."""

        def saved_run(member, *, task: TaskSpec | None = None, queries: Sequence[Query] | None = None):
            return self.saved_run(member, task or current.task, queries, current, context, phase, step)

        def tuning_judgments(task: TaskSpec, query_ids) -> dict[str, dict[str, int]]:
            qrels = current.data.qrels if task.name == current.task.name else \
                self.source(task).load(cache_dir=context.cache_dir).qrels
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
                                  "context.generated(...); keep your rows under another name")
            current.kept[name] = [dict(row) for row in rows]

        return context.with_(corpus=current.data.corpus, keep=keep, records=current.generated,
                             loading=lambda: phase(LOADING), tasks=tuple(self.tasks), saved_run=saved_run,
                             tuning_judgments=tuning_judgments, hold_out=hold_out)

    def saved_run(self, member: Any, task: TaskSpec, queries, current: _Current, context: Context, phase: Phases,
                  step):
        """The run of this run's rewriter + ``member`` (a retriever the harness created for a
        composite) on ``task``: from its own results folder when its identity matches, else computed
        (with ``queries`` when given: already rewritten) and saved there."""
        sub, spec = self.subpipeline(member)
        here, source = task.name == current.task.name, self.source(task)
        folder = ResultsFolder.for_pipeline(self.output, spec, local=source.local)
        data_id = current.data_id if here else source.identity()
        with writing([folder], self.display.waiting):
            key = (folder.path, task.name)
            if (key in self.fresh or not self.overwrite) and reusable(
                    folder, task, self.identity(folder, sub, task, data_id, context)):
                return folder.read_run(task.name)
            started, since = time.time(), len(phase.items)  # its cost: the phases from here on
            data = current.data if here else source.load(cache_dir=context.cache_dir)
            if not here:
                data_id = source.identity(data.revision)
                context = context.with_(corpus=data.corpus)
            stages = Stages(sub, task, data, context, phase=phase, step=step, inputs=self.inputs_of(task, sub, context))
            ranked = stages.first() if queries is None else stages.searched(list(queries))
            save(folder, task, ranked, data.qrels, data.revision,
                 self.identity(folder, sub, task, data_id, context, saving=True), started, phase, since=since,
                 data_dir=self.data_dir)
            self.fresh.add(key)
            return ranked

    def subpipeline(self, member: Any) -> tuple[Pipeline, PipelineSpec]:
        """This run's rewriter (the same instance) + a composite's member (its stage, as the harness
        created it), and its spec, once per run."""
        if id(member) not in self.subpipelines:
            found = [m for stage in self.pipeline.ordered() for m in stage.members if m.instance is member]
            if not found:
                raise PluginError(f"context.saved_run({type(member).__name__} object): not a member the harness "
                                  "created for a composite (saved_run takes one of the retrievers its factory got)")
            stages = {"retriever": found[0]}
            if "rewriter" in self.pipeline.stages:
                stages = {"rewriter": self.pipeline.stages["rewriter"], **stages}
            sub = Pipeline(stages, self.pipeline.top_k)
            self.subpipelines[id(member)] = sub, sub.spec()
        return self.subpipelines[id(member)]


def reusable(folder: ResultsFolder, task: TaskSpec, identity: dict[str, Any]) -> bool:
    return folder.status(task.name, identity).reuse


def save(folder: ResultsFolder, task: TaskSpec, ranked, qrels: dict, revision: str, identity: dict[str, Any],
         started: float,
         phase: Phases, extra_scores: dict | None = None, kept: dict[str, list[dict]] | None = None, *,
         since: int = 0, first_cost: dict | None = None, costs: bool = True,
         data_dir: Path | None = None) -> tuple[dict, dict[str, dict[str, float]], dict | None]:
    """Score a run against the task's judgments and write it as ``folder``'s result for the task,
    with its cost: the phases from item ``since`` on, plus a reused first stage's ``first_cost``
    (none without ``costs``: a fusion, whose cost is its inputs'). Returns what was written: the
    scores, the per-query rows and the cost."""
    with phase("Scoring"):
        scores, per_query = score(ranked, qrels)
    scores.update(extra_scores or {})
    cost = with_recorded(phase.cost(since), first_cost) if costs else None
    folder.write(task.name, revision, identity, scores, ranked, per_query,
                 evaluation_time=time.time() - started, phases=list(phase.items), kept=kept, cost=cost,
                 data_dir=data_dir)
    return scores, stored_rows(per_query), cost


def _without(data: TaskData, held_out: set[str]) -> TaskData:
    """The task without the held-out queries."""
    qrels = {q: r for q, r in data.qrels.items() if q not in held_out}
    return TaskData(data.corpus, [q for q in data.queries if q.id in qrels], qrels, data.revision, data.source,
                    data.warnings)


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


def stage_context(stage: Stage, context: Context, answers: Answers, inputs: Inputs | None = None) -> Context:
    """What a stage's component gets of ``context``: its generation records marked with the stage
    and the component that wrote them, and counted in ``answers``; its LLM calls tallied in the
    stage's; its name (for advice naming its options); the input files it named for the task
    (``inputs``)."""
    records = context.records
    files = (inputs or {}).get(id(stage)) or TaskInputs(stage.label)

    def mark(record: dict) -> None:
        answers.add(record)
        records({"query_id": record.get("query_id"), "stage": stage.spec.kind, "component": stage.spec.name,
                 **{k: v for k, v in record.items() if k not in ("stage", "component")}})

    return context.with_(records=mark, llm_calls=stage.llm_calls, component=stage.spec.name, input=files.read)


def rewrite_record(query: Query, given: str, component: str) -> dict:
    """The generation record of a query the rewriter returned without recording it (a rewriter
    that calls no LLM, a replay of generations): the query as given, the text and documents the
    retriever gets; no samples, for no LLM answered here."""
    return {"query_id": query.id, "stage": "rewriter", "component": component, "query": given,
            "text": query.text, "generated": list(query.generated),
            **({"method": query.method} if query.method else {}), **({"r1_mode": True} if query.reasoning else {})}


def _quiet(text: str) -> None:
    """A step no progress line shows."""


@dataclass
class Stages:
    """A pipeline's stages over one task's data, run as ``r2med-run`` runs them: the runner's task
    loop and ``as_mteb_model`` both call them through this. Each method returns the ranked run, at
    most the pipeline's ``top_k`` per query; ``phase`` times the stages and counts the LLM usage they
    add, ``step`` is told what is being done. A component's crash is a one-line ``PluginError``."""

    pipeline: Pipeline
    task: TaskSpec
    data: TaskData
    context: Context
    phase: Phases = field(default_factory=Phases)
    step: Callable[[str], None] = _quiet
    inputs: Inputs = field(default_factory=dict)  # what each stage named for the task (read_task_inputs)

    def ranked(self) -> Run:
        ranked = self.first()
        return self.rerank(ranked) if "reranker" in self.pipeline.stages else ranked

    def first(self) -> Run:
        """[rewriter] -> retriever: each query's top-k documents. The corpus is indexed while the
        rewriter works (the index does not depend on the queries), so a run takes as long as the
        slower of the two; search starts once every query is rewritten, so each query's results are
        those the two stages give one after the other."""
        if "rewriter" not in self.pipeline.stages:
            return self.searched(self.data.queries)
        stage, task, context = self.pipeline.stages["rewriter"], self.task, self.context
        progress = context.progress  # the index's own bars: those the rewriter's call clears are not its
        indexing = Background(lambda: self.index(context.with_(
            progress=SubProgress(progress.progress) if isinstance(progress, SubProgress) else progress)))
        self.step(f"rewriting queries ({stage.spec.name}) while indexing {len(self.data.corpus):,} documents "
                  f"({self.pipeline.retriever.spec.name})")
        recorded: set = set()  # the queries the rewriter recorded itself (context.generated)

        def records(record: dict) -> None:
            recorded.add(record.get("query_id"))
            context.records(record)

        rewriting = calling(stage, task, "rewriting queries of", context.with_(records=records), self.inputs)
        with self.phase("Rewriting queries", stage.llm_calls), rewriting as called:
            rewritten = stage.instance.rewrite(self.data.queries, task=task, context=called)
        queries = checked_rewrites(rewritten, self.data.queries, stage.label)
        given = {q.id: q.text for q in self.data.queries}
        for query in queries:  # any rewriter's output opens in r2med show: a non-LLM one's, a replay's
            if query.id not in recorded:
                context.records(rewrite_record(query, given[query.id], stage.spec.name))
        if not indexing.done():
            self.step(f"indexing {len(self.data.corpus):,} documents ({self.pipeline.retriever.spec.name})")
        indexing.result()
        return self.search(queries)

    def searched(self, queries: list[Query]) -> Run:
        """The retriever indexes the corpus, then searches ``queries``."""
        self.step(f"indexing {len(self.data.corpus):,} documents ({self.pipeline.retriever.spec.name})")
        self.index()
        return self.search(queries)

    def index(self, context: Context | None = None) -> None:
        """The retriever indexes (encodes) the task's corpus."""
        retriever, context = self.pipeline.retriever, context or self.context
        indexing = calling(retriever, self.task, "indexing", context, self.inputs)
        with self.phase("Encoding corpus", retriever.llm_calls), indexing as called:
            retriever.instance.index(self.data.corpus, task=self.task, context=called)

    def search(self, queries: list[Query]) -> Run:
        """The retriever, its corpus indexed, over (rewritten) queries: each query's top-k documents."""
        retriever, top_k = self.pipeline.retriever, self.pipeline.top_k
        if not retriever.spec.combines_generated:  # the documented default, never silence
            queries = [Query(q.id, q.combined("bm25")) if q.generated else q for q in queries]
        self.step(f"searching {len(queries)} queries")
        searching = calling(retriever, self.task, "searching", self.context, self.inputs)
        with self.phase("Encoding queries", retriever.llm_calls), searching as called:
            run = retriever.instance.search(queries, task=self.task, top_k=top_k, context=called)
        return rank(self.checked(run, retriever), top_k)

    def checked(self, run, stage: Stage) -> Run:
        """A stage's ranking as the runner takes it (``received.checked_run``)."""
        return checked_run(run, stage.label, queries={q.id for q in self.data.queries},
                           documents=set(self.data.corpus.ids), judged=self.data.qrels)

    def rerank(self, ranked: Run) -> Run:
        """Re-score each query's first ``rerank_k`` documents (default: the pipeline's ``top_k``;
        the original query text, as published); only they are scored, as published, unless
        ``-o keep_tail=true`` keeps the rest below them in their first-stage order."""
        stage, data = self.pipeline.stages["reranker"], self.data
        depth = stage.spec.depth_option
        k = (getattr(stage.spec.options_of(stage.options), depth) if depth else None) or self.pipeline.top_k
        keep_tail = {**stage.spec.defaults, **stage.options}["keep_tail"]  # the stage's option, not the reranker's
        self.step(f"reranking the top {k} ({stage.spec.name})")
        candidates = {qid: dict(list(docs.items())[:k]) for qid, docs in ranked.items()}
        reranking = calling(stage, self.task, "reranking", self.context, self.inputs)
        with self.phase("Reranking", stage.llm_calls), reranking as called:
            reranked = stage.instance.rerank(data.queries, data.corpus, candidates, task=self.task, context=called)
        reranked = self.checked(reranked, stage)
        out = {}
        for qid, docs in ranked.items():
            scores, order = reranked.get(qid, {}), list(docs)
            head = [(d, float(scores[d])) for d in order[:k] if d in scores]
            head.sort(key=lambda item: -item[1])  # stable: ties keep the first stage's order
            floor = min((s for _, s in head), default=0.0)
            tail = order[k:] if keep_tail else ()
            out[qid] = dict(head) | {d: floor - i - 1.0 for i, d in enumerate(tail)}
        return out
