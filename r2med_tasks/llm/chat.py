"""The chat client for OpenAI, vLLM, Ollama or anything speaking the OpenAI chat API: many requests
from a small thread pool, answers in input order, and assistant turns continued until a stop string
(search agents)."""

from __future__ import annotations

import collections
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from ..errors import UserError
from .answers import Generation, parse_chat_completion, parse_continuation
from .endpoint import (
    VLLM_BASE_URL,
    APICaller,
    Endpoint,
    RetryPolicy,
    check_base_url,
    endpoint_url,
    map_concurrently,
    openai_base_url,
)
from .messages import (
    SAMPLING_PARAMS,
    THINKING_FIELDS,
    PreparedTurn,
    Turn,
    check_messages,
    check_turns,
    normalize_params,
    wire_params,
)
from .secrets import redact, show_url
from .served import ServedModel, ask_served_model
from .template import ChatTemplate
from .usage import Usage

log = logging.getLogger(__name__)

# OpenAI's reasoning models (o1, o3-mini, o4-mini, gpt-5...) reject "max_tokens" and take
# "max_completion_tokens" (which counts their hidden reasoning tokens too).
_COMPLETION_TOKENS_MODELS = re.compile(r"^(?:openai/)?(?:o\d|gpt-5)", re.I)
_CONTEXT_ERROR = re.compile(r"maximum (?:context|input) length|context_length_exceeded|context window", re.I)
_MEMO_LOCK = threading.Lock()


class _OneAtATime:
    """Hands answers to ``on_result`` one call at a time without making workers wait on one another:
    a slow ``on_result`` (the cache's fsynced append) delays one worker, not all. A worker whose
    answer arrives mid-hand-over queues it and moves on; the one handing over drains the queue, so
    every answer is handed over before ``map_concurrently`` returns, and raises the first error after."""

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
            except BaseException as e:  # the rest are still handed over
                error = error or e
        if error is not None:
            raise error


