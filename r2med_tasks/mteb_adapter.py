"""Every use of mteb, in one place, against a declared range of mteb versions.

r2med writes results mteb reads (``TaskResult`` files, ``model_meta.json``, mteb's folder layout),
scores runs with mteb's own retrieval metrics so its numbers equal ``mteb.evaluate``'s, and offers
its tasks to ``mteb.evaluate``. The mteb names that takes, some of them private
(``mteb._evaluators.retrieval_metrics``), are used here only; ``tests/test_mteb_adapter.py`` checks
that the installed mteb is in :data:`SUPPORTED`, that pyproject's requirement is the same range, and
that each entry point below still exists and behaves as expected. Moving to a new mteb means
running that test, fixing this module and widening :data:`SUPPORTED` (and pyproject's ``mteb``).

mteb (and with it torch and numpy) is imported inside the functions only, so importing this module
stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models import ModelMeta
    from mteb.results import TaskResult

SUPPORTED = SpecifierSet(">=2.20,<3")  # pyproject's ``mteb`` requirement is the same range (a test checks)


def installed_version() -> str | None:
    """The installed mteb's version (``None``: not installed); read without importing mteb."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mteb")
    except PackageNotFoundError:
        return None


def retrieval_scores(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]],
                     k_values: Sequence[int]) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """mteb's score dict for a retrieval split (what ``mteb.evaluate`` stores, without
    ``main_score``) and pytrec_eval's per-query measures (``ndcg_cut_10``, ``recall_100``, ...)
    from the same call. ``run``: query id -> {document id: score}."""
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores, make_score_dict

    r = calculate_retrieval_scores(run, qrels, list(k_values))
    scores = make_score_dict(ndcg=r.ndcg, _map=r.map, recall=r.recall, precision=r.precision,
                             mrr=r.mrr, naucs=r.naucs, naucs_mrr=r.naucs_mrr, hit_rate=r.hit_rate,
                             task_scores={})
    return scores, r.all_scores


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


def task_result(metadata: TaskMetadata, scores: dict[str, Any], evaluation_time: float,
                phases: list[dict[str, Any]]) -> TaskResult:
    """The ``TaskResult`` of a test split's ``scores``, as ``mteb.evaluate`` builds it."""
    from types import SimpleNamespace

    from mteb.results import TaskResult

    return TaskResult.from_task_results(SimpleNamespace(metadata=metadata), {"test": {"default": scores}},
                                        evaluation_time, evaluation_phases=phases)


def write_task_result(result: TaskResult, path: Path) -> None:
    """Write ``result`` with mteb's own serialisation (not atomic: write to a temp path first)."""
    result.to_disk(path)


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


def model_meta_dict(meta: ModelMeta) -> dict[str, Any]:
    """``meta`` as ``model_meta.json`` holds it."""
    return meta.to_dict()


def read_task_result(path: Path) -> TaskResult:
    """A ``TaskResult`` file, read as mteb reads it."""
    from mteb.results import TaskResult

    return TaskResult.from_disk(path)
