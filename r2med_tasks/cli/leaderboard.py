"""``r2med leaderboard``, ``r2med compare`` and ``r2med export-mteb``: results side by side."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from ..errors import UserError
from .common import err, out, user_errors


@click.command("leaderboard")
@click.argument("folders", nargs=-1, type=click.Path(path_type=Path))
@click.option("--mteb-results", type=click.Path(path_type=Path), metavar="DIR",
              help="A clone of the MTEB results repository (its results/ folder is read; R2MED tasks only).")
@click.option("--published", "which", type=click.Choice(["leaderboard", "all", "none"]), default="leaderboard",
              show_default=True,
              help="Published rows: the leaderboard's 69, all published runs (also the authors' repository's "
                   "runs that are not leaderboard rows), or none.")
@click.option("--no-published", is_flag=True, help="Same as --published none.")
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
def leaderboard_command(folders, mteb_results, which, no_published, include_local, group, rewriter, retriever, top, commands,
                        fmt, output):
    """Rank the published R2MED systems, your results folders and MTEB results in one table.

    FOLDERS are results folders in mteb's layout (default: ./results when it exists).
    """
    from .. import atomic
    from ..leaderboard import (
        keep_published,
        merge,
        published_rows,
        ranked,
        render,
        result_rows,
        select,
    )

    def warn(message: str) -> None:
        err.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)

    with user_errors():
        sources = list(folders) or ([Path("results")] if Path("results").is_dir() else [])
        if mteb_results is not None:
            sources.append(mteb_results / "results" if (mteb_results / "results").is_dir() else mteb_results)
        if no_published:
            if which not in ("leaderboard", "none"):
                raise UserError(f"--no-published contradicts --published {which}")
            which = "none"
        rows = published_rows(which=which)
        for folder in sources:
            if not folder.is_dir():
                raise UserError(f"{folder}: not a folder of results")
            every = result_rows(folder, warn)
            found = keep_published(every, which)
            if not every:
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


@click.command("compare")
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
    from ..results import read_per_query_ndcg
    from ..significance import compare

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



@click.command("export-mteb")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def export_mteb_command(run_dir, dest, as_json):
    """Copy a run (RUN_DIR = <output>/<org__model>/<revision>/) into DEST laid out as the MTEB
    results repository expects, and list what would block a pull request there."""
    from ..export import export_run

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


