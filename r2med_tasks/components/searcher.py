"""A retriever over a task's corpus, for agents that search while they work. Agents keep many
queries in flight; searches that arrive while one runs are answered together by the next call, so
a dense retriever encodes them as one batch.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hit:
    """One document a search found: its id, its text and the retriever's score."""

    id: str
    text: str
    score: float


@dataclass
class _Search:
    texts: list[str]
    top_k: int
    hits: list[list[Hit]] | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class Searcher:
    """A created retriever searching ``corpus``; calls from several threads are batched."""

    retriever: Any
    corpus: Any
    task: Any
    context: Any
    label: str = ""
    searches: int = 0
    _pending: list[_Search] = field(default_factory=list)
    _busy: bool = False
    _indexed: bool = False
    _position: dict[str, int] = field(default_factory=dict)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def search(self, texts: Sequence[str], top_k: int) -> list[list[Hit]]:
        """The ``top_k`` best documents for each text, best first."""
        request = _Search([str(t) for t in texts], int(top_k))
        with self._cond:
            self._pending.append(request)
            while not request.done:
                if self._busy:  # another thread's batch ends first
                    self._cond.wait()
                    continue
                batch, self._pending = self._pending, []
                self._busy = True
                self._cond.release()
                try:
                    self._run(batch)
                finally:
                    self._cond.acquire()
                    self._busy = False
                    self._cond.notify_all()
        if request.error is not None:
            raise request.error
        return request.hits or []

    def search_one(self, text: str, top_k: int) -> list[Hit]:
        return self.search([text], top_k)[0]

    def _run(self, batch: list[_Search]) -> None:
        """One call to the retriever for every text of ``batch``."""
        from ..tasks.taskdata import Query

        try:
            if not self._indexed:
                self.retriever.index(self.corpus, task=self.task, context=self.context)
                self._position = {doc_id: i for i, doc_id in enumerate(self.corpus.ids)}
                self._indexed = True
            texts = [t for request in batch for t in request.texts]
            queries = [Query(f"search-{i}", text) for i, text in enumerate(texts)]
            top_k = max(request.top_k for request in batch)
            run = self.retriever.search(queries, task=self.task, top_k=top_k, context=self.context)
            from ..scoring.runs import rank

            ranked = rank(run, top_k)
            corpus_texts = self.corpus.texts
            hits = [[Hit(doc_id, corpus_texts[self._position[doc_id]], float(score))
                     for doc_id, score in ranked.get(q.id, {}).items() if doc_id in self._position]
                    for q in queries]
            self.searches += len(queries)
            start = 0
            for request in batch:
                request.hits = [h[:request.top_k] for h in hits[start:start + len(request.texts)]]
                start += len(request.texts)
        except BaseException as e:  # every waiting search learns of it
            for request in batch:
                request.error = e
        finally:
            for request in batch:
                request.done = True
