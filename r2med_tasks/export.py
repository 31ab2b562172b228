"""Lay a run out as the public MTEB results repository expects, and say what stands in the way of
a pull request being merged there (the CI and review rules of embeddings-benchmark/results)."""

from __future__ import annotations

import json
from pathlib import Path

from . import atomic
from .errors import UserError
from .results import EXPERIMENTS, experiment_name, safe_component
from .tasks import R2MED_TASKS

MAX_FILE_BYTES = 10 * 1024 * 1024
PINNED = {t.name: t.revision for t in R2MED_TASKS}


def export_run(run_dir: Path, dest: Path) -> tuple[Path, list[str]]:
    """Copy a run's TaskResults and model_meta.json to ``dest/results/<org__model>/<revision>/``
    (plus ``experiments/<name>/`` for an option variant); returns that folder and the problems a
    results-repo PR would hit."""
    meta_path = run_dir / "model_meta.json"
    if not meta_path.exists():
        raise UserError(f"{run_dir}: no model_meta.json; pass a results folder written by r2med-run "
                        "(<output>/<org__model>/<revision>/)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    name, revision = meta["name"], meta["revision"]
    target = dest / "results" / safe_component(name.replace("/", "__").replace(" ", "_")) / safe_component(revision)
    experiment = experiment_name(meta.get("experiment_kwargs"))
    if experiment:  # an option variant: mteb's experiment folder
        target = target / EXPERIMENTS / experiment
    results = [p for p in sorted(run_dir.glob("*.json")) if p.name != "model_meta.json"]
    if not results:
        raise UserError(f"{run_dir}: no task results to export")
    problems = []
    for path in results:
        data = json.loads(path.read_text(encoding="utf-8"))
        task = data.get("task_name")
        if path.stem != task:
            problems.append(f"{path.name}: file name differs from task_name {task!r}")
        if task in PINNED and data.get("dataset_revision") != PINNED[task]:
            problems.append(f"{task}: dataset_revision {data.get('dataset_revision')!r} is not mteb's pinned "
                            f"{PINNED[task]} (results from a local copy are not results on the official data)")
        if path.stat().st_size > MAX_FILE_BYTES:
            problems.append(f"{path.name}: larger than the repository's 10 MB limit")
        atomic.write_bytes(target / path.name, path.read_bytes())
    atomic.write_bytes(target / "model_meta.json", meta_path.read_bytes())
    from .mteb_adapter import registered_model_meta

    if registered_model_meta(name) is None:
        problems.append(f"model {name!r} is not registered in mteb: the results repository only merges results "
                        "of models with a ModelMeta (and a reference implementation) in mteb itself")
    return target, problems
