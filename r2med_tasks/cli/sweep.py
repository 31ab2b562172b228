"""``r2med sweep``: many pipelines × tasks as independent jobs, here or on a Ray cluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from ..errors import UserError
from ..results.folder import check_output_folder
from ..results.layout import DEFAULT_OUTPUT
from ..running.request import PathOption
from ..sweep.plan import GPU_MEMORY_GB
from .common import err, out, user_errors

SWEEP_HELP = """Run many pipelines × tasks as independent jobs into one results folder.

FILE (or - for stdin) lists r2med-run argument lines, one pipeline each (the output of
`r2med leaderboard --commands` works as is, in any --format), or is a TOML sweep of
[[pipeline]] tables (plugins, options, a grid of option values, tasks). --output, --data-dir,
--tasks and --cache-dir apply to every line that does not set its own (--data-dir also to a line
whose --data-dir is the DATA_DIR placeholder of a printed command). Finished tasks are reused
by identity, as r2med-run reuses them, so a rerun computes only what is missing.

\b
Examples:
  r2med leaderboard --commands --format csv --output all.csv && r2med sweep all.csv --executor ray
  r2med sweep sweep.toml --tasks qa-reference --executor ray --address auto
"""


@click.command("sweep", short_help="Run many pipelines × tasks as jobs.", help=SWEEP_HELP)
@click.argument("file", metavar="FILE|-")
@click.option("--output", type=PathOption(), default=DEFAULT_OUTPUT, show_default=True,
              help="Results folder shared by every job (on a cluster: storage every node mounts at this path).")
@click.option("--data-dir", type=PathOption(), metavar="DIR",
              help="Read tasks from DIR/<Name>/{corpus,query,qrels}.jsonl instead of the hub.")
@click.option("--tasks", "-t", "task_names", multiple=True, metavar="TASKS",
              help="Tasks of the lines that name none (names, aliases, groups or r2med; comma-separated or repeated).")
@click.option("--cache-dir", type=PathOption(), metavar="DIR", envvar="R2MED_CACHE_DIR",
              help="Cache folder of every job (on a cluster: shared storage, so embeddings are encoded once).")
@click.option("--executor", type=click.Choice(["auto", "pool", "local", "ray"]), default="auto", show_default=True,
              help="auto: ray with --address/$RAY_ADDRESS or GPU jobs, local for local models without a GPU, "
                   "else pool; pool: chains side by side, one process per CPU core; local: one job after "
                   "another in this process; ray: one Ray task per pipeline and task.")
@click.option("--address", metavar="ADDRESS",
              help="Ray cluster to join: auto (the one on this machine) or ray://HOST:10001 (default: "
                   "$RAY_ADDRESS, else a new local Ray using this machine's CPUs and GPUs).")
@click.option("--gpu-memory", type=click.FloatRange(1), default=GPU_MEMORY_GB, show_default=True, metavar="GB",
              help="Memory of one of the cluster's GPUs: a job with a model estimated at X GB asks for X/GB of a GPU.")
@click.option("--retries", type=click.IntRange(0), default=3, show_default=True,
              help="Times a job whose worker died is run again (pool, Ray).")
@click.option("--dry-run", is_flag=True, help="Check every line and list the jobs and what each requests; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome (or the --dry-run jobs) as JSON.")
def sweep_command(file, output, data_dir, task_names, cache_dir, executor, address, gpu_memory, retries, dry_run,
                  as_json):
    from ..sweep.board import Board
    from ..sweep.executors import choose_executor, run_in_pool, run_local, run_on_ray
    from ..sweep.plan import plan_sweep
    from ..files.bounded import UnreadableFile, read_text
    from ..sweep.sources import MAX_SWEEP_BYTES, sweep_lines

    with user_errors():
        if address and executor not in ("ray", "auto"):
            raise UserError("--address: only with --executor ray (or auto)")
        if file == "-":
            text, source = sys.stdin.read(MAX_SWEEP_BYTES + 1), "<stdin>"
            if len(text) > MAX_SWEEP_BYTES:
                raise UserError(f"<stdin>: over {MAX_SWEEP_BYTES:,} characters; a sweep file lists commands")
        else:
            try:  # bounded: a device (/dev/zero), a FIFO or a huge file is refused before it is read
                text, source = read_text(Path(file), MAX_SWEEP_BYTES), file
            except UnreadableFile as e:
                raise UserError(f"{file}: cannot read it as a sweep file ({e})") from None
        jobs = plan_sweep(sweep_lines(text, source), output=output, data_dir=data_dir, tasks=task_names,
                          cache_dir=cache_dir)
        for folder in dict.fromkeys(Path(j.output) for j in jobs):  # an unwritable one stops it before any job
            check_output_folder(folder, create=not dry_run)
        if executor == "auto":
            executor, note = choose_executor(jobs, address=address)
            if note:
                err.print(escape(note), soft_wrap=True)
        if dry_run:
            print_jobs(jobs, as_json, executor)
            return
        from contextlib import redirect_stdout

        board = Board(jobs)
        # stdout is the summary's (--json); what Ray prints there meanwhile (a worker's death) goes to stderr
        # the pool's loop refreshes the view itself: no thread, so its workers can be forked
        with redirect_stdout(sys.stderr), live_view(board, err, thread=executor != "pool") as live:
            def refresh() -> None:  # at once when a job's state changes (the clock ticks in between)
                live.refresh()

            try:
                if executor == "ray":
                    outcomes = run_on_ray(jobs, board, address=address, retries=retries, gpu_memory_gb=gpu_memory,
                                          refresh=refresh, note=lambda line: err.print(escape(line)))
                elif executor == "pool":
                    outcomes = run_in_pool(jobs, board, retries=retries, refresh=refresh)
                else:
                    outcomes = run_local(jobs, board, refresh)
            except KeyboardInterrupt:
                err.print(f"[yellow]Interrupted.[/] {board.counts()['done']} jobs finished; their results are in "
                          f"{escape(str(output))} (and the lines' own --output); run the same sweep again to "
                          "resume.", soft_wrap=True)
                raise click.exceptions.Exit(130) from None
    print_outcome(outcomes, as_json)
    if any(o.error for o in outcomes):
        raise click.exceptions.Exit(1)


def live_view(board, console, *, thread: bool = True):
    """The sweep's live view: ``board`` rendered anew four times a second (so the running jobs'
    times tick; without ``thread``, by the executor's calls) and whenever a job's state changes, at
    the console's width at that moment."""
    from rich.live import Live

    return Live(console=console, transient=True, refresh_per_second=4, auto_refresh=thread,
                get_renderable=lambda: board.render(width=console.width))


