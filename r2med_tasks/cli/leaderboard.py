"""``r2med leaderboard``, ``r2med compare`` and ``r2med export-mteb``: results side by side."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from ..api import MAX_TRIALS
from ..errors import UserError
from ..running.request import PathOption
from ..terminal import number, printable
from .common import err, out, user_errors


@click.command("leaderboard", short_help="Rank published systems and your runs.")
@click.argument("folders", nargs=-1, type=click.Path(path_type=Path))
@click.option("--mteb-results", type=PathOption(), metavar="DIR",
              help="A clone of the MTEB results repository (its results/ folder is read; R2MED tasks' files only, "
                   "the others skipped unread).")
@click.option("--published", "which", type=click.Choice(["leaderboard", "papers", "all", "none"]),
              default="leaderboard", show_default=True,
              help="Published rows: the leaderboard's 69; those and the runs other papers publish (GroupRank, "
                   "ReasonRank, InsertRank, ReasonEmbed: source paper); all published runs (also the authors' "
                   "repository's runs that are not leaderboard rows and MTEB's R2MED results as the package records "
                   "them, source mteb); or none. The others are ranked apart, below the leaderboard's 69, whose "
                   "ranks never change.")
@click.option("--no-published", is_flag=True, help="Same as --published none.")
@click.option("--include-local", is_flag=True,
              help="Also show results on local data (not R2MED's at mteb's pinned revisions): a section of their "
                   "own below the board, each set of datasets ranked apart.")
@click.option("--tasks", "task_names", multiple=True, metavar="TASKS",
              help="Only these datasets (and their average, which ranks): R2MED dataset names, the paper's groups "
                   "(qa-reference, clinical-evidence, clinical-case) or r2med; comma-separated or repeated.")
@click.option("--rewriter", help="Only rows whose rewriter contains this text.")
@click.option("--retriever", help="Only rows whose retriever contains this text.")
@click.option("--reranker", help="Only rows whose reranker contains this text.")
@click.option("--top", type=click.IntRange(1), help="Only the first N rows (of each section).")
@click.option("--commands", is_flag=True,
              help="Show the r2med-run command that reproduces each published row instead of the scores.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json", "html"]), default="table",
              show_default=True)
@click.option("--html", "as_html", is_flag=True, help="Same as --format html: one self-contained page.")
@click.option("--reproductions", is_flag=True,
              help="The reproduction matrix instead: the published rows reproduced with `r2med reproduce` in "
                   "FOLDERS, each dataset's verdict (table, markdown, csv or json; the page shows it below the board).")
@click.option("--first-stage", type=PathOption(), metavar="DIR",
              help="The rerankers run over one first stage instead (DIR: an exported first stage, or the results "
                   "folder run-file read): its own nDCG@10 and, for each reranker run in FOLDERS, its score, gain, "
                   "LLM calls, tokens and cost (table, markdown, csv or json).")
@click.option("--wide", is_flag=True, help="The table with every column (rewriter, retriever, reranker, source "
                                           "and notes); by default it fits the terminal, at most 120 columns (on a pipe: "
                                           "COLUMNS, else 80).")
@click.option("--output", type=PathOption(), help="Write to FILE instead of the terminal.")
@click.option("--data-dir", type=PathOption(), metavar="DIR",
              help="With --format html: the folder your runs on local data read (r2med-run --data-dir), for the "
                   "grades in their per-query view (runs on the hub's data find theirs).")
def leaderboard_command(folders, mteb_results, which, no_published, include_local, task_names, rewriter, retriever,
                        reranker, top, commands, fmt, as_html, reproductions, first_stage, wide, output, data_dir):
    """Rank the published R2MED systems, your results folders and MTEB results in one table.

    FOLDERS are results folders in mteb's layout (default: ./results when it exists).
    """
    from ..api import rank_systems

    from click.core import ParameterSource

    with user_errors():
        if as_html:
            given = click.get_current_context().get_parameter_source("fmt") is ParameterSource.COMMANDLINE
            if given and fmt != "html":
                raise UserError(f"--html contradicts --format {fmt}")
            fmt = "html"
        if no_published:
            if which not in ("leaderboard", "none"):
                raise UserError(f"--no-published contradicts --published {which}")
            which = "none"
        if first_stage is not None:
            text = first_stage_view(first_stage, folders, fmt)
        else:
            board = rank_systems(list(folders) or None, mteb_results=mteb_results, published=which,
                                 include_local=include_local, tasks=task_names, rewriter=rewriter,
                                 retriever=retriever, reranker=reranker, top=top, statistics=not commands,
                                 on_warning=warn)
            # on a pipe, the terminal's COLUMNS; commands, which a sweep reads back, as --output writes them
            piped = 120 if commands else piped_width()
            width = 120 if output is not None else min(120, out.width if out.is_terminal else piped)
            if reproductions:
                text = matrix_text(board.reproductions, fmt)
            else:
                text = board.render(fmt, commands=commands, wide=wide, width=width, data_dir=data_dir)
    echo_or_write(text, output)


def piped_width() -> int:
    """The table's width on a pipe (``| cat``, ``| less``): ``COLUMNS`` when set, else 80, as rich
    takes it for output that is not a terminal (the console's own fixed width is for other commands)."""
    import os

    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.strip().isdigit() and int(columns) > 0 else 80


def echo_or_write(text: str, output: Path | None) -> None:
    """The command's text on standard output, or written to ``output``."""
    from ..files import atomic

    text = text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate from a file's "\ud800" is "?"
    if output is None:
        echo(text)
    else:
        atomic.write_text(output, text)
        err.print(f"Wrote {escape(printable(output))}")


def first_stage_view(first_stage: Path, folders: tuple, fmt: str) -> str:
    """``--first-stage``: every reranker run in ``folders`` over that first stage, local data included."""
    from ..api import rank_systems
    from ..board.first_stage import first_stage_board, first_stage_text

    if fmt == "html":
        raise UserError("--first-stage: table, markdown, csv or json (the page has no such view yet)")
    board = rank_systems(list(folders) or None, published="none", include_local=True, statistics=False,
                         on_warning=warn)
    return first_stage_text(first_stage_board(first_stage, board.rows), fmt)


def matrix_text(matrix: list[dict], fmt: str) -> str:
    """The reproduction matrix in one format (``--reproductions``)."""
    import csv
    import io

    from ..board.verdicts import matrix_cells

    if fmt == "json":
        return json.dumps(matrix, indent=2) + "\n"
    if fmt == "html":
        raise UserError("--reproductions: the page shows the matrix below the board; use --format html without it")
    header, rows = matrix_cells(matrix)
    if not rows:
        return "No reproduction yet: `r2med reproduce ROW` makes one.\n"
    if fmt == "csv":
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows([header, *rows])
        return buffer.getvalue()
    if fmt == "markdown":
        return "".join("| " + " | ".join(cells) + " |\n" for cells in [header, ["---"] * len(header), *rows])
    table = Table(title="Reproductions (r2med reproduce): verdict and difference to the published nDCG@10 ×100",
                  title_justify="left")
    for col in header:
        table.add_column(col, justify="left" if col in ("Row", "Date") else "right")
    for cells in rows:
        table.add_row(*(escape(printable(c)) for c in cells))
    buffer = io.StringIO()
    from rich.console import Console

    Console(file=buffer, width=200, highlight=False).print(table)
    return buffer.getvalue()


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


@click.command("compare", short_help="Compare two runs, per dataset and on average.")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--tasks", "task_names", multiple=True, metavar="TASKS",
              help="Only these tasks: names, the paper's groups or r2med (default: every task both runs have).")
