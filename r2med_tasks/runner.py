"""Evaluate a pipeline over tasks: load data, rewrite, retrieve, rerank, score, write.

A task whose stored results have the run's identity (``results.py``) is reused, unless
overwriting; any other is computed, with one line saying what changed. Results are written
atomically after each task, so a killed run resumes where it stopped and nothing finished is lost.
Each results folder is locked for the run, so two processes never interleave one folder.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .combine import default_query
from .components import CombinesGenerated, RerankDepth
from .context import Context
from .data import Query, TaskData
from .errors import PluginError, UserError
from .evaluation import check_run, score, top_k
from .pipelines import Pipeline, Stage
from .results import ResultFolder, Status, locked
from .tasks import TaskSpec


@dataclass
class TaskOutcome:
    task: TaskSpec
    ndcg_at_10: float
    n_queries: int
    status: str  # "computed" or "cached"
    official: bool  # R2MED's data at mteb's pinned revision


class Phases:
    """Wall-clock phases of one task, in the shape mteb stores as ``evaluation_phases``."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    @contextmanager
    def __call__(self, name: str):
        start = time.time()
        yield
        self.items.append({"name": name, "start": start, "end": time.time(), "split": "test", "subset": "default"})


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


@contextmanager
def calling(stage: Stage, task: TaskSpec, what: str, context: Context):
    """Turn a component's crash into a one-line error naming the plugin, the task and the step;
    its progress bars go when the call ends."""
    try:
        yield
    except UserError:
        raise
    except Exception as e:
        raise PluginError(f"{stage.label} failed while {what} {task.name}: {type(e).__name__}: {e} "
                          "(rerun with --debug for the traceback)") from e
    finally:
        if isinstance(context.progress, SubProgress):
            context.progress.clear()


def result_folders(pipeline: Pipeline, output: Path) -> tuple[ResultFolder, ResultFolder | None, list[ResultFolder]]:
    """Where a run writes: the pipeline's folder, its first stage's (when it reranks) and its members'."""
    first = ResultFolder(output, pipeline.first_stage().spec()) if "reranker" in pipeline.stages else None
    return ResultFolder(output, pipeline.spec()), first, [ResultFolder(output, m.spec()) for m in pipeline.members]


def plan(pipeline: Pipeline, tasks: list[TaskSpec], *, output: Path, data_dir: Path | None,
         overwrite: bool) -> dict[str, Any]:
    """What a run would do, without loading data or models: stages, folders, and per task whether
    its stored results have this run's identity (reused) or not (computed, and why)."""
    folder, first_folder, member_folders = result_folders(pipeline, output)
    for claimed in (folder, first_folder, *member_folders):
        if claimed is not None:
            claimed.check_claim()
    stages = [{"kind": s.spec.kind, "component": s.spec.name, "plugin": s.entry.plugin.name,
               "options": {k: s.options[k] for k in sorted(s.options)}} for s in pipeline.ordered()]
    planned = []
    for t in tasks:
        try:
            data = t.data_identity(data_dir, only_task=len(tasks) == 1)
        except UserError as e:  # the run itself will stop here; the plan says why and goes on
            data, status = {"official": False}, Status(False, f"its data cannot be read: {e}")
        else:
            status = folder.status(t.name, folder.spec.task_identity(t.name, data))
        planned.append({"task": t.name, "alias": t.short_name, "group": t.group, "official_data": data["official"],
                        "status": "reuse" if status.reuse and not overwrite else "compute",
                        "reason": "--overwrite" if overwrite and status.reuse else status.reason})
    return {
        "pipeline": folder.display_name, "label": folder.label, "model_name": folder.name,
        "revision": folder.revision, "experiment": folder.experiment, "experiment_kwargs": folder.spec.variant,
        "results_dir": str(folder.path), "top_k": pipeline.top_k, "stages": stages,
        "first_stage_dir": str(first_folder.path) if first_folder else None,
        "member_dirs": [str(f.path) for f in member_folders],
        "tasks": planned,
    }


