"""The naming rules of the results layout: mteb 2.x's ``ResultCache`` layout, so ``mteb`` loads
every result on official data as its own::

    <output>/<org__model>/<revision>/                      results on R2MED's data from the hub
        <Task>.json (TaskResult), model_meta.json, run_settings.jsonl,
        <Task>.trec, <Task>.per_query.tsv, r2med/ (r2med's own files)
    <output>/<org__model>/<revision>/experiments/<name>/   an option variant (mteb's experiment)
    <output>/local-data/<org__model>/<revision>/...        the same, for data read from local files

Results on local data never share a folder with the hub's, so mteb's loader never mistakes them
for results on the benchmark's data.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from .identity import PipelineSpec, digest

DEFAULT_OUTPUT = Path("results")  # where results are written unless told (--output)
MTEB_RESULTS = "results"  # the folder of results in a clone of the MTEB results repository
NO_REVISION = "no_revision_available"  # mteb's revision folder for a model without a revision
EXPERIMENTS = "experiments"  # mteb's folder for experiment variants
LOCAL_DATA = "local-data"  # the tree of results on data read from local files
OWN_FOLDER = "r2med"  # the sub-folder of r2med's own files, which no reader of mteb's layout takes for results
RECORD = "pipeline.json"
FIRST_STAGE = "first-stage.json"  # r2med/first-stage.json: what an exported first stage came from (export_first_stage)
REPRODUCTION = "reproduction.json"
LOCK = "lock"
GENERATIONS = "generations"  # <Task>.generations.jsonl: what the run's LLMs wrote (context.generated)
MODEL_META = "model_meta.json"
RUN_SETTINGS = "run_settings.jsonl"
# <Task><suffix>: a task's files
TASK_RESULT_SUFFIX = ".json"
TREC_SUFFIX = ".trec"
PER_QUERY_SUFFIX = ".per_query.tsv"
KEPT_SUFFIX = ".jsonl"  # <Task>.<name>.jsonl
JOURNAL_SUFFIX = ".partial.jsonl"  # r2med/<Task>.<name>.partial.jsonl
IDENTITY_SUFFIX = ".identity.json"
COST_SUFFIX = ".cost.json"
MANIFEST_SUFFIX = ".files.json"
TEMP_FILES = ".*.tmp"  # what r2med_tasks.atomic writes aside before putting a file in place
MAX_COMPONENT = 120  # characters of one path component derived from input
# What a reader takes from a results folder, which may hold anything (a folder copied from someone,
# a clone of the MTEB results repository): at most this many bytes of a regular file, JSON nested at
# most this deep. Anything else is refused with one line saying why.
MAX_TASK_RESULT_BYTES = 10 * 1024 * 1024  # a TaskResult: the MTEB results repository's limit per file
MAX_RECORD_BYTES = 1024 * 1024  # model_meta.json, r2med/pipeline.json, identities (a few KB when r2med writes them)
MAX_TABLE_BYTES = 64 * 1024 * 1024  # a per-query table (a line per query)


def slug(text: str) -> str:
    """A name safe as one folder name (results are filed under ``r2med/<slug>``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def safe_component(text: str) -> str:
    """One path component from text that came from input: never empty, ``.``/``..`` or holding a
    separator; a long one is shortened and ends with a hash of the whole."""
    cleaned = re.sub(r"[^A-Za-z0-9._=,+\-\[\]{}@]+", "_", text).lstrip(".") or "_"
    if len(cleaned) > MAX_COMPONENT:
        cleaned = f"{cleaned[:MAX_COMPONENT - 13]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return cleaned


def experiment_name(kwargs: dict[str, Any] | None) -> str | None:
    """mteb's folder name for ``experiment_kwargs`` (``b_0.9__k1_1.5``), made safe as a path: mteb's
    ``ModelMeta.experiment_name`` for JSON-shaped values, reproduced so naming a folder never
    imports mteb."""
    if not kwargs:
        return None
    plain = json.loads(json.dumps(kwargs, sort_keys=True, default=str))  # JSON-shaped: tuples as lists
    return safe_component("__".join(f"{k}_{_serialized(v)}" for k, v in sorted(plain.items())))


def _serialized(value: Any) -> str:
    if isinstance(value, list):
        return f"[{','.join(_serialized(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_serialized(v)}" for k, v in sorted(value.items())) + "}"
    return re.sub(r'[<>:"|?*\\/\0]', "_", str(value))


