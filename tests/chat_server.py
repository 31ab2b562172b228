"""A local stand-in for an OpenAI-compatible chat API (``POST <url>/chat/completions``, and vLLM's
``POST <url>/completions``), for offline tests.

Answers deterministically: the text is ``fake_answer(messages)`` ("echo:" + a hash of the last
user message), usage counts words. Every request is recorded (path, lower-cased headers, JSON
body). ``fail(mode, times)`` scripts the next requests; ``fail_after(k, mode)`` answers ``k`` more
requests normally, then fails every later one with ``mode`` (a server that goes down for good):

- ``"429"``: HTTP 429 with ``Retry-After`` (``retry_after=``, default "0")
- ``"500"``: HTTP 500 (with ``message=``)
- ``"401"``: HTTP 401 whose message echoes the key sent (as OpenAI echoes a masked one)
- ``"400"``: HTTP 400 with ``message=``
- ``"redirect"``: HTTP 307 to ``location=``
- ``"hang"``: no answer for ``hang_s`` seconds (or until ``stop()``), then a normal one
- ``"malformed"``: HTTP 200 with a body that is not JSON
- ``"empty_choices"``: HTTP 200 with ``"choices": []``
- ``"null_content"``: HTTP 200 with ``"content": null``
- ``"empty_content"``: HTTP 200 with ``"content": ""`` (``finish_reason=`` option, default "stop")

``delay``: seconds every request takes (until ``release()``, which lets every waiting answer go);
``delay_for(body) -> seconds`` per request (to see order under concurrency); ``overlap``: no answer
before that many requests were in flight at once (``wait_for_overlap``). ``served_model``: the
``model`` reported in answers (default: the one asked).
``connections``: how many connections clients opened; ``drop_idle``: each connection is closed
after its answer without a word (as an idle timeout closes a kept-alive one); ``gzip``: answers
are compressed whatever the client accepts.

Continued turns and stop strings, as vLLM does them:

- ``/chat/completions`` with ``continue_final_message: true`` continues the final message, which
  must be the assistant's, and needs ``add_generation_prompt: false`` (else HTTP 400, as vLLM);
  ``refuse_continue = True`` answers such requests HTTP 400 as OpenAI does (an unrecognized argument);
- ``/completions`` takes a ``prompt`` string and answers ``choices[0].text``;
- ``script``: a callable ``(context, partial) -> text`` writing what the model "generates": in chat,
  ``context`` is the messages before a continued assistant message and ``partial`` its content
  ("" when not continuing); in completions, ``context`` is the prompt (which ends with any partial)
  and ``partial`` is "". ``scripted`` records each ``(context, partial)`` it was called with;
- the generated text (``script``'s, else ``fake_answer(messages)`` / ``fake_completion(prompt)``)
  is cut before the first of the request's ``stop`` strings it holds (``finish_reason`` "stop",
  ``stop_reason`` that string), else after ``max_tokens`` words (``finish_reason`` "length";
  ``/completions`` defaults to 16, as vLLM), else it ends the turn (``stop_reason`` null);
  ``stop_reasons = False`` leaves ``stop_reason`` out, as OpenAI does. Usage counts words (the
  prompt's, and those generated including the stop string). A chat request with none of
  ``script``, ``stop`` or ``continue_final_message`` is answered as before (``COMPLETION_TOKENS``).

``GET <url>/models`` answers what the server serves, as vLLM does (``{"object": "list", "data":
[{"id", "object": "model", "owned_by", "root", "parent"}]}``): ``models``, a list of ``(id, root,
parent)`` (default one, ``test-model`` whose root is ``test-model``; ``serve(id, root, parent)``
replaces it); ``models_status``: 401 (the key is refused, as ``"401"`` above), 404 (no such route, as
servers without the list), another status (an error echoing the key) or None; ``models_body``: bytes
answered instead of the list (HTTP 200). These requests are recorded apart, in ``model_requests``
(``requests`` and ``count`` stay the chat requests), and take no scripted fault.

A reasoning parser, as vLLM's ``--reasoning-parser`` splits a chat answer (``reasoning_parser``:
None, ``"deepseek_r1"`` or ``"qwen3"``; ``reasoning_field``: ``"reasoning_content"``, as vLLM and
DeepSeek's API name it, or ``"reasoning"``, as newer vLLM and OpenRouter do): the generated text
(after the stop cut) is split by ``split_reasoning``, the thinking in that field and the rest in
``content`` (null when empty); ``/completions`` is never split, as in vLLM.

Usage as reported (the block at the end of ``ChatServer``): every answer's ``usage`` object is
recorded in ``reported``, as ``(request body, usage)``, so a test sums what the server reported;
``reasoning_tokens`` (an int, or ``callable(body) -> int``), when set, is reported in each answer as
OpenAI and vLLM's reasoning parsers report it, ``usage.completion_tokens_details.reasoning_tokens``;
``usage_values``, when set, replaces those fields of every answer's usage (a server's bad counts).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from typing import Any

from local_server import JSONHandler, LocalServer, Recorded


def last_user(messages: list[dict]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return message.get("content") if isinstance(message.get("content"), str) else json.dumps(message)
    return ""


def fake_answer(messages: list[dict]) -> str:
    return "echo:" + hashlib.sha256(last_user(messages).encode("utf-8")).hexdigest()[:16]


def fake_completion(prompt: str) -> str:
    return "echo:" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def prompt_tokens(messages: list[dict]) -> int:
    return sum(len(str(m.get("content", "")).split()) for m in messages)


def cut(text: str, stop: Any, max_tokens: Any) -> tuple[str, str | None, str, int]:
    """What a server returns of ``text`` generated under ``stop`` and ``max_tokens`` (words):
    ``(text, stop_reason, finish_reason, completion_tokens)``; the text stops before the stop string."""
    stops = [stop] if isinstance(stop, str) else [s for s in stop or () if isinstance(s, str) and s]
    words = text.split()
    limit = max_tokens if isinstance(max_tokens, int) and max_tokens >= 0 else None
    hits = [(text.find(s), s) for s in stops if s in text]
    if hits:
        at, first = min(hits)
        if limit is None or len((text[:at] + first).split()) <= limit:
            return text[:at], first, "stop", len((text[:at] + first).split())
    if limit is not None and len(words) > limit:
        kept = " ".join(words[:limit])
        return kept, None, "length", limit
    return text, None, "stop", len(words)


COMPLETION_TOKENS = 3


def split_reasoning(parser: str, text: str) -> tuple[str | None, str | None]:
    """``(reasoning, content)`` as vLLM's reasoning parsers split a model's output: ``deepseek_r1``
    drops a leading ``<think>``, and without ``</think>`` all is reasoning (the template opened the
    thought); ``qwen3`` splits only a text holding both tags, else all is content."""
    if parser == "deepseek_r1":
        before, tag, after = text.partition("<think>")
        text = after if tag else before
        if "</think>" not in text:
            return text, None
        reasoning, _, content = text.partition("</think>")
        return reasoning, content or None
    if parser == "qwen3":
        if "<think>" not in text or "</think>" not in text:
            return None, text
        reasoning, _, content = text.partition("<think>")[2].partition("</think>")
        return reasoning, content or None
    raise ValueError(f"unknown reasoning parser {parser!r}")


class ChatServer(LocalServer):
    def __init__(self, *, api_key: str | None = None) -> None:
        self.answered = 0
        self.delay_for: Callable[[Any], float] | None = None
        self.served_model: str | None = None
        self.models: list[tuple[str, str | None, str | None]] = [("test-model", "test-model", None)]
        self.models_status: int | None = None
        self.models_body: bytes | None = None
        self.model_requests: list[Recorded] = []
        self.script: Callable[[Any, str], str] | None = None
        self.scripted: list[tuple[Any, str]] = []
        self.refuse_continue = False
        self.stop_reasons = True
        self._down_after: tuple[int, str, dict] | None = None
        self.reported: list[tuple[Any, dict]] = []  # see "usage as reported" below
        self.reasoning_tokens: int | Callable[[Any], int] | None = None
        self.usage_values: dict | None = None  # replaces fields of every answer's usage (see "usage as reported")
        self.reasoning_parser: str | None = None
        self.reasoning_field = "reasoning_content"
        self.connections = 0  # opened by clients
        self.drop_idle = False  # close each connection after its answer, saying nothing (an idle timeout)
        self.gzip = False  # compress answers whatever the client accepts
        super().__init__(api_key)

    def fail_after(self, k: int, mode: str = "500", **options: Any) -> None:
        """Answer ``k`` more requests normally, then fail all later ones with ``mode``."""
        with self._lock:
            self._down_after = (self.answered + k, mode, options)

    def serve(self, model_id: str, root: str | None = None, parent: str | None = None) -> None:
        """``GET /models`` lists this one model."""
        self.models = [(model_id, root, parent)]

    def recover(self) -> None:
        with self._lock:
            self._faults.clear()
            self._down_after = None

    @property
    def count(self) -> int:
        return len(self.requests)

    def last_users(self) -> list[str]:
        """The last user message of every recorded request, in arrival order."""
        return [last_user(r.body["messages"]) for r in self.requests]

    # -- usage as reported ------------------------------------------------------------------------
    def _reported(self, payload: bytes, body: Any) -> bytes:
        """An answer as it goes out: its usage recorded (with reasoning tokens when scripted)."""
        try:
            answer = json.loads(payload)
        except ValueError:
            return payload
        if not isinstance(answer, dict) or not isinstance(answer.get("usage"), dict):
            return payload
        if self.reasoning_tokens is not None:
            n = self.reasoning_tokens(body) if callable(self.reasoning_tokens) else self.reasoning_tokens
            answer["usage"]["completion_tokens_details"] = {"reasoning_tokens": n}
            payload = json.dumps(answer).encode()
        if self.usage_values is not None:  # counts that are not counts, as a broken server reports them
            answer["usage"].update(self.usage_values)
            payload = json.dumps(answer).encode()
        with self._lock:
            self.reported.append((body, answer["usage"]))
        return payload

    def message(self, content: Any) -> dict:
        """A chat answer's message: ``content``, split by the reasoning parser when one is set."""
        if self.reasoning_parser is None or not isinstance(content, str):
            return {"role": "assistant", "content": content}
        reasoning, rest = split_reasoning(self.reasoning_parser, content)
        return {"role": "assistant", "content": rest, **({self.reasoning_field: reasoning} if reasoning else {})}

    # -- the handler -----------------------------------------------------------------------------
    def _handler(self):
        server = self

        class Handler(JSONHandler):
            fake = server
            protocol_version = "HTTP/1.1"
            _body: Any = None

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def _send(self, status: int, payload: bytes, headers: dict | None = None) -> None:
                if status == 200:  # "usage as reported"
                    payload = server._reported(payload, self._body)
                if server.gzip:
                    payload, headers = gzip.compress(payload), {**(headers or {}), "Content-Encoding": "gzip"}
                super()._send(status, payload, headers)
                if server.drop_idle:
                    self.close_connection = True

            def do_GET(self) -> None:  # noqa: N802
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.model_requests.append(Recorded(self.path, headers, None))
                auth = self.headers.get("Authorization", "")
                if not self.path.split("?")[0].endswith("/models") or server.models_status == 404:
                    return self._error(404, f"no route {self.path}")
                if server.models_status == 401 or (server.api_key is not None and auth != f"Bearer {server.api_key}"):
                    return self._error(401, f"Incorrect API key provided: {auth.removeprefix('Bearer ')}.")
                if server.models_status is not None:
                    return self._error(server.models_status, f"refused; key {auth.removeprefix('Bearer ')}")
                if server.models_body is not None:
                    return self._send(200, server.models_body)
                cards = [{"id": i, "object": "model", "created": 0, "owned_by": "test", "root": root,
                          **({"parent": parent} if parent else {})} for i, root, parent in server.models]
                self._send(200, json.dumps({"object": "list", "data": cards}).encode())

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                self._body = body  # "usage as reported"
                with server._lock:
                    server.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                    body))
                    if server._faults:
                        fault = server._faults.popleft()
                    elif server._down_after is not None and server.answered >= server._down_after[0]:
                        fault = server._down_after[1:]
                    else:
                        fault = (None, {})
                    if fault[0] is None:
                        server.answered += 1  # counted now, so fail_after is exact under concurrency
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    self._in_flight = True
                try:
                    server.wait_for_overlap()
                    delay = server.delay + (server.delay_for(body) if server.delay_for is not None else 0.0)
                    if delay:
                        server._released.wait(delay)
                    self._answer(body, *fault)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a "hang")
                finally:
                    self._leave()

            def _completion(self, body: dict, content: Any, finish_reason: str = "stop") -> None:
                messages = body["messages"]
                answer = {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                    "model": server.served_model or body.get("model"),
                    "choices": [{"index": 0, "message": server.message(content), "finish_reason": finish_reason}],
                    "usage": {"prompt_tokens": prompt_tokens(messages), "completion_tokens": COMPLETION_TOKENS,
                              "total_tokens": prompt_tokens(messages) + COMPLETION_TOKENS},
                }
                self._send(200, json.dumps(answer).encode())

            def _generated(self, context: Any, partial: str, default: str) -> str:
                if server.script is None:
                    return default
                with server._lock:
                    server.scripted.append((context, partial))
                return server.script(context, partial)

            def _choice_end(self, body: dict, text: str) -> tuple[str, dict, int]:
                text, stop_reason, finish, tokens = cut(text, body.get("stop"), body.get(
                    "max_tokens", body.get("max_completion_tokens", 16 if "prompt" in body else None)))
                end = {"finish_reason": finish, **({"stop_reason": stop_reason} if server.stop_reasons else {})}
                return text, end, tokens

            def _continuation(self, body: dict) -> None:
                messages = body["messages"]
                if body.get("continue_final_message"):
                    if server.refuse_continue:
                        return self._error(400, "Unrecognized request argument supplied: continue_final_message")
                    if body.get("add_generation_prompt", True):
                        return self._error(400, "Cannot set both `continue_final_message` and "
                                                "`add_generation_prompt` to True.")
                    if messages[-1].get("role") != "assistant" or not isinstance(messages[-1].get("content"), str):
                        return self._error(400, "continue_final_message: the final message is not an assistant's")
                    context, partial = messages[:-1], messages[-1]["content"]
                else:
                    context, partial = messages, ""
                text, end, tokens = self._choice_end(body, self._generated(context, partial, fake_answer(messages)))
                used = prompt_tokens(messages)
                answer = {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                    "model": server.served_model or body.get("model"),
                    "choices": [{"index": 0, "message": server.message(text), **end}],
                    "usage": {"prompt_tokens": used, "completion_tokens": tokens, "total_tokens": used + tokens},
                }
                self._send(200, json.dumps(answer).encode())

            def _text_completion(self, body: Any, mode: str | None, options: dict) -> None:
                prompt = body.get("prompt") if isinstance(body, dict) else None
                if not isinstance(prompt, str) or not prompt:
                    return self._error(400, "'prompt' must be a non-empty string")
                if mode == "empty_choices":
                    return self._send(200, json.dumps({"id": "x", "object": "text_completion", "choices": []}).encode())
                text, end, tokens = self._choice_end(body, self._generated(prompt, "", fake_completion(prompt)))
                if mode == "null_content":
                    text = None
                elif mode == "empty_content":
                    text, end = "", {"finish_reason": options.get("finish_reason", "length")}
                used = len(prompt.split())
                answer = {
                    "id": "cmpl-test", "object": "text_completion", "created": 0,
                    "model": server.served_model or body.get("model"),
                    "choices": [{"index": 0, "text": text, "logprobs": None, **end}],
                    "usage": {"prompt_tokens": used, "completion_tokens": tokens, "total_tokens": used + tokens},
                }
                self._send(200, json.dumps(answer).encode())

            def _answer(self, body: Any, mode: str | None, options: dict) -> None:
                auth = self.headers.get("Authorization", "")
                path = self.path.split("?")[0]
                if not path.endswith("/completions"):
                    return self._error(404, f"no route {self.path}")
                if mode == "401" or (server.api_key is not None and auth != f"Bearer {server.api_key}"):
                    return self._error(401, f"Incorrect API key provided: {auth.removeprefix('Bearer ')}. "
                                            "You can find your API key at https://example.invalid.")
                if mode == "429":
                    return self._error(429, "Rate limit reached", {"Retry-After": str(options.get("retry_after", "0"))})
                if mode == "500":
                    return self._error(500, options.get("message", "The server had an error while processing "
                                                                   "your request."))
                if mode == "400":
                    return self._error(400, options.get("message", "bad request"))
                if mode == "redirect":
                    return self._error(307, "moved", {"Location": options["location"]})
                if mode == "hang":
                    server._stopping.wait(options.get("hang_s", server.hang_s))
                if mode == "malformed":
                    return self._send(200, b'{"id": "chatcmpl-test", "choices": [')
                if not path.endswith("/chat/completions"):
                    return self._text_completion(body, mode, options)
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
                    return self._error(400, "'messages' must be a non-empty list")
                if mode == "empty_choices":
                    return self._send(200, json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode())
                if mode == "null_content":
                    return self._completion(body, None)
                if mode == "empty_content":
                    return self._completion(body, "", options.get("finish_reason", "stop"))
                if server.script is not None or body.get("stop") or "continue_final_message" in body:
                    return self._continuation(body)
                return self._completion(body, fake_answer(body["messages"]))

        return Handler
