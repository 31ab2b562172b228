"""Every user mistake gets one line naming where and what to do, exit status 2, no traceback."""

import json

import pytest

from conftest import SAMPLE, TESTS, read_jsonl, write_jsonl


@pytest.fixture
def overlap(register):
    import overlap_plugin

    return register(overlap_plugin, "overlap-plugin")


def run_overlap(run_cli, data_dir, tmp_path, *extra):
    return run_cli("run", "--plugin", "overlap", "--data-dir", data_dir, "--tasks", "Biology",
                   "--output", tmp_path / "out", *extra)


def assert_user_error(code, err, *fragments):
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


def test_malformed_json_line(overlap, run_cli, data_dir, tmp_path):
    path = data_dir / "Biology" / "corpus.jsonl"
    lines = path.read_text().splitlines()
    lines[6] = '{"id": "broken", "text": '
    path.write_text("\n".join(lines) + "\n")
    code, _, err = run_overlap(run_cli, data_dir, tmp_path)
    assert_user_error(code, err, f"{path}:7: not valid JSON", "fix or remove that line")


def test_missing_file(overlap, run_cli, data_dir, tmp_path):
    (data_dir / "Biology" / "qrels.jsonl").unlink()
    code, _, err = run_overlap(run_cli, data_dir, tmp_path)
    assert_user_error(code, err, "Biology/qrels.jsonl: file not found", "corpus.jsonl, query.jsonl, qrels.jsonl")


def test_missing_field(overlap, run_cli, data_dir, tmp_path):
    rows = read_jsonl(SAMPLE / "query.jsonl")
    del rows[2]["text"]
    write_jsonl(data_dir / "Biology" / "query.jsonl", rows)
    code, _, err = run_overlap(run_cli, data_dir, tmp_path)
    assert_user_error(code, err, "Biology/query.jsonl:3: missing field 'text'")


def test_wrong_field_type(overlap, run_cli, data_dir, tmp_path):
    rows = read_jsonl(SAMPLE / "qrels.jsonl")
    rows[0]["score"] = "relevant"
    write_jsonl(data_dir / "Biology" / "qrels.jsonl", rows)
    code, _, err = run_overlap(run_cli, data_dir, tmp_path)
    assert_user_error(code, err, "Biology/qrels.jsonl:1: field 'score' must be an integer")


def test_empty_corpus(overlap, run_cli, data_dir, tmp_path):
    (data_dir / "Biology" / "corpus.jsonl").write_text("")
    code, _, err = run_overlap(run_cli, data_dir, tmp_path)
    assert_user_error(code, err, "corpus.jsonl is empty")


def test_duplicate_ids(overlap, run_cli, data_dir, tmp_path):
    rows = read_jsonl(SAMPLE / "corpus.jsonl")
    rows.append({"id": rows[3]["id"], "text": "again"})
    write_jsonl(data_dir / "Biology" / "corpus.jsonl", rows)
    code, _, err = run_overlap(run_cli, data_dir, tmp_path)
    assert_user_error(code, err, f"Biology/corpus.jsonl:{len(rows)}: duplicate document id {rows[3]['id']!r}",
                      "first at", "corpus.jsonl:4")


def test_unknown_qrels_warn_and_go_on(overlap, run_cli, data_dir, tmp_path):
    rows = read_jsonl(SAMPLE / "qrels.jsonl")
    rows += [{"q_id": "nope", "p_id": rows[0]["p_id"], "score": 1},
             {"q_id": "q01", "p_id": "ghost-1", "score": 1},
             {"q_id": "q01", "p_id": "ghost-2", "score": 1}]
    write_jsonl(data_dir / "Biology" / "qrels.jsonl", rows)
    code, out, err = run_overlap(run_cli, data_dir, tmp_path, "--json")
    assert code == 0, err
    assert "ignored 1 " in err and "qrels.jsonl rows naming unknown queries" in err
    assert "qrels.jsonl rows (2 relevant) name documents missing from the corpus; kept" in err  # as published
    assert json.loads(out)["tasks"][0]["n_queries"] == 10