@click.option("--test", type=click.Choice(["randomization", "t"]), default="randomization", show_default=True,
              help="Paired test over queries: sign-flip randomization or paired t-test.")
@click.option("--trials", type=click.IntRange(1, MAX_TRIALS), default=10000, show_default=True,
              help=f"Randomization-test trials (at most {MAX_TRIALS:,}).")
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
    names = {task: printable(task_name(task)) for task in comparison.tasks}
    table = compare_table(f"nDCG@10 ×100: B ({escape(printable(run_b))}) - A ({escape(printable(run_a))})",
                          max(map(len, names.values()), default=4), out.width)

    def add(task: str, t: dict, mark: str = "") -> None:
        table.add_row(escape(names[task] + mark), str(t["n_queries"]), number(100 * t["mean_a"]),
                      number(100 * t["mean_b"]), number(100 * t["difference"], signed=True), difference_ci(t),
                      number(t["p_value"], 4), number(t["p_holm"], 4))

    data_differences = comparison.data_differences
    for name, t in comparison.tasks.items():
        if name not in comparison.tasks_outside_average:
            add(name, t, " (different data)" if name in data_differences else "")
    avg = comparison.average
    if avg is not None:
        table.add_section()
        table.add_row(f"Average of {avg['n_tasks']} R2MED task{'s' if avg['n_tasks'] != 1 else ''}", "", number(100 * avg["mean_a"]),
                      number(100 * avg["mean_b"]), number(100 * avg["difference"], signed=True), difference_ci(avg),
                      "", "")
    if comparison.tasks_outside_average:
        table.add_section()
        for name in comparison.tasks_outside_average:
            add(name, comparison.tasks[name], " (not R2MED: not averaged; its p in the Holm correction)")
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


COMPARE_COLUMNS = ("Task", "Queries", "A", "B", "B - A", "95% CI of B - A", "p", "p (Holm)")


def task_name(task: str) -> str:
    """A task as the tables show it: its short name (``Biology``, ``sample``), else its mteb name."""
    from ..tasks.specs import SAMPLE_TASK, SHORT_NAMES

    return {**SHORT_NAMES, SAMPLE_TASK.name: SAMPLE_TASK.short_name}.get(task, task)


