"""An r2med retriever or pipeline as an mteb search model (``r2med_tasks.as_mteb_model``).

mteb calls ``index``/``search`` on it; nothing here imports mteb (its ``ModelMeta`` comes from
``ResultFolder.model_meta``, through ``mteb_adapter``). Kept apart from ``mteb_adapter`` so the
adapter imports no other r2med module and the core has no import cycle (``tests/test_imports.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models import ModelMeta


class SearchModel:
    """An r2med retriever or pipeline as an mteb search model (mteb's ``SearchProtocol``):
    ``mteb.evaluate(r2med.as_mteb_model("bm25"), tasks)`` indexes and searches through it, with
    the pipeline's rewriter, default query combination and reranker applied as ``r2med-run`` does."""

    def __init__(self, pipeline: Any, context: Any, task_of: Callable[[str], Any]) -> None:
        self.pipeline, self.context, self.task_of = pipeline, context, task_of
        self._corpus = None

    @property
    def mteb_model_meta(self) -> ModelMeta:
        from .results import ResultFolder

        return ResultFolder(Path("results"), self.pipeline.spec()).model_meta()

    def index(self, corpus: Any, *, task_metadata: TaskMetadata, hf_split: str = "test", hf_subset: str = "default",
              encode_kwargs: Any = None, num_proc: int | None = None, **kwargs: Any) -> None:
        import hashlib

        from .data import Corpus

        columns = corpus.column_names if hasattr(corpus, "column_names") else []
        ids = [str(i) for i in corpus["id"]]
        texts = list(corpus["text"])
        if "title" in columns:  # as mteb's own encoders join them
            texts = [f"{title} {text}".strip() if title else text for title, text in zip(corpus["title"], texts)]
        h = hashlib.sha256()
        for doc_id, text in zip(ids, texts):
            h.update(doc_id.encode() + b"\0" + text.encode() + b"\0")
        self._corpus = Corpus(ids, texts, h.hexdigest())
        stage = self.pipeline.retriever
        stage.instance.index(self._corpus, task=self.task_of(task_metadata.name),
                             context=self.context.with_(corpus=self._corpus))

    def search(self, queries: Any, *, task_metadata: TaskMetadata, hf_split: str = "test",
               hf_subset: str = "default", top_k: int = 100, encode_kwargs: Any = None, top_ranked: Any = None,
               num_proc: int | None = None, **kwargs: Any) -> dict[str, dict[str, float]]:
        from .combine import default_query
        from .components import KEEP_TAIL, CombinesGenerated, RerankDepth
        from .data import Query

        task = self.task_of(task_metadata.name)
        context = self.context.with_(corpus=self._corpus)
        asked = [Query(str(i), t) for i, t in zip(queries["id"], queries["text"])]
        stages = self.pipeline.stages
        searched = asked
        if "rewriter" in stages:
            searched = stages["rewriter"].instance.rewrite(asked, task=task, context=context)
        retriever = stages["retriever"].instance
        if not isinstance(retriever, CombinesGenerated):
            searched = [Query(q.id, default_query(q)) if q.generated else q for q in searched]
        run = retriever.search(searched, task=task, top_k=top_k, context=context)
        if "reranker" not in stages:
            return run
        reranker = stages["reranker"].instance
        k = (reranker.rerank_k if isinstance(reranker, RerankDepth) else None) or top_k
        heads = {q: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:k]) for q, docs in run.items()}
        scores = reranker.rerank(asked, self._corpus, heads, task=task, context=context)
        stage = stages["reranker"]
        if not {**stage.spec.defaults, **stage.options}.get(KEEP_TAIL, False):
            return {q: scores.get(q, {}) for q in run}  # the reranked list only, as published
        out = {}
        for q, docs in run.items():
            head = {d: float(s) for d, s in scores.get(q, {}).items()}
            floor = min(head.values(), default=0.0)
            tail = [d for d, _ in sorted(docs.items(), key=lambda kv: -kv[1])[k:]]
            out[q] = {**head, **{d: floor - i - 1.0 for i, d in enumerate(tail)}}
        return out
