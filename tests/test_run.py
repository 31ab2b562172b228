"""End to end: results mteb loads, scores equal to pytrec_eval's, distinct folders, resume after a kill."""

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from conftest import Forked, qrels_of, read_jsonl, wait_until
from r2med_tasks.results.folder import ResultsFolder
from r2med_tasks.scoring.runs import read_trec


def only(folders: list[str]) -> str:
    """The one results folder of a run (or a plan) on data of one kind (hub or local)."""
    assert len(folders) == 1, folders
    return str(folders[0])


@pytest.fixture
def overlap(register):
    import overlap_plugin

    return register(overlap_plugin, "overlap-plugin")


def test_st_on_data_dir_writes_mteb_results(small_model_path, evaluate, data_dir, tmp_path):
    """The issue's acceptance run: st + MiniLM (one layer of it) on an R2MED-layout folder."""
    import mteb
    from mteb.results import TaskResult
    from sentence_transformers import SentenceTransformer

    model_path = small_model_path
    output = tmp_path / "results"
    outcome = evaluate("st", model=str(model_path), data_dir=data_dir, tasks="Biology", output=output)
    (folder,) = map(Path, outcome.results_dirs)
    assert folder.parent.parent == output / "local-data"  # results on local data: their own tree

    # mteb reads the folder as its own cache (the local-data tree laid out as a cache's results/)
    view = tmp_path / "mteb-view"
    view.mkdir()
    (view / "results").symlink_to(output / "local-data", target_is_directory=True)
    loaded = mteb.ResultCache(view).load_results(include_remote=False)
    (model_result,) = loaded.model_results
    assert model_result.model_name == outcome.model_name and model_result.model_revision == outcome.revision
    result = TaskResult.from_disk(folder / "R2MEDBiologyRetrieval.json")
    assert result.task_name == "R2MEDBiologyRetrieval"
    scores = result.scores["test"][0]
    assert scores["hf_subset"] == "default" and scores["languages"] == ["eng-Latn"]
    assert {f"{m}_at_{k}" for m in ("ndcg", "map", "recall", "precision", "mrr") for k in (1, 3, 5, 10, 20, 100, 1000)} <= set(scores)
    assert result.dataset_revision.startswith("sha256-")

    # ndcg@10 equals pytrec_eval's on the written .trec file and the qrels
    run = read_trec(folder / "R2MEDBiologyRetrieval.trec")
    qrels = qrels_of(data_dir / "Biology")
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
    assert scores["ndcg_at_10"] == pytest.approx(np.mean([s["ndcg_cut_10"] for s in reference.values()]), abs=5e-6)
    assert scores["recall_at_100"] == pytest.approx(np.mean([s["recall_100"] for s in reference.values()]), abs=5e-6)

    # per-query file agrees with pytrec_eval query by query
    lines = (folder / "R2MEDBiologyRetrieval.per_query.tsv").read_text().splitlines()
    assert lines[0].split("\t")[:2] == ["query_id", "ndcg_at_10"]
    per_query = {row.split("\t")[0]: float(row.split("\t")[1]) for row in lines[1:]}
    assert per_query == pytest.approx({q: s["ndcg_cut_10"] for q, s in reference.items()})

    # the run is cosine top-k, checked against a brute-force numpy computation
    model = SentenceTransformer(str(model_path), device="cpu")
    corpus = read_jsonl(data_dir / "Biology" / "corpus.jsonl")
    queries = read_jsonl(data_dir / "Biology" / "query.jsonl")
    d = model.encode([c["text"] for c in corpus])
    q = model.encode([x["text"] for x in queries])
    cos = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T
    for i, query in enumerate(queries):
        expected = [corpus[j]["id"] for j in np.argsort(-cos[i], kind="stable")]
        assert list(run[query["id"]]) == expected  # 48 documents < top-k: all of them, best first
        assert list(run[query["id"]].values()) == pytest.approx(np.sort(cos[i])[::-1], abs=1e-5)

    # model_meta.json is mteb's ModelMeta
    meta = json.loads((folder / "model_meta.json").read_text())
    assert meta["name"] == outcome.model_name and meta["revision"] == outcome.revision


def test_trec_file_format(overlap, evaluate):
    outcome = evaluate("overlap", top_k=5)
    lines = (Path(only(outcome.results_dirs)) / "R2MEDSampleRetrieval.trec").read_text().splitlines()
    assert len(lines) == 10 * 5
    qid, q0, _doc, rank, score, tag = lines[0].split()
    assert (qid, q0, rank, tag) == ("q01", "Q0", "1", "overlap")
    assert float(score) >= float(lines[1].split()[4])  # a number, the best first


