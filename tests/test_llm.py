"""The chat client (on the openai SDK), the generation cache and the shared SDK plumbing, against a
local fake API (offline, a few seconds)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time

import pytest
from chat_server import COMPLETION_TOKENS, ChatServer, fake_answer, prompt_tokens

from r2med_tasks.errors import UserError
from r2med_tasks.llm import OPENAI_BASE_URL, ChatClient, RetryPolicy, parse_llm_spec
from r2med_tasks.llm.answers import Generation
from r2med_tasks.llm.cache import GenerationCache, generate_cached, key_for
from r2med_tasks.llm.endpoint import OLLAMA_BASE_URL, VLLM_BASE_URL, RetryLine
from r2med_tasks.llm.usage import Usage, cost

KEY = "sk-test-0123456789abcdefSECRET"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    with ChatServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for env in ("OPENAI_API_KEY", "VLLM_API_KEY", "OLLAMA_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(env, raising=False)


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


@pytest.fixture
def sleeps():
    return []


def client(server, sleeps, **kw) -> ChatClient:
    kw.setdefault("model", "test-model")
    return ChatClient(base_url=server.url, sleep=sleeps.append, timeout=kw.pop("timeout", 5.0), **kw)


def ask(*texts: str) -> list[list[dict]]:
    return [[{"role": "system", "content": "Write a passage."}, {"role": "user", "content": t}] for t in texts]


def expected(requests, model="test-model") -> list[Generation]:
    return [Generation(fake_answer(m), prompt_tokens(m), COMPLETION_TOKENS, "stop", model) for m in requests]


# -- the request ---------------------------------------------------------------------------------
def test_request_body_has_only_the_sampling_params_set(server, sleeps):
    requests = ask("what causes anemia?")
    client(server, sleeps).generate(requests)
    client(server, sleeps, temperature=0, top_p=0.9, max_tokens=256, seed=7).generate(requests)
    client(server, sleeps, temperature=0.7).generate(requests)
    bare, full, one = (r.body for r in server.requests)
    assert bare == {"model": "test-model", "messages": requests[0]}
    assert full == {"model": "test-model", "messages": requests[0], "temperature": 0.0, "top_p": 0.9,
                    "max_tokens": 256, "seed": 7}
    assert one == {"model": "test-model", "messages": requests[0], "temperature": 0.7}
    assert all(r.path == "/v1/chat/completions" for r in server.requests)
    assert server.requests[0].headers["content-type"] == "application/json"


def test_reasoning_models_get_max_completion_tokens(server, sleeps):
    client(server, sleeps, model="o3-mini", max_tokens=100).generate(ask("x"))
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body


def test_generation_fields_and_served_model(server, sleeps):
    server.served_model = "test-model-2025-01-01"
    (g,) = client(server, sleeps).generate(ask("hello there"))
    assert g == Generation(fake_answer(ask("hello there")[0]), prompt_tokens(ask("hello there")[0]),
                           COMPLETION_TOKENS, "stop", "test-model-2025-01-01")


def test_answers_come_back_in_input_order_under_concurrency(server, sleeps):
    # later requests answer sooner, so completion order is the reverse of input order
    server.delay_for = lambda body: 0.02 * (10 - int(body["messages"][-1]["content"].split()[-1]))
    server.overlap = 2  # and none answers before two are in flight (for at most 30 s)
    requests = ask(*[f"question {i}" for i in range(10)])
    usage = Usage()
    out = client(server, sleeps, concurrency=5).generate(requests, usage=usage)
    assert out == expected(requests)
    assert 2 <= server.max_in_flight <= 5
    assert usage == Usage(sent=10, cached=0, prompt_tokens=sum(g.prompt_tokens for g in out),
                          completion_tokens=10 * COMPLETION_TOKENS)


@pytest.mark.parametrize("with_key", [False, True])
def test_a_request_is_the_one_the_sdks_create_sends(server, sleeps, monkeypatch, with_key):
    """To a plain-HTTP server the client sends straight over ``http.client`` the request
    ``chat.completions.create`` sends: the same path, the same JSON bytes (for these values), the
    same content type and key; it leaves out only the SDK's own telemetry headers
    (``x-stainless-*``, its user agent) and asks for no compression."""
    from r2med_tasks.llm import no_auth_header
    from r2med_tasks.llm.endpoint import openai_client
    from r2med_tasks.llm.messages import EXTRA_BODY_PARAMS, Turn

    key = KEY if with_key else None
    if with_key:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
    c = client(server, sleeps, temperature=0.7, top_p=0.9, max_tokens=64, seed=3, top_k=20, repetition_penalty=1.05)
    turn = Turn(tuple(ask("q é")[0]), partial="so far", stop=("</s>", "<end>"))
    transport = {"user-agent", "accept-encoding", "connection"}
    for send in (lambda: c.continue_turns([turn]), lambda: c.generate(ask("q é"))):
        send()
        ours = server.requests[-1]
        body = ours.body
        plain = {k: v for k, v in body.items() if k not in EXTRA_BODY_PARAMS}
        extra = {k: v for k, v in body.items() if k in EXTRA_BODY_PARAMS}
        sdk = openai_client(server.url, key=key, timeout=5.0)
        sdk.chat.completions.with_raw_response.create(**plain, extra_body=extra or None,
                                                      extra_headers=no_auth_header(key))
        theirs = server.requests[-1]
        assert (ours.path, ours.body) == (theirs.path, theirs.body)  # and the same length, below
        assert {k: v for k, v in ours.headers.items() if k not in transport} == \
            {k: v for k, v in theirs.headers.items() if k not in transport and not k.startswith("x-stainless")}
        assert ours.headers["accept-encoding"] == "identity" and ours.headers["user-agent"].startswith("r2med")
        assert ("authorization" in ours.headers) == with_key
    assert server.requests[-4].body["continue_final_message"] is True and server.requests[-2].body["top_k"] == 20


def test_a_slow_on_result_holds_back_no_other_request(server, sleeps):
    """``on_result`` is called one call at a time, once per answer, before ``generate`` returns;
    while one call is slow (an fsynced append on a busy disk) the other workers go on sending."""
    requests = ask(*[f"question {i}" for i in range(12)])
    calls, running, sent_during_first = [], [], []

    def on_result(i: int, generation: Generation) -> None:
        running.append(i)
        assert len(running) == 1  # never two at once
        if not calls:
            before = server.count
            deadline = time.monotonic() + 30
            while server.count - before < 6 and time.monotonic() < deadline:  # the others go on sending
                time.sleep(0.005)
            sent_during_first.append(server.count - before)
        calls.append((i, generation))
        running.remove(i)

    usage = Usage()
    out = client(server, sleeps, concurrency=4).generate(requests, on_result=on_result, usage=usage)
    assert out == expected(requests) and sorted(calls) == sorted(enumerate(out))
    assert usage.sent == 12
    assert sent_during_first[0] >= 6  # the three other workers sent the rest meanwhile (all 11 here)


def test_an_on_result_that_fails_still_has_every_answer_handed_over(server, sleeps):
    requests = ask(*[f"question {i}" for i in range(8)])
    seen = []

    def on_result(i: int, generation: Generation) -> None:
        seen.append(i)
        if i == 0:
            time.sleep(0.2)  # the others' answers queue meanwhile
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        client(server, sleeps, concurrency=4).generate(requests, on_result=on_result)
    assert sorted(seen) == list(range(8))


def test_no_key_is_sent_to_a_local_server_without_one(server, sleeps):
    client(server, sleeps).generate(ask("x"))
    assert "authorization" not in server.requests[0].headers


def test_the_key_is_sent_when_set(server, sleeps, key):
    client(server, sleeps).generate(ask("x"))
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_the_openai_api_needs_a_key_named_in_the_error(sleeps):
    c = ChatClient("gpt-4o", sleep=sleeps.append)
    assert c.url == f"{OPENAI_BASE_URL}/chat/completions" and c.needs_key
    with pytest.raises(UserError, match="set the environment variable OPENAI_API_KEY") as err:
        c.generate(ask("x"))
    assert "\n" not in str(err.value)
    assert c.generate([]) == []  # nothing to send: no key needed


def test_bad_inputs_and_options_are_user_errors(server, sleeps):
    c = client(server, sleeps)
    for bad in ("just a string", [[]], [["hi"]], [[{"content": "no role"}]], [[{"role": "user", "content": {1}}]]):
        with pytest.raises(UserError, match="request"):
            c.generate(bad)
    for option in ({"temperature": 3}, {"top_p": -0.1}, {"max_tokens": 0}, {"seed": 1.5}, {"concurrency": 0},
                   {"max_retries": -1}, {"timeout": 0}):
        with pytest.raises(UserError, match=next(iter(option))):
            client(server, sleeps, **option)
    with pytest.raises(UserError, match="base_url"):
        ChatClient("m", base_url="localhost:8000")
    assert server.requests == []


# -- failures that are survived ------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["500", "malformed", "empty_choices", "null_content", "empty_content"])
def test_transient_failures_and_malformed_answers_are_retried(server, sleeps, mode):
    server.fail(mode, times=2)
    requests = ask("one")
    assert client(server, sleeps).generate(requests) == expected(requests)
    assert server.count == 3
    assert len(sleeps) == 2 and 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0  # backoff with jitter


def test_429_honours_retry_after_capped(server, sleeps):
    server.fail("429", retry_after="3")
    server.fail("429", retry_after="1000")
    requests = ask("q")
    assert client(server, sleeps, retry_after_max=20.0).generate(requests) == expected(requests)
    assert sleeps == [3.0, 20.0]


def test_hang_past_timeout_is_retried(server, sleeps):
    server.fail("hang", hang_s=60.0)  # a timeout a loaded machine's answers never reach; a hang far past it
    start = time.monotonic()
    requests = ask("slow")
    assert client(server, sleeps, timeout=1.0).generate(requests) == expected(requests)
    assert time.monotonic() - start < 30
    assert server.count == 2 and len(sleeps) == 1


def test_connection_refused_is_retried_then_reported(sleeps, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with ChatServer() as srv:
        url = srv.url
    with pytest.raises(UserError, match="connection failed.*check the network and base_url") as err:
        ChatClient("m", base_url=url, sleep=sleeps.append, max_retries=2, timeout=2).generate(ask("x"))
    assert len(sleeps) == 2 and "\n" not in str(err.value)


def test_retries_are_one_status_line_not_a_line_each(server, caplog):
    """Each retry replaces the one status line (with how many other requests wait); it is logged at
    DEBUG only, so nothing is printed per retry; the line is cleared once no request waits."""
    server.fail("500", times=2, message="overloaded")
    both_waiting = threading.Barrier(2, timeout=5)
    shown = []
    c = ChatClient("test-model", base_url=server.url, concurrency=2, timeout=5.0,
                   sleep=lambda s: both_waiting.wait())
    c.show_retries(RetryLine(shown.append))
    with caplog.at_level(logging.DEBUG):
        assert c.generate(ask("a", "b")) == expected(ask("a", "b"))
    assert server.count == 4 and [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert len([r for r in caplog.records if r.name == "r2med_tasks.llm.chat" and "retry 1 of 2" in r.getMessage()]) == 2
    first, second, *rest = shown
    assert first.startswith("retry 1 of 2 in ")
    assert first.endswith(f"s: HTTP 500 Internal Server Error: overloaded ({server.url}/chat/completions)")
    assert second.endswith("(and 1 other request(s) waiting to retry)")
    assert rest[-1] is None and None not in rest[:-1]


def test_what_is_waited_for_is_said_while_it_waits_and_never_after():
    """Output that is no terminal: a line every ``every`` seconds while a request is in flight or
    waits to retry, by a thread that ends with the wait (an idle run holds none)."""
    from conftest import wait_until

    said: list[str] = []
    line = RetryLine(say=said.append, every=0.01)
    before = set(threading.enumerate())
    with line.sending("http://10.0.0.5:8000/v1"):
        wait_until(lambda: len(said) >= 2)
        (saying,) = [t for t in set(threading.enumerate()) - before if t.name == "r2med-waiting"]
        line.update(1, "retry 1 of 2 in 3.0 s: HTTP 500 (http://10.0.0.5:8000/v1/chat/completions)")
        wait_until(lambda: said[-1].startswith("retry 1 of 2"))
    assert said[0].startswith("waiting for http://10.0.0.5:8000/v1 (1 request(s) in flight, the oldest for ")
    line.update(1, None)
    wait_until(lambda: not saying.is_alive())
    RetryLine(say=None, every=0.01).update(2, "retry 1 of 2 in 3.0 s")  # a terminal's: shown on its row only
    assert not [t for t in set(threading.enumerate()) - before if t.name == "r2med-waiting" and t.is_alive()]


def test_a_context_shows_its_clients_retries_on_its_own_line(server, tmp_path):
    """``Context.llm`` hands the client it makes the context's ``RetryLine`` (``ShowsRetries``), so a
    run's API retries are its one status line, and another context's client shows on its own; a
    client without the capability is used as made."""
    from types import SimpleNamespace

    from r2med_tasks.components.context import Context

    def chat_clients(spec: str, **sampling):
        return ChatClient(spec.rsplit("#", 1)[1], base_url=server.url, sleep=lambda s: None, **sampling)

    mine, theirs = [], []
    context = Context(cache_dir=tmp_path, chat_clients=chat_clients, retries=RetryLine(mine.append))
    other = context.with_(retries=RetryLine(theirs.append)).llm("local#test-model")
    server.fail("500", times=1, message="overloaded")
    assert context.llm("local#test-model", temperature=0.5).generate(ask("a")) == expected(ask("a"))
    assert other.generate(ask("b")) == expected(ask("b"))
    assert len(mine) == 2 and mine[0].startswith("retry 1 of 2 in ") and "overloaded" in mine[0] and mine[1] is None
    assert theirs == []
    made = SimpleNamespace(model="m", params={})
    assert Context(cache_dir=tmp_path, chat_clients=lambda spec, **s: made).llm("x:y").client is made


def test_a_refused_connection_is_one_error_line_after_quiet_retries(sleeps, caplog, monkeypatch):
    """Eight requests to a dead server: no line per retry (there used to be 48), then one error."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with ChatServer() as srv:
        url = srv.url
    with caplog.at_level(logging.DEBUG), pytest.raises(UserError) as err:
        ChatClient("m", base_url=url, sleep=sleeps.append, concurrency=8, timeout=2).generate(ask(*"abcdefgh"))
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == [] and len(sleeps) >= 6
    assert "connection failed" in str(err.value) and "3 time(s)" in str(err.value) and "\n" not in str(err.value)


