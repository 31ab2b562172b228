"""Rerankers through the runner: a real cross-encoder (built offline from all-MiniLM-L6-v2's
weights) reorders only the top rerank_k, by its own pairwise scores; the first stage is saved and
reused from disk."""

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLE, read_jsonl, read_ranking


TASK = "R2MEDSampleRetrieval"


def test_cross_encoder_reorders_only_the_top_k(evaluate, tmp_path, cross_encoder_path):
    import torch
    from mteb.results import TaskResult
    from sentence_transformers import CrossEncoder

    folder = Path(evaluate("bm25", "cross-encoder", model=str(cross_encoder_path), rerank_k=5)[TASK].results_dir)
    reranked = read_ranking(folder / f"{TASK}.trec")
    first_folder = next((tmp_path / "out" / "local-data" / "r2med__bm25").glob("*"))
    first = read_ranking(first_folder / f"{TASK}.trec")
    plain = evaluate("bm25", output="plain")  # bm25 alone: the saved first stage is that run
    assert read_ranking(Path(plain[TASK].results_dir) / f"{TASK}.trec") == first

    model = CrossEncoder(str(cross_encoder_path), device="cpu", activation_fn=torch.nn.Identity())
    text = {d["id"]: d["text"] for d in read_jsonl(SAMPLE / "corpus.jsonl")}
    queries = {q["id"]: q["text"] for q in read_jsonl(SAMPLE / "query.jsonl")}
    for qid, docs in first.items():
        head = [d for d, _ in docs[:5]]
        logits = model.predict([(queries[qid], text[d]) for d in head])
        expected = [head[i] for i in np.argsort(-logits, kind="stable")]
        got = [d for d, _ in reranked[qid]]
        assert got[:5] == expected  # the model's own order
        assert [s for _, s in reranked[qid][:5]] == pytest.approx(sorted(logits.tolist(), reverse=True), abs=1e-4)
        assert len(got) == 5  # only the reranked list is scored, as published (-o keep_tail=true keeps the rest)
    result = TaskResult.from_disk(folder / "R2MEDSampleRetrieval.json")
    assert result.scores["test"][0]["previous_results_model_meta"] == {
        "model_name": "r2med/bm25", "revision": first_folder.name}


def test_first_stage_is_reused_from_disk(evaluate, cross_encoder_path, monkeypatch):
    from r2med_plugins.bm25.retriever import BM25Retriever

    evaluate("bm25", "cross-encoder", model=str(cross_encoder_path), rerank_k=3, max_length=64)

    def no_search(*args, **kwargs):
        raise AssertionError("the first stage must come from its saved run")

    monkeypatch.setattr(BM25Retriever, "search", no_search)
    monkeypatch.setattr(BM25Retriever, "index", no_search)
    again = evaluate("bm25", "cross-encoder", model=str(cross_encoder_path), rerank_k=7, max_length=64)
    assert again[TASK].status == "computed" and again.display_name == "BM25 + cross-encoder"


@pytest.fixture
def counted(monkeypatch):
    """Counts the pairs the cross-encoder scores; ``fail_after`` makes scoring fail once that many are done."""
    from r2med_plugins.rerank.cross_encoder import CrossEncoderReranker

    real, state = CrossEncoderReranker.score, {"pairs": 0, "fail_after": None}

    def score(self, pairs):
        if state["fail_after"] is not None and state["pairs"] + len(pairs) > state["fail_after"]:
            raise RuntimeError("killed")
        state["pairs"] += len(pairs)
        return real(self, pairs)

    monkeypatch.setattr(CrossEncoderReranker, "score", score)
    return state


