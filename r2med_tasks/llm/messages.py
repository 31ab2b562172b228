"""What a client is asked, checked as it arrives and normalized as it keys cached answers: the one
definition the client and the cache share."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from ..errors import UserError

SAMPLING_PARAMS = ("temperature", "top_p", "max_tokens", "seed", "top_k", "repetition_penalty", "thinking",
                   "thinking_budget")
THINKING_FIELDS = {"thinking": "chat_template_kwargs", "thinking_budget": "thinking_token_budget"}
"""The thinking controls and the body key each is sent as: vLLM's (and SGLang's) chat-template
arguments (Qwen3's ``enable_thinking``), and vLLM's budget of thinking tokens."""
EXTRA_BODY_PARAMS = frozenset({"top_k", "repetition_penalty", "continue_final_message", "add_generation_prompt",
                               *THINKING_FIELDS.values()})
"""vLLM's body keys, which the openai SDK's ``create`` has no argument for."""


def wire_params(params: dict[str, Any]) -> dict[str, Any]:
    """Sampling params as a request body holds them: ``thinking`` as the chat template's
    ``enable_thinking``, ``thinking_budget`` as ``thinking_token_budget``, the rest by their names."""
    out: dict[str, Any] = {}
    for name, value in params.items():
        if name == "thinking":
            out["chat_template_kwargs"] = {"enable_thinking": value}
        else:
            out[THINKING_FIELDS.get(name, name)] = value
    return out


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
        if set(map(type, chain.from_iterable(chain.from_iterable(m.items() for m in messages)))) == {str}:
            continue  # text only, as most requests are: serializable without encoding it once more
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


@dataclass(frozen=True)
class Turn:
    """One request to extend an assistant turn, as search agents do: generate until a stop string,
    append search results to the text, generate again from there. ``messages`` is the conversation
    before the turn, ``partial`` the assistant's text so far in it; ``max_tokens`` None is the
    client's."""

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
    request: Any  # the rendered prompt (completions mode) or {"messages", "partial"} (chat)
    params: dict