# -- failures that stop the run with one clear line -------------------------------------------------
def test_retries_exhausted_gives_one_clear_line(server, sleeps):
    server.fail("500", times=10)
    with pytest.raises(UserError) as err:
        client(server, sleeps, max_retries=2).generate(ask("x"))
    message = str(err.value)
    assert server.count == 3 and len(sleeps) == 2 and "\n" not in message
    for part in (f"{server.url}/chat/completions", "test-model", "HTTP 500", "3 time",
                 "try again later, or raise max_retries=N (now 2)"):  # a client made in Python: its argument
        assert part in message


def test_malformed_answers_exhausted_say_what_to_do(server, sleeps):
    server.fail("null_content", times=2)
    with pytest.raises(UserError, match="no content.*chat completions API"):
        client(server, sleeps, max_retries=1).generate(ask("x"))
    server.fail("empty_content", times=2, finish_reason="length")
    with pytest.raises(UserError, match="empty content.*'length'.*raise max_tokens"):
        client(server, sleeps, max_retries=1).generate(ask("x"))


def test_429_exhausted_says_what_to_do(server, sleeps):
    server.fail("429", times=10)
    with pytest.raises(UserError, match="HTTP 429.*lower concurrency"):
        client(server, sleeps, max_retries=1).generate(ask("x"))


