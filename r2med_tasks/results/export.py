"""Lay a run out in a clone of the public MTEB results repository, as a careful contributor would,
and say what stands in the way of the pull request being merged. The export merges into what the
clone holds and never loses it: ``run_settings.jsonl`` is merged as mteb's ``ResultCache`` merges
one, and a ``model_meta.json`` or TaskResult that differs from the run's is refused unless told to
replace it. It never writes outside the clone (every existing path under DEST, links included, must
resolve inside it), and everything is read and checked before the first write.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..files import atomic
from .contribution import MAX_READ_BYTES, before_export, check_exported, not_on_the_benchmark
from ..errors import UserError
from ..files.bounded import MalformedJSON, MissingFile, UnreadableFile, parse_json, read_bytes
from .folder import ResultsFolder
from .layout import (
    MAX_RECORD_BYTES,
    MAX_TASK_RESULT_BYTES,
    MODEL_META,
    MTEB_RESULTS,
    RUN_SETTINGS,
    experiment_name,
    repository_path,
)
from ..mteb_adapter import run_settings_text

REPAIR = "delete that file and rerun the r2med-run command with --overwrite"
ELSEWHERE = "or export into another clone"


@dataclass(frozen=True)
class MtebExport:
    """What :func:`export_run` did: the files it wrote (new, replaced or merged), those it found
    already as the run has them, and the problems a pull request with them would hit."""

    target: Path
    problems: list[str]
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def export_run(run_dir: Path, dest: Path, *, create: bool = False, overwrite: bool = False,
               replace_model_meta: bool = False) -> MtebExport:
    """Copy a run's files into the clone ``dest`` at the repository's place for them, merging with
    what is there, and check what it exported. A refusal is a :class:`UserError` raised before
    anything is written."""
    run = ResultsFolder(run_dir)
    meta_path = run.model_meta_file
    meta_bytes = _read(meta_path, MAX_RECORD_BYTES, optional=True)
    if meta_bytes is None:
        raise UserError(f"{run_dir}: no model_meta.json; pass a results folder written by r2med-run "
                        "(<output>/<org__model>/<revision>/)")
    meta = _json_object(meta_path, meta_bytes)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise UserError(f"{meta_path}: no model name; the run's files are corrupt: {REPAIR}")
    kwargs = meta.get("experiment_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise UserError(f"{meta_path}: experiment_kwargs is a {type(kwargs).__name__}, not an object of options "
                        f"(mteb's experiment_kwargs); the run's files are corrupt: {REPAIR}")
    # an option variant goes in mteb's experiment folder (the check says it cannot be submitted)
    relative = repository_path(name, meta.get("revision"), experiment_name(kwargs))
    results = run.task_files()
    if not results:
        raise UserError(f"{run_dir}: no task results to export")
    files = {path.name: _read(path, MAX_TASK_RESULT_BYTES) for path in results}  # all read before anything is written
    tasks = {path: _json_object(path, files[path.name]) for path in results}
    settings = _read(run.run_settings_file, MAX_TASK_RESULT_BYTES, optional=True)
    settings_text = None if settings is None else _utf8(run.run_settings_file, settings,
                                                        f"the run's files are corrupt: {REPAIR}")

    base = _destination(dest, create)
    for path, data in tasks.items():  # only results on the benchmark go to the repository: nothing else is written
        why = not_on_the_benchmark(str(data.get("task_name")), data.get("dataset_revision"))
        if why is not None:
            raise UserError(f"{path}: {why}; nothing was exported")
    fresh = not dest.is_dir()  # a DEST to make holds nothing
    target = dest / relative
    names = [*files, *([RUN_SETTINGS] if settings is not None else []), MODEL_META]
    real = _real_paths(dest, base, relative, names)

    def existing(file_name: str) -> bytes | None:
        return None if fresh else _existing(real[file_name], target / file_name)

    writes: list[tuple[Path, bytes]] = []  # (real path, bytes), model_meta.json last
    written: list[Path] = []
    unchanged: list[Path] = []

    def plan(file_name: str, data: bytes | None) -> None:
        if data is None:
            unchanged.append(target / file_name)
        else:
            writes.append((real[file_name], data))
            written.append(target / file_name)

    old_meta = existing(MODEL_META)
    differs = None if old_meta is None else _meta_difference(old_meta, meta)  # "": the same
    if differs and not replace_model_meta:
        raise UserError(f"{target / MODEL_META}: already there and {differs}; pass --replace-model-meta to replace it "
                        f"with the run's (results already in that folder were filed with it), {ELSEWHERE}")
    conflicts = []
    for file_name, data in files.items():
        old = existing(file_name)
        if old is not None and (old == data or _same_json(old, data)):
            plan(file_name, None)
        elif old is not None and not overwrite:
            conflicts.append(target / file_name)
        else:
            plan(file_name, data)
    if conflicts:
        more = f" (and {len(conflicts) - 1} more TaskResults)" if len(conflicts) > 1 else ""
        raise UserError(f"{conflicts[0]}: already there with other results of the task{more}; pass --overwrite to "
                        f"replace them with the run's, {ELSEWHERE}")
    if settings_text is not None:
        old = existing(RUN_SETTINGS)
        if old is None:  # mteb copies the run's file as it is
            plan(RUN_SETTINGS, settings)
        else:
            old_text = _utf8(target / RUN_SETTINGS, old, "mteb cannot merge run settings into it: fix or delete it")
            merged = _merged_run_settings(old_text, settings_text).encode("utf-8")
            plan(RUN_SETTINGS, None if merged == old else merged)
    plan(MODEL_META, None if differs == "" else meta_bytes)
    before = before_export(dest / MTEB_RESULTS, target)

    if writes:
        if fresh:
            dest.mkdir(parents=True)
        atomic.replace_all(writes)  # all written aside first; model_meta.json last: a finished export
    exported = [target / file_name for file_name in names]
    return MtebExport(target, check_exported(dest / MTEB_RESULTS, target, exported, before), written, unchanged)


def _destination(dest: Path, create: bool) -> Path:
    """DEST's real path: a folder (or, with ``create``, none yet)."""
    if dest.is_dir():
        return Path(os.path.realpath(dest))
    if os.path.lexists(dest):
        kind = "a file" if dest.is_file() else "a link to nothing" if dest.is_symlink() else "not a regular file"
        raise UserError(f"{dest} is {kind}, not a folder; pass the folder of a clone of "
                        "embeddings-benchmark/results as DEST")
    if not create:
        raise UserError(f"{dest} does not exist; pass a clone of embeddings-benchmark/results (git clone "
                        "https://github.com/embeddings-benchmark/results.git), or --create to make the folder")
    return Path(os.path.realpath(dest))


