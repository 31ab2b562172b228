"""Command line: ``r2med run|plugins|list`` and ``r2med-run`` (= ``r2med run``).

Start-up stays light: this module imports click, rich and the plugin registry only; torch, mteb and
models load when a run needs them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .errors import UserError

out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class CommandError(click.ClickException):
    exit_code = 2

    def show(self, file=None) -> None:
        err.print(f"[bold red]Error:[/] {escape(self.message)}", soft_wrap=True)


@contextmanager
def user_errors(debug: bool = False):
    """User mistakes become one line and exit status 2; ``--debug`` keeps the traceback."""
    try:
        yield
    except UserError as e:
        if debug:
            raise
        raise CommandError(str(e)) from None


def registry():
    from .plugins import get_plugins
    from .registry import build_registry

    plugins = get_plugins()
    reg = build_registry(plugins)
    return plugins, reg


def warn_broken(plugins) -> None:
    for b in plugins.broken:
        err.print("[yellow]warning:[/] " + escape(f"plugin {b.name} {b.version or ''} ({b.module}) is broken and "
                  f"was skipped: {b.error}. Set R2MED_LOAD_PLUGINS to load only the packages you name."),
                  soft_wrap=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="r2med")
def cli():
    """R2MED evaluation harness: MTEB-compatible tasks, pluggable retrievers, rewriters, rerankers."""


RUN_HELP = """Evaluate a pipeline [rewriter] -> retriever -> [reranker] on R2MED tasks.

\b
Examples:
  r2med-run --plugin bm25 --tasks sample
  r2med-run --plugin st -o model=sentence-transformers/all-MiniLM-L6-v2 --tasks qa-reference
  r2med-run --plugin st -o model=PATH --data-dir DIR --tasks Biology,PMC-Clinical
