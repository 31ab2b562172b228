"""LLM answers a stage could not use are counted where the runner receives the generation records
(``running.received.Answers``): per query in the records, per stage in the outcome (``--json``'s
``llm_answers``) and the summary; a stage that could use none fails in one line."""

import json
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl
from test_bad_input import assert_user_error
from test_plugin_output import register_stage

TASK = "R2MEDSampleRetrieval"
QUERIES = read_jsonl(SAMPLE / "query.jsonl")
FIRST = QUERIES[0]


def rerank(run_cli, tmp_path, server, *extra):
    return run_cli("run", "--plugin", "bm25", "--plugin", "llm-rerank", "-o", f"llm={server.url}#ranker",
                   "-o", "rerank_k=5", "-o", "window=5", "-o", "step=5", "--tasks", "sample",
                   "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", *extra)


def ranking_unless_first(messages, partial):
    """Each window reversed, but the first query's, whose answer ranks nothing."""
    if FIRST["text"] in messages[1]["content"]:
        return "I cannot rank these"
    return "[5] > [4] > [3] > [2] > [1]"


def test_a_reranker_that_could_use_no_answer_fails_in_one_line(run_cli, chat_server, tmp_path):
    chat_server.script = lambda messages, partial: "I cannot rank these"
    code, out, err = rerank(run_cli, tmp_path, chat_server)
    assert_user_error(code, err, "reranker 'llm-rerank'", f"could not use any of the 10 LLM answers for {TASK} "
                      f"(query {FIRST['id']!r}: 'I cannot rank these')", "check the model")
    assert not list((tmp_path / "out").rglob(f"*llm-rerank*/**/{TASK}.json"))  # never labelled a reranked run
    assert list((tmp_path / "out").rglob(f"*bm25*/**/{TASK}.json"))  # the first stage, finished, is kept


def test_answers_a_reranker_could_not_use_are_counted(run_cli, chat_server, tmp_path):
    chat_server.script = ranking_unless_first
    code, out, err = rerank(run_cli, tmp_path, chat_server, "--json")
    assert code == 0, err
    assert f"warning: {TASK}: reranker 'llm-rerank'" in err and "could not use 1 of 10 LLM answers, for 1 queries" in err
    run = json.loads(out)
    assert run["tasks"][0]["llm_answers"] == {"reranker": {"answers": 10, "unusable": 1}}
    (folder,) = map(Path, run["results_dirs"])
    records = read_jsonl(folder / f"{TASK}.generations.jsonl")
    assert {r["query_id"]: r.get("unusable") for r in records} == {q["id"]: None for q in QUERIES} | {FIRST["id"]: 1}
    code, out, err = rerank(run_cli, tmp_path, chat_server)  # reused: the count read back from the records
    assert code == 0, err
    assert "from earlier run" in out and "Unusable LLM answers: reranker 1 of 10" in out


def hyde(run_cli, tmp_path, server, *extra):
    return run_cli("run", "--plugin", "hyde", "-o", f"llm={server.url}#test-model", "--plugin", "bm25",
                   "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", *extra)


def test_a_rewriter_that_could_use_no_answer_fails_in_one_line(run_cli, chat_server, tmp_path):
    chat_server.script = lambda messages, partial: "<think>Where to begin.</think>\n"  # thinking, no document
    code, _, err = hyde(run_cli, tmp_path, chat_server)
    assert_user_error(code, err, "rewriter 'hyde'", f"could not use any of the 10 LLM answers for {TASK}")
    assert not list((tmp_path / "out").rglob(f"{TASK}.json"))


def test_empty_documents_a_rewriter_got_are_counted(run_cli, chat_server, tmp_path):
    chat_server.script = lambda messages, partial: ("<think>Hmm.</think>" if FIRST["text"] in messages[-1]["content"]
                                                    else "<think>Hmm.</think>A passage.")
    code, out, err = hyde(run_cli, tmp_path, chat_server, "--json")
    assert code == 0, err
    assert "could not use 1 of 10 LLM answers, for 1 queries" in err
    assert json.loads(out)["tasks"][0]["llm_answers"] == {"rewriter": {"answers": 10, "unusable": 1}}


@pytest.mark.parametrize("unusable", [2, -1, True, 0.5])
def test_a_count_that_is_not_one_is_refused(register, run_cli, tmp_path, unusable):
    from r2med_tasks.plugin import Generation

    class Counting:
        def rewrite(self, queries, *, task, context):
            for q in queries:
                context.generated(q.id, [Generation("text", 1, 1, "stop", "m")], answer="text", unusable=unusable)
            return list(queries)

    register_stage(register, "rewriter", "counting", Counting)
    code, _, err = run_cli("run", "--plugin", "counting", "--plugin", "overlap", "--tasks", "sample",
                           "--output", tmp_path / "out")
    assert_user_error(code, err, "rewriter 'counting' (from counting-plugin)", f"unusable={unusable!r}",
                      "an integer from 0 to the 1 it handed over")


def test_the_query_named_is_the_same_whatever_order_the_answers_arrive_in():
    """Answers arrive as the server sends them; the failure names the first query id, every run."""
    from r2med_tasks.errors import PluginError
    from r2med_tasks.plugin import SAMPLE_TASK
    from r2med_tasks.running.received import Answers

    for order in (["q03", "q01", "q02"], ["q02", "q03", "q01"]):
        answers = Answers("reranker 'x'")
        for query in order:
            answers.add({"query_id": query, "samples": [{"text": f"no {query}"}], "unusable": 1, "output": f"no {query}"})
        with pytest.raises(PluginError, match=r"\(query 'q01': 'no q01'\)"):
            answers.judge(SAMPLE_TASK, print)
