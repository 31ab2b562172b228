"""The chat client's direct transport (``r2med_tasks.llm.transport``): which servers it speaks to
straight over ``http.client``, connections kept alive and never a request sent twice when a
server closed one, and proxies still obeyed. The request's bytes are compared with the SDK's in
test_llm.py; every failure (timeouts, refusals, retries) is tested there through it too."""

from __future__ import annotations

import pytest

from chat_server import ChatServer, fake_answer
from r2med_tasks.llm import ChatClient
from r2med_tasks.llm.transport import goes_direct

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
                   "https_proxy", "HTTPS_PROXY")


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def server():
    with ChatServer() as srv:
        yield srv


def ask(*texts: str) -> list[list[dict]]:
    return [[{"role": "user", "content": t}] for t in texts]


def answers(server: ChatServer, *texts: str) -> list[str]:
    client = ChatClient("test-model", base_url=server.url, timeout=5.0, max_retries=0)
    return [g.text for g in client.generate(ask(*texts))]


@pytest.mark.parametrize("env, url, direct", [
    ({}, "http://127.0.0.1:8000/v1", True),
    ({}, "https://api.openai.com/v1", False),
    ({"http_proxy": "http://proxy:3128"}, "http://10.0.0.5:8000/v1", False),
    ({"HTTP_PROXY": "http://proxy:3128"}, "http://10.0.0.5:8000/v1", False),
    ({"ALL_PROXY": "http://proxy:3128"}, "http://10.0.0.5:8000/v1", False),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "10.0.0.5"}, "http://10.0.0.5:8000/v1", True),
    ({"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": ".lan"}, "http://gpu.lan:8000/v1", True),
    ({"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": ".lan"}, "http://gpu.example:8000/v1", False),
    ({"https_proxy": "http://proxy:3128"}, "http://127.0.0.1:8000/v1", True),  # https's proxy only
])
def test_plain_http_goes_direct_unless_a_proxy_applies(monkeypatch, env, url, direct):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert goes_direct(url) is direct


def test_a_connection_serves_one_request_after_another(server):
    assert answers(server, "a") + answers(server, "b") + answers(server, "c") == \
        [fake_answer(m) for m in ask("a", "b", "c")]
    assert server.count == 3 and server.connections == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_and_nothing_is_sent_twice(server):
    server.drop_idle = True
    assert answers(server, "a") + answers(server, "b") + answers(server, "c") == \
        [fake_answer(m) for m in ask("a", "b", "c")]
    assert [r.body["messages"][0]["content"] for r in server.requests] == ["a", "b", "c"]
    assert server.connections == 3


def test_a_request_on_a_connection_closed_as_it_was_sent_goes_again_on_a_new_one(server, monkeypatch):
    """The server closes the idle connection just after the client found it open: the request dies
    with the connection, unseen by the server, and goes once more on a fresh one (not counted as a
    retry: ``max_retries=0``)."""
    from r2med_tasks.llm import transport

    monkeypatch.setattr(transport, "_readable", lambda sock: False)  # "still open"
    server.drop_idle = True
    assert answers(server, "a") + answers(server, "b") == [fake_answer(m) for m in ask("a", "b")]
    assert [r.body["messages"][0]["content"] for r in server.requests] == ["a", "b"]
    assert server.connections == 2


def test_a_compressed_answer_is_read(server):
    server.gzip = True
    assert answers(server, "a") == [fake_answer(ask("a")[0])]
    assert server.requests[0].headers["accept-encoding"] == "identity"


def test_a_proxy_in_the_environment_still_carries_the_requests(server, monkeypatch):
    """With ``http_proxy`` set, requests go through the SDK's transport, which sends them to the
    proxy (here the server itself, which sees the absolute URL a proxy is asked for)."""
    from r2med_tasks.llm import endpoint

    for shared in ("_http_clients", "_keyless_clients"):  # httpx reads the proxies when a client is built
        monkeypatch.setattr(endpoint, shared, {})
    monkeypatch.setenv("http_proxy", server.url.removesuffix("/v1"))
    assert answers(server, "a") == [fake_answer(ask("a")[0])]
    assert server.requests[0].path == f"{server.url}/chat/completions"
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    answers(server, "b")
    assert server.requests[1].path == "/v1/chat/completions"


def test_an_idle_connection_closed_by_the_server_is_seen_before_a_request_is_sent_on_it():
    """Whatever descriptor the socket has: select() refuses one past 1023, which a run with many
    files open reaches."""
    import os
    import resource
    import socket

    from r2med_tasks.llm.transport import _readable

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1500:
        pytest.skip(f"descriptors are limited to {hard} here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1501) if soft != resource.RLIM_INFINITY else soft, hard))
    ours, theirs = socket.socketpair()
    high = socket.socket(fileno=os.dup2(ours.fileno(), 1500))
    try:
        assert not _readable(ours) and not _readable(high)
        theirs.close()
        assert _readable(ours) and _readable(high)
    finally:
        high.close()
        ours.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("with_key", [False, True])
def test_the_model_list_is_asked_alike_over_either_transport(server, monkeypatch, with_key):
    """``GET /models`` goes direct as the chat requests do, as the SDK sends it (through a proxy,
    here the server itself): the same path and the same key, and the same model read back."""
    from r2med_tasks.llm import endpoint

    if with_key:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = [ChatClient("test-model", base_url=server.url, max_retries=0).served_model()]
    for shared in ("_http_clients", "_keyless_clients"):
        monkeypatch.setattr(endpoint, shared, {})
    monkeypatch.setenv("http_proxy", server.url.removesuffix("/v1"))
    served.append(ChatClient("test-model", base_url=server.url, max_retries=0).served_model())
    direct, sdk = server.model_requests
    assert (direct.path, sdk.path) == ("/v1/models", f"{server.url}/models")
    assert direct.headers.get("authorization") == sdk.headers.get("authorization") == (
        "Bearer sk-test" if with_key else None)
    assert "content-type" not in direct.headers and direct.headers["accept"] == "application/json"
    assert served[0] == served[1] and served[0].id == "test-model"


def test_a_run_against_a_local_server_never_loads_the_sdk(server, monkeypatch):
    """Chat requests and the model list go direct: with ``openai`` unimportable the client still
    answers, and a refusal is still read as one."""
    import sys

    from r2med_tasks.errors import UserError

    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` raises
    client = ChatClient("test-model", base_url=server.url, timeout=5.0, max_retries=0)
    assert client.served_model().id == "test-model"
    assert [g.text for g in client.generate(ask("a"))] == [fake_answer(ask("a")[0])]
    server.fail_after(0, "401")
    with pytest.raises(UserError, match="401"):
        client.generate(ask("b"))
