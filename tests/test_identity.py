"""Run identity: a stored score is reused, compared or merged only when its data, configuration and
code match; option variants are mteb experiments; folders are locked and never escape --output."""

import json
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

import r2med_tasks as r2med
from conftest import SAMPLE, Forked, board_rows, qrels_of, read_jsonl, write_jsonl
from r2med_tasks.results.folder import ResultsFolder
from r2med_tasks.tasks.specs import R2MED_TASKS


@pytest.fixture
def overlap(register):
    import overlap_plugin

    return register(overlap_plugin, "overlap-plugin")


def overlap_ndcg(folder: Path, bonus: float = 0.0) -> float:
    """nDCG@10 of the overlap retriever on a task folder, computed here: shared-word counts, ties
    by corpus order, top 100, pytrec_eval over the judged queries."""
    from overlap_plugin import words

    corpus = read_jsonl(folder / "corpus.jsonl")
    qrels = {q: d for q, d in qrels_of(folder).items() if any(v > 0 for v in d.values())}
    run = {}
    for q in read_jsonl(folder / "query.jsonl"):
        if q["id"] not in qrels:
            continue
        scored = sorted(((len(words(q["text"]) & words(c["text"])) + bonus, i) for i, c in enumerate(corpus)),
                        key=lambda x: (-x[0], x[1]))[:100]
        run[q["id"]] = {corpus[i]["id"]: float(s) for s, i in scored}
    values = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    return float(np.mean([v["ndcg_cut_10"] for v in values.values()]))


def one_dir(dirs) -> Path:
    """The one results folder of a run (a --json summary's ``results_dirs``)."""
    assert len(dirs) == 1, dirs
    return Path(dirs[0])


def summary(run_cli, *args):
    code, out, err = run_cli("run", *map(str, args), "--json")
    assert code == 0, err
    return json.loads(out), err


def test_edited_qrels_are_recomputed_and_say_what_changed(overlap, run_cli, evaluate, data_dir, tmp_path):
    args = ["--plugin", "overlap", "--data-dir", data_dir, "--output", tmp_path / "out"]
    first = evaluate("overlap", tasks=None, data_dir=data_dir)
    qrels = read_jsonl(data_dir / "Biology" / "qrels.jsonl")
    write_jsonl(data_dir / "Biology" / "qrels.jsonl", [r for r in qrels if r["q_id"] != "q01"] +
                [{"q_id": "q01", "p_id": "s-pharm-01", "score": 1}])

    code, out, err = run_cli("run", *map(str, args), "--dry-run", "--json")
    planned = {t["alias"]: t for t in json.loads(out)["tasks"]}
    assert planned["Biology"]["status"] == "compute" and "data.revision: sha256-" in planned["Biology"]["reason"]
    assert planned["Bioinformatics"]["status"] == "reuse"

    lines: list[str] = []
    second = evaluate("overlap", tasks=None, data_dir=data_dir, on_message=lines.append)
    assert {t.alias: t.status for t in second.values()} == {
        "Biology": "computed", "Bioinformatics": "cached", "Medical-Sciences": "cached"}
    (said,) = [line for line in lines if "recomputing" in line]  # the API hands over the line the CLI prints
    assert said.startswith("Biology: recomputing, data.revision: sha256-")
    new = second["Biology"].ndcg_at_10
    assert new == pytest.approx(overlap_ndcg(data_dir / "Biology"), abs=5e-6)
    assert new != pytest.approx(first["Biology"].ndcg_at_10, abs=1e-4)
    folder = one_dir(second.results_dirs)
    stored = ResultsFolder(folder).identity("R2MEDBiologyRetrieval")
    result = ResultsFolder(folder).task_result(folder / "R2MEDBiologyRetrieval.json")
    assert stored["data"]["revision"] == result["dataset_revision"] and stored["data"]["official"] is False


def test_deleted_qrels_file_is_an_error_not_a_stale_score(overlap, run_cli, evaluate, data_dir, tmp_path):
    args = ["run", "--plugin", "overlap", "--data-dir", data_dir, "--output", tmp_path / "out"]
    assert evaluate("overlap", tasks=None, data_dir=data_dir)["Biology"].status == "computed"
    (data_dir / "Biology" / "qrels.jsonl").unlink()
    code, out, err = run_cli(*args)
    assert code == 2 and "qrels.jsonl: file not found" in err and "Traceback" not in err


