"""``r2med show``: one query of a run (its text, what the LLM stages generated, the top 10 with
grades and snippets, the relevant documents missed, nDCG@10), two runs query by query, the JSON
both print (the library's, ``r2med_tasks.show_query`` / ``compare_queries``), 80-column output and
one-line errors.

Runs are made on data written here, by a registered retriever whose rankings the tests choose, so
every expected value (grades, ranks, nDCG@10) is derived here from that data, never read back
from the code under test."""

from __future__ import annotations

import io
import json
import math
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SAMPLE, TESTS, read_jsonl, write_jsonl

TASK = "R2MEDBiologyRetrieval"
# Ids long enough that a narrow table would be tempted to cut them.
Q_GAIN, Q_LOSS, Q_TIE = "query-gains-000001", "query-loses-000002", "query-ties-000003"
DOCS = [f"pmc-clinical-doc-{i:04d}" for i in range(1, 17)]
D = dict(enumerate(DOCS, 1))  # D[3] == "pmc-clinical-doc-0003"
TEXTS = {doc: f"Passage {i} ({doc}): " + " ".join(f"word{i}x{j}" for j in range(60)) for i, doc in D.items()}
QUERY_TEXTS = {Q_GAIN: "Why does the first query gain?\nA second line of the question.",
               Q_LOSS: "Why does the second query lose?", Q_TIE: "Does the third query tie?"}
QRELS = {
    Q_GAIN: {D[3]: 2, D[5]: 1, D[12]: 1, D[16]: 1, D[7]: 0},  # D[7] judged not relevant; D[16] never retrieved
    Q_LOSS: {D[1]: 1, D[2]: 2},
    Q_TIE: {D[10]: 1},
}
RANKINGS = {
    "fixed-a": {
        Q_GAIN: [D[3], D[1], D[7], D[2], D[4], D[5], D[6], D[8], D[9], D[10], D[11], D[13], D[12], D[14]],
        Q_LOSS: [D[2], D[3], D[1], D[4], D[5]],
        Q_TIE: [D[1], D[2], D[3], D[4], D[5], D[6], D[7], D[8], D[9], D[10]],
    },
    "fixed-b": {
        Q_GAIN: [D[5], D[3], D[12], D[16], D[1], D[2], D[4], D[6], D[8], D[9], D[11]],
        Q_LOSS: [D[4], D[5], D[6], D[7], D[8], D[9], D[10], D[11], D[12], D[13], D[1]],  # D[1] at 11; D[2] gone
        Q_TIE: [D[1], D[2], D[3], D[4], D[5], D[6], D[7], D[8], D[9], D[10]],
    },
}


def ndcg_at_10(ranking: list[str], judgments: dict[str, int]) -> float:
    """nDCG@10 as trec_eval's ndcg_cut_10 computes it: gain = grade, discount log2(rank + 1), the
    ideal ranking from every judged relevant document."""
    dcg = sum(judgments.get(doc, 0) / math.log2(rank + 1) for rank, doc in enumerate(ranking[:10], 1))
    ideal = sorted((g for g in judgments.values() if g > 0), reverse=True)[:10]
    return dcg / sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, 1))


def write_task(root: Path) -> Path:
    folder = root / "Biology"
    write_jsonl(folder / "corpus.jsonl", [{"id": doc, "text": TEXTS[doc]} for doc in DOCS])
    write_jsonl(folder / "query.jsonl", [{"id": q, "text": t} for q, t in QUERY_TEXTS.items()])
    write_jsonl(folder / "qrels.jsonl", [{"q_id": q, "p_id": d, "score": g} for q, docs in QRELS.items()
                                         for d, g in docs.items()])
    return root


class Fixed:
    """A retriever that returns the ranking it was given, best first (scores 100, 99, ...)."""

    def __init__(self, ranking: dict[str, list[str]]) -> None:
        self.ranking = ranking

    def index(self, corpus, *, task, context) -> None:
        pass

    def search(self, queries, *, task, top_k, context):
        return {q.id: {doc: 100.0 - i for i, doc in enumerate(self.ranking.get(q.id, []))} for q in queries}


@pytest.fixture
def fixed(register):
    from r2med_tasks.components.specs import RetrieverSpec
    from r2med_tasks.components.hookspecs import hookimpl

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            for name, ranking in RANKINGS.items():
                register(RetrieverSpec(name=name, factory=lambda options, r=ranking: Fixed(r)))

    register(Plugin(), "fixed-plugin")


