"""Hostile data and option values (issue #25): ids pytrec_eval cannot keep apart, relevance grades
it cannot hold, conflicting judgments, queries and corpora with nothing to search, number options
Python reads otherwise than meant. Each is refused where it enters, in one line naming the file and
line (or the option), exit status 2, no traceback, results computed earlier untouched."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from conftest import SAMPLE, finished_sample_run, read_jsonl, snapshot

TASK = "R2MEDSampleRetrieval"


def write_rows(path, rows):
    """JSONL with non-ASCII escaped (``\\u0000``, ``\\ud800``), as a JSON writer of such ids would."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def assert_one_line(code, err, *fragments):
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err
    assert "\x00" not in err and "\x1b" not in err  # ids are shown escaped, never raw


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    """A finished bm25 run on sample: the results no bad input may alter."""
    out = tmp_path_factory.mktemp("earlier") / "results"
    finished_sample_run(out)
    return out


# -- Task data: r2med-run --data-dir on a copy of the sample as Biology (a task the earlier run lacks,
# so the bad file is the only news). Sample lines used below: corpus.jsonl:4 is 's-cardio-04',
# query.jsonl:1 is 'q01' and :5 'q05', qrels.jsonl:2 judges ('q01', 's-endo-03') 1 and :3
# ('q01', 's-nephro-06') 1; the files hold 48, 10 and 25 lines.

def set_field(name, line, **fields):
    def edit(folder):
        rows = read_jsonl(folder / name)
        rows[line - 1].update(fields)
        write_rows(folder / name, rows)
    return edit


def append_row(name, row):
    def edit(folder):
        write_rows(folder / name, [*read_jsonl(folder / name), row])
    return edit


def append_text(name, text):
    def edit(folder):
        with (folder / name).open("a", encoding="utf-8") as f:
            f.write(text)
    return edit


def every_row(name, **fields):
    def edit(folder):
        write_rows(folder / name, [{**row, **fields} for row in read_jsonl(folder / name)])
    return edit


NUL = "contains a NUL character (U+0000)"
SURROGATE = "contains a lone surrogate (U+D800)"
GRADES = "relevance must be an integer >= 0 (and at most 2147483647)"

