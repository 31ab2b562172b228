"""Tests for r2med_tasks.scoring.significance, against independent computations written here."""

from __future__ import annotations

import itertools
import json
import math
import statistics

import pytest
from scipy import stats

from r2med_tasks.scoring import significance
from r2med_tasks.scoring.significance import compare, holm, paired_randomization, paired_t


def exact_sign_flip_p(a, b):
    """Exact two-sided p-value: the share of all 2^n sign assignments whose |sum| >= the observed one.

    Differences in the tests below are dyadic rationals (exact in binary floating point), so plain
    Python sums are exact and ties are counted exactly. The observed assignment is one of the 2^n.
    """
    d = [y - x for x, y in zip(a, b)]
    observed = abs(sum(d))
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        if abs(sum(s * abs(x) for s, x in zip(signs, d))) >= observed:
            hits += 1
    return hits / 2 ** len(d)


# Differences (b - a) with n <= 10, all multiples of 1/8: ties between flips are common.
CASES = [
    ([0.0] * 6, [0.5, 0.25, 0.125, -0.125, 0.375, 0.25]),          # mostly positive
    ([0.5] * 8, [0.5, 0.75, 0.25, 1.0, 0.625, 0.5, 0.375, 0.875]),  # mixed, with a zero difference
    ([0.0] * 10, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0, 0.0]),  # heavy ties
    ([0.25, 0.5, 0.75, 0.125, 0.0], [0.5, 0.25, 0.75, 0.375, 0.125]),  # small n, large p
]


def _tolerance(p_exact: float, trials: int) -> float:
    # The estimate is (1 + H) / (1 + T) with H ~ Binomial(T, p): its bias is at most 1/(1 + T) and its
    # standard error sqrt(p (1 - p) / T). Four standard errors (two-sided miss chance about 6e-5 per
    # case, and the seed is fixed, so the test is deterministic) plus the bias bound.
    return 4 * math.sqrt(p_exact * (1 - p_exact) / trials) + 1 / (1 + trials)


@pytest.mark.parametrize("a,b", CASES)
def test_randomization_converges_to_exact_enumeration(a, b):
    trials = 100_000
    exact = exact_sign_flip_p(a, b)
    p = paired_randomization(a, b, trials=trials, seed=1)
    assert abs(p - exact) <= _tolerance(exact, trials), (p, exact)


def test_randomization_with_tiny_blocks_matches_exact(monkeypatch):
    # Force many blocks (2 rows each) and an odd trial count, so the last block is partial.
    monkeypatch.setattr(significance, "_BLOCK_ENTRIES", 16)
    a, b = CASES[1]
    trials = 4001
    exact = exact_sign_flip_p(a, b)
    p = paired_randomization(a, b, trials=trials, seed=3)
    assert abs(p - exact) <= _tolerance(exact, trials)


def test_randomization_counts_observed_and_is_deterministic():
    a = [0.0] * 20
    b = [1.0] * 20  # exact p = 2 / 2^20: no trial in 1000 should reach it, so p = 1 / 1001
    assert paired_randomization(a, b, trials=1000, seed=0) == pytest.approx(1 / 1001)
    x, y = CASES[0]
    assert paired_randomization(x, y, trials=500, seed=7) == paired_randomization(x, y, trials=500, seed=7)
    # p is a count over trials + 1 and symmetric in the two systems (two-sided).
    p = paired_randomization(x, y, trials=500, seed=7)
    assert round(p * 501) == pytest.approx(p * 501)
    assert paired_randomization(y, x, trials=500, seed=7) == p


def test_identical_systems_give_one():
    a = [0.1, 0.7, 0.3, 0.9]
    assert paired_randomization(a, list(a), trials=100) == 1.0
    assert paired_t(a, list(a)) == 1.0