def test_401_is_not_retried_and_never_shows_the_key(server, sleeps, key, caplog):
    server.fail("401")
    c = client(server, sleeps)
    with caplog.at_level(logging.DEBUG), pytest.raises(UserError) as err:
        c.generate(ask("x"))
    message = str(err.value)
    assert server.count == 1 and sleeps == []
    assert "HTTP 401" in message and "check OPENAI_API_KEY" in message and "\n" not in message
    for shown in (message, repr(err.value), repr(c), repr(vars(c)), caplog.text):
        assert KEY not in shown and "SECRET" not in shown and "0123456789" not in shown
    assert err.value.__cause__ is None and (err.value.__context__ is None or err.value.__suppress_context__)


def test_401_without_a_key_says_to_set_one(server, sleeps):
    server.api_key = "sk-server-side-key"
    with pytest.raises(UserError, match="the server wants a key: set MY_LLM_KEY"):
        client(server, sleeps, api_key_env="MY_LLM_KEY").generate(ask("x"))
    assert server.count == 1


def test_other_4xx_is_not_retried(server, sleeps):
    server.fail("400", message="This model's maximum context length is 8192 tokens")
    with pytest.raises(UserError, match="HTTP 400.*shorten the prompt or lower max_tokens"):
        client(server, sleeps).generate(ask("x"))
    server.fail("400", message="Unsupported value: 'temperature' does not support 0 with this model.")
    with pytest.raises(UserError, match="does not take temperature"):
        client(server, sleeps, temperature=0).generate(ask("x"))
    assert server.count == 2 and sleeps == []


