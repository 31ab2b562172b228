"""Comparing two systems query by query: paired significance tests and Holm's correction.

Each system is scored per query (e.g. nDCG@10), and the two systems are compared on the queries
they share. Two paired tests are available:

``randomization`` (the default)
    The paired sign-flip randomization test on the mean difference: no normality assumption, which
    IR metrics (bounded, skewed, many zeros) break; recommended by Smucker, Allan & Carterette (CIKM
    2007). ``p = (1 + #{|mean(flipped d)| >= |mean(d)|}) / (1 + trials)``, never 0.
``t``
    The paired Student t-test (``scipy.stats.ttest_rel``), for comparison with published numbers.

Across tasks, p-values are adjusted with Holm–Bonferroni: it controls the family-wise error rate
without assuming the tests are independent, and is uniformly more powerful than Bonferroni.

On the R2MED average (the plain mean of per-task means, so a query of task t weighs 1/(T·n_t)),
flipping the signs of the weighted differences ``d_q / n_t`` gives the exact randomization
distribution of the difference of averages (a stratified paired randomization test).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ALPHA", "TESTS", "Comparison", "average_randomization", "compare", "holm", "paired_randomization",
           "paired_t", "ties_with_best"]

TESTS = ("randomization", "t")
ALPHA = 0.05  # a row is tied with the best when its Holm-adjusted p-value is at least this
_BLOCK_ENTRIES = 1 << 20  # random signs drawn at once (int8: about 1 MiB)


def _differences(a: Sequence[float], b: Sequence[float], *, min_n: int) -> np.ndarray:
    """``b - a`` as a float array, after checking lengths and finiteness."""
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length, got {x.size} and {y.size}")
    if x.size < min_n:
        raise ValueError(f"need at least {min_n} paired value(s), got {x.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("paired samples must be finite numbers (no NaN or infinity)")
    return y - x


def paired_randomization(
    a: Sequence[float], b: Sequence[float], *, trials: int = 10000, seed: int = 0
) -> float:
    """Two-sided p-value of the paired sign-flip randomization test on the mean difference. A
    relative tolerance of 1e-9 counts flips equal to the observed statistic up to rounding as "at
    least as extreme"."""
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise ValueError(f"trials must be a positive integer, got {trials!r}")
    d = _differences(a, b, min_n=1)
    if not np.any(d):
        return 1.0
    # Flipping the signs of d has the same distribution as flipping the signs of |d|, so the
    # observed statistic is the one assignment that gives each |d_i| the sign of d_i.
    mag = np.abs(d)
    observed = abs(float(np.sign(d) @ mag))
    threshold = observed - 1e-9 * float(mag.sum())
    n = d.size
    rng = np.random.default_rng(seed)
    block = max(1, min(int(trials), _BLOCK_ENTRIES // n))
    hits = 0
    remaining = int(trials)
    while remaining:
        rows = min(block, remaining)
        signs = rng.integers(0, 2, size=(rows, n), dtype=np.int8) * 2 - 1
        hits += int(np.count_nonzero(np.abs(signs @ mag) >= threshold))
        remaining -= rows
    return (1 + hits) / (1 + int(trials))


def paired_t(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test, never NaN: where all differences are equal the
    statistic is undefined, so identical systems give 1.0 and a constant non-zero difference 0.0,
    its limit."""
    from scipy import stats

    d = _differences(a, b, min_n=2)
    if float(np.ptp(d)) <= 1e-12 * max(1.0, float(np.max(np.abs(d)))):
        return 1.0 if float(np.max(np.abs(d))) <= 1e-12 else 0.0
    p = float(stats.ttest_rel(np.asarray(b, dtype=float), np.asarray(a, dtype=float)).pvalue)
    return 1.0 if math.isnan(p) else min(1.0, max(0.0, p))


def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values, in the input's order: with the m p-values sorted
    ascending, ``adj_(i) = max_{j <= i} min(1, (m - j + 1) * p_(j))``."""
    items = []
    for key, p in p_values.items():
        p = float(p)
        if math.isnan(p) or not 0.0 <= p <= 1.0:
            raise ValueError(f"p-value for {key!r} must be in [0, 1], got {p!r}")
        items.append((key, p))
    m = len(items)
    adjusted: dict[Any, float] = {}
    running = 0.0
    for rank, (key, p) in enumerate(sorted(items, key=lambda kv: kv[1])):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[key] = running
    return {key: adjusted[key] for key, _ in items}


def average_randomization(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], *, trials: int = 10000, seed: int = 0
) -> float:
    """Two-sided p-value of the sign-flip test on the difference of two averages of per-task means,
    the averages the leaderboard ranks by: :func:`paired_randomization` of the differences weighted
    by 1/n_t (the constant 1/T does not change which flips are as extreme)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"need the same tasks, at least one, for both systems (got {len(a)} and {len(b)})")
    weighted = [_differences(x, y, min_n=1) / len(x) for x, y in zip(a, b)]
    d = np.concatenate(weighted)
    return paired_randomization(np.zeros_like(d), d, trials=trials, seed=seed)


def ties_with_best(
    per_query: Mapping[Any, Sequence[Mapping[str, float]]],
    best: Any,
    *,
    alpha: float = ALPHA,
    trials: int = 10000,
    seed: int = 0,
) -> dict[Any, dict[str, Any]]:
    """Which systems the test cannot tell from ``best`` on the average of per-task means: compared on
    the queries both scored, Holm-adjusted, ``tied`` when the adjusted p-value is at least ``alpha``
    (None without a common query in some task). Every comparison starts ``default_rng(seed)`` afresh.
    """
    reference = per_query[best]
    raw: dict[Any, float] = {}
    out: dict[Any, dict[str, Any]] = {best: {"p_value": None, "p_holm": None, "tied": True}}
    for system, tasks in per_query.items():
        if system == best:
            continue
        if len(tasks) != len(reference):
            raise ValueError(f"system {system!r} has {len(tasks)} tasks, the best {len(reference)}")
        a, b = [], []
        for ref, scores in zip(reference, tasks):
            common = [q for q in ref if q in scores]
            a.append([float(ref[q]) for q in common])
            b.append([float(scores[q]) for q in common])
        if not all(a):
            out[system] = {"p_value": None, "p_holm": None, "tied": None}
            continue
        raw[system] = average_randomization(a, b, trials=trials, seed=seed)
    for system, p_adj in holm(raw).items():
        out[system] = {"p_value": raw[system], "p_holm": p_adj, "tied": p_adj >= alpha}
    return {system: out[system] for system in per_query}


def compare(
    per_query_a: Mapping[str, Mapping[str, float]],
    per_query_b: Mapping[str, Mapping[str, float]],
    *,
    test: str = "randomization",
    trials: int = 10000,
    seed: int = 0,
    average_over: Collection[str] | None = None,
    resamples: int = 10000,
) -> dict[str, Any]:
    """Compare system B against A on their common queries, per task (Holm-adjusted) and on the
    average over ``average_over``. The average deliberately carries **no p-value**: a test over a
    handful of task means has little power, and pooling queries would weight tasks by their size.
    """
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose one of: {', '.join(TESTS)}")
    common = sorted(task for task in per_query_a if task in per_query_b)  # averages independent of input order
    if not common:
        raise ValueError(
            f"no task in common between the two systems (A has {sorted(map(str, per_query_a))}, "
            f"B has {sorted(map(str, per_query_b))})"
        )
    from .uncertainty import average_difference_interval, difference_interval

    tasks: dict[str, dict[str, Any]] = {}
    paired: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for task in common:
        qa, qb = per_query_a[task], per_query_b[task]
        qids = [q for q in qa if q in qb]
        if not qids:
            raise ValueError(f"task {task!r}: no query in common between the two systems")
        a = np.array([float(qa[q]) for q in qids])
        b = np.array([float(qb[q]) for q in qids])
        for name, values in (("A", a), ("B", b)):
            bad = ~np.isfinite(values)
            if bad.any():
                qid = qids[int(np.argmax(bad))]
                raise ValueError(f"task {task!r}, query {qid!r}: score of system {name} is not finite")
        if test == "randomization":
            p = paired_randomization(a, b, trials=trials, seed=seed)
        else:
            if len(qids) < 2:
                raise ValueError(f"task {task!r}: the t-test needs at least 2 common queries, got 1")
            p = paired_t(a, b)
        mean_a, mean_b = float(a.mean()), float(b.mean())
        tasks[task] = {
            "n_queries": len(qids),
            "dropped_a": sum(1 for q in qa if q not in qb),
            "dropped_b": sum(1 for q in qb if q not in qa),
            "mean_a": mean_a,
            "mean_b": mean_b,
            "difference": mean_b - mean_a,
            "p_value": float(p),
            "difference_ci": _listed(difference_interval(a, b, resamples=resamples, seed=seed)),
        }
        paired[task] = (a, b)
    for task, p_adj in holm({task: r["p_value"] for task, r in tasks.items()}).items():
        tasks[task]["p_holm"] = float(p_adj)
    counted = [r for task, r in tasks.items() if average_over is None or task in average_over]
    average = None
    if counted:
        avg_a = sum(r["mean_a"] for r in counted) / len(counted)
        avg_b = sum(r["mean_b"] for r in counted) / len(counted)
        pairs = [paired[task] for task in tasks if average_over is None or task in average_over]
        average = {"n_tasks": len(counted), "mean_a": avg_a, "mean_b": avg_b, "difference": avg_b - avg_a,
                   "difference_ci": list(average_difference_interval(pairs, resamples=resamples, seed=seed))}
    result: dict[str, Any] = {"test": test}
    if test == "randomization":
        result.update(trials=int(trials))
    result.update(seed=int(seed), resamples=int(resamples))  # the seed serves the bootstrap too
    result.update(
        tasks=tasks,
        average=average,
        tasks_outside_average=[task for task in tasks if average_over is not None and task not in average_over],
        tasks_only_in_a=[task for task in per_query_a if task not in per_query_b],
        tasks_only_in_b=[task for task in per_query_b if task not in per_query_a],
    )
    return result


@dataclass
class Comparison:
    """Two runs compared, B against A: :func:`compare`'s result, and per task whose data identities
    differ, what differs (compared only when allowed)."""

    a: Path
    b: Path
    test: str
    seed: int
    resamples: int
    tasks: dict[str, dict[str, Any]]
    average: dict[str, Any] | None
    tasks_outside_average: list[str]
    tasks_only_in_a: list[str]
    tasks_only_in_b: list[str]
    trials: int | None = None
    data_differences: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """What ``r2med compare --json`` prints: :func:`compare`'s keys in its order."""
        out = {"test": self.test, **({"trials": self.trials} if self.trials is not None else {})}
        out.update({f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("a", "b", "test", "trials")})
        return out


def _listed(bounds: tuple[float, float] | None) -> list[float] | None:
    """An interval as JSON holds it; None (no interval: one query) as null."""
    return None if bounds is None else list(bounds)
