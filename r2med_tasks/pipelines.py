"""The pipeline a run evaluates: ``[rewriter] -> retriever -> [reranker]``, built from ``--plugin``
names and ``-o`` options, and the identity that names its results."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .components import PROTOCOLS, DescribesModel, Labelled
from .context import Context
from .errors import PluginError, UserError
from .registry import Registered, Registry
from .results import RunSpec, code_versions
from .tasks import normalize

STAGE_ORDER = ("rewriter", "retriever", "reranker")


@dataclass
class Stage:
    entry: Registered
    options: dict[str, Any] = field(default_factory=dict)  # user-set options only
    instance: Any = None
    _meta: dict[str, Any] | None = None

    @property
    def spec(self):
        return self.entry.spec

    @property
    def label(self) -> str:
        return f"{self.spec.kind} '{self.spec.name}' (from {self.entry.plugin.name})"

    def config(self) -> dict[str, Any]:
        """The component and every option value that can change results (defaults included; the
        options choosing a model are identified by the model's name and revision instead)."""
        merged = {**self.spec.defaults, **self.options}
        skip = set(self.spec.runtime_options) | set(self.spec.model_options)
        return {"component": self.spec.name, "plugin": self.entry.plugin.name,
                "options": {k: merged[k] for k in sorted(merged) if k not in skip}}

    def changed_options(self) -> dict[str, Any]:
        """Options set away from their defaults that can change results and are not a model choice."""
        skip = set(self.spec.runtime_options) | set(self.spec.model_options)
        return {k: v for k, v in sorted(self.options.items()) if k not in skip and v != self.spec.defaults.get(k)}

    def model(self) -> dict[str, str] | None:
        """Name and revision of the model this component scores with, when it says."""
        if self.spec.kind != "retriever" and not isinstance(self.instance, DescribesModel):
            return None
        meta = self.model_meta()
        return {"name": meta["name"], "revision": str(meta["revision"])}

    def label_in_name(self) -> str:
        """How the stage appears in a pipeline's name: its label, else its component's name."""
        return (self.instance.label() if isinstance(self.instance, Labelled) else None) or self.spec.name

    def model_meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = self._read_model_meta()
        return self._meta

    def _read_model_meta(self) -> dict[str, Any]:
        info = dict(self.instance.model_meta()) if isinstance(self.instance, DescribesModel) else {}
        info.setdefault("name", f"r2med/{self.spec.name}")
        info.setdefault("revision", self.entry.plugin.version or "0")
        if "/" not in info["name"]:
            raise PluginError(f"{self.label}: model_meta() name {info['name']!r} must contain '/' (org/name)")
        return info


@dataclass
class Pipeline:
    stages: dict[str, Stage]
    top_k: int = 100
    members: list[Pipeline] = field(default_factory=list)  # a fusing retriever's member pipelines

    @property
    def retriever(self) -> Stage:
        return self.stages["retriever"]

    def ordered(self) -> list[Stage]:
        return [self.stages[k] for k in STAGE_ORDER if k in self.stages]

    def first_stage(self) -> Pipeline:
        """This pipeline without its reranker: the run a reranker starts from."""
        return Pipeline({k: s for k, s in self.stages.items() if k != "reranker"}, self.top_k, self.members)

    def config(self) -> dict[str, Any]:
        """What the user asked for, canonical: top-k, each stage's component and option values, and
        a fusion's members. Needs no component instance, so a published command's configuration
        can be computed without loading anything."""
        config: dict[str, Any] = {"top_k": self.top_k, **{k: s.config() for k, s in self.stages.items()}}
        if self.members:
            config["members"] = [m.config() for m in self.members]
        return config

    def variant(self) -> dict[str, Any]:
        """Options away from their defaults, as mteb's ``experiment_kwargs``: ``k1`` for a bare
        retriever, ``bm25.k1`` where a pipeline has several components."""
        qualify = len(self.stages) > 1 or bool(self.members)
        out = {(f"{s.spec.name}.{k}" if qualify else k): v
               for s in self.ordered() for k, v in s.changed_options().items()}
        for member in self.members:
            out |= {f"{member.retriever.spec.name}.{k}": v for k, v in member.retriever.changed_options().items()}
        if self.top_k != 100:
            out["top_k"] = self.top_k
        return out

    def spec(self) -> RunSpec:
        """The pipeline as the results layout sees it (components must be created)."""
        models = {kind: m for kind, s in self.stages.items() if (m := s.model()) is not None}
        if self.members:
            models["members"] = [m.retriever.model() for m in self.members]
        plugins = {s.entry.plugin.name: s.entry.plugin.version
                   for p in (self, *self.members) for s in p.ordered()}
        return RunSpec(display_name=self.display_name(), model=self.retriever.model_meta(), config=self.config(),
                       models=models, code=code_versions(plugins), variant=self.variant(),
                       composite=len(self.stages) > 1 or bool(self.members))

    def display_name(self) -> str:
        """As the leaderboard names systems: "o3-mini + BM25" (a rewriter is named by its LLM, a
        reranker by its model when it says so: "E5-mistral-7b-instruct + ReasonRank(32B)")."""
        meta = self.retriever.model_meta()
        names = [meta.get("display_name") or meta["name"].split("/")[-1]]
        if self.members:  # "BM25 ⊕ NV-Embed-v2 (RRF)"
            shown = [m.retriever.model_meta() for m in self.members]
            names = [" ⊕ ".join(m.get("display_name") or m["name"].split("/")[-1] for m in shown)
                     + f" ({self.retriever.instance.fusion.upper()})"]
        if "rewriter" in self.stages:
            names.insert(0, self.stages["rewriter"].label_in_name())
        if "reranker" in self.stages:
            names.append(self.stages["reranker"].label_in_name())
        return " + ".join(names)


def build_pipeline(registry: Registry, plugin_tokens: list[str], option_tokens: list[str], *, top_k: int = 100,
                   device: str | None = None) -> Pipeline:
    """The pipeline; a fusing retriever (``hybrid``) gets one member pipeline per member, each with
    the selected rewriter and the options addressed to it (``-o MEMBER.key=value``)."""
    stages = _stages(registry, plugin_tokens)
    fusing = "members" in stages["retriever"].spec.option_fields()
    selected = {normalize(n) for st in stages.values() for n in (st.spec.name, *st.spec.aliases)}
    own = [o for o in option_tokens if not fusing or _prefix(o) is None or normalize(_prefix(o)) in selected]
    pipeline = _assemble(stages, own, top_k, device)
    if not fusing:
        return pipeline
    members = list(pipeline.retriever.options.get("members", stages["retriever"].spec.defaults["members"]))
    for token in option_tokens:
        if token not in own and _prefix(token) not in members:
            raise UserError(f"-o {token}: '{_prefix(token)}' is neither a selected component nor a member")
    for name in members:  # each member shares the selected rewriter (same options, same instance)
        member = _stages(registry, [name])
        if "rewriter" in stages:
            member = {"rewriter": stages["rewriter"], **member}
        addressed = [o for o in option_tokens if _prefix(o) == name]
        pipeline.members.append(_assemble(member, addressed, top_k, device, optional_device=True))
    return pipeline


def _prefix(token: str) -> str | None:
    key = token.partition("=")[0]
    return key.partition(".")[0] if "." in key else None


def _stages(registry: Registry, plugin_tokens: list[str]) -> dict[str, Stage]:
    stages: dict[str, Stage] = {}
    for token in plugin_tokens:
        entry = registry.component(token)
        if entry.kind in stages:
            raise UserError(f"--plugin {token}: a pipeline takes one {entry.kind}; "
                            f"'{stages[entry.kind].spec.name}' is already selected")
        stages[entry.kind] = Stage(entry)
    if "retriever" not in stages:
        raise UserError("a pipeline needs one retriever: add --plugin NAME (see `r2med list retrievers`)")
    return stages


def _assemble(stages: dict[str, Stage], option_tokens: list[str], top_k: int, device: str | None,
              optional_device: bool = False) -> Pipeline:
    if device is not None:
        on_device = [s for s in stages.values() if "device" in s.spec.option_fields()]
        if not on_device and not optional_device:
            raise UserError(f"--device {device}: no selected component runs on a device")
        option_tokens = [f"{s.spec.name}.device={device}" for s in on_device] + option_tokens
    _route_options(stages, option_tokens)
    return Pipeline(stages, top_k)


def _route_options(stages: dict[str, Stage], option_tokens: list[str]) -> None:
    """``-o key=value`` goes to every selected component accepting ``key``; ``-o name.key=value`` to one."""
    for token in option_tokens:
        key, sep, raw = token.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"-o {token}: expected key=value (or component.key=value)")
        targets = list(stages.values())
        prefix, dot, bare = key.partition(".")
        if dot:
            named = [s for s in targets if normalize(prefix) in {normalize(n) for n in (s.spec.name, *s.spec.aliases)}]
            if not named:
                raise UserError(f"-o {token}: '{prefix}' is not a selected component "
                                f"(selected: {', '.join(s.spec.name for s in targets)})")
            targets, key = named, bare
        accepting = [s for s in targets if key in s.spec.option_fields()]
        if not accepting:
            accepted = "; ".join(f"{s.spec.name} accepts {', '.join(sorted(s.spec.option_fields())) or 'no options'}"
                                 for s in targets)
            raise UserError(f"-o {token}: no selected component accepts '{key}' ({accepted})")
        for stage in accepting:
            stage.options[key] = stage.spec.parse(key, raw)