DATA_CASES = {
    # ids pytrec_eval truncates at NUL (collisions: nDCG 0.00) or crashes on (a lone surrogate: SIGSEGV)
    "document id with NUL": (set_field("corpus.jsonl", 4, id="s-cardio-04\x00x"),
                             f"corpus.jsonl:4: document id 's-cardio-04\\x00x' {NUL}"),
    "document id NUL only": (set_field("corpus.jsonl", 4, id="\x00"), f"corpus.jsonl:4: document id '\\x00' {NUL}"),
    "document id with a lone surrogate": (set_field("corpus.jsonl", 4, id="s-cardio-04\ud800"),
                                          f"corpus.jsonl:4: document id 's-cardio-04\\ud800' {SURROGATE}"),
    "document id with a low surrogate": (set_field("corpus.jsonl", 4, id="\udfffs"),
                                         "corpus.jsonl:4: document id '\\udfffs' contains a lone surrogate (U+DFFF)"),
    "document id with a C0 control": (set_field("corpus.jsonl", 4, id="s\x01"),
                                      "corpus.jsonl:4: document id 's\\x01' contains the control character U+0001"),
    "document id with DEL": (set_field("corpus.jsonl", 4, id="s\x7f"),
                             "corpus.jsonl:4: document id 's\\x7f' contains the control character U+007F"),
    "document id with a C1 control": (set_field("corpus.jsonl", 4, id="s\x9b31m"),
                                      "corpus.jsonl:4: document id 's\\x9b31m' contains the control character U+009B"),
    "document id with NEL": (set_field("corpus.jsonl", 4, id="s\x85t"),
                             "corpus.jsonl:4: document id 's\\x85t' is empty or contains whitespace"),
    "document id with a line separator": (set_field("corpus.jsonl", 4, id="s\u2028t"),
                                          "corpus.jsonl:4: document id 's\\u2028t' is empty or contains whitespace"),
    "document id with a paragraph separator": (set_field("corpus.jsonl", 4, id="s\u2029t"),
                                               "corpus.jsonl:4: document id 's\\u2029t' is empty or contains"),
    "query id with NUL": (set_field("query.jsonl", 1, id="q01\x00"), f"query.jsonl:1: query id 'q01\\x00' {NUL}"),
    "query id with a lone surrogate": (set_field("query.jsonl", 1, id="q\ud800"),
                                       f"query.jsonl:1: query id 'q\\ud800' {SURROGATE}"),
    "judged document id with NUL": (set_field("qrels.jsonl", 3, p_id="s-endo-03\x00x"),
                                    f"qrels.jsonl:3: document id 's-endo-03\\x00x' {NUL}"),
    "judged query id with a lone surrogate": (set_field("qrels.jsonl", 2, q_id="q01\ud800"),
                                              f"qrels.jsonl:2: query id 'q01\\ud800' {SURROGATE}"),
    "judged query id with an escape": (set_field("qrels.jsonl", 2, q_id="\x1b[2J"),
                                       "qrels.jsonl:2: query id '\\x1b[2J' contains the control character U+001B"),
    # grades pytrec_eval keeps in a C int: 10**30 overflowed (a traceback), 2**32 + 1 wrapped to 1
    "grade 10**30": (set_field("qrels.jsonl", 3, score=10**30),
                     f"qrels.jsonl:3: field 'score' is 100000000000... (31 digits); {GRADES}"),
    "grade 1e30 as a float": (set_field("qrels.jsonl", 3, score=1e30), "qrels.jsonl:3: field 'score' is 10000000000"),
    "grade 2**31": (set_field("qrels.jsonl", 3, score=2**31), f"qrels.jsonl:3: field 'score' is 2147483648; {GRADES}"),
    "grade 2**32 + 1": (set_field("qrels.jsonl", 3, score=2**32 + 1),
                        f"qrels.jsonl:3: field 'score' is 4294967297; {GRADES}"),
    "grade of 5000 digits": (append_text("qrels.jsonl", '{"q_id": "q01", "p_id": "x", "score": 1' + "0" * 4999 + "}\n"),
                             "qrels.jsonl:26: a number with too many digits; fix or remove that line"),
    "grade a string of 5000 digits": (set_field("qrels.jsonl", 3, score="9" * 5000),
                                      "qrels.jsonl:3: field 'score' must be an integer, got '9999"),
    # one grade per query and document
    "conflicting judgments": (append_row("qrels.jsonl", {"q_id": "q01", "p_id": "s-endo-03", "score": 2}),
                              ("qrels.jsonl:26: query 'q01' judges document 's-endo-03' 2, but line 2 judges it 1; "
                               "keep one judgment per query and document")),
    "conflicting judgment 0": (append_row("qrels.jsonl", {"q_id": "q01", "p_id": "s-nephro-06", "score": 0}),
                               "qrels.jsonl:26: query 'q01' judges document 's-nephro-06' 0, but line 3 judges it 1"),
    # nothing to search for: scored from ties before
    "query text empty": (set_field("query.jsonl", 5, text=""),
                         "query.jsonl:5: query 'q05' has no text (empty or only whitespace)"),
    "query text only whitespace": (set_field("query.jsonl", 5, text=" \t\n\u3000 "),
                                   "query.jsonl:5: query 'q05' has no text (empty or only whitespace)"),
    "every document empty": (every_row("corpus.jsonl", text=""),
                             "corpus.jsonl: every document's text is empty or only whitespace; nothing to retrieve"),
    "every document only whitespace": (every_row("corpus.jsonl", text=" \n "),
                                       "corpus.jsonl: every document's text is empty or only whitespace"),
}


@pytest.mark.parametrize("case", list(DATA_CASES))
def test_hostile_task_data_gets_one_line(case, earlier, run_cli, tmp_path):
    edit, fragment = DATA_CASES[case]
    folder = tmp_path / "data" / "Biology"
    shutil.copytree(SAMPLE, folder)
    edit(folder)
    before = snapshot(earlier)
    code, _, err = run_cli("run", "--plugin", "bm25", "--data-dir", folder.parent, "--tasks", "Biology",
                           "--output", earlier, "--cache-dir", tmp_path / "cache")
    assert_one_line(code, err, fragment)
    assert snapshot(earlier) == before


# -- Options: Python's int and float read 1_5 as 15; -0.0 is 0.0; an integer beyond 64 bits
# overflowed in the library it reached, long after --dry-run passed.