def test_changed_code_version_or_option_default_recomputes(overlap, run_cli, evaluate, tmp_path):
    args = ["--plugin", "overlap", "--tasks", "sample", "--output", tmp_path]
    identity_file = one_dir(evaluate("overlap", output=tmp_path).results_dirs) / "r2med" / "R2MEDSampleRetrieval.identity.json"
    stored = json.loads(identity_file.read_text())
    stored["code"]["r2med"] = "0.0.1"
    identity_file.write_text(json.dumps(stored))
    second, err = summary(run_cli, *args)
    assert second["tasks"][0]["status"] == "computed" and "code.r2med: 0.0.1 -> " in err


def test_truncated_task_result_is_recomputed_with_a_warning(overlap, run_cli, evaluate, tmp_path):
    args = ["--plugin", "overlap", "--tasks", "sample", "--output", tmp_path]
    first = evaluate("overlap", output=tmp_path)
    result = one_dir(first.results_dirs) / "R2MEDSampleRetrieval.json"
    result.write_text(result.read_text()[:100])
    stale = [one_dir(first.results_dirs) / ".R2MEDSampleRetrieval.trec.x1.tmp",
             one_dir(first.results_dirs) / "r2med" / ".pipeline.json.x2.tmp"]
    for leftover in stale:  # what a killed run leaves behind
        leftover.write_text("half")
    second, err = summary(run_cli, *args)
    assert not any(p.exists() for p in stale)
    assert second["tasks"][0]["status"] == "computed" and "unreadable or incomplete" in err
    assert second["tasks"][0]["ndcg_at_10"] == first["sample"].ndcg_at_10
    assert json.loads(result.read_text())["scores"]["test"][0]["main_score"] == first["sample"].ndcg_at_10  # whole


def test_results_of_the_earlier_layout_are_recomputed(overlap, run_cli, evaluate, tmp_path):
    """A folder written before run identities (no identity files) is not trusted: its tasks are
    recomputed, once, with a line saying why."""
    args = ["--plugin", "overlap", "--tasks", "sample", "--output", tmp_path]
    folder = one_dir(evaluate("overlap", output=tmp_path).results_dirs)
    (folder / "r2med" / "R2MEDSampleRetrieval.identity.json").unlink()
    (folder / "r2med" / "pipeline.json").write_text(json.dumps({"name": "overlap", "pipeline": {"top_k": 100}}))
    second, err = summary(run_cli, *args)
    assert second["tasks"][0]["status"] == "computed" and "no identity (written by an earlier r2med)" in err
    assert evaluate("overlap", output=tmp_path)["sample"].status == "cached"


def test_escaping_revision_writes_nothing_outside_output(small_model_path, evaluate, tmp_path):
    output, cache = tmp_path / "a" / "b" / "out", tmp_path / "cache"
    before = {p for p in tmp_path.rglob("*")}
    for revision in ("../../x", "/etc/x", ".."):
        result = evaluate("st", model=str(small_model_path), revision=revision, output=output)
        assert one_dir(result.results_dirs).resolve().is_relative_to(output.resolve())
    outside = {p for p in tmp_path.rglob("*") if not p.resolve().is_relative_to(output.resolve())
               and not p.is_relative_to(cache)} - before  # (the run's cache is its --cache-dir's)
    assert outside <= {output.parent, output.parent.parent}, outside


def test_path_components_are_sanitised():
    from r2med_tasks.results.layout import safe_component

    for raw in ("..", ".", "../../x", "/etc/passwd", "a/b", "", "x" * 400, "a\\b", "\x1b[2J"):
        part = safe_component(raw)
        assert part not in ("", ".", "..") and "/" not in part and "\\" not in part and len(part) <= 120
        assert not part.startswith(".")
    assert safe_component("8b3219a92973c328a8e22fadcfa821b5dc75636a") == "8b3219a92973c328a8e22fadcfa821b5dc75636a"
    assert safe_component("x" * 400) != safe_component("x" * 399 + "y")  # shortened names stay distinct


def test_differences_name_what_changed():
    from r2med_tasks.results.identity import differences

    old = {"data": {"revision": "a"}, "config": {"retriever": {"options": {"k1": 0.9, "b": 0.4}}}}
    new = {"data": {"revision": "b"}, "config": {"retriever": {"options": {"k1": 1.2, "b": 0.4}}}}
    assert differences(old, new) == ["data.revision: a -> b", "config.retriever.k1: 0.9 -> 1.2"]
    assert differences(old, old) == []