def test_server_messages_and_errors_never_hold_the_key(server, sleeps, key, caplog, tmp_path):
    server.fail("500", times=3, message=f"upstream said:\n Bearer {KEY} / sk-abc****defg failed")
    cache = GenerationCache(tmp_path / "gen.jsonl")
    with caplog.at_level(logging.DEBUG), pytest.raises(UserError) as err:
        generate_cached(client(server, sleeps, max_retries=2), cache, ask("x"))
    assert "upstream said: Bearer *** / *** failed" in str(err.value)
    generate_cached(client(server, sleeps), cache, ask("x", "y"))
    text = (tmp_path / "gen.jsonl").read_text() + caplog.text + str(err.value)
    assert KEY not in text and "SECRET" not in text and len(cache) == 2


def test_a_failing_request_stops_the_others(server, sleeps):
    server.fail("401")
    with pytest.raises(UserError, match="401"):
        client(server, sleeps, concurrency=2).generate(ask(*[str(i) for i in range(30)]))
    assert server.count < 30


# -- the cache ------------------------------------------------------------------------------------
def test_a_rerun_sends_nothing(server, sleeps, tmp_path):
    requests = ask("a", "b", "c", "a")  # the repeated request is sent once
    usage = Usage()
    first = generate_cached(client(server, sleeps), GenerationCache(tmp_path / "g.jsonl"), requests, usage=usage)
    assert first == expected(requests) and server.count == 3
    assert usage.sent == 3 and usage.cached == 1
    again = Usage()
    second = generate_cached(client(server, sleeps), GenerationCache(tmp_path / "g.jsonl"), requests, usage=again)
    assert second == first and server.count == 3
    assert again == Usage(sent=0, cached=4, prompt_tokens=0, completion_tokens=0)