def run_pipeline(pipeline: Pipeline, tasks: list[TaskSpec], *, output: Path, data_dir: Path | None,
                 overwrite: bool, context: Context, console: Console) -> tuple[ResultFolder, list[TaskOutcome]]:
    """Evaluate ``pipeline`` on ``tasks``; ``context`` is what every component call gets (the runner
    adds the task's corpus, folder and progress bars)."""
    folder, first_folder, member_folders = result_folders(pipeline, output)
    folders = [f for f in (folder, first_folder, *member_folders) if f is not None]
    for claimed in folders:
        claimed.check_claim()

    def waiting(message: str) -> None:
        console.print(f"[yellow]waiting:[/] {escape(message)}", soft_wrap=True)

    with locked(folders, waiting):
        for claimed in folders:
            claimed.claim()
            claimed.remove_stale_temp_files()
        return folder, _run_tasks(pipeline, tasks, folder, first_folder, member_folders, data_dir=data_dir,
                                  overwrite=overwrite, context=context, console=console)


def _run_tasks(pipeline: Pipeline, tasks: list[TaskSpec], folder: ResultFolder, first_folder: ResultFolder | None,
               member_folders: list[ResultFolder], *, data_dir: Path | None, overwrite: bool,
               context: Context, console: Console) -> list[TaskOutcome]:
    outcomes = []
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task("", total=len(tasks))
        context = context.with_(progress=SubProgress(progress))
        fuser = pipeline.retriever.instance
        weights = None
        if pipeline.members and getattr(fuser, "tuning", None) is not None:
            weights = _tune_by_group(pipeline, tasks, member_folders, data_dir=data_dir, overwrite=overwrite,
                                     context=context, console=console,
                                     step=lambda text: progress.update(bar, description=f"tuning: {text}"))
        for task in tasks:
            data_id = task.data_identity(data_dir, only_task=len(tasks) == 1)
            status = folder.status(task.name, folder.spec.task_identity(task.name, data_id))
            if status.reuse and not overwrite:
                ndcg, n = folder.load(task.name)
                outcomes.append(TaskOutcome(task, ndcg, n, "cached", data_id["official"]))
            else:
                if status.reason and not overwrite:
                    console.print(f"{escape(task.short_name)}: recomputing, {escape(status.reason)}", soft_wrap=True)

                def step(text: str, _task=task) -> None:
                    progress.update(bar, description=f"{_task.short_name}: {text}")
                ndcg, n, official = _evaluate(
                    pipeline, task, folder, data_dir=data_dir, only_task=len(tasks) == 1, step=step,
                    console=console, context=context, first_folder=first_folder,
                    member_folders=member_folders, overwrite=overwrite,
                    tuned=weights.get(task.group or task.name) if weights else None)
                outcomes.append(TaskOutcome(task, ndcg, n, "computed", official))
            progress.advance(bar)
    return outcomes