def test_queries_without_judgments_are_reported(overlap, run_cli, data_dir, tmp_path):
    rows = [r for r in read_jsonl(SAMPLE / "qrels.jsonl") if r["q_id"] != "q02"]
    write_jsonl(data_dir / "Biology" / "qrels.jsonl", rows)
    code, out, err = run_overlap(run_cli, data_dir, tmp_path, "--json")
    assert code == 0
    assert "1 of 10 queries have no judgment" in err
    assert json.loads(out)["tasks"][0]["n_queries"] == 9


@pytest.mark.parametrize("rewrite, fragments", [
    (lambda r: {**r, "score": 0}, ["no query has a relevant document in", "qrels.jsonl; nothing to evaluate"]),
    (lambda r: {**r, "p_id": "elsewhere/" + r["p_id"]},  # judged documents the corpus lacks (a cut-down corpus)
     ["qrels.jsonl: no relevant judgment names a document of the corpus (25 rows name documents missing from "
      "it); are the task's files from one dataset and complete?"]),
])
def test_nothing_left_to_evaluate_says_why(overlap, run_cli, data_dir, tmp_path, rewrite, fragments):
    rows = read_jsonl(SAMPLE / "qrels.jsonl")
    write_jsonl(data_dir / "Biology" / "qrels.jsonl", [rewrite(r) for r in rows])
    code, _, err = run_overlap(run_cli, data_dir, tmp_path)
    assert_user_error(code, err, *fragments)
    assert len(rows) == 25


def test_data_dir_without_the_task(overlap, run_cli, tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli("run", "--plugin", "overlap", "--data-dir", tmp_path / "empty", "--tasks", "Biology,PMC-Clinical")
    assert_user_error(code, err, "no data for Biology", "empty/Biology/corpus.jsonl")


def test_data_dir_not_a_folder(overlap, run_cli, tmp_path):
    code, _, err = run_cli("run", "--plugin", "overlap", "--data-dir", tmp_path / "missing")
    assert_user_error(code, err, "missing: not a folder")


def test_flat_folder_for_a_single_task(overlap, run_cli, tmp_path):
    code, out, err = run_cli("run", "--plugin", "overlap", "--data-dir", SAMPLE, "--tasks", "PMC-Clinical",
                             "--output", tmp_path / "out", "--json")
    assert code == 0, err
    assert json.loads(out)["tasks"][0]["task"] == "R2MEDPMCClinicalRetrieval"


def test_data_dir_finds_its_tasks(overlap, run_cli, data_dir, tmp_path):
    code, out, err = run_cli("run", "--plugin", "overlap", "--data-dir", data_dir, "--output", tmp_path / "out", "--json")
    assert code == 0, err
    assert [t["alias"] for t in json.loads(out)["tasks"]] == ["Biology", "Bioinformatics", "Medical-Sciences"]


def test_answers_never_reach_components(register, run_cli, tmp_path):
    """query.jsonl's doc_id and answer fields carry the labels: no component may see them."""
    from r2med_tasks.components import RetrieverSpec
    from r2med_tasks.hookspecs import hookimpl

    seen = []

    class Spy:
        def index(self, corpus, *, task, context):
            self.ids = corpus.ids

        def search(self, queries, *, task, top_k, context):
            seen.extend(queries)
            return {q.id: {self.ids[0]: 1.0} for q in queries}

    class SpyPlugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="spy", factory=Spy))

    register(SpyPlugin())
    code, _, err = run_cli("run", "--plugin", "spy", "--tasks", "sample", "--output", tmp_path / "out")
    assert code == 0, err
    queries = {r["id"]: r for r in read_jsonl(SAMPLE / "query.jsonl")}
    assert len(seen) == len(queries)
    for q in seen:
        assert set(vars(q)) == {"id", "text", "generated", "method", "reasoning"} and not q.generated
        assert q.text == queries[q.id]["text"]
        assert queries[q.id]["answer"] not in repr(q) and not any(d in repr(q) for d in queries[q.id]["doc_id"])


