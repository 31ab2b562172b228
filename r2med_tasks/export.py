"""Lay a run out as the public MTEB results repository expects, and say what stands in the way of
a pull request being merged there (the CI and review rules of embeddings-benchmark/results)."""

from __future__ import annotations

import json
from pathlib import Path

from . import atomic
from .errors import UserError
from .results import EXPERIMENTS, experiment_name, safe_component
from .tasks import PINNED_REVISIONS

MAX_FILE_BYTES = 10 * 1024 * 1024
REPAIR = "delete that file and rerun the r2med-run command with --overwrite"


def export_run(run_dir: Path, dest: Path) -> tuple[Path, list[str]]:
    """Copy a run's TaskResults and model_meta.json to ``dest/results/<org__model>/<revision>/``
    (plus ``experiments/<name>/`` for an option variant); returns that folder and the problems a
    results-repo PR would hit."""
    meta_path = run_dir / "model_meta.json"
    if not meta_path.exists():
        raise UserError(f"{run_dir}: no model_meta.json; pass a results folder written by r2med-run "
                        "(<output>/<org__model>/<revision>/)")
    meta = _json_object(meta_path)
    name, revision = meta.get("name"), meta.get("revision") or "no_revision_available"  # mteb's folder for None
    if not isinstance(name, str) or not name:
        raise UserError(f"{meta_path}: no model name; the run's files are corrupt: {REPAIR}")
    folder = safe_component(name.replace("/", "__").replace(" ", "_"))
    target = dest / "results" / folder / safe_component(str(revision))
    experiment = experiment_name(meta.get("experiment_kwargs"))
    if experiment:  # an option variant: mteb's experiment folder
        target = target / EXPERIMENTS / experiment
    results = [p for p in sorted(run_dir.glob("*.json")) if p.name != "model_meta.json"]
    if not results:
        raise UserError(f"{run_dir}: no task results to export")
    problems = []
    for path, data in [(path, _json_object(path)) for path in results]:  # all read before anything is written
        task = data.get("task_name")
        if path.stem != task:
            problems.append(f"{path.name}: file name differs from task_name {task!r}")
        if task in PINNED_REVISIONS and data.get("dataset_revision") != PINNED_REVISIONS[task]:
            problems.append(f"{task}: dataset_revision {data.get('dataset_revision')!r} is not mteb's pinned "
                            f"{PINNED_REVISIONS[task]} (results from a local copy are not results on the official data)")
        if path.stat().st_size > MAX_FILE_BYTES:
            problems.append(f"{path.name}: larger than the repository's 10 MB limit")
        atomic.write_bytes(target / path.name, path.read_bytes())
    atomic.write_bytes(target / "model_meta.json", meta_path.read_bytes())
    from .mteb_adapter import registered_model_meta

    if registered_model_meta(name) is None:
        problems.append(f"model {name!r} is not registered in mteb: the results repository only merges results "
                        "of models with a ModelMeta (and a reference implementation) in mteb itself")
    return target, problems


def _json_object(path: Path) -> dict:
    """A JSON object from ``path``, or a one-line error naming the file: an export copies what it
    read, so a corrupt file stops it before anything is written."""
    try:
        data = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: not a JSON file ({type(e).__name__}: {str(e)[:120]}); the run's files are "
                        f"corrupt: {REPAIR}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object, got {type(data).__name__}; the run's files are corrupt: "
                        f"{REPAIR}")
    return data
