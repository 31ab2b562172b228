"""Continued assistant turns (``Turn``, ``ChatClient.continue_turns``, ``continue_cached``), as
search agents use them: the real client (the openai SDK over HTTP) against the local fake server,
in chat mode (vLLM's ``continue_final_message``) and completions mode (a chat template rendered here)."""

from __future__ import annotations

import json
import shutil

import jinja2
import pytest
from chat_server import fake_answer
from conftest import tokenizer_with_template

from r2med_tasks.errors import UserError
from r2med_tasks.llm import ChatClient
from r2med_tasks.llm.answers import Generation
from r2med_tasks.llm.cache import GenerationCache, continue_cached, generate_cached, turn_key
from r2med_tasks.llm.messages import Turn
from r2med_tasks.llm.usage import Usage

TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
SECRET = "s3cr3t-0123456789TURNS"
END = "<|end_search_query|>"
MESSAGES = ({"role": "system", "content": "Answer, searching when needed."},
            {"role": "user", "content": "What causes microcytic anemia?"})


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A tiny tokenizer folder (the installed MiniLM's) whose tokenizer_config.json holds TEMPLATE."""
    return tokenizer_with_template(tmp_path_factory.mktemp("tokenizer"), TEMPLATE)


def chat(server, **kw) -> ChatClient:
    return ChatClient(kw.pop("model", "test-model"), base_url=server.url, timeout=5.0, **kw)


def body(server, i: int = -1) -> dict:
    return server.requests[i].body


# -- chat mode ------------------------------------------------------------------------------------
def test_chat_mode_sends_the_partial_as_the_final_assistant_message(chat_server):
    chat_server.script = lambda context, partial: f"iron deficiency{END} never returned"
    partial = "I should search. <|begin_search_query|>"
    (g,) = chat(chat_server).continue_turns([Turn(MESSAGES, partial, stop=(END,))])
    assert g == Generation("iron deficiency", g.prompt_tokens, g.completion_tokens, "stop", "test-model", stop=END)
    sent = body(chat_server)
    assert chat_server.requests[-1].path == "/v1/chat/completions"
    assert sent["messages"] == [*MESSAGES, {"role": "assistant", "content": partial}]
    assert sent["continue_final_message"] is True and sent["add_generation_prompt"] is False
    assert sent["stop"] == [END] and "max_tokens" not in sent
    assert chat_server.scripted == [(list(MESSAGES), partial)]  # the fake continued that very text
    # a turn not yet started is an ordinary chat request (any OpenAI-compatible server takes it)
    (start,) = chat(chat_server).continue_turns([Turn(list(MESSAGES))])
    assert start.text.startswith("iron deficiency") and start.stop is None and start.finish_reason == "stop"
    assert body(chat_server)["messages"] == list(MESSAGES)
    assert not {"continue_final_message", "add_generation_prompt", "stop"} & set(body(chat_server))


def test_a_search_loop_over_many_rounds_in_input_order(chat_server):
    """The agents' loop: generate to a stop string, append results, continue; answers come back
    in input order under concurrency, each ``on_result`` call with its index."""

    def model(context, partial):  # asks one search per question, then answers from the results
        question = context[-1]["content"]
        if "<result>" not in partial:
            return f"<search>{question}</search>"
        return f"Answer from {partial.count('<result>')} result(s) for {question}"

    chat_server.script = model
    turns = [Turn(({"role": "user", "content": f"q{i}"},), stop=("</search>",)) for i in range(6)]
    seen = []
    first = chat(chat_server, concurrency=3).continue_turns(turns, on_result=lambda i, g: seen.append(i))
    assert [g.text for g in first] == [f"<search>q{i}" for i in range(6)] and {g.stop for g in first} == {"</search>"}
    assert sorted(seen) == list(range(6))
    turns = [Turn(t.messages, g.text + "</search><result>doc</result>", t.stop) for t, g in zip(turns, first)]
    second = chat(chat_server, concurrency=3).continue_turns(turns)
    assert [g.text for g in second] == [f"Answer from 1 result(s) for q{i}" for i in range(6)]
    assert all(g.stop is None and g.finish_reason == "stop" for g in second)


# -- completions mode -----------------------------------------------------------------------------
def test_completions_mode_renders_the_chat_template_here(chat_server, tokenizer_dir):
    chat_server.script = lambda prompt, partial: f"more text{END}"
    client = chat(chat_server, template=tokenizer_dir, max_tokens=64, temperature=0.6)
    partial = "Let me search.\n\n<|begin_search_query|>"  # trailing text kept exactly
    (g,) = client.continue_turns([Turn(MESSAGES, partial, stop=[END, "</s>"])])
    expected = jinja2.Template(TEMPLATE).render(messages=list(MESSAGES), add_generation_prompt=True) + partial
    assert expected.startswith("<|system|>Answer, searching") and expected.endswith("<|assistant|>" + partial)
    assert chat_server.requests[-1].path == "/v1/completions"
    assert body(chat_server) == {"model": "test-model", "prompt": expected, "max_tokens": 64, "temperature": 0.6,
                                 "stop": [END, "</s>"]}
    assert chat_server.scripted == [(expected, "")]
    assert (g.text, g.stop, g.finish_reason) == ("more text", END, "stop")
    assert client.render(Turn(MESSAGES, partial)) == expected


def test_completions_mode_errors_are_one_line(chat_server, tokenizer_dir, tmp_path):
    turn = [Turn(MESSAGES)]
    missing = ChatClient("m", base_url=chat_server.url, template=tmp_path / "nowhere", max_tokens=8)  # lazily loaded
    with pytest.raises(UserError, match="cannot load the tokenizer template=.*nowhere") as err:
        missing.continue_turns(turn)
    plain = tmp_path / "plain"
    shutil.copytree(tokenizer_dir, plain)
    config = json.loads((plain / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (plain / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="has no chat template") as err2:
        chat(chat_server, template=plain, max_tokens=8).continue_turns(turn)
    with pytest.raises(UserError, match="set max_tokens") as err3:
        chat(chat_server, template=tokenizer_dir).continue_turns(turn)
    assert all("\n" not in str(e.value) for e in (err, err2, err3)) and chat_server.count == 0


# -- stop strings, max_tokens, sampling params ----------------------------------------------------
def test_stop_strings_end_the_text_and_are_named(chat_server):
    chat_server.script = lambda context, partial: {"a": "one </answer> two <search> three",
                                                   "b": "<search>at once", "c": "no stop here"}[context[-1]["content"]]
    turns = [Turn(({"role": "user", "content": u},), "so far", stop=("<search>", "</answer>")) for u in "abc"]
    out = chat(chat_server).continue_turns(turns)
    assert [(g.text, g.stop, g.finish_reason) for g in out] == [
        ("one ", "</answer>", "stop"),  # the first one written, whatever the order given
        ("", "<search>", "stop"),  # a stop string at once: empty text is an answer, not retried
        ("no stop here", None, "stop")]
    assert chat_server.count == 3
    chat_server.stop_reasons = False  # as OpenAI: finish_reason only, so which stop is unknown
    (g,) = chat(chat_server).continue_turns(turns[:1])
    assert (g.text, g.stop, g.finish_reason) == ("one ", None, "stop")


def test_a_turn_sets_its_own_max_tokens(chat_server):
    chat_server.script = lambda context, partial: "w1 w2 w3 w4 w5 w6"
    client = chat(chat_server, max_tokens=100)
    short, default = client.continue_turns([Turn(MESSAGES, "x", max_tokens=3), Turn(MESSAGES, "y")])
    assert {r.body["messages"][-1]["content"]: r.body["max_tokens"] for r in chat_server.requests} == {"x": 3, "y": 100}
    assert (short.text, short.finish_reason, short.completion_tokens) == ("w1 w2 w3", "length", 3)
    assert (default.text, default.finish_reason) == ("w1 w2 w3 w4 w5 w6", "stop")
    with pytest.raises(UserError, match="max_tokens must be an integer >= 1"):
        Turn(MESSAGES, max_tokens=0)


def test_top_k_and_repetition_penalty_are_sent_only_when_set(chat_server, tokenizer_dir):
    turn = Turn(MESSAGES, "so far")
    chat(chat_server).continue_turns([turn])
    chat(chat_server, top_k=20, repetition_penalty=1.05).continue_turns([turn])
    chat(chat_server, top_k=20, repetition_penalty=1.05).generate([list(MESSAGES)])
    chat(chat_server, template=tokenizer_dir, max_tokens=8, top_k=5).continue_turns([turn])
    bare, both, generated, completions = (r.body for r in chat_server.requests)
    assert not {"top_k", "repetition_penalty"} & set(bare)
    assert (both["top_k"], both["repetition_penalty"]) == (20, 1.05)
    assert (generated["top_k"], generated["repetition_penalty"]) == (20, 1.05)
    assert completions["top_k"] == 5 and "repetition_penalty" not in completions
    assert chat(chat_server, top_k=20, repetition_penalty=1).params == {"top_k": 20, "repetition_penalty": 1.0}
    for bad in ({"top_k": -2}, {"top_k": 1.5}, {"repetition_penalty": 0}, {"repetition_penalty": True}):
        with pytest.raises(UserError, match=next(iter(bad))):
            chat(chat_server, **bad)


# -- the cache, usage, retries, refusals ----------------------------------------------------------
def test_a_rerun_sends_nothing_and_each_part_of_a_turn_is_keyed(chat_server, tmp_path):
    chat_server.script = lambda context, partial: f"text for {partial}{END}"
    path = tmp_path / "g.jsonl"
    turns = [Turn(MESSAGES, "p1", (END,)), Turn(MESSAGES, "p2", (END,)), Turn(MESSAGES, "p1", (END,))]
    usage = Usage()
    first = continue_cached(chat(chat_server), GenerationCache(path), turns, usage=usage)
    assert [g.text for g in first] == ["text for p1", "text for p2", "text for p1"] and first[0].stop == END
    assert chat_server.count == 2 and (usage.sent, usage.cached) == (2, 1)  # the repeated turn sent once
    again = Usage()
    assert continue_cached(chat(chat_server), GenerationCache(path), turns, usage=again) == first
    assert chat_server.count == 2 and (again.sent, again.cached) == (0, 3)
    # a different partial, stop, max_tokens or sampling param is another request
    continue_cached(chat(chat_server), GenerationCache(path), [Turn(MESSAGES, "p3", (END,))])
    continue_cached(chat(chat_server), GenerationCache(path), [Turn(MESSAGES, "p1", (END, "</s>"))])
    continue_cached(chat(chat_server), GenerationCache(path), [Turn(MESSAGES, "p1", (END,), max_tokens=9)])
    continue_cached(chat(chat_server, top_k=3), GenerationCache(path), [Turn(MESSAGES, "p1", (END,))])
    assert chat_server.count == 6
    # a started turn is not a generate() request, and generate()'s cache lines are unchanged
    generate_cached(chat(chat_server), GenerationCache(path), [list(MESSAGES)])
    continue_cached(chat(chat_server), GenerationCache(path), [Turn(MESSAGES)])
    assert chat_server.count == 8
    assert [json.loads(line).get("stop") for line in path.read_text().splitlines()][-2:] == [None, None]
    assert "stop" not in json.loads(path.read_text().splitlines()[-2])


def test_turn_keys_are_distinct():
    served = {"id": "m", "root": "/w", "parent": None}
    base = ("m", "chat", {"messages": list(MESSAGES), "partial": "p"}, [END], {"temperature": 0}, served)
    k = turn_key(*base)
    assert k == turn_key("m", "chat", {"partial": "p", "messages": list(MESSAGES)}, (END,), {"temperature": 0.0},
                         served)
    variants = [("m2",), (None, "completions"), (None, None, {"messages": list(MESSAGES), "partial": "p "}),
                (None, None, None, [END, "x"]), (None, None, None, ["x", END]), (None, None, None, None, {}),
                (None, None, None, None, {"temperature": 0, "top_k": 1}),
                (None, None, None, None, None, {"id": "m", "root": "/other", "parent": None})]
    keys = {turn_key(*[v if v is not None else b for v, b in zip(variant + (None,) * 6, base)])
            for variant in variants}
    assert len(keys) == len(variants) and k not in keys


def test_usage_counts_the_tokens_sent_and_cached(chat_server, tmp_path, tokenizer_dir):
    chat_server.script = lambda context, partial: f"four words then {END} more"
    usage = Usage()
    turns = [Turn(MESSAGES, "two words", (END,))]
    chat(chat_server).continue_turns(turns, usage=usage)
    words = sum(len(m["content"].split()) for m in MESSAGES) + 2
    assert usage == Usage(sent=1, cached=0, prompt_tokens=words, completion_tokens=4)  # the stop string counts
    client = chat(chat_server, template=tokenizer_dir, max_tokens=32)
    continue_cached(client, GenerationCache(tmp_path / "g.jsonl"), turns * 2, usage=usage)
    continue_cached(client, GenerationCache(tmp_path / "g.jsonl"), turns, usage=usage)
    rendered = len(client.render(turns[0]).split())
    assert usage == Usage(sent=2, cached=2, prompt_tokens=words + rendered, completion_tokens=8)


def test_failures_are_retried_as_for_generate(chat_server, tokenizer_dir):
    chat_server.script = lambda context, partial: f"fine{END}"
    for mode in ("500", "malformed", "429"):
        chat_server.fail(mode)
    (g,) = chat(chat_server, max_retries=3).continue_turns([Turn(MESSAGES, "p", (END,))])
    assert g.text == "fine" and chat_server.count == 4
    chat_server.fail("empty_choices")
    chat_server.fail("empty_content")  # /completions: no text, finish "length": an unusable answer
    (g,) = chat(chat_server, template=tokenizer_dir, max_tokens=8).continue_turns([Turn(MESSAGES, "p", (END,))])
    assert g.text == "fine" and chat_server.count == 7
    chat_server.fail("500", times=3)
    with pytest.raises(UserError, match=r"completions failed 3 time\(s\) for test-model, the last with HTTP 500"):
        chat(chat_server, max_retries=2).continue_turns([Turn(MESSAGES, "p")])


def test_a_server_that_cannot_continue_a_message_says_what_to_do(chat_server, monkeypatch):
    """OpenAI refuses ``continue_final_message`` (HTTP 400): one line, not retried, naming both
    ways out, with no secret of the key or the URL in it."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    chat_server.refuse_continue = True
    client = ChatClient("test-model", base_url=f"{chat_server.url}?api-key={SECRET}", timeout=5.0)
    with pytest.raises(UserError) as err:
        client.continue_turns([Turn(MESSAGES, "partial text")])
    message = str(err.value)
    assert "HTTP 400" in message and "continue_final_message" in message
    assert "template=" in message and "vLLM" in message
    assert "\n" not in message and SECRET not in message and chat_server.count == 1
    # an ordinary request to the same server is not taken for that
    assert client.continue_turns([Turn(MESSAGES)])[0].text == fake_answer(list(MESSAGES))


def test_bad_turns_are_user_errors(chat_server):
    for bad in ({"messages": ()}, {"messages": "hi"}, {"messages": ({"content": "x"},)},
                {"messages": MESSAGES, "partial": None}, {"messages": MESSAGES, "stop": ("",)},
                {"messages": MESSAGES, "stop": (1,)}):
        with pytest.raises(UserError, match="Turn"):
            Turn(**bad)
    assert Turn(list(MESSAGES), stop=["a"]) == Turn(MESSAGES, stop=("a",))  # lists kept as tuples
    with pytest.raises(UserError, match="must be a Turn"):
        chat(chat_server).continue_turns([list(MESSAGES)])
    assert chat(chat_server).continue_turns([]) == [] and chat_server.count == 0
