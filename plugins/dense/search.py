"""Exact cosine top-k over chunked document embeddings, never holding all scores at once."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..ranking import top_k_indices


def normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as BEIR's cos_sim does."""
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def cosine_top_k(queries: np.ndarray, chunks: Iterable[tuple[int, np.ndarray]], k: int
                 ) -> list[list[tuple[int, float]]]:
    """Per query, the ``k`` documents of highest cosine similarity as (index, score): score
    descending, ties by lower document index, exactly as one pass over all documents would."""
    q = normalize(queries)
    best = [(np.empty(0, np.int64), np.empty(0, np.float32)) for _ in range(len(q))]
    for offset, docs in chunks:
        scores = q @ normalize(docs).T
        for r, row in enumerate(scores):
            local = top_k_indices(row, k)
            idx = np.concatenate([best[r][0], local + offset])
            score = np.concatenate([best[r][1], row[local]])
            order = np.lexsort((idx, -score))[:k]
            best[r] = (idx[order], score[order])
    return [list(zip(i.tolist(), s.tolist())) for i, s in best]
