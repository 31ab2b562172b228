"""An OpenAI-compatible chat client and an append-only generation cache, for LLM query rewriters.

- ``ChatClient(model, base_url=...)``: ``POST {base_url}/chat/completions``, one request per messages
  list, from a small thread pool, answers in input order (``generate``). Works with OpenAI, vLLM,
  Ollama or anything speaking that API; plain ``urllib`` through ``r2med_tasks.http.JSONPoster``
  (retries, backoff, ``Retry-After``, key scrubbing, one-line ``UserError`` messages).
- ``parse_llm_spec("openai:gpt-4o" | "vllm:NAME" | "ollama:NAME" | "http://host:port/v1#NAME")``:
  the ``ChatClient`` keyword arguments for a command-line spec.
- ``GenerationCache(path)``: a JSONL file, one line per answer, appended (and fsynced) as each
  answer arrives, so a killed run keeps everything already paid for.
- ``generate_cached(client, cache, requests)``: sends only what the cache lacks.
- ``Usage`` and ``cost(model, usage)``: requests sent, cache hits, tokens, and dollars for known models.

The API key is read from an environment variable on every ``generate`` and never stored: not on
the client, not in the cache, not in any message or log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from r2med_tasks.components import LLMSpec
from r2med_tasks.errors import UserError
from r2med_tasks.hookspecs import hookimpl
from r2med_tasks.journal import Journal
from r2med_tasks.http import BadResponse, JSONPoster, api_key, map_concurrently, server_message

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"
VLLM_BASE_URL = "http://127.0.0.1:8000/v1"

SAMPLING_PARAMS = ("temperature", "top_p", "max_tokens", "seed")

# OpenAI's reasoning models (o1, o3-mini, o4-mini, gpt-5...) reject "max_tokens" and take
# "max_completion_tokens" (which counts their hidden reasoning tokens too).
_COMPLETION_TOKENS_MODELS = re.compile(r"^(?:openai/)?(?:o\d|gpt-5)", re.I)
_CONTEXT_ERROR = re.compile(r"maximum (?:context|input) length|context_length_exceeded|context window", re.I)


@dataclass(frozen=True)
class Generation:
    """One chat completion: the first choice's text, the tokens billed, and the model that answered."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    model: str


