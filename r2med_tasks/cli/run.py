"""``r2med-run`` / ``r2med run``: evaluate a pipeline, plan a run (``--dry-run``), print the summary."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from ..api import choose_tasks
from ..models import hub_offline
from ..terminal import printable
from .common import Command, err, out, output_folder, registry, user_errors, warn_broken

RUN_HELP = """Evaluate a pipeline [rewriter] -> retriever -> [reranker] on R2MED tasks.

\b
Examples:
  r2med-run --plugin bm25 --tasks sample
  r2med-run --plugin st -o model=sentence-transformers/all-MiniLM-L6-v2 --tasks qa-reference
  r2med-run --plugin st -o model=PATH --data-dir DIR --tasks Biology,PMC-Clinical
"""


@click.command("run", cls=Command, help=RUN_HELP)
@click.version_option(package_name="r2med")
@click.option("--plugin", "-p", "plugin_names", multiple=True, required=True, metavar="NAME",
              help="Component to use (retriever, rewriter or reranker); repeat for a pipeline. "
                   "KIND:NAME picks one kind when names clash.")
@click.option("--tasks", "-t", "task_names", multiple=True, metavar="TASKS",
              help="Task names, aliases (Biology, PMC-Clinical, sample), groups (qa-reference, "
                   "clinical-evidence, clinical-case) or r2med; comma-separated or repeated. "
                   "Default: the folders found in --data-dir, else all eight R2MED tasks.")
@click.option("--data-dir", type=click.Path(path_type=Path), metavar="DIR",
              help="Read tasks from DIR/<Name>/{corpus,query,qrels}.jsonl instead of the hub.")
@click.option("--output", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="Results folder (mteb's layout: OUTPUT/<org__model>/<revision>/).")
@click.option("-o", "options", multiple=True, metavar="KEY=VALUE",
              help="Component option; NAME.KEY=VALUE sends it to one component. `r2med plugins NAME` lists a "
                   "component's options, their types, bounds and defaults.")
@click.option("--top-k", type=click.IntRange(1), default=100, show_default=True,
              help="Documents kept per query (the published runs keep 100).")
@click.option("--device", metavar="DEVICE",
              help="cpu, cuda, cuda:N, or cuda:0,cuda:1 for several GPUs: sets the device of every selected "
                   "component that runs models (same as -o device=...).")
@click.option("--cache-dir", type=click.Path(path_type=Path), metavar="DIR", envvar="R2MED_CACHE_DIR",
              help="Where components keep indexes, embeddings and LLM answers "
                   "(default: $R2MED_CACHE_DIR, else $XDG_CACHE_HOME/r2med or ~/.cache/r2med).")
@click.option("--overwrite", is_flag=True, help="Recompute tasks that already have results.")
@click.option("--dry-run", is_flag=True,
              help="Check plugins, options and tasks, and show the results folder and which tasks would be "
                   "computed; loads no data and downloads nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary (or the --dry-run plan) as JSON.")
def run_command(plugin_names, task_names, data_dir, output, options, top_k, device, cache_dir, overwrite, dry_run,
                as_json):
    from ..components import Summarizes
    from ..context import default_cache_dir
    from ..pipelines import base_context, build_pipeline, instantiate
    from ..runner import plan, run_pipeline

    with user_errors():
        plugins, reg = registry()
        warn_broken(plugins)
        pipeline = build_pipeline(reg, list(plugin_names), list(options), top_k=top_k, device=device)
        tasks = choose_tasks(reg, list(task_names) or None, data_dir)
        output_folder(output, create=False)
        cache_dir = cache_dir or default_cache_dir()
        output_folder(cache_dir, create=False, option="--cache-dir")
        context = base_context(reg, cache_dir=cache_dir,
                               log=lambda line: err.print(escape(printable(line)), soft_wrap=True))
        if dry_run:
            with hub_offline():
                instantiate(pipeline, context)
                print_plan(plan(pipeline, tasks, output=output, data_dir=data_dir, overwrite=overwrite), as_json)
            return
        instantiate(pipeline, context)
        output_folder(output, create=True)
        try:
            folder, outcomes = run_pipeline(pipeline, tasks, output=output, data_dir=data_dir,
                                            overwrite=overwrite, context=context, console=err, registry=reg)
        except KeyboardInterrupt:
            interrupted(pipeline, output)
            raise click.exceptions.Exit(130) from None
    for stage in pipeline.ordered():
        line = stage.instance.summary() if isinstance(stage.instance, Summarizes) else None
        if line:
            err.print(escape(line))
    print_summary(folder, outcomes, as_json)


def interrupted(pipeline, output: Path) -> None:
    """Say what Ctrl-C kept. Worker threads still running (an LLM request, a batch) are waited for
    at exit, so what they finish is stored too; a second Ctrl-C quits at once."""
    import signal
    import threading

    from ..results import ResultFolder

    where = ResultFolder(output, pipeline.spec()).path
    err.print(f"[yellow]Interrupted.[/] Finished tasks are saved in {escape(printable(where))} and finished work "
              "in the cache; run the same command again to resume.", soft_wrap=True)
    busy = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if busy:
        err.print(f"Finishing the {len(busy)} request(s) or batch(es) in flight so they are kept; "
                  "press Ctrl-C again to quit now.", soft_wrap=True)
        signal.signal(signal.SIGINT, lambda *_: os._exit(130))


def print_plan(plan: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(plan, indent=2, default=str))
        return
    out.print(f"[bold]Dry run:[/] {escape(printable(plan['label']))} (top {plan['top_k']})")
    for stage in plan["stages"]:
        options = " ".join(f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                           for k, v in stage["options"].items())
        out.print(f"  {stage['kind']:<9} {escape(stage['component'])} [dim](from {escape(stage['plugin'])})[/] "
                  f"{escape(printable(options))}")
    out.print(f"Results: {escape(printable(plan['results_dir']))}")
    if plan["experiment"]:
        out.print(f"  (mteb experiment {escape(plan['experiment'])} of {escape(plan['model_name'])})")
    if plan["first_stage_dir"]:
        out.print(f"First stage (saved and reused): {escape(printable(plan['first_stage_dir']))}")
    table = Table(title_justify="left")
    for col in ("Task", "Group", "Data", "Would"):
        table.add_column(col)
    for t in plan["tasks"]:
        would = "reuse its results" if t["status"] == "reuse" else "compute" + (f" ({t['reason']})" if t["reason"] else "")
        table.add_row(escape(t["alias"]), t["group"] or "-", "official" if t["official_data"] else "local",
                      escape(would))
    out.print(table)


def print_summary(folder, outcomes, as_json: bool) -> None:
    """Per-task and average nDCG@10 as the leaderboard computes them, beside the published numbers
    when the run is a published row's configuration on R2MED's official data."""
    from ..evaluation import leaderboard_average, leaderboard_value
    from ..leaderboard import published_row_for

    values = [leaderboard_value(o.ndcg_at_10) for o in outcomes]
    average = leaderboard_average(values)
    official = all(o.official for o in outcomes)
    row = published_row_for(folder.display_name, folder.spec.config) if official else None
    published = [row.scores.get(o.task.name) if row else None for o in outcomes]
    published_average = row.average if row and len(outcomes) == 8 and None not in published else None
    if as_json:
        click.echo(json.dumps({
            "pipeline": folder.display_name,
            "label": folder.label,
            "model_name": folder.name,
            "revision": folder.revision,
            "experiment": folder.experiment,
            "results_dir": str(folder.path),
            "official_data": official,
            "tasks": [{"task": o.task.name, "alias": o.task.short_name, "ndcg_at_10": o.ndcg_at_10,
                       "ndcg_at_10_x100": v, "published_ndcg_at_10_x100": p, "n_queries": o.n_queries,
                       "status": o.status, "official_data": o.official}
                      for o, v, p in zip(outcomes, values, published)],
            "average_ndcg_at_10_x100": average,
            "published_average_x100": published_average,
        }, indent=2))
        return
    table = Table(title=f"{escape(printable(folder.label))}: nDCG@10 ×100", title_justify="left")
    compared = any(p is not None for p in published)
    cached = any(o.status == "cached" for o in outcomes)
    columns = ["Task", "Group", "Queries", "nDCG@10", *(["Published", "Δ"] if compared else [])]
    for col in columns:
        table.add_column(col, justify="left" if col in ("Task", "Group") else "right")
    if cached:
        table.add_column("", style="dim")

    def versus(value: float, reference: float | None) -> list[str]:
        if not compared:
            return []
        return ["-", ""] if reference is None else [f"{reference:.2f}", f"{value - reference:+.2f}"]

    for o, v, p in zip(outcomes, values, published):
        note = ["from earlier run" if o.status == "cached" else ""] if cached else []
        table.add_row(escape(o.task.short_name), o.task.group or "-", str(o.n_queries), f"{v:.2f}", *versus(v, p),
                      *note)
    table.add_section()
    label = f"Average of {len(outcomes)} task{'s' if len(outcomes) != 1 else ''}"
    table.add_row(label, "", "", f"{average:.2f}", *versus(average, published_average), *([""] if cached else []))
    out.print(table)
    if compared:
        out.print(f"Published: the R2MED leaderboard's row {escape(row.system)!r}")
    elif not official and any(o.task.is_r2med for o in outcomes):
        out.print("Local data: not R2MED's data at mteb's pinned revisions, so no published comparison")
    out.print(f"Results: {escape(printable(folder.path))}")


