"""LLM answers follow the model the server reports serving (``GET /models``), not the model name
alone: answers of another served model are never reused, a server refusing the key is an error
before anything is reused, and the same server is answered from the cache without a request."""

import json
import logging

import pytest

from chat_server import ChatServer
from r2med_tasks.errors import UserError
from r2med_tasks.llm import ChatClient
from r2med_tasks.llm.cache import GenerationCache, generate_cached
from r2med_tasks.llm.served import ServedModel
from r2med_tasks.llm.usage import Usage

SECRET = "s3cr3t-0123456789SERVED"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for env in ("OPENAI_API_KEY", "VLLM_API_KEY", "OLLAMA_API_KEY"):
        monkeypatch.delenv(env, raising=False)


@pytest.fixture
def servers():
    with ChatServer() as a, ChatServer() as b:
        yield a, b


def ask(*texts: str) -> list[list[dict]]:
    return [[{"role": "user", "content": t}] for t in texts]


def chat(server, model="m", **kw) -> ChatClient:
    return ChatClient(model, base_url=kw.pop("base_url", server.url), sleep=lambda s: None, timeout=5.0,
                      max_retries=1, **kw)


def test_the_same_name_serving_other_weights_is_not_reused(servers, tmp_path):
    a, b = servers
    a.serve("m", root="/models/qwen-7b")
    b.serve("m", root="/models/qwen-7b-int4")  # same name, other weights
    cache = GenerationCache(tmp_path / "g.jsonl")
    requests = ask("q1", "q2")
    generate_cached(chat(a), cache, requests)
    assert a.count == 2
    usage = Usage()
    generate_cached(chat(b), cache, requests, usage=usage)
    assert b.count == 2 and usage.sent == 2 and usage.cached == 0  # asked again, not A's answers
    assert [r.path for r in b.model_requests] == ["/v1/models"]
    # a LoRA is its parent's name plus its own root: another adapter under the same name is not reused
    b.serve("m", root="/loras/x", parent="base")
    generate_cached(chat(b), cache, requests)
    assert b.count == 4
    assert chat(b).served_model() == ServedModel("m", id="m", root="/loras/x", parent="base")


def test_the_same_server_twice_is_answered_from_the_cache(servers, tmp_path):
    a, _ = servers
    a.serve("m", root="/models/qwen-7b")
    requests = ask("q1", "q2", "q1")
    first = generate_cached(chat(a), GenerationCache(tmp_path / "g.jsonl"), requests)
    assert a.count == 2 and len(a.model_requests) == 1
    client = chat(a)
    usage = Usage()
    assert generate_cached(client, GenerationCache(tmp_path / "g.jsonl"), requests, usage=usage) == first
    assert a.count == 2 and usage == Usage(sent=0, cached=3)  # no chat request sent the second time
    generate_cached(client, GenerationCache(tmp_path / "g.jsonl"), requests)
    assert len(a.model_requests) == 2  # asked once per client: the second call of one client asks nothing


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_one_line_before_anything_is_reused(servers, tmp_path, status, monkeypatch):
    a, b = servers
    generate_cached(chat(a, "test-model"), GenerationCache(tmp_path / "g.jsonl"), ask("q"))
    b.models_status = status
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    base = f"http://user:{SECRET}@{b.url.removeprefix('http://')}?token={SECRET}"
    with pytest.raises(UserError) as err:
        generate_cached(chat(b, "test-model", base_url=base), GenerationCache(tmp_path / "g.jsonl"), ask("q"))
    message = str(err.value)
    assert "\n" not in message and f"HTTP {status}" in message and "OPENAI_API_KEY" in message
    assert b.url.removeprefix("http://") + "/models?token=***" in message  # the endpoint, its secrets masked
    assert SECRET not in message and "0123456789" not in message and "***" in message
    assert b.count == 0 and len(b.model_requests) == 1


def test_a_server_without_a_model_list_keys_by_the_name_as_before(servers, tmp_path, caplog):
    a, b = servers
    a.models_status = b.models_status = 404
    cache = GenerationCache(tmp_path / "g.jsonl")
    with caplog.at_level(logging.INFO, logger="r2med_tasks.llm"):
        client = chat(a)
        generate_cached(client, cache, ask("q"))
    served = client.served_model()
    assert served.key() is None and "HTTP 404" in served.reason and "model name alone" in served.reason
    assert any("HTTP 404" in r.getMessage() for r in caplog.records)  # the reason, recorded
    generate_cached(chat(b), cache, ask("q"))  # another server without the list: the name alone, as before
    assert (a.count, b.count) == (1, 0)
    with ChatServer() as c:  # a server that says what it serves does not get the unverified answers
        c.serve("m", root="/models/m")
        generate_cached(chat(c), cache, ask("q"))
        assert c.count == 1


def test_a_list_without_the_model_is_unverified_and_kept_apart(servers, tmp_path):
    a, b = servers
    a.models_status = 404
    b.serve("other")
    cache = GenerationCache(tmp_path / "g.jsonl")
    generate_cached(chat(a), cache, ask("q"))
    client = chat(b)
    generate_cached(client, cache, ask("q"))
    assert b.count == 1 and client.served_model().unlisted and "does not list m" in client.served_model().reason


