"""Every user mistake gets one line naming where and what to do, exit status 2, no traceback."""

import json
import shutil

import pytest

from conftest import SAMPLE, TESTS, finished_sample_run, read_jsonl, snapshot, write_jsonl


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


def register_retriever(register, name, make):
    """Register the retriever ``name`` of a plugin "<name>-plugin", which ``make()`` builds (it has no
    options: its factory ignores the empty options instance)."""
    from r2med_tasks.components.specs import RetrieverSpec
    from r2med_tasks.components.hookspecs import hookimpl

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name=name, factory=lambda options: make()))

    register(Plugin(), f"{name}-plugin")


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
    code, _, err = run_cli("run", "--plugin", "overlap", "--data-dir", tmp_path / "empty", "--tasks", "Biology,PMC-Clinical",
                           "--output", tmp_path / "out")
    assert_user_error(code, err, "no data for Biology", "empty/Biology/corpus.jsonl")
    assert not any((tmp_path / "out").rglob("*"))  # no results folder claimed for a run that cannot start


def test_a_task_missing_from_data_dir_stops_the_run_before_any_task(overlap, run_cli, data_dir, tmp_path):
    code, _, err = run_cli("run", "--plugin", "overlap", "--data-dir", data_dir, "--tasks", "Biology,PMC-Clinical",
                           "--output", tmp_path / "out")
    assert_user_error(code, err, "no data for PMC-Clinical", "PMC-Clinical/corpus.jsonl")
    assert not any((tmp_path / "out").rglob("*"))  # found in a moment, not after Biology's run


def test_data_dir_not_a_folder(overlap, run_cli, tmp_path):
    code, _, err = run_cli("run", "--plugin", "overlap", "--data-dir", tmp_path / "missing")
    assert_user_error(code, err, "missing: not a folder")


def test_flat_folder_for_a_single_task(overlap, evaluate):
    outcome = evaluate("overlap", data_dir=SAMPLE, tasks="PMC-Clinical")
    assert list(outcome) == ["R2MEDPMCClinicalRetrieval"] and outcome["PMC-Clinical"].n_queries == 10


def test_data_dir_finds_its_tasks(overlap, evaluate, data_dir):
    outcome = evaluate("overlap", data_dir=data_dir, tasks=None)
    assert [t.alias for t in outcome.values()] == ["Biology", "Bioinformatics", "Medical-Sciences"]


def test_answers_never_reach_components(register, evaluate):
    """query.jsonl's doc_id and answer fields carry the labels: no component may see them."""
    from r2med_tasks.components.specs import RetrieverSpec
    from r2med_tasks.components.hookspecs import hookimpl

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
            register(RetrieverSpec(name="spy", factory=lambda options: Spy()))

    register(SpyPlugin())
    evaluate("spy")
    queries = {r["id"]: r for r in read_jsonl(SAMPLE / "query.jsonl")}
    assert len(seen) == len(queries)
    for q in seen:
        assert set(vars(q)) == {"id", "text", "generated", "method", "reasoning"} and not q.generated
        assert q.text == queries[q.id]["text"]
        assert queries[q.id]["answer"] not in repr(q) and not any(d in repr(q) for d in queries[q.id]["doc_id"])


def test_plugin_crash_names_plugin_and_task(register, run_cli, tmp_path):
    class Crashing:
        def index(self, corpus, *, task, context):
            raise RuntimeError("out of cheese")

        def search(self, queries, *, task, top_k, context):
            return {}

    register_retriever(register, "crash", Crashing)
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
    """A hub id is accepted as written (the hub decides whether it exists, when the model loads);
    the same name written as a relative path is a folder that is not there."""
    from r2med_tasks.errors import UserError
    from r2med_tasks.components.model_refs import ModelRef

    assert ModelRef(ref, option="st.model").identity() == (ref, "unpinned")
    with pytest.raises(UserError, match=r"^-o st\.model=\./.*: no such folder, and not a hub id"):
        ModelRef(f"./{ref}", option="st.model")


# -- The table: every bad input gets one line naming where and what to do, exit status 2, no
# traceback, and leaves the results computed earlier as they were. ------------------------------