def test_the_cache_needs_no_key_for_cached_answers(server, sleeps, tmp_path, key, monkeypatch):
    """The key is not part of the cache: answers got with a key are reused without one, by a
    server that needs none (it is still asked which model it serves: one ``GET /models``). On the
    OpenAI API, which needs a key to say what it serves, nothing is reused without one."""
    c = ChatClient("gpt-4o", base_url=server.url, sleep=sleeps.append)
    generate_cached(c, GenerationCache(tmp_path / "g.jsonl"), ask("a"))
    assert server.model_requests[0].headers["authorization"] == f"Bearer {KEY}"
    monkeypatch.delenv("OPENAI_API_KEY")
    c = ChatClient("gpt-4o", base_url=server.url, sleep=sleeps.append)
    assert generate_cached(c, GenerationCache(tmp_path / "g.jsonl"), ask("a")) == expected(ask("a"), "gpt-4o")
    assert server.count == 1 and len(server.model_requests) == 2
    assert "authorization" not in server.model_requests[1].headers
    c = ChatClient("gpt-4o", sleep=sleeps.append)  # the OpenAI API itself: a key is required
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        generate_cached(c, GenerationCache(tmp_path / "g.jsonl"), ask("a"))


def test_the_key_is_model_messages_and_params_not_base_url(server, sleeps, tmp_path):
    messages = ask("q")[0]
    k = key_for("m", messages, {"temperature": 0, "max_tokens": None})
    assert k == key_for("m", messages, {"temperature": 0.0}) == GenerationCache.key_for("m", messages,
                                                                                        {"temperature": 0.0})
    assert k == key_for("m", [{"content": "Write a passage.", "role": "system"}, messages[1]], {"temperature": 0})
    assert len({k, key_for("m2", messages, {"temperature": 0}), key_for("m", messages, {"temperature": 0.5}),
                key_for("m", messages, {}), key_for("m", ask("q2")[0], {"temperature": 0})}) == 5
    # the same model and params served elsewhere reuse the answers
    cache = GenerationCache(tmp_path / "g.jsonl")
    generate_cached(client(server, sleeps, temperature=0), cache, [messages])
    with ChatServer() as other:
        generate_cached(ChatClient("test-model", base_url=other.url, temperature=0.0), cache, [messages])
        assert other.count == 0
    generate_cached(client(server, sleeps, temperature=0, seed=1), cache, [messages])
    assert server.count == 2


def test_a_killed_run_resumes_with_only_the_missing_requests(server, sleeps, tmp_path):
    path = tmp_path / "g.jsonl"
    requests = ask(*[f"question {i}" for i in range(12)])
    server.fail_after(5, "500")  # five answers, then down for good
    with pytest.raises(UserError, match="HTTP 500"):
        generate_cached(client(server, sleeps, concurrency=3, max_retries=1), GenerationCache(path), requests)
    lines = path.read_text().splitlines()
    assert len(lines) == 5  # stored as they arrived, not at the end
    answered = {json.loads(line)["text"] for line in lines}
    server.recover()
    server.requests.clear()
    out = generate_cached(client(server, sleeps, concurrency=3), GenerationCache(path), requests)
    assert out == expected(requests)
    assert server.count == 7
    assert not answered & {fake_answer([{"role": "user", "content": u}]) for u in server.last_users()}
    assert len(path.read_text().splitlines()) == 12


