"""The two BM25 retrievers: the published variant (``bm25``) and rank-bm25's Okapi (``bm25-okapi``)."""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterator
from contextlib import suppress

from r2med_tasks.plugin import atomic

from .analyzer import ANALYZER_VERSION, analyze, analyze_many
from .encode import encode_corpus
from .index import BM25Index, EarlierFormat, release_memory

# From this many documents (R2MED's corpora hold 10k-180k), a full garbage collection and handing
# freed heap back before indexing lower the peak memory; below it they would only cost time.
LARGE_CORPUS = 20_000


class BM25Retriever:
    def __init__(self, options) -> None:  # BM25Options
        self.k1, self.b = options.k1, options.b
        self.query_weighting, self.cache = options.query_weighting, options.cache
        self._index: BM25Index | None = None
        self._ids: list[str] = []

    def model_meta(self) -> dict:
        return {"name": "r2med/bm25", "revision": ANALYZER_VERSION, "display_name": "BM25", "framework": ["NumPy"],
                "open_weights": True, "use_instructions": False, "reference": "https://r2med.github.io/",
                "model_type": ["sparse"]}

    def index(self, corpus, *, task, context) -> None:
        folder = context.cache("bm25", f"{corpus.checksum[:20]}-{ANALYZER_VERSION}-k1_{self.k1}-b_{self.b}")
        self._index, self._ids = None, corpus.ids  # the previous index goes before this one comes
        if self.cache and folder.exists():
            try:
                self._index = BM25Index.load(folder, num_docs=len(corpus.ids))
                return
            except FileNotFoundError:  # an interrupted save, or postings a later save replaced
                pass
            except EarlierFormat:
                context.log(f"note: {task.name}: the BM25 index cache was written by an earlier r2med; rebuilding it")
            except Exception as e:  # unreadable (truncated, garbage, other format): rebuilt, never trusted
                context.log(f"warning: {task.name}: BM25 index cache {folder} is unreadable "
                            f"({type(e).__name__}: {str(e)[:120]}); rebuilding it")
        large = len(corpus.ids) >= LARGE_CORPUS
        if large:  # what earlier tasks left in reference cycles, before the biggest allocations
            gc.collect()
            release_memory()
        encoded = list(encode_corpus(corpus.texts))  # the exact analyzer's terms, as ids
        if large:
            release_memory()
        self._index = BM25Index.from_encoded(encoded, k1=self.k1, b=self.b)  # frees the ids once counted
        if self.cache:
            self._index.save(folder)

    def search(self, queries, *, task, top_k: int, context) -> dict[str, dict[str, float]]:
        texts = [q.combined("bm25") for q in queries]
        # one query (a search agent's, searching as it reasons): analysed, never stored; its file
        # would cost more than its analysis, and a file per search would pile up in the cache
        terms = stored_terms(texts, context) if self.cache and len(texts) > 1 else map(analyze, texts)
        # terms is lazy: each query is analysed as the search reads it, overlapping the scoring of the last ones
        hits = self._index.search(terms, top_k=top_k, query_weighting=self.query_weighting)
        return {q.id: {self._ids[i]: s for i, s in row} for q, row in zip(queries, hits)}


def stored_terms(texts: list[str], context) -> Iterator[list[str]]:
    """Each query text's terms, cached: a rerun on the same queries (another k1, b or reranker) reads
    them instead of analysing every query again in Python. Analysed lazily, stored once all are."""
    path = context.cache("bm25", "queries", f"{query_terms_key(texts)}.json")
    stored = _read_terms(path, len(texts))
    if stored is not None:
        yield from stored
        return
    terms = []
    for text in texts:
        terms.append(analyze(text))
        yield terms[-1]
    with suppress(OSError):  # a read-only cache (shared, say) still serves its indexes
        atomic.write_json(path, terms, indent=None)


QUERY_TERMS_FORMAT = "r2med-bm25-query-terms/2"  # 2: texts as a JSON list (1 joined them with NUL)


def query_terms_key(texts: list[str]) -> str:
    """The stored terms' file name for ``texts``: sha256 of a JSON list, so no character inside a
    text can make two lists of texts one."""
    blob = json.dumps([QUERY_TERMS_FORMAT, ANALYZER_VERSION, list(texts)], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("ascii")).hexdigest()[:32]


def _read_terms(path, n: int) -> list[list[str]] | None:
    try:
        terms = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(terms, list) and len(terms) == n and all(
            isinstance(t, list) and all(isinstance(w, str) for w in t) for t in terms):
        return terms
    return None


class OkapiRetriever:
    """rank-bm25's ``BM25Okapi`` (the package the user listed); scoring is a Python loop per query."""

    def __init__(self, options) -> None:  # OkapiOptions
        self.k1, self.b, self.epsilon = options.k1, options.b, options.epsilon

    def model_meta(self) -> dict:
        return {"name": "r2med/bm25-okapi", "revision": f"rank-bm25-{ANALYZER_VERSION}", "framework": ["NumPy"],
                "model_type": ["sparse"]}

    def index(self, corpus, *, task, context) -> None:
        from rank_bm25 import BM25Okapi

        self._ids = corpus.ids
        self._bm25 = BM25Okapi(analyze_many(corpus.texts), k1=self.k1, b=self.b, epsilon=self.epsilon)

    def search(self, queries, *, task, top_k: int, context) -> dict[str, dict[str, float]]:
        import numpy as np

        out = {}
        for q, tokens in zip(queries, analyze_many(q.combined("bm25") for q in queries)):
            scores = self._bm25.get_scores(tokens)
            best = np.argsort(-scores, kind="stable")[:top_k]
            out[q.id] = {self._ids[i]: float(scores[i]) for i in best}
        return out
