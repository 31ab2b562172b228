"""How sure a score is: 95% percentile bootstrap intervals over queries.

A run's nDCG@10 on a task is the mean over the task's queries; the queries are a sample, so the
mean has a sampling error. The interval here is Efron's percentile bootstrap: draw the task's
queries with replacement ``RESAMPLES`` times (as many as it has), take each draw's mean, and report
the 2.5th and 97.5th percentiles of those means (numpy's ``percentile``, linear interpolation).

- **Reproducible**: every interval starts a fresh ``numpy.random.default_rng(seed)`` (seed 0 by
  default), so the same per-query scores always give the same interval, whatever else was computed.
- **The R2MED average** (:func:`average_interval`) is the plain mean of the per-task means, as the
  leaderboard averages tasks (each task counts once, whatever its size). It is resampled as it is
  computed: the queries of each task are drawn within that task, independently of the other tasks
  (a stratified bootstrap), tasks in the order given, from one generator; each draw's average is the
  mean of its per-task means. Runs and leaderboard rows draw their tasks in the order of their
  names (:func:`average_interval_of`), so a run's interval and its row's agree.
- **Paired differences** (:func:`difference_interval`, :func:`average_difference_interval`): the
  same queries are drawn for both systems, so the interval is that of ``mean(B) - mean(A)`` over
  common queries (the per-query differences are resampled).
- **Vectorised**: one ``rng.integers(0, n, size=(B, n))`` draw of indices per task and a mean along
  axis 1, no Python loop over resamples. For 10,000 resamples of a task of n queries the indices
  take 80·n KB (int64), and gathering the scores as much again: 12 MB for R2MED's largest task
  (150 queries). A larger task is drawn in blocks of rows (at most ``_MAX_ENTRIES`` indices, 32 MiB,
  at a time); numpy's generator gives the same numbers drawn at once or row block by row block
  (tests/test_uncertainty.py checks it), so the interval does not depend on the block size.
  R2MED's 876 queries (eight tasks) take about 0.04 s for the eight per-task intervals and as much
  for the average's (``benchmarks/bootstrap_speed.py``, docs/performance.md).

Intervals are returned in the unit of the scores given (0-1 for nDCG@10). Where they are *reported*
(a run's ``--json``, the API's ``TaskOutcome.ndcg_at_10_ci`` and ``RunOutcome.average_ci``, the
leaderboard's rows) they are ×100 and rounded to 2 decimals like the scores beside them
(:func:`x100`), computed on the unrounded per-query scores. ``r2med compare`` keeps its 0-1 scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["LEVEL", "RESAMPLES", "SEED", "average_difference_interval", "average_interval", "average_interval_of",
           "bootstrap_means", "difference_interval", "interval", "mean_interval", "x100"]

RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95
_MAX_ENTRIES = 1 << 22  # indices drawn at once: 32 MiB of int64 (and as much of gathered scores)


def _values(scores: Sequence[float]) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError("a bootstrap needs at least one value")
    if not np.all(np.isfinite(values)):
        raise ValueError("bootstrap values must be finite numbers (no NaN or infinity)")
    return values


def _check_resamples(resamples: int) -> int:
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    return int(resamples)


def bootstrap_means(scores: Sequence[float], rng: np.random.Generator, *, resamples: int = RESAMPLES,
                    max_entries: int = _MAX_ENTRIES) -> np.ndarray:
    """The means of ``resamples`` draws with replacement of ``len(scores)`` values, drawn from
    ``rng`` as one ``rng.integers(0, n, size=(resamples, n))`` (in blocks of rows of at most
    ``max_entries`` indices, which draws the same numbers)."""
    values = _values(scores)
    resamples = _check_resamples(resamples)
    n = values.size
    rows = max(1, min(resamples, max_entries // n))
    means = np.empty(resamples)
    for start in range(0, resamples, rows):
        stop = min(start + rows, resamples)
        means[start:stop] = values[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    return means


def interval(means: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of bootstrap means: their (1 - level)/2 and (1 + level)/2 quantiles."""
    lo, hi = np.percentile(means, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def mean_interval(scores: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED,
                  level: float = LEVEL) -> tuple[float, float] | None:
    """The 95% percentile bootstrap interval of the mean of ``scores`` (one task's per-query nDCG@10);
    None over fewer than two queries, where resampling has nothing to vary (no interval to show)."""
    if _values(scores).size < 2:  # refuses no value and non-finite ones first
        return None
    return interval(bootstrap_means(scores, np.random.default_rng(seed), resamples=resamples), level)


def _average_means(groups: Sequence[Sequence[float]], rng: np.random.Generator, resamples: int) -> np.ndarray:
    if not groups:
        raise ValueError("an average needs at least one task")
    total = np.zeros(_check_resamples(resamples))
    for scores in groups:  # each task's queries drawn within the task, tasks in order, one generator
        total += bootstrap_means(scores, rng, resamples=resamples)
    return total / len(groups)


def average_interval(groups: Sequence[Sequence[float]], *, resamples: int = RESAMPLES, seed: int = SEED,
                     level: float = LEVEL) -> tuple[float, float]:
    """The interval of the plain mean of per-task means (the R2MED average), each task's queries
    resampled within that task (``groups``: each task's per-query scores, in a fixed order)."""
    return interval(_average_means(groups, np.random.default_rng(seed), resamples), level)


def average_interval_of(per_task: Mapping[str, Sequence[float]], *, resamples: int = RESAMPLES, seed: int = SEED,
                        level: float = LEVEL) -> tuple[float, float] | None:
    """:func:`average_interval` of task name -> per-query scores, the tasks drawn in the order of
    their names: a run's interval and its leaderboard row's are the same numbers, whatever order the
    run listed its tasks in. None when no task has two queries (nothing to resample)."""
    if all(len(per_task[t]) < 2 for t in per_task):
        return None
    return average_interval([per_task[t] for t in sorted(per_task)], resamples=resamples, seed=seed, level=level)


def _paired(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    x, y = _values(a), _values(b)
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length, got {x.size} and {y.size}")
    return y - x


def difference_interval(a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED,
                        level: float = LEVEL) -> tuple[float, float] | None:
    """The paired bootstrap interval of ``mean(b) - mean(a)`` (the same queries drawn for both);
    None over fewer than two queries."""
    return mean_interval(_paired(a, b), resamples=resamples, seed=seed, level=level)


def average_difference_interval(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], *,
                                resamples: int = RESAMPLES, seed: int = SEED,
                                level: float = LEVEL) -> tuple[float, float]:
    """The paired, stratified bootstrap interval of the difference of two averages of per-task
    means (B - A): per task, the same queries drawn for A and B, within the task."""
    return average_interval([_paired(a, b) for a, b in pairs], resamples=resamples, seed=seed, level=level)


def x100(bounds: tuple[float, float] | None) -> list[float] | None:
    """An interval as reported beside the leaderboard's scores: ×100, rounded to 2 decimals."""
    return None if bounds is None else [round(bounds[0] * 100, 2), round(bounds[1] * 100, 2)]
