"""What a plugin registers (specs) and what a selected spec creates (components).

A spec is cheap metadata plus a factory. The factory runs only for components a run selects,
with the spec's option defaults overridden by the user's ``-o key=value``.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from . import options as _options
from .context import Context
from .data import Corpus, Query
from .errors import UserError
from .options import Options, legacy_options
from .runs import Run  # query id -> {document id: score}; re-exported, defined in runs.py
from .tasks import TaskSpec


_CHECKED: weakref.WeakSet[type] = weakref.WeakSet()  # options classes whose defaults were checked


@dataclass(frozen=True)
class ComponentSpec:
    """A named, configurable component.

    ``options`` is a pydantic model, one field per accepted ``-o`` key, with its type, default,
    bounds and ``description`` (``r2med_tasks.options``; a plain dict of defaults, the legacy
    form, becomes such a model with types inferred from the defaults). ``runtime_options`` never
    change results (batch size, device) and so stay out of the run's identity; ``model_options``
    choose the model, whose name and revision (``model_meta()``) already identify them.

    A component built of other registered retrievers (``hybrid``) names the option that lists them
    in ``members_option``: ``-o MEMBER.key=value`` for one of them then reaches the factory in
    ``member_options`` ({member: ["key=value", ...]}), and the factory gets the creation
    ``context`` (to create them with ``context.retriever``).
    """

    name: str
    factory: Callable[..., Any] | str
    description: str = ""
    aliases: tuple[str, ...] = ()
    options: type[BaseModel] = Options
    runtime_options: tuple[str, ...] = ()
    model_options: tuple[str, ...] = ()
    reference: str | None = None
    members_option: str | None = None
    kind: ClassVar[str] = "component"
    core_options: ClassVar[tuple[str, ...]] = ()  # the harness's, added to every spec of the kind; never the factory's

    def __post_init__(self) -> None:
        if isinstance(self.options, Mapping):  # legacy: {key: default}
            object.__setattr__(self, "options", legacy_options(self.options, f"{self.name}Options"))
        if not (isinstance(self.options, type) and issubclass(self.options, BaseModel)):
            raise TypeError(f"{self.kind} '{self.name}': options must be a pydantic model class "
                            f"(r2med_tasks.options_model), not {type(self.options).__name__}")
        if self.options not in _CHECKED:  # once per options class: the registry is rebuilt by every command
            _options.check_defaults(self.options, f"{self.kind} '{self.name}'")
            _CHECKED.add(self.options)

    @property
    def defaults(self) -> dict[str, Any]:
        """Every option's default."""
        return _options.defaults(self.options)

    def option_fields(self) -> dict[str, FieldInfo]:
        """The options' pydantic fields (type, default, bounds, description), in declaration order."""
        return dict(self.options.model_fields)

    def option_schema(self) -> dict[str, dict[str, Any]]:
        """The options as plain JSON-shaped data, for listings (see ``r2med_tasks.options.schema``)."""
        return _options.schema(self.options, runtime=self.runtime_options, model_choice=self.model_options)

    def parse(self, key: str, raw: str) -> Any:
        """The typed value of ``-o key=raw``; a one-line UserError naming the option otherwise."""
        return _options.parse(self.options, key, raw, where=f"-o {self.name}.{key}")

    def identity_value(self, key: str, value: Any) -> Any:
        """What an option's value stands for in a run's identity (``r2med_tasks.options.Identified``)."""
        return _options.identity_value(self.options, key, value)

    def identifies_results(self, key: str) -> bool:
        """Whether an option can change results and is not a model choice (which the model's name and
        revision identify): the options of a run's configuration and experiment name."""
        return key not in self.runtime_options and key not in self.model_options

    def resolve_factory(self) -> Callable[..., Any]:
        if callable(self.factory):
            return self.factory
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)

    def create(self, options: Mapping[str, Any], *, member_options: Mapping[str, list[str]] | None = None,
               context: Any = None) -> Any:
        """The component: ``factory(**values)``, the defaults overridden by ``options`` (values
        ``parse`` returned); a composite also gets ``member_options`` and ``context``."""
        values = {k: v for k, v in {**self.defaults, **options}.items() if k not in self.core_options}
        missing = [k for k in self.options.model_fields if k not in values and k not in self.core_options]
        if missing:
            raise UserError(f"{self.kind} '{self.name}' needs " + ", ".join(f"-o {self.name}.{k}=..." for k in missing))
        if self.members_option:
            values |= {"member_options": dict(member_options or {}), "context": context}
        return self.resolve_factory()(**values)


@dataclass(frozen=True)
class RetrieverSpec(ComponentSpec):
    kind: ClassVar[str] = "retriever"


@dataclass(frozen=True)
class RewriterSpec(ComponentSpec):
    kind: ClassVar[str] = "rewriter"


KEEP_TAIL = "keep_tail"
KEEP_TAIL_HELP = ("keep the first stage's documents below the reranked top rerank_k, in their order (default: "
                  "only the reranked list is scored, as published)")
_WITH_CORE_OPTIONS: dict[type, type] = {}  # a reranker's options class -> it with the harness's options