@pytest.mark.parametrize("damage", ["cut", "garbage"])
def test_an_unreadable_entry_is_sent_again_with_one_warning(server, sleeps, tmp_path, caplog, damage):
    """A line cut by a kill, or garbage in the middle, costs its request and one warning, once:
    the line is dropped from the file, so the next read is clean."""
    path = tmp_path / "g.jsonl"
    requests = ask("a", "b", "c")
    generate_cached(client(server, sleeps), GenerationCache(path), requests)
    first, second, third = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(first + second + third[:-25] if damage == "cut" else
                     first + b'{"key": "\xff\x00[[[\n' + b"[" * 100_000 + b"\n" + second + b"null\n")
    with caplog.at_level(logging.WARNING):
        cache = GenerationCache(path)
    assert len(cache) == 2 and cache.skipped == (1 if damage == "cut" else 3)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert str(path) in warning and "unreadable" in warning
    server.requests.clear()
    caplog.clear()
    assert generate_cached(client(server, sleeps), cache, requests) == expected(requests)
    assert server.count == 1
    reread = GenerationCache(path)
    assert len(reread) == 3 and reread.skipped == 0 and caplog.records == []
    served = client(server, sleeps).served_model().key()
    assert served == {"id": "test-model", "root": "test-model", "parent": None}
    assert [reread.get(k) for k in (key_for("test-model", m, {}, served) for m in requests)] == expected(requests)


def test_an_append_waiting_on_a_rewrite_lands_in_the_new_file(tmp_path):
    """A rewrite (dropping unreadable lines) replaces the file under an exclusive lock; an append
    that waited for it goes to the new file, not the replaced one."""
    import fcntl
    import os

    from r2med_tasks.files import atomic

    path = tmp_path / "g.jsonl"
    g = Generation("t", 1, 2, None, "m")
    cache = GenerationCache(path)
    cache.put("k1", g)
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a rewrite holds it
    appending = threading.Thread(target=cache.put, args=("k2", g))
    appending.start()
    appending.join(0.2)
    assert appending.is_alive()  # waits for the lock
    atomic.write_bytes(path, path.read_bytes())
    os.close(fd)
    appending.join(5)
    assert GenerationCache(path).get("k2") == g


def test_a_missing_newline_after_a_complete_line_is_fine(tmp_path):
    path = tmp_path / "g.jsonl"
    g = Generation("t", 1, 2, None, "m")
    GenerationCache(path).put("k1", g)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    cache = GenerationCache(path)
    assert cache.get("k1") == g and cache.skipped == 0
    cache.put("k2", g)
    assert GenerationCache(path).get("k1") == g and GenerationCache(path).get("k2") == g


def test_the_cache_file_format(tmp_path):
    path = tmp_path / "sub" / "g.jsonl"
    g = Generation("é text\nline", 10, 3, "stop", "gpt-4o-2024-08-06")
    GenerationCache(path).put("abc", g)
    (line,) = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(line) == {"key": "abc", "text": "é text\nline", "prompt_tokens": 10, "completion_tokens": 3,
                                "finish_reason": "stop", "model": "gpt-4o-2024-08-06"}
    assert GenerationCache(path).get("abc") == g and GenerationCache(path).get("zzz") is None


@pytest.mark.process  # two processes append to one file
def test_concurrent_appends_leave_a_valid_file(tmp_path):
    path = tmp_path / "g.jsonl"
    script = (
        "import sys\n"
        "from r2med_tasks.llm.answers import Generation\nfrom r2med_tasks.llm.cache import GenerationCache\n"
        "c = GenerationCache(sys.argv[1])\n"
        "for i in range(150):\n"
        "    c.put(f'{sys.argv[2]}-{i}', Generation(sys.argv[2] * (1000 + 37 * i), i, i, 'stop', 'm'))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), name]) for name in ("p", "q")]
    cache = GenerationCache(path)
    threads = [threading.Thread(target=lambda n=n: [cache.put(f"{n}-{i}", Generation(n * (500 + i), i, i, None, "m"))
                                                    for i in range(100)]) for n in ("t", "u")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.wait(60) for p in procs] == [0, 0]
    lines = path.read_bytes().split(b"\n")
    # every line whole; a blank one is allowed (a put that saw another's line half-written ends it first)
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1] if line)
    reread = GenerationCache(path)
    assert len(reread) == 2 * 150 + 2 * 100 and reread.skipped == 0
    assert reread.get("q-149").text == "q" * (1000 + 37 * 149) and reread.get("u-99").text == "u" * 599