OPTION_CASES = {
    "float with an underscore": (["--plugin", "bm25", "-o", "k1=1_5"],
                                 "-o bm25.k1=1_5: expected a number >= 0, written without '_'"),
    "float with an underscore and a point": (["--plugin", "bm25", "-o", "k1=1_000.5"],
                                             "-o bm25.k1=1_000.5: expected a number >= 0, written without '_'"),
    "integer with an underscore": (["--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", "depth=1_0"],
                                   "-o hybrid.depth=1_0: expected an integer >= 1, written without '_'"),
    "list item with an underscore": (["--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", "weights=1_0,2"],
                                     ("-o hybrid.weights=1_0,2: expected comma-separated numbers (each >= 0), "
                                      "written without '_'")),
    "integer 10**20": (["--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", f"depth={10**20}"],
                       f"-o hybrid.depth={10**20}: must be <= 9223372036854775807"),
    "integer 2**63": (["--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", f"depth={2**63}"],
                      f"-o hybrid.depth={2**63}: must be <= 9223372036854775807"),
    "rrf_k past a float's resolution": (["--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", "rrf_k=10000000"],
                                        "-o hybrid.rrf_k=10000000: must be <= 1000000"),
    "member option with an underscore": (["--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", "bm25.k1=1_5"],
                                         "-o bm25.k1=1_5: expected a number >= 0, written without '_'"),
    # the case: passed --dry-run, then "OverflowError: int too big to convert" in the tokenizer
    "max_length 10**20": (["--plugin", "st", "-o", "model=sentence-transformers/all-MiniLM-L6-v2",
                           "-o", f"max_length={10**20}"],
                          f"-o st.max_length={10**20}: must be <= 1048576"),
    "reranker max_length 10**20": (["--plugin", "bm25", "--plugin", "cross-encoder", "-o", f"max_length={10**20}"],
                                   f"-o cross-encoder.max_length={10**20}: must be <= 1048576"),
}


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize("case", list(OPTION_CASES))
def test_hostile_number_options_get_one_line(case, dry_run, earlier, run_cli):
    args, fragment = OPTION_CASES[case]
    before = snapshot(earlier)
    code, _, err = run_cli("run", *args, "--tasks", "sample", "--output", earlier, *(["--dry-run"] * dry_run))
    assert_one_line(code, err, fragment)
    assert snapshot(earlier) == before


@pytest.mark.parametrize("option", ["k1", "b"])
def test_minus_zero_is_zero(option, plugins, tmp_path):
    """-0.0 is the value 0.0: the same identity and results folder, never a folder of its own."""
    from r2med_tasks.running.request import RunRequest, plan_request

    def plan(value):
        planned = plan_request(RunRequest(("bm25",), (f"{option}={value}",), ("sample",), output=tmp_path / "out"))
        return planned["results_dirs"], planned["experiment"]

    zero = plan("0.0")
    assert plan("-0.0") == plan("-0") == plan("0") == zero
    assert zero[1] == f"{option}_0.0" and zero[0][0].endswith(f"/experiments/{option}_0.0")


@pytest.mark.parametrize("raw, expected", [
    ("1e-3", 0.001), (".5", 0.5), ("-3", -3.0), ("+2.5", 2.5), ("1E3", 1000.0), ("2.", 2.0), ("-0.0", 0.0),
])
def test_ordinary_numbers_still_parse(raw, expected):
    from pydantic import Field

    from pydantic import create_model

    from r2med_tasks.components.options import Options, parse

    model = create_model("Numbers", __base__=Options, x=(float, Field(1.0)), n=(int | None, Field(None)))
    value = parse(model, "x", raw, where="-o t.x")
    assert value == expected and math.copysign(1.0, value) == math.copysign(1.0, expected)
    assert parse(model, "n", "-3", where="-o t.n") == -3
    assert parse(model, "n", str(2**63 - 1), where="-o t.n") == 9223372036854775807
    assert parse(model, "n", str(-(2**63)), where="-o t.n") == -9223372036854775808


@pytest.mark.parametrize("key, raw, message", [
    ("n", str(2**63), "-o t.n=9223372036854775808: must be <= 9223372036854775807"),
    ("n", str(-(2**63) - 1), "-o t.n=-9223372036854775809: must be >= -9223372036854775808"),
    ("items", f"1,{10**20}", f"-o t.items=1,{10**20}: item 2 must be <= 9223372036854775807"),
    ("items", "1_000", "-o t.items=1_000: expected comma-separated integers, written without '_'"),
    ("x", "1_5", "-o t.x=1_5: expected a number, written without '_'"),
])
def test_number_options_refused(key, raw, message):
    from pydantic import Field

    from r2med_tasks.errors import UserError
    from pydantic import create_model

    from r2med_tasks.components.options import Options, parse

    model = create_model("Numbers", __base__=Options, x=(float, Field(1.0)), n=(int | None, Field(None)),
                          items=(tuple[int, ...], Field(())))
    with pytest.raises(UserError) as e:
        parse(model, key, raw, where=f"-o t.{key}")
    assert str(e.value) == message


