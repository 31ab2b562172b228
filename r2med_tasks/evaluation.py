"""Scores of a run against judgments, computed by mteb's retrieval metrics (pytrec_eval inside).

The score dict is exactly what ``mteb.evaluate`` stores for a retrieval task, so a TaskResult
written here is indistinguishable from one mteb writes. Per-query values come from the same
pytrec_eval call.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

from .errors import PluginError
from .runs import Run

K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
MAIN_SCORE = "ndcg_at_10"
# How a run is scored, part of every run's identity (results scored another way are recomputed): as
# the published evaluation (BEIR's ``EvaluateRetrieval.evaluate``, pytrec_eval inside) with the full
# judgments, absent documents included, averaged over every query holding a judgment, all-0 ones too.
SCORING = "full-qrels/all-judged-queries"
PER_QUERY = {"ndcg_at_10": "ndcg_cut_10", "recall_at_10": "recall_10", "recall_at_100": "recall_100",
             "map_at_10": "map_cut_10"}


def check_run(run: Run, qrels: dict, doc_ids: set[str], *, component: str) -> None:
    """Reject a plugin's output that would silently corrupt scores."""
    for qid, docs in run.items():
        for doc_id, score in docs.items():
            if doc_id not in doc_ids:
                raise PluginError(f"{component} returned unknown document id {doc_id!r} for query {qid!r}; "
                                  "results must use the corpus's ids")
            if not isinstance(score, (int, float)) or math.isnan(score):
                raise PluginError(f"{component} returned score {score!r} for query {qid!r}, document "
                                  f"{doc_id!r}; scores must be real numbers (not NaN)")
    missing = [q for q in qrels if q not in run]
    if missing:
        raise PluginError(f"{component} returned no results for {len(missing)} queries (e.g. {missing[0]!r})")


def score(run: Run, qrels: dict[str, dict[str, int]]) -> tuple[dict, dict]:
    """mteb's score dict for a retrieval split, and per-query metrics."""
    from .mteb_adapter import retrieval_scores

    run = {qid: {d: float(s) for d, s in docs.items()} for qid, docs in run.items()}
    scores, all_scores = retrieval_scores(run, qrels, K_VALUES)
    scores["main_score"] = scores[MAIN_SCORE]
    per_query = {qid: {name: m[key] for name, key in PER_QUERY.items()} for qid, m in all_scores.items()}
    return scores, per_query


def leaderboard_value(score_value: float) -> float:
    """A task's score as the R2MED leaderboard prints it: 5-decimal score, ×100, 2 decimals."""
    return round(round(score_value, 5) * 100, 2)


def leaderboard_average(values: list[float]) -> float:
    """The leaderboard's average: mean of the 2-decimal values, rounded half-up to 2 decimals."""
    mean = sum(Decimal(str(v)) for v in values) / len(values)
    return float(mean.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