def instantiate(pipeline: Pipeline) -> None:
    """Create each selected component (cheap: models load on first use) and check its interface."""
    for member in pipeline.members:
        instantiate(member)
    for stage in pipeline.ordered():
        if stage.instance is None:  # else shared with a member pipeline, already created
            _create(stage)


def _create(stage: Stage) -> None:
    try:
        stage.instance = stage.spec.create(stage.options)
    except UserError:
        raise
    except Exception as e:
        raise PluginError(f"{stage.label} could not be created: {type(e).__name__}: {e}") from e
    check_interface(stage.instance, stage.spec.kind, stage.label)


METHODS = {"retriever": ("index", "search"), "rewriter": ("rewrite",), "reranker": ("rerank",)}


def check_interface(instance: Any, kind: str, label: str) -> None:
    """The component implements its kind's protocol, every method taking ``context=`` (checked
    once, here, so a plugin written for an older r2med fails with one line, not mid-run)."""
    protocol = PROTOCOLS[kind]
    if not isinstance(instance, protocol):
        raise PluginError(f"{label}: its factory returned {type(instance).__name__}, "
                          f"which lacks the {protocol.__name__} methods ({', '.join(METHODS[kind])})")
    for name in METHODS[kind]:
        try:
            params = inspect.signature(getattr(instance, name)).parameters.values()
        except (TypeError, ValueError):  # a builtin or C method: nothing to check
            continue
        if not any(p.name == "context" or p.kind is p.VAR_KEYWORD for p in params):
            raise PluginError(f"{label}: its {name}() takes no context= argument; every component method "
                              "receives a Context (see docs/plugins.md)")


def base_context(registry: Registry, *, cache_dir: Path, log=lambda line: None) -> Context:
    """What every component call of a run gets before the runner adds the task's parts: the cache
    folder, a line to the user, and LLM clients and retrievers from the registered plugins."""

    def retriever(name: str, **options: Any):
        stage = Stage(registry.component(f"retriever:{name}"), dict(options))
        _create(stage)
        return stage.instance

    return Context(cache_dir=cache_dir, log=log, llm=registry.llm, retriever=retriever)
