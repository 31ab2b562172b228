"""Thinking counted and bounded (issue #44): ``-o thinking=off|on`` and ``-o thinking_budget=N``
reach the request as vLLM takes them, key the generation cache and identify a result only when
set; the reasoning tokens a server reports are summed per query into the generation records and
per task into the cost, and the board shows them per query."""

import csv
import io
import json
from pathlib import Path

import pytest

import r2med_tasks as r2med
from conftest import make_data_dir

TASK = "R2MEDBiologyRetrieval"


def chat(server, **kw):
    from r2med_tasks.llm import ChatClient

    return ChatClient("test-model", base_url=server.url, timeout=5.0, **kw)


MESSAGES = [[{"role": "user", "content": "Why do cells divide?"}]]


@pytest.mark.parametrize("settings, sent", [
    ({"thinking": False}, {"chat_template_kwargs": {"enable_thinking": False}}),
    ({"thinking": True, "thinking_budget": 64},
     {"chat_template_kwargs": {"enable_thinking": True}, "thinking_token_budget": 64}),
    ({}, {}),
])
def test_the_thinking_controls_reach_the_request_as_vllm_takes_them(chat_server, settings, sent):
    chat(chat_server, **settings).generate(MESSAGES)
    body = chat_server.requests[-1].body
    assert {k: body[k] for k in ("chat_template_kwargs", "thinking_token_budget") if k in body} == sent
    assert "thinking" not in body and "thinking_budget" not in body


def test_a_continued_turn_carries_them_too(chat_server):
    from r2med_tasks.llm.messages import Turn

    chat(chat_server, thinking=False, thinking_budget=0).continue_turns(
        [Turn(tuple(MESSAGES[0]), partial="So", stop=("</s>",))])
    body = chat_server.requests[-1].body
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["thinking_token_budget"] == 0


@pytest.mark.parametrize("settings", [{"thinking": "off"}, {"thinking_budget": -1}, {"thinking_budget": 1.5}])
def test_a_bad_thinking_control_is_refused_in_one_line(settings):
    from r2med_tasks.errors import UserError

    with pytest.raises(UserError, match=next(iter(settings))):
        chat(type("S", (), {"url": "http://127.0.0.1:9/v1"})(), **settings)


def test_thinking_off_and_on_are_cached_apart(chat_server, tmp_path):
    from r2med_tasks.llm.cache import CachedClient, GenerationCache
    from r2med_tasks.llm.usage import Usage

    cache = GenerationCache(tmp_path / "chat.jsonl")
    for thinking in (False, True, False, None, True):
        CachedClient(chat(chat_server, thinking=thinking), cache, Usage()).generate(MESSAGES)
    assert chat_server.count == 3  # off, on, the server's default; the repeats from the cache


@pytest.fixture
def data(tmp_path) -> Path:
    return make_data_dir(tmp_path / "data")


def hyde(evaluate, server, data, **options):
    return evaluate("hyde", "bm25", llm=f"{server.url}#test-model", tasks=["Biology"], data_dir=data, **options)


def test_thinking_identifies_a_result_only_when_set(evaluate, chat_server, data):
    unset = hyde(evaluate, chat_server, data)
    off = hyde(evaluate, chat_server, data, thinking=False)
    on = hyde(evaluate, chat_server, data, thinking=True, thinking_budget=256)
    options = {name: run.spec.config["rewriter"]["options"] for name, run in (("unset", unset), ("off", off),
                                                                                ("on", on))}
    assert "thinking" not in options["unset"] and "thinking_budget" not in options["unset"]
    assert (options["off"]["thinking"], options["on"]["thinking"], options["on"]["thinking_budget"]) == \
        (False, True, 256)
    assert len({str(run.results_dirs) for run in (unset, off, on)}) == 3
    assert chat_server.count == 30  # 10 queries each: no answer reused across settings
    sent = [r.body.get("chat_template_kwargs") for r in chat_server.requests]
    assert sent == [None] * 10 + [{"enable_thinking": False}] * 10 + [{"enable_thinking": True}] * 10
    again = hyde(evaluate, chat_server, data, thinking=False)
    assert chat_server.count == 30 and again.results_dirs == off.results_dirs  # reused


def test_thinking_is_refused_on_published_generations(evaluate, data):
    from r2med_tasks.errors import UserError

    with pytest.raises(UserError, match="thinking"):
        evaluate("hyde", "bm25", source="o3-mini", thinking=False, tasks=["Biology"], data_dir=data)


def test_reasoning_is_counted_per_query_in_records_cost_and_board(evaluate, tmp_path, chat_server, data):
    from conftest import board_rows

    chat_server.reasoning_parser = "qwen3"
    chat_server.script = lambda context, partial: f"<think>about {len(str(context))}</think>A passage."
    chat_server.reasoning_tokens = lambda body: len(json.dumps(body["messages"])) % 11 + 1
    run = hyde(evaluate, chat_server, data)
    (folder,) = run.results_dirs
    records = [json.loads(line) for line in (Path(folder) / f"{TASK}.generations.jsonl").open()]
    reported = {json.dumps(body["messages"]): usage["completion_tokens_details"]["reasoning_tokens"]
                for body, usage in chat_server.reported}
    assert len(records) == 10
    for record in records:
        (sample,) = record["samples"]
        assert sample["reasoning"].startswith("about ") and record["answer"] == "A passage."
        assert record["reasoning_tokens"] == sample["reasoning_tokens"] in reported.values()
    total = sum(reported.values())
    assert sum(r["reasoning_tokens"] for r in records) == total
    cost = json.loads((Path(folder) / "r2med" / f"{TASK}.cost.json").read_text())
    assert cost["usage"]["reasoning_tokens"] == total
    (row,), _ = board_rows(tmp_path / "out")
    assert row.reasoning_tokens_per_query == pytest.approx(total / 10)
    board = r2med.rank_systems(tmp_path / "out", published="none", include_local=True)
    (shown,) = csv.DictReader(io.StringIO(board.render("csv")))  # the wide table's and markdown's column too
    assert float(shown["Reasoning tokens/query"]) == pytest.approx(total / 10)
    assert "Reasoning tokens/query" in board.render("table", wide=True)


def test_a_server_refusing_the_field_names_the_option(chat_server):
    from r2med_tasks.errors import UserError

    chat_server.fail("400", message="Unrecognized request argument supplied: chat_template_kwargs")
    with pytest.raises(UserError, match=r"does not take thinking as set \(sent as chat_template_kwargs\)"):
        chat(chat_server, thinking=False).generate(MESSAGES)
    assert chat_server.count == 1  # not retried