@dataclass
class Usage:
    """A tally: ``sent`` requests answered by the API (tokens are theirs: what was billed) and
    ``cached`` answers taken from the cache instead."""

    sent: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def describe(self, model: str) -> str:
        """One line for the end of a run: requests, cache hits, tokens and, when known, the cost."""
        dollars = cost(model, self)
        price = f", about ${dollars:.2f}" if dollars is not None else ""
        return (f"{model}: {self.sent} requests sent, {self.cached} answered from the cache, "
                f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens{price}")

    def add(self, generation: Generation) -> None:
        self.sent += 1
        self.prompt_tokens += generation.prompt_tokens
        self.completion_tokens += generation.completion_tokens


# US dollars per million tokens (input, output): OpenAI list prices, standard tier, without the
# cached-input and Batch API discounts (so an upper bound). Checked 2025; update as prices change.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-2024-11-20": (2.50, 10.00),
    "gpt-4o-2024-08-06": (2.50, 10.00),
    "gpt-4o-2024-05-13": (5.00, 15.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o-mini-2024-07-18": (0.15, 0.60),
    "o3-mini": (1.10, 4.40),
    "o3-mini-2025-01-31": (1.10, 4.40),
}


def cost(model: str, usage: Usage, prices: dict[str, tuple[float, float]] | None = None) -> float | None:
    """Dollars for ``usage``'s tokens at ``model``'s price (``PRICES`` unless given); None if unknown."""
    price = (PRICES if prices is None else prices).get(model)
    if price is None:
        return None
    return (usage.prompt_tokens * price[0] + usage.completion_tokens * price[1]) / 1_000_000


# --------------------------------------------------------------------------------------------
# Specs.
# --------------------------------------------------------------------------------------------
SPEC_FORMS = ("openai:MODEL (api.openai.com, key in OPENAI_API_KEY)",
              "vllm:MODEL (http://127.0.0.1:8000/v1)",
              "ollama:MODEL (http://127.0.0.1:11434/v1)",
              "http(s)://HOST[:PORT]/PATH#MODEL (any OpenAI-compatible server)")


def llm_model_name(spec: str) -> str:
    """The model an LLM spec names, for display: after the last ``#`` of a URL spec, else after
    ``backend:`` ("openai:gpt-4o" -> "gpt-4o")."""
    return spec.rpartition("#")[2] if "#" in spec else spec.partition(":")[2] or spec


def parse_llm_spec(spec: str) -> dict:
    """``{"model", "base_url", "api_key_env"}`` for ``ChatClient(**...)``.

    - ``openai:gpt-4o``: the OpenAI API; ``OPENAI_API_KEY`` is required.
    - ``vllm:NAME``: ``http://127.0.0.1:8000/v1``; a key is sent only if ``VLLM_API_KEY`` is set
      (vLLM's ``--api-key``).
    - ``ollama:NAME``: ``http://127.0.0.1:11434/v1``; a key only if ``OLLAMA_API_KEY`` is set.
    - ``http://127.0.0.1:8000/v1#Qwen2.5-72B-Instruct``: that base URL (everything before the last
      ``#``) and model; a key only if ``OPENAI_API_KEY`` is set (as the OpenAI SDK does).
    """
    forms = "; ".join(SPEC_FORMS)
    if not isinstance(spec, str) or not spec.strip():
        raise UserError(f"an LLM spec is needed; use one of: {forms}")
    spec = spec.strip()
    if spec.lower().startswith(("http://", "https://")):
        base_url, sep, model = spec.rpartition("#")
        base_url = base_url.rstrip("/")
        if not sep or not model.strip() or not urlparse(base_url).hostname:
            raise UserError(f"bad LLM spec {spec!r}: a URL spec is BASE_URL#MODEL, e.g. "
                            f"http://127.0.0.1:8000/v1#Qwen2.5-72B-Instruct; forms: {forms}")
        return {"model": model.strip(), "base_url": base_url, "api_key_env": "OPENAI_API_KEY"}
    provider, sep, model = spec.partition(":")
    endpoints = {"openai": (OPENAI_BASE_URL, "OPENAI_API_KEY"), "vllm": (VLLM_BASE_URL, "VLLM_API_KEY"),
                 "ollama": (OLLAMA_BASE_URL, "OLLAMA_API_KEY")}
    provider = provider.strip().lower()
    if not sep or provider not in endpoints or not model.strip():
        raise UserError(f"bad LLM spec {spec!r}; use one of: {forms}")
    base_url, env = endpoints[provider]
    return {"model": model.strip(), "base_url": base_url, "api_key_env": env}


# --------------------------------------------------------------------------------------------
# The client.
# --------------------------------------------------------------------------------------------
def _normalize_params(params: dict[str, Any]) -> dict[str, Any]:
    """Sampling params without the ``None`` ones; temperature/top_p as floats, so 0 and 0.0 agree."""
    out = {}
    for name, value in params.items():
        if value is None:
            continue
        if name in ("temperature", "top_p") and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value)
        out[name] = value
    return out


def _check_messages(requests: Sequence, who: str) -> list[list[dict]]:
    if isinstance(requests, (str, bytes, dict)) or not isinstance(requests, Sequence):
        raise UserError(f"{who}: requests must be a list of message lists, got {type(requests).__name__}")
    for i, messages in enumerate(requests):
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence) or not messages:
            raise UserError(f"{who}: request {i} must be a non-empty list of messages "
                            '({"role": ..., "content": ...}), got ' + type(messages).__name__)
        for j, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise UserError(f"{who}: request {i}, message {j} must be a dict with a 'role' string")
        try:
            json.dumps(messages)
        except (TypeError, ValueError) as e:
            raise UserError(f"{who}: request {i} is not JSON-serializable ({e})") from None
    return [list(m) for m in requests]


