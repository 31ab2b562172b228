"""Every use of mteb, in one place, against a declared range of mteb versions.

Several of mteb's formats are reproduced here rather than called, byte for byte, because importing
mteb costs seconds on every run. ``tests/test_mteb_adapter.py`` and ``tests/test_run_settings.py``
check the reproductions against the installed mteb: moving to a new mteb means running them, fixing
this module and widening :data:`SUPPORTED` (and pyproject's ``mteb``).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models import ModelMeta
    from mteb.results import TaskResult

logger = logging.getLogger(__name__)

SUPPORTED = SpecifierSet(">=2.20,<3")  # pyproject's ``mteb`` requirement is the same range (a test checks)
# of every task r2med writes results for: its one subset, "default", is English
LANGUAGES = ("eng-Latn",)


@functools.cache
def installed_version() -> str | None:
    """The installed mteb's version, found as mteb finds its own (``mteb-core`` first), without
    importing it. Once per process: looking it up scans every installed distribution."""
    from importlib.metadata import PackageNotFoundError, version

    for name in ("mteb-core", "mteb"):
        try:
            return version(name)
        except PackageNotFoundError:
            pass
    return None


def task_metadata(name: str, revision: str, fields: Callable[[], dict[str, Any]]) -> TaskMetadata:
    """mteb's own ``TaskMetadata`` of task ``name`` with the dataset revision actually used, or,
    for a task mteb does not know, one built from ``fields()``."""
    import mteb
    from mteb.abstasks.task_metadata import TaskMetadata

    try:
        meta = mteb.get_task(name).metadata
    except KeyError:
        return TaskMetadata(**fields())
    if meta.revision == revision:
        return meta
    return meta.model_copy(update={"dataset": {**meta.dataset, "revision": revision}})


def retrieval_task(name: str, meta: TaskMetadata, load: Callable[[], tuple[dict, dict, dict]]):
    """An mteb ``AbsTaskRetrieval`` for ``mteb.evaluate`` whose test split comes from ``load()``."""
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    class Task(AbsTaskRetrieval):
        metadata = meta

        def load_data(self, num_proc=None, **kwargs):
            if self.data_loaded:
                return
            corpus, queries, qrels = load()
            self.corpus = {"test": {i: {"text": t} for i, t in corpus.items()}}
            self.queries = {"test": dict(queries)}
            self.relevant_docs = {"test": qrels}
            self.data_loaded = True

    Task.__name__ = Task.__qualname__ = name
    return Task()


def task_result_text(task_name: str, dataset_revision: str, scores: dict[str, Any],
                     evaluation_time: float | None, phases: list[dict[str, Any]]) -> str:
    """The text mteb's ``TaskResult...to_disk(path)`` writes for a test split's ``scores``, built
    without importing mteb: its field order, its per-subset fields, its rounding."""
    from packaging.version import Version

    mteb_version = installed_version()
    subset = {**scores, "hf_subset": "default", "languages": list(LANGUAGES),
              "mteb_version": scores.get("mteb_version", mteb_version)}
    result = {
        "dataset_revision": dataset_revision,
        "task_name": task_name,
        "mteb_version": mteb_version if subset["mteb_version"] is None else str(Version(subset["mteb_version"])),
        "scores": {"test": [_rounded(subset)]},
        "evaluation_time": None if evaluation_time is None else float(evaluation_time),
        "kg_co2_emissions": None,
        "date": None,
        "evaluation_phases": [{"name": p["name"], "start": float(p["start"]), "end": float(p["end"]),
                               "split": p["split"], "subset": p["subset"]} for p in phases],
    }
    return json.dumps(result, indent=2)


def stored_score(value: Any) -> Any:
    """A score as a TaskResult file holds it (``TaskResult._round_scores(scores, 6)``)."""
    return round(value, 6) if isinstance(value, float) else value


def _rounded(scores: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``scores`` rounded as ``TaskResult._round_scores(scores, 6)`` rounds."""
    out: dict[str, Any] = {}
    for key, value in scores.items():
        if isinstance(value, dict):
            out[key] = _rounded(value)
        elif isinstance(value, list):
            out[key] = [_rounded(v) if isinstance(v, dict) else stored_score(v) for v in value]
        else:
            out[key] = stored_score(value)
    return out


def registered_model_meta(name: str) -> ModelMeta | None:
    """mteb's registered ``ModelMeta`` named ``name``, or ``None`` when mteb has none."""
    if not may_be_registered(name):
        return None
    import mteb

    try:
        return mteb.get_model_meta(name)
    except Exception:  # mteb raises several kinds for an unknown name
        return None


def model_meta(info: dict[str, Any], update: dict[str, Any], *, registered: bool) -> ModelMeta:
    """A ``ModelMeta`` for results: mteb's registered entry, at ``info["revision"]``, where wanted
    and known; else one built from ``info``."""
    from mteb.models import ModelMeta

    found = registered_model_meta(info["name"]) if registered else None
    if found is not None:
        return found.model_copy(update={"revision": info["revision"], **update})
    empty = ModelMeta.create_empty()
    fields = {k: v for k, v in info.items() if k in ModelMeta.model_fields}
    return ModelMeta.model_validate({**{k: getattr(empty, k) for k in ModelMeta.model_fields}, **fields, **update})