# -- specs, usage and cost ------------------------------------------------------------------------
def test_parse_llm_spec_forms():
    assert parse_llm_spec("openai:gpt-4o") == {"model": "gpt-4o", "base_url": OPENAI_BASE_URL,
                                               "api_key_env": "OPENAI_API_KEY"}
    assert parse_llm_spec("http://127.0.0.1:8000/v1#Qwen2.5-72B-Instruct") == {
        "model": "Qwen2.5-72B-Instruct", "base_url": "http://127.0.0.1:8000/v1", "api_key_env": "OPENAI_API_KEY"}
    assert parse_llm_spec("https://llm.example.org/v1/#Qwen/Qwen2.5-7B")["base_url"] == "https://llm.example.org/v1"
    assert parse_llm_spec("ollama:llama3:8b") == {"model": "llama3:8b", "base_url": OLLAMA_BASE_URL,
                                                  "api_key_env": "OLLAMA_API_KEY"}
    assert OLLAMA_BASE_URL == "http://127.0.0.1:11434/v1" and VLLM_BASE_URL == "http://127.0.0.1:8000/v1"
    assert parse_llm_spec(" vllm:Qwen/QwQ-32B ") == {"model": "Qwen/QwQ-32B", "base_url": VLLM_BASE_URL,
                                                     "api_key_env": "VLLM_API_KEY"}
    c = ChatClient(**parse_llm_spec("vllm:NAME"))
    assert c.url == "http://127.0.0.1:8000/v1/chat/completions" and not c.needs_key


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "azure:gpt-4o", "http://127.0.0.1:8000/v1",
                                  "http://127.0.0.1:8000/v1#", "", "   "])
def test_parse_llm_spec_errors_list_the_forms(spec):
    with pytest.raises(UserError) as err:
        parse_llm_spec(spec)
    message = str(err.value)
    assert "openai:MODEL" in message and "vllm:MODEL" in message and "ollama:MODEL" in message
    assert "#MODEL" in message and "\n" not in message


def test_usage_and_cost(server, sleeps, tmp_path):
    requests = ask("one two three", "four five")
    usage = Usage()
    c = client(server, sleeps, model="gpt-4o-mini")
    generate_cached(c, GenerationCache(tmp_path / "g.jsonl"), requests, usage=usage)
    generate_cached(c, GenerationCache(tmp_path / "g.jsonl"), requests, usage=usage)
    prompt = prompt_tokens(requests[0]) + prompt_tokens(requests[1])
    assert usage == Usage(sent=2, cached=2, prompt_tokens=prompt, completion_tokens=2 * COMPLETION_TOKENS)
    assert cost("gpt-4o-mini", usage) == pytest.approx((prompt * 0.15 + 6 * 0.60) / 1e6)
    million = Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000)
    assert cost("gpt-4o", million) == pytest.approx(12.5)
    assert cost("o3-mini", million) == pytest.approx(5.5)
    assert cost("Qwen2.5-72B-Instruct", million) is None
    assert cost("my-model", million, prices={"my-model": (1.0, 2.0)}) == pytest.approx(3.0)


def test_sdk_plumbing_is_shared():
    """The embeddings clients and the chat client are one endpoint base: they build the SDK, read
    their key and retry through the same code."""
    from r2med_plugins import llm as backends
    from r2med_plugins.dense import api
    from r2med_tasks import llm

    for client in (api.OpenAIEncoder, api.VoyageEncoder, llm.ChatClient):
        assert issubclass(client, llm.Endpoint)
        assert all(getattr(client, name) is getattr(llm.Endpoint, name)
                   for name in ("sdk", "key", "caller", "show_retries", "check_endpoint"))
    assert backends.ChatClient is llm.ChatClient


def test_redirects_to_another_origin_are_not_followed(server, sleeps, key):
    """httpx (under the SDK) would follow a 307 to wherever it points, with the key's header."""
    with ChatServer() as other:
        server.fail("redirect", location=f"{other.url}/chat/completions")  # another port: another origin
        with pytest.raises(UserError, match=f"HTTP 307.*redirects to {other.url}.*base_url") as err:
            client(server, sleeps).generate(ask("x"))
        assert other.count == 0
    assert server.count == 1 and sleeps == [] and KEY not in str(err.value)