def test_scores_against_independent_overlap_computation(overlap, evaluate):
    """A run whose scores the test computes itself: nDCG@10 equals pytrec_eval on that run."""
    from conftest import SAMPLE
    from overlap_plugin import words

    results = evaluate("overlap")
    corpus = read_jsonl(SAMPLE / "corpus.jsonl")
    run = {}
    for q in read_jsonl(SAMPLE / "query.jsonl"):
        scored = sorted(((float(len(words(q["text"]) & words(c["text"]))), i) for i, c in enumerate(corpus)),
                        key=lambda x: (-x[0], x[1]))[:100]
        run[q["id"]] = {corpus[i]["id"]: s for s, i in scored}
    ev = pytrec_eval.RelevanceEvaluator(qrels_of(SAMPLE), {"ndcg_cut.10"}).evaluate(run)
    expected = np.mean([v["ndcg_cut_10"] for v in ev.values()])
    assert results["R2MEDSampleRetrieval"].ndcg_at_10 == pytest.approx(expected, abs=5e-6)


def test_pipelines_never_share_a_folder(overlap, evaluate):
    def folder(**options):
        return only(evaluate("overlap", **options).results_dirs)

    default = folder()
    # a bare retriever keeps its own name and revision; without model_meta(), its package's namespace
    assert default.endswith("overlap-plugin__overlap/1.0")
    bonus = folder(bonus=0.5)
    topk = folder(top_k=50)
    # option variants are mteb experiments of the same model and revision, never revision suffixes
    assert bonus == f"{default}/experiments/bonus_0.5" and topk == f"{default}/experiments/top_k_50"
    assert folder(options={"overlap.bonus": 0.5}) == bonus  # same pipeline, same folder
    record = ResultsFolder(Path(bonus)).record()
    assert record["config"]["retriever"]["options"] == {"bonus": 0.5} and record["config"]["top_k"] == 100
    assert record["label"] == "overlap (bonus=0.5)" and record["experiment_kwargs"] == {"bonus": 0.5}
    assert json.loads((Path(bonus) / "model_meta.json").read_text())["experiment_kwargs"] == {"bonus": 0.5}


def test_runtime_options_do_not_change_the_folder(small_model_path, evaluate):
    first = evaluate("st", model=str(small_model_path))
    second = evaluate("st", model=str(small_model_path), batch_size=7, device="cpu")
    prompted = evaluate("st", model=str(small_model_path), query_prompt="query: ")
    assert only(first.results_dirs) == only(second.results_dirs) != only(prompted.results_dirs)
    assert second["R2MEDSampleRetrieval"].status == "cached"
    assert first.model_name == "local/minilm-l1"  # a local folder's model is named after the folder


def test_named_model_uses_mteb_model_meta(small_model_path, evaluate):
    """Naming a local copy as the hub model files results under mteb's name, with mteb's metadata."""
    folder = Path(only(evaluate("st", model=str(small_model_path),
                                name="sentence-transformers/all-MiniLM-L6-v2").results_dirs))
    assert folder.parent.name == "sentence-transformers__all-MiniLM-L6-v2"
    meta = json.loads((folder / "model_meta.json").read_text())
    assert meta["embed_dim"] == 384 and meta["revision"] == folder.name


def test_rerun_skips_finished_tasks_and_overwrite_recomputes(overlap, evaluate, data_dir, tmp_path, monkeypatch):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("R2MED_TEST_LOG", str(log))
    first = evaluate("overlap", tasks=None, data_dir=data_dir)  # the three task folders found
    second = evaluate("overlap", tasks=None, data_dir=data_dir)
    assert [t.status for t in second.values()] == ["cached"] * 3
    assert [t.ndcg_at_10 for t in first.values()] == [t.ndcg_at_10 for t in second.values()]
    assert log.read_text().count("index") == 3
    third = evaluate("overlap", tasks=None, data_dir=data_dir, overwrite=True)
    assert [t.status for t in third.values()] == ["computed"] * 3
    assert log.read_text().count("index") == 6


