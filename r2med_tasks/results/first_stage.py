"""A run's top-k as a first stage others rerank: one ``<Task>.trec`` per task, which ``--plugin
run-file -o path=`` reads, and ``r2med/first-stage.json``, the run it came from (its record and
each task's stored identity, hashed) and what each file holds. Rerankers compared over one exported
first stage see the same candidates; a run over it is identified by its files' content (run-file's
revision, :attr:`SavedRuns.digest`), never by where it lies or who exported it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..files import atomic
from ..files.bounded import UnreadableFile
from ..scoring.runs import rank, trec_text
from .folder import ResultsFolder
from .identity import digest
from .saved_runs import SavedRuns

FORMAT = 1


@dataclass(frozen=True)
class FirstStage:
    """What :func:`export_first_stage` wrote: the folder, its manifest and the content digest a run
    over it is filed under (its first 12 digits are run-file's revision)."""

    path: Path
    manifest: dict[str, Any]

    @property
    def revision(self) -> str:
        return self.manifest["digest"][:12]


def export_first_stage(run_dir: str | Path, dest: str | Path, *, top_k: int = 100) -> FirstStage:
    """Write the top ``top_k`` of each task's ranking in the results folder ``run_dir`` into
    ``dest`` (a new or empty folder) with the manifest: each ranking as run-file reads it from the
    run (by score, ties by document id), cut to ``top_k``, with the run's tag and scores."""
    source, dest = ResultsFolder(Path(run_dir)), Path(dest)
    tasks = source.run_task_names()
    if not tasks:
        raise UserError(f"{run_dir}: no <Task>.trec run; give a results folder of r2med-run (<output>/<model>/<revision>/)")
    if top_k < 1:
        raise UserError(f"--top-k {top_k}: give at least 1")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(f"{dest}: exists and is not an empty folder; choose a new folder for the first stage")
    record = source.record()
    entries = {}
    texts = {}
    for task in tasks:
        path = source.trec(task)
        try:
            run = source.read_run(task)
            tag = path.read_text(encoding="utf-8").split("\n", 1)[0].split()[-1:] or ["r2med"]
        except (OSError, ValueError) as e:
            raise UserError(f"{path}: {e}") from None
        texts[task] = trec_text(rank(run, top_k), tag[0])
        identity = source.identity(task)
        entries[task] = {"queries": len(run), "sha256": hashlib.sha256(texts[task].encode()).hexdigest(),
                         "source_identity": digest(identity, 64) if identity else None,
                         "data": identity["data"] if identity else None, "ndcg_at_10": _main_score(source, task)}
    out = ResultsFolder(dest)
    out.own_folder.mkdir(parents=True, exist_ok=True)
    for task, text in texts.items():
        atomic.write_text(out.trec(task), text)
    manifest = {"format": FORMAT, "name": str(record.get("name") or source.display_name()), "top_k": top_k,
                "digest": SavedRuns(dest).digest,
                "source": {key: record.get(key) for key in ("command", "config", "models", "code")},
                "tasks": entries}
    atomic.write_json(out.first_stage_file, manifest)
    return FirstStage(dest, manifest)


def _main_score(folder: ResultsFolder, task: str) -> float | None:
    """The run's nDCG@10 of ``task`` (0-1) as its finished TaskResult gives it; None when none does."""
    try:
        return folder.load(task)[0]
    except (UnreadableFile, UserError, OSError, KeyError, IndexError, TypeError, ValueError):
        return None