def test_randomization_rejects_bad_input():
    with pytest.raises(ValueError, match="same length"):
        paired_randomization([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="at least 1"):
        paired_randomization([], [])
    with pytest.raises(ValueError, match="finite"):
        paired_randomization([1.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError, match="trials"):
        paired_randomization([1.0], [2.0], trials=0)


def test_paired_t_matches_hand_computation():
    a = [0.31, 0.52, 0.18, 0.77, 0.45, 0.60, 0.05]
    b = [0.40, 0.49, 0.35, 0.80, 0.61, 0.58, 0.20]
    d = [y - x for x, y in zip(a, b)]
    n = len(d)
    t = statistics.mean(d) / (statistics.stdev(d) / math.sqrt(n))
    expected = 2 * stats.t.sf(abs(t), n - 1)
    assert paired_t(a, b) == pytest.approx(expected, rel=1e-9)
    assert paired_t(b, a) == pytest.approx(expected, rel=1e-9)


def test_paired_t_constant_differences_and_errors():
    assert paired_t([0.2, 0.4, 0.6], [0.3, 0.5, 0.7]) == 0.0  # constant difference: t's limit
    with pytest.raises(ValueError, match="at least 2"):
        paired_t([0.1], [0.2])


def test_holm_hand_worked_with_monotonicity():
    p = {"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005}
    # sorted: d 0.005*4 = 0.02; a 0.01*3 = 0.03; c 0.03*2 = 0.06; b 0.04*1 = 0.04 -> raised to 0.06
    adj = holm(p)
    assert list(adj) == ["a", "b", "c", "d"]
    assert adj == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06, "d": 0.02})


def test_holm_caps_at_one_and_handles_ties_and_empty():
    # sorted: x 0.3*3 = 0.9; y 0.5*2 = 1.0; z 0.6*1 = 0.6 -> raised to 1.0
    assert holm({"x": 0.3, "y": 0.5, "z": 0.6}) == pytest.approx({"x": 0.9, "y": 1.0, "z": 1.0})
    assert holm({"x": 0.4, "y": 0.9}) == pytest.approx({"x": 0.8, "y": 0.9})
    assert holm({"p": 0.02, "q": 0.02}) == pytest.approx({"p": 0.04, "q": 0.04})
    assert holm({}) == {}
    with pytest.raises(ValueError):
        holm({"x": 1.5})


A = {
    "t1": {"q1": 0.5, "q2": 0.25, "q3": 0.75, "q4": 0.0, "onlyA": 0.9},
    "t2": {"q1": 0.125, "q2": 0.375},
    "onlyA": {"q1": 1.0},
}
B = {
    "t2": {"q1": 0.25, "q2": 0.75, "x": 0.5, "y": 0.5},
    "t1": {"q1": 0.75, "q2": 0.25, "q3": 1.0, "q4": 0.5},
    "onlyB": {"q1": 1.0},
}


def test_compare_means_differences_dropped_and_holm():
    out = compare(A, B, trials=2000, seed=5)
    json.dumps(out)  # plain, serialisable
    assert out["test"] == "randomization"
    assert list(out["tasks"]) == ["t1", "t2"]
    assert out["tasks_only_in_a"] == ["onlyA"] and out["tasks_only_in_b"] == ["onlyB"]
    t1, t2 = out["tasks"]["t1"], out["tasks"]["t2"]
    assert (t1["n_queries"], t1["dropped_a"], t1["dropped_b"]) == (4, 1, 0)
    assert (t2["n_queries"], t2["dropped_a"], t2["dropped_b"]) == (2, 0, 2)
    assert t1["mean_a"] == pytest.approx(0.375) and t1["mean_b"] == pytest.approx(0.625)
    assert t1["difference"] == pytest.approx(0.25)
    assert t2["mean_a"] == pytest.approx(0.25) and t2["mean_b"] == pytest.approx(0.5)
    assert t2["difference"] == pytest.approx(0.25)
    # p-values are the tests on the matched queries (in A's query order); Holm across the two tasks.
    p1 = paired_randomization([0.5, 0.25, 0.75, 0.0], [0.75, 0.25, 1.0, 0.5], trials=2000, seed=5)
    p2 = paired_randomization([0.125, 0.375], [0.25, 0.75], trials=2000, seed=5)
    assert t1["p_value"] == p1 and t2["p_value"] == p2
    assert {"t1": t1["p_holm"], "t2": t2["p_holm"]} == pytest.approx(holm({"t1": p1, "t2": p2}))
    # Exact check of the randomization p for t2: differences 0.125 and 0.375; |sum| >= 0.5 only for
    # (+,+) and (-,-), so the exact p is 1/2.
    assert abs(p2 - 0.5) <= _tolerance(0.5, 2000)
    assert {k: v for k, v in out["average"].items() if k != "difference_ci"} == pytest.approx(
        {"n_tasks": 2, "mean_a": 0.3125, "mean_b": 0.5625, "difference": 0.25}
    )  # difference_ci: tests/test_uncertainty.py
    assert "p_value" not in out["average"]


def test_compare_t_test_and_identical_systems():
    out = compare(A, B, test="t")
    assert "trials" not in out
    expected = paired_t([0.5, 0.25, 0.75, 0.0], [0.75, 0.25, 1.0, 0.5])
    assert out["tasks"]["t1"]["p_value"] == pytest.approx(expected)
    same = compare(A, A, trials=100)
    assert all(r["p_value"] == 1.0 and r["p_holm"] == 1.0 and r["difference"] == 0.0
               for r in same["tasks"].values())


def test_compare_errors():
    with pytest.raises(ValueError, match="unknown test"):
        compare(A, B, test="wilcoxon")
    with pytest.raises(ValueError, match="no task in common"):
        compare({"a": {"q": 1.0}}, {"b": {"q": 1.0}})
    with pytest.raises(ValueError, match="no query in common"):
        compare({"a": {"q1": 1.0}}, {"a": {"q2": 1.0}})
    with pytest.raises(ValueError, match="not finite"):
        compare({"a": {"q1": float("nan")}}, {"a": {"q1": 1.0}})
    with pytest.raises(ValueError, match="at least 2"):
        compare({"a": {"q1": 0.0}}, {"a": {"q1": 1.0}}, test="t")
