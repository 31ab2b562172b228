"""Top-k selection shared by the built-in retrievers and rerankers: the order of the published
runs' stable ``sorted(..., reverse=True)`` (ties by position), found without sorting every document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best entries of a 1-d score array, best first. numpy loads here, so
    listing plugins stays light."""
    import numpy as np

    n = len(scores)
    if k >= n:
        return np.argsort(-scores, kind="stable")
    kth = np.partition(scores, n - k)[n - k]  # the k-th largest score
    above = np.flatnonzero(scores > kth)
    above = above[np.argsort(-scores[above], kind="stable")]
    ties = np.flatnonzero(scores == kth)[: k - len(above)]
    return np.concatenate([above, ties])


def rank_top_k(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """(index, score) of the ``k`` best entries of a 1-d score array."""
    order = top_k_indices(scores, k)
    return list(zip(order.tolist(), scores[order].tolist()))