@pytest.mark.process  # the killed run is a process
def test_killed_run_resumes_without_recomputing(evaluate, data_dir, tmp_path, monkeypatch):
    """SIGKILL during the second of three tasks; the rerun computes only what was not finished.
    Only the killed run needs a process of its own; the reference and the rerun run in this one,
    with the plugin loaded as the killed process loads it (R2MED_PLUGINS)."""
    from r2med_tasks.running import discovery as plugins_module

    monkeypatch.setenv("R2MED_PLUGINS", "overlap_plugin")
    monkeypatch.setattr(plugins_module, "_plugins", None)
    log = tmp_path / "calls.log"
    args = ["run", "--plugin", "overlap", "--data-dir", str(data_dir)]

    evaluate("overlap", tasks=None, data_dir=data_dir, output="reference")

    proc = Forked([*args, "--output", tmp_path / "resumed"], env={
        "R2MED_LOAD_PLUGINS": "", "R2MED_TEST_LOG": str(log), "R2MED_TEST_BLOCK_ON": "R2MEDBioinformaticsRetrieval"})
    ready = Path(str(log) + ".ready")
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert ready.exists(), "the run never reached the second task"
    proc.kill()
    folder = next((tmp_path / "resumed").glob("local-data/*/*"))
    assert (folder / "R2MEDBiologyRetrieval.json").exists()
    assert not (folder / "R2MEDBioinformaticsRetrieval.json").exists()
    finished = {p: p.stat().st_mtime_ns for p in folder.glob("R2MEDBiology*")}

    monkeypatch.setenv("R2MED_TEST_LOG", str(log))
    resumed = evaluate("overlap", tasks=None, data_dir=data_dir, output="resumed")
    assert [t.status for t in resumed.values()] == ["cached", "computed", "computed"]
    assert log.read_text().splitlines() == [
        "index R2MEDBiologyRetrieval", "index R2MEDBioinformaticsRetrieval",  # the killed run
        "index R2MEDBioinformaticsRetrieval", "index R2MEDMedicalSciencesRetrieval",  # the rerun
    ]
    assert {p: p.stat().st_mtime_ns for p in folder.glob("R2MEDBiology*")} == finished

    ref_folder = next((tmp_path / "reference").glob("local-data/*/*"))
    for task in ("R2MEDBiologyRetrieval", "R2MEDBioinformaticsRetrieval", "R2MEDMedicalSciencesRetrieval"):
        for suffix in (".trec", ".per_query.tsv"):
            assert (folder / f"{task}{suffix}").read_text() == (ref_folder / f"{task}{suffix}").read_text()
        ours = json.loads((folder / f"{task}.json").read_text())
        theirs = json.loads((ref_folder / f"{task}.json").read_text())
        assert ours["scores"] == theirs["scores"] and ours["dataset_revision"] == theirs["dataset_revision"]
    assert not list(folder.glob("*.json.*")), "no temp file may stay behind as a result"


@pytest.mark.parametrize("extra", [[], ["--dry-run"]])
def test_folder_of_another_pipeline_is_refused(overlap, evaluate, run_cli, tmp_path, extra):
    pipeline_file = Path(only(evaluate("overlap", output=tmp_path).results_dirs)) / "r2med" / "pipeline.json"
    data = json.loads(pipeline_file.read_text())
    data["config"]["retriever"]["options"]["bonus"] = 9.0
    pipeline_file.write_text(json.dumps(data))
    code, _, err = run_cli("run", "--plugin", "overlap", "--tasks", "sample", "--output", tmp_path, *extra)
    assert code == 2 and "holds results of a different configuration" in err
    assert json.loads(pipeline_file.read_text()) == data  # the other pipeline's claim stays


def test_summary_table(overlap, run_cli, data_dir, tmp_path):
    code, out, _ = run_cli("run", "--plugin", "overlap", "--data-dir", data_dir, "--output", tmp_path)
    assert code == 0
    assert "Biology" in out and "Medical-Sciences" in out and "Average of 3 tasks" in out


def test_dry_run_plans_without_loading_or_writing(overlap, run_cli, evaluate, data_dir, tmp_path, monkeypatch):
    from r2med_tasks.tasks.specs import TaskSpec

    log = tmp_path / "calls.log"
    monkeypatch.setenv("R2MED_TEST_LOG", str(log))
    out_dir = tmp_path / "out"
    args = ["run", "--plugin", "overlap", "--data-dir", data_dir, "--output", out_dir, "--json"]
    with monkeypatch.context() as m:
        m.setattr(TaskSpec, "load", lambda *a, **k: pytest.fail("a dry run loaded data"))
        code, out, err = run_cli(*args, "--dry-run")
    assert code == 0, err
    plan = json.loads(out)
    assert not out_dir.exists() and not log.exists()
    assert [t["status"] for t in plan["tasks"]] == ["compute"] * 3
    assert plan["stages"] == [{"kind": "retriever", "component": "overlap", "plugin": "overlap-plugin", "options": {}}]

    ran = evaluate("overlap", tasks=["Biology", "Medical-Sciences"], data_dir=data_dir, output=out_dir)
    assert ran.results_dirs == plan["results_dirs"]  # the folder the plan named
    code, out, _ = run_cli(*args, "--dry-run")
    assert [t["status"] for t in json.loads(out)["tasks"]] == ["reuse", "compute", "reuse"]
    code, out, _ = run_cli(*args, "--dry-run", "--overwrite")
    assert [t["status"] for t in json.loads(out)["tasks"]] == ["compute"] * 3
    code, out, _ = run_cli("run", "--plugin", "overlap", "--data-dir", data_dir, "--output", out_dir, "--dry-run")
    assert code == 0 and "reuse its results" in out and only(plan["results_dirs"]) in out.replace("\n", "")