@pytest.fixture
def runs(fixed, evaluate, tmp_path) -> dict[str, Path]:
    """The two fixed rankings run on the data written here: name -> results folder."""
    data = write_task(tmp_path / "data")
    folders = {name: Path(evaluate(name, tasks="Biology", data_dir=data, output="out").results_dirs[0])
               for name in RANKINGS}
    return {**folders, "data": data}


def show_json(run_cli, *args) -> dict:
    code, out, err = run_cli("show", *args, "--json")
    assert code == 0, err
    return json.loads(out)


# -- one query of a run --------------------------------------------------------------------------


def test_a_query_shows_the_top_10_with_grades_the_missed_relevant_documents_and_its_ndcg(run_cli, runs):
    view = show_json(run_cli, runs["fixed-a"], "--task", "Biology", "--query", Q_GAIN, "--data-dir", runs["data"])
    ranking, judged = RANKINGS["fixed-a"][Q_GAIN], QRELS[Q_GAIN]
    assert view["kind"] == "query" and view["task"] == TASK and view["run"]["path"] == str(runs["fixed-a"])
    assert view["query"] == {"id": Q_GAIN, "text": QUERY_TEXTS[Q_GAIN]}
    assert [(r["rank"], r["doc_id"]) for r in view["top"]] == list(enumerate(ranking[:10], 1))
    assert [r["grade"] for r in view["top"]] == [judged.get(d) for d in ranking[:10]]  # None: unjudged
    assert view["top"][2]["grade"] == 0 and view["top"][1]["grade"] is None  # judged not relevant vs unjudged
    assert [r["score"] for r in view["top"]] == [100.0 - i for i in range(10)]
    for row in view["top"]:
        assert TEXTS[row["doc_id"]].startswith(row["snippet"].rstrip("…"))
        assert len(row["snippet"]) <= 200
    # the relevant documents not in the top 10: D[12] further down (rank 13), D[16] not retrieved
    assert [(r["doc_id"], r["rank"], r["grade"]) for r in view["missed"]] == [(D[12], 13, 1), (D[16], None, 1)]
    assert view["relevant"] == 4 and view["retrieved"] == len(ranking)
    assert view["ndcg_at_10"] == pytest.approx(ndcg_at_10(ranking, judged), abs=1e-12)
    assert view["generations"] == [] and view["warnings"] == []


def test_the_printed_view_names_grades_ranks_and_not_retrieved(run_cli, runs):
    code, out, err = run_cli("show", runs["fixed-a"], "--query", Q_GAIN, "--data-dir", runs["data"])
    assert code == 0, err
    assert f"{100 * ndcg_at_10(RANKINGS['fixed-a'][Q_GAIN], QRELS[Q_GAIN]):.2f}" in out
    assert "unjudged" in out and "not retrieved" in out and "Why does the first query gain?" in out
    missed = out[out.index("missed"):]
    assert re.search(rf"│\s+13 │\s+1 │ {D[12]}", missed) and D[16] in missed


def test_the_cli_json_is_the_librarys_output(run_cli, runs):
    import r2med_tasks as r2med

    a, b, data = runs["fixed-a"], runs["fixed-b"], runs["data"]
    assert show_json(run_cli, a, "--query", Q_LOSS, "--data-dir", data) == \
        r2med.show_query(a, Q_LOSS, data_dir=data).to_json()
    assert show_json(run_cli, a, b, "--task", TASK) == r2med.compare_queries(a, b, task=TASK).to_json()
    assert show_json(run_cli, a, b, "--query", Q_GAIN, "--data-dir", data) == \
        r2med.compare_queries(a, b, query=Q_GAIN, data_dir=data).to_json()


# -- two runs ------------------------------------------------------------------------------------


