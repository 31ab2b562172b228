"""Run fusion, checked against hand-computed numbers and an independent RRF written here."""

import math
import random

import pytest

from r2med_tasks.scoring.fusion import fuse
from r2med_tasks.scoring.runs import read_trec, write_trec


def reference_rrf(runs, weights, k, depth):
    """RRF by plain loops: {qid: {doc: score}} and {qid: {doc: best rank}}."""
    scores, best = {}, {}
    for run, w in zip(runs, weights):
        for qid, docs in run.items():
            for rank, doc in enumerate(list(docs)[:depth], 1):
                scores.setdefault(qid, {}).setdefault(doc, 0.0)
                scores[qid][doc] += w / (k + rank)
                best.setdefault(qid, {})
                best[qid][doc] = min(best[qid].get(doc, rank), rank)
    return scores, best


def ids(ranked):
    return list(ranked)


def ordered(run):
    """A run with its order made visible: dict equality alone ignores order."""
    return {qid: list(docs.items()) for qid, docs in run.items()}


def assert_scores(ranked, expected):
    """``ranked`` has exactly the documents of ``expected``, in its order, with its scores."""
    assert ids(ranked) == list(expected)
    for (doc, got), want in zip(ranked.items(), expected.values()):
        assert got == pytest.approx(want, abs=1e-12), doc


# ---------------------------------------------------------------- rrf

def test_rrf_missing_document_and_different_depths():
    a = {"q": {"a": 9.0, "b": 8.0, "c": 7.0}}
    b = {"q": {"b": 0.9, "d": 0.1}}
    out = fuse([a, b])
    assert_scores(out["q"], {"b": 1 / 62 + 1 / 61, "a": 1 / 61, "d": 1 / 62, "c": 1 / 63})


def test_rrf_weights_and_k_match_reference():
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(30)]
    runs = []
    for size in (25, 12, 30):
        run = {}
        for q in ("q1", "q2"):
            picked = rng.sample(docs, size)
            run[q] = {d: float(size - i) for i, d in enumerate(picked)}
        runs.append(run)
    weights, k = [2.0, 0.5, 1.25], 10
    out = fuse(runs, weights=weights, rrf_k=k, depth=100, top_k=100)
    scores, best = reference_rrf(runs, weights, k, depth=100)
    for q in ("q1", "q2"):
        want = sorted(scores[q], key=lambda d: (-scores[q][d], best[q][d], d))
        assert ids(out[q]) == want
        for d, s in out[q].items():
            assert s == pytest.approx(scores[q][d], abs=1e-15)


def test_rrf_k_zero_hand_computed():
    a = {"q": {"x": 1.0, "y": 0.0}}
    b = {"q": {"y": 1.0}}
    out = fuse([a, b], rrf_k=0, weights=[1, 3])
    assert_scores(out["q"], {"y": 1 / 2 + 3 / 1, "x": 1 / 1})


def test_rrf_ties_broken_by_best_rank_then_doc_id():
    # rrf_k=0: b = 1/1, c = 1/1, a = 1/2 + 1/2 = 1 -- a three-way tie at exactly 1.0.
    a = {"q": {"b": 5.0, "a": 4.0}}
    b = {"q": {"c": 5.0, "a": 4.0}}
    out = fuse([a, b], rrf_k=0)
    assert list(out["q"].values()) == [1.0, 1.0, 1.0]
    assert ids(out["q"]) == ["b", "c", "a"]  # best rank 1 before best rank 2; then by id
    # Swapping the members changes nothing.
    assert ordered(fuse([b, a], rrf_k=0)) == ordered(out)


def test_rrf_identical_scores_same_rank_ordered_by_id():
    a = {"q": {"b": 1.0, "a": 0.5}}
    b = {"q": {"a": 1.0, "b": 0.5}}
    assert ids(fuse([a, b])["q"]) == ["a", "b"]


def test_depth_truncation():
    a = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}  # c is at rank depth + 1 here
    b = {"q": {"c": 3.0, "d": 2.0}}
    out = fuse([a, b], depth=2)
    assert_scores(out["q"], {"a": 1 / 61, "c": 1 / 61, "b": 1 / 62, "d": 1 / 62})
    scores, _ = reference_rrf([a, b], [1, 1], 60, depth=2)
    assert dict(out["q"]) == pytest.approx(scores["q"])


def test_depth_truncation_changes_the_statistics():
    # depth 2: a's z-scores come from [3, 1] only (mean 2, std 1); 'z' at rank 3 is outside.
    a = {"q": {"a": 3.0, "b": 1.0, "z": -100.0}}
    b = {"q": {"z": 1.0, "b": 0.0}}
    out = fuse([a, b], method="zscore", depth=2)
    # a: z_a=1 from A, missing in B -> min -1 => 0 ; b: -1 + -1 = -2 ; z: missing in A -> -1, +1 => 0
    assert_scores(out["q"], {"a": 0.0, "z": 0.0, "b": -2.0})


