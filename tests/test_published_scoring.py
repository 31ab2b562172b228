"""Runs are scored as the published evaluation scored them (issue 14, items 1, 2 and 6).

The authors (R2MED's ``src/eval_retrieval.py``, ``src/eval_BM25.py``, 45cbac5's
``src/eval_reranker.py``) read every qrels row into a dict, hand it whole to pytrec_eval and
average each measure over the queries pytrec_eval scores (BEIR's ``EvaluateRetrieval.evaluate``:
``sum / len(scores)``, rounded to 5 decimals). So a judged document the corpus lacks counts in
recall and in nDCG's ideal ranking, a query whose judgments are all 0 scores 0 and counts, a query
without any judgment is not scored, and a reranked run is the reranked top-k only. Each expected
number below is computed here, that way, with pytrec_eval directly on constructed data; the
harness's output is only compared with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import Field

from conftest import write_jsonl
from r2med_tasks.results.folder import ResultsFolder
from r2med_tasks.components.options import Options

K = (1, 3, 5, 10, 100)
N_DOCS = 30
QUERIES = ["q1", "q2", "q3", "q4", "q5"]
QRELS_ROWS = [
    ("q1", "d03", 1), ("q1", "d07", 2), ("q1", "ghost-1", 1), ("q1", "d20", 0),  # ghost-1: not in the corpus
    ("q2", "d05", 0), ("q2", "d06", 0),  # all 0: scored 0, averaged in
    ("q3", "d10", 1), ("q3", "d11", 1), ("q3", "d12", 1), ("q3", "ghost-2", 2),
    ("q4", "d01", 1), ("q4", "d29", 1),
    # q5 has no judgment: not scored; qx is no query of the task: ignored
    ("qx", "d01", 1),
]
DOCS = [f"d{i:02d}" for i in range(1, N_DOCS + 1)]


def first_stage(qid: str) -> dict[str, float]:
    """Every document, distinct scores: a fixed permutation per query (31 is prime)."""
    m = QUERIES.index(qid) + 2
    return {d: float((int(d[1:]) * m) % 31) for d in DOCS}


def rerank_score(qid: str, doc: str) -> float:
    return float((int(doc[1:]) * 7 + QUERIES.index(qid)) % 31)


def authors_metrics(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """BEIR's EvaluateRetrieval.evaluate / the authors' calculate_retrieval_metrics, over the full qrels."""
    import pytrec_eval

    qrels: dict[str, dict[str, int]] = {}
    for qid, pid, rel in QRELS_ROWS:  # load_retrieval_data: relevant_docs[qid][pid] = int(score), every row
        qrels.setdefault(qid, {})[pid] = rel
    measures = {f"{m}." + ",".join(map(str, K)) for m in ("map_cut", "ndcg_cut", "recall", "P")} | {"recip_rank"}
    scores = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(results)
    out = {}
    for k in K:
        for name, key in (("ndcg", "ndcg_cut"), ("map", "map_cut"), ("recall", "recall"), ("precision", "P")):
            out[f"{name}_at_{k}"] = round(sum(s[f"{key}_{k}"] for s in scores.values()) / len(scores), 5)
    out["mrr"] = round(sum(s["recip_rank"] for s in scores.values()) / len(scores), 5)
    out["n"] = len(scores)
    return out


@pytest.fixture
def task_dir(tmp_path) -> Path:
    root = tmp_path / "data"
    folder = root / "Biology"
    write_jsonl(folder / "corpus.jsonl", [{"id": d, "text": f"document {d}"} for d in DOCS])
    write_jsonl(folder / "query.jsonl", [{"id": q, "text": f"query {q}"} for q in QUERIES])
    write_jsonl(folder / "qrels.jsonl", [{"q_id": q, "p_id": p, "score": s} for q, p, s in QRELS_ROWS])
    return root


class Fixed:
    def __init__(self, options):
        pass

    def index(self, corpus, *, task, context):
        pass

    def search(self, queries, *, task, top_k, context):
        return {q.id: first_stage(q.id) for q in queries}


class FixedReranker:
    def __init__(self, options):
        self.rerank_k = options.rerank_k

    def rerank(self, queries, corpus, candidates, *, task, context):
        return {qid: {d: rerank_score(qid, d) for d in docs} for qid, docs in candidates.items()}


class FixedRerankOptions(Options):
    rerank_k: int = Field(10, ge=1, description="documents reranked")


@pytest.fixture
def fixed(register):
    from r2med_tasks.components.specs import RerankerSpec, RetrieverSpec
    from r2med_tasks.components.hookspecs import hookimpl

    class FixedPlugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="fixed", factory=Fixed))

        @hookimpl
        def register_rerankers(self, register):
            register(RerankerSpec(name="fixed-rerank", factory=FixedReranker, options=FixedRerankOptions,
                                  depth_option="rerank_k"))

    return register(FixedPlugin(), "fixed-plugin")


def run(run_cli, task_dir, tmp_path, *args):
    code, out, err = run_cli("run", "--plugin", "fixed", *args, "--data-dir", task_dir, "--tasks", "Biology",
                             "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert len(summary["results_dirs"]) == 1, summary["results_dirs"]
    folder = Path(summary["results_dirs"][0])
    result = json.loads(next(p for p in folder.glob("*.json") if p.name != "model_meta.json").read_text())
    return summary, folder, result["scores"]["test"][0], err


def run_api(evaluate, task_dir, *components, **options):
    """``run`` through the Python API: the results folder and its test scores."""
    outcome = evaluate("fixed", *components, data_dir=task_dir, tasks="Biology", **options)
    (folder,) = map(Path, outcome.results_dirs)
    result = json.loads((folder / "R2MEDBiologyRetrieval.json").read_text())
    return folder, result["scores"]["test"][0]


def assert_as_authors(got: dict, expected: dict) -> None:
    for key, value in expected.items():
        if key == "mrr":
            assert got["mrr_at_1000"] == pytest.approx(value, abs=1.1e-5), key
        elif key != "n":
            assert got[key] == pytest.approx(value, abs=1.1e-5), key


def test_first_stage_scores_as_published(fixed, run_cli, task_dir, tmp_path):
    summary, folder, got, err = run(run_cli, task_dir, tmp_path)
    # BEIR's retrieve returns every query of query.jsonl; pytrec_eval scores those the qrels hold
    expected = authors_metrics({q: first_stage(q) for q in QUERIES})
    assert expected["n"] == 4 and summary["tasks"][0]["n_queries"] == 4  # q2 (all 0) counts, q5 does not
    assert_as_authors(got, expected)
    # the difference is real: without the absent documents and q2 (the former convention) nDCG differs
    import pytrec_eval

    trimmed = {"q1": {"d03": 1, "d07": 2, "d20": 0}, "q3": {"d10": 1, "d11": 1, "d12": 1}, "q4": {"d01": 1, "d29": 1}}
    former = pytrec_eval.RelevanceEvaluator(trimmed, {"ndcg_cut.10"}).evaluate({q: first_stage(q) for q in trimmed})
    assert round(sum(s["ndcg_cut_10"] for s in former.values()) / 3, 5) != pytest.approx(got["ndcg_at_10"], abs=1e-3)
    assert set(ResultsFolder(folder).per_query_scores("R2MEDBiologyRetrieval")) == {"q1", "q2", "q3", "q4"}
    assert "2 " in err and "rows (2 relevant) name documents missing from the corpus; kept" in err
    assert "1 of 4 evaluated queries have no relevant document; they score 0" in err
    assert "1 of 5 queries have no judgment" in err and "ignored 1 " in err


def test_task_data_keeps_absent_documents_and_all_zero_queries(task_dir):
    from r2med_tasks.tasks.loading import load_local

    data = load_local(task_dir / "Biology")
    assert [q.id for q in data.queries] == ["q1", "q2", "q3", "q4"]
    assert data.qrels["q1"] == {"d03": 1, "d07": 2, "ghost-1": 1, "d20": 0}
    assert data.qrels["q2"] == {"d05": 0, "d06": 0} and "qx" not in data.qrels and "q5" not in data.qrels


def test_read_qrels_keeps_every_judgment(task_dir):
    from r2med_tasks.tasks.validation import read_qrels

    table = read_qrels(task_dir / "Biology" / "qrels.jsonl")
    assert table["q2"] == {"d05": 0, "d06": 0} and table["q3"]["ghost-2"] == 2


def test_fuse_scores_as_published(plugins, task_dir, tmp_path):
    """r2med fuse with a qrels file: the judgments whole; fusing a run with itself keeps its order."""
    from r2med_tasks.api import fuse_runs
    from r2med_tasks.scoring.runs import write_trec

    ranked = {q: dict(sorted(first_stage(q).items(), key=lambda kv: -kv[1])) for q in QUERIES}
    a, b = tmp_path / "a.trec", tmp_path / "b.trec"
    write_trec(a, ranked, "a")
    write_trec(b, ranked, "b")
    fused = fuse_runs([a, b], qrels=task_dir / "Biology" / "qrels.jsonl", output=tmp_path / "fused",
                      cache_dir=tmp_path / "cache")
    (outcome,) = fused.values()
    assert outcome.n_queries == 4  # q2 (all 0) counts, q5 does not
    result = json.loads((Path(outcome.results_dir) / f"{outcome.task}.json").read_text())
    got = result["scores"]["test"][0]
    expected = authors_metrics({q: first_stage(q) for q in QUERIES})
    for k in (1, 3, 5, 10):  # RRF's scores differ, its order does not: the cut-off measures agree
        assert got[f"ndcg_at_{k}"] == pytest.approx(expected[f"ndcg_at_{k}"], abs=1.1e-5)
        assert got[f"recall_at_{k}"] == pytest.approx(expected[f"recall_at_{k}"], abs=1.1e-5)


def test_reranked_run_is_the_reranked_list(fixed, evaluate, task_dir):
    """45cbac5's reranker_by_dense: the top-k of the first stage, re-scored; nothing below them."""
    folder, got = run_api(evaluate, task_dir, "fixed-rerank", rerank_k=10)
    init = {q: dict(sorted(first_stage(q).items(), key=lambda kv: -kv[1])[:100]) for q in QUERIES}
    new = {q: {d: rerank_score(q, d) for d in list(docs)[:10]} for q, docs in init.items()}
    expected = authors_metrics(new)
    assert_as_authors(got, expected)
    trec = (folder / "R2MEDBiologyRetrieval.trec").read_text().splitlines()
    assert len(trec) == 4 * 10
    record = ResultsFolder(folder).record()
    assert record["config"]["reranker"]["options"] == {"keep_tail": False, "rerank_k": 10}