TASK = "R2MEDSampleRetrieval"


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    """A finished bm25 run on sample: the results no bad input may alter."""
    out = tmp_path_factory.mktemp("earlier") / "results"
    return out, finished_sample_run(out)


class Env:
    def __init__(self, out, run, tmp, mp):
        self.out, self.run, self.tmp, self.mp = out, run, tmp, mp
        self.trec = run / f"{TASK}.trec"

    def file(self, name, content="x"):
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path

    def run_copy(self):
        copy = self.tmp / "copy" / self.run.name
        shutil.copytree(self.run, copy)
        return copy


def data(change):
    """r2med-run on a copy of the sample data as Biology (a task the earlier run lacks, so the bad
    file is the only news) after ``change(folder)``."""
    def prepare(env):
        folder = env.tmp / "data" / "Biology"
        shutil.copytree(SAMPLE, folder)
        change(folder)
        return ["run", "--plugin", "bm25", "--data-dir", folder.parent, "--tasks", "Biology", "--output", env.out]
    return prepare


def rows(name, change):
    """``data`` with the rows of one file edited by ``change(rows)``."""
    def edit(folder):
        table = read_jsonl(folder / name)
        change(table)
        write_jsonl(folder / name, table)
    return data(edit)


def run(*args):
    return lambda env: ["run", "--plugin", "bm25", "--tasks", "sample", "--output", env.out, *args]


def fuse(*args, second=None, qrels=SAMPLE / "qrels.jsonl"):
    """r2med fuse of the earlier run with ``second(env)`` (default: the earlier run again)."""
    def prepare(env):
        other = second(env) if second else env.trec
        return ["fuse", *(["--qrels", qrels(env) if callable(qrels) else qrels] if qrels else []),
                env.trec, other, "--output", env.out, *args]
    return prepare


def trec_lines(edit):
    """A copy of the earlier run's TREC file with ``edit(lines)`` applied."""
    def second(env):
        lines = env.trec.read_text().splitlines()
        return env.file("second.trec", "\n".join(edit(lines)) + "\n")
    return second


def denied(env, under):
    """Writing under ``under`` fails with EACCES, as on a folder without write permission (root
    ignores permissions, so the tests cannot just chmod)."""
    import errno
    import os

    real = os.open

    def guarded(path, *args, **kwargs):
        if str(path).startswith(str(under)):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    env.mp.setattr(os, "open", guarded)


def disk_full(env):
    import errno
    import os

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    env.mp.setattr(os, "fsync", full)


def read_only(env):
    import os

    real = os.access
    env.mp.setattr(os, "access", lambda path, mode, **kw: not mode & os.W_OK and real(path, mode, **kw))


def tasks(value):
    return lambda env: ["run", "--plugin", "bm25", "--tasks", value, "--output", env.out]


def hybrid(option):
    return lambda env: ["run", "--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", option, "--tasks", "sample",
                        "--output", env.out]


def then(setup, prepare):
    def both(env):
        setup(env)
        return prepare(env)
    return both


def leaderboard_to(target):
    def prepare(env):
        env.mp.chdir(env.tmp)  # no ./results: only the published rows
        return ["leaderboard", "--output", target(env)]
    return prepare


def corrupt(env, name, content):
    """A copy of the earlier run's folder with file ``name`` replaced by ``content``."""
    copy = env.run_copy()
    (copy / name).write_bytes(content)
    return copy


def mkdir(path):
    path.mkdir(parents=True)
    return path


def set_field(index, **fields):
    return lambda table: table[index].update(fields)