def test_two_runs_list_every_query_from_the_largest_gain_to_the_largest_loss(run_cli, runs):
    diff = show_json(run_cli, runs["fixed-a"], runs["fixed-b"], "--task", "biology")
    scores = {name: {q: ndcg_at_10(RANKINGS[name][q], QRELS[q]) for q in QRELS} for name in RANKINGS}
    expected = sorted(QRELS, key=lambda q: scores["fixed-b"][q] - scores["fixed-a"][q], reverse=True)
    assert expected == [Q_GAIN, Q_TIE, Q_LOSS]  # the data was written so
    assert [r["query_id"] for r in diff["queries"]] == expected
    for row in diff["queries"]:
        q = row["query_id"]
        assert row["ndcg_at_10_a"] == pytest.approx(scores["fixed-a"][q], abs=1e-12)
        assert row["ndcg_at_10_b"] == pytest.approx(scores["fixed-b"][q], abs=1e-12)
        assert row["difference"] == pytest.approx(scores["fixed-b"][q] - scores["fixed-a"][q], abs=1e-12)
    assert diff["summary"]["gains"] == diff["summary"]["losses"] == diff["summary"]["ties"] == 1
    assert diff["query"] is None and diff["only_in_a"] == diff["only_in_b"] == []
    code, out, err = run_cli("show", runs["fixed-a"], runs["fixed-b"])  # the one task: no --task needed
    assert code == 0, err
    assert out.index(Q_GAIN) < out.index(Q_TIE) < out.index(Q_LOSS)


def test_one_query_of_two_runs_lists_what_entered_and_left_the_top_10(run_cli, runs):
    diff = show_json(run_cli, runs["fixed-a"], runs["fixed-b"], "--query", Q_LOSS, "--data-dir", runs["data"])
    top_a, top_b = RANKINGS["fixed-a"][Q_LOSS][:10], RANKINGS["fixed-b"][Q_LOSS][:10]
    entered = [d for d in top_b if d not in top_a]
    left = [d for d in top_a if d not in top_b]
    assert [r["query_id"] for r in diff["queries"]] == [Q_LOSS]
    q = diff["query"]
    assert q["id"] == Q_LOSS and q["text"] == QUERY_TEXTS[Q_LOSS]
    assert [r["doc_id"] for r in q["entered"]] == entered == [D[6], D[7], D[8], D[9], D[10], D[11], D[12], D[13]]
    assert [r["doc_id"] for r in q["left"]] == left == [D[2], D[3], D[1]]
    assert [(r["rank_a"], r["rank_b"], r["grade"]) for r in q["left"]] == [(1, None, 2), (2, None, None), (3, 11, 1)]
    assert all(r["rank_a"] is None and r["grade"] is None for r in q["entered"])
    assert q["difference"] == pytest.approx(ndcg_at_10(RANKINGS["fixed-b"][Q_LOSS], QRELS[Q_LOSS])
                                            - ndcg_at_10(top_a, QRELS[Q_LOSS]), abs=1e-12)


# -- what the LLMs generated --------------------------------------------------------------------


def test_a_live_rewriters_generation_and_reasoning_are_shown(run_cli, chat_server, tmp_path):
    queries = read_jsonl(SAMPLE / "query.jsonl")

    def script(context, partial):
        user = " ".join(m["content"] for m in context if isinstance(m.get("content"), str))
        qid = next(q["id"] for q in queries if q["text"] in user)
        return f"<think>Thinking about {qid} first.</think>A passage written for {qid} about insulin."

    chat_server.script = script
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={chat_server.url}#test-model", "--plugin", "bm25",
                             "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache",
                             "--json")
    assert code == 0, err
    (folder,) = json.loads(out)["results_dirs"]
    view = show_json(run_cli, folder, "--query", "q03")
    (g,) = view["generations"]
    assert (g["stage"], g["component"], g["model"]) == ("rewriter", "hyde", "test-model")
    assert g["answer"] == "A passage written for q03 about insulin."
    assert g["reasoning"] == "Thinking about q03 first."
    code, out, err = run_cli("show", folder, "--query", "q03")
    assert code == 0, err
    assert "A passage written for q03 about insulin." in out and "Thinking about q03 first." in out
    assert "q04" not in out  # only this query's record


