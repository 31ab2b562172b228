"""What a plugin registers (specs) and what a selected spec creates (components). A spec is cheap
metadata plus a factory, which runs only for the components a run selects.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

from . import options as _options
from .api_options import API_LIMITS, APIOptions
from .context import Context
from ..tasks.taskdata import Corpus, Query
from ..errors import UserError
from .options import Options
from ..scoring.runs import Run  # query id -> {document id: score}
from ..tasks.specs import TaskSpec


_CHECKED: weakref.WeakSet[type] = weakref.WeakSet()


@dataclass(frozen=True)
class ComponentSpec:
    """A named, configurable component (docs/plugins.md lists the fields). The factory gets one
    validated instance of ``options``, so each option is declared once. ``runtime_options`` and
    ``model_options`` stay out of a run's identity: the first cannot change results (an
    ``APIOptions``' time limits are among them), the second's model is identified by its own name
    and revision. A composite gets ``factory(options, members)``.
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
    tuning_option: str | None = None
    resources: Callable[[BaseModel], dict[str, Any]] | None = None
    kind: ClassVar[str] = "component"
    stage_options: ClassVar[type[BaseModel] | None] = None  # the harness's, on every stage of the kind

    def __post_init__(self) -> None:
        if isinstance(self.options, type) and issubclass(self.options, APIOptions):  # its time limits: no result changes
            object.__setattr__(self, "runtime_options",
                               (*self.runtime_options, *(k for k in API_LIMITS if k not in self.runtime_options)))
        if isinstance(self.options, Mapping):
            raise TypeError(f"{self.kind} '{self.name}': options is a dict of defaults, which r2med no longer takes; "
                            "declare a class deriving from r2med_tasks.plugin.Options, one field per option "
                            "(key: type = Field(default, description=...); see docs/plugins.md)")
        if not (isinstance(self.options, type) and issubclass(self.options, BaseModel)):
            raise TypeError(f"{self.kind} '{self.name}': options must be a pydantic model class "
                            f"(deriving from r2med_tasks.plugin.Options), not {type(self.options).__name__}")
        taken = sorted(set(self.options.model_fields) & set(self.stage_options.model_fields if self.stage_options
                                                            else ()))
        if taken:
            raise TypeError(f"{self.kind} '{self.name}': option '{taken[0]}' is the harness's (every {self.kind} has "
                            "it); give the plugin's option another name")
        if self.options not in _CHECKED:  # the registry is rebuilt by every command
            _options.check_defaults(self.options, f"{self.kind} '{self.name}'")
            _CHECKED.add(self.options)

    def _model_of(self, key: str) -> type[BaseModel]:
        """The model declaring ``key``: the stage's (the harness's option) or the component's."""
        stage = self.stage_options
        return stage if stage is not None and key in stage.model_fields else self.options

    @property
    def defaults(self) -> dict[str, Any]:
        """Every option's default, the stage's included."""
        stage = _options.defaults(self.stage_options) if self.stage_options else {}
        return _options.defaults(self.options) | stage

    def option_fields(self) -> dict[str, FieldInfo]:
        """The options' pydantic fields, in declaration order, then the stage's."""
        return {**self.options.model_fields, **(self.stage_options.model_fields if self.stage_options else {})}

    def option_schema(self) -> dict[str, dict[str, Any]]:
        """The options as plain JSON-shaped data, for listings."""
        own = _options.schema(self.options, runtime=self.runtime_options, model_choice=self.model_options)
        return own | (_options.schema(self.stage_options) if self.stage_options else {})

    def parse(self, key: str, raw: str) -> Any:
        """The typed value of ``-o key=raw``; a one-line UserError naming the option otherwise."""
        return _options.parse(self._model_of(key), key, raw, where=f"-o {self.name}.{key}")

    def identity_value(self, key: str, value: Any) -> Any:
        """What an option's value stands for in a run's identity."""
        return _options.identity_value(self._model_of(key), key, value)

    def identifies_results(self, key: str) -> bool:
        """Whether an option can change results and is not a model choice: the options of a run's
        configuration and experiment name."""
        return key not in self.runtime_options and key not in self.model_options

    def members(self, values: Mapping[str, Any]) -> list[str]:
        """The registered retrievers a composite's option values name. A composite that uses its
        members only in some configurations overrides it."""
        return members_named(values[self.members_option]) if self.members_option else []

    def tunes(self, options: BaseModel) -> bool:
        """Whether a component with these options is tuned across its task group."""
        return bool(self.tuning_option and getattr(options, self.tuning_option))

    def resolve_factory(self) -> Callable[..., Any]:
        if callable(self.factory):
            return self.factory
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)

    def options_of(self, values: Mapping[str, Any]) -> BaseModel:
        """The component's options: ``values`` over the defaults, validated whole; the stage's
        options stay the harness's."""
        stage = self.stage_options.model_fields if self.stage_options else {}
        own = {k: v for k, v in values.items() if k not in stage}
        missing = [k for k, f in self.options.model_fields.items() if f.is_required() and k not in own]
        if missing:
            raise UserError(f"{self.kind} '{self.name}' needs " + ", ".join(f"-o {self.name}.{k}=..." for k in missing))
        return _options.validated(self.options, own, component=f"{self.kind} '{self.name}'", name=self.name)

    def validated_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Every option's value, normalised by its validator: what a run's identity and folder name
        are made of. Runtime and model options are left out (they may hold a Python object pydantic
        would not serialise), and so is an option left out of the defaults (``Identified(when_set=
        True)``) and not set, so adding an option keeps earlier identities."""
        stage = self.stage_options
        known = set(self.defaults) | set(values)
        identifying = {k for k in self.options.model_fields
                       if k in known and (self.identifies_results(k) or k == self.members_option)}
        own = self.options_of(values).model_dump(include=identifying)
        if stage is None:
            return own
        staged = {k: v for k, v in values.items() if k in stage.model_fields}
        return own | _options.validated(stage, staged, component=f"{self.kind} '{self.name}'",
                                        name=self.name).model_dump()

    def create(self, options: BaseModel | Mapping[str, Any] | None = None, members: Sequence[Any] = ()) -> Any:
        """The component, from its options instance or the values to make it of."""
        if not isinstance(options, BaseModel):
            options = self.options_of(options or {})
        factory = self.resolve_factory()
        return factory(options, list(members)) if self.members_option else factory(options)


def members_named(value: Any) -> list[str]:
    """The retrievers a members option's value names: a list (``hybrid``), or one (an agent's)."""
    return [value] if isinstance(value, str) else list(value)


@dataclass(frozen=True)
class RetrieverSpec(ComponentSpec):
    """A retriever. ``combines_generated``: it reads ``Query.generated`` itself; any other gets each
    rewritten query already combined by the BM25 rule."""

    combines_generated: bool = False
    kind: ClassVar[str] = "retriever"


@dataclass(frozen=True)
class RewriterSpec(ComponentSpec):
    kind: ClassVar[str] = "rewriter"


class RerankStageOptions(Options):
    """The harness's options of a reranker stage: every reranker accepts them, the runner applies
    them, the reranker never sees them."""

    keep_tail: bool = Field(False, description="keep the first stage's documents below the reranked top rerank_k, "
                                               "in their order (default: only the reranked list is scored, as "
                                               "published)")


@dataclass(frozen=True)
class RerankerSpec(ComponentSpec):
    """A reranker. ``depth_option``: the option holding how many of the first stage's documents per
    query the harness hands it (unset: all it kept)."""

    depth_option: str | None = None
    kind: ClassVar[str] = "reranker"
    stage_options: ClassVar[type[BaseModel] | None] = RerankStageOptions


@dataclass(frozen=True)
class LLMSpec:
    """An LLM backend: ``factory(spec, **sampling)`` gets the whole ``-o llm=`` value and returns an
    ``r2med_tasks.llm.LLMClient``."""

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
    """First stage: index a task's corpus, then return scored documents for each query (the harness
    keeps the ``top_k`` best). Optional, as for every component: ``model_meta()``, the model behind
    the results; without it a retriever is named ``<its package>/<component>``, revision the
    package's version."""

    def index(self, corpus: Corpus, *, task: TaskSpec, context: Context) -> None: ...

    def search(self, queries: Sequence[Query], *, task: TaskSpec, top_k: int, context: Context) -> Run: ...


@runtime_checkable
class Rewriter(Protocol):
    """Turns each query into a query with generated documents (``Query.generated``). Optional:
    ``model_meta()``, whose ``display_name`` names the stage ("o3-mini" in "o3-mini + BM25")."""

    def rewrite(self, queries: Sequence[Query], *, task: TaskSpec, context: Context) -> list[Query]: ...


@runtime_checkable
class Reranker(Protocol):
    """Re-scores the first stage's candidates for each query. Optional: ``model_meta()``, as a
    retriever's."""

    def rerank(self, queries: Sequence[Query], corpus: Corpus, candidates: Run, *, task: TaskSpec,
               context: Context) -> Run: ...


PROTOCOLS: dict[str, type] = {"retriever": Retriever, "rewriter": Rewriter, "reranker": Reranker}