def test_keep_tail_keeps_the_first_stage_below(fixed, evaluate, task_dir):
    """-o keep_tail=true: the reranked top-k, then the first stage's other documents in its order;
    a variant of its own (folder and identity), never mistaken for the published setting."""
    default_folder, default = run_api(evaluate, task_dir, "fixed-rerank")
    folder, got = run_api(evaluate, task_dir, "fixed-rerank", keep_tail=True)
    assert folder != default_folder and folder.name == "fixed-rerank.keep_tail_True"
    results = {}
    for q in QUERIES:
        order = [d for d, _ in sorted(first_stage(q).items(), key=lambda kv: -kv[1])]
        head = sorted(order[:10], key=lambda d: -rerank_score(q, d))
        results[q] = {d: float(len(order) - i) for i, d in enumerate(head + order[10:])}
    expected = authors_metrics(results)
    assert_as_authors(got, expected)
    assert got["ndcg_at_10"] == default["ndcg_at_10"] and got["recall_at_100"] != default["recall_at_100"]
    record = ResultsFolder(folder).record()
    assert record["config"]["reranker"]["options"]["keep_tail"] is True
    assert record["experiment_kwargs"] == {"fixed-rerank.keep_tail": True}
    identity = ResultsFolder(folder).identity("R2MEDBiologyRetrieval")
    assert identity["scoring"] == "full-qrels/all-judged-queries"


