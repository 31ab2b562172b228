"""The generation cache: one JSONL line per answer, fsynced as each answer arrives, so a killed run
keeps everything already paid for, and a rerun sends only what the cache lacks for the model the
server says it serves."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..files.journal import Journal
from .answers import Generation, token_count
from .messages import Turn, check_messages, check_turns, normalize_params
from .protocols import ContinuesTurns, LLMClient
from .secrets import redact, show_url
from .usage import Usage

log = logging.getLogger(__name__)


CACHE_VERSION = 2  # 2: keyed by the model the server reports serving


def key_for(model: str, messages: list[dict], params: dict[str, Any], served: dict[str, Any] | None = None) -> str:
    """sha256 of the canonical JSON of the request. ``served`` (what the server reported serving)
    keeps another checkpoint under the same name from reusing answers, while the base URL is left
    out so the same model elsewhere does reuse them. ASCII-escaped, so even a lone surrogate has
    its own bytes."""
    blob = json.dumps({"v": CACHE_VERSION, "model": model, "served": served, "messages": messages,
                       "params": normalize_params(dict(params))},
                      sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def turn_key(model: str, mode: str, request: Any, stop: Sequence[str], params: dict[str, Any],
             served: dict[str, Any] | None = None) -> str:
    """The cache key of a continued turn, encoded as ``key_for`` encodes but with its own fields,
    so it never equals a ``key_for`` key."""
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
    """Answers by request key, in an append-only journal: a line holds a ``Generation``'s fields and
    nothing else (no API key, no prompt). A line cut by a kill is dropped and its request sent
    again; the last line of a key wins. Read once: another process's later lines are not seen.
    """

    key_for = staticmethod(key_for)

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._journal = Journal(self.path, "the generation cache")
        self._entries: dict[str, Generation] = {}
        records, self.skipped, _ = self._journal.read()
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
        record = {"key": key, **vars(generation)}  # its fields are plain values: no deep copy
        # fields at their default are left out, so older lines and new ones read alike
        if record["stop"] is None:
            del record["stop"]
        if not record["reasoning_tokens"]:
            del record["reasoning_tokens"]
        for name in ("reasoning", "seconds"):
            if record[name] is None:
                del record[name]
        if record["tokens_known"]:
            del record["tokens_known"]
        if "seconds" in record:
            record["seconds"] = round(record["seconds"], 3)
        self._journal.append([record])
        self._entries[key] = generation


def generate_cached(client: LLMClient, cache: GenerationCache, requests: list[list[dict]], *,
                    usage: Usage | None = None,
                    on_answer: Callable[[int, Generation], None] | None = None) -> list[Generation]:
    """``client.generate(requests)`` for what ``cache`` lacks, each answer stored as it arrives.
    The served model is asked first, before anything is reused (a client without ``served_model``
    is keyed by its model name alone); identical requests are sent once; ``on_answer`` sees cached
    answers first, so a component can write a query's record as it finishes."""
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
    """The answer of each key: from ``cache``, else from ``send`` (once per distinct key)."""
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
    """``client.continue_turns(turns)`` for what ``cache`` lacks, as ``generate_cached`` does."""
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
    """A backend's client as a component gets it (``context.llm``): answers come from the stage's
    cache when there, and every call is tallied in the stage's usage."""

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
        """One answer per list of chat messages; ``on_answer`` as each is had, cached ones first."""
        return generate_cached(self.client, self.cache, requests, usage=self.usage, on_answer=on_answer)

    def continue_turns(self, turns: Sequence[Turn]) -> list[Generation]:
        """Each assistant turn extended (the client must be a ``ContinuesTurns``)."""
        return continue_cached(self.client, self.cache, turns, usage=self.usage)

    def tokenizer(self) -> Any:
        """The model's tokenizer, where the client renders prompts itself."""
        return self.client.tokenizer()
