"""An r2med retriever or pipeline as an mteb search model. Nothing here imports mteb; kept apart
from ``mteb_adapter`` so the adapter imports no other r2med module (no import cycle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..scoring.runs import DEFAULT_TOP_K

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models import ModelMeta

    from .registry import Registry
    from ..tasks.specs import TaskSpec


class SearchModel:
    """An r2med retriever or pipeline as an mteb search model (mteb's ``SearchProtocol``):
    ``mteb.evaluate(r2med.as_mteb_model("bm25"), tasks)`` indexes and searches through it, with
    the pipeline's rewriter, default query combination and reranker applied as ``r2med-run`` does."""

    def __init__(self, pipeline: Any, context: Any, task_of: Callable[[str], Any]) -> None:
        self.pipeline, self.context, self.task_of = pipeline, context, task_of
        self._corpus = None

    @property
    def mteb_model_meta(self) -> ModelMeta:
        from ..results.folder import ResultsFolder
        from ..results.layout import DEFAULT_OUTPUT

        return ResultsFolder.for_pipeline(DEFAULT_OUTPUT, self.pipeline.spec()).model_meta_object()

    def index(self, corpus: Any, *, task_metadata: TaskMetadata, hf_split: str = "test", hf_subset: str = "default",
              encode_kwargs: Any = None, num_proc: int | None = None, **kwargs: Any) -> None:
        """Keep mteb's corpus; the retriever indexes it in :meth:`search`, where ``r2med-run``'s
        stages run as they do in a run."""
        import hashlib

        from ..tasks.taskdata import Corpus

        columns = corpus.column_names if hasattr(corpus, "column_names") else []
        ids = [str(i) for i in corpus["id"]]
        texts = list(corpus["text"])
        if "title" in columns:  # as mteb's own encoders join them
            texts = [f"{title} {text}".strip() if title else text for title, text in zip(corpus["title"], texts)]
        h = hashlib.sha256()
        for doc_id, text in zip(ids, texts):
            h.update(doc_id.encode() + b"\0" + text.encode() + b"\0")
        self._corpus = Corpus(ids, texts, h.hexdigest())

    def search(self, queries: Any, *, task_metadata: TaskMetadata, hf_split: str = "test",
               hf_subset: str = "default", top_k: int = DEFAULT_TOP_K, encode_kwargs: Any = None, top_ranked: Any = None,
               num_proc: int | None = None, **kwargs: Any) -> dict[str, dict[str, float]]:
        """The pipeline's stages, run by the runner's own code (``runner.Stages``; mteb scores the result)."""
        from .pipelines import Pipeline
        from .runner import Stages, read_task_inputs
        from ..tasks.taskdata import Query, TaskData

        task = self.task_of(task_metadata.name)
        asked = [Query(str(i), t) for i, t in zip(queries["id"], queries["text"])]
        data = TaskData(self._corpus, asked, {}, "", "mteb")  # scored by mteb, not here
        context = self.context.with_(corpus=self._corpus)
        pipeline = Pipeline(self.pipeline.stages, top_k)
        inputs = read_task_inputs(pipeline, task, self._corpus.folder, context)  # mteb loaded the data: no folder
        return Stages(pipeline, task, data, context, inputs=inputs).ranked()


def task_named(registry: Registry, name: str) -> TaskSpec:
    """The r2med task of an mteb task name in ``registry``, or a plain spec for a task r2med does
    not know."""
    from ..tasks.specs import TaskSpec

    for entry in registry.entries["task"]:
        if entry.spec.name == name:
            return entry.spec
    return TaskSpec(name=name, short_name=name, description="")
