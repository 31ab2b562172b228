"""Dense retrieval: cached corpus embeddings, query embeddings, exact cosine top-k.

``DenseRetriever`` works with any ``Model`` adapter (the ``st`` retriever's sentence-transformers
model, or a published configuration in ``published.py``); the adapter turns texts into embeddings,
the retriever caches documents, searches and applies the published evaluator's rule of dropping a
document whose id equals the query id.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from .cache import EmbeddingCache
from .search import cosine_top_k


class Model(Protocol):
    def encode_queries(self, texts: list[str], task) -> np.ndarray: ...

    def encode_documents(self, texts: list[str], task) -> np.ndarray: ...

    def encode_generated(self, texts: list[str], task) -> np.ndarray:
        """Rewriter-generated documents, encoded as the published wrapper encoded them."""

    def document_identity(self, task) -> dict[str, Any]:
        """Everything that determines a document's embedding (keys the cache)."""

    def model_meta(self) -> dict[str, Any]: ...


class DenseRetriever:
    combines_generated = True  # the published rule for dense retrievers (r2med_tasks.combine)

    def __init__(self, model: Model, *, cache: bool, chunk_size: int, drop_identical_ids: bool) -> None:
        self.model, self.use_cache, self.chunk_size = model, cache, chunk_size
        self.drop_identical_ids = drop_identical_ids
        self._ids: list[str] = []
        self._chunks: list[tuple[int, np.ndarray]] = []

    def model_meta(self) -> dict[str, Any]:
        return self.model.model_meta()

    def index(self, corpus, *, task, context) -> None:
        self._ids = corpus.ids
        texts = corpus.texts
        if not self.use_cache:
            self._chunks = [(0, self.model.encode_documents(texts, task))]
            return
        cache = EmbeddingCache({**self.model.document_identity(task), "corpus": corpus.checksum},
                               len(corpus), self.chunk_size, root=context.cache("embeddings"))
        todo = len(cache.missing())
        advance = context.progress(f"encoding {len(corpus):,} documents", todo * self.chunk_size) if todo else None
        cache.fill(lambda start, stop: self.model.encode_documents(texts[start:stop], task),
                   on_chunk=advance or (lambda n: None))
        self._chunks = list(cache.chunks())

    def query_embeddings(self, queries, task) -> np.ndarray:
        """One vector per query; with generated documents, the published rule: the mean of the
        query's embedding and each document's (not re-normalised: cosine scoring normalises)."""
        from r2med_tasks.combine import dense_query

        parts = [dense_query(q) for q in queries]
        heads = [p if isinstance(p, str) else p[0] for p in parts]
        embeddings = self.model.encode_queries(heads, task)
        tails = [(i, doc) for i, p in enumerate(parts) if not isinstance(p, str) for doc in p[1:]]
        if tails:
            generated = self.model.encode_generated([doc for _, doc in tails], task)
            sums, counts = embeddings.astype(np.float32).copy(), np.ones(len(parts), dtype=np.float32)
            for (i, _), vector in zip(tails, generated):
                sums[i] += vector
                counts[i] += 1
            embeddings = sums / counts[:, None]
        return embeddings

    def search(self, queries, *, task, top_k: int, context) -> dict[str, dict[str, float]]:
        embeddings = self.query_embeddings(queries, task)
        k = top_k + 1 if self.drop_identical_ids else top_k  # room for the dropped one, as BEIR does
        hits = cosine_top_k(embeddings, self._chunks, min(k, len(self._ids)))
        out = {}
        for query, row in zip(queries, hits):
            docs = {self._ids[i]: s for i, s in row if not (self.drop_identical_ids and self._ids[i] == query.id)}
            out[query.id] = dict(list(docs.items())[:top_k])
        return out