def test_top_k_truncation():
    a = {"q": {f"d{i}": float(-i) for i in range(10)}}
    b = {"q": {f"d{i}": float(-i) for i in range(10)}}
    out = fuse([a, b], top_k=3)
    assert ids(out["q"]) == ["d0", "d1", "d2"]
    assert out["q"]["d2"] == pytest.approx(2 / 63)


def test_query_in_only_one_member():
    a = {"q1": {"a": 1.0}, "q2": {"x": 2.0, "y": 1.0}}
    b = {"q1": {"a": 1.0}}
    out = fuse([a, b], weights=[2.0, 1.0])
    assert set(out) == {"q1", "q2"}
    assert_scores(out["q2"], {"x": 2 / 61, "y": 2 / 62})
    assert_scores(out["q1"], {"a": 3 / 61})
    # The same for the score modes: only the member that has the query counts.
    assert_scores(fuse([a, b], method="linear")["q2"], {"x": 2.0, "y": 1.0})
    assert_scores(fuse([b, a], method="minmax")["q2"], {"x": 1.0, "y": 0.0})


# ---------------------------------------------------------------- score modes

def test_zscore_hand_computed():
    # A: [3, 2, 1] -> mean 2, population std sqrt(2/3): z = +sqrt(1.5), 0, -sqrt(1.5)
    # B: [4, 0]    -> mean 2, std 2: z = +1, -1; a and c are missing from B -> -1
    # d is missing from A -> -sqrt(1.5), exactly c's value, so c and d tie; d's best rank (2) wins.
    r = math.sqrt(1.5)
    a = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    b = {"q": {"b": 4.0, "d": 0.0}}
    out = fuse([a, b], method="zscore")
    assert_scores(out["q"], {"b": 1.0, "a": r - 1, "d": -r - 1, "c": -r - 1})
    out = fuse([a, b], method="zscore", weights=[1.0, 2.0])
    assert_scores(out["q"], {"b": 2.0, "a": r - 2, "d": -r - 2, "c": -r - 2})


def test_zscore_constant_scores_become_zero():
    a = {"q": {"a": 5.0, "b": 5.0}}  # constant: both 0, a missing doc also 0
    b = {"q": {"c": 1.0, "a": 0.0}}  # mean .5, std .5: c = 1, a = -1, missing b = -1
    out = fuse([a, b], method="zscore")
    assert_scores(out["q"], {"c": 1.0, "a": -1.0, "b": -1.0})


def test_minmax_hand_computed():
    a = {"q": {"a": 10.0, "b": 5.0, "c": 0.0}}  # 1, .5, 0
    b = {"q": {"c": 3.0, "d": 1.0}}  # 1, 0; a and b missing -> 0
    out = fuse([a, b], method="minmax")
    assert_scores(out["q"], {"a": 1.0, "c": 1.0, "b": 0.5, "d": 0.0})
    out = fuse([a, b], method="minmax", weights=[0.5, 3.0])
    assert_scores(out["q"], {"c": 3.0, "a": 0.5, "b": 0.25, "d": 0.0})


def test_minmax_constant_scores_become_one():
    a = {"q": {"a": 2.0, "b": 2.0}}  # constant: both 1.0, missing c -> 0
    b = {"q": {"c": 7.0, "a": 1.0}}  # c 1, a 0, missing b -> 0
    out = fuse([a, b], method="minmax")
    assert_scores(out["q"], {"a": 1.0, "c": 1.0, "b": 1.0})  # ties: best rank 1 (a, c by id), then b


def test_linear_hand_computed():
    a = {"q": {"a": 10.0, "b": 5.0}}  # missing c -> 5 (A's minimum)
    b = {"q": {"b": 0.5, "c": 0.2}}  # missing a -> 0.2 (B's minimum)
    out = fuse([a, b], method="linear", weights=[1.0, 10.0])
    assert_scores(out["q"], {"a": 10 + 10 * 0.2, "b": 5 + 10 * 0.5, "c": 5 + 10 * 0.2})


def test_score_modes_rank_order_of_member_is_kept_not_resorted():
    # A member's list is taken in the order given: rank 1 is 'low' even though its score is smaller.
    a = {"q": {"low": 1.0, "high": 2.0}}
    b = {"q": {"other": 0.0}}
    assert ids(fuse([a, b], depth=1, method="linear")["q"]) == ["low", "other"]


def test_fusion_is_deterministic_across_input_order():
    a = {"q": {"a": 1.0, "b": 1.0, "c": 1.0}}
    b = {"q": {"c": 1.0, "b": 1.0, "a": 1.0}}
    for method in ("rrf", "zscore", "minmax", "linear"):
        assert ordered(fuse([a, b], method=method)) == ordered(fuse([b, a], method=method))


# ---------------------------------------------------------------- validation

RUN = {"q": {"a": 1.0}}