def test_dry_run_names_the_folders_a_reranking_run_writes(overlap, run_cli, tmp_path):
    """The first stage is saved under the bare retriever's own folder; the reranked run under its own."""
    base = ["run", "--tasks", "sample", "--output", tmp_path, "--json", "--dry-run"]
    plan = json.loads(run_cli(*base, "--plugin", "overlap", "--plugin", "bge-reranker")[1])
    alone = json.loads(run_cli(*base, "--plugin", "overlap")[1])
    assert only(plan["first_stage_dirs"]) == only(alone["results_dirs"]) != only(plan["results_dirs"])
    assert plan["pipeline"] == "overlap + bge-reranker-v2-m3" and [s["kind"] for s in plan["stages"]] == ["retriever", "reranker"]



def test_dry_run_downloads_nothing_and_restores_the_hub_setting(run_cli, tmp_path, monkeypatch):
    """Inside a dry run the hub is offline (a model not in the cache is an error, not a download);
    afterwards the process's own setting is back."""
    import huggingface_hub
    import huggingface_hub.constants as constants

    seen = []

    def snapshot_download(repo_id, **kwargs):
        seen.append((constants.HF_HUB_OFFLINE, os.environ.get("HF_HUB_OFFLINE")))
        raise huggingface_hub.errors.LocalEntryNotFoundError("not in the cache")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    code, _, err = run_cli("run", "--plugin", "st", "-o", "model=nobody/not-cached", "--tasks", "sample",
                           "--output", tmp_path, "--dry-run")
    assert code == 2 and "st: cannot get model nobody/not-cached" in err
    assert seen == [(True, "1")]
    assert constants.HF_HUB_OFFLINE is False and os.environ["HF_HUB_OFFLINE"] == "0"


class Screen:
    """A terminal that records what was written to it and where each write ended."""

    def __init__(self) -> None:
        self.text, self.ends = "", []

    def write(self, text: str) -> int:
        self.text += text
        self.ends.append(len(self.text))
        return len(text)

    def flush(self) -> None:
        pass

    def getvalue(self) -> str:
        return self.text


class ReportsRetries:
    """A retriever whose requests wait to retry while it indexes: on ``context.retries``, the line
    a client of the run shows its retries on (``ShowsRetries``)."""

    lines: list = []
    screen = None
    cleared_at = 0  # where the first frame drawn wholly after the line was cleared begins

    def index(self, corpus, *, task, context):
        self.lines.append(context.retries)
        if len(self.lines) == 1:
            context.retries.update(1, "retry 1 of 6 in 0.2 s: HTTP 503 Service Unavailable (http://127.0.0.1:9/v1)")
            wait_until(lambda: self.screen.getvalue().count("HTTP 503 Service Unavailable") >= 2)  # two refreshes
            context.retries.update(1, None)
            writes = len(self.screen.ends)  # a frame being drawn now may still hold the line
            wait_until(lambda: len(self.screen.ends) >= writes + 2)
            ReportsRetries.cleared_at = self.screen.ends[writes]

    def search(self, queries, *, task, top_k, context):
        self.lines.append(context.retries)
        return {q.id: {} for q in queries}


def test_a_runs_api_retries_are_one_row_of_its_display(register, data_dir, tmp_path):
    """The runner gives every call of a run one ``RetryLine``, shown as a row of its progress
    display while a request waits (not a printed line), and gone once none waits."""
    from rich.console import Console

    import r2med_tasks as r2med
    from r2med_tasks.api import registry
    from r2med_tasks.components.specs import RetrieverSpec
    from r2med_tasks.components.context import Context
    from r2med_tasks.components.hookspecs import hookimpl
    from r2med_tasks.running.runner import run_pipeline

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="reports-retries", factory=lambda options: ReportsRetries()))

    register(Plugin())
    screen = Screen()
    ReportsRetries.lines, ReportsRetries.screen = [], screen
    tasks = registry().tasks(["Biology", "Bioinformatics"])
    run_pipeline(r2med.pipeline("reports-retries"), tasks, output=tmp_path / "out", data_dir=data_dir, overwrite=False,
                 context=Context(tmp_path / "cache"), console=Console(file=screen, force_terminal=True, width=200))
    assert len(ReportsRetries.lines) == 4 and all(line is ReportsRetries.lines[0] for line in ReportsRetries.lines)
    assert ReportsRetries.lines[0].waiting == {}
    shown = screen.getvalue()
    assert shown.count("HTTP 503 Service Unavailable") >= 2  # a row, redrawn on each refresh while it waits
    assert "HTTP 503" not in shown[ReportsRetries.cleared_at:] and len(shown) > ReportsRetries.cleared_at + 100