@pytest.mark.process  # two processes and one lock
def test_concurrent_runs_on_different_data_each_print_their_own_scores(run_cli, tmp_path, monkeypatch):
    """Two processes, one --output, different data: the second waits for the first (naming it),
    then recomputes what the first stored for other data; both print their own correct scores.
    The first runs in a process of its own and holds the folder until the second has found it
    taken; the second runs in this one, with the plugin loaded as the first loads it (R2MED_PLUGINS)."""
    from r2med_tasks.files import locking
    from r2med_tasks.running import discovery as plugins_module

    roots = {}
    for name, take in (("one", slice(0, 6)), ("two", slice(4, 10))):
        root = tmp_path / name
        for task in ("Biology", "Bioinformatics"):
            shutil.copytree(SAMPLE, root / task)
            write_jsonl(root / task / "query.jsonl", read_jsonl(SAMPLE / "query.jsonl")[take])
        roots[name] = root
    release = tmp_path / "release"
    env = {"R2MED_PLUGINS": "overlap_plugin", "R2MED_LOAD_PLUGINS": "", "R2MED_TEST_LOG": str(tmp_path / "log"),
           "R2MED_TEST_RELEASE": str(release)}
    args = ["run", "--plugin", "overlap", "--output", str(tmp_path / "out"), "--json"]
    first = Forked([*args, "--data-dir", roots["one"]], stdout=subprocess.PIPE,
                   env={**env, "R2MED_TEST_BLOCK_ON": "R2MEDBiologyRetrieval"})
    deadline = time.time() + 60
    while not (tmp_path / "log.ready").exists() and time.time() < deadline and first.poll() is None:
        time.sleep(0.05)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(plugins_module, "_plugins", None)
    real_holder = locking.holder

    def found_taken(path):  # the second run found the folder locked, and waits: the first may go on
        release.touch()
        return real_holder(path)

    monkeypatch.setattr(locking, "holder", found_taken)
    code, second_out, second_err = run_cli(*args, "--data-dir", str(roots["two"]))
    out_one, err_one = first.communicate()
    assert first.returncode == 0 and code == 0, err_one + second_err
    assert f"is in use by pid {first.pid}" in second_err and "waiting until it is free" in second_err
    for out, root in ((out_one, roots["one"]), (second_out, roots["two"])):
        tasks = json.loads(out)["tasks"]
        assert [t["status"] for t in tasks] == ["computed", "computed"]
        for t in tasks:
            assert t["ndcg_at_10"] == pytest.approx(overlap_ndcg(root / t["alias"]), abs=5e-6)
    # the folder is consistent: every task's files are the second run's
    folder = ResultsFolder(one_dir(json.loads(second_out)["results_dirs"]))
    for t in json.loads(second_out)["tasks"]:
        identity = folder.identity(t["task"])
        result = folder.task_result(folder.task_json(t["task"]))
        assert identity["data"]["revision"] == result["dataset_revision"]
        assert result["scores"]["test"][0]["main_score"] == t["ndcg_at_10"]
        queries = set(folder.per_query_scores(t["task"]))
        asked = {q["id"] for q in read_jsonl(roots["two"] / t["alias"] / "query.jsonl")}
        assert queries == set(qrels_of(roots["two"] / t["alias"])) & asked


def board(*folders, **options):
    """The leaderboard of ``folders``, its rows as ``--format json`` writes them."""
    return r2med.rank_systems(folders, **options).records()


