"""Scores of a run against judgments: exactly what ``mteb.evaluate`` stores for a retrieval task
(same keys, same order, same values bit for bit), so r2med's TaskResults are indistinguishable from
mteb's. Computed here with pytrec_eval and numpy only, because importing mteb and running its
evaluator cost seconds per run; ``tests/test_mteb_adapter.py`` proves it equal to mteb's own.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from operator import itemgetter

from ..errors import PluginError
from .runs import Run, id_problem, shown, unwritable

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


def check_run(run: Run, qrels: dict, doc_ids: set[str], *, component: str) -> None:
    """Reject a plugin's output that would silently corrupt scores: query ids pytrec_eval would
    misread, documents not in the corpus, scores that are not real numbers."""
    qids = list(run)
    if not all(type(qid) is str for qid in qids):
        bad = next(qid for qid in qids if type(qid) is not str)
        raise PluginError(f"{component} returned query id {shown(bad)} ({type(bad).__name__}); query ids are the "
                          "task's, text")
    bad = unwritable(qids)
    if bad is not None:
        raise PluginError(f"{component} returned query id {shown(qids[bad])}, which {id_problem(qids[bad])}")
    for qid, docs in run.items():
        for doc_id, score in docs.items():
            if doc_id not in doc_ids:
                raise PluginError(f"{component} returned unknown document id {shown(doc_id)} for query {qid!r}; "
                                  "results must use the corpus's ids")
            if not isinstance(score, (int, float)) or math.isnan(score):
                raise PluginError(f"{component} returned score {score!r} for query {qid!r}, document "
                                  f"{doc_id!r}; scores must be real numbers (not NaN)")
    missing = [q for q in qrels if q not in run]
    if missing:
        raise PluginError(f"{component} returned no results for {len(missing)} queries (e.g. {missing[0]!r})")


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
    import numpy as np

    per_query = {name: {f"{name}_at_{k}": list(map(itemgetter(f"{measure}_{k}"), all_scores.values()))
                        for k in K_VALUES} for measure, name in _MEASURES}
    means = {name: {key: round(sum(values) / len(all_scores), 5) for key, values in metrics.items()}
             for name, metrics in per_query.items()}
    rows, lengths = _score_rows(run)
    rr = _reciprocal_ranks(run, qrels, rows)
    abstention = _Abstention(_confidences(lengths, len(rows)))
    abstained = {**per_query["ndcg"], **per_query["map"], **per_query["recall"], **per_query["precision"], **rr}
    naucs = {f"nauc_{key}_{fct}": abstention.nauc(fct, np.array(values))
             for key, values in abstained.items() for fct in _CONFIDENCES}
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


class _Abstention:
    """mteb's ``evaluate_abstention`` for one run (nAUC, arXiv 2402.12997). What depends only on the
    confidences, or only on the metric, is computed once."""

    def __init__(self, confidences: dict[str, list[float]]) -> None:
        import numpy as np

        self.rates = np.linspace(0, 1, 11)[:-1]  # mteb's abstention rates 0.0, 0.1, ..., 0.9
        self.groups = {fct: _tie_groups(np.array(values)) for fct, values in confidences.items()}
        self.oracle: dict[bytes, tuple[float, float]] = {}
        self.naucs: dict[tuple[str, bytes], float] = {}

    def nauc(self, fct: str, metric) -> float:
        """mteb's ``nauc(confidences, metric)``: ``np.nan`` when the oracle curve is flat."""
        import numpy as np

        key = metric.tobytes()
        if key not in self.oracle:  # the oracle abstains on the queries with the lowest metric
            curve = self._curve(_tie_groups(metric), metric)
            self.oracle[key] = (_auc(self.rates, curve), curve[0] * (self.rates[-1] - self.rates[0]))
        if (fct, key) not in self.naucs:
            or_auc, flat_auc = self.oracle[key]
            abst_auc = _auc(self.rates, self._curve(self.groups[fct], metric))
            self.naucs[fct, key] = np.nan if or_auc == flat_auc else (abst_auc - flat_auc) / (or_auc - flat_auc)
        return self.naucs[fct, key]

    def _curve(self, groups: tuple, metric):
        """mteb's ``abstention_curve``, each tied group of confidences counting as its mean."""
        import numpy as np

        order, starts, sizes = groups
        n = len(order)
        kept = np.repeat(np.add.reduceat(metric[order], starts) / sizes, sizes)
        curve = np.zeros(len(self.rates))
        for i, rate in enumerate(self.rates):
            curve[i] = kept[min(round(rate * n), n - 1):].mean()
        return curve


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


def _tie_groups(values) -> tuple:
    """The stable ascending order of ``values`` (as mteb sorts them), and its runs of equal values."""
    import numpy as np

    order = np.argsort(values, kind=None if np.lib.NumpyVersion(np.__version__) < "2.0.0" else "stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return order, starts, np.diff(np.r_[starts, len(ordered)])


def _auc(x, y) -> float:
    """sklearn's ``auc`` for increasing ``x``: scipy's trapezoid rule, as a float."""
    import numpy as np

    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0, dtype=np.float64))


def leaderboard_value(score_value: float) -> float:
    """A task's score as the R2MED leaderboard prints it: 5-decimal score, ×100, 2 decimals."""
    return round(round(score_value, 5) * 100, 2)


def leaderboard_average(values: list[float]) -> float:
    """The leaderboard's average: mean of the 2-decimal values, rounded half-up to 2 decimals."""
    mean = sum(Decimal(str(v)) for v in values) / len(values)
    return float(mean.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
