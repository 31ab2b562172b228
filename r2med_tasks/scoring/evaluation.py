"""Scores of a run against judgments: exactly what ``mteb.evaluate`` stores for a retrieval task
(same keys, same order, same values bit for bit), so r2med's TaskResults are indistinguishable from
mteb's. Computed here with pytrec_eval and numpy only, because importing mteb and running its
evaluator cost seconds per run; ``tests/test_mteb_adapter.py`` proves it equal to mteb's own.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from operator import itemgetter

from .runs import Run

K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
MAIN_SCORE = "ndcg_at_10"
# How a run is scored, part of every run's identity: as the published evaluation (BEIR's, with
# pytrec_eval) with the full judgments, averaged over every query holding a judgment, all-0 ones too.
SCORING = "full-qrels/all-judged-queries"
# The per-query file's columns: pytrec_eval's measures, then how much of the top 10 was judged.
PYTREC_PER_QUERY = {"ndcg_at_10": "ndcg_cut_10", "recall_at_10": "recall_10", "recall_at_100": "recall_100",
                    "map_at_10": "map_cut_10"}
COVERAGE = ("judged_at_10", "ndcg_at_10_condensed", "only_relevant_judged")
RELEVANT_ONLY = COVERAGE[2]
PER_QUERY = (*PYTREC_PER_QUERY, *COVERAGE)
JUDGED_DEPTH = 10
# The metric families always in [0, 1] (tables show them ×100); mteb's nAUCs can be negative.
SCORE_FAMILIES = re.compile(r"^(ndcg|map|recall|precision|mrr|hit_rate)_at_\d+$|^(mrr|accuracy)$")


def score(run: Run, qrels: dict[str, dict[str, int]]) -> tuple[dict, dict]:
    """mteb's score dict for a retrieval split, and the :data:`PER_QUERY` columns of each scored
    query (the coverage columns never enter the score dict: it stays mteb's)."""
    import pytrec_eval

    run = {qid: dict(zip(docs, map(float, docs.values()))) for qid, docs in run.items()}
    measures = {f"{name}.{','.join(map(str, K_VALUES))}" for name, _ in _MEASURES}
    all_scores = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    scores = _score_dict(run, qrels, all_scores)
    scores["main_score"] = scores[MAIN_SCORE]
    coverage = judgment_coverage(run, qrels, all_scores)
    per_query = {qid: {**{name: m[key] for name, key in PYTREC_PER_QUERY.items()}, **coverage[qid]}
                 for qid, m in all_scores.items()}
    return scores, per_query


def judgment_coverage(run: Run, qrels: dict[str, dict[str, int]], queries) -> dict[str, dict[str, float]]:
    """Per scored query, how far its top 10 was judged:

    ``judged_at_10``
        ir_measures' ``Judged@10``: the share of the top 10 (trec_eval's order: score, then id, both
        descending) judged at any grade, over 10 whatever was retrieved, so a run returning fewer
        documents never looks better judged.
    ``ndcg_at_10_condensed``
        nDCG@10 on the condensed list (Sakai 2007, "Alternatives to Bpref"): each ranking without
        its unjudged documents, scored as the main nDCG@10 is; 0 with no judged document left.
    ``only_relevant_judged``
        1.0 when every judged document is relevant (as in R2MED's judgments): then judged@10 is
        P@10 and the condensed nDCG@10 measures recall, not holes; the leaderboard says so.
    """
    import pytrec_eval

    out: dict[str, dict[str, float]] = {}
    condensed: dict[str, dict[str, float]] = {}
    for qid in queries:
        docs, judged = run.get(qid, {}), qrels.get(qid, {})
        top = sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:JUDGED_DEPTH]
        out[qid] = {"judged_at_10": sum(1 for d, _ in top if d in judged) / JUDGED_DEPTH}
        condensed[qid] = {d: s for d, s in docs.items() if d in judged}
    ndcg = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(condensed)
    for qid, row in out.items():
        row["ndcg_at_10_condensed"] = ndcg.get(qid, {}).get("ndcg_cut_10", 0.0)
        grades = qrels.get(qid, {}).values()
        row[RELEVANT_ONLY] = 1.0 if grades and all(g > 0 for g in grades) else 0.0
    return out


