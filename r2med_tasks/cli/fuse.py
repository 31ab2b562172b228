"""``r2med fuse``: runs from anywhere fused into a new results folder."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from ..errors import UserError
from ..scoring.fusion import DEFAULT_DEPTH, DEFAULT_METHOD, DEFAULT_RRF_K, FUSION_METHODS
from ..terminal import printable
from ..results.folder import check_output_folder
from ..results.layout import DEFAULT_OUTPUT
from ..running.request import PathOption
from ..scoring.runs import DEFAULT_TOP_K
from .common import err, user_errors
from .run import print_summary


@click.command("fuse", short_help="Fuse saved runs into a new results folder.")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--qrels", type=click.Path(path_type=Path), metavar="FILE",
              help="Judgments for TREC-file inputs: R2MED's qrels.jsonl or a TREC qrels file.")
@click.option("--task", "task_name", metavar="TASK", help="The task TREC-file inputs are runs of (default: sample).")
@click.option("--data-dir", type=PathOption(), metavar="DIR",
              help="Judgments for results-folder inputs, from DIR/<Name>/qrels.jsonl (default: the hub).")
@click.option("--output", type=PathOption(), default=DEFAULT_OUTPUT, show_default=True)
@click.option("--fusion", type=click.Choice(FUSION_METHODS), default=DEFAULT_METHOD, show_default=True)
@click.option("--weights", help="Comma-separated, one per input (default: equal).")
@click.option("--rrf-k", type=click.IntRange(0), default=DEFAULT_RRF_K, show_default=True)
@click.option("--depth", type=click.IntRange(1), default=DEFAULT_DEPTH, show_default=True)
@click.option("--top-k", type=click.IntRange(1), default=DEFAULT_TOP_K, show_default=True)
@click.option("--cache-dir", type=PathOption(), metavar="DIR", envvar="R2MED_CACHE_DIR",
              help="Where a --data-dir corpus's checked document ids are kept (default: $R2MED_CACHE_DIR, else "
                   "$XDG_CACHE_HOME/r2med or ~/.cache/r2med).")
@click.option("--allow-different-data", is_flag=True,
              help="Fuse results folders scored on different data (refused otherwise, as compare refuses them).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def fuse_command(inputs, qrels, task_name, data_dir, output, fusion, weights, rrf_k, depth, top_k, cache_dir,
                 allow_different_data, as_json):
    """Fuse runs from anywhere into a new results folder the leaderboard reads.

    INPUTS are TREC run files (one task: give --qrels) or results folders of r2med-run (every task
    they all have). Default: RRF with k=60 over each input's top 100 (Cormack et al., 2009).
    """
    from ..api import fuse_runs

    with user_errors():
        weight_list = None
        if weights:
            try:
                weight_list = [float(w) for w in weights.split(",")]
            except ValueError:
                raise UserError(f"--weights {weights}: comma-separated numbers") from None
        check_output_folder(output, create=False)
        if cache_dir is not None:
            check_output_folder(cache_dir, create=False, option="--cache-dir")
        outcome = fuse_runs(inputs, qrels=qrels, task_name=task_name, data_dir=data_dir, output=output,
                            fusion=fusion, weights=weight_list, rrf_k=rrf_k, depth=depth, top_k=top_k,
                            cache_dir=cache_dir, allow_different_data=allow_different_data,
                            on_wait=lambda message: err.print(f"[yellow]waiting:[/] {escape(printable(message))}"))
    for line in outcome.summaries:
        err.print(escape(printable(line)), soft_wrap=True)
    print_summary(outcome, as_json)

