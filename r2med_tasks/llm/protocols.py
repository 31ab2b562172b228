"""What components call on an LLM backend's client: ``LLMClient`` (``context.llm(...)``) and
``ContinuesTurns`` (a search agent's), so a component depends on these calls, not on
``ChatClient``, which has both."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from .answers import Generation
from .messages import PreparedTurn, Turn
from .served import ServedModel
from .usage import Usage

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
