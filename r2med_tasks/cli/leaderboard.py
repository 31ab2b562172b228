"""``r2med leaderboard``, ``r2med compare`` and ``r2med export-mteb``: results side by side."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from ..errors import UserError
from ..request import PathOption
from ..terminal import printable
from .common import err, out, user_errors


@click.command("leaderboard")
@click.argument("folders", nargs=-1, type=click.Path(path_type=Path))
@click.option("--mteb-results", type=PathOption(), metavar="DIR",
              help="A clone of the MTEB results repository (its results/ folder is read; R2MED tasks only).")
@click.option("--published", "which", type=click.Choice(["leaderboard", "all", "none"]), default="leaderboard",
              show_default=True,
              help="Published rows: the leaderboard's 69, all published runs (also the authors' repository's "
                   "runs that are not leaderboard rows), or none.")
@click.option("--no-published", is_flag=True, help="Same as --published none.")
@click.option("--include-local", is_flag=True,
              help="Also rank results on local data (not R2MED's at mteb's pinned revisions), marked as such.")
@click.option("--tasks", "task_names", multiple=True, metavar="TASKS",
              help="Only these datasets (and their average, which ranks): R2MED dataset names, the paper's groups "
                   "(qa-reference, clinical-evidence, clinical-case) or r2med; comma-separated or repeated.")
@click.option("--rewriter", help="Only rows whose rewriter contains this text.")
@click.option("--retriever", help="Only rows whose retriever contains this text.")
@click.option("--reranker", help="Only rows whose reranker contains this text.")
@click.option("--top", type=click.IntRange(1), help="Only the first N rows.")
@click.option("--commands", is_flag=True,
              help="Show the r2med-run command that reproduces each published row instead of the scores.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json", "html"]), default="table",
              show_default=True)
@click.option("--wide", is_flag=True, help="The table with every column (rewriter, retriever, reranker, source "
                                           "and notes); by default it fits 120 columns.")
@click.option("--output", type=PathOption(), help="Write to FILE instead of the terminal.")
def leaderboard_command(folders, mteb_results, which, no_published, include_local, task_names, rewriter, retriever,
                        reranker, top, commands, fmt, wide, output):
    """Rank the published R2MED systems, your results folders and MTEB results in one table.

    FOLDERS are results folders in mteb's layout (default: ./results when it exists).
    """
    from .. import atomic
    from ..api import rank_systems

    with user_errors():
        if no_published:
            if which not in ("leaderboard", "none"):
                raise UserError(f"--no-published contradicts --published {which}")
            which = "none"
        board = rank_systems(list(folders) or None, mteb_results=mteb_results, published=which,
                             include_local=include_local, tasks=task_names, rewriter=rewriter, retriever=retriever,
                             reranker=reranker, top=top, statistics=not commands, on_warning=warn)
        width = min(120, out.width) if output is None and out.is_terminal else 120
        text = board.render(fmt, commands=commands, wide=wide, width=width)
    text = text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate from a file's "\ud800" is "?"
    if output is None:
        echo(text)
    else:
        atomic.write_text(output, text)
        err.print(f"Wrote {escape(printable(output))}")


def echo(text: str) -> None:
    """``text`` on standard output in whatever encoding it has (PYTHONIOENCODING=ascii, a latin-1
    terminal): a character it cannot encode (``×``, ``⊕``, a name's) is shown as ``?``, never a
    traceback."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        text = text.encode(encoding, "replace").decode(encoding)
    except LookupError:  # an encoding Python does not know: leave it to the stream
        pass
    click.echo(text, nl=False)


def warn(message: str) -> None:
    """One warning line; paths and names come from folders and are shown printable."""
    err.print(f"[yellow]warning:[/] {escape(printable(message))}", soft_wrap=True)


@click.command("compare")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--tasks", "task_names", multiple=True, metavar="TASKS",
              help="Only these tasks: names, the paper's groups or r2med (default: every task both runs have).")
@click.option("--test", type=click.Choice(["randomization", "t"]), default="randomization", show_default=True,
              help="Paired test over queries: sign-flip randomization or paired t-test.")
@click.option("--trials", type=click.IntRange(1), default=10000, show_default=True)
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the randomization test and of the bootstrap intervals (numpy default_rng).")
@click.option("--allow-different-data", is_flag=True,
              help="Compare tasks whose runs were scored on different data (another revision, local files, "
                   "other judgments); the output says what differs.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def compare_command(run_a, run_b, task_names, test, trials, seed, allow_different_data, as_json):
    """Per-dataset and average nDCG@10 difference of two runs (B - A), with its 95% paired bootstrap
    interval and a paired significance test over queries per dataset (Holm's correction across
    datasets). The average is over R2MED's datasets only, as the leaderboard's; other tasks
    (sample) are shown apart. Tasks whose stored data identities differ (another dataset revision,
    local files, other judgments) are refused unless --allow-different-data.

    RUN_A and RUN_B are results folders of r2med-run (<output>/<model>/<revision>/).
    """
    from ..api import compare_runs

    with user_errors():
        comparison = compare_runs(run_a, run_b, tasks=task_names, test=test, trials=trials, seed=seed,
                                  allow_different_data=allow_different_data)
    if as_json:
        click.echo(json.dumps(comparison.to_json(), indent=2))
        return
    table = Table(title=f"nDCG@10 ×100: B ({escape(printable(run_b))}) - A ({escape(printable(run_a))})",
                  title_justify="left")
    for col in ("Task", "Queries", "A", "B", "B - A", "95% CI of B - A", "p", "p (Holm)"):
        table.add_column(col, justify="left" if col == "Task" else "right")

    def add(name: str, t: dict) -> None:
        table.add_row(escape(printable(name)), str(t["n_queries"]), f"{100 * t['mean_a']:.2f}",
                      f"{100 * t['mean_b']:.2f}", f"{100 * t['difference']:+.2f}", difference_ci(t),
                      f"{t['p_value']:.4f}", f"{t['p_holm']:.4f}")

    data_differences = comparison.data_differences
    for name, t in comparison.tasks.items():
        if name not in comparison.tasks_outside_average:
            add(name + (" (different data)" if name in data_differences else ""), t)
    avg = comparison.average
    if avg is not None:
        table.add_section()
        table.add_row(f"Average of {avg['n_tasks']} R2MED tasks", "", f"{100 * avg['mean_a']:.2f}",
                      f"{100 * avg['mean_b']:.2f}", f"{100 * avg['difference']:+.2f}", difference_ci(avg), "", "")
    if comparison.tasks_outside_average:
        table.add_section()
        for name in comparison.tasks_outside_average:
            add(f"{name} (not R2MED: not averaged)", comparison.tasks[name])
    table.caption = (f"95% CI: paired percentile bootstrap over the common queries ({comparison.resamples:,} "
                     f"resamples, seed {comparison.seed}; for the average, each task's queries are resampled "
                     "within the task)")
    table.caption_justify = "left"
    out.print(table)
    for task, lines in data_differences.items():
        warn(f"{task}: the runs were scored on different data ({'; '.join(lines)}); the difference is not a "
             "comparison of systems")
    for task, t in comparison.tasks.items():
        if t["dropped_a"] or t["dropped_b"]:
            warn(f"{task}: only the {t['n_queries']} queries both runs scored are compared ({t['dropped_a']} only "
                 f"in A, {t['dropped_b']} only in B)")


def difference_ci(t: dict) -> str:
    """A difference's 95% interval as the table shows it (×100): "[-1.20, +3.45]"."""
    lo, hi = t["difference_ci"]
    return f"[{100 * lo:+.2f}, {100 * hi:+.2f}]"


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


