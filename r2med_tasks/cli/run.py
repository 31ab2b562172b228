"""``r2med-run`` / ``r2med run``: evaluate a pipeline, plan a run (``--dry-run``), print the summary."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from ..running.request import RUN_PARAMS, execute, plan_request, request_from_params
from ..terminal import number, printable
from .common import INTERRUPT_GRACE_S, Command, err, installed_plugins, out, user_errors, warn_broken, work_in_flight

RUN_HELP = """Evaluate a pipeline [rewriter] -> retriever -> [reranker] on R2MED tasks.

\b
Examples:
  r2med-run --plugin bm25 --tasks sample
  r2med-run --plugin st -o model=sentence-transformers/all-MiniLM-L6-v2 --tasks qa-reference
  r2med-run --plugin st -o model=PATH --data-dir DIR --tasks Biology,PMC-Clinical
"""


@click.command("run", short_help="Evaluate a pipeline on R2MED's tasks.", cls=Command, help=RUN_HELP, params=list(RUN_PARAMS),
               context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="r2med")
def run_command(**params):
    request = request_from_params(params)
    with user_errors():
        plugins, reg = installed_plugins()
        warn_broken(plugins)
        if params["dry_run"]:
            print_plan(plan_request(request, registry=reg), params["as_json"])
            return
        try:
            outcome = execute(request, console=err, registry=reg,
                              log=lambda line: err.print(escape(printable(line)), soft_wrap=True))
        except KeyboardInterrupt:
            interrupted(request.output)
            raise click.exceptions.Exit(130) from None
    for line in outcome.summaries:
        err.print(escape(printable(line)))
    print_summary(outcome, params["as_json"])


def interrupted(output: Path) -> None:
    """Say what Ctrl-C kept, in one line. Worker threads still running (an LLM request, a batch) are
    waited for a few seconds at exit, so what they finish is stored too; another Ctrl-C quits at
    once (``common.interrupts``)."""
    busy = work_in_flight()
    waiting = (f" Waiting up to {INTERRUPT_GRACE_S:g} s for the {len(busy)} request(s) or batch(es) in flight; "
               "Ctrl-C again quits now." if busy else "")
    err.print(f"[yellow]Interrupted.[/] Finished tasks are saved under {escape(printable(output))} and finished work "
              f"in the cache; run the same command again to resume.{waiting}", soft_wrap=True)


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
    for folder in plan["results_dirs"]:
        out.print(f"Results: {escape(printable(folder))}")
    if plan["experiment"]:
        out.print(f"  (mteb experiment {escape(plan['experiment'])} of {escape(plan['model_name'])})")
    for folder in plan["first_stage_dirs"]:
        out.print(f"First stage (saved and reused): {escape(printable(folder))}")
    table = Table(title_justify="left")
    for col in ("Task", "Group", "Data", "Would"):
        table.add_column(col)
    for t in plan["tasks"]:
        would = "reuse its results" if t["status"] == "reuse" else "compute" + (f" ({t['reason']})" if t["reason"] else "")
        table.add_row(escape(t["alias"]), t["group"] or "-", "official" if t["official_data"] else "local",
                      escape(would))
    out.print(table)


def print_summary(outcome, as_json: bool) -> None:
    """Per-task and average nDCG@10 as the leaderboard computes them, beside the published numbers
    when the run is a published row's configuration on R2MED's official data (the configuration the
    run carried on its outcome, compared with the one the row's command builds)."""
    from ..board.leaderboard import published_row_for
    from ..tasks.specs import R2MED_TASKS

    tasks = outcome.tasks
    average = outcome.average_x100()
    config = outcome.spec.config if outcome.spec is not None else None
    row = published_row_for(outcome.display_name, config) if outcome.official_data and config else None
    published = [row.scores.get(o.task) if row else None for o in tasks]
    published_average = row.average if row and len(tasks) == 8 and None not in published else None
    if as_json:
        data = outcome.to_json()
        for task, p in zip(data["tasks"], published):
            task["published_ndcg_at_10_x100"] = p
        click.echo(json.dumps({**data, "published_average_x100": published_average}, indent=2))
        return
    table = Table(title=f"{escape(printable(outcome.label))}: nDCG@10 ×100", title_justify="left")
    compared = any(p is not None for p in published)
    cached = any(o.status == "cached" for o in tasks)
    columns = ["Task", "Group", "Queries", "nDCG@10", *(["Published", "Δ"] if compared else [])]
    for col in columns:
        table.add_column(col, justify="left" if col in ("Task", "Group") else "right")
    if cached:
        table.add_column("", style="dim")

    def versus(value: float, reference: float | None) -> list[str]:
        if not compared:
            return []
        return ["-", ""] if reference is None else [number(reference), number(value - reference, signed=True)]

    for o, p in zip(tasks, published):
        note = ["from earlier run" if o.status == "cached" else ""] if cached else []
        table.add_row(escape(o.alias), o.group or "-", str(o.n_queries), f"{o.ndcg_at_10_x100:.2f}",
                      *versus(o.ndcg_at_10_x100, p), *note)
    table.add_section()
    label = f"Average of {len(tasks)} task{'s' if len(tasks) != 1 else ''}"
    table.add_row(label, "", "", f"{average:.2f}", *versus(average, published_average), *([""] if cached else []))
    out.print(table)
    totals = outcome.totals()
    for line in (cost_line(totals, reused=cached), unusable_line(totals)):
        if line:
            out.print(escape(line), soft_wrap=True)
    r2med = {t.name for t in R2MED_TASKS}
    if compared:
        out.print(f"Published: the R2MED leaderboard's row {escape(row.system)!r}")
    elif not outcome.official_data and any(o.task in r2med for o in tasks):
        out.print("Local data: not R2MED's data at mteb's pinned revisions, so no published comparison")
    for folder in outcome.results_dirs:
        out.print(f"Results: {escape(printable(folder))}")


def unusable_line(totals: dict) -> str | None:
    """The LLM answers the run's stages could not use, per stage; None when they used every one."""
    counts = {stage: c for stage, c in (totals.get("llm_answers") or {}).items() if c["unusable"]}
    if not counts:
        return None
    return "Unusable LLM answers: " + ", ".join(f"{stage} {c['unusable']:,} of {c['answers']:,}"
                                                for stage, c in counts.items())


def cost_line(totals: dict, *, reused: bool = False) -> str | None:
    """The run's totals under the table: LLM requests and tokens, dollars, and wall seconds per stage
    (a reused task's as its cost file recorded them); None when no task recorded any."""
    from ..results.folder import COST_STAGES
    from ..llm.usage import usd_text

    seconds = {k: v for k, v in (totals.get("seconds") or {}).items() if v is not None}
    usage = totals.get("usage")
    parts = []
    if usage:
        cached = f" (+{usage['cached']:,} from the cache)" if usage.get("cached") else ""
        reasoning = f" ({usage['reasoning_tokens']:,} reasoning)" if usage.get("reasoning_tokens") else ""
        usd = usage.get("usd")
        unknown = usage.get("unknown_tokens")
        price = ("cost unknown (no token counts)" if unknown else "cost unknown (no price: -o price=IN,OUT)") \
            if usd is None else usd_text(usd)
        counted = f" ({unknown:,} answers without token counts)" if unknown else ""
        parts.append(f"{usage['requests']:,} LLM requests{cached}, {usage['prompt_tokens']:,} prompt + "
                     f"{usage['completion_tokens']:,} completion tokens{reasoning}{counted}, {price}")
    if seconds:
        stages = ", ".join(f"{stage} {seconds[stage]:.1f}" for stage in COST_STAGES if stage in seconds)
        parts.append(f"{sum(seconds.values()):.1f} s ({stages})")
    if not parts:
        return None
    return "Total: " + "; ".join(parts) + (" (reused tasks as recorded when computed)" if reused else "")