def test_ollama_latest_tag_counts_as_the_bare_name(servers):
    a, _ = servers
    a.serve("llama3:latest", root=None)
    assert chat(a, "llama3").served_model().key() == {"id": "llama3:latest", "root": None, "parent": None}


@pytest.mark.parametrize("body", [b"<html>not json</html>", b'{"object": "list"}', b"[1, 2]"])
def test_an_answer_that_is_no_model_list_falls_back_to_the_name(servers, body):
    a, _ = servers
    a.models_body = body
    served = chat(a).served_model()
    assert served.key() is None and "gave no model list" in served.reason and len(a.model_requests) == 1


def test_through_the_cli_a_401_endpoint_reports_nothing_cached(run_cli, evaluate, servers, tmp_path):
    """A run against one server fills the cache; the same model name at another server that refuses
    the key: one error line, exit 2, no score and no chat request; the same server again: scores
    from the cache and no chat request."""
    a, b = servers
    a.serve("test-model", root="/models/a")
    args = ("--plugin", "hyde", "--plugin", "bm25", "--tasks", "sample", "--cache-dir", tmp_path / "cache", "--json")
    first = evaluate("hyde", "bm25", llm=f"{a.url}#test-model", output="a")
    sent = a.count
    assert sent == 10
    b.models_status = 401
    code, out, err = run_cli("run", "-o", f"llm={b.url}#test-model", *args, "--output", tmp_path / "b")
    (line,) = err.strip().splitlines()
    assert code == 2 and "HTTP 401" in line and "/v1/models" in line and "OPENAI_API_KEY" in line
    assert b.count == 0 and "ndcg" not in out
    again = evaluate("hyde", "bm25", llm=f"{a.url}#test-model", output="again")
    assert a.count == sent and again["sample"].status == "computed"
    assert again["sample"].ndcg_at_10 == first["sample"].ndcg_at_10


@pytest.mark.parametrize("status", [405, 410, 501])
def test_a_model_list_that_is_not_there_is_asked_once_and_not_retried(servers, status):
    a, _ = servers
    a.models_status = status
    served = chat(a).served_model()
    assert served.key() is None and f"HTTP {status}" in served.reason
    assert len(a.model_requests) == 1  # a 501 is not a failing server: never retried


def test_a_run_asks_the_model_list_once_and_a_failure_ends_it_at_once(evaluate, chat_server, data_dir):
    """Three tasks, HyDE and an LLM reranker (a client per task and stage): one GET /models; then a
    server whose model list keeps failing: asked once (its retries), and no chat request at all."""
    evaluate("hyde", "bm25", "llm-rerank", llm=f"{chat_server.url}#test-model", data_dir=data_dir,
             tasks="Biology,Bioinformatics,Medical-Sciences")
    assert len(chat_server.model_requests) == 1
    chat_server.models_status = 503  # failing, retried, then the run ends
    chat_server.requests.clear()
    with pytest.raises(UserError) as err:
        evaluate("search-r1", "bm25", llm=f"{chat_server.url}#test-model", output="again", cache_dir="c2",
                 concurrency=8)
    assert "HTTP 503" in str(err.value) and chat_server.count == 0
    from r2med_tasks.llm.endpoint import DEFAULT_RETRY

    assert len(chat_server.model_requests) == 1 + DEFAULT_RETRY.max_retries + 1  # one ask, retried; no query asks again


def test_new_weights_served_under_the_same_name_recompute_a_finished_run(evaluate, chat_server, tmp_path):
    """A finished live run is reused while the server serves what it served; a new checkpoint under
    the same name (vLLM's root) is computed again, as the generation cache keys it, and says why."""
    run = lambda **kw: evaluate("hyde", "bm25", llm=f"{chat_server.url}#test-model", **kw)["sample"]
    first = run()
    assert first.status == "computed" and chat_server.count == 10
    assert run().status == "cached" and chat_server.count == 10
    for step, root in enumerate(["/ckpt/step-2", "/ckpt/step-3"], 2):
        chat_server.serve("test-model", root=root)
        lines = []
        assert run(on_message=lines.append).status == "computed"
        assert chat_server.count == 10 * step  # its answers are not the earlier weights' either
        assert any("recomputing" in line and "served.test-model" in line for line in lines), lines
    assert run().status == "cached" and chat_server.count == 30
    identity = json.loads(next((tmp_path / "out").rglob("*.identity.json")).read_text())
    assert identity["served"] == {"test-model": {"id": "test-model", "root": "/ckpt/step-3", "parent": None}}
    chat_server.serve("test-model", root="test-model")  # back to the name served as itself: not what was stored
    assert run().status == "computed"


def test_a_server_that_cannot_be_reached_reuses_with_one_line(evaluate, chat_server):
    """The same model at an address where nothing answers: the stored result is reused, and one line
    says the served model was not checked."""
    chat_server.serve("test-model", root="/ckpt/1")
    evaluate("hyde", "bm25", llm=f"{chat_server.url}#test-model")
    lines = []
    again = evaluate("hyde", "bm25", llm="http://127.0.0.1:9/v1#test-model", on_message=lines.append)
    assert again["sample"].status == "cached"
    (line,) = [line for line in lines if "served model" in line]
    assert "test-model: the served model was not checked" in line and "127.0.0.1:9" in line