def _evaluate(pipeline: Pipeline, task: TaskSpec, folder: ResultFolder, *, data_dir: Path | None,
              only_task: bool, step, console: Console, context: Context, first_folder: ResultFolder | None,
              member_folders: list[ResultFolder], overwrite: bool,
              tuned: list[float] | None = None) -> tuple[float, int, bool]:
    """Compute and save one task; returns its nDCG@10, number of scored queries and whether its
    data is R2MED's official data."""
    started = time.time()
    phase = Phases()
    step("loading data")
    with phase("Data loading"):
        data: TaskData = task.load(data_dir, only_task=only_task)
    data_id = task.data_identity(data_dir, only_task=only_task, revision=data.revision)
    context = context.with_(corpus=data.corpus, data_folder=data.folder)
    for warning in data.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)

    extra_scores: dict = {}
    reused = first_folder is not None and not overwrite and _reusable(first_folder, task, data_id)
    if reused:
        step("first stage from its saved run")
        ranked = first_folder.read_run(task.name)  # a reranker reuses the first stage, never recomputes it
    elif pipeline.members:
        runs = [_member_run(member, folder, task, data, data_id, phase, step, context, overwrite, started)
                for member, folder in zip(pipeline.members, member_folders)]
        step("fusing")
        fuser = pipeline.retriever.instance
        if tuned is not None:
            data, n_tuned = _held_out(data, fuser.tuning_queries(task))
            extra_scores = {"r2med_tuned_weights": tuned, "r2med_tuning_queries": n_tuned}
            ranked = {q: d for q, d in fuser.fuse(runs, top_k=pipeline.top_k, weights=tuned).items() if q in data.qrels}
        else:
            ranked = fuser.fuse(runs, top_k=pipeline.top_k)
    else:
        ranked = _first_stage(pipeline, task, data, phase, step, context)
    if first_folder is not None and not reused:
        _save(first_folder, task, data, data_id, ranked, started, phase)  # for the leaderboard and rerankers

    previous = None
    if "reranker" in pipeline.stages:
        ranked = _rerank(pipeline.stages["reranker"], task, data, ranked, phase, step, context, pipeline.top_k)
        previous = {"model_name": first_folder.name, "revision": first_folder.revision}

    empty = [qid for qid, docs in ranked.items() if not docs]
    if empty:
        console.print(f"[yellow]warning:[/] {task.name}: {len(empty)} queries got no documents; "
                      "pytrec_eval leaves them out of the averages")
    step("scoring")
    if previous:
        extra_scores["previous_results_model_meta"] = previous  # as mteb records a reranking's first stage
    with phase("Scoring"):
        ndcg, n = _save(folder, task, data, data_id, ranked, started, phase, extra_scores)
    return ndcg, n, data_id["official"]


def _reusable(folder: ResultFolder, task: TaskSpec, data_id: dict) -> bool:
    return folder.status(task.name, folder.spec.task_identity(task.name, data_id)).reuse


def _save(folder: ResultFolder, task: TaskSpec, data: TaskData, data_id: dict, ranked, started: float,
          phase: Phases, extra_scores: dict | None = None) -> tuple[float, int]:
    """Score a run against the task's judgments and write it, with its identity, as ``folder``'s
    result for the task; returns the main score and the number of scored queries."""
    scores, per_query = score(ranked, data.qrels)
    scores.update(extra_scores or {})
    folder.write(task.mteb_metadata(data.revision), folder.spec.task_identity(task.name, data_id), scores, ranked,
                 per_query, evaluation_time=time.time() - started, phases=list(phase.items))
    return scores["main_score"], len(per_query)


def _held_out(data: TaskData, tuning: set[str]) -> tuple[TaskData, int]:
    """The task without its tuning queries (a tuned number is never measured on them)."""
    held_out = {q: r for q, r in data.qrels.items() if q not in tuning}
    n_tuned = len(data.qrels) - len(held_out)
    if not n_tuned or not held_out:
        raise UserError(f"{data.source}: -o hybrid.tune needs judged queries both to tune on and to score "
                        f"({n_tuned} to tune, {len(held_out)} left)")
    scored = TaskData(data.corpus, [q for q in data.queries if q.id in held_out], held_out, data.revision,
                      data.source, data.warnings, data.folder)
    return scored, n_tuned


def _tune_by_group(pipeline: Pipeline, tasks: list[TaskSpec], member_folders, *, data_dir, overwrite, context,
                   console: Console, step) -> dict[str, list[float]]:
    """Per task group (a task outside R2MED's groups is its own group), the weights maximising the
    mean over the group's tasks of mean nDCG@10 on each task's tuning queries. Members' runs are
    computed (and saved) here, so the scoring pass reuses them."""
    fuser = pipeline.retriever.instance
    groups: dict[str, list[tuple[list, dict]]] = {}
    for task in tasks:
        step(f"{task.short_name}: members")
        data = task.load(data_dir, only_task=len(tasks) == 1)
        _held_out(data, fuser.tuning_queries(task))  # refuse a split that leaves nothing to tune or score
        data_id = task.data_identity(data_dir, only_task=len(tasks) == 1, revision=data.revision)
        task_context = context.with_(corpus=data.corpus, data_folder=data.folder)
        runs = [_member_run(member, folder, task, data, data_id, Phases(), step, task_context, overwrite, time.time())
                for member, folder in zip(pipeline.members, member_folders)]
        tune_qrels = {q: r for q, r in data.qrels.items() if q in fuser.tuning_queries(task)}
        groups.setdefault(task.group or task.name, []).append((runs, tune_qrels))
    chosen = {}
    for group, members in groups.items():
        best, best_value = None, -1.0
        for weights in fuser.weight_grid():
            values = []
            for runs, tune_qrels in members:
                fused = fuser.fuse(runs, top_k=pipeline.top_k, weights=weights)
                values.append(score({q: d for q, d in fused.items() if q in tune_qrels}, tune_qrels)[0]["ndcg_at_10"])
            value = sum(values) / len(values)
            if value > best_value:
                best, best_value = weights, value
        chosen[group] = best
        console.print(f"{escape(group)}: weights {best} tuned on {sum(len(q) for _, q in members)} queries "
                      f"of {len(members)} task{'s' if len(members) != 1 else ''}")
    return chosen