def test_minus_zero_in_a_list_is_zero():
    from typing import Annotated

    from pydantic import Field

    from pydantic import create_model

    from r2med_tasks.components.options import Options, parse

    model = create_model("Weights", __base__=Options, w=(tuple[Annotated[float, Field(ge=0)], ...], Field(())))
    value = parse(model, "w", "-0.0,1", where="-o t.w")
    assert value == (0.0, 1.0) and math.copysign(1.0, value[0]) == 1.0


# -- The ids that used to collide are refused by every entry point. -----------------------------

COLLIDING = [("d1\x00x", NUL), ("d1\ud800", SURROGATE), ("d1\x07", "contains the control character U+0007")]


@pytest.mark.parametrize("bad, problem", COLLIDING)
def test_task_data_refuses_colliding_ids(tmp_path, bad, problem):
    from r2med_tasks.tasks.loading import load_local
    from r2med_tasks.errors import UserError

    write_rows(tmp_path / "corpus.jsonl", [{"id": "d1", "text": "one"}, {"id": bad, "text": "two"}])
    write_rows(tmp_path / "query.jsonl", [{"id": "q1", "text": "one?"}])
    write_rows(tmp_path / "qrels.jsonl", [{"q_id": "q1", "p_id": "d1", "score": 1}])
    with pytest.raises(UserError) as e:
        load_local(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 'corpus.jsonl'}:2: document id {bad!r} {problem}")


@pytest.mark.parametrize("bad, problem", COLLIDING)
def test_hub_rows_refuse_colliding_ids(bad, problem):
    from r2med_tasks.tasks.datafiles import Rows
    from r2med_tasks.tasks.validation import build_task_data
    from r2med_tasks.errors import UserError

    def rows(name, values):
        return Rows(values, f"hub config '{name}'", lambda i: f"hub config '{name}' row {i}")

    with pytest.raises(UserError, match=r"^hub config 'qrels' row 1: document id ") as e:
        build_task_data(rows("corpus", [{"id": "d1", "text": "one"}]), rows("query", [{"id": "q1", "text": "one?"}]),
                        rows("qrels", [{"q_id": "q1", "p_id": "d1", "score": 1},
                                       {"q_id": "q1", "p_id": bad, "score": 0}]),
                        revision="r", corpus_checksum="c", source="hub")
    assert problem in str(e.value)


@pytest.mark.parametrize("column", ["query", "document"])
@pytest.mark.parametrize("bad, problem", [("d1\x00x", NUL), ("d1\x07", "contains the control character U+0007")])
def test_trec_file_refuses_colliding_ids(tmp_path, column, bad, problem):
    from r2med_tasks.scoring.runs import read_trec

    qid, doc = ("q1" + bad[2:], "d1") if column == "query" else ("q1", bad)
    path = tmp_path / "run.trec"
    path.write_text(f"q1 Q0 d1 1 2.0 t\n{qid} Q0 {doc} 2 1.0 t\n", encoding="utf-8")
    shown = repr(qid if column == "query" else doc)
    with pytest.raises(ValueError) as e:
        read_trec(path)
    assert str(e.value).startswith(f"{path}:2: {column} id {shown} {problem}")


def test_trec_file_refuses_control_characters_in_any_column(tmp_path):
    from r2med_tasks.scoring.runs import read_trec

    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 2.0 t\x00ag\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"run\.trec:1: holds the control character U\+0000"):
        read_trec(path)


@pytest.mark.parametrize("line", ["q1 0 d1\x00x 0", '{"q_id": "q1", "p_id": "d1\\u0000x", "score": 0}',
                                  '{"q_id": "q1", "p_id": "d1\\ud800", "score": 0}'])