def compare_table(title: str, name_width: int, width: int) -> Table:
    """``r2med compare``'s table, fitting ``width`` columns: task names whole (their column never
    narrower than the longest), numbers on one line; on a narrow terminal (80 columns) the
    columns stand one space apart and an interval may take two lines."""
    from rich import box

    widest = [name_width, *(max(len(col), len(cell)) for col, cell in zip(COMPARE_COLUMNS[1:], WIDEST_CELLS))]
    roomy = sum(widest) + 3 * len(widest) - 1 <= width  # a space either side of each column, and a rule between
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  padding=(0, 1) if roomy else (0, 0))
    for col in COMPARE_COLUMNS:
        table.add_column(col, justify="left" if col == "Task" else "right",
                         min_width=name_width if col == "Task" else None,
                         no_wrap=col not in ("Task", "95% CI of B - A", "p (Holm)"))
    return table


WIDEST_CELLS = ("100", "100.00", "100.00", "+100.00", "[-10.00, +10.00]", "0.0000", "0.0000")  # after Task


def difference_ci(t: dict) -> str:
    """A difference's 95% interval as the table shows it (×100): "[-1.20, +3.45]"; over one query
    there is no interval to speak of, and the cell says so."""
    if t.get("n_queries", 2) < 2:
        return "none (1 query)"
    lo, hi = t["difference_ci"]
    return f"[{number(100 * lo, signed=True)}, {number(100 * hi, signed=True)}]"


@click.command("export-mteb", short_help="Copy a run into a clone of MTEB's results.")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--create", is_flag=True,
              help="Make DEST when it does not exist (by default refused: DEST is a clone of the results repository).")
@click.option("--overwrite", is_flag=True,
              help="Replace a TaskResult of the same task already in the folder when it differs from the run's "
                   "(by default refused; one that is the same is left).")
@click.option("--replace-model-meta", is_flag=True,
              help="Replace the folder's model_meta.json when it differs from the run's (by default refused, "
                   "naming the fields that differ).")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: exported_to, written, unchanged, problems and ok.")
def export_mteb_command(run_dir, dest, create, overwrite, replace_model_meta, as_json):
    """Copy a run (RUN_DIR = <output>/<org__model>/<revision>/) into DEST, a clone of the MTEB
    results repository, laid out as that repository expects and merged with what is there as mteb
    merges (run_settings.jsonl merged; an equal model_meta.json or TaskResult left as it is, one
    that differs refused), and list what would block a pull request because of it.

    Exit status: 0 nothing to fix, 1 problems listed, 2 nothing exported (the line says why).
    """
    from ..results.export import export_run

    with user_errors():
        export = export_run(run_dir, dest, create=create, overwrite=overwrite, replace_model_meta=replace_model_meta)
    if as_json:
        click.echo(json.dumps({"exported_to": str(export.target), "written": [str(p) for p in export.written],
                               "unchanged": [str(p) for p in export.unchanged], "problems": export.problems,
                               "ok": export.ok}, indent=2))
    else:
        out.print(f"Exported to {escape(printable(export.target))}")
        for label, paths in (("Wrote", export.written), ("Already there, left as is", export.unchanged)):
            if paths:
                out.print(f"  {label}: {escape(printable(', '.join(p.name for p in paths)))}", soft_wrap=True)
        if export.problems:
            out.print("Before a pull request to embeddings-benchmark/results can merge:")
            for problem in export.problems:
                out.print(f"  - {escape(problem)}")
        else:
            out.print("No problem found; open a pull request with that folder (mteb's ResultCache.submit_results "
                      "can).")
    if export.problems:
        raise click.exceptions.Exit(1)


@click.command("export-first-stage", short_help="Export a run's top-k as a first stage.")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--top-k", type=click.IntRange(1), default=100, show_default=True,
              help="Documents kept per query (the published rerankers rerank the top 100).")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest written (DEST/r2med/first-stage.json).")
def export_first_stage_command(run_dir, dest, top_k, as_json):
    """Write the top-k of each task's ranking in RUN_DIR (a results folder of r2med-run) into DEST
    as a first stage others rerank: DEST/<Task>.trec, read by `--plugin run-file -o path=DEST`,
    and DEST/r2med/first-stage.json, the run it came from and each file's hash. A reranker run over
    it is filed under its content, wherever it is copied."""
    from ..results.first_stage import export_first_stage

    with user_errors():
        exported = export_first_stage(run_dir, dest, top_k=top_k)
    if as_json:
        click.echo(json.dumps(exported.manifest, indent=2))
        return
    out.print(f"Wrote {len(exported.manifest['tasks'])} task(s) of {escape(exported.manifest['name'])} to "
              f"{escape(printable(dest))} (top {top_k}, content {exported.revision})", soft_wrap=True)
    out.print(f"Rerank it: r2med-run --plugin run-file -o path={escape(printable(dest))} --plugin RERANKER",
              soft_wrap=True, highlight=False)