def _text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_chat_completion(payload: bytes, requested_model: str) -> Generation:
    """The first choice of a ``/chat/completions`` answer; ``BadResponse`` (retried) if unusable."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise BadResponse("the body is not JSON") from None
    if not isinstance(obj, dict):
        raise BadResponse("the body is not a JSON object")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        error = f"; error: {server_message(payload)}" if "error" in obj else ""
        raise BadResponse(f"no choices{error}")
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise BadResponse("the first choice has no message")
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    text = _text(choice["message"].get("content"))
    if text is None or not text.strip():
        advice = None
        if finish == "length":
            advice = ("the model used all max_tokens before answering (reasoning models count their hidden "
                      "reasoning): raise max_tokens")
        elif finish == "content_filter":
            advice = "the provider's content filter withheld the answer: change the prompt or the model"
        raise BadResponse(f"{'empty' if text is not None else 'no'} content (finish_reason {finish!r})", advice)
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
    model = obj.get("model") if isinstance(obj.get("model"), str) and obj.get("model") else requested_model
    return Generation(text=text, prompt_tokens=_count(usage.get("prompt_tokens")),
                      completion_tokens=_count(usage.get("completion_tokens")), finish_reason=finish, model=model)


class ChatClient:
    """Chat completions from an OpenAI-compatible API (OpenAI, vLLM, Ollama, any ``base_url``).

    The body is ``{"model", "messages"}`` plus each of ``temperature``, ``top_p``, ``max_tokens``,
    ``seed`` that is not None (OpenAI's o-series and gpt-5 get ``max_tokens`` as
    ``max_completion_tokens``, the only name they accept). ``Authorization: Bearer $api_key_env``
    is sent when that variable is set; on the OpenAI API (``api.openai.com``) it must be.

    Retries (``r2med_tasks.http.JSONPoster``): HTTP 408/429/5xx, timeouts, connection errors and
    unusable answers (not JSON, no choices, empty or null content) are retried up to
    ``max_retries`` times, waiting ``min(backoff_max, backoff * 2**(n-1))`` s times 0.5..1, or the
    server's ``Retry-After`` (at most ``retry_after_max``); then a one-line ``UserError`` naming the
    endpoint, the model, the last failure and what to do. Other 4xx fail at once (401: "check
    $api_key_env"). ``sleep`` replaces the waits (tests).
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float | None = None, top_p: float | None = None, max_tokens: int | None = None,
                 seed: int | None = None, concurrency: int = 8, max_retries: int = 6, timeout: float = 600.0,
                 sleep: Callable[[float], None] | None = None, backoff: float = 1.0, backoff_max: float = 30.0,
                 retry_after_max: float = 60.0) -> None:
        if not isinstance(model, str) or not model.strip():
            raise UserError(f"ChatClient: model must be a non-empty string, got {model!r}")
        self.model = model.strip()
        self.base_url = (base_url or OPENAI_BASE_URL).strip().rstrip("/")
        if not self.base_url.lower().startswith(("http://", "https://")) or not urlparse(self.base_url).hostname:
            raise UserError(f"ChatClient: base_url must be an http(s) URL such as {VLLM_BASE_URL}, "
                            f"got {base_url!r}")
        self.url = f"{self.base_url}/chat/completions"
        self.api_key_env = api_key_env
        self.temperature, self.top_p, self.max_tokens, self.seed = temperature, top_p, max_tokens, seed
        self.concurrency, self.max_retries, self.timeout = concurrency, max_retries, timeout
        self.backoff, self.backoff_max, self.retry_after_max = backoff, backoff_max, retry_after_max
        self._sleep = sleep
        self._check_options()

    def __repr__(self) -> str:
        params = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"ChatClient({self.model!r}, base_url={self.base_url!r}, api_key_env={self.api_key_env!r}{params})"

    def _check_options(self) -> None:
        def number(name: str, low: float, high: float) -> None:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not low <= value <= high):
                raise UserError(f"ChatClient: {name} must be a number in [{low:g}, {high:g}] or None, got {value!r}")

        number("temperature", 0, 2)
        number("top_p", 0, 1)
        for name, low in (("max_tokens", 1), ("seed", None), ("concurrency", 1), ("max_retries", 0)):
            value = getattr(self, name)
            if name in ("max_tokens", "seed") and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
                what = "an integer" if low is None else f"an integer >= {low}"
                raise UserError(f"ChatClient: {name} must be {what}, got {value!r}")
        for name in ("timeout", "backoff", "backoff_max", "retry_after_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise UserError(f"ChatClient: {name} must be positive seconds, got {value!r}")

    @property
    def params(self) -> dict[str, Any]:
        """The sampling parameters that are set (None ones left out), as sent and as cache-keyed."""
        return _normalize_params({name: getattr(self, name) for name in SAMPLING_PARAMS})

    @property
    def needs_key(self) -> bool:
        """True on the OpenAI API itself: there a missing key is an error rather than no header."""
        return (urlparse(self.base_url).hostname or "").lower() == "api.openai.com"

    def body(self, messages: list[dict]) -> dict:
        """The JSON body sent for one request."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        for name, value in self.params.items():
            if name == "max_tokens" and _COMPLETION_TOKENS_MODELS.match(self.model):
                name = "max_completion_tokens"
            body[name] = value
        return body

    def generate(self, requests: list[list[dict]], *, on_result: Callable[[int, Generation], None] | None = None,
                 usage: Usage | None = None) -> list[Generation]:
        """One completion per messages list, ``concurrency`` at a time; results in input order.

        ``on_result(i, generation)`` is called (from a worker thread, one call at a time) as each
        answer arrives; ``usage`` (if given) is tallied the same way. The first request that fails
        for good raises its ``UserError`` once the requests in flight have ended (the others stop
        at their next attempt; answers that arrive meanwhile still reach ``on_result``).
        """
        requests = _check_messages(requests, "ChatClient.generate")
        if not requests:
            return []
        key = api_key(self.api_key_env, required=self.needs_key, who=f"ChatClient for {self.model} at {self.url}")
        poster = JSONPoster(self.url, model=self.model, api_key_env=self.api_key_env, base_url=self.base_url,
                            timeout=self.timeout, max_retries=self.max_retries, backoff=self.backoff,
                            backoff_max=self.backoff_max, retry_after_max=self.retry_after_max, sleep=self._sleep,
                            malformed_advice="check that base_url serves an OpenAI-compatible chat completions API",
                            client_error=self._client_error, logger=log)
        lock = threading.Lock()

        def parse(payload: bytes) -> Generation:
            return parse_chat_completion(payload, self.model)

        def run(i: int, abort: threading.Event) -> Generation:
            generation = poster.post(self.body(requests[i]), parse, key=key, abort=abort)
            with lock:
                if usage is not None:
                    usage.add(generation)
                if on_result is not None:
                    on_result(i, generation)
            return generation

        return map_concurrently(run, range(len(requests)), self.concurrency, name="ChatClient", finish_running=True)

    def _client_error(self, status: int, message: str) -> str | None:
        """Advice for a refused request (not retried); None leaves it to ``default_fix``."""
        if status in (400, 413, 422) and _CONTEXT_ERROR.search(message):
            return f"the prompt plus max_tokens exceed {self.model}'s context: shorten the prompt or lower max_tokens"
        if status in (400, 422):
            for name in (*SAMPLING_PARAMS, "max_completion_tokens"):
                if name in message and re.search(r"unsupported|not support", message, re.I):
                    return f"{self.model} does not take {name} as set: change it or leave it unset"
        return None


# --------------------------------------------------------------------------------------------
# The cache.
# --------------------------------------------------------------------------------------------
CACHE_VERSION = 1


def key_for(model: str, messages: list[dict], params: dict[str, Any]) -> str:
    """sha256 hex of the canonical JSON of ``{"v", "model", "messages", "params"}``.

    ``params`` are the sampling parameters, None ones dropped (``temperature=0`` and ``0.0`` agree);
    dict key order does not matter. The base URL is deliberately NOT part of the key: the same model
    id served elsewhere (OpenAI vs. a proxy, vLLM on another host) reuses the answers. Use distinct
    model ids (or cache files) for models that differ under one name (e.g. quantized builds).
    """
    blob = json.dumps({"v": CACHE_VERSION, "model": model, "messages": messages,
                       "params": _normalize_params(dict(params))},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_FIELDS = {"text": str, "prompt_tokens": int, "completion_tokens": int, "model": str}


def _entry(obj: dict) -> tuple[str, Generation] | None:
    """A journal record as (key, Generation), None when a field is missing or mistyped."""
    if not isinstance(obj.get("key"), str):
        return None
    for name, kind in _FIELDS.items():
        if not isinstance(obj.get(name), kind) or isinstance(obj.get(name), bool):
            return None
    finish = obj.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        return None
    return obj["key"], Generation(text=obj["text"], prompt_tokens=obj["prompt_tokens"],
                                  completion_tokens=obj["completion_tokens"], finish_reason=finish,
                                  model=obj["model"])


class GenerationCache:
    """Answers by request key, in an append-only journal (:class:`r2med_tasks.journal.Journal`).

    Each line is ``{"key": <key_for(...)>, "text", "prompt_tokens", "completion_tokens",
    "finish_reason", "model"}`` (the ``Generation`` fields; ``model`` is the model that answered) and
    nothing else: no key, no prompt. ``put`` appends and fsyncs one line, so a killed run loses only
    the answer being written; a line that does not parse (the last one, cut by a kill) is skipped.
    When a key appears twice, the last line wins. The file is read once, at construction: lines
    another process appends later are not seen by this object.
    """

    key_for = staticmethod(key_for)

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._journal = Journal(self.path, "the generation cache")
        self._entries: dict[str, Generation] = {}
        records, self.skipped, cut = self._journal.read()  # skipped: lines that did not parse, a cut last one included
        for record in records:
            entry = _entry(record)
            if entry is None:
                self.skipped += 1
            else:
                self._entries[entry[0]] = entry[1]
        if self.skipped - cut:
            log.info("%s: skipped %d unreadable line(s) (left by interrupted writes); those requests are sent "
                     "again", self.path, self.skipped - cut)

    def __repr__(self) -> str:
        return f"GenerationCache({str(self.path)!r}, {len(self._entries)} entries)"

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: str) -> Generation | None:
        return self._entries.get(key)

    def put(self, key: str, generation: Generation) -> None:
        """Append ``generation`` under ``key`` and fsync it before returning."""
        self._journal.append([{"key": key, **asdict(generation)}])
        self._entries[key] = generation


def generate_cached(client: ChatClient, cache: GenerationCache, requests: list[list[dict]], *,
                    usage: Usage | None = None) -> list[Generation]:
    """``client.generate(requests)`` for what ``cache`` lacks, each answer stored as it arrives.

    Requests are keyed by ``key_for(client.model, messages, client.params)``; identical requests in
    one call are sent once. ``usage`` (if given) counts the requests sent (and their tokens) and the
    cache hits. If the run fails, every answer received so far is already in the cache, so a rerun
    sends only the rest.
    """
    requests = _check_messages(requests, "generate_cached")
    params = client.params
    keys = [cache.key_for(client.model, messages, params) for messages in requests]
    out: list[Generation | None] = [cache.get(k) for k in keys]
    to_send: list[int] = []
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if out[i] is None and key not in first:
            first[key] = i
            to_send.append(i)
    hits = len(requests) - len(to_send)
    if usage is not None:
        usage.cached += hits
    if to_send:
        log.info("%s: %d answer(s) cached, %d request(s) to send to %s", client.model, hits, len(to_send), getattr(client, "url", "its endpoint"))

    def store(j: int, generation: Generation) -> None:
        i = to_send[j]
        cache.put(keys[i], generation)
        out[i] = generation

    client.generate([requests[i] for i in to_send], on_result=store, usage=usage)
    for i, key in enumerate(keys):
        if out[i] is None:
            out[i] = out[first[key]]
    return out  # type: ignore[return-value]


@hookimpl
def register_llms(register):
    for name, what in (("openai", "the OpenAI API (key in OPENAI_API_KEY)"),
                       ("vllm", "a vLLM server on http://127.0.0.1:8000/v1"),
                       ("ollama", "an Ollama server on http://127.0.0.1:11434/v1"),
                       ("http", "any OpenAI-compatible server: http://HOST:PORT/v1#MODEL")):
        register(LLMSpec(name=name, factory=chat_client, description=what, aliases=("https",) if name == "http" else ()))


def chat_client(spec: str, **options) -> ChatClient:
    """An OpenAI-compatible chat client for an ``-o llm=`` value."""
    return ChatClient(**parse_llm_spec(spec), **options)