def test_a_rewriter_that_calls_no_llm_is_shown_as_it_rewrote_each_query(run_cli, register, evaluate):
    """A plugin rewriter that records nothing itself: the runner records each query it returned."""
    from dataclasses import replace

    from r2med_tasks.components.hookspecs import hookimpl
    from r2med_tasks.components.specs import RewriterSpec

    class Rewriter:
        def rewrite(self, queries, *, task, context):
            return [replace(q, generated=("tinnitus", "vertigo"), method="lay") if q.id == "q01" else
                    replace(q, text=q.text.upper()) if q.id == "q02" else q for q in queries]

    class Plugin:
        @hookimpl
        def register_rewriters(self, register):
            register(RewriterSpec(name="glossary", factory=lambda options: Rewriter()))

    register(Plugin(), "glossary-plugin")
    folder = Path(evaluate("glossary", "bm25").results_dirs[0])
    first, second, third = (show_json(run_cli, folder, "--query", q) for q in ("q01", "q02", "q03"))
    (g,) = first["generations"]
    assert (g["stage"], g["component"], g["method"], g["generated"], g["rewritten"]) == \
        ("rewriter", "glossary", "lay", ["tinnitus", "vertigo"], None)
    assert second["generations"][0]["rewritten"] == second["query"]["text"].upper()
    assert third["generations"][0]["generated"] == [] and third["no_generations"] is None
    code, out, err = run_cli("show", folder, "--query", "q01")
    assert code == 0, err
    assert "Rewriter: glossary [lay]" in out and "Generated (2 of 2)" in out and "vertigo" in out
    assert "No generation record" not in out
    code, out, err = run_cli("show", folder, "--query", "q03")
    assert "Generated nothing" in out
    # a run whose folder keeps no records (made before r2med recorded every rewriter's output) says so
    (folder / "R2MEDSampleRetrieval.generations.jsonl").unlink()
    code, out, err = run_cli("show", folder, "--query", "q01")
    assert code == 0, err
    assert "No generation record for this query: the run keeps no generation records" in " ".join(out.split())
    assert "--overwrite" in out


def test_a_rerankers_order_and_reasoning_apart_are_shown(run_cli, evaluate):
    """A reranker's record (its answer the new order of document ids, its reasoning returned apart
    by the server), written as records.py documents it."""
    folder = Path(evaluate("bm25").results_dirs[0])
    order = ["s-endo-03", "s-endo-02", "case-08"]
    record = {"query_id": "q01", "stage": "reranker", "component": "llm-rerank", "model": "judge-1",
              "sampling": {}, "samples": [{"text": "[2] > [1] > [3]", "reasoning": "The second passage explains it.",
                                           "finish_reason": "length", "prompt_tokens": 10, "completion_tokens": 5,
                                           "reasoning_tokens": 3, "seconds": 0.1}],
              "output": "<think>The second passage explains it.</think>[2] > [1] > [3]", "answer": order,
              "seconds": 0.1, "reasoning_tokens": 1234}
    write_jsonl(folder / "R2MEDSampleRetrieval.generations.jsonl", [record, {**record, "query_id": "q02"}])
    (g,) = show_json(run_cli, folder, "--query", "q01")["generations"]
    assert (g["stage"], g["answer"], g["reasoning"]) == ("reranker", order, "The second passage explains it.")
    assert g["reasoning_tokens"] == 1234
    code, out, err = run_cli("show", folder, "--query", "q01")
    assert code == 0, err
    assert "s-endo-03, s-endo-02, case-08" in out and "The second passage explains it." in out
    assert "Reasoning (1,234 tokens)" in out
    assert "length" in out  # a cut answer is flagged


def test_text_from_files_cannot_act_on_the_terminal(run_cli, evaluate):
    """A generated text holding escape sequences and rich markup is shown as text, escaped."""
    folder = Path(evaluate("bm25").results_dirs[0])
    hostile = "\x1b]0;pwned\x07[bold red]loud[/] \x1b[2J"
    write_jsonl(folder / "R2MEDSampleRetrieval.generations.jsonl",
                [{"query_id": "q01", "stage": "rewriter", "component": f"hyde{hostile}", "model": hostile,
                  "samples": [], "output": hostile, "answer": hostile}])
    code, out, err = run_cli("show", folder, "--query", "q01")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "[bold red]loud[/]" in out and "\\x1b]0;pwned\\x07" in out


@pytest.mark.parametrize("output, samples, expected", [
    ("<think>a</think>x", [{}], "a"),
    ("a</think>x", [{}], "a"),  # the opening tag left out, as DeepSeek-R1's template does
    ("<think>one</think>x<think>two</think>y", [{}, {}], "one\n\ntwo"),  # two windows of a reranker
    ("x", [{"reasoning": "apart"}], "apart"),
    ("plain text", [{}], None),
])
def test_reasoning_is_read_from_the_record(output, samples, expected):
    from r2med_tasks.results.perquery import record_reasoning

    assert record_reasoning({"output": output, "samples": samples}) == expected


# -- 80 columns ----------------------------------------------------------------------------------


