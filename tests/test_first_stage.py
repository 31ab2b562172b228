"""First stages as shared artifacts: a run's top-k exported (``r2med export-first-stage``) is read by
run-file, a reranker over it reproduces the reranker over the run it came from, and
``r2med leaderboard --first-stage`` sets the rerankers over it side by side with their gains and
LLM use."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from conftest import read_ranking
from test_listwise import RankingServer

TASKS = ["Biology", "Bioinformatics"]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with RankingServer() as srv:  # a listwise LLM that ranks every window in reverse
        yield srv


def folder(outcome) -> Path:
    (path,) = outcome.results_dirs
    return Path(path)


def test_a_reranker_over_the_exported_first_stage_is_the_reranker_over_the_run(evaluate, run_cli, server, tmp_path,
                                                                              data_dir):
    bm25 = folder(evaluate("bm25", tasks=TASKS, data_dir=data_dir, output="first"))
    code, out, err = run_cli("export-first-stage", bm25, tmp_path / "shared", "--top-k", "30", "--json")
    assert code == 0, err
    manifest = json.loads(out)
    shared = tmp_path / "shared"
    files = sorted(p.name for p in shared.glob("*.trec"))
    assert files == ["R2MEDBioinformaticsRetrieval.trec", "R2MEDBiologyRetrieval.trec"]
    for name in files:
        task = name.removesuffix(".trec")
        ranking = read_ranking(shared / name)
        assert ranking == {q: docs[:30] for q, docs in read_ranking(bm25 / name).items()}  # the run's top 30
        assert manifest["tasks"][task]["sha256"] == hashlib.sha256((shared / name).read_bytes()).hexdigest()
        assert manifest["tasks"][task]["ndcg_at_10"] == json.loads((bm25 / f"{task}.json").read_text())[
            "scores"]["test"][0]["main_score"]
    assert manifest["name"] == "BM25" and manifest["source"]["command"] == ["r2med-run", "--plugin", "bm25"]
    assert json.loads((shared / "r2med" / "first-stage.json").read_text()) == manifest

    llm = {"llm": f"{server.url}#reverser", "rerank_k": 30}
    direct = evaluate("bm25", "llm-rerank", tasks=TASKS, data_dir=data_dir, output="direct", top_k=30, **llm)
    moved = tmp_path / "elsewhere"
    shared.rename(moved)  # a first stage is its content, wherever it lies
    via = evaluate("run-file", "llm-rerank", tasks=TASKS, data_dir=data_dir, output="via", path=str(moved), **llm)
    for task in ("R2MEDBiologyRetrieval", "R2MEDBioinformaticsRetrieval"):
        assert read_ranking(folder(via) / f"{task}.trec") == read_ranking(folder(direct) / f"{task}.trec")
        assert via[task].ndcg_at_10 == direct[task].ndcg_at_10
    assert via.display_name == "BM25 + reverser"
    models = json.loads((folder(via) / "r2med" / "pipeline.json").read_text())["models"]
    assert models["retriever"] == {"name": "r2med/BM25", "revision": manifest["digest"][:12]}  # its content


def test_the_view_ranks_two_rerankers_over_one_first_stage(evaluate, run_cli, server, tmp_path, data_dir):
    bm25 = evaluate("bm25", tasks=TASKS, data_dir=data_dir, output="first")
    assert run_cli("export-first-stage", folder(bm25), tmp_path / "fs")[0] == 0
    path = str(tmp_path / "fs")
    reversed_ = evaluate("run-file", "llm-rerank", tasks=TASKS, data_dir=data_dir, output="runs", path=path,
                         llm=f"{server.url}#reverser", price="1,2")
    window = evaluate("run-file", "llm-rerank", tasks=TASKS, data_dir=data_dir, output="runs", path=path,
                      llm=f"{server.url}#small", window=5, step=5)
    evaluate("bm25", "llm-rerank", tasks=TASKS, data_dir=data_dir, output="runs", llm=f"{server.url}#other")  # not over it
    code, out, err = run_cli("leaderboard", tmp_path / "runs", "--first-stage", path, "--format", "json")
    assert code == 0, err
    view = json.loads(out)
    tasks = ["R2MEDBiologyRetrieval", "R2MEDBioinformaticsRetrieval"]
    own = {t: round(100 * bm25[t].ndcg_at_10, 2) for t in tasks}
    assert view["first_stage"] == "BM25" and view["scores"] == pytest.approx(own)
    expected = sorted([(reversed_, "reverser"), (window, "small")],
                      key=lambda o: -sum(round(100 * o[0][t].ndcg_at_10, 2) for t in tasks))
    assert [r["llm"] for r in view["rerankers"]] == [f"llm/{name}" for _, name in expected]
    for (outcome, _), row in zip(expected, view["rerankers"]):
        mine = {t: round(100 * outcome[t].ndcg_at_10, 2) for t in tasks}
        assert row["gains"] == pytest.approx({t: mine[t] - own[t] for t in tasks}, abs=0.006)
        assert row["gain"] == pytest.approx(sum(mine.values()) / 2 - sum(own.values()) / 2, abs=0.011)
        usage = [outcome[t].usage for t in tasks]
        assert (row["requests"], row["prompt_tokens"]) == (sum(u["requests"] for u in usage),
                                                           sum(u["prompt_tokens"] for u in usage))
    priced = next(r for r in view["rerankers"] if r["llm"] == "llm/reverser")
    assert priced["usd"] == pytest.approx((priced["prompt_tokens"] * 1 + priced["completion_tokens"] * 2) / 1e6)
    assert next(r for r in view["rerankers"] if r["llm"] == "llm/small")["usd"] is None  # no price known
    code, out, _ = run_cli("leaderboard", tmp_path / "runs", "--first-stage", path)
    assert code == 0 and "BM25 (first stage)" in out and "reverser" in out


@pytest.mark.parametrize("make, message", [
    (lambda p: (p / "dest").mkdir() or (p / "dest" / "x").write_text("x"), "dest: exists and is not an empty folder"),
])
def test_an_export_into_a_used_folder_is_refused_in_one_line(run_cli, evaluate, tmp_path, data_dir, make, message):
    bm25 = folder(evaluate("bm25", tasks=["Biology"], data_dir=data_dir))
    make(tmp_path)
    code, _, err = run_cli("export-first-stage", bm25, tmp_path / "dest")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run_cli("export-first-stage", tmp_path / "dest", tmp_path / "other")
    assert code == 2 and "no <Task>.trec run" in err