"""


@click.command("run", help=RUN_HELP)
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
              help="Component option; NAME.KEY=VALUE sends it to one component.")
@click.option("--top-k", type=click.IntRange(1), default=100, show_default=True,
              help="Documents kept per query (the published runs keep 100).")
@click.option("--device", metavar="DEVICE",
              help="cpu, cuda, cuda:N, or cuda:0,cuda:1 for several GPUs: sets the device of every selected "
                   "component that runs models (same as -o device=...).")
@click.option("--cache-dir", type=click.Path(path_type=Path), metavar="DIR",
              help="Where components keep indexes and embeddings (default: $R2MED_CACHE_DIR or ~/.cache/r2med).")
@click.option("--overwrite", is_flag=True, help="Recompute tasks that already have results.")
@click.option("--dry-run", is_flag=True,
              help="Check plugins, options and tasks, and show the results folder and which tasks would be "
                   "computed; loads no data and downloads nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary (or the --dry-run plan) as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
def run_command(plugin_names, task_names, data_dir, output, options, top_k, device, cache_dir, overwrite, dry_run,
                as_json, debug):
    from .pipeline import build_pipeline, instantiate
    from .runner import plan, run_pipeline

    with user_errors(debug):
        if cache_dir is not None:
            os.environ["R2MED_CACHE_DIR"] = str(cache_dir)
        plugins, reg = registry()
        warn_broken(plugins)
        reg.check()
        pipeline = build_pipeline(reg, list(plugin_names), list(options), top_k=top_k, device=device)
        tasks = choose_tasks(reg, list(task_names), data_dir)
        if dry_run:
            with hub_offline():
                instantiate(pipeline)
                print_plan(plan(pipeline, tasks, output=output, data_dir=data_dir, overwrite=overwrite), as_json)
            return
        instantiate(pipeline)
        try:
            folder, outcomes = run_pipeline(pipeline, tasks, output=output, data_dir=data_dir,
                                            overwrite=overwrite, console=err)
        except KeyboardInterrupt:
            interrupted(pipeline, output)
            raise click.exceptions.Exit(130) from None
    for stage in pipeline.ordered():
        summary = getattr(stage.instance, "summary", None)
        line = summary() if callable(summary) else None
        if line:
            err.print(escape(line))
    print_summary(folder, outcomes, as_json)


def interrupted(pipeline, output: Path) -> None:
    """Say what Ctrl-C kept. Worker threads still running (an LLM request, a batch) are waited for
    at exit, so what they finish is stored too; a second Ctrl-C quits at once."""
    import signal
    import threading

    from .results import ResultFolder

    where = ResultFolder(output, pipeline.spec()).path
    err.print(f"[yellow]Interrupted.[/] Finished tasks are saved in {escape(str(where))} and finished work "
              "in the cache; run the same command again to resume.", soft_wrap=True)
    busy = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if busy:
        err.print(f"Finishing the {len(busy)} request(s) or batch(es) in flight so they are kept; "
                  "press Ctrl-C again to quit now.", soft_wrap=True)
        signal.signal(signal.SIGINT, lambda *_: os._exit(130))


def choose_tasks(reg, task_names: list[str], data_dir: Path | None):
    if task_names:
        return reg.tasks(task_names)
    if data_dir is None:
        return reg.tasks(["r2med"])
    if not data_dir.is_dir():
        raise UserError(f"--data-dir {data_dir}: not a folder")
    found = []
    for entry in reg.entries["task"]:
        try:
            entry.spec.find_folder(data_dir, only_task=False)
            found.append(entry.spec)
        except UserError:
            pass
    if not found:
        raise UserError(f"--data-dir {data_dir}: no task folders found (expected e.g. {data_dir}/Biology/corpus.jsonl); "
                        "name the task with --tasks for a flat folder")
    return found


@contextmanager
def hub_offline():
    """No downloads while the block runs: a hub model resolves only from the local cache."""
    saved = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")  # already imported: it read the variable
    saved_constant = getattr(constants, "HF_HUB_OFFLINE", None)
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved
        now = sys.modules.get("huggingface_hub.constants")  # imported inside the block: it read "1"
        if now is not None:
            now.HF_HUB_OFFLINE = (saved_constant if constants is not None
                                  else (saved or "").strip().upper() in ("1", "ON", "YES", "TRUE"))


def print_plan(plan: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(plan, indent=2, default=str))
        return
    out.print(f"[bold]Dry run:[/] {escape(plan['label'])} (top {plan['top_k']})")
    for stage in plan["stages"]:
        options = " ".join(f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                           for k, v in stage["options"].items())
        out.print(f"  {stage['kind']:<9} {escape(stage['component'])} [dim](from {escape(stage['plugin'])})[/] "
                  f"{escape(options)}")
    out.print(f"Results: {escape(plan['results_dir'])}")
    if plan["experiment"]:
        out.print(f"  (mteb experiment {escape(plan['experiment'])} of {escape(plan['model_name'])})")
    if plan["first_stage_dir"]:
        out.print(f"First stage (saved and reused): {escape(plan['first_stage_dir'])}")
    for member in plan["member_dirs"]:
        out.print(f"Member run (saved and reused): {escape(member)}")
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
    from .evaluation import leaderboard_average, leaderboard_value
    from .leaderboard import published_row_for

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
    table = Table(title=f"{escape(folder.label)}: nDCG@10 ×100", title_justify="left")
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
    out.print(f"Results: {escape(str(folder.path))}")


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plugins_command(as_json):
    """List installed plugin packages, their versions and components."""
    plugins, reg = registry()
    rows: dict[tuple[str, str | None], dict] = {}
    for kind, entries in reg.entries.items():
        for e in entries:
            row = rows.setdefault((e.plugin.name, e.plugin.version),
                                  {"name": e.plugin.name, "version": e.plugin.version, "components": {}})
            row["components"].setdefault(kind + "s", []).append(e.spec.name)
    for b in plugins.broken:
        rows.setdefault((b.name, b.version), {"name": b.name, "version": b.version, "components": {}})["error"] = b.error
    data = sorted(rows.values(), key=lambda r: r["name"])
    if as_json:
        click.echo(json.dumps({"plugins": data, "conflicts": reg.conflicts}, indent=2))
        return
    table = Table()
    for col in ("Package", "Version", "Components", "Status"):
        table.add_column(col)
    for r in data:
        comps = "; ".join(f"{k}: {', '.join(v)}" for k, v in r["components"].items())
        table.add_row(escape(r["name"]), r["version"] or "-", escape(comps),
                      f"[red]broken: {escape(r['error'])}[/]" if "error" in r else "ok")
    out.print(table)
    for c in reg.conflicts:
        err.print(f"[red]conflict:[/] {escape(c)}")


@cli.command("list")
@click.argument("what", type=click.Choice(["tasks", "retrievers", "rewriters", "rerankers", "llms"]))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_command(what, as_json):
    """List tasks or components."""
    plugins, reg = registry()
    warn_broken(plugins)
    kind = what[:-1]
    entries = reg.entries[kind]
    if kind == "task":
        rows = [{"name": e.spec.name, "alias": e.spec.short_name, "group": e.spec.group,
                 "hub_path": e.spec.hub_path, "revision": e.spec.revision,
                 "documents": e.spec.extra.get("n_docs"), "queries": e.spec.extra.get("n_queries"),
                 "plugin": e.plugin.name, "description": e.spec.description} for e in entries]
        columns = ("name", "alias", "group", "revision", "documents", "queries")
    elif kind == "llm":
        rows = [{"name": e.spec.name, "aliases": list(e.spec.aliases), "plugin": e.plugin.name,
                 "description": e.spec.description} for e in entries]
        columns = ("name", "aliases", "plugin", "description")
    else:
        rows = [{"name": e.spec.name, "aliases": list(e.spec.aliases), "plugin": e.plugin.name,
                 "version": e.plugin.version, "options": dict(e.spec.options),
                 "description": e.spec.description, "reference": e.spec.reference} for e in entries]
        columns = ("name", "aliases", "plugin", "options", "description", "reference")
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    table = Table()
    for col in columns:
        table.add_column(col.capitalize())
    for r in rows:
        table.add_row(*(escape(_cell(col, r[col])) for col in columns))
    out.print(table)


def _cell(col: str, value) -> str:
    if value is None:
        return "-"
    if col == "revision":
        return value[:10]
    if col == "documents":
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(value) or "-"
    return str(value)


@cli.command("leaderboard")
@click.argument("folders", nargs=-1, type=click.Path(path_type=Path))
@click.option("--mteb-results", type=click.Path(path_type=Path), metavar="DIR",
              help="A clone of the MTEB results repository (its results/ folder is read; R2MED tasks only).")
@click.option("--no-published", is_flag=True, help="Leave out the published leaderboard rows.")
@click.option("--include-local", is_flag=True,
              help="Also rank results on local data (not R2MED's at mteb's pinned revisions), marked as such.")
@click.option("--tasks", "group", type=click.Choice(["qa-reference", "clinical-evidence", "clinical-case"]),
              help="Only this task group's datasets (and their average).")
@click.option("--rewriter", help="Only rows whose rewriter contains this text.")
@click.option("--retriever", help="Only rows whose retriever contains this text.")
@click.option("--top", type=click.IntRange(1), help="Only the first N rows.")
@click.option("--commands", is_flag=True,
              help="Show the r2med-run command that reproduces each published row instead of the scores.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json", "html"]), default="table",
              show_default=True)
@click.option("--output", type=click.Path(path_type=Path), help="Write to FILE instead of the terminal.")
def leaderboard_command(folders, mteb_results, no_published, include_local, group, rewriter, retriever, top, commands,
                        fmt, output):
    """Rank the published R2MED systems, your results folders and MTEB results in one table.

    FOLDERS are results folders in mteb's layout (default: ./results when it exists).
    """
    from . import atomic
    from .leaderboard import merge, published_rows, ranked, render, result_rows, select

    def warn(message: str) -> None:
        err.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)

    with user_errors():
        sources = list(folders) or ([Path("results")] if Path("results").is_dir() else [])
        if mteb_results is not None:
            sources.append(mteb_results / "results" if (mteb_results / "results").is_dir() else mteb_results)
        rows = [] if no_published else published_rows()
        for folder in sources:
            if not folder.is_dir():
                raise UserError(f"{folder}: not a folder of results")
            found = result_rows(folder, warn)
            if not found:
                warn(f"{folder}: no results of R2MED tasks (runs on other tasks, such as sample, are not ranked)")
            rows += found
        chosen, tasks = select(ranked(merge(rows)), group=group, rewriter=rewriter, retriever=retriever, top=top,
                               include_local=include_local)
        text = render(chosen, tasks, fmt, commands=commands)
    if output is None:
        if fmt == "table":
            out.print(text)
        else:
            click.echo(text, nl=False)
    else:
        atomic.write_text(output, text if isinstance(text, str) else str(text))
        err.print(f"Wrote {escape(str(output))}")


@cli.command("compare")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--test", type=click.Choice(["randomization", "t"]), default="randomization", show_default=True,
              help="Paired test over queries: sign-flip randomization or paired t-test.")
@click.option("--trials", type=click.IntRange(1), default=10000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def compare_command(run_a, run_b, test, trials, seed, as_json):
    """Per-dataset and average nDCG@10 difference of two runs (B - A), with a paired significance
    test over queries per dataset and Holm's correction across datasets.

    RUN_A and RUN_B are results folders of r2med-run (<output>/<model>/<revision>/).
    """
    from .results import read_per_query_ndcg
    from .significance import compare

    with user_errors():
        per_query = [read_per_query_ndcg(folder) for folder in (run_a, run_b)]
        try:
            result = compare(*per_query, test=test, trials=trials, seed=seed)
        except ValueError as e:
            raise UserError(f"compare {run_a} {run_b}: {e}") from None
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    table = Table(title=f"nDCG@10 ×100: B ({escape(str(run_b))}) - A ({escape(str(run_a))})", title_justify="left")
    for col in ("Task", "Queries", "A", "B", "B - A", "p", "p (Holm)"):
        table.add_column(col, justify="left" if col == "Task" else "right")
    for name, t in result["tasks"].items():
        table.add_row(escape(name), str(t["n_queries"]), f"{100 * t['mean_a']:.2f}", f"{100 * t['mean_b']:.2f}",
                      f"{100 * t['difference']:+.2f}", f"{t['p_value']:.4f}", f"{t['p_holm']:.4f}")
    avg = result["average"]
    table.add_section()
    table.add_row(f"Average of {avg['n_tasks']}", "", f"{100 * avg['mean_a']:.2f}", f"{100 * avg['mean_b']:.2f}",
                  f"{100 * avg['difference']:+.2f}", "", "")
    out.print(table)


@cli.command("fuse")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--qrels", type=click.Path(path_type=Path), metavar="FILE",
              help="Judgments for TREC-file inputs: R2MED's qrels.jsonl or a TREC qrels file.")
@click.option("--task", "task_name", metavar="TASK", help="The task TREC-file inputs are runs of (default: sample).")
@click.option("--data-dir", type=click.Path(path_type=Path), metavar="DIR",
              help="Judgments for results-folder inputs, from DIR/<Name>/qrels.jsonl (default: the hub).")
@click.option("--output", type=click.Path(path_type=Path), default=Path("results"), show_default=True)
@click.option("--fusion", type=click.Choice(["rrf", "zscore", "minmax", "linear"]), default="rrf", show_default=True)
@click.option("--weights", help="Comma-separated, one per input (default: equal).")
@click.option("--rrf-k", type=click.IntRange(0), default=60, show_default=True)
@click.option("--depth", type=click.IntRange(1), default=100, show_default=True)
@click.option("--top-k", type=click.IntRange(1), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def fuse_command(inputs, qrels, task_name, data_dir, output, fusion, weights, rrf_k, depth, top_k, as_json):
    """Fuse runs from anywhere into a new results folder the leaderboard reads.

    INPUTS are TREC run files (one task: give --qrels) or results folders of r2med-run (every task
    they all have). Default: RRF with k=60 over each input's top 100 (Cormack et al., 2009).
    """
    from .data import read_qrels
    from .evaluation import score
    from .fusion import fuse, read_trec
    from .plugins import get_plugins
    from .registry import build_registry
    from .results import ResultFolder, RunSpec, code_versions, digest, locked, run_name, slug
    from .runner import TaskOutcome

    with user_errors():
        if len(inputs) < 2:
            raise UserError("r2med fuse: give at least two runs")
        weight_list = None
        if weights:
            try:
                weight_list = [float(w) for w in weights.split(",")]
            except ValueError:
                raise UserError(f"--weights {weights}: comma-separated numbers") from None
        reg = build_registry(get_plugins())
        folders = [p for p in inputs if p.is_dir()]
        if folders and len(folders) != len(inputs):
            raise UserError("r2med fuse: give either TREC files or results folders, not both")
        if folders:
            common = set.intersection(*({f.name.removesuffix(".trec") for f in d.glob("*.trec")} for d in folders))
            if not common:
                raise UserError("r2med fuse: the folders have no task in common (no shared <Task>.trec)")
            jobs = [(reg.tasks([name])[0], [d / f"{name}.trec" for d in folders]) for name in sorted(common)]
        else:
            if qrels is None:
                raise UserError("r2med fuse: TREC-file inputs need --qrels FILE")
            jobs = [(reg.tasks([task_name or "sample"])[0], list(inputs))]
        for _, paths in jobs:
            for path in paths:
                if not path.is_file():
                    raise UserError(f"{path}: no such run file")
        names = [run_name(p) for p in inputs]
        display = " ⊕ ".join(names) + f" ({fusion.upper()})"
        inputs_id = [{"name": name, "runs": _content_digest(paths)}
                     for name, paths in zip(names, zip(*(p for _, p in jobs)))]
        config = {"fusion": fusion, "weights": weight_list, "rrf_k": rrf_k, "depth": depth, "top_k": top_k,
                  "inputs": inputs_id}
        defaults = {"weights": None, "rrf_k": 60, "depth": 100, "top_k": 100}
        spec = RunSpec(display_name=display, model={"name": f"r2med/{slug(display)}", "revision": digest(inputs_id)},
                       config=config, models={}, code=code_versions({}), composite=False,
                       variant={k: config[k] for k, v in defaults.items() if config[k] != v})
        folder = ResultFolder(output, spec)
        folder.check_claim()
        outcomes = []
        with locked([folder], lambda message: err.print(f"[yellow]waiting:[/] {escape(message)}")):
            folder.claim()
            for task, paths in jobs:
                try:
                    fused = fuse([read_trec(p) for p in paths], method=fusion, weights=weight_list, rrf_k=rrf_k,
                                 depth=depth, top_k=top_k)
                except ValueError as e:
                    raise UserError(f"r2med fuse: {e}") from None
                if qrels is not None:
                    judgments = read_qrels(qrels)
                    data_id = {"source": "qrels-file", "revision": _content_digest([qrels]), "official": False}
                else:
                    judgments, data_id = _task_qrels(task, data_dir)
                fused = {q: docs for q, docs in fused.items() if q in judgments}
                scores, per_query = score(fused, judgments)
                folder.write(task.mteb_metadata(data_id["revision"]), spec.task_identity(task.name, data_id),
                             scores, fused, per_query, evaluation_time=0.0, phases=[])
                outcomes.append(TaskOutcome(task, scores["main_score"], len(per_query), "computed",
                                            data_id["official"]))
    print_summary(folder, outcomes, as_json)


def _task_qrels(task, data_dir: Path | None) -> tuple[dict, dict]:
    data = task.load(data_dir)
    return data.qrels, task.data_identity(data_dir, revision=data.revision)


def _content_digest(paths) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:16]


@cli.command("export-mteb")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def export_mteb_command(run_dir, dest, as_json):
    """Copy a run (RUN_DIR = <output>/<org__model>/<revision>/) into DEST laid out as the MTEB
    results repository expects, and list what would block a pull request there."""
    from .export import export_run

    with user_errors():
        target, problems = export_run(run_dir, dest)
    if as_json:
        click.echo(json.dumps({"exported_to": str(target), "problems": problems}, indent=2))
        return
    out.print(f"Exported to {escape(str(target))}")
    if problems:
        out.print("Before a pull request to embeddings-benchmark/results can merge:")
        for problem in problems:
            out.print(f"  - {escape(problem)}")
    else:
        out.print("No problem found; open a pull request with that folder (mteb's ResultCache.submit_results can).")


cli.add_command(run_command)


def main() -> None:
    cli(prog_name="r2med")


def run_main() -> None:
    run_command(prog_name="r2med-run")


if __name__ == "__main__":
    sys.exit(main())