class ChatClient(Endpoint):
    """Chat completions from an OpenAI-compatible API, through the ``openai`` SDK. ``top_k`` and
    ``repetition_penalty`` are vLLM's (OpenAI refuses them). No key set: no ``Authorization`` header.

    Continued turns: chat mode sends the partial as a final assistant message with vLLM's
    ``continue_final_message`` (OpenAI refuses it, Ollama ignores it, and its trailing whitespace is
    stripped); completions mode (``template``) renders the chat template here, partial exact.

    ``thinking`` (True/False) switches a hybrid reasoning model's thinking on or off through its chat
    template (``enable_thinking``: Qwen3 on vLLM or SGLang); ``thinking_budget`` bounds it in tokens
    where the server enforces one (vLLM's ``thinking_token_budget``). None: the server's default.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float | None = None, top_p: float | None = None, max_tokens: int | None = None,
                 seed: int | None = None, concurrency: int = 8, max_retries: int | None = None,
                 timeout: float = 600.0, sleep: Callable[[float], None] | None = None, backoff: float | None = None,
                 backoff_max: float | None = None, retry_after_max: float | None = None,
                 retry: RetryPolicy | None = None, top_k: int | None = None,
                 repetition_penalty: float | None = None, template: str | os.PathLike | None = None,
                 thinking: bool | None = None, thinking_budget: int | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise UserError(f"ChatClient: model must be a non-empty string, got {model!r}")
        self.model = model.strip()
        super().__init__(check_base_url(base_url or openai_base_url(), "ChatClient", VLLM_BASE_URL),
                         api_key_env=api_key_env, timeout=timeout, retry=retry, max_retries=max_retries,
                         backoff=backoff, backoff_max=backoff_max, retry_after_max=retry_after_max, sleep=sleep)
        self.url = endpoint_url(self.base_url, "chat/completions")
        self.temperature, self.top_p, self.max_tokens, self.seed = temperature, top_p, max_tokens, seed
        self.top_k, self.repetition_penalty = top_k, repetition_penalty
        self.thinking, self.thinking_budget = thinking, thinking_budget
        if template is not None and not isinstance(template, (str, os.PathLike)):
            raise UserError(f"ChatClient: template must be a tokenizer folder or hub id, got {type(template).__name__}")
        self.template = os.fspath(template).strip() if template is not None else None
        if self.template == "":
            raise UserError("ChatClient: template must be a tokenizer folder or hub id, got an empty string")
        self._chat_template = ChatTemplate(self.template) if self.template is not None else None
        self.concurrency = concurrency
        self._served: ServedModel | None = None
        self._served_lock = threading.Lock()
        self._served_memo: dict | None = None
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
        """``model`` with any secret in it masked, for messages."""
        return redact(self.model)

    def _check_options(self) -> None:
        def number(name: str, low: float, high: float) -> None:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not low <= value <= high):
                raise UserError(f"ChatClient: {name} must be a number in [{low:g}, {high:g}] or None, got {value!r}")

        number("temperature", 0, 2)
        number("top_p", 0, 1)
        if self.thinking is not None and not isinstance(self.thinking, bool):
            raise UserError(f"ChatClient: thinking must be True, False or None, got {self.thinking!r}")
        for name, low in (("max_tokens", 1), ("seed", None), ("top_k", -1), ("concurrency", 1),
                          ("thinking_budget", 0)):
            value = getattr(self, name)
            if name in ("max_tokens", "seed", "top_k", "thinking_budget") and value is None:
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
        """The sampling parameters that are set, as sent and as cache-keyed."""
        return normalize_params({name: getattr(self, name) for name in SAMPLING_PARAMS})

    @property
    def needs_key(self) -> bool:
        """True on the OpenAI API itself: there a missing key is an error rather than no header."""
        return (urlsplit(self.base_url).hostname or "").lower() == "api.openai.com"

    def body(self, messages: list[dict], params: dict[str, Any] | None = None) -> dict:
        """The JSON body sent for one chat request (``params``: instead of the client's)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        for name, value in wire_params(self.params if params is None else params).items():
            if name == "max_tokens" and _COMPLETION_TOKENS_MODELS.match(self.model):
                name = "max_completion_tokens"
            body[name] = value
        return body

    def generate(self, requests: list[list[dict]], *, on_result: Callable[[int, Generation], None] | None = None,
                 usage: Usage | None = None) -> list[Generation]:
        """One completion per messages list, in input order. ``on_result`` sees each answer as it
        arrives (one call at a time), so a cache keeps what came before a failure; the first request
        that fails for good raises once the requests in flight have ended."""
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
        """Extend each turn's assistant text until one of its stop strings; each answer is the new
        text only, with the stop string that ended it. Sent as ``generate`` sends."""
        prepared = [self.prepare_turn(turn) for turn in check_turns(turns, "ChatClient.continue_turns")]
        return self.send_prepared(prepared, on_result=on_result, usage=usage)

    def prepare_turn(self, turn: Turn) -> PreparedTurn:
        """``turn``'s JSON body, and the request and params that key it in the cache."""
        params = self.params
        if turn.max_tokens is not None:
            params["max_tokens"] = turn.max_tokens
        if self.mode == "completions":
            if "max_tokens" not in params:
                raise UserError(f"ChatClient for {self.shown_model} renders turns with template= and sends them to "
                                "/completions, which stops after 16 tokens unless told: set max_tokens (on the "
                                "client or the Turn)")
            prompt = self.render(turn)  # thinking on or off in the template rendered here
            body: dict[str, Any] = {"model": self.model, "prompt": prompt,
                                    **wire_params({k: v for k, v in params.items() if k != "thinking"})}
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
        """The completions-mode prompt: the chat template with the generation prompt, then the partial."""
        if self._chat_template is None:
            raise UserError("ChatClient: rendering a chat template needs template= (a tokenizer folder or hub id)")
        return self._chat_template.render(turn, thinking=self.thinking)

    def tokenizer(self):
        """The ``template`` tokenizer, or None: for an agent that counts or cuts tokens as its reference does."""
        return self._chat_template.tokenizer() if self._chat_template is not None else None

    def send_prepared(self, prepared: list[PreparedTurn], *,
                      on_result: Callable[[int, Generation], None] | None = None,
                      usage: Usage | None = None) -> list[Generation]:
        """Send turns already prepared (the cache keys them first, and sends only what it lacks)."""
        if not prepared:
            return []
        mode = self.mode
        return self._send_all([p.body for p in prepared], mode,
                              lambda payload: parse_continuation(payload, self.model, mode),
                              self._turn_client_error, on_result=on_result, usage=usage)

    def _turn_client_error(self, body: dict, status: int, message: str) -> str | None:
        """A refusal of a continued final message, for no other known reason, is taken for a server
        without ``continue_final_message``."""
        fix = self._client_error(status, message)
        if fix is None and status in (400, 422) and body.get("continue_final_message"):
            return ("if it does not continue a partial assistant message (vLLM's continue_final_message), serve "
                    "the model with vLLM or give ChatClient template= (the model's tokenizer folder or hub id) to "
                    "render the chat template here and use /completions")
        return fix

    def _send_all(self, bodies: list[dict], endpoint: str, parse: Callable[[bytes], Generation],
                  client_error: Callable[[dict, int, str], str | None], *,
                  on_result: Callable[[int, Generation], None] | None, usage: Usage | None) -> list[Generation]:
        """``bodies`` to ``/chat/completions`` or ``/completions``, each retried; answers in input order."""
        url = self.url if endpoint == "chat" else endpoint_url(self.base_url, "completions")
        key = self.key(required=self.needs_key, who=f"ChatClient for {self.shown_model} at {show_url(url)}")
        what = "chat completions" if endpoint == "chat" else "completions"

        def caller(body: dict) -> APICaller:
            return self.caller(url, model=self.model,
                               malformed_advice=f"check that base_url serves an OpenAI-compatible {what} API",
                               client_error=lambda status, message: client_error(body, status, message), logger=log)

        post = self.poster(key)
        path = "/chat/completions" if endpoint == "chat" else "/completions"
        deliver = _OneAtATime(on_result, usage)

        def run(i: int, abort: threading.Event) -> Generation:
            started = time.monotonic()
            generation = caller(bodies[i]).call(lambda: post(path, bodies[i]), parse, key=key, abort=abort)
            generation = replace(generation, seconds=time.monotonic() - started)
            deliver(i, generation)
            return generation

        return map_concurrently(run, range(len(bodies)), self.concurrency, name="ChatClient", finish_running=True)

    def served_model(self) -> ServedModel:
        """The model the server says it serves (``GET /models``): what keys this client's cached
        answers. Asked once per run where the run shares its memo; a failure is remembered too, so
        the run's other clients fail at once instead of asking again."""
        with self._served_lock:
            if self._served is None:
                memo, key = self._served_memo, (self.base_url, self.model, self.api_key_env)
                with _MEMO_LOCK:
                    known = memo.get(key) if memo is not None else None
                if isinstance(known, UserError):  # asked once this run, and it failed: fail at once
                    raise UserError(str(known))
                if known is None:
                    try:
                        who = f"ChatClient for {self.shown_model} at {show_url(self.base_url)}"
                        known = ask_served_model(self, self.model, who=who, required=self.needs_key, logger=log)
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
        """Share the run's memo of ``GET /models`` answers (and failures) among its clients."""
        self._served_memo = memo

    def _client_error(self, status: int, message: str) -> str | None:
        """Advice for a refused request (not retried); None leaves it to ``default_fix``."""
        if status in (400, 413, 422) and _CONTEXT_ERROR.search(message):
            return (f"the prompt plus max_tokens exceed {self.shown_model}'s context: shorten the prompt or "
                    "lower max_tokens")
        if status in (400, 422):
            sent_as = {THINKING_FIELDS.get(name, name): name for name in SAMPLING_PARAMS}
            for name in (*sent_as, "max_completion_tokens"):
                if name in message and re.search(r"unsupported|not support|unrecognized", message, re.I):
                    option = sent_as.get(name, name)
                    sent = f" (sent as {name})" if option != name else ""
                    return f"{self.shown_model} does not take {option} as set{sent}: change it or leave it unset"
        return None
