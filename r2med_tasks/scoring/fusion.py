"""Fusing ranked runs (e.g. a BM25 run and a dense run) into one run. Each member contributes only
its top ``depth`` documents per query. Four methods:

``rrf``
    ``score(d) = sum_m w_m / (rrf_k + rank_m(d))``, ranks from 1 (Cormack, Clarke & Büttcher, SIGIR
    2009): ranks only, so scores on unrelated scales (BM25 vs. cosine) need no calibration.
``zscore``
    Scores standardized per member and query (population std), then summed with the weights: keeps
    how far apart a member's scores are, not only their order.
``minmax``
    ``(s - min) / (max - min)`` per member and query, then summed.
``linear``
    The raw scores summed with the weights, for members whose scores already share a scale.

Conventions:

* A document missing from a member's list gets that member's lowest value in the query, so absence
  is never better than presence.
* If all of a member's scores in a query are equal, ``zscore`` gives them 0 and ``minmax`` 1.0.
* A query present in only some members is fused over those members only.
* Ties are broken by the best rank any member gave the document, then by document id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .runs import DEFAULT_TOP_K, Run

FUSION_METHODS = ("rrf", "zscore", "minmax", "linear")
# The defaults of every way to fuse: RRF with k=60, as Cormack et al. (2009)
DEFAULT_METHOD = "rrf"
DEFAULT_RRF_K = 60
DEFAULT_DEPTH = DEFAULT_TOP_K  # every document of a member's run as r2med-run keeps it


def fuse(runs: Sequence[Run], *, method: str = DEFAULT_METHOD, weights: Sequence[float] | None = None,
         rrf_k: int = DEFAULT_RRF_K, depth: int = DEFAULT_DEPTH, top_k: int = DEFAULT_TOP_K) -> Run:
    """Fuse ``runs`` query by query with ``method``."""
    runs = list(runs)
    if method not in FUSION_METHODS:
        raise ValueError(f"unknown fusion method {method!r}; choose one of {', '.join(FUSION_METHODS)}")
    if len(runs) < 2:
        raise ValueError(f"fusion needs at least 2 runs, got {len(runs)}")
    if weights is None:
        weights = [1.0] * len(runs)
    weights = [float(w) for w in weights]
    if len(weights) != len(runs):
        raise ValueError(f"got {len(weights)} weights for {len(runs)} runs; give one weight per run")
    for i, w in enumerate(weights):
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"weight {i} is {w!r}; weights must be finite and non-negative")
    if not any(weights):
        raise ValueError("every weight is 0, so every fused score would be 0; give at least one run a weight > 0")
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")

    qids: list[str] = []
    seen: set[str] = set()
    for run in runs:
        for qid in run:
            if qid not in seen:
                seen.add(qid)
                qids.append(qid)

    fused: Run = {}
    for qid in qids:
        members = []  # (weight, top-depth list)
        for m, run in enumerate(runs):
            docs = list(run.get(qid, {}).items())[:depth]
            if not docs:
                continue
            if method != "rrf":
                for d, s in docs:
                    if not math.isfinite(float(s)):
                        raise ValueError(f"run {m}, query {qid!r}, document {d!r}: score {s!r} is not finite")
            members.append((weights[m], docs))
        if not members:
            fused[qid] = {}
            continue

        best_rank: dict[str, int] = {}
        for _, docs in members:
            for rank, (d, _) in enumerate(docs, 1):
                if rank < best_rank.get(d, rank + 1):
                    best_rank[d] = rank

        score = dict.fromkeys(best_rank, 0.0)
        for w, docs in members:
            values, missing = _member_values(method, docs, rrf_k)
            for d in score:
                score[d] += w * values.get(d, missing)

        order = sorted(score, key=lambda d: (-score[d], best_rank[d], d))
        fused[qid] = {d: score[d] for d in order[:top_k]}
    return fused


def _member_values(method: str, docs: list[tuple[str, float]], rrf_k: int) -> tuple[dict[str, float], float]:
    """One member's per-document values in one query, and the value of a document it lacks."""
    if method == "rrf":
        return {d: 1.0 / (rrf_k + rank) for rank, (d, _) in enumerate(docs, 1)}, 0.0
    raw = [float(s) for _, s in docs]
    lo, hi = min(raw), max(raw)
    if method == "linear":
        return {d: s for (d, _), s in zip(docs, raw)}, lo
    if method == "minmax":
        if hi == lo:
            return {d: 1.0 for d, _ in docs}, 0.0
        return {d: (s - lo) / (hi - lo) for (d, _), s in zip(docs, raw)}, 0.0
    # zscore; hi == lo, not std == 0, so rounding noise can't blow up
    if hi == lo:
        return {d: 0.0 for d, _ in docs}, 0.0
    n = len(raw)
    mean = math.fsum(raw) / n
    std = math.sqrt(math.fsum((s - mean) ** 2 for s in raw) / n)
    z = {d: (s - mean) / std for (d, _), s in zip(docs, raw)}
    return z, min(z.values())
