"""What a plugin registers (specs) and what a selected spec creates (components).

A spec is cheap metadata plus a factory. The factory runs only for components a run selects,
with the spec's option defaults overridden by the user's ``-o key=value``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from .data import Corpus, Query
from .errors import UserError
from .tasks import TaskSpec

Run = dict[str, dict[str, float]]  # query id -> {document id: score}


@dataclass(frozen=True)
class ComponentSpec:
    """A named, configurable component.

    ``options`` maps each accepted ``-o`` key to its default (the default's type is how a value
    from the command line is parsed). ``runtime_options`` never change results (batch size,
    device) and so stay out of the run's identity; ``model_options`` choose the model, whose
    name and revision (``model_meta()``) already identify them.
    """

    name: str
    factory: Callable[..., Any] | str
    description: str = ""
    aliases: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    option_help: Mapping[str, str] = field(default_factory=dict)
    runtime_options: tuple[str, ...] = ()
    model_options: tuple[str, ...] = ()
    reference: str | None = None
    kind: ClassVar[str] = "component"

    def resolve_factory(self) -> Callable[..., Any]:
        if callable(self.factory):
            return self.factory
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)

    def create(self, options: Mapping[str, Any]) -> Any:
        return self.resolve_factory()(**{**self.options, **options})


@dataclass(frozen=True)
class RetrieverSpec(ComponentSpec):
    kind: ClassVar[str] = "retriever"


@dataclass(frozen=True)
class RewriterSpec(ComponentSpec):
    kind: ClassVar[str] = "rewriter"


@dataclass(frozen=True)
class RerankerSpec(ComponentSpec):
    kind: ClassVar[str] = "reranker"


@dataclass(frozen=True)
class LLMSpec:
    """An LLM backend. ``factory(spec, **sampling)`` gets the whole ``-o llm=`` value and the
    sampling parameters and returns a client with ``model``, ``params`` and
    ``generate(requests, on_result=, usage=)`` (see ``r2med_plugins.llm.ChatClient``)."""

    name: str
    factory: Callable[..., Any] | str
    description: str = ""
    aliases: tuple[str, ...] = ()
    kind: ClassVar[str] = "llm"

    def create(self, spec: str, **sampling: Any) -> Any:
        factory = self.factory
        if not callable(factory):
            module, _, attr = factory.partition(":")
            factory = getattr(importlib.import_module(module), attr)
        return factory(spec, **sampling)


SPEC_TYPES: dict[str, type[ComponentSpec]] = {
    cls.kind: cls for cls in (RetrieverSpec, RewriterSpec, RerankerSpec)
}


@runtime_checkable
class Retriever(Protocol):
    """First stage: index a task's corpus, then return scored documents for each query.

    ``search`` may return more or fewer than ``top_k`` documents per query; the harness keeps the
    ``top_k`` best. Retrievers may also define ``model_meta() -> dict`` with at least ``name``
    (containing "/") and ``revision``, plus any mteb ``ModelMeta`` field, to name their results,
    and ``display_name`` (as a leaderboard would print it).
    """

    def index(self, corpus: Corpus, *, task: TaskSpec) -> None: ...

    def search(self, queries: Sequence[Query], *, task: TaskSpec, top_k: int) -> Run: ...


@runtime_checkable
class Rewriter(Protocol):
    """Turns each query into a query with generated documents (``Query.generated``)."""

    def rewrite(self, queries: Sequence[Query], *, task: TaskSpec) -> list[Query]: ...


@runtime_checkable
class Reranker(Protocol):
    """Re-scores the first stage's candidates for each query."""

    def rerank(self, queries: Sequence[Query], corpus: Corpus, candidates: Run, *, task: TaskSpec) -> Run: ...


PROTOCOLS: dict[str, type] = {"retriever": Retriever, "rewriter": Rewriter, "reranker": Reranker}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_option(default: Any, raw: str, *, where: str) -> Any:
    """Parse a command-line string the way the option's default is typed."""
    try:
        if isinstance(default, bool):
            if raw.lower() in _TRUE | _FALSE:
                return raw.lower() in _TRUE
            raise ValueError("expected true or false")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, (list, tuple)):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
    except ValueError as e:
        raise UserError(f"{where}={raw!r}: {e}; expected a {type(default).__name__}") from None
    if default is None and raw.lower() in ("none", "null", ""):
        return None
    return raw