def test_pair_scores_survive_a_failed_run_and_serve_reruns(evaluate, tmp_path, cross_encoder_path, counted,
                                                           monkeypatch):
    from r2med_plugins.rerank import scores
    from r2med_tasks.errors import PluginError

    def rerank(output="out", **options):
        return evaluate("bm25", "cross-encoder", model=str(cross_encoder_path), rerank_k=7, batch_size=8,
                        output=output, **{"max_length": 64, **options})

    monkeypatch.setattr(scores, "CHUNK", 16)
    reference = rerank("reference", cache=False)  # uninterrupted, no cache
    assert counted["pairs"] == 70

    counted.update(pairs=0, fail_after=40)  # the third chunk fails: two chunks (32 pairs) were journaled
    with pytest.raises(PluginError, match="RuntimeError: killed"):
        rerank()
    counted.update(pairs=0, fail_after=None)
    resumed = rerank()
    assert counted["pairs"] == 70 - 32  # only the pairs not journaled
    assert read_ranking(Path(resumed[TASK].results_dir) / f"{TASK}.trec") == read_ranking(
        Path(reference[TASK].results_dir) / f"{TASK}.trec")

    counted["pairs"] = 0
    again = evaluate("bm25", "cross-encoder", model=str(cross_encoder_path), rerank_k=7, batch_size=8, max_length=64,
                     overwrite=True)
    assert counted["pairs"] == 0 and again[TASK].ndcg_at_10 == resumed[TASK].ndcg_at_10
    rerank(max_length=32)  # another identity: its own scores
    assert counted["pairs"] == 70
    journals = list((tmp_path / "cache" / "rerank-scores").glob("*.jsonl"))
    assert len(journals) == 2
    lines = [json.loads(line) for line in journals[0].read_text().splitlines()]
    assert all(set(line) == {"key", "score"} for line in lines)  # no query or document text on disk


def test_rerankers_are_listed(run_cli):
    rows = {r["name"]: r for r in json.loads(run_cli("list", "rerankers", "--json")[1])}
    assert rows["bge-reranker"]["options"]["model"]["default"] == "BAAI/bge-reranker-v2-m3"
    assert rows["monobert"]["options"]["rerank_k"]["default"] == 10
    assert rows["monobert"]["options"]["rerank_k"]["minimum"] == 1


@pytest.mark.model  # torch
def test_rankllama_without_peft_is_one_clear_line(run_cli, tmp_path):
    pytest.importorskip("torch")
    try:
        import peft  # noqa: F401
        pytest.skip("peft is installed here")
    except ImportError:
        pass
    code, _, err = run_cli("run", "--plugin", "bm25", "--plugin", "rankllama", "--tasks", "sample", "--output", tmp_path,
                           "--cache-dir", tmp_path / "c")
    assert code == 2 and "needs peft: pip install 'r2med[rankllama]'" in err and "Traceback" not in err


def test_llm_reranker_end_to_end(evaluate, tmp_path, monkeypatch):
    """llm-rerank over the local chat server: the permutation the answers imply becomes the run,
    and a rerun answers from the cache."""
    import re

    from chat_server import ChatServer

    server = ChatServer()

    def reverse_answer(messages):  # every window answered with its passages in reverse order
        n = int(re.search(r"provide you with (\d+) passages", messages[1]["content"]).group(1))
        return " > ".join(f"[{i}]" for i in range(n, 0, -1))

    monkeypatch.setattr("chat_server.fake_answer", reverse_answer)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with server:
        options = {"llm": f"{server.url}#ranker", "rerank_k": 5, "window": 5, "step": 5}
        results = evaluate("bm25", "llm-rerank", **options)
        first = read_ranking(next((tmp_path / "out" / "local-data" / "r2med__bm25").glob("*")) / f"{TASK}.trec")
        reranked = read_ranking(Path(results[TASK].results_dir) / f"{TASK}.trec")
        for qid, docs in first.items():
            assert [d for d, _ in reranked[qid][:5]] == [d for d, _ in docs[:5]][::-1]
            assert len(reranked[qid]) == 5  # the reranked list only, as published
        sent = server.count
        assert sent == 10
        evaluate("bm25", "llm-rerank", **options, overwrite=True)
        assert server.count == sent
