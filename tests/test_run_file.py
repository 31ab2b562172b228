"""``run-file``: runs made elsewhere are scored as pytrec_eval scores the file itself, read back from
r2med's own results unchanged, reranked like any first stage, and refused in one line when they
do not fit the task."""

import random
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from conftest import SAMPLE, qrels_of, read_jsonl, read_ranking

DOCS = [d["id"] for d in read_jsonl(SAMPLE / "corpus.jsonl")]
QUERIES = [q["id"] for q in read_jsonl(SAMPLE / "query.jsonl")]


def write_run(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def random_run(seed: int, depth: int = 30) -> list[str]:
    """Scores with many ties, and rank columns that disagree with them (trec_eval goes by score)."""
    rng = random.Random(seed)
    lines = []
    for qid in QUERIES:
        docs = rng.sample(DOCS, depth)
        for rank, doc in enumerate(docs, 1):
            lines.append(f"{qid} Q0 {doc} {rank} {rng.choice([0.5, 1.0, 1.5, 2.0, 2.5])} other-system")
    return lines


TREC = "R2MEDSampleRetrieval.trec"


def folder(results) -> Path:
    """The one results folder of a run (r2med_tasks.RunOutcome) on data of one kind."""
    (path,) = results.results_dirs
    return Path(path)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_equal_pytrec_eval_on_the_file(evaluate, tmp_path, seed):
    """The run's scores are pytrec_eval's on the file, which the test parses itself: the package's
    reader is part of what is tested, so it cannot also give the reference."""
    from mteb.results import TaskResult

    path = write_run(tmp_path / "system.trec", random_run(seed))
    results = evaluate("run-file", path=str(path))
    assert results.display_name == "system"
    runs = {}
    for line in path.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        runs.setdefault(qid, {})[doc] = float(score)
    metrics = {"ndcg_cut.10", "recall.100", "map_cut.10"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels_of(SAMPLE), metrics).evaluate(runs)
    expected = {m: np.mean([v[m] for v in per_query.values()]) for m in ("ndcg_cut_10", "recall_100", "map_cut_10")}
    scores = TaskResult.from_disk(folder(results) / "R2MEDSampleRetrieval.json").scores["test"][0]
    assert scores["ndcg_at_10"] == pytest.approx(expected["ndcg_cut_10"], abs=1e-5)
    assert scores["recall_at_100"] == pytest.approx(expected["recall_100"], abs=1e-5)
    assert scores["map_at_10"] == pytest.approx(expected["map_cut_10"], abs=1e-5)


def test_reading_back_a_results_folder_reproduces_its_scores(evaluate):
    bm25 = evaluate("bm25")
    again = evaluate("trec", path=str(folder(bm25)))
    assert again.display_name == "BM25"  # the name the folder records
    assert folder(again) != folder(bm25)
    assert again["R2MEDSampleRetrieval"].ndcg_at_10 == bm25["R2MEDSampleRetrieval"].ndcg_at_10
    assert read_ranking(folder(again) / TREC) == read_ranking(folder(bm25) / TREC)


def test_a_run_file_feeds_a_reranker_as_its_retriever_would(evaluate, cross_encoder_path):
    rerank = {"model": str(cross_encoder_path), "rerank_k": 5}
    direct = evaluate("bm25", "cross-encoder", output="direct", **rerank)
    saved = folder(evaluate("bm25", output="saved"))
    via_file = evaluate("run-file", "cross-encoder", output="file", path=str(saved), **rerank)
    assert read_ranking(folder(via_file) / TREC) == read_ranking(folder(direct) / TREC)
    assert via_file.display_name == "BM25 + cross-encoder"


def test_folder_of_task_files_by_alias(evaluate, tmp_path, data_dir):
    lines = random_run(3)
    write_run(tmp_path / "runs" / "biology.trec", lines)
    write_run(tmp_path / "runs" / "R2MEDBioinformaticsRetrieval.trec", [l for l in lines if l.split()[0] in QUERIES[:6]])
    outcome = evaluate("run-file", path=str(tmp_path / "runs"), data_dir=data_dir, tasks=["Biology", "Bioinformatics"])
    assert [t.n_queries for t in outcome.values()] == [10, 6]


@pytest.mark.parametrize("make, args, message", [
    (lambda p: None, ["-o", "path=nowhere.trec"], "-o run-file.path=nowhere.trec: no such file or folder"),
    (lambda p: p.mkdir(), ["-o", "path=runs"], "-o run-file.path=runs: no *.trec file in that folder"),
    (lambda p: None, [], "retriever 'run-file' needs -o path=FILE.trec"),
    (lambda p: write_run(p / "Biology.trec", random_run(0)), ["-o", "path=runs", "--tasks", "sample"],
     "runs: no run for R2MEDSampleRetrieval (expected R2MEDSampleRetrieval.trec or sample.trec)"),
    (lambda p: write_run(p / "sample.trec", random_run(0)[:-1] + ["q10 Q0 nope 30 1.0 x"]), ["-o", "path=runs"],
     "runs/sample.trec: query 'q10' ranks document 'nope', which is not in the corpus of R2MEDSampleRetrieval"),
    (lambda p: write_run(p / "sample.trec", [l for l in random_run(0) if not l.startswith("q03 ")]), ["-o", "path=runs"],
     "runs/sample.trec: no ranking for 1 of 10 queries of R2MEDSampleRetrieval (e.g. 'q03')"),
    (lambda p: write_run(p / "sample.trec", random_run(0) + ["q01 Q0 x 1"]), ["-o", "path=runs"],
     "runs/sample.trec:301: expected 6 columns"),
])
def test_runs_that_do_not_fit_are_one_line(run_cli, tmp_path, monkeypatch, make, args, message):
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "runs")
    tasks = [] if "--tasks" in args else ["--tasks", "sample"]
    code, _, err = run_cli("run", "--plugin", "run-file", *args, *tasks, "--output", tmp_path / "out")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert message in err, err


def test_one_file_serves_one_task(run_cli, tmp_path, data_dir):
    path = write_run(tmp_path / "biology.trec", random_run(4))
    code, _, err = run_cli("run", "--plugin", "run-file", "-o", f"path={path}", "--data-dir", data_dir,
                           "--tasks", "Biology,Bioinformatics", "--output", tmp_path / "out")
    assert code == 2 and "one run file serves one task" in err
    assert (next((tmp_path / "out").glob("local-data/*/*")) / "R2MEDBiologyRetrieval.json").exists()  # the first task is kept
