"""``r2med export-generations``: a run's LLM generations in R2MED's published layout, to share and replay."""

from __future__ import annotations

import json

import click
from rich.markup import escape

from ..running.request import PathOption
from .common import out, user_errors


@click.command("export-generations", short_help="Export a run's generations in R2MED's layout.")
@click.argument("run_dir", type=PathOption())
@click.argument("data_dir", type=PathOption())
@click.option("--tasks", "task_names", multiple=True, metavar="TASKS",
              help="Only these tasks (default: every task of RUN_DIR with generations).")
@click.option("--llm", metavar="NAME",
              help="The <llm> folder to write (default: the served model's name, e.g. qwen2.5-7b-instruct).")
@click.option("--cache-dir", type=PathOption(), metavar="DIR", help="The cache folder (default: the user's).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def export_generations_command(run_dir, data_dir, task_names, llm, cache_dir, as_json):
    """Write what the rewriter of RUN_DIR (a results folder) generated as
    DATA_DIR/<Task>/<method>/<llm>/query_with_hydoc.jsonl, R2MED's published layout, and print the
    command that replays it (-o source=<llm>) without asking any LLM. Files already there are
    never changed."""
    from ..api import export_generations

    with user_errors():
        exported = export_generations(run_dir, data_dir, tasks=task_names or None, llm=llm, cache_dir=cache_dir)
    if as_json:
        click.echo(json.dumps([e.to_json() for e in exported], indent=2))
        return
    for e in exported:
        verb = "wrote" if e.status == "written" else "already there:"
        out.print(f"{escape(e.task)}: {verb} {escape(str(e.path))} ({e.queries} queries)", soft_wrap=True)
    out.print("Replay (the same run, no LLM request):")
    for command in dict.fromkeys(e.replay for e in exported):
        out.print(f"  {escape(command)}", soft_wrap=True, highlight=False)
