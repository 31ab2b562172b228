"""``r2med reproduce``: a published row's command run, and each figure judged against the published one."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from ..running.request import PathOption
from ..terminal import number, printable
from .common import err, out, user_errors


@click.command("reproduce", short_help="Reproduce a published row and judge it.")
@click.argument("row")
@click.option("--output", type=PathOption(), metavar="DIR", help="Where the run's results go (default: the "
                                                                  "command's own, results).")
@click.option("--data-dir", type=PathOption(), metavar="DIR",
              help="R2MED's data from a local copy instead of the hub (then no verdict, the run's own scores: "
                   "published figures speak of the hub's data at mteb's pinned revisions).")
@click.option("--cache-dir", type=PathOption(), metavar="DIR", help="The cache folder (default: the user's).")
@click.option("--dry-run", is_flag=True, help="Show the command, the published figures and the tolerance; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def reproduce_command(row, output, data_dir, cache_dir, dry_run, as_json):
    """Reproduce a published row (ROW: its name as `r2med leaderboard` shows it, or its rank there):
    run its command, then print per dataset and for the average the published figure, what the run
    got, the difference and a verdict: OK (as printed), OKish (within the tolerance of its kind of
    system), FAIL. Exit status 1 on a FAIL."""
    from ..board.reproduce import reproduce, reproduction_plan

    with user_errors():
        if dry_run:
            reproduction = reproduction_plan(row)
        else:
            reproduction = reproduce(row, console=err, output=output, data_dir=data_dir, cache_dir=cache_dir,
                                     log=lambda line: err.print(escape(printable(line)), soft_wrap=True))
    if as_json:
        click.echo(json.dumps(reproduction.to_json(), indent=2))
    else:
        show(reproduction, dry_run)
    if reproduction.verdict == "FAIL":
        raise click.exceptions.Exit(1)


def show(reproduction, dry_run: bool) -> None:
    rank = f"#{reproduction.rank} " if reproduction.rank else ""
    out.print(f"{escape(rank + printable(reproduction.row))}", highlight=False)
    out.print(f"  {escape(printable(reproduction.command))}", soft_wrap=True, highlight=False)
    tolerance = reproduction.tolerance
    out.print(f"  tolerance ({tolerance.kind}): OK as printed (±{tolerance.ok}), OKish within ±{tolerance.okish}: "
              f"{escape(tolerance.why)}", soft_wrap=True, highlight=False)
    if reproduction.note:
        out.print(f"[yellow]{escape(printable(reproduction.note))}[/]", soft_wrap=True)
    table = Table(title="nDCG@10 ×100", title_justify="left")
    for col in ("Task", "Published", *(() if dry_run else ("Got", "Difference", "Verdict"))):
        table.add_column(col, justify="left" if col in ("Task", "Verdict") else "right")
    checks = [*reproduction.tasks, *([reproduction.average] if reproduction.average else [])]
    for check in checks:
        if check is reproduction.average:
            table.add_section()
        cells = [check.task, number(check.expected)]
        if not dry_run:
            verdict = check.verdict or "-"
            style = {"OK": "green", "OKish": "yellow", "FAIL": "red"}.get(verdict, "")
            cells += ["-" if check.got is None else number(check.got),
                      "-" if check.difference is None else number(check.difference, signed=True),
                      f"[{style}]{verdict}[/]" if style else verdict]
        table.add_row(*cells)
    out.print(table)
    if not dry_run:
        out.print(f"Verdict: {reproduction.verdict or 'none'}; results: {escape(str(reproduction.results_dir))}",
                  soft_wrap=True, highlight=False)
