"""The pipeline a run evaluates: ``[rewriter] -> retriever -> [reranker]``, built from ``--plugin``
names and ``-o`` options, and the identity that names its results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..components.specs import PROTOCOLS, members_named
from ..components.context import Context, LLMCalls
from ..errors import PluginError, UserError
from ..components.options import option_text, writable
from ..components.overlap import NOTE_FIELDS, OVERLAP_KEY, overlap_notes
from .discovery import OWN_DISTRIBUTION as OWN_NAMESPACE
from .registry import Registered, Registry
from ..results.identity import PipelineSpec, code_versions
from ..scoring.runs import DEFAULT_TOP_K
from ..tasks.specs import normalize

STAGE_ORDER = ("rewriter", "retriever", "reranker")


@dataclass
class Stage:
    entry: Registered
    options: dict[str, Any] = field(default_factory=dict)  # user-set options only
    member_options: dict[str, list[str]] = field(default_factory=dict)  # a composite's -o MEMBER.key=value
    member_specs: dict[str, Any] = field(default_factory=dict)  # a composite's member name -> its spec
    members: list[Stage] = field(default_factory=list)  # a composite's created members, in its option's order
    instance: Any = None
    llm_calls: LLMCalls = field(default_factory=LLMCalls)  # its component's LLM calls (context.llm), over the run
    _meta: dict[str, Any] | None = None

    @property
    def spec(self):
        return self.entry.spec

    @property
    def label(self) -> str:
        return f"{self.spec.kind} '{self.spec.name}' (from {self.entry.plugin.name})"

    def config(self) -> dict[str, Any]:
        """The component and every option value that can change results (defaults included), each
        as its identity (a file by its content, an LLM by its model; the options choosing a model
        are identified by the model's name and revision instead)."""
        values = self.spec.validated_values(self.options)
        config = {"component": self.spec.name, "plugin": self.entry.plugin.name,
                  "options": {k: self._identity(self.spec, k, values[k]) for k in sorted(values)
                              if self.spec.identifies_results(k)}}
        if self.spec.members_option:  # a composite: its members and their options
            config["members"] = members_named(values[self.spec.members_option])
            config["member_options"] = {m: dict(self.member_values(m)) for m in sorted(self.member_options)}
        return config

    def member_values(self, member: str) -> list[tuple[str, Any]]:
        """The options set on a member that can change results, as the member gets them and as their
        identities ("k1", 1.2), in order."""
        spec = self.member_specs[member]
        tokens = [token.partition("=") for token in self.member_options.get(member, ())]
        values = spec.validated_values({key: spec.parse(key, raw) for key, _, raw in tokens})
        return [(key, self._identity(spec, key, values[key])) for key in sorted({key for key, _, _ in tokens})
                if spec.identifies_results(key) and key in values]

    @staticmethod
    def _identity(spec, key: str, value: Any) -> Any:
        return without_secrets(spec.identity_value(key, value))

    def changed_options(self) -> dict[str, Any]:
        """Options set away from their defaults that can change results and are not a model choice,
        as the component gets them (``-o metric=COSINE`` is ``cosine``, the default, when the
        options' validator lower-cases it), as their identities."""
        values = self.spec.validated_values(self.options)
        changed = {k: self._identity(self.spec, k, values[k]) for k in sorted(self.options)
                   if self.spec.identifies_results(k) and k in values and values[k] != self.spec.defaults.get(k)}
        for member in sorted(self.member_options):
            changed |= {f"{member}.{key}": value for key, value in self.member_values(member)}
        return changed

    def model(self) -> dict[str, str] | None:
        """Name and revision of the model this component scores with, when it says."""
        if self.spec.kind != "retriever" and not describes_model(self.instance):
            return None
        meta = self.model_meta()
        return {"name": meta["name"], "revision": str(meta["revision"])}

    def served_llms(self) -> dict[str, str]:
        """{model: the ``-o llm=`` spec of its server} for this stage and its members whose model is an
        LLM on a server (``model_meta()`` names it ``llm/<model>``, revision ``served``, as an LLM
        component's does, chosen by one of its ``model_options``): the servers a reuse of its
        results asks what they serve."""
        from ..llm.specs import LLMRef

        out = {}
        for stage in (self, *self.members):
            model = stage.model()
            if model is None or not model["revision"].startswith("served") or not model["name"].startswith("llm/"):
                continue
            for key in stage.spec.model_options:
                value = {**stage.spec.defaults, **stage.options}.get(key)
                if isinstance(value, str) and value.strip() and f"llm/{LLMRef(value).identity}" == model["name"]:
                    out[model["name"].removeprefix("llm/")] = value
        return out

    def label_in_name(self) -> str:
        """How the stage appears in a pipeline's name: its model's display name, else its component's name."""
        return self.model_meta().get("display_name") or self.spec.name

    def model_meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = self._read_model_meta()
        return self._meta

    @property
    def default_model_name(self) -> str:
        """The model name of a component whose ``model_meta()`` gives none: its plugin's namespace."""
        return f"{self.entry.plugin.name}/{self.spec.name}"

    def renamed(self) -> dict[str, str]:
        """{its model's name: the name an earlier r2med gave it} where they differ: a third party's
        component without a model name was ``r2med/<name>`` (:meth:`default_model_name`)."""
        name = self.model_meta()["name"]
        old = f"{OWN_NAMESPACE}/{self.spec.name}"
        return {name: old} if name == self.default_model_name and name != old else {}

    def _read_model_meta(self) -> dict[str, Any]:
        """The component's ``model_meta()``; a name it does not give is ``<its plugin>/<its name>``
        (``r2med/bm25`` for a built-in, ``my-package/mine`` for a third party's), a revision its
        plugin's version."""
        info = dict(self.instance.model_meta()) if describes_model(self.instance) else {}
        info.setdefault("name", self.default_model_name)
        info.setdefault("revision", self.entry.plugin.version or "0")
        if "/" not in info["name"]:
            raise PluginError(f"{self.label}: model_meta() name {info['name']!r} must contain '/' (org/name)")
        if overlap_notes(info.get(OVERLAP_KEY)) is None:
            raise PluginError(f"{self.label}: model_meta() {OVERLAP_KEY} must be a list of notes, each with "
                              f"{', '.join(NOTE_FIELDS)} as text and task one of R2MED's dataset names")
        return info


@dataclass
class Pipeline:
    stages: dict[str, Stage]
    top_k: int = DEFAULT_TOP_K
    not_a_command: str | None = None  # why no command builds it (a Python object passed to the API)

    @property
    def retriever(self) -> Stage:
        return self.stages["retriever"]

    def ordered(self) -> list[Stage]:
        return [self.stages[k] for k in STAGE_ORDER if k in self.stages]

    def first_stage(self) -> Pipeline:
        """This pipeline without its reranker: the run a reranker starts from."""
        return Pipeline({k: s for k, s in self.stages.items() if k != "reranker"}, self.top_k)

    def config(self) -> dict[str, Any]:
        """What the user asked for, canonical. Needs no component instance, so a published command's
        configuration can be computed without loading anything."""
        return {"top_k": self.top_k, **{k: s.config() for k, s in self.stages.items()}}

    def variant(self) -> dict[str, Any]:
        """Options away from their defaults, as mteb's ``experiment_kwargs``: ``k1`` for a bare
        retriever, ``bm25.k1`` where a pipeline has several components."""
        qualify = len(self.stages) > 1
        out = {(f"{s.spec.name}.{k}" if qualify else k): v
               for s in self.ordered() for k, v in s.changed_options().items()}
        if self.top_k != DEFAULT_TOP_K:
            out["top_k"] = self.top_k
        return out

    def spec(self) -> PipelineSpec:
        """The pipeline as the results layout sees it (components must be created)."""
        models = {kind: m for kind, s in self.stages.items() if (m := s.model()) is not None}
        plugins = {s.entry.plugin.name: s.entry.plugin.code_version for s in self.ordered()}
        renamed: dict[str, str] = {}  # the models an earlier r2med named otherwise (PipelineSpec.legacy)
        for kind in models:
            renamed |= self.stages[kind].renamed()
        command, note = self.command()
        return PipelineSpec(display_name=self.display_name(), model=self.model_meta(), config=self.config(),
                       models=models, code=code_versions(plugins), variant=self.variant(),
                       composite=len(self.stages) > 1, command=command, command_note=note,
                       components=self.components(), encode_kwargs=self.runtime_options(),
                       namespace=self.namespace(), renamed=renamed)

    def namespace(self) -> str:
        """Whose name a pipeline of several components is filed under: the package of its first
        third-party component (stage by stage, a composite's members after it), r2med's own only
        when every component is r2med's."""
        for stage in self.ordered():
            for s in (stage, *stage.members):
                if s.entry.plugin.name != OWN_NAMESPACE:
                    return s.entry.plugin.name
        return OWN_NAMESPACE

    def model_meta(self) -> dict[str, Any]:
        """The retriever's model metadata; a reranker that says its ``model_type`` adds it (mteb's
        ``ModelMeta.model_type`` of a pipeline: ``["sparse", "cross-encoder"]``)."""
        meta = dict(self.retriever.model_meta())
        reranker = self.stages.get("reranker")
        if reranker is not None and describes_model(reranker.instance):
            extra = [t for t in reranker.model_meta().get("model_type", []) if t not in meta.get("model_type", [])]
            if extra:
                meta["model_type"] = [*meta.get("model_type", ["dense"]), *extra]
        return meta

    def runtime_options(self) -> dict[str, Any]:
        """The options set that cannot change results (batch size, device), as mteb records a run's
        ``encode_kwargs``: ``batch_size`` for a bare retriever, ``st.batch_size`` in a pipeline."""
        qualify = len(self.stages) > 1
        return {(f"{s.spec.name}.{k}" if qualify else k): without_secrets(v)
                for s in self.ordered() for k, v in sorted(s.options.items())
                if k in s.spec.runtime_options and writable(v)}

    def command(self) -> tuple[tuple[str, ...] | None, str | None]:
        """The ``r2med-run`` words that build this pipeline (every option the user set, a model's
        folder and the device included), or None and why no command can (an option holding a
        Python object, a component passed to the API)."""
        if self.not_a_command:
            return None, self.not_a_command
        words = ["r2med-run", *(w for s in self.ordered() for w in ("--plugin", s.spec.name))]
        qualify = len(self.stages) > 1
        for stage in self.ordered():
            for key, value in sorted(stage.options.items()):
                if not writable(value):
                    return None, (f"option {stage.spec.name}.{key} holds a {type(value).__name__} object given to "
                                  "the Python API; no command line can pass it")
                prefix = f"{stage.spec.name}." if qualify else ""
                words += ["-o", f"{prefix}{key}={without_secrets(option_text(value))}"]
            for member, tokens in sorted(stage.member_options.items()):
                words += [w for token in tokens for w in ("-o", f"{member}.{without_secrets(token)}")]
        if self.top_k != DEFAULT_TOP_K:
            words += ["--top-k", str(self.top_k)]
        return tuple(words), None

    def components(self) -> dict[str, dict[str, Any]]:
        """Each stage's component, plugin and label (as the leaderboard names it), with a
        composite's members, and the training-overlap notes of the model behind each."""
        out = {}
        for kind, stage in ((k, self.stages[k]) for k in STAGE_ORDER if k in self.stages):
            label = stage.label_in_name() if kind != "retriever" else _model_label(stage.model_meta())
            entry = {"component": stage.spec.name, "plugin": stage.entry.plugin.name, "label": label,
                     **_overlap(stage.model_meta())}
            if stage.spec.members_option:
                entry["members"] = [
                    {"component": name, "label": _model_label(m.instance.model_meta()) if describes_model(m.instance)
                     else name, **_overlap(m.model_meta())}
                    for name, m in zip(_members(stage), stage.members)]
            out[kind] = entry
        return out

    def display_name(self) -> str:
        """As the leaderboard names systems: "o3-mini + BM25" (a rewriter is named by its LLM, a
        reranker by its model when it says so: "E5-mistral-7b-instruct + ReasonRank(32B)")."""
        names = [_model_label(self.retriever.model_meta())]
        if "rewriter" in self.stages:
            names.insert(0, self.stages["rewriter"].label_in_name())
        if "reranker" in self.stages:
            names.append(self.stages["reranker"].label_in_name())
        return without_secrets(" + ".join(names))


def describes_model(component: Any) -> bool:
    """Whether a component names the model behind its results (``model_meta()``, optional)."""
    return hasattr(component, "model_meta")


def _overlap(meta: dict[str, Any]) -> dict[str, Any]:
    """A stage's record entry gains its model's training-overlap notes, only where it has some (every
    other run's record stays as it was)."""
    notes = overlap_notes(meta.get(OVERLAP_KEY))
    return {OVERLAP_KEY: notes} if notes else {}


def _model_label(meta: dict[str, Any]) -> str:
    """A model as a leaderboard names it: its display name, else the last part of its name."""
    return meta.get("display_name") or str(meta["name"]).split("/")[-1]


def without_secrets(value: Any) -> Any:
    """An option value as it may be stored or shown: a password or key in a URL (``-o llm=
    http://user:KEY@host/v1``) becomes ``***``, so secrets never reach results, identities or plans."""
    from ..llm.secrets import redact

    return redact(value) if isinstance(value, str) else value


def build_pipeline(registry: Registry, plugin_tokens: list[str], option_tokens: list[str], *, top_k: int = DEFAULT_TOP_K,
                   device: str | None = None) -> Pipeline:
    """The pipeline from ``--plugin`` names and ``-o`` options (``--device`` as ``-o device=`` for
    every selected component, and every member of a composite, that runs on a device)."""
    stages = _stages(registry, plugin_tokens)
    if device is not None:  # to the members the options name (-o members=...), not the default ones
        _route_options(stages, option_tokens, registry)
        on_device = [s for s in stages.values() if "device" in s.spec.option_fields()]
        members = [m for s in stages.values() for m in _members(s) if "device" in _member_spec(registry, m).option_fields()]
        if not on_device and not members:
            raise UserError(f"--device {device}: no selected component runs on a device")
        stages = _stages(registry, plugin_tokens)  # routed again, --device first: an explicit -o X.device wins
        option_tokens = ([f"{s.spec.name}.device={device}" for s in on_device]
                         + [f"{m}.device={device}" for m in members] + option_tokens)
    _route_options(stages, option_tokens, registry)
    for stage in stages.values():  # a composite's members: registered retrievers, said so in the option's words
        for member in _members(stage):
            try:
                _member_spec(registry, member)
            except UserError as e:
                problem = str(e).partition(": ")[2]
                raise UserError(f"-o {stage.spec.name}.{stage.spec.members_option}: '{member}' is not a retriever "
                                f"({problem})") from None
    return Pipeline(stages, top_k)


def _members(stage: Stage) -> list[str]:
    """The members a composite's options name (none for other components)."""
    return stage.spec.members({**stage.spec.defaults, **stage.options})


def _member_spec(registry: Registry, name: str):
    return registry.component(f"retriever:{name}").spec


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


def _route_options(stages: dict[str, Stage], option_tokens: list[str], registry: Registry) -> None:
    """``-o key=value`` goes to every selected component accepting ``key``; ``-o name.key=value`` to
    one, or to the composite (``hybrid``) that names ``name`` among its members."""
    prefixed = []
    for token in option_tokens:
        key, sep, raw = token.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"-o {without_secrets(token)}: expected key=value (or component.key=value)")
        targets = list(stages.values())
        prefix, dot, bare = key.partition(".")
        if dot:
            named = [s for s in targets if normalize(prefix) in {normalize(n) for n in (s.spec.name, *s.spec.aliases)}]
            if not named:
                prefixed.append((token, prefix, bare, raw))  # a member's, once the members are known
                continue
            targets, key = named, bare
        accepting = [s for s in targets if key in s.spec.option_fields()]
        if not accepting:
            accepted = "; ".join(f"{s.spec.name} accepts {', '.join(sorted(s.spec.option_fields())) or 'no options'}"
                                 for s in targets)
            raise UserError(f"-o {without_secrets(token)}: no selected component accepts '{key}' ({accepted})")
        for stage in accepting:
            stage.options[key] = stage.spec.parse(key, raw)
    for token, prefix, key, raw in prefixed:
        owners = [s for s in stages.values() if prefix in _members(s)]
        if not owners:
            what = ("neither a selected component nor a member" if any(s.spec.members_option for s in stages.values())
                    else "not a selected component")
            raise UserError(f"-o {without_secrets(token)}: '{prefix}' is {what} "
                            f"(selected: {', '.join(s.spec.name for s in stages.values())})")
        spec = _member_spec(registry, prefix)
        for owner in owners:
            owner.member_specs[prefix] = spec
        if key not in spec.option_fields():
            raise UserError(f"-o {without_secrets(token)}: {spec.name} accepts {', '.join(sorted(spec.option_fields())) or 'no options'}")
        spec.parse(key, raw)  # checked now, applied when the composite creates its member
        for owner in owners:
            owner.member_options.setdefault(prefix, []).append(f"{key}={raw}")


