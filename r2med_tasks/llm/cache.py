"""The generation cache: ``GenerationCache(path)``, a JSONL journal, one line per answer, appended
(and fsynced) as each answer arrives, so a killed run keeps everything already paid for;
``key_for`` and ``turn_key`` its keys. ``generate_cached(client, cache, requests)`` asks the server
which model it serves (``ChatClient.served_model``, ``GET /models``), then sends only what the cache
lacks for that model; ``continue_cached(client, cache, turns)`` does the same for continued turns."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..files.journal import Journal
from .answers import Generation, token_count
from .messages import Turn, check_messages, check_turns, normalize_params
from .protocols import ContinuesTurns, LLMClient
from .secrets import redact, show_url
from .usage import Usage

log = logging.getLogger(__name__)


CACHE_VERSION = 2  # 2: keyed by the model the server reports serving (``ServedModel.key``)


def key_for(model: str, messages: list[dict], params: dict[str, Any], served: dict[str, Any] | None = None) -> str:
    """sha256 hex of the canonical JSON of ``{"v", "model", "served", "messages", "params"}``.

    ``served`` is what the server reported serving under ``model`` (``ServedModel.key()``: its
    ``id``, vLLM's ``root`` and ``parent``), None when it could not say: answers of another served
    model (another checkpoint under the same name, at another endpoint) are never reused, and the
    base URL itself is not part of the key (the same served model elsewhere reuses the answers).
    ``params`` are the sampling parameters, None ones dropped (``temperature=0`` and ``0.0`` agree);
    dict key order does not matter. JSON is one unambiguous encoding of the whole (no separator a
    text could hold), ASCII-escaped so even a lone surrogate has its own bytes.
    """
    blob = json.dumps({"v": CACHE_VERSION, "model": model, "served": served, "messages": messages,
                       "params": normalize_params(dict(params))},
                      sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def turn_key(model: str, mode: str, request: Any, stop: Sequence[str], params: dict[str, Any],
             served: dict[str, Any] | None = None) -> str:
    """The cache key of a continued turn (``continue_cached``): sha256 hex of the canonical JSON of
    ``{"v", "turn": mode, "model", "served", "request", "stop", "params"}``, as ``key_for`` encodes
    (its own field set, so never a ``key_for`` key). ``mode`` "chat" or "completions";
    ``request``: the rendered prompt (completions) or ``{"messages", "partial"}`` (chat);
    ``stop``: the stop strings, in order; ``params``: the sampling parameters with the turn's
    ``max_tokens``; ``served`` as for ``key_for``."""
    blob = json.dumps({"v": CACHE_VERSION, "turn": mode, "model": model, "served": served, "request": request,
                       "stop": list(stop), "params": normalize_params(dict(params))},
                      sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


_FIELDS = {"text": str, "prompt_tokens": int, "completion_tokens": int, "model": str}


def _entry(obj: dict) -> tuple[str, Generation] | None:
    """A journal record as (key, Generation), None when a field is missing or mistyped."""
    if not isinstance(obj.get("key"), str):
        return None
    for name, kind in _FIELDS.items():
        if not isinstance(obj.get(name), kind) or isinstance(obj.get(name), bool):
            return None
    finish, stop = obj.get("finish_reason"), obj.get("stop")
    if (finish is not None and not isinstance(finish, str)) or (stop is not None and not isinstance(stop, str)):
        return None
    reasoning, seconds = obj.get("reasoning"), obj.get("seconds")
    return obj["key"], Generation(text=obj["text"], prompt_tokens=obj["prompt_tokens"],
                                  completion_tokens=obj["completion_tokens"], finish_reason=finish,
                                  model=obj["model"], stop=stop, reasoning_tokens=token_count(obj.get("reasoning_tokens")),
                                  reasoning=reasoning if isinstance(reasoning, str) else None,
                                  seconds=float(seconds) if _finite_seconds(seconds) else None,
                                  tokens_known=obj.get("tokens_known") is not False)


def _finite_seconds(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value >= 0)


class GenerationCache:
    """Answers by request key, in an append-only journal (:class:`r2med_tasks.files.journal.Journal`).

    Each line is ``{"key": <key_for(...) or turn_key(...)>, "text", "prompt_tokens",
    "completion_tokens", "finish_reason", "model"}`` and each of ``"stop"``, ``"reasoning_tokens"``,
    ``"reasoning"`` (the thinking a server returned apart) and ``"seconds"`` (the request's) when set
    (the ``Generation`` fields; ``model`` is the model that answered) and nothing else: no key, no prompt. ``put``
    appends and fsyncs one line, so a killed run loses only the answer being written; a line that does not parse (the last one, cut by a kill; or garbage)
    is skipped with one warning and dropped from the file, and its request is sent again.
    When a key appears twice, the last line wins. The file is read once, at construction: lines
    another process appends later are not seen by this object.
    """

    key_for = staticmethod(key_for)

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._journal = Journal(self.path, "the generation cache")
        self._entries: dict[str, Generation] = {}
        records, self.skipped, _ = self._journal.read()  # skipped: lines that did not parse (the journal warns)
        for record in records:
            entry = _entry(record)
            if entry is None:
                self.skipped += 1
            else:
                self._entries[entry[0]] = entry[1]

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
        record = {"key": key, **asdict(generation)}
        if record["stop"] is None:
            del record["stop"]  # the lines of answers that are not continued turns stay as they were
        if not record["reasoning_tokens"]:
            del record["reasoning_tokens"]  # likewise for answers without reasoning tokens reported
        for name in ("reasoning", "seconds"):  # likewise for answers without their thinking apart, or not timed
            if record[name] is None:
                del record[name]
        if record["tokens_known"]:
            del record["tokens_known"]  # likewise: written only when the server's counts were not counts
        if "seconds" in record:
            record["seconds"] = round(record["seconds"], 3)
        self._journal.append([record])
        self._entries[key] = generation


def generate_cached(client: LLMClient, cache: GenerationCache, requests: list[list[dict]], *,
                    usage: Usage | None = None,
                    on_answer: Callable[[int, Generation], None] | None = None) -> list[Generation]:
    """``client.generate(requests)`` for what ``cache`` lacks, each answer stored as it arrives.

    First (before anything is reused or sent) the client is asked which model its server serves
    (``client.served_model()``, once per client; a 401 is the error, nothing is reused): requests
    are keyed by ``key_for(client.model, messages, client.params, served)``, so answers of another
    served model are not reused. A client without ``served_model`` (a plugin's own) is keyed by its
    model name alone. Identical requests in one call are sent once. ``usage`` (if given) counts the requests sent (and their tokens) and the
    cache hits; ``on_answer(i, generation)`` (if given) is called once per request as its answer is
    had, cached answers first (a component writes a query's record as it finishes). If the run fails, every answer received so far is already in the cache, so a rerun
    sends only the rest.
    """
    requests = check_messages(requests, "generate_cached")
    if not requests:
        return []
    params = client.params
    served = client.served_model().key() if callable(getattr(client, "served_model", None)) else None
    keys = [cache.key_for(client.model, messages, params, served) for messages in requests]
    return _through_cache(cache, keys, lambda indices, store: client.generate(
        [requests[i] for i in indices], on_result=store, usage=usage), usage=usage, on_answer=on_answer,
        log_line=lambda hits, sent: log.info("%s: %d answer(s) cached, %d request(s) to send to %s",
                                             redact(client.model), hits, sent,
                                             show_url(getattr(client, "url", "its endpoint"))))


def _through_cache(cache: GenerationCache, keys: list[str], send: Callable[[list[int], Callable], Any], *,
                   usage: Usage | None, log_line: Callable[[int, int], None],
                   on_answer: Callable[[int, Generation], None] | None = None) -> list[Generation]:
    """The answer of each key: from ``cache``, else from ``send(indices, store)`` (each request
    ``keys`` lacks, once per distinct key; ``store(j, generation)`` keeps the j-th answer as it
    arrives); ``usage`` counts the cache hits; ``on_answer(i, generation)``, once per request, as
    its answer is had (cached ones first)."""
    out: list[Generation | None] = [cache.get(k) for k in keys]
    to_send: list[int] = []
    first: dict[str, int] = {}
    same: dict[str, list[int]] = {}  # the requests of a key being sent
    for i, key in enumerate(keys):
        if out[i] is None:
            if key not in first:
                first[key] = i
                to_send.append(i)
            same.setdefault(key, []).append(i)
    hits = len(keys) - len(to_send)
    if usage is not None:
        usage.add_cached(hits)
    if on_answer is not None:
        for i, generation in enumerate(out):
            if generation is not None:
                on_answer(i, generation)
    if to_send:
        log_line(hits, len(to_send))

    def store(j: int, generation: Generation) -> None:
        i = to_send[j]
        cache.put(keys[i], generation)
        for k in same[keys[i]]:
            out[k] = generation
            if on_answer is not None:
                on_answer(k, generation)

    send(to_send, store)
    return out  # type: ignore[return-value]


def continue_cached(client: ContinuesTurns, cache: GenerationCache, turns: Sequence[Turn], *,
                    usage: Usage | None = None) -> list[Generation]:
    """``client.continue_turns(turns)`` for what ``cache`` lacks, each answer stored as it arrives,
    as ``generate_cached`` does: the served model is asked first (``client.served_model()``), each
    turn is keyed by ``turn_key(client.model, client.mode, request, turn.stop, params, served)``
    (the prompt rendered here in completions mode, the messages and partial text in chat mode; the
    sampling params with the turn's ``max_tokens``), identical turns in one call are sent once, and
    ``usage`` counts requests sent, their tokens and cache hits. A rerun sends nothing."""
    turns = check_turns(turns, "continue_cached")
    if not turns:
        return []
    prepared = [client.prepare_turn(turn) for turn in turns]
    served = client.served_model().key()
    keys = [turn_key(client.model, client.mode, p.request, turn.stop, p.params, served)
            for p, turn in zip(prepared, turns)]
    return _through_cache(cache, keys, lambda indices, store: client.send_prepared(
        [prepared[i] for i in indices], on_result=store, usage=usage), usage=usage,
        log_line=lambda hits, sent: log.info("%s: %d continuation(s) cached, %d request(s) to send to %s",
                                             redact(client.model), hits, sent, show_url(client.base_url)))


class CachedClient:
    """A backend's client as a component gets it (``Context.llm``): what it asks is answered from
    ``cache`` when there, else sent and each answer stored as it arrives, and every call is
    tallied in ``usage`` (requests sent, cache hits, tokens). One per ``context.llm`` call; the
    cache and the usage are the stage's, shared by its clients."""

    def __init__(self, client: LLMClient, cache: GenerationCache, usage: Usage) -> None:
        self.client, self.cache, self.usage = client, cache, usage

    def __repr__(self) -> str:
        return f"CachedClient({redact(self.client.model)!r}, {self.cache!r})"

    @property
    def model(self) -> str:
        return self.client.model

    @property
    def params(self) -> dict[str, Any]:
        return self.client.params

    def generate(self, requests: list[list[dict]],
                 on_answer: Callable[[int, Generation], None] | None = None) -> list[Generation]:
        """One answer per list of chat messages (``generate_cached``); ``on_answer(i, generation)``
        as each is had, cached ones first."""
        return generate_cached(self.client, self.cache, requests, usage=self.usage, on_answer=on_answer)

    def continue_turns(self, turns: Sequence[Turn]) -> list[Generation]:
        """Each assistant turn extended (``continue_cached``; the client must be a ``ContinuesTurns``)."""
        return continue_cached(self.client, self.cache, turns, usage=self.usage)

    def tokenizer(self) -> Any:
        """The model's tokenizer, where the client renders prompts itself (``ContinuesTurns``)."""
        return self.client.tokenizer()