@pytest.mark.parametrize("kwargs, runs, message", [
    ({"method": "borda"}, [RUN, RUN], "unknown fusion method 'borda'"),
    ({"weights": [1.0]}, [RUN, RUN], "1 weights for 2 runs"),
    ({"weights": [1.0, 1.0, 1.0]}, [RUN, RUN], "3 weights for 2 runs"),
    ({"weights": [1.0, -0.5]}, [RUN, RUN], "non-negative"),
    ({"weights": [0.0, 0.0]}, [RUN, RUN], "every weight is 0"),
    ({"weights": [1.0, float("nan")]}, [RUN, RUN], "finite"),
    ({"rrf_k": -1}, [RUN, RUN], "rrf_k must be >= 0"),
    ({"depth": 0}, [RUN, RUN], "depth must be >= 1"),
    ({"top_k": 0}, [RUN, RUN], "top_k must be >= 1"),
    ({}, [RUN], "at least 2 runs, got 1"),
    ({}, [], "at least 2 runs, got 0"),
])
def test_invalid_arguments(kwargs, runs, message):
    with pytest.raises(ValueError, match=message):
        fuse(runs, **kwargs)


# ---------------------------------------------------------------- TREC files

def test_trec_round_trip(tmp_path):
    run = {
        "q1": {"d3": 1 / 3, "d1": 0.1, "d2": -2.5e-7},
        "q2": {"x": 1e300, "y": 5.0},
    }
    path = tmp_path / "sub" / "run.trec"
    write_trec(path, run, "my-tag")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"q1 Q0 d3 1 {1 / 3!r} my-tag"
    assert lines[-1] == "q2 Q0 y 2 5.0 my-tag"
    assert len(lines) == 5
    assert ordered(read_trec(path)) == ordered(run)
    assert not [p for p in path.parent.iterdir() if p.name != "run.trec"]  # no temp file left


def test_read_trec_orders_by_rank_column(tmp_path):
    path = tmp_path / "run.trec"
    # Lines shuffled, scores deliberately not decreasing with rank: the rank column decides.
    path.write_text(
        "q1 Q0 c 3 9.0 t\n"
        "q2 Q0 z 2 1.0 t\n"
        "q1 Q0 a 1 0.5 t\n"
        "\n"
        "q2 Q0 y 1 0.0 t\n"
        "q1\tQ0  b 2 7.0 t\n", encoding="utf-8")
    assert ordered(read_trec(path)) == ordered({"q1": {"a": 0.5, "b": 7.0, "c": 9.0}, "q2": {"y": 0.0, "z": 1.0}})


@pytest.mark.parametrize("bad, message", [
    ("q1 Q0 b 2 0.5", "expected 6 columns"),
    ("q1 Q0 b 2 0.5 t extra", "expected 6 columns"),
    ("q1 Q0 b two 0.5 t", "rank 'two' is not an integer"),
    ("q1 Q0 b 2 high t", "score 'high' is not a number"),
    ("q1 Q0 b 2 nan t", "score 'nan' is not a finite number"),
    ("q1 Q0 b 2 -inf t", "score '-inf' is not a finite number"),
    ("q1 Q0 b 1 0.5 t", "rank 1 twice"),
    ("q1 Q0 a 2 0.5 t", "document 'a' twice"),
])
def test_malformed_trec_line_names_file_and_line(tmp_path, bad, message):
    path = tmp_path / "bad.trec"
    path.write_text(f"q1 Q0 a 1 1.0 t\n\n{bad}\nq2 Q0 x 1 1.0 t\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        read_trec(path)
    assert f"{path}:3" in str(info.value)


@pytest.mark.parametrize("content, message", [
    (b"", "empty; a TREC run file has a line"),
    (b"\n  \n", "empty; a TREC run file has a line"),
    (b"q1 Q0 caf\xe9 1 1.0 t\n", "not UTF-8 text"),
])
def test_unusable_trec_file_names_it(tmp_path, content, message):
    """An empty run would fuse or score as 0.00 without a word; say so instead."""
    path = tmp_path / "bad.trec"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as info:
        read_trec(path)
    assert str(info.value).startswith(f"{path}: ")


def test_write_trec_rejects_whitespace_in_ids(tmp_path):
    with pytest.raises(ValueError, match="whitespace"):
        write_trec(tmp_path / "r.trec", {"q 1": {"a": 1.0}}, "t")
    with pytest.raises(ValueError, match="tag"):
        write_trec(tmp_path / "r.trec", RUN, "my tag")
    assert not (tmp_path / "r.trec").exists()


def test_fuse_trec_files_end_to_end(tmp_path):
    write_trec(tmp_path / "a.trec", {"q": {"a": 3.0, "b": 2.0}}, "A")
    write_trec(tmp_path / "b.trec", {"q": {"b": 9.0, "c": 1.0}}, "B")
    fused = fuse([read_trec(tmp_path / "a.trec"), read_trec(tmp_path / "b.trec")])
    write_trec(tmp_path / "f.trec", fused, "fused")
    assert ordered(read_trec(tmp_path / "f.trec")) == ordered(fused)
    assert ids(fused["q"]) == ["b", "a", "c"]