def print_jobs(jobs, as_json: bool, executor: str) -> None:
    rows = [{"job": j.index + 1, "executor": executor, "line": j.line, "pipeline": j.pipeline, "tasks": list(j.tasks), "output": j.output,
             "chain": j.chain, "gpu": j.gpu, "gpu_memory_gb": j.gpu_memory_gb, "args": list(j.args)} for j in jobs]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{len(jobs)} jobs ({len({j.chain for j in jobs})} chains), executor {executor}",
                  title_justify="left")
    for col in ("Job", "Pipeline", "Task", "Chain", "Needs"):
        table.add_column(col)
    for j in jobs:
        need = ("GPU " + (f"{j.gpu_memory_gb:g} GB" if j.gpu_memory_gb else "(whole)")) if j.gpu else "CPU"
        table.add_row(str(j.index + 1), escape(j.pipeline), escape(",".join(j.tasks)), str(j.chain), need)
    out.print(table)


def print_outcome(outcomes, as_json: bool) -> None:
    """The merged leaderboard of what the sweep ran, then one line per failed job."""
    from ..sweep.board import merged_board

    rows, tasks = merged_board(outcomes)
    failed = [o for o in outcomes if o.error]
    if as_json:
        click.echo(json.dumps({
            "jobs": [{"pipeline": o.job.pipeline, "tasks": list(o.job.tasks), "attempts": o.attempts,
                      "error": o.error, "run": o.run.to_json() if o.run and not o.error else None} for o in outcomes],
            "leaderboard": [{"label": r.label, "results_dir": r.results_dir, "average_ndcg_at_10_x100": r.average(tasks),
                             "ndcg_at_10_x100": r.scores, "status": r.statuses} for r in rows],
            "failed": len(failed)}, indent=2))
        return
    for o in outcomes:
        for line in filter(str.strip, o.log.splitlines()):
            err.print(f"{escape(o.job.pipeline)} [{escape(','.join(o.job.tasks))}]: {escape(line)}", soft_wrap=True)
    computed = sum(1 for o in outcomes if o.run and not o.error for t in o.run.tasks if t.status == "computed")
    out.print(f"{len(outcomes)} jobs: {computed} tasks computed, the others' results reused; {len(failed)} failed")
    out.print(board_table(rows, tasks, out.width))
    for r in rows:
        out.print(f"Results: {escape(r.results_dir)}", soft_wrap=True)
    for o in failed:
        err.print(f"[red]failed:[/] {escape(o.job.pipeline)} [{escape(','.join(o.job.tasks))}] "
                  f"(after {o.attempts} attempt{'s' if o.attempts != 1 else ''}): {escape(o.error)}", soft_wrap=True)


