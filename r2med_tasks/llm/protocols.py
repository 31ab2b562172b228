"""What components call on an LLM backend's client, so a component depends on these calls, not on
``ChatClient``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from .answers import Generation
from .messages import PreparedTurn, Turn
from .served import ServedModel
from .usage import Usage

@runtime_checkable
class LLMClient(Protocol):
    """What a component may call on the client an LLM backend makes. ``params`` key cached answers,
    with the model; a client that also has ``served_model()`` is keyed by what its server reports
    serving instead of the model name."""

    model: str

    @property
    def params(self) -> dict[str, Any]: ...

    def generate(self, requests: list[list[dict]], *, on_result: Callable[[int, Generation], None] | None = None,
                 usage: Usage | None = None) -> list[Generation]: ...


@runtime_checkable
class ContinuesTurns(LLMClient, Protocol):
    """An ``LLMClient`` that extends assistant turns, as a search agent calls it."""

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
