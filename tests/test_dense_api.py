"""The OpenAI and Voyage embedding clients against a local fake API (offline, a few seconds)."""

from __future__ import annotations

import json
import logging
import sys
import time
import types

import numpy as np
import pytest
from embedding_server import EmbeddingServer, fake_embedding

from r2med_plugins.dense.api import OpenAIEncoder, VoyageEncoder, published_input
from r2med_tasks.errors import UserError

KEY = "sk-test-0123456789abcdefSECRET"
VKEY = "pa-test-9876543210fedcbaSECRET"


class SpaceTokenizer:
    """Tokens are the pieces between single spaces, so newlines stay inside tokens."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.words: list[str] = []

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in text.split(" "):
            if word not in self.vocab:
                self.vocab[word] = len(self.words)
                self.words.append(word)
            ids.append(self.vocab[word])
        return ids

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] for i in ids)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    with EmbeddingServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("VOYAGE_API_KEY", VKEY)


@pytest.fixture
def sleeps():
    return []


def openai(server, sleeps, **kw) -> OpenAIEncoder:
    kw.setdefault("tokenizer", SpaceTokenizer())
    return OpenAIEncoder(base_url=server.url, sleep=sleeps.append, timeout=kw.pop("timeout", 5.0), **kw)


def voyage(server, sleeps, **kw) -> VoyageEncoder:
    kw.setdefault("tokenizer", SpaceTokenizer())
    return VoyageEncoder(base_url=server.url, sleep=sleeps.append, timeout=kw.pop("timeout", 5.0), **kw)


def expected(sent: list[str], model: str, input_type: str | None = None) -> np.ndarray:
    return np.array([fake_embedding(s, model, input_type) for s in sent], dtype=np.float32)


# -- the published preprocessing ---------------------------------------------------------------
def test_openai_request_body_reproduces_published_quirks(server, sleeps):
    texts = ["first line\nsecond line", 'she said "hi" \\ bye', "café ≥ 5 °C", "tab\there\r\nnext", "",
             "a b\nc d e f g"]
    out = openai(server, sleeps, max_tokens=4).encode(texts, kind="query")

    # cut to 4 space-tokens FIRST ("b\nc" is one token), THEN "\n" -> " ", THEN json.dumps(ensure_ascii)
    sent = ['"first line second line"', '"she said \\"hi\\" \\\\"', '"caf\\u00e9 \\u2265 5 \\u00b0C"',
            '"tab\\there\\r next"', '""', '"a b c d e"']
    assert [published_input(t, SpaceTokenizer(), 4) for t in texts] == sent
    (request,) = server.requests
    assert request.path == "/v1/embeddings"
    assert request.body == {"model": "text-embedding-3-large", "input": sent, "encoding_format": "float"}
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert out.dtype == np.float32 and out.shape == (6, 8)
    np.testing.assert_array_equal(out, expected(sent, "text-embedding-3-large"))
    assert sleeps == []


def test_truncation_happens_before_newline_replacement():
    tok = SpaceTokenizer()
    # 2 tokens raw ("x\ny", "z"): fits in 2, so nothing is cut; replacing first would give 3 and cut "z"
    assert published_input("x\ny z", tok, 2) == '"x y z"'
    assert published_input("x y z", tok, 2) == '"x y"'
    assert published_input("x y z", None, None) == '"x y z"'


def test_voyage_request_body_and_input_type(server, sleeps):
    enc = voyage(server, sleeps, max_tokens=3)
    q = enc.encode(["what\nis x", "one two three four"], kind="query")
    d = enc.encode(["doc é"], kind="document")

    first, second = server.requests
    # no format given: base64 (little-endian float32), as the voyageai client asked when given none
    assert first.body == {"model": "voyage-3", "input": ['"what is x"', '"one two three"'],
                          "input_type": "query", "truncation": True, "encoding_format": "base64"}
    assert second.body == {"model": "voyage-3", "input": ['"doc \\u00e9"'], "input_type": "document",
                           "truncation": True, "encoding_format": "base64"}
    assert first.headers["authorization"] == f"Bearer {VKEY}"
    np.testing.assert_array_equal(q, expected(['"what is x"', '"one two three"'], "voyage-3", "query"))
    np.testing.assert_array_equal(d, expected(['"doc \\u00e9"'], "voyage-3", "document"))


def test_defaults_match_the_published_runs(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    o, v = OpenAIEncoder(), VoyageEncoder()
    assert (o.model, o.url, o.max_tokens, o.batch_size, o.api_key_env) == (
        "text-embedding-3-large", "https://api.openai.com/v1/embeddings", 6000, 64, "OPENAI_API_KEY")
    assert (v.model, v.url, v.max_tokens, v.batch_size, v.api_key_env) == (
        "voyage-3", "https://api.voyageai.com/v1/embeddings", 16000, 64, "VOYAGE_API_KEY")
    assert o.model_meta()["name"] == "openai/text-embedding-3-large"
    assert o.model_meta()["framework"] == ["API"] and o.model_meta()["embed_dim"] == 3072
    assert v.model_meta()["name"] == "mongodb/voyage-3" and v.model_meta()["embed_dim"] == 1024


def test_openai_base_url_points_openai_embeddings_at_that_server(server, sleeps, monkeypatch):
    """As the openai SDK reads it: with no URL given, ``$OPENAI_BASE_URL`` is the server; an
    explicit URL wins, and Voyage's endpoint is not OpenAI's."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    enc = OpenAIEncoder(tokenizer=SpaceTokenizer(), sleep=sleeps.append, timeout=5.0)
    got = enc.encode(["one two"], kind="query")
    assert len(server.requests) == 1
    np.testing.assert_array_equal(got, expected(['"one two"'], "text-embedding-3-large"))
    assert OpenAIEncoder(base_url="http://127.0.0.1:9/v1").url == "http://127.0.0.1:9/v1/embeddings"
    assert VoyageEncoder().url == "https://api.voyageai.com/v1/embeddings"


