"""The chat client: ``ChatClient(model, base_url=...)``, chat completions through the official
``openai`` SDK (``openai.OpenAI(...).post``: the request ``chat.completions.create`` sends, without
its per-request walk of the typed parameters), one request per messages list,
from a small thread pool, answers (``Generation``) in input order (``generate``). Works with
OpenAI, vLLM, Ollama or anything speaking that API. ``Turn`` and ``ChatClient.continue_turns(turns)``
extend an assistant turn until a stop string (search agents), through ``/chat/completions`` with
vLLM's ``continue_final_message`` or, given ``template=`` (a tokenizer), a chat template rendered
here and ``/completions``. ``ChatClient.served_model`` asks the server which model it serves
(``GET /models``).

``LLMClient`` is what components may call on any LLM backend's client (``context.llm(...)``), and
``ContinuesTurns`` what an agent calls on one that continues turns; ``ChatClient`` is both.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from ..errors import UserError, reason
from .endpoint import (
    VLLM_BASE_URL,
    APICaller,
    BadResponse,
    Endpoint,
    RetryPolicy,
    check_base_url,
    endpoint_url,
    map_concurrently,
    no_auth_header,
    openai_base_url,
    server_message,
)
from .secrets import redact, scrub, show_url
from .usage import Usage

log = logging.getLogger(__name__)

REASONING_FIELDS = ("reasoning_content", "reasoning")  # where servers put a reasoning model's thinking
SAMPLING_PARAMS = ("temperature", "top_p", "max_tokens", "seed", "top_k", "repetition_penalty")
EXTRA_BODY_PARAMS = frozenset({"top_k", "repetition_penalty", "continue_final_message", "add_generation_prompt"})
"""Body keys the openai SDK's ``create`` has no argument for (vLLM's sampling and chat-template
extras, its ``extra_body``): sent in the same JSON body as the others."""

# OpenAI's reasoning models (o1, o3-mini, o4-mini, gpt-5...) reject "max_tokens" and take
# "max_completion_tokens" (which counts their hidden reasoning tokens too).
_COMPLETION_TOKENS_MODELS = re.compile(r"^(?:openai/)?(?:o\d|gpt-5)", re.I)
_CONTEXT_ERROR = re.compile(r"maximum (?:context|input) length|context_length_exceeded|context window", re.I)


@dataclass(frozen=True)
class Generation:
    """One completion: the first choice's text, the tokens billed, why it ended and the model that answered.

    ``text`` is the message's ``content``; a server that splits a reasoning model's thinking from its
    answer (vLLM's ``--reasoning-parser``, DeepSeek's API) gives the thinking in ``reasoning``
    (``message.reasoning_content``, or ``message.reasoning`` as newer vLLM and OpenRouter name it);
    ``r2med_tasks.llm.records.joined_text`` puts the two back together as the model wrote them.

    ``finish_reason``: the server's (``"stop"``: a stop string or the end of the turn, ``"length"``:
    ``max_tokens`` spent). ``stop``: for a continued turn (``ChatClient.continue_turns``), the stop
    string that ended it, as the server reports it (vLLM's ``stop_reason``); the text never
    includes it. None when no stop string ended it (the model ended its turn, ``max_tokens``) or when
    the server does not say which (OpenAI and Ollama report only ``finish_reason: "stop"``).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    model: str
    stop: str | None = None
    reasoning_tokens: int = 0  # of completion_tokens, where the server says (usage.completion_tokens_details)
    reasoning: str | None = None  # the thinking, when the server returns it apart (``reasoning_content``)
    seconds: float | None = field(default=None, compare=False)  # the request's, retries included (not what was answered)
    tokens_known: bool = True  # False: the server gave no valid token counts (the 0s above stand for unknown)


def normalize_params(params: dict[str, Any]) -> dict[str, Any]:
    """Sampling params without the ``None`` ones; temperature/top_p as floats, so 0 and 0.0 agree."""
    out = {}
    for name, value in params.items():
        if value is None:
            continue
        if (name in ("temperature", "top_p", "repetition_penalty") and isinstance(value, (int, float))
                and not isinstance(value, bool)):
            value = float(value)
        out[name] = value
    return out


def check_messages(requests: Sequence, who: str) -> list[list[dict]]:
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


def check_turns(turns: Sequence, who: str) -> list[Turn]:
    if isinstance(turns, (str, bytes, dict, Turn)) or not isinstance(turns, Sequence):
        raise UserError(f"{who}: turns must be a list of Turn, got {type(turns).__name__}")
    for i, turn in enumerate(turns):
        if not isinstance(turn, Turn):
            raise UserError(f"{who}: turn {i} must be a Turn, got {type(turn).__name__}")
    return list(turns)


def _text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def token_count(value: Any) -> int:
    """A token count as a server (or a cache line) reports it; 0 for anything but an integer >= 0."""
    return value if valid_count(value) else 0


def valid_count(value: Any) -> bool:
    """Whether a server's token count is one: an integer >= 0 (not -1000000, 1e308 or "x")."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_TOKENS


MAX_TOKENS = 10**15  # more than any request ever billed: a count beyond it is no count (and stays finite in dollars)
_WARNED: set[str] = set()  # models whose server gave invalid token counts, warned about once a process


def _first_choice(payload: bytes) -> tuple[dict, dict]:
    """The answer object and its first choice; ``BadResponse`` if there is none."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadResponse("the body is not JSON") from None
    if not isinstance(obj, dict):
        raise BadResponse("the body is not a JSON object")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        error = f"; error: {server_message(payload)}" if "error" in obj else ""
        raise BadResponse(f"no choices{error}")
    if not isinstance(choices[0], dict):
        raise BadResponse("the first choice is not an object")
    return obj, choices[0]


def _no_text(text: str | None, finish: str | None) -> BadResponse:
    advice = None
    if finish == "length":
        advice = ("the model used all max_tokens before answering (reasoning models count their hidden "
                  "reasoning): raise max_tokens")
    elif finish == "content_filter":
        advice = "the provider's content filter withheld the answer: change the prompt or the model"
    return BadResponse(f"{'empty' if text is not None else 'no'} content (finish_reason {finish!r})", advice)


def reasoning_of(message: dict) -> str | None:
    """The thinking a server returned apart from the answer: ``reasoning_content`` (vLLM's reasoning
    parsers, DeepSeek's API), else ``reasoning`` (newer vLLM, OpenRouter); None when neither is
    text (an empty one included: nothing was returned apart)."""
    for name in REASONING_FIELDS:
        value = _text(message.get(name))
        if value:
            return value
    return None


def _generation(obj: dict, text: str, finish: str | None, requested_model: str, stop: str | None = None,
                reasoning: str | None = None) -> Generation:
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
    model = obj.get("model") if isinstance(obj.get("model"), str) and obj.get("model") else requested_model
    model = redact(model)  # stored and shown: never a secret a spec or a server put there
    details = usage.get("completion_tokens_details")  # OpenAI's, and vLLM's with a reasoning parser
    reasoning_tokens = token_count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
    known = all(valid_count(usage.get(name)) for name in ("prompt_tokens", "completion_tokens"))
    if not known and usage and model not in _WARNED:  # reported, but not as counts: unknown, never 0
        _WARNED.add(model)
        shown = {name: usage.get(name) for name in ("prompt_tokens", "completion_tokens")}
        log.warning("%s: the server reported token counts that are not counts (%s); they are counted as unknown, "
                    "and so is the cost", model, scrub(json.dumps(shown, default=str), limit=120))
    return Generation(text=text, prompt_tokens=token_count(usage.get("prompt_tokens")),
                      completion_tokens=token_count(usage.get("completion_tokens")), finish_reason=finish, model=model,
                      stop=stop, reasoning_tokens=reasoning_tokens, reasoning=reasoning, tokens_known=known)


def parse_chat_completion(payload: bytes, requested_model: str) -> Generation:
    """The first choice of a ``/chat/completions`` answer; ``BadResponse`` (retried) if unusable."""
    obj, choice = _first_choice(payload)
    if not isinstance(choice.get("message"), dict):
        raise BadResponse("the first choice has no message")
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    text = _text(choice["message"].get("content"))
    reasoning = reasoning_of(choice["message"])
    if (text is None or not text.strip()) and not (reasoning and finish == "stop"):
        raise _no_text(text, finish)
    # a thought never closed (vLLM's deepseek_r1 parser puts an answer without "</think>" all in the
    # reasoning): the text is empty, and the reasoning is what the model wrote
    return _generation(obj, text or "", finish, requested_model, reasoning=reasoning)


def parse_continuation(payload: bytes, requested_model: str, mode: str) -> Generation:
    """The first choice of a continued turn's answer (``mode`` "chat": ``/chat/completions``'s
    ``message.content``; "completions": ``/completions``' ``text``), with the stop string that ended
    it (vLLM's ``stop_reason`` when a string; an int there is a stop token, not a string). Empty text
    is an answer when the turn stopped (the model wrote a stop string or ended the turn at once);
    ``BadResponse`` (retried) otherwise."""
    obj, choice = _first_choice(payload)
    reasoning = None
    if mode == "chat":
        if not isinstance(choice.get("message"), dict):
            raise BadResponse("the first choice has no message")
        text = _text(choice["message"].get("content"))
        reasoning = reasoning_of(choice["message"])
        if reasoning is not None and text is None:  # the thinking not closed: all of it came apart
            text = ""
    else:
        text = choice.get("text") if isinstance(choice.get("text"), str) else None
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    stop = (choice.get("stop_reason") or None) if isinstance(choice.get("stop_reason"), str) else None
    if text is None or (not (text + (reasoning or "")).strip() and finish != "stop"):
        raise _no_text(text, finish)
    return _generation(obj, text, finish, requested_model, stop, reasoning)


NO_MODEL_LIST = (404, 405, 410, 501)  # GET /models answered so: the server has no model list (never retried)
_MEMO_LOCK = threading.Lock()


class _NoModelList(Exception):
    """``GET /models`` is not there (``NO_MODEL_LIST``) or answers something else than a model list."""


def _model_cards(payload: bytes) -> list[dict]:
    """The model cards of a ``GET /models`` answer (``{"data": [{"id": ...}, ...]}``)."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _NoModelList("the answer is not JSON") from None
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list):
        raise _NoModelList("the answer has no 'data' list")
    return [c for c in data if isinstance(c, dict) and isinstance(c.get("id"), str)]


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class ServedModel:
    """What a server says it serves under the requested model name (``ChatClient.served_model``):
    ``id`` (None when not known), vLLM's ``root`` (the weights' path or hub id) and ``parent`` (a
    LoRA's base model); ``reason``: why the identity is not known (None when it is), ``unlisted``:
    the server lists models, not this one."""

    requested: str
    id: str | None = None
    root: str | None = None
    parent: str | None = None
    unlisted: bool = False
    reason: str | None = None

    def key(self) -> dict[str, Any] | None:
        """The part of a cache key that stands for the server's model: None when unknown (the
        model name alone, as before identities were asked for)."""
        if self.id is not None:
            return {"id": self.id, "root": self.root, "parent": self.parent}
        return {"unlisted": True} if self.unlisted else None


@dataclass(frozen=True)
class Turn:
    """One request to extend an assistant turn (``ChatClient.continue_turns``), as search agents
    do: generate until a stop string, append search results to the text, generate again from there.

    - ``messages``: the conversation before the turn (system and user messages, and earlier
      complete turns if any), not ending with the turn being extended;
    - ``partial``: the assistant's text so far in that turn ("": start it);
    - ``stop``: stop strings; the answer ends before the first one the model writes, which the
      ``Generation`` names (``stop``) and its text leaves out;
    - ``max_tokens``: this request's limit (None: the client's).

    Lists are accepted and kept as tuples; a malformed turn is a ``UserError``.
    """

    messages: tuple[dict, ...]
    partial: str = ""
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        messages, stop = self.messages, self.stop
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence) or not messages:
            raise UserError("Turn: messages must be a non-empty list of messages ({\"role\": ..., \"content\": ...}), "
                            f"got {type(messages).__name__}")
        for j, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise UserError(f"Turn: message {j} must be a dict with a 'role' string")
        try:
            json.dumps(list(messages))
        except (TypeError, ValueError) as e:
            raise UserError(f"Turn: messages are not JSON-serializable ({e})") from None
        if not isinstance(self.partial, str):
            raise UserError(f"Turn: partial must be a string, got {type(self.partial).__name__}")
        if isinstance(stop, str):
            stop = (stop,)
        if not isinstance(stop, Sequence) or not all(isinstance(x, str) and x for x in stop):
            raise UserError(f"Turn: stop must be a list of non-empty strings, got {stop!r}"[:300])
        m = self.max_tokens
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise UserError(f"Turn: max_tokens must be an integer >= 1 or None, got {m!r}")
        object.__setattr__(self, "messages", tuple(messages))
        object.__setattr__(self, "stop", tuple(stop))


@dataclass(frozen=True)
class PreparedTurn:
    """A turn as it is sent: the JSON body, and what of it keys the cache (``turn_key``)."""

    body: dict
    request: Any  # the rendered prompt (completions) or {"messages", "partial"} (chat)
    params: dict


@runtime_checkable
class LLMClient(Protocol):
    """What a component may call on the client an LLM backend makes (``context.llm(spec, ...)``,
    ``LLMSpec.factory``): ``model``, the model it asks; ``params``, the sampling parameters that
    are set (they key cached answers, with the model); ``generate``, as ``ChatClient.generate``.
    ``generate_cached`` and the listwise reranker need no more. A client that also has
    ``served_model()`` (as ``ChatClient``) has its cached answers keyed by the model its server
    reports serving, else by the model name alone."""

    model: str

    @property
    def params(self) -> dict[str, Any]: ...

    def generate(self, requests: list[list[dict]], *, on_result: Callable[[int, Generation], None] | None = None,
                 usage: Usage | None = None) -> list[Generation]: ...


@runtime_checkable
class ContinuesTurns(LLMClient, Protocol):
    """An ``LLMClient`` that extends assistant turns (``Turn``), as a search agent calls it, directly
    or through ``continue_cached``: ``ChatClient``'s ``mode``, ``base_url``, ``served_model``,
    ``prepare_turn``, ``send_prepared``, ``continue_turns`` and ``tokenizer``."""

    base_url: str

    @property
    def mode(self) -> str: ...

    def served_model(self) -> ServedModel: ...

    def prepare_turn(self, turn: Turn) -> PreparedTurn: ...

    def send_prepared(self, prepared: list[PreparedTurn], *,
                      on_result: Callable[[int, Generation], None] | None = None,
                      usage: Usage | None = None) -> list[Generation]: ...

    def continue_turns(self, turns: Sequence[Turn], *, on_result: Callable[[int, Generation], None] | None = None,
                       usage: Usage | None = None) -> list[Generation]: ...

    def tokenizer(self) -> Any: ...


class _OneAtATime:
    """Answers handed to ``on_result`` (and counted in ``usage``) one call at a time, in the order
    they arrive, without a worker waiting for another's call: a worker whose answer arrives while
    another's is being handed over queues it and goes on to its next request; the worker handing
    over hands over everything queued before it goes on (so every answer is handed over before
    ``map_concurrently`` returns or re-raises). A slow ``on_result`` (the generation cache's fsynced
    append) then delays one worker, not all of them. An ``on_result`` that raises does not stop the
    others' answers being handed over; the worker handing over raises the first error after."""

    def __init__(self, on_result: Callable[[int, Generation], None] | None, usage: Usage | None) -> None:
        self.on_result, self.usage = on_result, usage
        self._queued: collections.deque[tuple[int, Generation]] = collections.deque()
        self._lock = threading.Lock()
        self._busy = False  # a worker is handing answers over

    def __call__(self, i: int, generation: Generation) -> None:
        if self.on_result is None and self.usage is None:
            return
        with self._lock:
            self._queued.append((i, generation))
            if self._busy:
                return
            self._busy = True
        error: BaseException | None = None
        while True:
            with self._lock:
                if not self._queued:
                    self._busy = False
                    break
                j, answer = self._queued.popleft()
            try:
                if self.usage is not None:
                    self.usage.add(answer)
                if self.on_result is not None:
                    self.on_result(j, answer)
            except BaseException as e:  # the rest are still handed over, as each worker's own were
                error = error or e
        if error is not None:
            raise error


