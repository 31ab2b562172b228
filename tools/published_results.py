"""The published runs as mteb results, generated from the shipped record (``r2med_tasks.board.published``):
the leaderboard's rows in ``results/r2med-leaderboard__<system>/published/``, the authors'
repository's other runs in ``results/r2med-repository__<system>/published/``, and, shipped with the
package, the sha256 of each of their files (``r2med_tasks/data/published/files.sha256``), by which
the leaderboard tells the shipped copy from a folder claiming to be published.

``python -m tools.published_results [RESULTS_DIR]`` (default ``results``) writes both.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from r2med_tasks.files import atomic
from r2med_tasks.results.folder import ResultsFolder
from r2med_tasks.results.layout import folder_path, slug
from r2med_tasks.board.sources import published_rows
from r2med_tasks.mteb_adapter import model_meta_text, task_result_text
from r2med_tasks.board.published import MANIFEST, published_runs
from r2med_tasks.tasks.specs import PINNED_REVISIONS, R2MED_TASKS

PUBLISHED_ORG = "r2med-leaderboard"  # the leaderboard's rows
REPOSITORY_ORG = "r2med-repository"  # the authors' repository's other runs
# Medical-Sciences was updated on the hub (2025-06-05) after the published runs; mteb pins the
# updated revision. The published results say so instead of claiming a revision they never saw.
PRE_UPDATE = {"R2MEDMedicalSciencesRetrieval": "before-1b48911514c80bf9182222d99752ad75e23b4b47"}
# Sources whose runs came after that update, on the hub's data then (loaded without a revision):
# the ReasonEmbed paper's (October 2025). Their results record mteb's pinned revisions.
AFTER_UPDATE_SOURCES = ("ReasonEmbed paper",)


def published_revision(task_name: str, source: str = "") -> str:
    """The dataset revision a published result records: mteb's pinned revision (the data the
    published runs used), except where the hub data changed after them (a ``before-<revision>``
    marker naming the pinned revision they predate); ``source``: the row's, whose runs may
    postdate the change."""
    if any(marker in source for marker in AFTER_UPDATE_SOURCES):
        return PINNED_REVISIONS[task_name]
    return PRE_UPDATE.get(task_name, PINNED_REVISIONS[task_name])


def write_published(dest: Path) -> list[Path]:
    """Every published run of the leaderboard and the authors' repository as mteb results (runs
    published in other papers are the package's data only). Each holds a TaskResult per dataset
    (every metric the authors report where their repository has the run, else nDCG@10), written by
    the mteb adapter as every result is, so the files are computed, never hand-written."""
    linked = {r["name"]: r for r in published_runs("leaderboard")}
    repository = {r["name"]: r for r in published_runs("repository")}
    written = []
    for row in published_rows(which="all"):
        if row.kind not in ("leaderboard", "repository"):
            continue
        run = linked.get(row.system) if row.kind == "leaderboard" else repository[row.system]
        org = PUBLISHED_ORG if row.kind == "leaderboard" else REPOSITORY_ORG
        folder = ResultsFolder(folder_path(dest, f"{org}/{slug(row.system)}", "published", None, local=False))
        for task in R2MED_TASKS:
            if run is not None:
                metrics = dict(run["metrics"][task.short_name])
            elif task.name in row.scores:
                metrics = {"ndcg_at_10": round(row.scores[task.name] / 100, 6)}
            else:
                continue
            atomic.write_text(folder.task_json(task.name), task_result_text(
                task.name, published_revision(task.name, row.source), {**metrics, "main_score": metrics["ndcg_at_10"]},
                evaluation_time=None, phases=[]))
            written.append(folder.task_json(task.name))
        reference = "https://r2med.github.io/#leaderboard" if row.kind == "leaderboard" else \
            f"https://github.com/R2MED/R2MED/tree/{next(reversed(run['files']))}/results"
        atomic.write_text(folder.model_meta_file, model_meta_text(
            {"name": f"{org}/{slug(row.system)}", "revision": "published", "reference": reference}, {},
            registered=False))
        atomic.write_json(folder.record_file, {
            "name": row.system, "published": {"kind": row.kind, "rewriter": row.rewriter, "retriever": row.retriever,
                                              "reranker": row.reranker, "average": row.average,
                                              "command": row.command, "source": row.source,
                                              "provenance": row.provenance, "notes": row.notes}})
        written += [folder.model_meta_file, folder.record_file]
    return written


def manifest_text(root: Path, files: list[Path]) -> str:
    """The manifest of ``files`` (written under ``root``): one ``<sha256>  <path under root>`` line
    each, sorted by path, as ``sha256sum`` writes and checks them."""
    lines = sorted(f"{p.relative_to(root).as_posix()}\0{hashlib.sha256(p.read_bytes()).hexdigest()}" for p in files)
    return "".join(f"{digest}  {path}\n" for path, digest in (line.split("\0") for line in lines))


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: python -m tools.published_results [RESULTS_DIR]  (default: results)")
        return 2
    root = Path(argv[0] if argv else "results")
    atomic.write_text(MANIFEST, manifest_text(root, write_published(root)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