def model_meta_text(info: dict[str, Any], update: dict[str, Any], *, registered: bool) -> str:
    """``model_meta.json``'s text for :func:`model_meta`'s ``ModelMeta``. A name mteb cannot register
    (:func:`may_be_registered`) with plain fields is written without importing mteb, whose import
    costs seconds and ~300 MB resident for the rest of a run (a test checks both texts are the same)."""
    fields = {k: v for k, v in {**info, **update}.items() if k in EMPTY_MODEL_META}
    if not (registered and may_be_registered(info["name"])) and fields.keys() <= _PLAIN.keys() \
            and all(_PLAIN[k](v) for k, v in fields.items()):
        meta = {**EMPTY_MODEL_META, **fields}
        meta["is_cross_encoder"] = "cross-encoder" in meta["model_type"]  # as ModelMeta derives it
        return json.dumps(meta, indent=4)
    return json.dumps(model_meta(info, update, registered=registered).to_dict(), default=str, indent=4)


OWN_NAMESPACES = ("r2med/", "local/")
# ``ModelMeta.create_empty().to_dict()`` of the supported mteb, keys in its order (a test compares).
EMPTY_MODEL_META: dict[str, Any] = {
    "loader_kwargs": {}, "name": "no_model_name/available", "revision": "no_revision_available",
    "release_date": None, "languages": None, "n_parameters": None, "n_active_parameters_override": None,
    "n_embedding_parameters": None, "memory_usage_mb": None, "max_tokens": None, "embed_dim": None,
    "license": None, "open_weights": None, "public_training_code": None, "public_training_data": None,
    "framework": [], "reference": None, "similarity_fn_name": None, "use_instructions": None,
    "training_datasets": None, "adapted_from": None, "superseded_by": None, "modalities": ["text"],
    "model_type": ["dense"], "citation": None, "contacts": None, "experiment_kwargs": None,
    "output_dtypes": None, "extra_requirements_groups": None, "loader": None, "is_cross_encoder": False,
}
# mteb's ``ModelMeta.framework`` literals (a test compares).
FRAMEWORKS = frozenset({"Sentence Transformers", "PyTorch", "GritLM", "LLM2Vec", "TensorFlow", "JAX", "API",
                        "Tevatron", "NumPy", "PyLate", "ColBERT", "ColPali", "GGUF", "safetensors", "ONNX",
                        "OpenVINO", "Transformers"})
# mteb's ``ModelMeta.model_type`` literals (``mteb.models.model_meta.MODEL_TYPES``; a test compares).
MODEL_TYPES = frozenset({"dense", "cross-encoder", "late-interaction", "sparse", "router", "hybrid"})
# the fields whose values ModelMeta keeps as they are
_PLAIN = {
    "name": lambda v: isinstance(v, str) and "/" in v,
    "revision": lambda v: isinstance(v, str),
    "open_weights": lambda v: v is None or isinstance(v, bool),
    "use_instructions": lambda v: v is None or isinstance(v, bool),
    "framework": lambda v: isinstance(v, list) and all(isinstance(f, str) and f in FRAMEWORKS for f in v),
    "reference": lambda v: v is None or (isinstance(v, str) and v.startswith("https://") and v.isascii()
                                         and not any(c.isspace() for c in v)),
    "similarity_fn_name": lambda v: v is None or v in ("cosine", "dot", "MaxSim"),
    "adapted_from": lambda v: v is None or isinstance(v, str),
    "experiment_kwargs": lambda v: v is None or (isinstance(v, dict) and all(isinstance(k, str) for k in v)),
    "model_type": lambda v: isinstance(v, list) and bool(v) and all(isinstance(t, str) and t in MODEL_TYPES
                                                                    for t in v),
}


def may_be_registered(name: str) -> bool:
    """Whether mteb may register a model named ``name``, answered without importing mteb (seconds,
    in every process that writes results): mteb writes each name it registers, or renames, as a
    string literal in its model modules (a test checks every one), so a name found nowhere there is
    not registered; r2med's own namespaces never are (a test checks). Found, only mteb's registry
    can tell."""
    if name.startswith(OWN_NAMESPACES):
        return False
    sources = _model_sources()
    return f'"{name}"' in sources or f"'{name}'" in sources


@functools.cache
def _model_sources() -> str:
    """The text of mteb's ``mteb.models`` modules, as installed (read, not imported: 30 ms)."""
    from importlib.util import find_spec

    spec = find_spec("mteb")
    if spec is None or not spec.submodule_search_locations:
        return ""
    return "\n".join(path.read_text(encoding="utf-8", errors="replace")
                     for location in spec.submodule_search_locations
                     for path in sorted((Path(location) / "models").rglob("*.py")))


@functools.cache
def registered_model_names() -> frozenset[str]:
    """The names of the models mteb registers (the MTEB results repository merges results of these only)."""
    import mteb

    return frozenset(m.name for m in mteb.get_model_metas() if m.name)