class ChatClient(Endpoint):
    """Chat completions from an OpenAI-compatible API (OpenAI, vLLM, Ollama, any ``base_url``: an
    ``Endpoint``), through the ``openai`` SDK (``post``, sending what ``chat.completions.create`` would;
    built by ``openai_client``).

    The request is ``model`` and ``messages`` plus each of ``temperature``, ``top_p``,
    ``max_tokens``, ``seed`` that is not None (OpenAI's o-series and gpt-5 get ``max_tokens`` as
    ``max_completion_tokens``, the only name they accept). ``base_url`` defaults to
    ``openai_base_url()``. ``Authorization: Bearer $api_key_env`` is sent when that variable is
    set, no header otherwise; on the OpenAI API (``api.openai.com``) it must be set.

    Retries (``APICaller`` with ``retry``: a ``RetryPolicy``, default ``DEFAULT_RETRY``, with each
    of ``max_retries``, ``backoff``, ``backoff_max``, ``retry_after_max``, ``sleep`` that is given): HTTP
    408/429/5xx, timeouts, connection errors and unusable answers (not JSON, no choices, empty or
    null content) are retried up to ``max_retries`` times, waiting ``min(backoff_max, backoff *
    2**(n-1))`` s times 0.5..1, or the server's ``Retry-After`` (at most ``retry_after_max``); then
    a one-line ``UserError`` naming the endpoint, the model, the last failure and what to do.
    Other 4xx and 3xx fail at once (401: "check $api_key_env"; redirects are never followed).

    ``top_k`` and ``repetition_penalty`` are vLLM's (sent as extra body keys when set; OpenAI refuses them).

    Continued turns (``continue_turns``, ``Turn``; search agents) go one of two ways:

    - chat mode (``template`` None): ``POST {base_url}/chat/completions`` with the partial text as
      a final assistant message and vLLM's ``continue_final_message: true, add_generation_prompt:
      false`` (a turn not yet started is an ordinary request). Needs a server that continues a
      final message (vLLM; OpenAI refuses it, Ollama ignores it). The server renders the partial:
      transformers' chat templating strips its trailing whitespace;
    - completions mode (``template``: a tokenizer folder or hub id, already downloaded): the chat
      template is rendered here (``AutoTokenizer.from_pretrained(template, local_files_only=True)``,
      loaded on first use; ``apply_chat_template(messages, add_generation_prompt=True)`` + the
      partial, exactly) and ``POST {base_url}/completions`` sends that prompt. ``max_tokens`` must
      be set (vLLM's ``/completions`` stops after 16 tokens otherwise).
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float | None = None, top_p: float | None = None, max_tokens: int | None = None,
                 seed: int | None = None, concurrency: int = 8, max_retries: int | None = None,
                 timeout: float = 600.0, sleep: Callable[[float], None] | None = None, backoff: float | None = None,
                 backoff_max: float | None = None, retry_after_max: float | None = None,
                 retry: RetryPolicy | None = None, top_k: int | None = None,
                 repetition_penalty: float | None = None, template: str | os.PathLike | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise UserError(f"ChatClient: model must be a non-empty string, got {model!r}")
        self.model = model.strip()
        super().__init__(check_base_url(base_url or openai_base_url(), "ChatClient", VLLM_BASE_URL),
                         api_key_env=api_key_env, timeout=timeout, retry=retry, max_retries=max_retries,
                         backoff=backoff, backoff_max=backoff_max, retry_after_max=retry_after_max, sleep=sleep)
        self.url = endpoint_url(self.base_url, "chat/completions")
        self.temperature, self.top_p, self.max_tokens, self.seed = temperature, top_p, max_tokens, seed
        self.top_k, self.repetition_penalty = top_k, repetition_penalty
        if template is not None and not isinstance(template, (str, os.PathLike)):
            raise UserError(f"ChatClient: template must be a tokenizer folder or hub id, got {type(template).__name__}")
        self.template = os.fspath(template).strip() if template is not None else None
        if self.template == "":
            raise UserError("ChatClient: template must be a tokenizer folder or hub id, got an empty string")
        self._tokenizer: Any = None
        self._tokenizer_lock = threading.Lock()
        self.concurrency = concurrency
        self._served: ServedModel | None = None
        self._served_lock = threading.Lock()
        self._served_memo: dict | None = None  # a run's (share_served)
        self._check_options()

    def __repr__(self) -> str:
        params = "".join(f", {k}={v!r}" for k, v in self.params.items())
        template = f", template={redact(self.template)!r}" if self.template is not None else ""
        return (f"ChatClient({self.shown_model!r}, base_url={show_url(self.base_url)!r}, "
                f"api_key_env={self.api_key_env!r}{params}{template})")

    @property
    def mode(self) -> str:
        """How turns are continued: "completions" with a ``template``, else "chat"."""
        return "completions" if self.template is not None else "chat"

    @property
    def shown_model(self) -> str:
        """``model`` as messages show it (``redact``: a spec's ``#m?pwd=...`` is masked)."""
        return redact(self.model)

    def _check_options(self) -> None:
        def number(name: str, low: float, high: float) -> None:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not low <= value <= high):
                raise UserError(f"ChatClient: {name} must be a number in [{low:g}, {high:g}] or None, got {value!r}")

        number("temperature", 0, 2)
        number("top_p", 0, 1)
        for name, low in (("max_tokens", 1), ("seed", None), ("top_k", -1), ("concurrency", 1)):
            value = getattr(self, name)
            if name in ("max_tokens", "seed", "top_k") and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
                what = "an integer" if low is None else f"an integer >= {low}"
                raise UserError(f"ChatClient: {name} must be {what}, got {value!r}")
        penalty = self.repetition_penalty
        if penalty is not None and (isinstance(penalty, bool) or not isinstance(penalty, (int, float))
                                    or not 0 < penalty < float("inf")):
            raise UserError(f"ChatClient: repetition_penalty must be a number > 0 or None, got {penalty!r}")
        self.check_endpoint("ChatClient")

    @property
    def params(self) -> dict[str, Any]:
        """The sampling parameters that are set (None ones left out), as sent and as cache-keyed."""
        return normalize_params({name: getattr(self, name) for name in SAMPLING_PARAMS})

    @property
    def needs_key(self) -> bool:
        """True on the OpenAI API itself: there a missing key is an error rather than no header."""
        return (urlsplit(self.base_url).hostname or "").lower() == "api.openai.com"

    def body(self, messages: list[dict], params: dict[str, Any] | None = None) -> dict:
        """The JSON body sent for one chat request (``params``: instead of the client's)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        for name, value in (self.params if params is None else params).items():
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
        requests = check_messages(requests, "ChatClient.generate")
        if not requests:
            return []
        return self._send_all([self.body(messages) for messages in requests], "chat",
                              lambda payload: parse_chat_completion(payload, self.model),
                              lambda body, status, message: self._client_error(status, message),
                              on_result=on_result, usage=usage)

    # -- continued turns ---------------------------------------------------------------------------
    def continue_turns(self, turns: Sequence[Turn], *, on_result: Callable[[int, Generation], None] | None = None,
                       usage: Usage | None = None) -> list[Generation]:
        """Extend each ``Turn``'s assistant text until one of its stop strings (or the end of the
        turn, or ``max_tokens``); the answers (``Generation``: the new text only, without the stop
        string; ``stop``: which stop string ended it; ``finish_reason``), in input order. Sent as
        ``generate`` sends (``concurrency`` at a time, the same retries and errors, ``on_result`` and
        ``usage`` the same way), by this client's ``mode`` (see the class). A server refusing to
        continue a final assistant message (chat mode) is a ``UserError`` saying to give
        ``template=`` or use vLLM."""
        prepared = [self.prepare_turn(turn) for turn in check_turns(turns, "ChatClient.continue_turns")]
        return self.send_prepared(prepared, on_result=on_result, usage=usage)

    def prepare_turn(self, turn: Turn) -> PreparedTurn:
        """``turn`` as this client sends it: its JSON body (the chat template rendered here in
        completions mode), and the request and params that key it in the cache."""
        params = self.params
        if turn.max_tokens is not None:
            params["max_tokens"] = turn.max_tokens
        if self.mode == "completions":
            if "max_tokens" not in params:
                raise UserError(f"ChatClient for {self.shown_model} renders turns with template= and sends them to "
                                "/completions, which stops after 16 tokens unless told: set max_tokens (on the "
                                "client or the Turn)")
            prompt = self.render(turn)
            body: dict[str, Any] = {"model": self.model, "prompt": prompt, **params}
            request: Any = prompt
        else:
            messages = [dict(m) for m in turn.messages]
            if turn.partial:
                messages.append({"role": "assistant", "content": turn.partial})
            body = self.body(messages, params)
            if turn.partial:
                body.update(continue_final_message=True, add_generation_prompt=False)
            request = {"messages": [dict(m) for m in turn.messages], "partial": turn.partial}
        if turn.stop:
            body["stop"] = list(turn.stop)
        return PreparedTurn(body, request, params)

    def render(self, turn: Turn) -> str:
        """The completions-mode prompt of ``turn``: the ``template`` tokenizer's chat template applied
        to its messages with the generation prompt, then its partial text, verbatim."""
        tokenizer = self._load_tokenizer()
        shown = redact(self.template or "")
        try:
            prompt = tokenizer.apply_chat_template([dict(m) for m in turn.messages], tokenize=False,
                                                   add_generation_prompt=True)
        except Exception as e:  # jinja errors, a tokenizer without a template: the user's to fix
            if getattr(tokenizer, "chat_template", None) is None:
                raise UserError(f"ChatClient: the tokenizer at template={shown!r} has no chat template; give the "
                                "model's own tokenizer (its tokenizer_config.json or chat_template.jinja holds "
                                "one)") from None
            raise UserError(f"ChatClient: the chat template of template={shown!r} failed on a turn's messages "
                            f"({scrub(reason(e), limit=200)})") from None
        if not isinstance(prompt, str):
            raise UserError(f"ChatClient: the chat template of template={shown!r} did not render text "
                            f"(got {type(prompt).__name__})")
        return prompt + turn.partial

    def tokenizer(self):
        """The ``template`` tokenizer (loaded once, offline), or None without one: for an agent that
        counts or cuts tokens as its reference does."""
        return self._load_tokenizer() if self.template is not None else None

    def _load_tokenizer(self):
        with self._tokenizer_lock:
            if self._tokenizer is None:
                if self.template is None:
                    raise UserError("ChatClient: rendering a chat template needs template= (a tokenizer folder "
                                    "or hub id)")
                try:
                    from transformers import AutoTokenizer

                    self._tokenizer = AutoTokenizer.from_pretrained(self.template, local_files_only=True)
                except Exception as e:
                    raise UserError(f"ChatClient: cannot load the tokenizer template={redact(self.template)!r} "
                                    f"({scrub(reason(e), limit=160)}); give a local tokenizer folder or a hub id "
                                    "already downloaded (it is loaded offline)") from None
            return self._tokenizer

    def send_prepared(self, prepared: list[PreparedTurn], *,
                      on_result: Callable[[int, Generation], None] | None = None,
                      usage: Usage | None = None) -> list[Generation]:
        """Turns ``prepare_turn`` made, sent as ``continue_turns`` sends them (``continue_cached``
        keys them before sending what its cache lacks)."""
        if not prepared:
            return []
        mode = self.mode
        return self._send_all([p.body for p in prepared], mode,
                              lambda payload: parse_continuation(payload, self.model, mode),
                              self._turn_client_error, on_result=on_result, usage=usage)

    def _turn_client_error(self, body: dict, status: int, message: str) -> str | None:
        """Advice for a refused turn: a chat request continuing a final message (``body``) that the
        server refuses, for no reason ``_client_error`` knows, is taken for a server without
        ``continue_final_message``."""
        fix = self._client_error(status, message)
        if fix is None and status in (400, 422) and body.get("continue_final_message"):
            return ("if it does not continue a partial assistant message (vLLM's continue_final_message), serve "
                    "the model with vLLM or give ChatClient template= (the model's tokenizer folder or hub id) to "
                    "render the chat template here and use /completions")
        return fix

    def _send_all(self, bodies: list[dict], endpoint: str, parse: Callable[[bytes], Generation],
                  client_error: Callable[[dict, int, str], str | None], *,
                  on_result: Callable[[int, Generation], None] | None, usage: Usage | None) -> list[Generation]:
        """``bodies`` to ``{base_url}/chat/completions`` (``endpoint`` "chat") or ``/completions``,
        ``concurrency`` at a time, each retried by an ``APICaller`` (``client_error(body, status,
        message)``: the advice for its refusal); answers in input order."""
        url = self.url if endpoint == "chat" else endpoint_url(self.base_url, "completions")
        key = self.key(required=self.needs_key, who=f"ChatClient for {self.shown_model} at {show_url(url)}")
        what = "chat completions" if endpoint == "chat" else "completions"

        def caller(body: dict) -> APICaller:
            return self.caller(url, model=self.model,
                               malformed_advice=f"check that base_url serves an OpenAI-compatible {what} API",
                               client_error=lambda status, message: client_error(body, status, message), logger=log)

        client = self.sdk(key)
        headers = no_auth_header(key)
        options = {"headers": headers} if headers else {}
        path = "/chat/completions" if endpoint == "chat" else "/completions"
        deliver = _OneAtATime(on_result, usage)

        def send(body: dict) -> bytes:
            # the SDK's own request (auth, headers, timeout, errors), the body as built here: what
            # chat.completions.create sends (the same JSON object; tested), without its
            # per-request walk of the typed parameters (a third of the SDK's time per request)
            return client.post(path, cast_to=bytes, body=body, options=options)

        def run(i: int, abort: threading.Event) -> Generation:
            started = time.monotonic()
            generation = caller(bodies[i]).call(lambda: send(bodies[i]), parse, key=key, abort=abort)
            generation = replace(generation, seconds=time.monotonic() - started)
            deliver(i, generation)
            return generation

        return map_concurrently(run, range(len(bodies)), self.concurrency, name="ChatClient", finish_running=True)

    def served_model(self) -> ServedModel:
        """The model the server says it serves under ``model`` (``GET {base_url}/models``), asked once
        per client, or once per run where the run shares its memo (``share_served``), and remembered;
        what keys this client's cached answers. A failure to ask is remembered too: the run's other
        clients fail at once with the same line instead of asking again.

        - the entry whose ``id`` is ``model`` (Ollama's ``NAME:latest`` for a bare ``NAME``): its
          ``id``, and vLLM's ``root`` (the weights it loaded) and ``parent`` (a LoRA's base model);
        - HTTP 401/403: a one-line ``UserError`` naming the endpoint and the key variable (nothing
          is sent or reused); other failures are retried as chat requests are, then a ``UserError``;
        - no such route (HTTP 404, 405, 410, 501) or an answer that is not a model list: the model name alone,
          as before, with the reason in ``ServedModel.reason`` (and an INFO log record);
        - a list without ``model``: the model name, marked unlisted (so never the answers of a
          server that did report it), with the reason likewise.
        """
        with self._served_lock:
            if self._served is None:
                memo, key = self._served_memo, (self.base_url, self.model, self.api_key_env)
                with _MEMO_LOCK:
                    known = memo.get(key) if memo is not None else None
                if isinstance(known, UserError):  # asked once this run, and it failed: fail at once
                    raise UserError(str(known))
                if known is None:
                    try:
                        known = self._ask_served_model()
                    except UserError as e:
                        if memo is not None:
                            with _MEMO_LOCK:
                                memo[key] = e
                        raise
                    if known.reason:
                        log.info("%s: %s", self.shown_model, known.reason)
                    if memo is not None:
                        with _MEMO_LOCK:
                            memo[key] = known
                self._served = known
            return self._served

    def share_served(self, memo: dict) -> None:
        """Remember what the server said it serves (or that asking failed) in ``memo``, a run's
        (``Context.served``): every client of the run for the same endpoint, model and key variable
        asks ``GET /models`` once, and after a failure none asks again."""
        self._served_memo = memo

    def _ask_served_model(self) -> ServedModel:
        url = endpoint_url(self.base_url, "models")
        key = self.key(required=self.needs_key, who=f"ChatClient for {self.shown_model} at {show_url(self.base_url)}")

        def refused(status: int, message: str) -> str | None:
            if status in NO_MODEL_LIST:
                raise _NoModelList(f"HTTP {status}")
            return None

        caller = self.caller(url, model=self.model,
                             malformed_advice="check that base_url serves an OpenAI-compatible API",
                             client_error=refused, logger=log)
        client = self.sdk(key)
        headers = no_auth_header(key)

        def send() -> bytes:
            return client.models.with_raw_response.list(extra_headers=headers).http_response.content

        shown = show_url(url)
        try:
            cards = caller.call(send, _model_cards, key=key)
        except _NoModelList as e:
            return ServedModel(self.model, reason=f"{shown} gave no model list ({e}); cached answers are "
                                                  "matched by the model name alone")
        names = [self.model] + ([f"{self.model}:latest"] if ":" not in self.model else [])
        for name in names:
            card = next((c for c in cards if c.get("id") == name), None)
            if card is not None:
                return ServedModel(self.model, id=name, root=_str_or_none(card.get("root")),
                                   parent=_str_or_none(card.get("parent")))
        listed = ", ".join(sorted(str(c.get("id")) for c in cards)[:5]) or "none"
        return ServedModel(self.model, unlisted=True,
                           reason=f"{shown} does not list {self.shown_model} (it lists: {scrub(listed, key, 200)}); "
                                  "cached answers are matched by the model name (never those of a server that "
                                  "lists it)")

    def _client_error(self, status: int, message: str) -> str | None:
        """Advice for a refused request (not retried); None leaves it to ``default_fix``."""
        if status in (400, 413, 422) and _CONTEXT_ERROR.search(message):
            return (f"the prompt plus max_tokens exceed {self.shown_model}'s context: shorten the prompt or "
                    "lower max_tokens")
        if status in (400, 422):
            for name in (*SAMPLING_PARAMS, "max_completion_tokens"):
                if name in message and re.search(r"unsupported|not support|unrecognized", message, re.I):
                    return f"{self.shown_model} does not take {name} as set: change it or leave it unset"
        return None