def test_the_views_fit_80_columns_and_never_cut_an_id(runs):
    from rich.console import Console

    import r2med_tasks as r2med
    from r2med_tasks.cli.show import print_differences, print_query

    a, b, data = runs["fixed-a"], runs["fixed-b"], runs["data"]
    views = [(print_query, r2med.show_query(a, Q_GAIN, data_dir=data)),
             (print_differences, r2med.compare_queries(a, b)),
             (print_differences, r2med.compare_queries(a, b, query=Q_LOSS, data_dir=data))]
    for render, view in views:
        buffer = io.StringIO()
        render(view, Console(file=buffer, width=80, color_system=None, legacy_windows=False))
        lines = buffer.getvalue().splitlines()
        assert lines and max(len(line) for line in lines) <= 80, buffer.getvalue()
        text = buffer.getvalue()
        ids = re.findall(r"pmc-clinical-doc-\d+|query-\w+-\d+|R2MED\w+", text)
        assert ids and all(i in DOCS or i in QRELS or i == TASK for i in ids), ids  # none cut short
    # every document of each table appears whole
    buffer = io.StringIO()
    print_query(views[0][1], Console(file=buffer, width=80, color_system=None))
    assert all(doc in buffer.getvalue() for doc in RANKINGS["fixed-a"][Q_GAIN][:10] + [D[12], D[16]])


# -- bad input -----------------------------------------------------------------------------------


def one_line_error(run_cli, *args) -> str:
    code, out, err = run_cli("show", *args)
    assert code == 2, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_bad_input_is_one_line_saying_what_to_do(run_cli, runs, tmp_path):
    a, data = runs["fixed-a"], runs["data"]
    (tmp_path / "empty").mkdir()
    cases = [
        ((tmp_path / "nope", "--query", Q_GAIN), ["nope: no such folder", "pass a results folder"]),
        ((a / f"{TASK}.json", "--query", Q_GAIN), ["a file, not a folder"]),
        ((tmp_path / "empty", "--query", Q_GAIN), ["not a results folder", "pass the folder r2med-run printed"]),
        ((tmp_path / "out", "--query", Q_GAIN), ["not a results folder", "e.g."]),  # the output folder above
        ((a, "--task", "sample", "--query", Q_GAIN), ["no results of R2MEDSampleRetrieval", "Biology"]),
        ((a, "--task", "nope", "--query", Q_GAIN), ["--task nope: no such task"]),
        ((a, "--task", "qa-reference", "--query", Q_GAIN), ["names 3 tasks", "give one task"]),
        ((a, "--query", "q-missing", "--data-dir", data), ["no such query", Q_GAIN, "pass one of them"]),
        ((a, runs["fixed-b"], "--query", "q-missing"), ["no such query"]),
        ((a, "--query", Q_GAIN), ["read local data", "pass --data-dir"]),  # the run read --data-dir
        ((a,), ["pass --query"]),
        ((a, a, a), ["3 folders"]),
    ]
    for args, fragments in cases:
        err = one_line_error(run_cli, *args)
        for fragment in fragments:
            assert fragment in err, (args, err)


def test_a_damaged_per_query_file_is_one_line(run_cli, runs):
    per_query = runs["fixed-a"] / f"{TASK}.per_query.tsv"
    per_query.write_text(per_query.read_text().replace("\t0.", "\t7.", 1))
    err = one_line_error(run_cli, runs["fixed-a"], runs["fixed-b"])
    assert "is not a score between 0 and 1" in err


def test_other_data_than_the_run_read_is_a_warning(run_cli, runs):
    qrels = runs["data"] / "Biology" / "qrels.jsonl"
    qrels.write_text(qrels.read_text() + json.dumps({"q_id": Q_TIE, "p_id": D[1], "score": 2}) + "\n")
    code, out, err = run_cli("show", runs["fixed-a"], "--query", Q_TIE, "--data-dir", runs["data"], "--json")
    assert code == 0 and "not the data the run was scored on" in err
    view = json.loads(out)
    assert view["top"][0]["grade"] == 2 and "not the data the run was scored on" in view["warnings"][0]
    assert view["ndcg_at_10"] == pytest.approx(ndcg_at_10(RANKINGS["fixed-a"][Q_TIE], QRELS[Q_TIE]))  # as stored