# pytrec_eval's measure and mteb's key for it, in the order mteb's score dict holds them
_MEASURES = (("ndcg_cut", "ndcg"), ("map_cut", "map"), ("recall", "recall"), ("P", "precision"),
             ("success", "hit_rate"))
_CONFIDENCES = ("max", "std", "diff1")  # mteb's per-query confidence functions, in its order


def _score_dict(run: dict[str, dict[str, float]], qrels: dict, all_scores: dict[str, dict[str, float]]) -> dict:
    """mteb's ``make_score_dict`` of ``calculate_retrieval_scores``: means rounded to 5 decimals,
    mean MRR unrounded, then nAUCs."""
    per_query = {name: {f"{name}_at_{k}": list(map(itemgetter(f"{measure}_{k}"), all_scores.values()))
                        for k in K_VALUES} for measure, name in _MEASURES}
    means = {name: {key: round(sum(values) / len(all_scores), 5) for key, values in metrics.items()}
             for name, metrics in per_query.items()}
    rows, lengths = _score_rows(run)
    rr = _reciprocal_ranks(run, qrels, rows)
    abstained = {**per_query["ndcg"], **per_query["map"], **per_query["recall"], **per_query["precision"], **rr}
    naucs = _naucs(_confidences(lengths, len(rows)), abstained)
    return {**means["ndcg"], **means["map"], **means["recall"], "accuracy": means["recall"]["recall_at_1"],
            **means["precision"], **{key: sum(values) / len(values) for key, values in rr.items()}, **naucs,
            **means["hit_rate"]}


def _score_rows(run: dict[str, dict[str, float]]) -> tuple[list, dict[int, tuple[list[int], object]]]:
    """Each query's scores as a numpy row, and the rows grouped by length as 2-D arrays."""
    import numpy as np

    positions: dict[int, list[int]] = {}
    for i, docs in enumerate(run.values()):
        positions.setdefault(len(docs), []).append(i)
    queries = list(run.values())
    lengths = {n: (where, np.array([list(queries[i].values()) for i in where], dtype=np.float64))
               for n, where in positions.items()}
    rows: list = [None] * len(queries)
    for where, array in lengths.values():
        for i, row in zip(where, array):
            rows[i] = row
    return rows, lengths


def _reciprocal_ranks(run: dict[str, dict[str, float]], qrels: dict, rows: list) -> dict[str, list[float]]:
    """mteb's ``mrr``: 1 / rank of the first relevant document within the top k, ranking by score,
    then document id, both descending. The rank is counted, not sorted for."""
    import numpy as np

    out: dict[str, list[float]] = {f"mrr_at_{k}": [] for k in K_VALUES}
    for row, (qid, docs) in zip(rows, run.items()):
        relevant = [(docs[d], d) for d, grade in qrels[qid].items() if grade > 0 and d in docs]
        rank = None
        if relevant:
            best_score, best_id = max(relevant)
            rank = int(np.count_nonzero(row > best_score))
            if np.count_nonzero(row == best_score) > 1:
                rank += sum(1 for d, s in docs.items() if s == best_score and d > best_id)
        for k in K_VALUES:
            out[f"mrr_at_{k}"].append(1.0 / (rank + 1) if rank is not None and rank < k else 0.0)
    return out