def test_qrels_file_refuses_colliding_ids(tmp_path, line):
    from r2med_tasks.tasks.validation import read_qrels
    from r2med_tasks.errors import UserError

    path = tmp_path / "qrels.txt"
    path.write_text(f"q1 0 d1 1\n{line}\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"^{path}:2: document id 'd1\\(x00x|ud800)' contains a (NUL|lone)"):
        read_qrels(path)


@pytest.mark.parametrize("where", ["query", "document"])
@pytest.mark.parametrize("bad", ["q1\x00x", "q1\ud800", "q1\x1b"])
def test_plugin_runs_refuse_colliding_ids(where, bad):
    """An id pytrec_eval or a TREC file would read as another is not the task's: refused by name."""
    from r2med_tasks.errors import PluginError
    from r2med_tasks.running.received import checked_run

    run = {"q1": {"d1": 1.0}, bad: {"d1": 0.5}} if where == "query" else {"q1": {"d1": 1.0, bad: 0.5}}
    with pytest.raises(PluginError) as e:
        checked_run(run, "retriever 'x'", queries={"q1"}, documents={"d1"}, judged={"q1"})
    what = "query id" if where == "query" else "unknown document id"
    assert str(e.value).startswith(f"retriever 'x' returned {what} {bad!r}")


def test_plugin_runs_refuse_ids_that_are_not_text():
    from r2med_tasks.errors import PluginError
    from r2med_tasks.running.received import checked_run

    with pytest.raises(PluginError, match=r"^retriever 'x' returned query id 1 \(int\)"):
        checked_run({"q1": {"d1": 1.0}, 1: {"d1": 1.0}}, "retriever 'x'", queries={"q1"}, documents={"d1"})


def test_write_trec_refuses_what_it_could_not_give_back(tmp_path):
    from r2med_tasks.scoring.runs import write_trec

    with pytest.raises(ValueError, match=r"^document id 'd\\x00' contains a NUL"):
        write_trec(tmp_path / "run.trec", {"q1": {"d\x00": 1.0}}, "t")
    assert not (tmp_path / "run.trec").exists()


def test_a_component_returning_a_colliding_query_id_gets_one_line(register, run_cli, tmp_path):
    """Before, the extra query 'q01\\0x' reached pytrec_eval as 'q01' (a duplicate, a garbled stderr line)."""
    from r2med_tasks.components.specs import RetrieverSpec
    from r2med_tasks.components.hookspecs import hookimpl

    class Colliding:
        def index(self, corpus, *, task, context):
            self.ids = corpus.ids

        def search(self, queries, *, task, top_k, context):
            run = {q.id: {d: 1.0 / (i + 1) for i, d in enumerate(self.ids)} for q in queries}
            return run | {"q01\x00x": {self.ids[0]: 1.0}}

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="colliding", factory=lambda options: Colliding()))

    register(Plugin(), "colliding-plugin")
    code, _, err = run_cli("run", "--plugin", "colliding", "--tasks", "sample", "--output", tmp_path / "out")
    assert_one_line(code, err, "retriever 'colliding' (from colliding-plugin) returned query id 'q01\\x00x', "
                               f"which {NUL}")
    assert not list((tmp_path / "out").rglob(f"{TASK}.json"))


@pytest.mark.parametrize("lines, message", [
    (["q1 0 d1 1", "q1 0 d1 2"], "qrels.txt:2: query 'q1' judges document 'd1' 2, but line 1 judges it 1"),
    (["q1 0 d1 1", "", '{"q_id": "q1", "p_id": "d1", "score": 0}'],
     "qrels.txt:3: query 'q1' judges document 'd1' 0, but line 1 judges it 1"),
    (["q1 0 d1 10000000000000000000000000000000"], f"qrels.txt:1: {GRADES}"),
    (["q1 0 d1 2147483648"], f"qrels.txt:1: {GRADES}"),
    (['{"q_id": "q1", "p_id": "d1", "score": 1e30}'], f"qrels.txt:1: {GRADES}"),
    (['{"q_id": "q1", "p_id": "d1", "score": true}'], f"qrels.txt:1: {GRADES}"),
    (['{"q_id": "q1", "p_id": "d1", "score": 1.5}'], f"qrels.txt:1: {GRADES}"),
    (['{"q_id": ["q1"], "p_id": "d1", "score": 1}'], "qrels.txt:1: expected a qrels.jsonl row"),
    (['{"q_id": "q1", "p_id": "d1", "score": 1' + "0" * 5000 + "}"], "qrels.txt:1: expected a qrels.jsonl row"),
])
def test_qrels_file_grades_and_conflicts(tmp_path, lines, message):
    from r2med_tasks.tasks.validation import read_qrels
    from r2med_tasks.errors import UserError

    path = tmp_path / "qrels.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UserError) as e:
        read_qrels(path)
    assert str(e.value).startswith(f"{tmp_path}/{message}")