@dataclass(frozen=True)
class RerankerSpec(ComponentSpec):
    """A reranker. Every reranker also accepts the harness's ``-o keep_tail=true`` (handled by the
    runner, never passed to the factory): the published runs score only the reranked top
    ``rerank_k``; with it the first stage's remaining documents stay below them."""

    kind: ClassVar[str] = "reranker"
    core_options: ClassVar[tuple[str, ...]] = (KEEP_TAIL,)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.options in _WITH_CORE_OPTIONS.values():
            return
        if self.options not in _WITH_CORE_OPTIONS:
            if KEEP_TAIL in self.options.model_fields:
                raise TypeError(f"reranker '{self.name}': option '{KEEP_TAIL}' is the harness's (every reranker has "
                                "it); give the plugin's option another name")
            from pydantic import Field, create_model

            _WITH_CORE_OPTIONS[self.options] = create_model(
                self.options.__name__, __base__=self.options,
                **{KEEP_TAIL: (bool, Field(False, description=KEEP_TAIL_HELP))})
        object.__setattr__(self, "options", _WITH_CORE_OPTIONS[self.options])


@dataclass(frozen=True)
class LLMSpec:
    """An LLM backend. ``factory(spec, **sampling)`` gets the whole ``-o llm=`` value and the
    sampling parameters and returns a client with ``model``, ``params`` and
    ``generate(requests, on_result=, usage=)`` (see ``r2med_tasks.llm.ChatClient``)."""

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
    ``top_k`` best. Queries may carry a rewriter's generated documents (``Query.generated``): a
    retriever that combines them itself says so with :class:`CombinesGenerated`; any other gets
    each query's text already combined by the default rule (``r2med_tasks.combine.default_query``).
    """

    def index(self, corpus: Corpus, *, task: TaskSpec, context: Context) -> None: ...

    def search(self, queries: Sequence[Query], *, task: TaskSpec, top_k: int, context: Context) -> Run: ...


@runtime_checkable
class Rewriter(Protocol):
    """Turns each query into a query with generated documents (``Query.generated``)."""

    def rewrite(self, queries: Sequence[Query], *, task: TaskSpec, context: Context) -> list[Query]: ...


@runtime_checkable
class Reranker(Protocol):
    """Re-scores the first stage's candidates for each query."""

    def rerank(self, queries: Sequence[Query], corpus: Corpus, candidates: Run, *, task: TaskSpec,
               context: Context) -> Run: ...


# Optional capabilities: a component has one when it has the member; the harness checks with isinstance.

@runtime_checkable
class DescribesModel(Protocol):
    """Names the model behind the results: at least ``name`` (containing "/") and ``revision``,
    plus any mteb ``ModelMeta`` field and ``display_name`` (as a leaderboard prints it)."""

    def model_meta(self) -> dict[str, Any]: ...


@runtime_checkable
class Labelled(Protocol):
    """A rewriter's or reranker's name in the pipeline's name ("o3-mini" in "o3-mini + BM25")."""

    def label(self) -> str: ...


@runtime_checkable
class Summarizes(Protocol):
    """One line for the user after the run (LLM requests, tokens, cost), or None."""

    def summary(self) -> str | None: ...


@runtime_checkable
class ReportsUsage(Protocol):
    """A component that calls an LLM: ``usage``, the ``r2med_tasks.llm.Usage`` its calls are tallied
    in (passed as ``usage=`` to ``generate_cached``/``continue_cached``/``ChatClient.generate``, made
    with ``model=`` and the ``-o price=`` it was given), None while it has called none. One tally
    for the component's life or a new one per call: the runner counts what each call added, so a
    task's usage (its cost file, ``--json``) is what that task's calls cost, cache hits apart."""

    usage: Any


@runtime_checkable
class RerankDepth(Protocol):
    """How many of the first stage's documents per query a reranker re-scores (default: all kept)."""

    rerank_k: int


@runtime_checkable
class CombinesGenerated(Protocol):
    """A retriever that reads ``Query.generated`` itself (the published per-family rules), when
    ``combines_generated`` is true; false (or absent) leaves it to the default rule."""

    combines_generated: bool


def combines_generated(retriever: Any) -> bool:
    """Whether a retriever combines generated documents itself: the attribute's value, not its presence."""
    return getattr(retriever, "combines_generated", False) is True


@runtime_checkable
class DeclaresResources(Protocol):
    """What one run of the component needs, for a scheduler (``r2med sweep --executor ray``):
    ``{"gpu": True, "gpu_memory_gb": estimate or None}`` for a local model, ``{}`` for a CPU only."""

    def resources(self) -> dict[str, Any]: ...


@runtime_checkable
class Composite(Protocol):
    """A retriever built from other retrievers (``hybrid``): its ``members``, and whether it is
    tuned across a task group (then the group's tasks run as one job, as in one ``r2med-run``)."""

    members: Sequence[Any]
    tunes_across_tasks: bool


PROTOCOLS: dict[str, type] = {"retriever": Retriever, "rewriter": Rewriter, "reranker": Reranker}