def test_a_run_on_the_hubs_data_finds_it_without_data_dir(official_hub, run_cli, evaluate):
    folder = Path(evaluate("bm25", tasks="Biology").results_dirs[0])
    chosen = {r["q_id"]: {} for r in official_hub["R2MED/Biology"]["qrels"]}
    for row in official_hub["R2MED/Biology"]["qrels"]:
        chosen[row["q_id"]][row["p_id"]] = row["score"]
    qid = sorted(chosen)[0]
    view = show_json(run_cli, folder, "--query", qid)
    assert view["task"] == TASK and view["relevant"] == sum(g > 0 for g in chosen[qid].values())
    assert {r["doc_id"] for r in view["top"] if r["grade"]} | {r["doc_id"] for r in view["missed"]} == \
        {d for d, g in chosen[qid].items() if g > 0}


# -- the page ------------------------------------------------------------------------------------


def page_commands() -> list[str]:
    """The page's shell blocks, line by line (test_docs.py dry-runs its r2med-run lines; these run)."""
    from test_docs import COMMENT, FENCE

    text = (TESTS.parent / "docs" / "inspecting-runs.md").read_text(encoding="utf-8")
    return [COMMENT.sub("", line).strip() for lang, body in FENCE.findall(text) if lang == "bash"
            for line in body.replace("\\\n", " ").splitlines() if COMMENT.sub("", line).strip()]


def test_the_pages_commands_run_as_written(plugins, tmp_path, monkeypatch):
    """docs/inspecting-runs.md's shell lines, in order, in an empty folder: its runs, its variables
    (A=..., B=...) and each `r2med show` exit 0; the --json ones print the documented keys."""
    from r2med_tasks.cli import cli

    monkeypatch.chdir(tmp_path)
    variables: dict[str, str] = {}
    shows = 0
    for line in page_commands():
        assignment = re.fullmatch(r"([A-Z_]+)=(\S+)", line)
        if assignment:
            variables[assignment.group(1)] = assignment.group(2)
            continue
        words = [re.sub(r"\$(\w+)", lambda m: variables[m.group(1)], w) for w in shlex.split(line)]
        assert words[0] in ("r2med", "r2med-run"), line
        args = ["run", *words[1:]] if words[0] == "r2med-run" else words[1:]
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, f"`{line}` -> {result.stderr}"
        if words[1:2] == ["show"]:
            shows += 1
            if "--json" in words:
                shown = json.loads(result.stdout)
                keys = {"query": {"format", "kind", "run", "task", "query", "ndcg_at_10", "relevant", "retrieved",
                                  "generations", "no_generations", "top", "missed", "warnings"},
                        "differences": {"format", "kind", "a", "b", "task", "summary", "queries", "only_in_a",
                                        "only_in_b", "query", "warnings"}}[shown["kind"]]
                assert set(shown) == keys
    assert shows >= 3


# -- the leaderboard page's per-query view --------------------------------------------------------


def page_data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    return json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S).group(1))


def board_page(run_cli, tmp_path, *args) -> dict:
    page = tmp_path / "board.html"
    code, out, err = run_cli("leaderboard", tmp_path / "out", "--format", "html", "--include-local", "--no-published",
                             "--output", page, *args)
    assert code == 0, err
    return page_data(page)


def system_id(data: dict, name: str) -> str:
    (sid,) = [sid for sid, s in data["systems"].items() if s["system"] == name]
    return sid


def test_the_page_embeds_each_runs_queries_top_10_and_grades(run_cli, runs, tmp_path):
    data = board_page(run_cli, tmp_path, "--data-dir", runs["data"])
    for name, ranking in RANKINGS.items():
        view = data["queries"][system_id(data, name)]
        assert set(view) == {"Biology"}
        b = view["Biology"]
        assert sorted(b["q"]) == sorted(QRELS) and "a" not in b and "no_grades" not in b
        for i, q in enumerate(b["q"]):
            assert b["n"][i] == pytest.approx(ndcg_at_10(ranking[q], QRELS[q]), abs=1e-4)
            assert b["d"][i] == ranking[q][:10]
            assert b["g"][i] == [QRELS[q].get(d) for d in ranking[q][:10]]
            assert b["r"][i] == sum(g > 0 for g in QRELS[q].values())
    # without the folder the runs read, their grades are unknown, and the page says how to give them
    data = board_page(run_cli, tmp_path)
    b = data["queries"][system_id(data, "fixed-a")]["Biology"]
    assert "g" not in b and "--data-dir" in b["no_grades"] and b["d"][0] == RANKINGS["fixed-a"][b["q"][0]][:10]


