"""Components and tasks collected from the plugins' ``register_*`` hooks, and lookup by name.

Each hook implementation is called on its own so every spec knows which package registered it;
an exception in one plugin's hook marks that plugin broken and leaves the rest usable. Two specs
of one kind with the same name (or alias) are a clash: the first registered (the built-ins load
first) stays listed, the other is set aside, and only a lookup of a clashing name fails, saying
how to choose (``R2MED_LOAD_PLUGINS``); runs that never use the name are unaffected.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from ..components.specs import SPEC_TYPES, ComponentSpec, LLMSpec
from ..errors import PluginError, UserError
from .discovery import BrokenPlugin, PluginInfo, Plugins
from ..tasks.specs import GROUPS, TaskSpec, normalize

KINDS = ("retriever", "rewriter", "reranker")
HOOKS = {"retriever": "register_retrievers", "rewriter": "register_rewriters",
         "reranker": "register_rerankers", "task": "register_tasks", "llm": "register_llms"}
EXPECTED = {**SPEC_TYPES, "task": TaskSpec, "llm": LLMSpec}


@dataclass(frozen=True)
class Registered:
    spec: ComponentSpec | TaskSpec
    plugin: PluginInfo

    @property
    def kind(self) -> str:
        return "task" if isinstance(self.spec, TaskSpec) else self.spec.kind


@dataclass
class Registry:
    entries: dict[str, list[Registered]] = field(default_factory=lambda: {k: [] for k in HOOKS})
    conflicts: list[str] = field(default_factory=list)
    clashes: dict[str, dict[str, str]] = field(default_factory=lambda: {k: {} for k in HOOKS})
    """Per kind: normalized name -> the clash's message (the lookup of that name raises it)."""
    broken: list[BrokenPlugin] = field(default_factory=list)
    """The plugins that failed to import or register (``Plugins.broken``): what they would have
    registered is unknown, so a name found nowhere may be theirs."""

    def names(self, kind: str) -> dict[str, Registered]:
        """Normalized name and alias -> entry, for one kind."""
        out: dict[str, Registered] = {}
        for entry in self.entries[kind]:
            for name in _names_of(entry.spec):
                out.setdefault(normalize(name), entry)
        return out

    def component(self, token: str) -> Registered:
        """Resolve ``name`` or ``kind:name`` (e.g. ``retriever:bm25``) to one component."""
        kind, _, name = token.rpartition(":")
        if kind and kind not in KINDS:
            raise UserError(f"--plugin {token}: unknown kind '{kind}'; use one of {', '.join(KINDS)}")
        kinds = [kind] if kind else list(KINDS)
        key = normalize(name)
        names = {k: self.names(k) for k in kinds}
        found = [k for k in kinds if key in names[k] or key in self.clashes[k]]
        if len(found) == 1 and key in self.clashes[found[0]]:
            raise UserError(f"--plugin {token}: {self.clashes[found[0]][key]}")
        if len(found) == 1:
            return names[found[0]][key]
        if len(found) > 1:
            options = " or ".join(f"{k}:{names[k][key].spec.name if key in names[k] else name}" for k in found)
            raise UserError(f"--plugin {token}: several components have that name; write {options}")
        for b in self.broken:
            if b.may_provide(name):
                raise UserError(f"--plugin {token}: the plugin '{b.name}' that should provide it is broken: "
                                f"{b.summary()} (see `r2med plugins`)")
        known = sorted({e.spec.name for k in kinds for e in self.entries[k]})
        broken = "; ".join(f"'{b.name}' ({b.summary()})" for b in {b.name: b for b in self.broken}.values())
        raise UserError(f"--plugin {token}: no such component{_suggest(name, known)}. "
                        f"Installed: {', '.join(known) or 'none'} (see `r2med list retrievers`)"
                        + (f". Broken plugins, which may provide it: {broken} (see `r2med plugins`)"
                           if broken else ""))

    def llm(self, spec: str, **sampling) -> object:
        """A client for ``-o llm=PREFIX:MODEL`` (or ``BASE_URL#MODEL``) from the registered backends."""
        from ..llm.protocols import LLMClient
        from ..llm.secrets import show_url  # a URL spec may hold a password or key

        prefix = spec.split(":", 1)[0].strip().lower() if ":" in spec else ""
        backends = self.names("llm")
        if normalize(prefix) in self.clashes["llm"]:
            raise UserError(f"-o llm={show_url(spec)}: {self.clashes['llm'][normalize(prefix)]}")
        if normalize(prefix) not in backends:
            known = ", ".join(sorted(e.spec.name for e in self.entries["llm"])) or "none"
            raise UserError(f"-o llm={show_url(spec)}: no LLM backend '{prefix or show_url(spec)}'; write PREFIX:MODEL with a prefix "
                            f"among {known}, or BASE_URL#MODEL (see `r2med list llms`)")
        entry = backends[normalize(prefix)]
        client = entry.spec.create(spec, **sampling)
        if not isinstance(client, LLMClient):
            raise PluginError(f"llm '{entry.spec.name}' (from {entry.plugin.name}): its factory returned "
                              f"{type(client).__name__}, which lacks an LLM client's model, params and "
                              "generate(requests, on_result=, usage=) (r2med_tasks.llm.LLMClient)")
        return client

    def tasks(self, tokens: list[str]) -> list[TaskSpec]:
        """Resolve task names, aliases, group names or ``r2med`` (all eight) to task specs."""
        by_name = self.names("task")
        r2med = [e.spec for e in self.entries["task"] if e.spec.is_r2med]
        chosen: list[TaskSpec] = []
        for token in (t.strip() for raw in tokens for t in raw.split(",")):
            if not token:
                continue
            if token.lower() in GROUPS:
                found = [t for t in r2med if t.group == token.lower()]
            elif token.lower() in ("r2med", "all"):
                found = r2med
            elif normalize(token) in self.clashes["task"]:
                raise UserError(f"--tasks {token}: {self.clashes['task'][normalize(token)]}")
            elif normalize(token) in by_name:
                found = [by_name[normalize(token)].spec]
            else:
                known = [n for e in self.entries["task"] for n in _names_of(e.spec)] + list(GROUPS)
                raise UserError(f"--tasks {token}: no such task or group{_suggest(token, known)}. "
                                "See `r2med list tasks`")
            chosen += [t for t in found if t not in chosen]
        return chosen