def _member_run(member: Pipeline, folder: ResultFolder, task: TaskSpec, data: TaskData, data_id: dict,
                phase: Phases, step, context: Context, overwrite: bool, started: float):
    """A fused member's run: from its saved results when they have its identity, else computed and saved."""
    if not overwrite and _reusable(folder, task, data_id):
        return folder.read_run(task.name)
    ranked = _first_stage(member, task, data, phase, step, context)
    _save(folder, task, data, data_id, ranked, started, phase)
    return ranked


def _first_stage(pipeline: Pipeline, task: TaskSpec, data: TaskData, phase: Phases, step, context: Context):
    """[rewriter] -> retriever: each query's top-k documents."""
    queries = data.queries
    if "rewriter" in pipeline.stages:
        stage = pipeline.stages["rewriter"]
        step(f"rewriting queries ({stage.spec.name})")
        with phase("Rewriting queries"), calling(stage, task, "rewriting queries of", context):
            queries = stage.instance.rewrite(queries, task=task, context=context)
        if sorted(q.id for q in queries) != sorted(q.id for q in data.queries):
            raise PluginError(f"{stage.label} must return one rewritten query per input query")

    retriever = pipeline.retriever
    if not isinstance(retriever.instance, CombinesGenerated):  # the documented default, never silence
        queries = [Query(q.id, default_query(q)) if q.generated else q for q in queries]
    step(f"indexing {len(data.corpus):,} documents ({retriever.spec.name})")
    with phase("Encoding corpus"), calling(retriever, task, "indexing", context):
        retriever.instance.index(data.corpus, task=task, context=context)
    step(f"searching {len(queries)} queries")
    with phase("Encoding queries"), calling(retriever, task, "searching", context):
        run = retriever.instance.search(queries, task=task, top_k=pipeline.top_k, context=context)
    check_run(run, data.qrels, set(data.corpus.ids), component=retriever.label)
    return top_k(run, pipeline.top_k)


def _rerank(stage: Stage, task: TaskSpec, data: TaskData, ranked, phase: Phases, step, context: Context,
            depth: int):
    """Re-score each query's first ``rerank_k`` documents (the original query text, as published);
    the rest keep their first-stage order below them."""
    k = (stage.instance.rerank_k if isinstance(stage.instance, RerankDepth) else None) or depth
    step(f"reranking the top {k} ({stage.spec.name})")
    candidates = {qid: dict(docs[:k]) for qid, docs in ranked.items()}
    with phase("Reranking"), calling(stage, task, "reranking", context):
        reranked = stage.instance.rerank(data.queries, data.corpus, candidates, task=task, context=context)
    check_run(reranked, data.qrels, set(data.corpus.ids), component=stage.label)
    out = {}
    for qid, docs in ranked.items():
        scores = reranked.get(qid, {})
        head = [(d, float(scores[d])) for d, _ in docs[:k] if d in scores]
        head.sort(key=lambda item: -item[1])  # stable: ties keep the first stage's order
        floor = min((s for _, s in head), default=0.0)
        out[qid] = head + [(d, floor - i - 1.0) for i, (d, _) in enumerate(docs[k:])]
    return out
