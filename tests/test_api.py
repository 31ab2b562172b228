"""The Python API: ``evaluate`` as ``r2med-run`` runs it (same scores, folders, resume), any
sentence-transformers object or retriever object, and r2med retrievers inside ``mteb.evaluate``."""

import json
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl


def cli_score(run_cli, *args) -> dict:
    code, out, err = run_cli("run", *map(str, args), "--json")
    assert code == 0, err
    return json.loads(out)


def one_dir(dirs) -> Path:
    """The one results folder of a run (a RunOutcome's or a --json summary's ``results_dirs``)."""
    assert len(dirs) == 1, dirs
    return Path(dirs[0])


def test_evaluate_a_component_by_name_writes_and_resumes_as_the_cli(plugins, run_cli, tmp_path):
    import r2med_tasks as r2med

    res = r2med.evaluate("bm25", tasks="sample", output=tmp_path / "api", cache_dir=tmp_path / "c")
    score = res["R2MEDSampleRetrieval"]
    assert score.status == "computed" and score.n_queries == 10 and score.official_data is False
    cli = cli_score(run_cli, "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path / "cli",
                    "--cache-dir", tmp_path / "c")
    assert score.ndcg_at_10 == cli["tasks"][0]["ndcg_at_10"]
    assert one_dir(res.results_dirs).relative_to(tmp_path / "api") == one_dir(cli["results_dirs"]).relative_to(
        tmp_path / "cli")
    again = r2med.evaluate("bm25", tasks=["sample"], output=tmp_path / "api", cache_dir=tmp_path / "c")
    assert again["R2MEDSampleRetrieval"].status == "cached" and list(again) == ["R2MEDSampleRetrieval"]
    assert again["sample"] == again["Sample"] == again["R2MEDSampleRetrieval"]  # as --tasks names it, too
    with pytest.raises(KeyError):
        again["Biology"]
    result = again.task_results()["R2MEDSampleRetrieval"]
    assert result.scores["test"][0]["ndcg_at_10"] == score.ndcg_at_10  # mteb's TaskResult from disk


def test_evaluate_a_pipeline_with_options(plugins, run_cli, tmp_path):
    import r2med_tasks as r2med

    res = r2med.evaluate(r2med.pipeline("bm25", k1=1.2, b=0.75), tasks="sample", output=tmp_path / "api",
                         cache_dir=tmp_path / "c")
    cli = cli_score(run_cli, "--plugin", "bm25", "-o", "k1=1.2", "-o", "b=0.75", "--tasks", "sample",
                    "--output", tmp_path / "cli", "--cache-dir", tmp_path / "c")
    assert res.label == cli["label"] == "BM25 (b=0.75, k1=1.2)"
    assert res["R2MEDSampleRetrieval"].ndcg_at_10 == cli["tasks"][0]["ndcg_at_10"]


def test_evaluate_mistakes_raise_user_errors(plugins, tmp_path):
    import r2med_tasks as r2med

    with pytest.raises(r2med.UserError, match="no-such"):
        r2med.evaluate("no-such-retriever", tasks="sample", output=tmp_path)
    with pytest.raises(r2med.UserError, match="k1"):
        r2med.pipeline("bm25", options={"bm25.k1": "many"})
    with pytest.raises(r2med.UserError, match="not a component name"):
        r2med.evaluate(42, tasks="sample", output=tmp_path)


def test_a_sentence_transformer_object_scores_exactly_as_the_cli(plugins, small_model_path, run_cli, tmp_path):
    from sentence_transformers import SentenceTransformer

    import r2med_tasks as r2med

    model_path = small_model_path
    model = SentenceTransformer(str(model_path), device="cpu")
    res = r2med.evaluate(model, tasks="sample", output=tmp_path / "api", cache_dir=tmp_path / "c")
    cli = cli_score(run_cli, "--plugin", "st", "-o", f"model={model_path}", "--tasks", "sample",
                    "--output", tmp_path / "cli", "--cache-dir", tmp_path / "c2")
    assert res["R2MEDSampleRetrieval"].ndcg_at_10 == cli["tasks"][0]["ndcg_at_10"]
    ours = (one_dir(res.results_dirs) / "R2MEDSampleRetrieval.trec").read_text().splitlines()
    theirs = (one_dir(cli["results_dirs"]) / "R2MEDSampleRetrieval.trec").read_text().splitlines()
    assert [line.split()[:5] for line in ours] == [line.split()[:5] for line in theirs]  # the same run
    # the object is identified by its weights: a changed model is another revision, never a reuse
    with __import__("torch").no_grad():
        next(model.parameters()).add_(0.01)
    changed = r2med.evaluate(model, tasks="sample", output=tmp_path / "api", cache_dir=tmp_path / "c")
    assert one_dir(changed.results_dirs) != one_dir(res.results_dirs)
    assert changed["R2MEDSampleRetrieval"].status == "computed"


class Recorder:
    """A third-party retriever that knows nothing of rewriters: it reads ``Query.text`` only."""

    def __init__(self):
        self.seen = {}

    def index(self, corpus, *, task, context):
        self.ids = corpus.ids

    def search(self, queries, *, task, top_k, context):
        self.seen.update({q.id: q.text for q in queries})
        return {q.id: {doc: 1.0 / (i + 1) for i, doc in enumerate(self.ids[:top_k])} for q in queries}


