"""The two BM25 retrievers: the published variant (``bm25``) and rank-bm25's Okapi (``bm25-okapi``)."""

from __future__ import annotations

from .analyzer import ANALYZER_VERSION, analyze, analyze_many
from .index import BM25Index


class BM25Retriever:
    combines_generated = True  # the published rule for BM25 (r2med_tasks.combine)

    def __init__(self, k1: float, b: float, query_weighting: str, cache: bool) -> None:
        from r2med_tasks.errors import UserError

        if query_weighting not in ("bm25", "plain"):
            raise UserError(f"-o bm25.query_weighting={query_weighting}: use bm25 (as published) or plain")
        self.k1, self.b, self.query_weighting, self.cache = k1, b, query_weighting, cache
        self._index: BM25Index | None = None
        self._ids: list[str] = []

    def model_meta(self) -> dict:
        return {"name": "r2med/bm25", "revision": ANALYZER_VERSION, "display_name": "BM25", "framework": ["NumPy"],
                "open_weights": True, "use_instructions": False, "reference": "https://r2med.github.io/"}

    def index(self, corpus, *, task, context) -> None:
        folder = context.cache("bm25", f"{corpus.checksum[:20]}-{ANALYZER_VERSION}-k1_{self.k1}-b_{self.b}")
        self._ids = corpus.ids
        if self.cache and folder.exists():
            try:
                self._index = BM25Index.load(folder)
                return
            except (OSError, ValueError, KeyError):  # an unreadable cache is rebuilt, not trusted
                pass
        self._index = BM25Index.build((analyze(t) for t in corpus.texts), k1=self.k1, b=self.b)  # streamed: no token lists held
        if self.cache:
            self._index.save(folder)

    def search(self, queries, *, task, top_k: int, context) -> dict[str, dict[str, float]]:
        from r2med_tasks.combine import bm25_query

        hits = self._index.search(analyze_many(bm25_query(q) for q in queries), top_k=top_k,
                                  query_weighting=self.query_weighting)
        return {q.id: {self._ids[i]: s for i, s in row} for q, row in zip(queries, hits)}


class OkapiRetriever:
    """rank-bm25's ``BM25Okapi`` (the package the user listed); scoring is a Python loop per query."""

    combines_generated = True

    def __init__(self, k1: float, b: float, epsilon: float) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon

    def model_meta(self) -> dict:
        return {"name": "r2med/bm25-okapi", "revision": f"rank-bm25-{ANALYZER_VERSION}", "framework": ["NumPy"]}

    def index(self, corpus, *, task, context) -> None:
        from rank_bm25 import BM25Okapi

        self._ids = corpus.ids
        self._bm25 = BM25Okapi(analyze_many(corpus.texts), k1=self.k1, b=self.b, epsilon=self.epsilon)

    def search(self, queries, *, task, top_k: int, context) -> dict[str, dict[str, float]]:
        import numpy as np

        from r2med_tasks.combine import bm25_query

        out = {}
        for q, tokens in zip(queries, analyze_many(bm25_query(q) for q in queries)):
            scores = self._bm25.get_scores(tokens)
            best = np.argsort(-scores, kind="stable")[:top_k]
            out[q.id] = {self._ids[i]: float(scores[i]) for i in best}
        return out