@pytest.mark.parametrize("bad, message", [
    ({"q01": {"s-cardio-01": float("nan")}}, "returned score nan for query 'q01'"),
    ({"q01": {"not-a-doc": 1.0}}, "returned unknown document id 'not-a-doc' for query 'q01'"),
])
def test_plugin_bad_output(register, run_cli, tmp_path, bad, message):
    from r2med_tasks.components import RetrieverSpec
    from r2med_tasks.hookspecs import hookimpl

    class Bad:
        def index(self, corpus, *, task, context):
            pass

        def search(self, queries, *, task, top_k, context):
            return {q.id: {} for q in queries} | bad

    class BadPlugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="bad", factory=Bad))

    register(BadPlugin(), "bad-plugin")
    code, _, err = run_cli("run", "--plugin", "bad", "--tasks", "sample", "--output", tmp_path / "out")
    assert_user_error(code, err, "retriever 'bad' (from bad-plugin)", message)


def test_plugin_crash_names_plugin_and_task(register, run_cli, tmp_path):
    from r2med_tasks.components import RetrieverSpec
    from r2med_tasks.hookspecs import hookimpl

    class Crashing:
        def index(self, corpus, *, task, context):
            raise RuntimeError("out of cheese")

        def search(self, queries, *, task, top_k, context):
            return {}

    class CrashPlugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="crash", factory=Crashing))

    register(CrashPlugin(), "crash-plugin")
    code, _, err = run_cli("run", "--plugin", "crash", "--tasks", "sample", "--output", tmp_path / "out")
    assert_user_error(code, err, "retriever 'crash' (from crash-plugin) failed while indexing R2MEDSampleRetrieval",
                      "RuntimeError: out of cheese", "--debug")


@pytest.mark.parametrize("args, message", [
    (["--plugin", "overlp"], "--plugin overlp: no such component (did you mean 'overlap'?)"),
    (["--plugin", "overlap", "-o", "nope=1"], "-o nope=1: no selected component accepts 'nope' (overlap accepts bonus)"),
    (["--plugin", "overlap", "-o", "bonus=many"], "-o overlap.bonus=many: expected a number"),
    (["--plugin", "overlap", "-o", "st.model=x"], "-o st.model=x: 'st' is not a selected component"),
    (["--plugin", "overlap", "-o", "bonus"], "-o bonus: expected key=value"),
    (["--plugin", "overlap", "--plugin", "st"], "--plugin st: a pipeline takes one retriever; 'overlap' is already selected"),
    (["--plugin", "reranker:overlap"], "--plugin reranker:overlap: no such component"),
    (["--plugin", "thing:overlap"], "unknown kind 'thing'"),
])
def test_bad_pipeline(overlap, run_cli, args, message):
    code, _, err = run_cli("run", *args, "--tasks", "sample")
    assert_user_error(code, err, message)


@pytest.mark.parametrize("args, message", [
    (["--plugin", "st", "-o", "model=/no/such/folder"], "-o st.model=/no/such/folder: no such folder, and not a hub id"),
    (["--plugin", "bm25", "--plugin", "cross-encoder", "-o", "model=./gone"], "-o cross-encoder.model=./gone: no such folder"),
    (["--plugin", "bge", "-o", "model=~/weights/bge"], "-o bge.model=~/weights/bge: no such folder"),
    (["--plugin", "medcpt", "-o", "doc_model=a/b/c"], "-o medcpt.doc_model=a/b/c: no such folder, and not a hub id"),
    (["--plugin", "bm25", "--plugin", "rankllama", "-o", "base=pyproject.toml"], "-o rankllama.base=pyproject.toml: a file"),
])
def test_a_model_that_cannot_exist_is_refused_before_any_work(run_cli, tmp_path, monkeypatch, args, message):
    """Caught when the component is created, so neither a run nor a dry run gets as far as the data."""
    monkeypatch.chdir(TESTS.parent)
    for extra in ([], ["--dry-run"]):
        code, _, err = run_cli("run", *args, "--tasks", "sample", "--output", tmp_path, *extra)
        assert_user_error(code, err, message)
        assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("ref", ["sentence-transformers/all-MiniLM-L6-v2", "Alibaba-NLP/gte-Qwen2-1.5B-instruct",
                                 "bert-base-uncased"])
def test_hub_ids_pass_the_model_check(ref):
    from r2med_tasks.models import check_model_ref

    check_model_ref(ref, option="st.model")  # the hub decides whether they exist, when the model loads