@pytest.mark.parametrize("form", ["userinfo", "query", "token-as-user"])
def test_a_key_in_the_base_url_never_shows(server, sleeps, caplog, form):
    secret = "sk-url-0123456789SECRETURL"
    host = server.url.removeprefix("http://")
    base = {"userinfo": f"http://user:{secret}@{host}", "query": f"{server.url}?api-key={secret}",
            "token-as-user": f"http://{secret}@{host}"}[form]
    server.fail("500", times=3, message=f"bad upstream for {base}")
    c = client(server, sleeps, max_retries=1)
    with caplog.at_level(logging.DEBUG), pytest.raises(UserError) as err:
        ChatClient("test-model", base_url=base, sleep=sleeps.append, max_retries=1, timeout=5.0).generate(ask("x"))
    assert server.count == 2  # the request did reach the server, secret and all
    if form == "query":
        assert all(r.path == f"/v1/chat/completions?api-key={secret}" for r in server.requests)
    else:
        assert all(r.headers["authorization"].startswith("Basic ") for r in server.requests)
    shown = str(err.value) + caplog.text + repr(ChatClient("m", base_url=base)) + repr(c)
    assert "HTTP 500" in str(err.value) and "***" in str(err.value)
    assert secret not in shown and "SECRETURL" not in shown and "0123456789" not in shown


def test_retry_policy_sets_real_waits(server, monkeypatch):
    """Without ``sleep`` the waits are real, and a RetryPolicy makes them as short as a test wants."""
    server.fail("500", times=3)
    server.fail("429", retry_after="0.05")
    policy = RetryPolicy(max_retries=4, backoff=0.01, backoff_max=0.02)
    start = time.monotonic()
    assert ChatClient("test-model", base_url=server.url, retry=policy).generate(ask("q")) == expected(ask("q"))
    took = time.monotonic() - start
    assert server.count == 5
    assert 0.005 + 0.01 + 0.01 + 0.05 <= took < 1.5  # three backoffs (>= half of 0.01, 0.02, 0.02) and Retry-After
    for attempt, top in ((1, 0.01), (2, 0.02), (3, 0.02), (9, 0.02)):
        assert all(top / 2 <= policy.delay(attempt) <= top for _ in range(50))
    # options not given come from DEFAULT_RETRY, read when a client is built; given ones win
    assert ChatClient("m").retry == RetryPolicy(2, 1.0, 30.0, 60.0)  # as openai-python
    monkeypatch.setattr("r2med_tasks.llm.endpoint.DEFAULT_RETRY", policy)
    assert ChatClient("m").retry == policy and ChatClient("m", max_retries=1).retry == RetryPolicy(1, 0.01, 0.02)
    with pytest.raises(UserError, match="backoff"):
        ChatClient("m", retry=RetryPolicy(backoff=0))
    with pytest.raises(UserError, match="max_retries"):
        ChatClient("m", retry=RetryPolicy(max_retries=-1))


@pytest.mark.process  # what a fresh interpreter imports
def test_light_paths_import_no_sdk():
    """The SDK, its HTTP library, torch and mteb are imported on first request only: not by
    importing the core, the client modules or the CLI, nor by `r2med run --help` or `r2med plugins`."""
    code = (
        "import contextlib, io, sys\n"
        "heavy = lambda: sorted(m for m in ('openai', 'httpx', 'httpx2', 'torch', 'mteb') if m in sys.modules)\n"
        "import r2med_tasks, r2med_tasks.llm, r2med_plugins.llm, r2med_plugins.dense.api\n"
        "from r2med_tasks.cli import cli\n"
        "print('IMPORTS', heavy())\n"
        "for args in (['run', '--help'], ['plugins']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        cli(args, prog_name='r2med')\n"
        "    print(args[0].upper(), heavy())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-3:] == ["IMPORTS []", "RUN []", "PLUGINS []"]


@pytest.mark.parametrize("message, ok", [({"role": "user", "content": "text"}, True),
                                         ({"role": "user", "content": [{"type": "text", "text": "a"}]}, True),
                                         ({"role": "user", "content": {1, 2}}, False),
                                         ({"role": "user", "content": float("nan"), "x": object()}, False)])
def test_a_request_that_json_cannot_carry_is_one_line_before_it_is_sent(message, ok):
    """Text-only messages pass as they are; anything else is checked by encoding it."""
    from r2med_tasks.errors import UserError
    from r2med_tasks.llm.messages import check_messages

    if ok:
        assert check_messages([[message]], "test") == [[message]]
    else:
        with pytest.raises(UserError, match="request 0 is not JSON-serializable"):
            check_messages([[message]], "test")