def _real_paths(dest: Path, base: Path, relative: Path, names: list[str]) -> dict[str, Path]:
    """The real path each of ``names`` in ``dest / relative`` is written at, once every existing
    path component under DEST (links included) is checked to resolve inside ``base``."""
    path = dest
    for part in relative.parts:
        path = path / part
        if not os.path.lexists(path):
            break
        _inside(path, dest, base)
        if not path.is_dir():
            raise UserError(f"{path}: not a folder, where the repository's layout has one; move it away, "
                            f"{ELSEWHERE}")
    real = {}
    for file_name in names:
        path = dest / relative / file_name
        if os.path.lexists(path):
            _inside(path, dest, base)
        real[file_name] = Path(os.path.realpath(path))
    return real


def _inside(path: Path, dest: Path, base: Path) -> None:
    """Refuse ``path`` when it resolves (its links followed) outside ``base``."""
    resolved = Path(os.path.realpath(path))
    if not resolved.is_relative_to(base):
        raise UserError(f"{path}: leads out of {dest} (to {resolved}) through a link; an export writes inside DEST "
                        f"only: replace the link with what it points to, {ELSEWHERE}")


def _existing(path: Path, shown: Path) -> bytes | None:
    """The bytes of the clone's file at ``path`` (``shown`` in messages), or None: no such file."""
    try:
        return read_bytes(path, MAX_READ_BYTES)
    except MissingFile:
        return None
    except UnreadableFile as e:
        raise UserError(f"{shown}: {e}; an export replaces regular files only: move it away, {ELSEWHERE}") from None


def _same_json(a: bytes, b: bytes) -> bool:
    try:
        return parse_json(a) == parse_json(b)
    except MalformedJSON:
        return False


def _meta_difference(old: bytes, meta: dict) -> str:
    """How the clone's ``model_meta.json`` (``old``) differs from the run's ``meta``: "" when
    they say the same, else a few words naming the fields."""
    try:
        there = parse_json(old)
    except MalformedJSON as e:
        return f"is {e}"
    if not isinstance(there, dict):
        return f"is not a JSON object (a {type(there).__name__})"
    fields = [key for key in [*meta, *(k for k in there if k not in meta)]
              if key not in there or key not in meta or there[key] != meta[key]]
    if not fields:
        return ""
    shown = ", ".join(fields[:8]) + (f" and {len(fields) - 8} more" if len(fields) > 8 else "")
    return f"differs from the run's in {'field' if len(fields) == 1 else 'fields'} {shown}"


def _merged_run_settings(existing: str, run: str) -> str:
    """The clone's ``run_settings.jsonl`` after mteb's ``ResultCache.submit_results`` merges the
    run's into it: each (task, split, subset) once, with the last entry's settings.
    :func:`run_settings_text` given both files' lines does it: the one entry it adds names no split
    and no subset, so it covers nothing."""
    return run_settings_text(f"{existing}\n{run}", "", {None: []}, None)


def _utf8(path: Path, data: bytes, then: str) -> str:
    """``data`` as the UTF-8 text mteb reads ``run_settings.jsonl`` as, or a one-line error naming ``path``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); {then}") from None


def _read(path: Path, limit: int, *, optional: bool = False) -> bytes | None:
    """A file of the run, at most ``limit`` bytes, or a one-line error naming it; None when there is
    none and it is ``optional``."""
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