def test_option_variants_are_experiments_and_rows_of_their_own(official_hub, run_cli, evaluate, tmp_path):
    import mteb

    output = tmp_path / "cache" / "results"
    base = ["--plugin", "bm25", "--output", output, "--cache-dir", tmp_path / "c"]
    default, _ = summary(run_cli, *base)
    variant, _ = summary(run_cli, *base, "-o", "k1=1.5", "-o", "b=0.9")
    other = evaluate("bm25", k1=1.2, b=0.75, tasks=None, output=output, cache_dir="c")
    assert one_dir(variant["results_dirs"]) == one_dir(default["results_dirs"]) / "experiments" / "b_0.9__k1_1.5"
    assert variant["label"] == "BM25 (b=0.9, k1=1.5)" and variant["official_data"] is True
    # the default configuration is the published row's: compared with it; the variant is not
    assert default["published_average_x100"] == 15.13
    assert variant["published_average_x100"] is None
    assert all(t["published_ndcg_at_10_x100"] is None for t in variant["tasks"])

    loaded = mteb.ResultCache(tmp_path / "cache").load_results(include_remote=False, load_experiments="match_name")
    found = {(m.model_name, m.experiment_name): m for m in loaded.model_results}
    assert set(found) == {("r2med/bm25", None), ("r2med/bm25", "b_0.9__k1_1.5"), ("r2med/bm25", "b_0.75__k1_1.2")}
    joined = loaded.join_revisions()
    assert len(joined.model_results) == 3  # mteb keeps every variant

    rows = {r["system"]: r for r in board(output)}
    for label, average in ((variant["label"], variant["average_ndcg_at_10_x100"]), (other.label, other.average_x100())):
        assert rows[label]["average"] == average and rows[label]["local_data"] is False
    assert variant["average_ndcg_at_10_x100"] != other.average_x100()
    published = rows["BM25"]
    assert published["source"].startswith("published") and published["average"] == 15.13
    assert str(output) in published["source"]  # the default run joined the published row (its note)
    assert "experiments" not in published["source"]  # neither variant joined it


def test_mteb_and_r2med_results_of_one_model_and_revision_are_one_row(official_hub, small_model_path, evaluate,
                                                                      tmp_path):
    import mteb
    from mteb.results import TaskResult

    name = "sentence-transformers/all-MiniLM-L6-v2"
    meta = mteb.get_model_meta(name)
    cache = mteb.ResultCache(tmp_path / "mteb")
    for task in R2MED_TASKS[4:]:
        scores = {"ndcg_at_10": 0.2, "main_score": 0.2}
        cache.save_to_cache(TaskResult.from_task_results(mteb.get_task(task.name), {"test": {"default": scores}},
                                                         1.0), meta)
    result = evaluate("st", model=str(small_model_path), name=name, revision=meta.revision,
                      tasks=["qa-reference", "clinical-evidence"], output="ours")
    assert result.model_name == name and result.revision == meta.revision
    rows, warnings = board_rows(tmp_path / "ours", tmp_path / "mteb" / "results")
    assert len(rows) == 1 and warnings == []
    (row,) = rows
    assert row.average is not None  # six tasks from one, two more from the other: all eight
    assert row.scores["R2MEDPMCClinicalRetrieval"] == 20.0
    assert row.scores["R2MEDBiologyRetrieval"] == result["Biology"].ndcg_at_10_x100
    assert any(note.endswith("differs on MedQA-Diag, PMC-Treatment") for note in row.notes), row.notes


def test_local_data_is_marked_excluded_by_default_and_not_compared(run_cli, tmp_path):
    for task in R2MED_TASKS:
        shutil.copytree(SAMPLE, tmp_path / "data" / task.short_name)
    args = ["--plugin", "bm25", "--data-dir", tmp_path / "data", "--output", tmp_path / "out",
            "--cache-dir", tmp_path / "c"]
    result, _ = summary(run_cli, *args)
    assert result["official_data"] is False and result["published_average_x100"] is None
    code, out, _ = run_cli("run", *map(str, args))
    assert "Published" not in out and "Local data: not R2MED's data" in out

    assert not [r for r in board(tmp_path / "out", published="none")]
    rows = board(tmp_path / "out", include_local=True)
    (ours,) = [r for r in rows if r["local_data"]]
    assert ours["system"] == "BM25" and ours["source"].startswith("local data: ")
    published = next(r for r in rows if r["system"] == "BM25" and not r["local_data"])
    assert str(tmp_path) not in published["source"]  # local data never joins the published row
    code, out, _ = run_cli("leaderboard", str(tmp_path / "out"), "--include-local", "--format", "csv")
    assert "local data: " in out


@pytest.mark.parametrize("kwargs", [
    {"k1": 1.5, "b": 0.9}, {"top_k": 50}, {"bm25.k1": 2.0, "hyde.source": "o3-mini"},
    {"weights": [0.2, 0.8], "flag": True, "none": None}, {"prompt": "query: a/b"}])
def test_experiment_names_are_mtebs(kwargs):
    """The folder of a variant is the one mteb's ModelMeta.experiment_name gives for its kwargs."""
    from mteb.models import ModelMeta

    from r2med_tasks.results.layout import experiment_name, safe_component

    meta = ModelMeta.create_empty().model_copy(update={"experiment_kwargs": kwargs})
    assert experiment_name(kwargs) == safe_component(meta.experiment_name)


