"""Which model a server serves under a requested name (``GET /models``): what keys cached answers.
A request of its own, with its own failures: a server without the route is no error."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from .endpoint import Endpoint, endpoint_url
from .secrets import redact, scrub, show_url

NO_MODEL_LIST = (404, 405, 410, 501)  # the server has no model list (never retried)


class _NoModelList(Exception):
    """``GET /models`` is not there or answers something else than a model list."""


def _model_cards(payload: bytes) -> list[dict]:
    """The model cards of a ``GET /models`` answer."""
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
    """What a server says it serves under the requested name: vLLM adds ``root`` (the weights) and
    ``parent`` (a LoRA's base model). ``unlisted``: the server lists models, not this one."""

    requested: str
    id: str | None = None
    root: str | None = None
    parent: str | None = None
    unlisted: bool = False
    reason: str | None = None

    def key(self) -> dict[str, Any] | None:
        """The part of a cache key that stands for the server's model; None when unknown."""
        if self.id is not None:
            return {"id": self.id, "root": self.root, "parent": self.parent}
        return {"unlisted": True} if self.unlisted else None

    def identity(self) -> dict[str, Any] | None:
        """What a result's identity holds of this serving: :meth:`key`, the generation cache's notion
        of the same model, left out (None) where it says no more than the model's name, which the
        identity holds already (the name served as itself, or a server without a model list)."""
        key = self.key()
        plain = ({"id": self.requested, "root": root, "parent": None} for root in (self.requested, None))
        return None if key is None or key in plain else key


def ask_served_model(endpoint: Endpoint, model: str, *, who: str, required: bool,
                     logger: logging.Logger) -> ServedModel:
    """What ``endpoint`` says it serves under ``model``: the entry whose ``id`` is ``model`` (Ollama
    lists a bare ``NAME`` as ``NAME:latest``). A server without a model list, or not listing
    ``model``, gives the name alone with the reason."""
    url = endpoint_url(endpoint.base_url, "models")
    key = endpoint.key(required=required, who=who)

    def refused(status: int, message: str) -> str | None:
        if status in NO_MODEL_LIST:
            raise _NoModelList(f"HTTP {status}")
        return None

    caller = endpoint.caller(url, model=model, malformed_advice="check that base_url serves an OpenAI-compatible API",
                             client_error=refused, logger=logger)
    get = endpoint.getter(key)

    def send() -> bytes:
        return get("/models")

    shown = show_url(url)
    try:
        cards = caller.call(send, _model_cards, key=key)
    except _NoModelList as e:
        return ServedModel(model, reason=f"{shown} gave no model list ({e}); cached answers are "
                                         "matched by the model name alone")
    names = [model] + ([f"{model}:latest"] if ":" not in model else [])
    for name in names:
        card = next((c for c in cards if c.get("id") == name), None)
        if card is not None:
            return ServedModel(model, id=name, root=_str_or_none(card.get("root")),
                               parent=_str_or_none(card.get("parent")))
    listed = ", ".join(sorted(str(c.get("id")) for c in cards)[:5]) or "none"
    return ServedModel(model, unlisted=True,
                       reason=f"{shown} does not list {redact(model)} (it lists: {scrub(listed, key, 200)}); "
                              "cached answers are matched by the model name (never those of a server that "
                              "lists it)")
