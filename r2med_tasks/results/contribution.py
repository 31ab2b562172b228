"""What would block a pull request of a ``results/`` folder to the MTEB results repository
(embeddings-benchmark/results), checked before it is opened. The repository's CI (its tests/, its
file-size workflow, PR 676's run-settings test) is re-implemented here, in r2med's own code; each
problem names the check it fails. Beyond them r2med knows that only mteb's tasks at mteb's pinned
data revision count, that a NaN or infinite score is a failed evaluation, and that an option variant
is r2med's configuration, not mteb's implementation of the model. The legacy folders the repository
exempts are not: new submissions get no exemption.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..files.bounded import MalformedJSON, UnreadableFile, parse_json, read_bytes, read_text
from .layout import (
    EXPERIMENTS,
    MODEL_META,
    RUN_SETTINGS,
    folder_model_name,
    repository_folder,
)
from ..mteb_adapter import (
    registered_model_names,
    run_settings_scopes,
    task_result_load_error,
    task_revision,
)
from ..tasks.specs import PINNED_REVISIONS
from ..terminal import printable

MAX_FILE_BYTES = 10 * 1024 * 1024  # the repository's check_file_sizes workflow
MAX_READ_BYTES = 8 * MAX_FILE_BYTES  # what is read of a file to check its content (a larger one is refused too)
MIN_MTEB = (2, 0, 0)  # results of mteb versions above this only (PR 676)
SKIPPED = frozenset({".DS_Store"})  # what the repository's tests skip in results/
NO_DUPLICATE_CHECK = frozenset({"baseline__Human"})  # test_duplicate_results' one exemption
RERUN = "rerun the task with r2med-run --overwrite and export again"

Problem = tuple[Path, str]  # where (an absolute path), what (and what to do)


def check_results_tree(results_root: Path) -> list[str]:
    """What would block a pull request adding ``results_root`` to the MTEB results repository: one
    line per problem, naming a file (relative to the folder holding ``results/``) and what to do."""
    problems = [p for model in _children(results_root) for p in _model_problems(model)]
    return _lines(problems, results_root.parent)


@dataclass(frozen=True)
class Before:
    """What a clone held before an export into it: the model-wide problems already there, and
    whether the folder had a ``run_settings.jsonl`` (if not, every line of it afterwards is the
    export's)."""

    model_problems: frozenset[Problem]
    run_settings: bool


def before_export(results_root: Path, folder: Path) -> Before:
    """Taken before anything is written."""
    model = results_root / folder.relative_to(results_root).parts[0]
    return Before(frozenset(_model_wide(model)), (folder / RUN_SETTINGS).is_file())


def check_exported(results_root: Path, folder: Path, exported: Collection[Path], before: Before) -> list[str]:
    """The problems an export into a clone brings: of the files ``exported`` (written, or found
    identical), of ``folder``, and the model-wide ones not there ``before``. What the clone held
    already is the repository's, which its CI accepts."""
    model = results_root / folder.relative_to(results_root).parts[0]
    revision = model / folder.relative_to(model).parts[0]
    own = {*exported, folder, folder / RUN_SETTINGS}
    results = [p for p in exported if p.suffix == ".json" and p.name != MODEL_META]
    tasks = None if not before.run_settings else frozenset(p.stem for p in results)
    found, _ = _revision_problems(model, revision, only=results if folder == revision else [], tasks=tasks)
    problems = [(where, what) for where, what in found if where in own]
    if folder != revision:  # an option variant: not checked as the model's results (it cannot go), but scored
        problems += [(path, f"{what}; {RERUN}") for path in results for what in _non_finite_problems(path)]
    revisions = {f: _declared_revision(f) for f in _children(model) if f.is_dir()}
    problems += [(where, what) for where, what in _duplicate_revisions(revisions) if where in own]
    if model.name not in NO_DUPLICATE_CHECK:
        problems += [(where, what) for where, what in _duplicate_tasks([f for f in revisions
                                                                         if not f.name.startswith(".")])
                     if where in own]
    failing = {where for where, _ in before.model_problems}  # a check failing already: not the export's
    problems += [(where, what) for where, what in _model_wide(model) if where not in failing]
    return _lines(problems, results_root.parent)


def _declared_revision(folder: Path) -> object:
    """The revision a revision folder declares: its ``model_meta.json``'s, else (none to read) its name."""
    meta = _json_object(folder / MODEL_META)[0] if (folder / MODEL_META).is_file() else None
    return folder.name if meta is None else meta.get("revision")


def _model_wide(model: Path) -> list[Problem]:
    """The problems of a model's folder as a whole, when it has revision folders."""
    if model.name.startswith(".") or not any(f.is_dir() for f in _children(model)):
        return []
    return _unregistered(model)


def mteb_version_above_2(value: object) -> bool:
    """Whether ``value`` is an mteb version above 2.0.0 as the repository reads one: up to three
    dot-separated parts, each starting with digits (``2.1.0rc1`` is 2.1.0), missing parts 0."""
    if not isinstance(value, str):
        return False
    numbers = []
    for part in value.strip().split(".")[:3]:
        digits = re.match(r"\d+", part)
        if digits is None:
            return False
        numbers.append(int(digits.group()))
    return tuple(numbers + [0] * (3 - len(numbers))) > MIN_MTEB


def _lines(problems: list[Problem], base: Path) -> list[str]:
    """Each problem as its line, names from files made safe to print."""
    return [printable(f"{where.relative_to(base).as_posix()}: {what}") for where, what in problems]


def _children(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name not in SKIPPED) if folder.is_dir() else []


def _model_problems(model: Path) -> list[Problem]:
    """A model folder's problems: each revision folder's, then those across its revisions."""
    if not model.is_dir():
        return []  # the repository's tests look at folders only
    problems: list[Problem] = []
    revisions: dict[Path, object] = {}  # revision folder -> the revision it declares
    for folder in _children(model):
        if not folder.is_dir():
            problems.append((folder, "not a revision folder: a model's folder holds only <revision>/ folders "
                                     "(test_model_meta_in_folders); delete or move it"))
            continue
        found, meta = _revision_problems(model, folder)
        problems += found
        revisions[folder] = folder.name if meta is None else meta.get("revision")
    problems += _duplicate_revisions(revisions)
    if model.name not in NO_DUPLICATE_CHECK:
        problems += _duplicate_tasks([f for f in revisions if not f.name.startswith(".")])
    if revisions and not model.name.startswith("."):
        problems += _unregistered(model)
    return problems


def _revision_problems(model: Path, folder: Path, *, only: Collection[Path] | None = None,
                       tasks: Collection[str] | None = None) -> tuple[list[Problem], dict | None]:
    """A revision folder's problems, and its ``model_meta.json`` (``None``: none to read). ``only``:
    of its TaskResults, check these only; ``tasks``: of the lines of its ``run_settings.jsonl``,
    report those about these tasks only."""
    problems: list[Problem] = []
    results = sorted(p for p in folder.glob("*.json") if p.is_file() and p.name != MODEL_META)
    wanted = None if only is None else set(only)
    checked = results if wanted is None else [p for p in results if p in wanted]
    meta_path = folder / MODEL_META
    experiments = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        if sub.name == EXPERIMENTS:
            experiments = [x for x in _children(sub) if x.suffix == ".json" or any(x.rglob("*.json"))]
            refused = "" if meta_path.is_file() else (
                ", and without the model's own results (and model_meta.json) in <revision>/ the repository's "
                "tests refuse the folder (test_model_meta_in_folders)")
            problems += [(x, "an option variant cannot be submitted there: its options are r2med's, not a "
                             f"configuration of mteb's implementation of the model{refused}; rank it on the R2MED "
                             "leaderboard (r2med leaderboard) and delete it here")
                         for x in experiments]
        elif any(sub.rglob("*.json")):
            problems.append((sub, "not part of mteb's layout (TaskResults lie directly in <revision>/, and PR 676 "
                                  "checks every .json added under results/ as one); delete it"))
    problems += [(f, f"{f.stat().st_size:,} bytes, over the repository's 10 MB limit per file "
                     "(check_file_sizes); it cannot be submitted")
                 for f in sorted(folder.rglob("*")) if f.is_file() and f.stat().st_size > MAX_FILE_BYTES]

    meta = None
    if meta_path.is_file():
        meta, error = _json_object(meta_path)
        if meta is None:
            problems.append((meta_path, f"{error}; export the run again"))
        else:
            problems += _meta_problems(model, folder, meta_path, meta)
    elif results or not experiments:  # (a folder of experiments only: the line above says it all)
        problems.append((folder, "no model_meta.json: every revision folder needs the model's (test_model_meta_in"
                                 "_folders); export the run with r2med export-mteb, which copies it"))

    keys: dict[Path, list[tuple[str, str, str]]] = {}
    for path in checked:
        found, keys[path] = _result_problems(path)
        problems += found
    if checked:
        problems += _run_settings_problems(folder / RUN_SETTINGS, keys, tasks)
    return problems, meta


def _meta_problems(model: Path, folder: Path, path: Path, meta: dict) -> Iterator[Problem]:
    name, revision = meta.get("name"), meta.get("revision")
    if not isinstance(name, str) or not name:
        yield path, f"no model name (got {name!r}); export the run again"
    else:
        if "/" not in name:
            yield path, (f"name {name!r} names no organisation: the repository wants 'org/model' "
                         "(test_organization_is_specified_for_new_additions), as mteb registers models")
        if model.name != repository_folder(name):
            yield path, (f"model {name!r} belongs in results/{repository_folder(name)}/, not results/{model.name}/ "
                         "(test_correct_folder_structure); move the revision folder there")
    if not isinstance(revision, str):
        yield path, (f"no revision (got {revision!r}): the repository wants the model's commit "
                     "(test_revision_is_specified_for_new_additions); run a model with a known revision")
        return
    if not (re.fullmatch(r"[0-9a-f]{40}", revision) or len(revision) == 1):
        yield path, (f"revision {revision!r} is neither a 40-hex commit nor one character "
                     "(test_revision_is_specified_for_new_additions); the repository takes results of a "
                     "model at a commit of its weights (or an API version such as '1')")
    if revision != folder.name:
        yield path, (f"revision {revision!r} is not its folder's name {folder.name!r} (test_that_revision_match); "
                     f"move the files to results/{model.name}/{revision}/")


def _result_problems(path: Path) -> tuple[list[Problem], list[tuple[str, str, str]]]:
    """A TaskResult's problems, and the (task, split, subset) of its score blocks."""
    data, error = _json_object(path)
    if data is None:
        return [(path, f"{error}; {RERUN}")], []
    content: list[str] = []  # what is wrong inside; mteb's reading is tried when nothing is
    task = data.get("task_name") or data.get("mteb_dataset_name")
    if not isinstance(task, str):
        content.append(f"no task_name (got {task!r})")
    if not mteb_version_above_2(data.get("mteb_version")):
        content.append(f"mteb_version {data.get('mteb_version')!r}: the repository takes results of mteb > 2.0.0 "
                       "only (PR 676)")
    keys, old, malformed = [], [], []
    scores = data.get("scores")
    for split, blocks in scores.items() if isinstance(scores, dict) else ():
        for i, block in enumerate(blocks if isinstance(blocks, list) else [None]):
            subset = block.get("hf_subset") if isinstance(block, dict) else None
            if not isinstance(subset, str) or not subset:
                malformed.append(f"{split}[{i}]")
                continue
            if isinstance(task, str):
                keys.append((task, split, subset))
            if not mteb_version_above_2(block.get("mteb_version")):
                old.append(f"{split}/{subset} {block.get('mteb_version')!r}")
    if not isinstance(scores, dict) or malformed or not (keys or old):
        content.append("scores are not mteb's (a list of score blocks with hf_subset per split"
                       f"{': ' + ', '.join(malformed) if malformed else ''})")
    if old:
        content.append(f"the mteb_version of score blocks {', '.join(old)}: the repository takes results of "
                       "mteb > 2.0.0 only (PR 676)")
    if not content:  # what mteb refuses beyond the above (field types, ...)
        error = task_result_load_error(path)
        if error:
            content.append(f"mteb cannot read it ({error})")
    problems = [(path, f"{what}; {RERUN}") for what in content + _non_finite(scores)]
    if isinstance(task, str):
        if path.stem != task:
            problems.append((path, f"file name differs from its task_name {task!r} (test_task_name_matches_"
                                   f"filename); rename it {task}.json"))
        problems += _task_problems(path, task, data.get("dataset_revision"))
    return problems, keys


def _non_finite(scores: object) -> list[str]:
    """NaN or Infinity as a score: a failed evaluation, which mteb's reader takes and a leaderboard
    would rank. A NaN nAUC is not one: mteb's nAUC is 0/0 when a metric is the same for every query."""
    found = []
    for split, blocks in scores.items() if isinstance(scores, dict) else ():
        for i, block in enumerate(blocks if isinstance(blocks, list) else []):
            names = list(_non_finite_names(block))
            if names:
                subset = block.get("hf_subset") if isinstance(block, dict) else None
                shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                found.append(f"{split}/{subset if isinstance(subset, str) else f'[{i}]'}: {shown}")
    if not found:
        return []
    return [f"scores that are not numbers (NaN or Infinity) in {'; '.join(found)}: the evaluation failed there"]


def _non_finite_names(value: object, name: str = "") -> Iterator[str]:
    """The names (``key``, ``key.sub``, ``key[2]``) of the NaN and infinite numbers in ``value``."""
    if isinstance(value, float) and not math.isfinite(value):
        if not (math.isnan(value) and name.lower().startswith("nauc_")):
            yield name or "(the block)"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite_names(item, f"{name}.{key}" if name else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _non_finite_names(item, f"{name}[{i}]")


def _non_finite_problems(path: Path) -> list[str]:
    """Nothing when the file cannot be read: other checks say so."""
    data, _ = _json_object(path)
    return _non_finite(data.get("scores")) if data is not None else []


def not_on_the_benchmark(task: str, revision: object) -> str | None:
    """Why a result of ``task`` on data ``revision`` is not a result on the benchmark (a task mteb
    does not have, data other than mteb's pinned revision), which the repository takes only; None
    when it is one. The export refuses such a run before writing."""
    pinned = task_revision(task)
    if pinned is None:
        return (f"task {task!r} is not one of mteb's tasks (r2med's offline sample and local tasks are not): the "
                "repository takes results of mteb's tasks only; rank the run on the R2MED leaderboard (r2med "
                "leaderboard) instead")
    pinned = PINNED_REVISIONS.get(task, pinned)
    if revision != pinned:
        return (f"dataset_revision {revision!r} is not mteb's pinned {pinned}: results on local data (--data-dir) or "
                "another revision are not results on the official data; rerun the task without --data-dir (the "
                "hub's data at mteb's pinned revision) and export that run")
    return None


def _task_problems(path: Path, task: str, revision: object) -> list[Problem]:
    why = not_on_the_benchmark(task, revision)
    return [] if why is None else [(path, why)]


def _run_settings_problems(path: Path, keys: dict[Path, list[tuple[str, str, str]]],
                           tasks: Collection[str] | None = None) -> list[Problem]:
    """``run_settings.jsonl`` beside TaskResults whose score blocks are ``keys``: present, every
    line an entry, every score block covered by entries of mteb > 2.0.0 (PR 676). ``tasks``: of
    the lines that are not entries, report those naming one of these tasks only."""
    if not path.is_file():
        return [(path, "missing: the repository wants mteb's run settings beside new results (an entry per task, "
                       "split and subset, PR 676); export a results folder whose run_settings.jsonl r2med-run "
                       f"wrote, or {RERUN}")]
    problems: list[Problem] = []
    covering: dict[tuple[str, str, str], list[tuple[int, dict]]] = defaultdict(list)  # scope -> (line, settings)
    try:
        text = read_text(path, MAX_READ_BYTES)
    except UnreadableFile as e:
        return [(path, f"{'not UTF-8 text' if str(e).startswith('not UTF-8') else e}; {RERUN}")]
    for number, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):  # the lines mteb reads
        if not line.strip():
            continue
        try:
            entry = parse_json(line)
        except MalformedJSON as e:
            if tasks is None:
                what = f"is {e}" if str(e).startswith("not JSON") else f"is not an entry: {e}"
                problems.append((path, f"line {number} {what}; {RERUN}"))
            continue
        try:
            scopes = run_settings_scopes(line)  # the line's entry as mteb expands it
        except TypeError:  # "splits" or "subsets" not lists
            scopes = {}
        if not scopes or not all(isinstance(part, str) and part for scope in scopes for part in scope):
            task = entry.get("task") if isinstance(entry, dict) else None
            if tasks is not None and not (isinstance(task, str) and task in tasks):
                continue
            problems.append((path, f"line {number} is not an entry naming a task, its split(s) and subset(s); "
                                   f"{RERUN}"))
            continue
        for scope, settings in scopes.items():
            covering[scope].append((number, settings))
    old: dict[int, object] = {}  # line -> its version.mteb, for the lines that cover a score block
    for result, result_keys in keys.items():
        missing = [f"{split}/{subset}" for task, split, subset in result_keys if not covering[task, split, subset]]
        if missing:
            problems.append((result, f"no entry in {RUN_SETTINGS} for split/subset {', '.join(missing)} (PR 676); "
                                     f"export the run's own {RUN_SETTINGS}, or {RERUN}"))
        for key in result_keys:
            old |= {number: _settings_mteb(settings) for number, settings in covering[key]
                    if not mteb_version_above_2(_settings_mteb(settings))}
    problems += [(path, f"line {number}: version.mteb {version!r}: the repository takes results of mteb > 2.0.0 "
                        f"only (PR 676); {RERUN}") for number, version in sorted(old.items())]
    return problems


def _settings_mteb(settings: dict) -> object:
    version = settings.get("version")
    return version.get("mteb") if isinstance(version, dict) else None


def _duplicate_revisions(revisions: dict[Path, object]) -> list[Problem]:
    """test_no_duplicate_revisions: no revision declared by two folders of a model."""
    folders = defaultdict(list)
    for folder, revision in revisions.items():
        folders[json.dumps(revision, default=str)].append(folder)
    return [(folder / MODEL_META if (folder / MODEL_META).exists() else folder,
             f"revision {revisions[folder]!r} is also declared in {', '.join(o.name for o in same if o != folder)}/ "
             "(test_no_duplicate_revisions); keep one folder per revision")
            for same in folders.values() if len(same) > 1 for folder in same]


def _duplicate_tasks(folders: list[Path]) -> list[Problem]:
    """test_duplicate_results: a task's results under one revision of a model only."""
    by_task = defaultdict(list)
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            if path.name != MODEL_META:
                by_task[path.stem].append(path)
    return [(path, f"also under revision {', '.join(o.parent.name for o in same if o != path)} "
                   "(test_duplicate_results): the repository keeps a task's results of one revision of a model; "
                   "delete the other revision's")
            for same in by_task.values() if len(same) > 1 for path in same]


def _unregistered(model: Path) -> list[Problem]:
    """test_model_implementation: the model's name (any model_meta.json's, or its folder's) is
    one mteb registers."""
    names = []
    for path in sorted(model.rglob(MODEL_META)):
        meta, _ = _json_object(path)  # one that cannot be read is a problem of its own
        if meta is not None and isinstance(meta.get("name"), str):
            names.append(meta["name"])
    registered = registered_model_names()
    if any(n in registered for n in [*names, folder_model_name(model.name)]):
        return []
    name = names[0] if names else folder_model_name(model.name)
    hint = (" r2med's own pipelines (r2med/...) are ranked on the R2MED leaderboard (r2med leaderboard), not there"
            if name.startswith("r2med/") else "")
    return [(model, f"model {name!r} is not registered in mteb: the repository merges results only of models with a "
                    "ModelMeta (and a reference implementation) in mteb itself (test_model_implementation); get one "
                    f"merged into embeddings-benchmark/mteb first.{hint}")]


def _json_object(path: Path) -> tuple[dict | None, str]:
    """The JSON object in ``path`` (a regular file, read within :data:`MAX_READ_BYTES`), or ``None``
    and why not."""
    try:
        data = parse_json(read_bytes(path, MAX_READ_BYTES))
    except MalformedJSON as e:
        return None, f"not a JSON file ({e})"
    except UnreadableFile as e:
        return None, str(e)
    if not isinstance(data, dict):
        return None, f"not a JSON object (a {type(data).__name__})"
    return data, ""