def instantiate(pipeline: Pipeline, registry: Registry) -> None:
    """Create each selected component (cheap: models load on first use) and check its interface; a
    composite's members are created from ``registry`` first."""
    for stage in pipeline.ordered():
        if stage.instance is None:
            _create(stage, registry)


def _create(stage: Stage, registry: Registry) -> None:
    """``stage``'s component: its options validated whole, then (a composite) its members created,
    then the factory called."""
    options = stage.spec.options_of(stage.options)
    stage.members = [retriever_stage(registry, name, stage.member_options.get(name, ())) for name in _members(stage)]
    try:
        stage.instance = stage.spec.create(options, [m.instance for m in stage.members])
    except UserError:
        raise
    except Exception as e:
        hint = (" (a factory is called with one argument, the options instance, and a composite's also with its "
                "members: see docs/plugins.md#specs)" if isinstance(e, TypeError) else "")
        raise PluginError(f"{stage.label} could not be created: {type(e).__name__}: {e}{hint}") from e
    check_interface(stage.instance, stage.spec.kind, stage.label)


METHODS = {"retriever": ("index", "search"), "rewriter": ("rewrite",), "reranker": ("rerank",)}


def check_interface(instance: Any, kind: str, label: str) -> None:
    """The component implements its kind's protocol: checked once, here, so a plugin written for an
    older r2med fails with one line, not mid-run."""
    protocol = PROTOCOLS[kind]
    if not isinstance(instance, protocol):
        raise PluginError(f"{label}: its factory returned {type(instance).__name__}, "
                          f"which lacks the {protocol.__name__} methods ({', '.join(METHODS[kind])})")


def retriever_stage(registry: Registry, name: str, tokens: Sequence[str]) -> Stage:
    """A created retriever ``name`` with ``-o``-style ``tokens`` ("k1=1.2")."""
    stage = Stage(registry.component(f"retriever:{name}"))
    _route_options({"retriever": stage}, [f"{stage.spec.name}.{t}" for t in tokens], registry)
    _create(stage, registry)
    return stage


def base_context(registry: Registry, *, cache_dir: Path, log=lambda line: None) -> Context:
    """What every component call of a run gets before the runner adds the task's parts: the cache
    folder, a line to the user, and LLM clients and retrievers (to search with) from the registered
    plugins."""
    return Context(cache_dir=cache_dir, log=log, chat_clients=registry.llm,
                   retrievers=lambda name, *tokens: retriever_stage(registry, name, tokens).instance)