def _names_of(spec) -> tuple[str, ...]:
    extra = (spec.short_name,) if isinstance(spec, TaskSpec) else ()
    return (spec.name, *extra, *spec.aliases)


def _suggest(name: str, known: list[str]) -> str:
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return f" (did you mean '{lowered[close[0]]}'?)" if close else ""


def build_registry(plugins: Plugins) -> Registry:
    registry = Registry(broken=plugins.broken)  # the list itself: a hook that fails below joins it
    for kind, hook_name in HOOKS.items():
        expected = EXPECTED[kind]
        taken: dict[str, Registered] = {}  # registry.names(kind) as it grows, not rebuilt for each entry
        for impl in getattr(plugins.pm.hook, hook_name).get_hookimpls():  # in registration order
            info = plugins.plugin_of(impl)
            collected: list[Registered] = []

            def register(spec, _info=info, _collected=collected, _expected=expected, _hook=hook_name):
                if not isinstance(spec, _expected):
                    raise TypeError(f"{_hook} got {type(spec).__name__}, expected {_expected.__name__}")
                _collected.append(Registered(spec, _info))

            try:
                impl.function(**{"register": register} if "register" in impl.argnames else {})
            except Exception as e:
                plugins.mark_broken(info, f"{hook_name} failed: {type(e).__name__}: {e}")
                continue
            for entry in collected:
                _add(registry, plugins, kind, entry, taken)
    return registry


def _add(registry: Registry, plugins: Plugins, kind: str, entry: Registered, taken: dict[str, Registered]) -> None:
    """Add ``entry``, unless one of its names is ``taken``: then that name, and each of ``entry``'s,
    fail when looked up, with a message saying how to choose."""
    clashing = [name for name in _names_of(entry.spec) if normalize(name) in taken]
    if not clashing:
        registry.entries[kind].append(entry)
        for name in _names_of(entry.spec):
            taken.setdefault(normalize(name), entry)
        return
    name = clashing[0]
    other = taken[normalize(name)]
    message = _clash_message(plugins, kind, name, other.plugin, entry.plugin)
    registry.conflicts.append(message)
    for clashed in _names_of(entry.spec):
        registry.clashes[kind].setdefault(normalize(clashed), message)


def _clash_message(plugins: Plugins, kind: str, name: str, first: PluginInfo, second: PluginInfo) -> str:
    both = (f"two {kind}s are named '{name}': one from {first.name} ({first.module}), "
            f"one from {second.name} ({second.module})")
    if first.name == second.name:
        return f"{both}; a bug in {first.name}: tell its authors"
    choices = []
    for keep, drop in ((first, second), (second, first)):
        settings = plugins.settings_without(drop)
        if settings:
            choices.append(f"{' '.join(settings)} for {keep.name}'s")
    if not choices:
        return f"{both}; uninstall one of the packages"
    return (f"{both}; to choose, run with {' or '.join(choices)} (R2MED_LOAD_PLUGINS names the third-party "
            "packages to load; the built-ins always load), or uninstall one of the packages")