def board_table(rows, tasks: list[str], width: int):
    """The sweep's board as the leaderboard's terminal table shows one: each task under its name, or,
    where the names do not all fit in ``width``, as many as fit under the leaderboard's short
    headers; the caption names the tasks left out."""
    from rich import box

    from ..board.render import ABBREVIATIONS, SYSTEM_MAX, SYSTEM_MIN, two_lines
    from ..terminal import printable

    heads = {t: t for t in tasks}  # the names themselves where they all fit, else the short headers
    averages = [r.average(tasks) for r in rows]

    def widest(t: str) -> int:
        return max([len(heads[t]), *(len(f"{r.scores[t]:.2f}") for r in rows if t in r.scores)])

    fixed = [len(str(max(len(rows), 1))), max([3, *(len(f"{a:.2f}") for a in averages if a is not None)])]

    def without_system(shown: list[str]) -> int:  # every column's widest cell, a space either side, the rules
        return sum(fixed) + sum(map(widest, shown)) + 3 * (len(shown) + 3) + 1

    if without_system(tasks) + SYSTEM_MIN > width:
        heads = {t: ABBREVIATIONS.get(t, t) for t in tasks}
    shown = list(tasks)
    while shown and without_system(shown) + SYSTEM_MIN > width:
        shown.pop()
    system_width = min(SYSTEM_MAX, max([6, *(len(printable(r.label)) for r in rows)]),
                       max(SYSTEM_MIN, width - without_system(shown)))
    table = Table(title="Sweep: nDCG@10 ×100", title_justify="left", box=box.SIMPLE_HEAD, caption_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("System", no_wrap=True)
    table.add_column("Avg", justify="right", no_wrap=True)
    for t in shown:
        table.add_column(heads[t], justify="right", no_wrap=True)
    for i, (r, avg) in enumerate(zip(rows, averages), 1):
        table.add_row(str(i), escape(two_lines(printable(r.label), system_width)), "" if avg is None else f"{avg:.2f}",
                      *("" if t not in r.scores else f"{r.scores[t]:.2f}" for t in shown))
    left_out = [t for t in tasks if t not in shown]
    named = [f"{heads[t]}={t}" for t in shown if heads[t] != t]
    table.caption = "  ".join(named) + (f"\nNot shown at {width} columns: {', '.join(left_out)} (Avg is over every "
                                        "task; --json has them all)." if left_out else "") or None
    return table