def repository_folder(name: str) -> str:
    """mteb's folder of model ``name`` (``org/name`` -> ``org__name``), as the MTEB results
    repository names it: the one mapping of names to folders."""
    return name.replace("/", "__").replace(" ", "_")


def folder_model_name(folder: str) -> str:
    """The model name a folder of mteb's layout stands for (``org__name`` -> ``org/name``)."""
    return folder.replace("__", "/")


def model_folder_name(name: str) -> str:
    """:func:`repository_folder`, made safe as a path."""
    return safe_component(repository_folder(name))


def repository_path(name: str, revision: object, experiment: str | None) -> Path:
    """Where a model's results lie in a clone of the MTEB results repository: the repository's own
    folder name where that is a plain path component, else a safe one (which the contribution check
    then reports as misplaced)."""
    folder = repository_folder(name)
    if not (folder.isprintable() and not folder.startswith(".") and len(folder) <= MAX_COMPONENT
            and not re.search(r"[\\/:*?\"<>|]", folder)):
        folder = safe_component(folder)
    path = Path(MTEB_RESULTS, folder, safe_component(str(revision or NO_REVISION)))
    return path / EXPERIMENTS / experiment if experiment else path


def folder_path(output: Path, name: str, revision: str, experiment: str | None, *, local: bool) -> Path:
    """The results folder of a model ``name`` at ``revision`` (an experiment of it, when named)."""
    root = output / LOCAL_DATA if local else output
    path = root / model_folder_name(name) / safe_component(revision)
    return path / EXPERIMENTS / experiment if experiment else path


def filed_under(spec: PipelineSpec) -> tuple[str, str]:
    """The model name and revision a pipeline's results are filed under: a bare retriever's own
    model (a model name of r2med's own, ``r2med/hybrid``, under a third-party member's package),
    so they merge with MTEB's; a composite's ``<namespace>/<its name>``, at a hash of its
    components and the models they use (its options name the experiment)."""
    if spec.composite:
        return f"{spec.namespace}/{slug(spec.display_name) or 'pipeline'}", \
            digest({"config": _without_options(spec.config), "models": spec.models})
    return _in_namespace(spec.model["name"], spec.namespace), safe_component(str(spec.model["revision"]))


def _in_namespace(name: str, namespace: str) -> str:
    """A model name in r2med's own namespace (``r2med/hybrid``) as ``namespace``'s (the package of
    the pipeline's first third-party component); any other name as it is."""
    org, slash, rest = name.partition("/")
    return f"{namespace}/{rest}" if slash and org == "r2med" and namespace != "r2med" else name


def _without_options(config: dict[str, Any]) -> dict[str, Any]:
    """The components of a configuration, without option values (those name the experiment)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and "component" in value:
            out[key] = {k: v for k, v in value.items() if k != "options"}
        elif key == "members":
            out[key] = [_without_options(m) for m in value]
    return out


def inside(path: Path, root: Path) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(root) + os.sep)


def leads_outside(path: Path, root: Path) -> Path | None:
    """The first symbolic link on the way from ``root`` down to ``path`` that leads out of
    ``root`` (None: writing at ``path`` stays inside it)."""
    real_root = os.path.realpath(root)
    current = Path(os.path.abspath(root))
    for part in Path(os.path.abspath(path)).relative_to(current).parts:
        current = current / part
        if current.is_symlink() and not os.path.realpath(current).startswith(real_root + os.sep):
            return current
    return None