@functools.cache
def task_revision(name: str) -> str | None:
    """mteb's pinned dataset revision of task ``name``; ``None``: mteb has no such task."""
    import mteb

    try:
        return mteb.get_task(name).metadata.revision
    except KeyError:
        return None


def task_result_load_error(path: Path) -> str | None:
    """Why mteb cannot read the TaskResult at ``path`` (``None``: it can)."""
    try:
        read_task_result(path)
    except Exception as e:  # whatever mteb raises is the answer
        return f"{type(e).__name__}: {' '.join(str(e).split(' For further information')[0].split())[:240]}"
    return None


def read_task_result(path: Path) -> TaskResult:
    """A ``TaskResult`` file, read as mteb reads it."""
    from mteb.results import TaskResult

    return TaskResult.from_disk(path)


# ---------------------------------------------------------------- run_settings.jsonl

# The distributions whose versions mteb records in each run_settings entry, in its order.
_VERSIONED = ("mteb", "torch", "sentence-transformers", "flash-attn", "transformers")


@functools.cache
def package_versions() -> dict[str, str | None]:
    """What ``mteb.cache.result_cache._get_package_versions()`` returns, without importing any of
    them. Shared: do not change it."""
    from importlib.metadata import version

    versions: dict[str, str | None] = {}
    for name in _VERSIONED:
        try:
            versions[name] = version(name)
        except Exception:  # as mteb: any failure is "not installed"
            versions[name] = None
    return versions


def run_settings_entries(text: str) -> list[dict[str, Any]]:
    """The entries of a ``run_settings.jsonl`` text, read as mteb's ``_read_run_settings_from_file``
    reads the file."""
    entries: list[dict[str, Any]] = []
    for line in re.split(r"\r\n|\r|\n", text):  # the lines of a file opened in text mode
        stripped = line.strip()
        if not stripped:
            continue
        try:
            parsed = json.loads(stripped)
        except Exception as e:
            logger.warning(f"Could not parse run_settings line '{stripped}': {e}")
            continue
        if isinstance(parsed, dict):
            entries.append(parsed)
    return entries


def _expand_run_settings_entry(entry: dict[str, Any]) -> Iterator[tuple[tuple[Any, Any, Any], str, dict[str, Any]]]:
    """mteb's ``_expand_run_settings_entry``: ((task, split, subset), settings key, settings) for each
    split and subset an entry covers."""
    settings = dict(entry)
    task = settings.pop("task", None)
    splits = settings.pop("splits", None)
    if splits is None:
        splits = [settings.pop("split", None)]
    subsets = settings.pop("subsets", None)
    if subsets is None:
        subsets = [settings.pop("subset", None)]
    key = json.dumps(settings, sort_keys=True, default=str)
    for split in splits:
        for subset in subsets:
            if split is not None and subset is not None:
                yield (task, split, subset), key, settings


def run_settings_scopes(text: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """For each (task, split, subset) a ``run_settings.jsonl`` text covers, the settings (the entry
    less task, splits and subsets) of the last entry covering it, as mteb's merge keeps them."""
    scopes: dict[tuple[str, str, str], dict[str, Any]] = {}
    for entry in run_settings_entries(text):
        for scope, _, settings in _expand_run_settings_entry(entry):
            scopes[scope] = settings
    return scopes


def run_settings_text(existing: str | None, task_name: str, scores: dict[str, list[dict[str, Any]]],
                      encode_kwargs: Mapping[str, Any] | None) -> str | None:
    """The text of ``run_settings.jsonl`` after ``ResultCache.save_to_cache`` saves a TaskResult into
    a folder whose file holds ``existing``, built without importing mteb: mteb keeps for each (task,
    split, subset) the last entry's settings and writes one row per task, settings and subsets.
    ``None`` when ``scores`` has no split: mteb then leaves the file as it is."""
    entries = [{
        "task": task_name,
        "splits": [split],
        "version": package_versions(),
        "encode_kwargs": json.loads(json.dumps(encode_kwargs, default=str)) if encode_kwargs is not None else {},
        "subsets": sorted({score.get("hf_subset", "default") for score in split_scores}),
    } for split, split_scores in scores.items()]
    if not entries:
        return existing

    settings_by_key: dict[str, dict[str, Any]] = {}
    latest: dict[tuple[Any, Any, Any], str] = {}  # a scope keeps its first place, takes the last settings
    for entry in [*(run_settings_entries(existing) if existing is not None else []), *entries]:
        for scope, key, settings in _expand_run_settings_entry(entry):
            settings_by_key[key] = settings
            latest[scope] = key

    grouped: defaultdict[tuple[Any, str], defaultdict[Any, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for (task, split, subset), key in latest.items():
        grouped[(task, key)][split].append(subset)

    lines = []
    for (task, key), splits in grouped.items():
        rows: defaultdict[tuple[Any, ...], list[Any]] = defaultdict(list)
        for split, subsets in splits.items():
            rows[tuple(sorted(set(subsets)))].append(split)
        for row_subsets, split_names in rows.items():
            row = {"task": task, "splits": sorted(split_names), **settings_by_key[key], "subsets": list(row_subsets)}
            lines.append(json.dumps(row, default=str) + "\n")
    return "".join(lines)