def test_a_retriever_object_is_evaluated(plugins, tmp_path):
    import r2med_tasks as r2med

    recorder = Recorder()
    res = r2med.evaluate(recorder, tasks="sample", output=tmp_path, cache_dir=tmp_path / "c")
    assert set(recorder.seen) == {q["id"] for q in read_jsonl(SAMPLE / "query.jsonl")}
    assert 0 <= res["R2MEDSampleRetrieval"].ndcg_at_10 <= 1


def test_a_retriever_without_combination_gets_the_generated_documents_by_the_default_rule(register, tmp_path):
    """hyde + a retriever that declares no combination of its own: it searches with what the
    published BM25 runs searched with (for HyDE: the generated document alone), never the bare query."""
    from test_gar import QUERIES, hy_doc, published_dir

    from r2med_tasks.components.specs import RetrieverSpec
    from r2med_tasks.components.hookspecs import hookimpl

    import r2med_tasks as r2med

    recorder = Recorder()

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="recorder", factory=lambda options: recorder))

    register(Plugin(), "recorder-plugin")
    data = published_dir(tmp_path, "hyde", "qwen-7b")
    r2med.evaluate(r2med.pipeline("hyde", "recorder", source="qwen-7b"), tasks="Biology", data_dir=data,
                   output=tmp_path / "out", cache_dir=tmp_path / "c")
    assert recorder.seen == {q["id"]: hy_doc(q) for q in QUERIES}

    data = published_dir(tmp_path / "q2d", "query2doc", "gpt4")
    r2med.evaluate(r2med.pipeline("query2doc", "recorder", source="gpt4"), tasks="Biology", data_dir=data,
                   output=tmp_path / "out", cache_dir=tmp_path / "c")
    assert recorder.seen == {q["id"]: q["text"] * 2 + " " + hy_doc(q) for q in QUERIES}


@pytest.mark.model  # mteb's evaluation loads torch and sentence-transformers
def test_mteb_evaluate_runs_an_r2med_retriever(plugins, tmp_path):
    import mteb

    import r2med_tasks as r2med
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    ours = r2med.evaluate("bm25", tasks="sample", output=tmp_path / "ours", cache_dir=tmp_path / "c")
    result = mteb.evaluate(r2med.as_mteb_model("bm25"), SAMPLE_TASK.to_mteb_task(), cache=None, co2_tracker=False,
                           show_progress_bar=False)
    theirs = result.task_results[0].scores["test"][0]
    assert theirs["ndcg_at_10"] == pytest.approx(ours["R2MEDSampleRetrieval"].ndcg_at_10, abs=1e-12)
    saved = json.loads((one_dir(ours.results_dirs) / "R2MEDSampleRetrieval.json").read_text())["scores"]["test"][0]
    assert theirs["recall_at_100"] == pytest.approx(saved["recall_at_100"], abs=1e-12)


def test_as_mteb_model_refuses_a_composite_and_names_evaluate(plugins):
    """mteb gives a search model one task's corpus and queries; a composite (hybrid) needs its
    members' saved runs, so the error says which API evaluates it."""
    import r2med_tasks as r2med

    with pytest.raises(r2med.UserError) as refused:
        r2med.as_mteb_model(r2med.pipeline("hybrid", members="bm25,st"))
    assert "'hybrid'" in str(refused.value) and "r2med_tasks.evaluate" in str(refused.value)
    assert r2med.as_mteb_model("bm25") is not None  # an ordinary retriever still is one


def test_the_lines_a_run_prints_reach_on_message_as_plain_text(plugins, tmp_path):
    """A component's log line and the runner's warning, as the CLI prints them, without markup;
    progress=True and on_message together are one UserError."""
    import r2med_tasks as r2med

    class Silent:
        def index(self, corpus, *, task, context):
            context.log("indexed [b]10[/b] documents")

        def search(self, queries, *, task, top_k, context):
            return {q.id: {} for q in queries}  # no query gets a document: the runner warns

    lines: list[str] = []
    r2med.evaluate(Silent(), tasks="sample", output=tmp_path / "out", cache_dir=tmp_path / "cache",
                   on_message=lines.append)
    assert "indexed [b]10[/b] documents" in lines
    (warning,) = [line for line in lines if line.startswith("warning:")]
    assert "R2MEDSampleRetrieval: 10 queries got no documents" in warning and "[yellow]" not in warning
    with pytest.raises(r2med.UserError, match="give one or the other"):
        r2med.evaluate("bm25", tasks="sample", output=tmp_path / "out", progress=True, on_message=print)


def test_evaluate_is_quiet_even_where_transformers_would_show_its_loading_bars(evaluate, small_model_path, capfd):
    """The bar transformers draws while it loads weights ("Loading weights: 100%") stays off in a
    quiet evaluate(), though something had turned such bars on (the rerankers load through the
    same switch, plugins/local_models.py)."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    evaluate("st", model=str(small_model_path))
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err + captured.out