def _naucs(confidences: dict[str, list[float]], metrics: dict[str, list[float]]) -> dict[str, float]:
    """mteb's ``evaluate_abstention`` (nAUC, arXiv 2402.12997): ``nauc_{metric}_{fct}`` for every
    metric and confidence function, in that order. mteb computes each curve on its own; here the
    curves of all metrics are computed together, with the same numpy operation on the same numbers
    for each value (each group's sum, each kept suffix's mean), so every float is mteb's bit for bit
    (``tests/test_mteb_adapter.py`` compares on many inputs), in a fraction of the time."""
    import numpy as np

    table = np.array(list(metrics.values()), dtype=np.float64)  # one row per metric, one column per query
    rates = np.linspace(0, 1, 11)[:-1]  # mteb's abstention rates 0.0, 0.1, ..., 0.9
    n = table.shape[1]
    cuts = [min(round(rate * n), n - 1) for rate in rates]  # mteb's number of queries abstained on, per rate
    by_metric = np.take_along_axis(table, _ascending(table), axis=1)  # the oracle abstains on the lowest first
    oracle = _curves(by_metric, cuts, by_metric)
    or_auc, flat_auc = _aucs(rates, oracle), oracle[:, 0] * (rates[-1] - rates[0])
    abst_auc = {}
    for fct, values in confidences.items():
        values = np.array(values)
        order = _ascending(values)
        abst_auc[fct] = _aucs(rates, _curves(table[:, order], cuts, values[order]))
    out: dict[str, float] = {}
    for row, key in enumerate(metrics):
        for fct in confidences:
            a, o, f = abst_auc[fct][row], or_auc[row], flat_auc[row]
            out[f"nauc_{key}_{fct}"] = np.nan if o == f else (a - f) / (o - f)
    return out


def _curves(kept, cuts: list[int], confidences):
    """mteb's ``abstention_curve`` of each row of ``kept`` (metrics ordered by ascending
    confidence; ``confidences``: each row's confidences in that order, one vector for all rows or
    one row each): each tied group of confidences counts as its mean, then each rate's curve point
    is the mean of what the rate keeps."""
    import numpy as np

    rows, n = kept.shape
    new = np.ones((rows, n), dtype=bool)
    new[:, 1:] = confidences[..., 1:] != confidences[..., :-1]
    starts = np.flatnonzero(new)  # each group's first position, in the flattened table: no group spans two rows
    sizes = np.diff(np.r_[starts, rows * n])
    grouped = np.repeat(np.add.reduceat(kept.ravel(), starts) / sizes, sizes).reshape(rows, n)
    return np.stack([grouped[:, cut:].mean(axis=1) for cut in cuts], axis=1)


def _ascending(values):
    """The order mteb sorts confidences in, along the last axis: stable from numpy 2 on (its
    default then); before, numpy's default, as mteb calls it."""
    import numpy as np

    return np.argsort(values, axis=-1, kind=None if np.lib.NumpyVersion(np.__version__) < "2.0.0" else "stable")


def _aucs(x, curves) -> list[float]:
    """sklearn's ``auc`` of each row of ``curves`` over increasing ``x``: the trapezoid rule, floats."""
    import numpy as np

    return np.add.reduce((x[1:] - x[:-1]) * (curves[:, 1:] + curves[:, :-1]) / 2.0, axis=1).tolist()


def _confidences(lengths: dict[int, tuple[list[int], object]], n_queries: int) -> dict[str, list[float]]:
    """mteb's ``confidence_scores`` of each query's scores, computed a group of equal-length rows at
    once: numpy reduces each row as it reduces that row alone, so the values are the same (a zero's
    sign aside, which orders queries the same)."""
    import numpy as np

    out = {fct: [0.0] * n_queries for fct in _CONFIDENCES}
    for n, (where, array) in lengths.items():
        if not n:
            continue
        top = array.max(axis=1)
        second = np.partition(array, n - 2, axis=1)[:, n - 2] if n > 1 else top
        values = {"max": top, "std": np.std(array, axis=1), "diff1": top - second}
        for fct, column in values.items():
            for i, value in zip(where, column.tolist()):
                out[fct][i] = value
    return out


def leaderboard_value(score_value: float) -> float:
    """A task's score as the R2MED leaderboard prints it: 5-decimal score, ×100, 2 decimals."""
    return round(round(score_value, 5) * 100, 2)


def leaderboard_average(values: list[float]) -> float:
    """The leaderboard's average: mean of the 2-decimal values, rounded half-up to 2 decimals."""
    mean = sum(Decimal(str(v)) for v in values) / len(values)
    return float(mean.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