def test_keep_tail_is_a_reranker_option(fixed, run_cli, task_dir, tmp_path):
    code, _, err = run_cli("run", "--plugin", "fixed", "-o", "keep_tail=true", "--data-dir", task_dir,
                           "--tasks", "Biology", "--output", tmp_path / "out")
    assert code == 2 and "no selected component accepts 'keep_tail'" in err


def test_keep_tail_is_the_harness_s(register):
    from pydantic import create_model

    from r2med_tasks.components.specs import RerankerSpec

    made = []
    spec = RerankerSpec(name="r", factory=lambda options: made.append(options) or FixedReranker(options),
                        options=FixedRerankOptions)
    assert "keep_tail" in spec.option_fields() and spec.defaults["keep_tail"] is False
    assert spec.create({"keep_tail": True}).rerank_k == 10
    assert made[0].model_dump() == {"rerank_k": 10}  # the stage's option never reaches the reranker
    with pytest.raises(TypeError, match="option 'keep_tail' is the harness's"):
        RerankerSpec(name="r", factory=FixedReranker, options=create_model("X", __base__=Options,
                                                                           keep_tail=(bool, False)))


@pytest.mark.parametrize("keep_tail", [False, True])
def test_mteb_search_model_follows_keep_tail(fixed, plugins, tmp_path, keep_tail):
    """mteb.evaluate's path (``as_mteb_model``) returns what r2med-run scores."""
    from types import SimpleNamespace

    from r2med_tasks.tasks.taskdata import Corpus
    from r2med_tasks.running.mteb_model import SearchModel
    from r2med_tasks.running.pipelines import base_context, build_pipeline, instantiate
    from r2med_tasks.running.registry import build_registry

    reg = build_registry(plugins)
    pipeline = build_pipeline(reg, ["fixed", "fixed-rerank"], [f"keep_tail={str(keep_tail).lower()}"])
    instantiate(pipeline, reg)
    model = SearchModel(pipeline, base_context(reg, cache_dir=tmp_path), lambda name: None)
    model._corpus = Corpus(DOCS, [f"document {d}" for d in DOCS], "x")
    out = model.search({"id": QUERIES, "text": QUERIES}, task_metadata=SimpleNamespace(name="R2MEDBiologyRetrieval"))
    for q in QUERIES:
        order = [d for d, _ in sorted(first_stage(q).items(), key=lambda kv: -kv[1])]
        head = sorted(order[:10], key=lambda d: -rerank_score(q, d))
        got = [d for d, _ in sorted(out[q].items(), key=lambda kv: -kv[1])]
        assert got == (head + order[10:] if keep_tail else head)
