"""How sure a score is: Efron's 95% percentile bootstrap over queries (the queries are a sample, so
a task's mean has a sampling error).

- Every interval starts a fresh ``default_rng(seed)``: the same scores always give the same interval.
- The R2MED average is resampled as it is computed: each task's queries drawn within the task (a
  stratified bootstrap), tasks in the order of their names, so a run's interval and its
  leaderboard row's agree.
- Draws are vectorised, in blocks of rows for a large task; numpy's generator gives the same
  numbers drawn at once or block by block, so the interval does not depend on the block size.
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
    """The means of ``resamples`` draws with replacement of ``len(scores)`` values."""
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
    """The percentile bootstrap interval of the mean of ``scores``; None over fewer than two
    queries, where resampling has nothing to vary."""
    if _values(scores).size < 2:  # refuses bad values first
        return None
    return interval(bootstrap_means(scores, np.random.default_rng(seed), resamples=resamples), level)


def _average_means(groups: Sequence[Sequence[float]], rng: np.random.Generator, resamples: int) -> np.ndarray:
    if not groups:
        raise ValueError("an average needs at least one task")
    total = np.zeros(_check_resamples(resamples))
    for scores in groups:
        total += bootstrap_means(scores, rng, resamples=resamples)
    return total / len(groups)


def average_interval(groups: Sequence[Sequence[float]], *, resamples: int = RESAMPLES, seed: int = SEED,
                     level: float = LEVEL) -> tuple[float, float]:
    """The interval of the plain mean of per-task means, each task's queries resampled within it."""
    return interval(_average_means(groups, np.random.default_rng(seed), resamples), level)


def average_interval_of(per_task: Mapping[str, Sequence[float]], *, resamples: int = RESAMPLES, seed: int = SEED,
                        level: float = LEVEL) -> tuple[float, float] | None:
    """:func:`average_interval` with the tasks drawn in the order of their names, whatever order the
    run listed them in; None when no task has two queries."""
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
    """The paired bootstrap interval of ``mean(b) - mean(a)`` (the same queries drawn for both)."""
    return mean_interval(_paired(a, b), resamples=resamples, seed=seed, level=level)


def average_difference_interval(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], *,
                                resamples: int = RESAMPLES, seed: int = SEED,
                                level: float = LEVEL) -> tuple[float, float]:
    """The paired, stratified bootstrap interval of the difference of two averages (B - A)."""
    return average_interval([_paired(a, b) for a, b in pairs], resamples=resamples, seed=seed, level=level)


def x100(bounds: tuple[float, float] | None) -> list[float] | None:
    """An interval as reported beside the leaderboard's scores: ×100, rounded to 2 decimals."""
    return None if bounds is None else [round(bounds[0] * 100, 2), round(bounds[1] * 100, 2)]
