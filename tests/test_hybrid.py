"""`hybrid`: members run as their own pipelines (saved, reused), fused as Cormack et al.'s RRF or by
score; checked against a fusion the test computes itself from the members' saved runs."""

import json
from pathlib import Path

import pytest

from conftest import read_trec


def run(run_cli, tmp_path, *args, tasks="sample"):
    code, out, err = run_cli("run", "--plugin", "hybrid", *args, "--tasks", tasks, "--output", tmp_path / "out",
                             "--cache-dir", tmp_path / "cache", "--json")
    assert code == 0, err
    return json.loads(out)


def member_run(tmp_path, folder_name):
    return read_trec(next((tmp_path / "out" / folder_name).glob("*")) / "R2MEDSampleRetrieval.trec")


def test_rrf_equals_an_independent_computation(run_cli, tmp_path):
    summary = run(run_cli, tmp_path, "-o", "members=bm25,bm25-okapi", "--top-k", "20")
    fused = read_trec(Path(summary["results_dir"]) / "R2MEDSampleRetrieval.trec")
    a, b = member_run(tmp_path, "r2med__bm25"), member_run(tmp_path, "r2med__bm25-okapi")
    for qid in fused:
        scores = {}
        for member in (a, b):
            for rank, (doc, _) in enumerate(member[qid], 1):
                scores[doc] = scores.get(doc, 0.0) + 1.0 / (60 + rank)
        expected = sorted(scores.items(), key=lambda kv: -kv[1])[:20]
        assert [s for _, s in fused[qid]] == pytest.approx([s for _, s in expected], abs=1e-12)
        assert {d for d, _ in fused[qid]} <= set(scores)
    assert summary["pipeline"] == "BM25 ⊕ bm25-okapi (RRF)"


def test_members_are_reused_and_take_their_own_options(run_cli, tmp_path, monkeypatch):
    from r2med_plugins.bm25.retriever import BM25Retriever, OkapiRetriever

    run(run_cli, tmp_path, "-o", "members=bm25,bm25-okapi", "-o", "bm25.k1=1.2")
    assert len(list((tmp_path / "out" / "r2med__bm25").iterdir())) == 1  # the member with k1=1.2

    def no_call(*args, **kwargs):
        raise AssertionError("a member's saved run must be reused")

    for cls in (BM25Retriever, OkapiRetriever):
        monkeypatch.setattr(cls, "index", no_call)
        monkeypatch.setattr(cls, "search", no_call)
    again = run(run_cli, tmp_path, "-o", "members=bm25,bm25-okapi", "-o", "bm25.k1=1.2", "-o", "fusion=zscore")
    assert again["tasks"][0]["status"] == "computed" and again["pipeline"].endswith("(ZSCORE)")


def test_hybrid_results_in_the_leaderboard(run_cli, tmp_path, data_dir):
    code, out, err = run_cli("run", "--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "--data-dir", data_dir,
                             "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["tasks"][0]["task"] == "R2MEDBiologyRetrieval"
    code, out, err = run_cli("leaderboard", str(tmp_path / "out"), "--no-published", "--format", "json")
    assert code == 0, err
    assert "BM25 ⊕ bm25-okapi (RRF)" in [r["system"] for r in json.loads(out)]


@pytest.mark.parametrize("args, message", [
    (["-o", "members=bm25"], "name at least two retrievers"),
    (["-o", "fusion=max"], "use one of rrf, zscore, minmax, linear"),
    (["-o", "members=bm25,st", "-o", "weights=1"], "1 weights for 2 members"),
    (["-o", "members=bm25,st", "-o", "nvembed.device=cpu"], "'nvembed' is neither a selected component nor a member"),
])
def test_hybrid_mistakes(run_cli, tmp_path, args, message):
    code, _, err = run_cli("run", "--plugin", "hybrid", *args, "--tasks", "sample", "--output", tmp_path)
    assert code == 2 and message in err


def test_members_share_the_rewriter(run_cli, tmp_path):
    """With a rewriter, each member runs as "rewriter + member", saved under that pipeline's name."""
    from test_gar import published_dir

    data = published_dir(tmp_path, "hyde", "qwq-32b", reasoning=True)
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", "source=qwq-32b", "--plugin", "hybrid",
                             "-o", "members=bm25,bm25-okapi", "--data-dir", data, "--tasks", "Biology",
                             "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json")
    assert code == 0, err
    assert json.loads(out)["pipeline"] == "QwQ-32B + BM25 ⊕ bm25-okapi (RRF)"
    names = {json.loads(p.read_text())["name"] for p in (tmp_path / "out").glob("*/*/r2med/pipeline.json")}
    assert {"QwQ-32B + BM25", "QwQ-32B + bm25-okapi"} <= names


def test_fuse_command_matches_the_hybrid_retriever(run_cli, tmp_path):
    """`r2med fuse` over the members' saved folders, or their TREC files with --qrels, gives the same
    run as the hybrid retriever; the result is a results folder the leaderboard reads."""
    from conftest import SAMPLE

    hybrid = run(run_cli, tmp_path, "-o", "members=bm25,bm25-okapi")
    members = [next((tmp_path / "out" / name).glob("*")) for name in ("r2med__bm25", "r2med__bm25-okapi")]
    code, out, err = run_cli("fuse", *map(str, members), "--output", tmp_path / "fused", "--json")
    assert code == 0, err
    fused = json.loads(out)
    expected = read_trec(Path(hybrid["results_dir"]) / "R2MEDSampleRetrieval.trec")
    assert read_trec(Path(fused["results_dir"]) / "R2MEDSampleRetrieval.trec") == expected
    assert fused["tasks"][0]["ndcg_at_10"] == hybrid["tasks"][0]["ndcg_at_10"]

    trecs = [str(m / "R2MEDSampleRetrieval.trec") for m in members]
    code, out, err = run_cli("fuse", *trecs, "--qrels", str(SAMPLE / "qrels.jsonl"), "--output", tmp_path / "f2", "--json")
    assert code == 0, err
    assert json.loads(out)["tasks"][0]["ndcg_at_10"] == hybrid["tasks"][0]["ndcg_at_10"]
    code, _, err = run_cli("fuse", *trecs, "--output", tmp_path / "f3")
    assert code == 2 and "need --qrels FILE" in err
