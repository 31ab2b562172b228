"""Lay a run out as the public MTEB results repository expects, and say what stands in the way of
a pull request being merged there (:mod:`r2med_tasks.contribution` checks what that repository's
CI checks)."""

from __future__ import annotations

import re
from pathlib import Path

from . import atomic
from .contribution import check_exported, repository_folder
from .errors import UserError
from .files import MalformedJSON, MissingFile, UnreadableFile, parse_json, read_bytes
from .layout import (
    EXPERIMENTS,
    MAX_RECORD_BYTES,
    MAX_TASK_RESULT_BYTES,
    MODEL_META,
    RUN_SETTINGS,
    RunFolder,
    experiment_name,
    safe_component,
)

REPAIR = "delete that file and rerun the r2med-run command with --overwrite"
MAX_FOLDER = 120  # characters of a model folder named from a model_meta.json, as r2med's own folders


def export_run(run_dir: Path, dest: Path) -> tuple[Path, list[str]]:
    """Copy a run's TaskResults, model_meta.json and run_settings.jsonl to
    ``dest/results/<org__model>/<revision>/`` (plus ``experiments/<name>/`` for an option variant);
    returns that folder and the problems a results-repo PR would hit with it (see
    :func:`r2med_tasks.contribution.check_results_tree`), one line each."""
    run = RunFolder(run_dir)
    meta_path = run.model_meta_file
    meta_bytes = _read(meta_path, MAX_RECORD_BYTES, optional=True)
    if meta_bytes is None:
        raise UserError(f"{run_dir}: no model_meta.json; pass a results folder written by r2med-run "
                        "(<output>/<org__model>/<revision>/)")
    meta = _json_object(meta_path, meta_bytes)
    name, revision = meta.get("name"), meta.get("revision") or "no_revision_available"  # mteb's folder for None
    if not isinstance(name, str) or not name:
        raise UserError(f"{meta_path}: no model name; the run's files are corrupt: {REPAIR}")
    kwargs = meta.get("experiment_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise UserError(f"{meta_path}: experiment_kwargs is a {type(kwargs).__name__}, not an object of options "
                        f"(mteb's experiment_kwargs); the run's files are corrupt: {REPAIR}")
    root = dest / "results"
    target = root / _folder(name) / safe_component(str(revision))
    experiment = experiment_name(kwargs)
    if experiment:  # an option variant: mteb's experiment folder (the check says it cannot be submitted)
        target = target / EXPERIMENTS / experiment
    results = run.task_files()
    if not results:
        raise UserError(f"{run_dir}: no task results to export")
    files = {path.name: _read(path, MAX_TASK_RESULT_BYTES) for path in results}  # all read before anything is written
    for path in results:
        _json_object(path, files[path.name])
    settings = _read(run.run_settings_file, MAX_TASK_RESULT_BYTES, optional=True)
    if settings is not None:
        files[RUN_SETTINGS] = settings
    files[MODEL_META] = meta_bytes  # last: a folder with model_meta.json is a finished export
    for file_name, data in files.items():
        atomic.write_bytes(target / file_name, data)
    return target, check_exported(root, target)


def _folder(name: str) -> str:
    """The model's folder: the repository's name for it where that is a plain path component,
    else a safe one (which the check then reports as misplaced)."""
    folder = repository_folder(name)
    if folder.isprintable() and not folder.startswith(".") and len(folder) <= MAX_FOLDER \
            and not re.search(r"[\\/:*?\"<>|]", folder):
        return folder
    return safe_component(folder)


def _read(path: Path, limit: int, *, optional: bool = False) -> bytes | None:
    """A file of the run (a regular file, at most ``limit`` bytes: a TaskResult's is the MTEB results
    repository's limit), or a one-line error naming it; None when there is none and it is ``optional``."""
    try:
        return read_bytes(path, limit)
    except MissingFile as e:
        if optional:
            return None
        raise UserError(f"{path}: {e}; {REPAIR}") from None
    except UnreadableFile as e:
        raise UserError(f"{path}: {e}; it cannot be exported: {REPAIR}") from None


def _json_object(path: Path, data: bytes) -> dict:
    """The JSON object ``data`` read from ``path``, or a one-line error naming the file: an export
    copies what it read, so a corrupt file stops it before anything is written."""
    try:
        value = parse_json(data)
    except MalformedJSON as e:
        raise UserError(f"{path}: not a JSON file ({e}); the run's files are corrupt: {REPAIR}") from None
    if not isinstance(value, dict):
        raise UserError(f"{path}: expected a JSON object, got {type(value).__name__}; the run's files are corrupt: "
                        f"{REPAIR}")
    return value