# -- batching and order --------------------------------------------------------------------------
def test_batches_by_count_and_keeps_input_order(server, sleeps):
    texts = [f"text number {i}" for i in range(10)]
    out = openai(server, sleeps, batch_size=3, concurrency=4).encode(texts, kind="document")
    sent = [json.dumps(t) for t in texts]
    assert sorted(server.inputs()) == [sent[0:3], sent[3:6], sent[6:9], sent[9:10]]
    np.testing.assert_array_equal(out, expected(sent, "text-embedding-3-large"))


def test_batches_by_tokens_as_sent(server, sleeps):
    # each sent string '"w1 w2 w3"' is 3 space-tokens; 7 tokens per request -> 2 texts per request
    texts = ["a b c", "d e f", "g h i", "j k l", "m n o p q r s t u v"]
    openai(server, sleeps, batch_size=100, batch_tokens=7, concurrency=1).encode(texts, kind="document")
    assert [len(batch) for batch in server.inputs()] == [2, 2, 1]  # the 10-token text goes alone
    assert server.inputs()[2] == ['"m n o p q r s t u v"']


def test_orders_rows_by_index_not_position(server, sleeps):
    server.fail("shuffle", times=10)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    out = openai(server, sleeps, batch_size=2).encode(texts, kind="query")
    np.testing.assert_array_equal(out, expected([json.dumps(t) for t in texts], "text-embedding-3-large"))
    assert sleeps == []


