"""Bootstrap intervals (r2med_tasks.scoring.uncertainty) against a plain resampling loop written here: the
same generator draws (``default_rng(seed).integers(0, n, size=(B, n))``), each resample's mean
summed in Python, the percentile interpolated by hand."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from r2med_tasks.scoring.significance import compare
from r2med_tasks.scoring.uncertainty import (
    average_difference_interval,
    average_interval,
    average_interval_of,
    bootstrap_means,
    difference_interval,
    mean_interval,
    x100,
)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile by linear interpolation between closest ranks (numpy's default method)."""
    ordered = sorted(values)
    h = (len(ordered) - 1) * q / 100
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (h - low) * (ordered[high] - ordered[low])


def loop_means(scores: list[float], rng, resamples: int) -> list[float]:
    """Each resample's mean, one Python loop per resample, over the generator's index draw."""
    n = len(scores)
    draws = rng.integers(0, n, size=(resamples, n)).tolist()
    return [sum(scores[i] for i in row) / n for row in draws]


def loop_interval(scores: list[float], resamples: int = 10000, seed: int = 0) -> tuple[float, float]:
    means = loop_means(scores, np.random.default_rng(seed), resamples)
    return percentile(means, 2.5), percentile(means, 97.5)


def loop_average_interval(groups: list[list[float]], resamples: int = 10000, seed: int = 0) -> tuple[float, float]:
    """Each task's queries drawn within the task, tasks in order from one generator; a resample's
    average is the mean of its per-task means."""
    rng = np.random.default_rng(seed)
    per_task = [loop_means(scores, rng, resamples) for scores in groups]
    averages = [sum(m[b] for m in per_task) / len(groups) for b in range(resamples)]
    return percentile(averages, 2.5), percentile(averages, 97.5)


def scores(seed: int, n: int) -> list[float]:
    """nDCG-like values: many zeros, some ones, the rest in between."""
    rng = random.Random(seed)
    return [rng.choice([0.0, 0.0, 1.0, rng.random()]) for _ in range(n)]


@pytest.mark.parametrize("n", [1, 2, 7, 103])
def test_the_interval_equals_a_plain_resampling_loop(n):
    values = scores(n, n)
    if n == 1:  # one query: resampling has nothing to vary, so there is no interval to show
        assert mean_interval(values) is None
        return
    lo, hi = mean_interval(values)
    expected = loop_interval(values)
    assert (lo, hi) == pytest.approx(expected, abs=1e-12)
    assert lo <= sum(values) / n <= hi


def test_other_seeds_and_resample_counts_follow_the_same_rule():
    values = scores(3, 40)
    for resamples, seed in ((1, 0), (999, 5), (2000, 123)):
        assert mean_interval(values, resamples=resamples, seed=seed) == \
            pytest.approx(loop_interval(values, resamples, seed), abs=1e-12)
    assert mean_interval(values, seed=1) != mean_interval(values, seed=0)
    assert mean_interval(values) == mean_interval(list(values))  # reproducible


def test_drawing_in_blocks_draws_the_same_numbers():
    """A large task is drawn in blocks of rows to bound memory; the means are the same as one draw."""
    values = scores(4, 37)  # an odd size: blocks of rows never split the draw evenly
    whole = bootstrap_means(values, np.random.default_rng(0), resamples=1001)
    for budget in (37, 74, 37 * 10 + 5, 10**9):
        assert np.array_equal(bootstrap_means(values, np.random.default_rng(0), resamples=1001, max_entries=budget),
                              whole)


def test_a_constant_score_has_a_point_interval():
    assert mean_interval([0.25] * 9) == (0.25, 0.25)


def test_the_average_resamples_each_task_within_it():
    groups = [scores(10, 6), scores(11, 9), scores(12, 4)]
    assert average_interval(groups, resamples=3000) == pytest.approx(loop_average_interval(groups, 3000), abs=1e-12)
    assert average_interval(groups) == pytest.approx(loop_average_interval(groups), abs=1e-12)
    # by task name: the order a run listed its tasks in does not matter
    named = {"b": groups[1], "a": groups[0], "c": groups[2]}
    assert average_interval_of(named) == average_interval(groups)
    # one task: the task's own interval
    assert average_interval([groups[0]]) == mean_interval(groups[0])


def test_paired_differences():
    a, b = scores(20, 15), scores(21, 15)
    rng = np.random.default_rng(0)
    draws = rng.integers(0, 15, size=(10000, 15)).tolist()
    diffs = [sum(b[i] for i in row) / 15 - sum(a[i] for i in row) / 15 for row in draws]
    assert difference_interval(a, b) == pytest.approx((percentile(diffs, 2.5), percentile(diffs, 97.5)), abs=1e-12)
    pairs = [(scores(22, 5), scores(23, 5)), (scores(24, 8), scores(25, 8))]
    d = [[y - x for x, y in zip(p, q)] for p, q in pairs]
    assert average_difference_interval(pairs) == pytest.approx(loop_average_interval(d), abs=1e-12)
    with pytest.raises(ValueError, match="same length"):
        difference_interval([0.1, 0.2], [0.1])


def test_compare_reports_the_difference_intervals():
    a = {"t1": dict(zip("abcdef", scores(30, 6))), "t2": dict(zip("abcd", scores(31, 4)))}
    b = {"t1": dict(zip("abcdef", scores(32, 6))), "t2": dict(zip("abcd", scores(33, 4)))}
    out = compare(a, b, trials=100, seed=7)
    assert out["seed"] == 7 and out["resamples"] == 10000
    for task in a:
        x, y = list(a[task].values()), list(b[task].values())
        d = [q - p for p, q in zip(x, y)]
        assert out["tasks"][task]["difference_ci"] == pytest.approx(list(loop_interval(d, seed=7)), abs=1e-12)
    both = [[q - p for p, q in zip(a[t].values(), b[t].values())] for t in a]
    assert out["average"]["difference_ci"] == pytest.approx(list(loop_average_interval(both, seed=7)), abs=1e-12)
    lo, hi = out["average"]["difference_ci"]
    assert lo <= out["average"]["difference"] <= hi


def test_x100_rounds_as_the_board_does():
    assert x100((0.123456, 0.5)) == [12.35, 50.0] and x100(None) is None


def test_refusals():
    for bad in ([], [float("nan")], [float("inf"), 0.1]):
        with pytest.raises(ValueError):
            mean_interval(bad)
    for resamples in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="resamples"):
            mean_interval([0.1, 0.2], resamples=resamples)
    with pytest.raises(ValueError, match="at least one task"):
        average_interval([])

