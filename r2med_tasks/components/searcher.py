"""A retriever over a task's corpus, for components that search while they work (agents such as
Search-o1 and Search-R1): ``context.searcher(task, "bm25")`` gives one.

Agents keep many queries in flight, each searching when its reasoning asks; searches that arrive
while one is running are answered together by the next call to the retriever, so a dense
retriever encodes them as one batch and BM25 scores them in one pass. The corpus is indexed once,
on the first search.
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
    """``retriever`` (a created retriever component) searching ``corpus`` of ``task``; calls from
    several threads are batched. ``label`` names it in messages and trajectories."""

    retriever: Any
    corpus: Any
    task: Any
    context: Any
    label: str = ""
    searches: int = 0  # queries searched, for a summary
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
                if self._busy:  # another thread is searching: its batch ends, then this one's goes
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
        """One call to the retriever for every text of ``batch``; each search gets its own hits."""
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
        except BaseException as e:  # every waiting search learns of it, not only the one that ran
            for request in batch:
                request.error = e
        finally:
            for request in batch:
                request.done = True