def test_empty_input_needs_no_key_nor_request(server, sleeps, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    assert openai(server, sleeps).encode([], kind="query").shape == (0, 3072)
    assert server.requests == []


def test_concurrent_requests_overlap(server, sleeps):
    server.overlap = 2  # answers wait until two requests are in flight (for at most 30 s)
    openai(server, sleeps, batch_size=1, concurrency=4).encode(["a", "b", "c", "d"], kind="document")
    assert 2 <= server.max_in_flight <= 4


# -- failures that are survived ------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["500", "malformed", "no_data", "wrong_count"])
def test_transient_failures_are_retried(server, sleeps, mode):
    server.fail(mode, times=2)
    texts = ["one", "two", "three"]
    out = openai(server, sleeps).encode(texts, kind="document")
    np.testing.assert_array_equal(out, expected([json.dumps(t) for t in texts], "text-embedding-3-large"))
    assert len(server.requests) == 3
    assert len(sleeps) == 2 and 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0  # backoff with jitter


def test_429_honours_retry_after_capped(server, sleeps):
    server.fail("429", retry_after="3")
    server.fail("429", retry_after="1000")
    out = voyage(server, sleeps, retry_after_max=20.0).encode(["q"], kind="query")
    assert sleeps == [3.0, 20.0]
    np.testing.assert_array_equal(out, expected(['"q"'], "voyage-3", "query"))


def test_hang_past_timeout_is_retried(server, sleeps):
    server.fail("hang", hang_s=60.0)  # a timeout a loaded machine's answers never reach; a hang far past it
    start = time.monotonic()
    out = openai(server, sleeps, timeout=1.0).encode(["slow"], kind="query")
    assert time.monotonic() - start < 30
    assert len(server.requests) == 2 and len(sleeps) == 1
    np.testing.assert_array_equal(out, expected(['"slow"'], "text-embedding-3-large"))


def test_connection_refused_is_retried_then_reported(sleeps, monkeypatch):
    with EmbeddingServer() as srv:
        url = srv.url
    enc = OpenAIEncoder(base_url=url, tokenizer=SpaceTokenizer(), sleep=sleeps.append, max_retries=2, timeout=2)
    with pytest.raises(UserError, match="connection failed") as err:
        enc.encode(["x"], kind="query")
    assert len(sleeps) == 2 and "\n" not in str(err.value)


def test_context_length_error_recuts_the_batch_as_published(server, sleeps):
    # the published loop re-cut the quoted texts of the whole batch to 5500, 5000, ... tokens
    server.max_input_words = 5200
    long_text = " ".join(f"w{i}" for i in range(5800))
    out = openai(server, sleeps, batch_tokens=None).encode([long_text, "short"], kind="document")
    first, second, third = server.inputs()
    assert len(first[0].split(" ")) == 5800 and len(second[0].split(" ")) == 5500
    cut = json.dumps(long_text)  # re-cut AFTER quoting: the closing quote is gone
    assert third[0] == " ".join(cut.split(" ")[:5000]) and not third[0].endswith('"')
    assert first[1] == second[1] == third[1] == '"short"'
    np.testing.assert_array_equal(out, expected(third, "text-embedding-3-large"))
    assert sleeps == []  # no backoff for this


def test_context_length_recut_gives_up_after_the_published_four_steps(server, sleeps):
    server.max_input_words = 3000
    long_text = " ".join(f"w{i}" for i in range(5800))
    with pytest.raises(UserError, match="too long.*lower max_tokens"):
        openai(server, sleeps).encode([long_text], kind="document")
    assert [len(i[0].split(" ")) for i in server.inputs()] == [5800, 5500, 5000, 4500, 4000]
    server.requests.clear()
    with pytest.raises(UserError, match="shrink_on_context_error is off"):
        openai(server, sleeps, shrink_on_context_error=False).encode([long_text], kind="document")
    assert len(server.requests) == 1


def test_retry_after_forms():
    from email.utils import formatdate

    from r2med_tasks.llm.endpoint import retry_after as _retry_after

    assert _retry_after({"retry-after-ms": "1500", "Retry-After": "9"}, 60) == 1.5
    assert _retry_after({"Retry-After": "7"}, 5) == 5
    assert 8 <= _retry_after({"Retry-After": formatdate(time.time() + 10, usegmt=True)}, 60) <= 10
    assert _retry_after({"Retry-After": "soon"}, 60) is None and _retry_after({}, 60) is None


# -- failures that stop the run with a clear one-line UserError ------------------------------------
def test_retries_exhausted_gives_one_clear_line(server, sleeps):
    server.fail("500", times=10)
    with pytest.raises(UserError) as err:
        openai(server, sleeps, max_retries=2).encode(["x"], kind="query")
    message = str(err.value)
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert "\n" not in message
    assert f"{server.url}/embeddings" in message and "HTTP 500" in message and "3 time" in message
    assert "try again later" in message


def test_429_exhausted_says_what_to_do(server, sleeps):
    server.fail("429", times=10)
    with pytest.raises(UserError, match="HTTP 429.*lower concurrency"):
        voyage(server, sleeps, max_retries=1).encode(["x"], kind="query")


def test_401_is_not_retried_and_never_shows_the_key(server, sleeps, caplog):
    server.fail("401")
    enc = openai(server, sleeps)
    with caplog.at_level(logging.DEBUG), pytest.raises(UserError) as err:
        enc.encode(["x"], kind="query")
    message = str(err.value)
    assert len(server.requests) == 1 and sleeps == []
    assert "HTTP 401" in message and "check OPENAI_API_KEY" in message and "\n" not in message
    for shown in (message, repr(err.value), repr(enc), json.dumps(enc.model_meta()), caplog.text):
        assert KEY not in shown and "SECRET" not in shown and "0123456789" not in shown
    assert err.value.__cause__ is None and (err.value.__context__ is None or err.value.__suppress_context__)


def test_server_messages_are_scrubbed_of_the_key(server, sleeps, caplog):
    server.fail("500", times=3, message=f"upstream said:\n Bearer {KEY} / sk-abc****defg failed")
    with caplog.at_level(logging.DEBUG), pytest.raises(UserError) as err:
        openai(server, sleeps, max_retries=2).encode(["x"], kind="query")
    assert "upstream said: Bearer *** / *** failed" in str(err.value) and "\n" not in str(err.value)
    warnings = [r for r in caplog.records if r.name == "r2med_plugins.dense.api"]
    assert len(warnings) == 2 and all("upstream said" in r.getMessage() for r in warnings)
    assert KEY not in caplog.text + str(err.value) and "SECRET" not in caplog.text + str(err.value)


def test_request_too_large_says_to_lower_the_batch(server, sleeps):
    server.fail("400", message="Requested 312345 tokens, max 300000 tokens per request")
    with pytest.raises(UserError, match="lower batch_size or batch_tokens"):
        openai(server, sleeps).encode(["x"], kind="document")
    assert len(server.requests) == 1


def test_other_4xx_is_not_retried(server, sleeps):
    server.fail("400", message="'input' is invalid")
    with pytest.raises(UserError, match=r"HTTP 400.*'input' is invalid"):
        voyage(server, sleeps).encode(["x"], kind="document")
    assert len(server.requests) == 1 and sleeps == []


def test_a_failing_batch_stops_the_others(server, sleeps):
    server.fail("401")
    with pytest.raises(UserError, match="401"):
        openai(server, sleeps, batch_size=1, concurrency=2).encode([str(i) for i in range(20)], kind="query")
    assert len(server.requests) < 20


def test_missing_key_names_the_variable(server, sleeps, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("MY_VOYAGE_KEY", "  ")
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        openai(server, sleeps).encode(["x"], kind="query")
    with pytest.raises(UserError, match="MY_VOYAGE_KEY"):
        voyage(server, sleeps, api_key_env="MY_VOYAGE_KEY").encode(["x"], kind="query")
    assert server.requests == []


def test_key_is_not_kept_on_the_object(server, sleeps):
    enc = openai(server, sleeps)
    enc.encode(["x"], kind="query")
    assert KEY not in repr(vars(enc)) and KEY not in repr(enc) and KEY not in json.dumps(enc.model_meta())


def test_bad_options_are_user_errors():
    with pytest.raises(UserError, match="batch_size must be 1..2048"):
        OpenAIEncoder(batch_size=5000)
    with pytest.raises(UserError, match="batch_size must be 1..1000"):
        VoyageEncoder(batch_size=1001)
    with pytest.raises(UserError, match="concurrency"):
        OpenAIEncoder(concurrency=0)
    with pytest.raises(ValueError, match="kind"):
        OpenAIEncoder().encode(["x"], kind="passage")


# -- default tokenizers: lazy, and a clear error when they cannot load --------------------------------
def test_missing_tiktoken_is_a_clear_user_error(server, sleeps, monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    enc = OpenAIEncoder(base_url=server.url, sleep=sleeps.append)  # constructing loads nothing
    with pytest.raises(UserError, match="pip install tiktoken.*TIKTOKEN_CACHE_DIR") as err:
        enc.encode(["x"], kind="query")
    assert "\n" not in str(err.value) and server.requests == []


def test_offline_tiktoken_is_a_clear_user_error(server, sleeps, monkeypatch):
    def get_encoding(name):
        raise ConnectionError("cannot reach openaipublic.blob.core.windows.net")

    monkeypatch.setitem(sys.modules, "tiktoken", types.SimpleNamespace(get_encoding=get_encoding))
    with pytest.raises(UserError, match="cl100k_base.*TIKTOKEN_CACHE_DIR"):
        OpenAIEncoder(base_url=server.url).encode(["x"], kind="query")


def test_tiktoken_is_used_lazily_and_special_tokens_are_text(server, sleeps, monkeypatch):
    calls = []

    class Encoding:
        name = "cl100k_base"

        def encode(self, text, disallowed_special="all"):
            calls.append(disallowed_special)
            return list(text.encode())

        def decode(self, ids):
            return bytes(ids).decode()

    monkeypatch.setitem(sys.modules, "tiktoken", types.SimpleNamespace(get_encoding=lambda name: Encoding()))
    enc = OpenAIEncoder(base_url=server.url, max_tokens=5, sleep=sleeps.append)
    enc.encode(["<|endoftext|>"], kind="query")
    assert server.inputs() == [['"<|end"']] and set(calls) == {()}


def test_voyage_hf_tokenizer_offline_is_a_clear_user_error(server, sleeps, monkeypatch):
    def from_pretrained(name):
        raise OSError(f"We couldn't connect to the hub to load {name}")

    fake = types.SimpleNamespace(AutoTokenizer=types.SimpleNamespace(from_pretrained=from_pretrained))
    monkeypatch.setitem(sys.modules, "transformers", fake)
    with pytest.raises(UserError, match="voyageai/voyage-3.*huggingface-cli download") as err:
        VoyageEncoder(base_url=server.url).encode(["x"], kind="query")
    assert "\n" not in str(err.value) and server.requests == []


def test_voyage_default_tokenizer_is_the_models_hf_tokenizer(server, sleeps, monkeypatch):
    loaded = []

    def from_pretrained(name):
        loaded.append(name)
        return SpaceTokenizer()

    fake = types.SimpleNamespace(AutoTokenizer=types.SimpleNamespace(from_pretrained=from_pretrained))
    monkeypatch.setitem(sys.modules, "transformers", fake)
    VoyageEncoder(base_url=server.url, sleep=sleeps.append, max_tokens=2).encode(["a b c", "d"], kind="document")
    VoyageEncoder(base_url=server.url, tokenizer="/models/voyage-3").tokenizer()
    assert loaded == ["voyageai/voyage-3", "/models/voyage-3"]
    assert server.inputs() == [['"a b"', '"d"']]


def test_the_api_retriever_shows_its_retries_on_the_runs_line(server, tmp_path, monkeypatch):
    """The `openai` retriever's requests retry on the line of the context it is called with
    (``ShowsRetries``), indexing and searching alike; nothing is shown once none waits."""
    from r2med_plugins.dense import published_retriever
    from r2med_tasks.api import registry
    from r2med_tasks.components.context import Context
    from r2med_tasks.llm import RetryPolicy
    from r2med_tasks.llm.endpoint import RetryLine
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    monkeypatch.setattr("r2med_tasks.llm.endpoint.DEFAULT_RETRY", RetryPolicy(backoff=0.001, backoff_max=0.002))
    monkeypatch.setattr(OpenAIEncoder, "tokenizer", lambda self: SpaceTokenizer())
    data = SAMPLE_TASK.load()
    options = registry().component("retriever:openai").spec.options_of(
        {"drop_identical_ids": True, "cache": False, "base_url": server.url, "concurrency": 1})
    retriever = published_retriever("openai", options)
    shown = []
    context = Context(tmp_path, retries=RetryLine(shown.append))
    server.fail("500", times=1)
    retriever.index(data.corpus, task=SAMPLE_TASK, context=context)
    assert len(shown) == 2 and shown[0].startswith("retry 1 of 2 in ") and "HTTP 500" in shown[0] and shown[1] is None
    server.fail("429", times=1)
    retriever.search(data.queries, task=SAMPLE_TASK, top_k=5, context=context.with_(retries=RetryLine(shown.append)))
    assert len(shown) == 4 and "HTTP 429" in shown[2] and shown[3] is None


@pytest.mark.parametrize("fault, limits, advice", [
    ("hang", {"timeout": 0.3, "max_retries": 0}, "no answer within 0.3 s; check that the server answers, or raise "
                                                 "-o openai.timeout=SECONDS"),
    ("429", {"max_retries": 1}, "rate-limiting: wait and rerun, lower concurrency, or raise -o openai.max_retries=N "
                                "(now 1)"),
])
def test_the_api_retrievers_time_limits_are_its_options_named_in_its_advice(server, tmp_path, monkeypatch, fault,
                                                                           limits, advice):
    """``-o timeout=`` and ``-o max_retries=`` of the `openai` retriever reach its requests, and the
    one line it fails with names the option to raise as the user sets it."""
    from r2med_plugins.dense import published_retriever
    from r2med_tasks.api import registry
    from r2med_tasks.components.context import Context
    from r2med_tasks.llm import RetryPolicy
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    monkeypatch.setattr("r2med_tasks.llm.endpoint.DEFAULT_RETRY", RetryPolicy(backoff=0.001, backoff_max=0.002))
    monkeypatch.setattr(OpenAIEncoder, "tokenizer", lambda self: SpaceTokenizer())
    options = registry().component("retriever:openai").spec.options_of(
        {"cache": False, "base_url": server.url, "concurrency": 1, **limits})
    server.fail(fault, times=limits["max_retries"] + 1, hang_s=30)
    with pytest.raises(UserError) as e:
        published_retriever("openai", options).index(SAMPLE_TASK.load().corpus, task=SAMPLE_TASK,
                                                     context=Context(tmp_path))
    assert f"failed {limits['max_retries'] + 1} time(s)" in str(e.value) and str(e.value).endswith(advice)
    assert len(server.requests) == limits["max_retries"] + 1


# -- the `openai` and `voyage` retrievers end to end, against the local server ---------------------

@pytest.mark.parametrize("name, encoder", [("openai", OpenAIEncoder), ("voyage", VoyageEncoder)])
def test_api_retriever_end_to_end(name, encoder, server, evaluate, tmp_path, monkeypatch):
    """`r2med-run --plugin openai` scores the sample through the API client; a rerun sends nothing
    (corpus and query embeddings come from the cache), other queries only themselves; the key reaches
    no file."""
    monkeypatch.setattr(encoder, "tokenizer", lambda self: SpaceTokenizer())
    first = evaluate(name, base_url=server.url, output="a")
    n_sent = sum(len(batch) for batch in server.inputs())
    assert n_sent == 48 + 10
    second = evaluate(name, base_url=server.url, output="b")
    assert sum(len(batch) for batch in server.inputs()) == n_sent
    assert first["sample"].ndcg_at_10 == second["sample"].ndcg_at_10
    third = evaluate(name, base_url=server.url, concurrency=2, output="c", overwrite=True)
    assert third["sample"].status == "computed" and third["sample"].ndcg_at_10 == first["sample"].ndcg_at_10
    assert sum(len(batch) for batch in server.inputs()) == n_sent  # a runtime option: still all cached
    for path in [*tmp_path.rglob("*.json"), *tmp_path.rglob("*.tsv"), *tmp_path.rglob("*.trec")]:
        text = path.read_text(errors="ignore")
        assert KEY not in text and VKEY not in text