def test_qrels_file_keeps_repeated_judgments_and_largest_grade(tmp_path):
    from r2med_tasks.tasks.validation import read_qrels

    path = tmp_path / "qrels.txt"
    path.write_text('q1 0 d1 1\nq1 0 d1 1\n{"q_id": "q1", "p_id": "d2", "score": "2"}\nq2 0 d1 2147483647\n',
                    encoding="utf-8")
    assert read_qrels(path) == {"q1": {"d1": 1, "d2": 2}, "q2": {"d1": 2147483647}}


@pytest.mark.parametrize("content, message", [(b"\xff\xfeq", "qrels.txt: not UTF-8 text"),
                                              (None, "qrels.txt: no such file")])
def test_qrels_file_unreadable(tmp_path, content, message):
    from r2med_tasks.tasks.validation import read_qrels
    from r2med_tasks.errors import UserError

    path = tmp_path / "qrels.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UserError, match=f"^{tmp_path}/{message}"):
        read_qrels(path)


def test_task_data_keeps_a_repeated_judgment_and_string_grades(tmp_path):
    """The same judgment twice is kept once, silently: it changes no number. A grade written "2" is
    2, and a warning says grades were written as text."""
    from r2med_tasks.tasks.loading import load_local

    write_rows(tmp_path / "corpus.jsonl", [{"id": "d1", "text": "one"}, {"id": "d2", "text": "two"}])
    write_rows(tmp_path / "query.jsonl", [{"id": "q1", "text": "one?"}])
    write_rows(tmp_path / "qrels.jsonl", [{"q_id": "q1", "p_id": "d1", "score": 1},
                                          {"q_id": "q1", "p_id": "d2", "score": "2"},
                                          {"q_id": "q1", "p_id": "d1", "score": 1},
                                          {"q_id": "q1", "p_id": "d3", "score": 2147483647}])
    data = load_local(tmp_path)
    assert data.qrels == {"q1": {"d1": 1, "d2": 2, "d3": 2147483647}}
    assert data.warnings == [f"{tmp_path / 'qrels.jsonl'}:2: 1 grade(s) written as text ('2'); read as the "
                             "integers they spell",
                             (f"{tmp_path}: 1 {tmp_path / 'qrels.jsonl'} rows (1 relevant) name documents missing "
                              "from the corpus; kept, as in the published evaluation: they count in recall and nDCG "
                              "but are never retrieved")]


def test_some_empty_documents_are_kept(tmp_path):
    """An empty passage among others is data (it ranks last); only a corpus with no text at all is refused."""
    from r2med_tasks.tasks.loading import load_local

    write_rows(tmp_path / "corpus.jsonl", [{"id": "d1", "text": ""}, {"id": "d2", "text": "two"}])
    write_rows(tmp_path / "query.jsonl", [{"id": "q1", "text": "two?"}])
    write_rows(tmp_path / "qrels.jsonl", [{"q_id": "q1", "p_id": "d2", "score": 1}])
    assert load_local(tmp_path).corpus.texts == ["", "two"]


def test_a_corpus_checked_before_these_checks_is_checked_again(tmp_path):
    """The cached id list skips the corpus checks: one written before them (format 1) is not used."""
    import hashlib

    from r2med_tasks.tasks.datafiles import file_sha256
    from r2med_tasks.tasks.loading import IDS_FORMAT, load_local
    from r2med_tasks.errors import UserError

    write_rows(tmp_path / "corpus.jsonl", [{"id": "d1", "text": "one"}, {"id": "d1\x00", "text": "two"}])
    write_rows(tmp_path / "query.jsonl", [{"id": "q1", "text": "one?"}])
    write_rows(tmp_path / "qrels.jsonl", [{"q_id": "q1", "p_id": "d1", "score": 1}])
    checksum = file_sha256(tmp_path / "corpus.jsonl")
    old = tmp_path / "cache" / "corpus" / f"{checksum}-1.ids"
    old.parent.mkdir(parents=True)
    body = b"d1\nd1\x00\n"
    old.write_bytes(json.dumps({"count": 2, "sha256": hashlib.sha256(body).hexdigest()}).encode() + b"\n" + body)
    assert IDS_FORMAT > 1
    with pytest.raises(UserError, match=NUL.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        load_local(tmp_path, cache_dir=tmp_path / "cache")