def test_the_page_embeds_the_beginning_of_what_the_llm_generated(official_hub, run_cli, chat_server, tmp_path):
    """A live HyDE run on the hub's data: its answers' first 300 characters, grades from the hub's
    judgments, and the page's size per query stays small."""
    long = " ".join(f"word{i}" for i in range(200))  # about 1,300 characters

    def script(context, partial):
        user = " ".join(m["content"] for m in context if isinstance(m.get("content"), str))
        qid = next(q["id"] for q in official_hub["R2MED/Biology"]["query"] if q["text"] in user)
        return f"<think>hmm</think>About {qid}: {long}"

    chat_server.script = script
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={chat_server.url}#test-model", "--plugin", "bm25",
                             "--tasks", "Biology", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache")
    assert code == 0, err
    data = board_page(run_cli, tmp_path)
    ((sid, view),) = data["queries"].items()
    assert data["systems"][sid]["origin"] == "run"
    b = view["Biology"]
    qrels: dict[str, dict[str, int]] = {}
    for row in official_hub["R2MED/Biology"]["qrels"]:
        qrels.setdefault(row["q_id"], {})[row["p_id"]] = row["score"]
    assert sorted(b["q"]) == sorted(qrels)
    for i, q in enumerate(b["q"]):
        assert b["a"][i] == (f"About {q}: {long}")[:300].rstrip() + "…"
        assert b["r"][i] == sum(g > 0 for g in qrels[q].values())
        assert [g is not None and g > 0 for g in b["g"][i]] == [qrels[q].get(d, 0) > 0 for d in b["d"][i]]
    per_query = len(json.dumps(view, separators=(",", ":"))) / len(b["q"])
    assert per_query < 300 + 10 * 40 + 100  # the answer, ten ids and their grades, the score


def test_the_page_embeds_the_first_runs_only(run_cli, runs, tmp_path, monkeypatch):
    monkeypatch.setattr("r2med_tasks.board.html.QUERY_RUNS", 1)
    data = board_page(run_cli, tmp_path, "--data-dir", runs["data"])
    ranked = sorted((s["rank"], sid) for sid, s in data["systems"].items())
    assert list(data["queries"]) == [ranked[0][1]] and data["query_runs"] == 1


@pytest.fixture
def browser():
    """Headless Chromium (docs/screenshots.py's), when Debian's chromium is installed."""
    import importlib.util
    import shutil

    if shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    spec = importlib.util.spec_from_file_location("screenshots", TESTS.parent / "docs" / "screenshots.py")
    screenshots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(screenshots)
    chromium = screenshots.Chromium()
    yield chromium
    chromium.close()


def test_the_run_detail_opens_its_queries(run_cli, runs, tmp_path, browser):
    data = board_page(run_cli, tmp_path, "--data-dir", runs["data"])
    sid = system_id(data, "fixed-b")
    browser.open((tmp_path / "board.html").as_uri(), 1200)
    browser.js(f"document.querySelector('button.sys[data-id={json.dumps(sid)}]').click()")
    scores = {q: ndcg_at_10(RANKINGS["fixed-b"][q], QRELS[q]) for q in QRELS}
    shown = browser.js("Array.from(document.querySelectorAll('#per-query details.pq')).map(d => d.dataset.query)")
    assert shown == sorted(QRELS, key=lambda q: (scores[q], q))  # lowest nDCG@10 first
    browser.js(f"document.querySelector('#per-query details.pq[data-query={json.dumps(Q_GAIN)}]').open = true")
    text = browser.js(f"document.querySelector('#per-query details.pq[data-query={json.dumps(Q_GAIN)}]').innerText")
    found = sum(QRELS[Q_GAIN].get(d, 0) > 0 for d in RANKINGS["fixed-b"][Q_GAIN][:10])
    assert f"{100 * scores[Q_GAIN]:.2f}" in text and f"{found} of 4 relevant in the top 10" in text
    items = browser.js(f"Array.from(document.querySelectorAll('#per-query details.pq[data-query={json.dumps(Q_GAIN)}] "
                       "li')).map(li => li.textContent)")
    assert items == [d + ("unjudged" if QRELS[Q_GAIN].get(d) is None else f"grade {QRELS[Q_GAIN][d]}")
                     for d in RANKINGS["fixed-b"][Q_GAIN][:10]]
    assert f"r2med show {runs['fixed-b']} --task Biology --query {Q_GAIN} --data-dir DIR" in text
