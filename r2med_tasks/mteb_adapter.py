"""Every use of mteb, in one place, against a declared range of mteb versions.

r2med writes results mteb reads (``TaskResult`` files, ``model_meta.json``, mteb's folder layout)
and offers its tasks to ``mteb.evaluate``. The mteb names that takes are used here only. Two of
mteb's formats are reproduced here rather than called, because importing mteb (sklearn, pandas,
datasets) costs seconds on every run: the score dict of mteb's retrieval evaluator (computed in
:mod:`r2med_tasks.evaluation`) and the bytes of a ``TaskResult`` file (:func:`task_result_text`).
``tests/test_mteb_adapter.py`` checks that the installed mteb is in :data:`SUPPORTED`, that
pyproject's requirement is the same range, that each entry point below still exists and behaves as
expected, and that both reproductions still equal what the installed mteb computes and writes.
Moving to a new mteb means running that test, fixing this module (and the evaluation) and widening
:data:`SUPPORTED` (and pyproject's ``mteb``).

mteb (and with it torch and numpy) is imported inside the functions only, so importing this module
stays cheap.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models import ModelMeta
    from mteb.results import TaskResult

SUPPORTED = SpecifierSet(">=2.20,<3")  # pyproject's ``mteb`` requirement is the same range (a test checks)
# The evaluation languages of every task r2med writes results for (R2MED's tasks in mteb's metadata,
# and local tasks, whose metadata r2med builds): its one subset, "default", is English.
LANGUAGES = ("eng-Latn",)


def installed_version() -> str | None:
    """The installed mteb's version (``None``: not installed), found as mteb finds its own
    (``mteb-core``, the same code without its heavy dependencies, first), without importing it."""
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
    """An mteb ``AbsTaskRetrieval`` for ``mteb.evaluate`` whose test split comes from ``load()``:
    (corpus id -> text, query id -> text, qrels)."""
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
    """The text mteb writes for a test split's ``scores`` of a task in :data:`LANGUAGES`
    (``TaskResult.from_task_results(task, {"test": {"default": scores}}, evaluation_time,
    evaluation_phases=phases).to_disk(path)``), built without importing mteb: its field order, its
    per-subset ``hf_subset``/``languages``/``mteb_version``, floats in the scores rounded to 6
    decimals its way, ``json.dump`` with ``indent=2``. Write it atomically."""
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


def _rounded(scores: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``scores`` rounded as ``TaskResult._round_scores(scores, 6)`` rounds: floats in
    nested dicts and in lists (one level deep), each with its own type's ``round``."""
    out: dict[str, Any] = {}
    for key, value in scores.items():
        if isinstance(value, dict):
            out[key] = _rounded(value)
        elif isinstance(value, list):
            out[key] = [_rounded(v) if isinstance(v, dict) else round(v, 6) if isinstance(v, float) else v
                        for v in value]
        elif isinstance(value, float):
            out[key] = round(value, 6)
        else:
            out[key] = value
    return out


def registered_model_meta(name: str) -> ModelMeta | None:
    """mteb's registered ``ModelMeta`` named ``name``, or ``None`` when mteb has none."""
    import mteb

    try:
        return mteb.get_model_meta(name)
    except Exception:  # mteb raises several kinds for an unknown name
        return None


def model_meta(info: dict[str, Any], update: dict[str, Any], *, registered: bool) -> ModelMeta:
    """A ``ModelMeta`` for results: mteb's registered entry for ``info["name"]`` (when
    ``registered`` and mteb has one) with ``info["revision"]`` and ``update``; else one built from
    the ``ModelMeta`` fields in ``info``, the rest left empty."""
    from mteb.models import ModelMeta

    found = registered_model_meta(info["name"]) if registered else None
    if found is not None:
        return found.model_copy(update={"revision": info["revision"], **update})
    empty = ModelMeta.create_empty()
    fields = {k: v for k, v in info.items() if k in ModelMeta.model_fields}
    return ModelMeta.model_validate({**{k: getattr(empty, k) for k in ModelMeta.model_fields}, **fields, **update})


def model_meta_text(info: dict[str, Any], update: dict[str, Any], *, registered: bool) -> str:
    """``model_meta.json``'s text for :func:`model_meta`'s ``ModelMeta``.

    A name in r2med's own namespace (``r2med/...``, which mteb never registers) whose fields are
    plain ones, of the values ``ModelMeta`` accepts unchanged, is written from ``ModelMeta``'s empty
    fields without importing mteb: its import costs seconds and ~300 MB resident for the rest of
    a run (tests/test_mteb_adapter.py checks both texts are the same, field order included)."""
    fields = {k: v for k, v in {**info, **update}.items() if k in EMPTY_MODEL_META}
    if info["name"].startswith(OWN_NAMESPACE) and fields.keys() <= _PLAIN.keys() \
            and all(_PLAIN[k](v) for k, v in fields.items()):
        return json.dumps({**EMPTY_MODEL_META, **fields}, indent=4)
    return json.dumps(model_meta(info, update, registered=registered).to_dict(), default=str, indent=4)


OWN_NAMESPACE = "r2med/"
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
# The plain fields: each with the values ModelMeta keeps as they are.
_PLAIN = {
    "name": lambda v: isinstance(v, str) and "/" in v,
    "revision": lambda v: isinstance(v, str),
    "open_weights": lambda v: v is None or isinstance(v, bool),
    "use_instructions": lambda v: v is None or isinstance(v, bool),
    "framework": lambda v: isinstance(v, list) and all(isinstance(f, str) and f in FRAMEWORKS for f in v),
    "reference": lambda v: v is None or (isinstance(v, str) and v.startswith("https://") and v.isascii()
                                         and not any(c.isspace() for c in v)),
    "experiment_kwargs": lambda v: v is None or (isinstance(v, dict) and all(isinstance(k, str) for k in v)),
}


def read_task_result(path: Path) -> TaskResult:
    """A ``TaskResult`` file, read as mteb reads it."""
    from mteb.results import TaskResult

    return TaskResult.from_disk(path)