CASES = {
    # data files
    "corpus is a folder": (data(lambda d: (d / "corpus.jsonl").unlink() or (d / "corpus.jsonl").mkdir()),
                           "corpus.jsonl: a folder, not a file"),
    "corpus not UTF-8": (data(lambda d: (d / "corpus.jsonl").write_bytes(b'{"id": "d1", "text": "caf\xe9"}\n')),
                         "corpus.jsonl:1: not UTF-8 text; re-encode the file as UTF-8"),
    "query line not JSON": (data(lambda d: (d / "query.jsonl").open("a").write('{"id": \n')),
                            "query.jsonl:11: not valid JSON (Expecting value); fix or remove that line"),
    "qrels missing": (data(lambda d: (d / "qrels.jsonl").unlink()),
                      ("qrels.jsonl: file not found (R2MED's layout needs the files corpus.jsonl, query.jsonl, "
                       "qrels.jsonl in one folder)")),
    "row not an object": (data(lambda d: (d / "corpus.jsonl").open("a").write("[1, 2]\n")),
                          "corpus.jsonl:49: expected a JSON object, got list"),
    "query without text": (rows("query.jsonl", lambda t: t[2].pop("text")), "query.jsonl:3: missing field 'text'"),
    "relevance a word": (rows("qrels.jsonl", set_field(0, score="relevant")),
                         "qrels.jsonl:1: field 'score' must be an integer, got 'relevant'"),
    "relevance 1.5": (rows("qrels.jsonl", set_field(0, score=1.5)), "qrels.jsonl:1: field 'score' must be an integer"),
    "relevance true": (rows("qrels.jsonl", set_field(0, score=True)),
                       "qrels.jsonl:1: field 'score' must be an integer"),
    "relevance -1": (rows("qrels.jsonl", set_field(3, score=-1)),
                     "qrels.jsonl:4: field 'score' is -1; relevance must be an integer >= 0"),
    "document id empty": (rows("corpus.jsonl", set_field(3, id="")),
                          "corpus.jsonl:4: document id '' is empty or contains whitespace"),
    "document id with a space": (rows("corpus.jsonl", set_field(3, id="a b")), "corpus.jsonl:4: document id 'a b'"),
    "document id with a tab": (rows("corpus.jsonl", set_field(3, id="a\tb")), "document id 'a\\tb'"),
    "document id with a newline": (rows("corpus.jsonl", set_field(0, id="a\nb")), "corpus.jsonl:1: document id"),
    "document id with escapes": (rows("corpus.jsonl", set_field(0, id="\x1b]0;pwned\x07 x")),
                                 "corpus.jsonl:1: document id '\\x1b]0;pwned\\x07 x'"),
    "query id with a space": (rows("query.jsonl", set_field(0, id="q 1")), "query.jsonl:1: query id 'q 1'"),
    "document id twice": (rows("corpus.jsonl", lambda t: t.append(dict(t[3]))),
                          ("corpus.jsonl:49: duplicate document id", "(first at ", "corpus.jsonl:4)")),
    "corpus empty": (data(lambda d: (d / "corpus.jsonl").write_text("")), "corpus.jsonl is empty"),
    "data dir missing": (lambda env: ["run", "--plugin", "bm25", "--data-dir", env.tmp / "nope", "--output", env.out],
                         "nope: not a folder"),
    # options
    "tasks empty": (tasks(""), "--tasks '': names no task"),
    "tasks only commas": (tasks(",,"), "--tasks ',,': names no task"),
    "task unknown": (tasks("nope"), "--tasks nope: no such task"),
    "k1 negative": (run("-o", "k1=-3"), "-o bm25.k1=-3: must be >= 0"),
    "b above 1": (run("-o", "b=5"), "-o bm25.b=5: must be <= 1"),
    "k1 infinite": (run("-o", "k1=inf"), "-o bm25.k1=inf: must be a finite number"),
    "hybrid weight negative": (hybrid("weights=-1,2"), "-o hybrid.weights=-1,2: item 1 must be >= 0"),
    "hybrid weights all 0": (hybrid("weights=0,0"), "-o hybrid.weights: every weight is 0"),
    "top-k 0": (run("--top-k", "0"), "Invalid value for '--top-k'"),
    "unknown flag": (run("--bogus"), "No such option '--bogus'"),
    "unknown plugin": (lambda env: ["run", "--plugin", "nope", "--output", env.out],
                       "--plugin nope: no such component"),
    # the results folder
    "output a file": (lambda env: run()(env)[:-1] + [env.file("afile")], "afile is a file, not a folder"),
    "output under a file": (lambda env: run()(env)[:-1] + [env.file("afile") / "sub"], "afile is a file, not a folder"),
    "output not writable": (then(read_only, run()),
                            "is not writable; choose a folder you can write"),
    "output under /proc": (lambda env: run()(env)[:-1] + ["/proc/r2med-test/results"], "--output /proc/r2med-test"),
    "cache folder a file": (lambda env: [*run()(env), "--cache-dir", env.file("afile")],
                            "afile is a file, not a folder; choose another --cache-dir"),
    "disk full": (then(disk_full, run("-o", "k1=1.5")),  # the first file written: the index, in the cache
                  ".npy: no space left on the device; free space or write elsewhere (e.g. another --cache-dir)"),
    # leaderboard, compare, export-mteb
    "leaderboard output a folder": (leaderboard_to(lambda env: mkdir(env.tmp / "board")),
                                    "board: is a folder where a file is expected"),
    "leaderboard output under a file": (leaderboard_to(lambda env: env.file("afile") / "board.md"),
                                        "afile is a file, not a folder"),
    "leaderboard output not writable": (then(lambda env: denied(env, env.tmp / "ro"),
                                             leaderboard_to(lambda env: mkdir(env.tmp / "ro") / "board.md")),
                                        "ro/board.md: permission denied"),
    "leaderboard tasks empty": (lambda env: ["leaderboard", "--tasks", ""], "--tasks '': names no task"),
    "leaderboard tasks only commas": (lambda env: ["leaderboard", "--tasks", ",,"], "--tasks ',,': names no task"),
    "leaderboard task not R2MED's": (lambda env: ["leaderboard", "--tasks", "sample"], "sample: not an R2MED dataset"),
    "compare tasks empty": (lambda env: ["compare", env.run, env.run, "--tasks", ""], "--tasks '': names no task"),
    "compare per-query file not UTF-8": (lambda env: ["compare", env.run, corrupt(env, f"{TASK}.per_query.tsv",
                                                                                   b"query_id\tndcg_at_10\n\xff")],
                                         f"{TASK}.per_query.tsv: not UTF-8 text"),
    "compare a folder without runs": (lambda env: ["compare", env.run, mkdir(env.tmp / "empty")],
                                      "empty: no <Task>.per_query.tsv files"),
    "export onto a file": (lambda env: ["export-mteb", env.run, env.file("afile")], "afile is a file, not a folder"),
    "export a corrupt TaskResult": (lambda env: ["export-mteb", corrupt(env, f"{TASK}.json", b'{"task_name": '),
                                                 env.tmp / "export"], f"{TASK}.json: not a JSON file"),
    "export a TaskResult not an object": (lambda env: ["export-mteb", corrupt(env, f"{TASK}.json", b"[1]"),
                                                       env.tmp / "export"], f"{TASK}.json: expected a JSON object"),
    "export a corrupt model_meta.json": (lambda env: ["export-mteb", corrupt(env, "model_meta.json", b"\xff{"),
                                                      env.tmp / "export"], "model_meta.json: not a JSON file"),
    # fuse
    "fuse weights all 0": (fuse("--weights", "0,0"), "every weight is 0"),
    "fuse weights not numbers": (fuse("--weights", "a,b"), "--weights a,b: comma-separated numbers"),
    "fuse one weight for two runs": (fuse("--weights", "1"), "got 1 weights for 2 runs"),
    "fuse NaN score": (fuse(second=trec_lines(lambda ls: [ls[0].rsplit(" ", 2)[0] + " nan x", *ls[1:]])),
                       "second.trec:1: score 'nan' is not a finite number"),
    "fuse five columns": (fuse(second=trec_lines(lambda ls: [*ls[:4], ls[4].rsplit(" ", 1)[0], *ls[5:]])),
                          "second.trec:5: expected 6 columns"),
    "fuse empty TREC file": (fuse(second=lambda env: env.file("second.trec", "")), "second.trec: empty"),
    "fuse TREC not UTF-8": (fuse(second=lambda env: env.file("second.trec", b"q01 Q0 d\xff 1 1.0 x\n")),
                            "second.trec: not UTF-8 text"),
    "fuse another task's qrels": (fuse(qrels=lambda env: env.file("other.jsonl", '{"q_id": "z1", "p_id": "d", '
                                                                                   '"score": 1}\n')),
                                  "other.jsonl judge none of the 10 queries the runs rank"),
    "fuse qrels relevance 1.5": (fuse(qrels=lambda env: env.file("q.jsonl", '{"q_id": "q01", "p_id": "d", '
                                                                            '"score": 1.5}\n')),
                                 "q.jsonl:1: relevance must be an integer >= 0"),
    "fuse without qrels": (fuse(qrels=None), "TREC-file inputs need --qrels FILE"),
    "fuse output a file": (lambda env: [*fuse()(env)[:-1], env.file("afile")], "afile is a file, not a folder"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gets_one_line(case, earlier, run_cli, tmp_path, monkeypatch):
    prepare, fragments = CASES[case]
    out, results_folder_of = earlier
    env = Env(out, results_folder_of, tmp_path, monkeypatch)
    args = prepare(env)
    before = snapshot(out)
    code, _, err = run_cli(*args)
    monkeypatch.undo()  # os.access, os.open, os.fsync: real again to take the snapshot
    assert_user_error(code, err, *(fragments if isinstance(fragments, tuple) else [fragments]))
    assert "\x1b" not in err and "\x07" not in err  # names from files never act on the terminal
    assert snapshot(out) == before
    assert not [p for p in out.rglob("*.tmp")]


def test_ctrl_c_while_starting_exits_130_quietly(register, run_cli, tmp_path):
    """Ctrl-C while plugins load (before any task starts) exits as it does later: 130, no traceback."""
    from r2med_tasks.components.hookspecs import hookimpl

    class Slow:
        @hookimpl
        def register_retrievers(self, register):
            raise KeyboardInterrupt

    register(Slow(), "slow-plugin")
    code, _, err = run_cli("run", "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path / "out")
    assert code == 130
    assert "Traceback" not in err and "Aborted" not in err and len(err.strip().splitlines()) <= 1


def test_debug_keeps_the_traceback(plugins, earlier, tmp_path):
    from click.testing import CliRunner

    from r2med_tasks.cli import cli
    from r2med_tasks.errors import UserError

    args = ["run", "--plugin", "bm25", "--tasks", "", "--output", str(tmp_path / "out")]
    with pytest.raises(UserError, match="names no task"):
        CliRunner().invoke(cli, [*args, "--debug"], catch_exceptions=False)
    disk = tmp_path / "file"
    disk.write_text("x")
    from conftest import on_the_benchmark

    run = on_the_benchmark(earlier[1], tmp_path / "run")  # a result export-mteb takes
    with pytest.raises(NotADirectoryError):  # not turned into a line either
        CliRunner().invoke(cli, ["export-mteb", "--debug", "--create", str(run), str(disk / "x")],
                           catch_exceptions=False)


def test_a_component_that_cannot_be_created_is_still_named(register, run_cli, tmp_path):
    """The boundary turns the user's mistakes into one line; a plugin's own bug still names the plugin."""
    class Buggy:
        def __init__(self):
            raise TypeError("unexpected keyword 'k3'")

    register_retriever(register, "buggy", Buggy)
    code, _, err = run_cli("run", "--plugin", "buggy", "--tasks", "sample", "--output", tmp_path / "out")
    assert_user_error(code, err, "retriever 'buggy' (from buggy-plugin) could not be created",
                      "TypeError: unexpected keyword 'k3'")


def test_names_from_files_never_reach_the_terminal_raw(earlier, run_cli, tmp_path):
    """A run file's name becomes the fused run's name, printed in the summary: shown escaped."""
    _, results_folder_of = earlier
    evil = tmp_path / "evil\x1b]0;pwned\x07.trec"
    shutil.copy(results_folder_of / f"{TASK}.trec", evil)
    code, out, err = run_cli("fuse", "--qrels", SAMPLE / "qrels.jsonl", results_folder_of / f"{TASK}.trec", evil,
                             "--output", tmp_path / "out")
    assert code == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "evil\\x1b]0;pwned\\x07" in out


def test_resume_removes_temp_files_a_killed_run_left(earlier, run_cli, tmp_path):
    """Half-written hidden temp files (a kill between write and rename) go when the folder is next
    claimed, by any writer: a run, a fused run, a hybrid member's saved run."""
    _, results_folder_of = earlier
    trec = results_folder_of / f"{TASK}.trec"
    args = ("fuse", "--qrels", SAMPLE / "qrels.jsonl", trec, trec, "--output", tmp_path / "out")
    code, _, err = run_cli(*args)
    assert code == 0, err
    fused = next((tmp_path / "out").glob(f"local-data/*/*/{TASK}.json")).parent
    left = [fused / f".{TASK}.trec.1a2b3c4d.tmp", fused / "r2med" / f".{TASK}.identity.json.5e6f7a8b.tmp"]
    for path in left:
        path.write_text("half")
    code, _, err = run_cli(*args)
    assert code == 0, err
    assert not [p for p in left if p.exists()]


def test_boundary_messages_name_the_file_the_user_knows(tmp_path):
    """Errors raised deep in a library name the user's file: the target of a rename (not the hidden
    temp file), the file a reader was reading, the field a model refused."""
    import errno

    from pydantic import BaseModel

    from r2med_tasks.cli.common import user_message

    rename = IsADirectoryError(errno.EISDIR, "Is a directory", str(tmp_path / ".board.md.1a2b3c4d5e6f.tmp"),
                               None, str(tmp_path / "board.md"))
    assert user_message(rename) == f"{tmp_path / 'board.md'}: is a folder where a file is expected; name a file, " \
                                   "or replace the folder with one"
    assert user_message(PermissionError(errno.EACCES, "Permission denied", str(tmp_path / ".x.json.abcdef.tmp"))) \
        .startswith(f"{tmp_path / 'x.json'}: permission denied")

    class Meta(BaseModel):
        name: str

    def read(path):
        return Meta.model_validate_json(path.read_text())

    bad = tmp_path / "model_meta.json"
    bad.write_text('{"name": 3}')
    with pytest.raises(Exception) as info:
        read(bad)
    assert user_message(info.value).startswith("Meta field name: Input should be a valid string")  # no r2med frame
    assert user_message(KeyError("x")) is None  # a bug keeps its traceback


@pytest.mark.parametrize("emptied", [".trec", ".per_query.tsv"])
def test_an_emptied_result_file_is_not_a_finished_task(earlier, run_cli, tmp_path, emptied):
    """A TaskResult beside an empty run or per-query file (a disk that filled, a hand edit) is
    recomputed, never reported as done with -1 queries."""
    out = tmp_path / "results"
    shutil.copytree(earlier[0], out)
    folder = out / earlier[1].relative_to(earlier[0])
    (folder / f"{TASK}{emptied}").write_text("")
    code, stdout, err = run_cli("run", "--plugin", "bm25", "--tasks", "sample", "--output", out, "--json")
    assert code == 0, err
    assert "sample: recomputing, its stored result is unreadable or incomplete" in err
    assert json.loads(stdout)["tasks"][0]["n_queries"] == 10
    assert (folder / f"{TASK}{emptied}").stat().st_size


def test_hub_retries_are_not_printed(run_cli, earlier, tmp_path, monkeypatch):
    """Without --data-dir an R2MED task's judgments come from the hub; its client's retry warnings
    (a line each) are silenced, and the failure is one line."""
    import logging

    import datasets

    levels = []

    def unreachable(*args, **kwargs):
        levels.append(logging.getLogger("huggingface_hub.utils._http").getEffectiveLevel())
        raise ConnectionError("Couldn't reach 'R2MED/Biology' on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    runs = [tmp_path / name for name in ("a", "b")]
    for folder in runs:
        folder.mkdir()
        shutil.copy(earlier[1] / f"{TASK}.trec", folder / "R2MEDBiologyRetrieval.trec")
    code, _, err = run_cli("fuse", *runs, "--output", tmp_path / "out")
    assert_user_error(code, err, "cannot load R2MED/Biology@8b9fec2 from the Hugging Face hub", "--data-dir DIR")
    assert levels and min(levels) >= logging.ERROR