def test_a_key_in_an_llm_url_never_reaches_plans_or_identities(plugins, run_cli, tmp_path):
    from r2med_tasks.api import registry
    from r2med_tasks.running.pipelines import build_pipeline

    url = "http://user:s3cr3t-KEY@127.0.0.1:9/v1?api-key=s3cr3t-KEY#model"
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={url}", "--plugin", "bm25", "--tasks", "sample",
                             "--output", tmp_path, "--dry-run", "--json")
    assert code == 0, err
    assert "s3cr3t" not in out + err
    from r2med_tasks.running.pipelines import instantiate

    reg = registry()
    built = build_pipeline(reg, ["hyde", "bm25"], [f"llm={url}"])
    instantiate(built, reg)
    spec = built.spec()
    # the LLM chooses the model: identified by its model (the spec's model name: no key, no server address)
    identity = json.dumps({"config": spec.config, "models": spec.models, "variant": spec.variant})
    assert "s3cr3t" not in identity and "127.0.0.1" not in identity
    assert spec.models["rewriter"] == {"name": "llm/model", "revision": "served"} and "llm" not in spec.variant


class Lowered:
    """Scores a document by how often the letters of ``metric`` occur in it: a retriever whose
    option's validator normalises the text the user wrote."""

    def __init__(self, options):
        self.metric = options.metric
        self.indexed = 0

    def index(self, corpus, *, task, context):
        Lowered.indexed += 1
        self.docs = list(zip(corpus.ids, corpus.texts))

    def search(self, queries, *, task, top_k, context):
        scores = {d: float(sum(text.lower().count(c) for c in self.metric)) for d, text in self.docs}
        return {q.id: dict(scores) for q in queries}


def lowered_plugin():
    from pydantic import Field, field_validator

    from r2med_tasks.plugin import Options, RetrieverSpec, hookimpl

    class LoweredOptions(Options):
        metric: str = Field("dot", description="a similarity, in any case")

        @field_validator("metric")
        @classmethod
        def lower_case(cls, value: str) -> str:
            return value.lower()

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="lowered", factory=Lowered, options=LoweredOptions, description="tests only"))

    return Plugin()


def test_an_option_its_validator_normalises_names_one_folder_and_is_reused(register, run_cli, tmp_path):
    register(lowered_plugin(), "lowered-plugin")
    Lowered.indexed = 0
    out = tmp_path / "out"
    for written in ("COSINE", "cosine"):
        code, _, stderr = run_cli("run", "--plugin", "lowered", "-o", f"metric={written}", "--tasks", "sample",
                                  "--output", out)
        assert code == 0, stderr
    assert Lowered.indexed == 1  # the second run reused the first's results
    identities = sorted(out.rglob("*.identity.json"))
    assert [p.parent.parent.name for p in identities] == ["metric_cosine"]  # mteb's experiment folder of metric=cosine
    assert json.loads(identities[0].read_text())["config"]["retriever"]["options"] == {"metric": "cosine"}


def test_results_written_from_the_raw_option_values_are_reused(evaluate, monkeypatch, tmp_path):
    """A results folder an earlier r2med wrote, its identity made of the option values as parsed
    (``1.20`` as 1.2, weights as a tuple, a member's options), is this one's: nothing is recomputed."""
    from r2med_tasks.components import ComponentSpec

    def as_parsed(spec, values):  # how the identity was made before it came from the validated options
        return {**spec.defaults, **values}

    runs = {"bm25": {"k1": "1.20", "b": "0.40"},
            "hybrid": {"members": "bm25,bm25-okapi", "weights": "0.70,0.3", "rrf_k": "10", "bm25.k1": "1.5"}}
    with monkeypatch.context() as patched:
        patched.setattr(ComponentSpec, "validated_values", as_parsed)
        earlier = {name: evaluate(name, options=options, output=name) for name, options in runs.items()}
    for name, options in runs.items():
        again = evaluate(name, options=options, output=name)
        assert again["R2MEDSampleRetrieval"].status == "cached"
        assert again.results_dirs == earlier[name].results_dirs
        assert again["R2MEDSampleRetrieval"].ndcg_at_10 == earlier[name]["R2MEDSampleRetrieval"].ndcg_at_10
