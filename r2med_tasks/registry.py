"""Components and tasks collected from the plugins' ``register_*`` hooks, and lookup by name.

Each hook implementation is called on its own so every spec knows which package registered it;
an exception in one plugin's hook marks that plugin broken and leaves the rest usable.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .components import SPEC_TYPES, ComponentSpec, LLMSpec
from .errors import UserError
from .plugins import PluginInfo, Plugins
from .tasks import GROUPS, TaskSpec, normalize

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

    def names(self, kind: str) -> dict[str, Registered]:
        """Normalized name and alias -> entry, for one kind."""
        out: dict[str, Registered] = {}
        for entry in self.entries[kind]:
            for name in _names_of(entry.spec):
                out.setdefault(normalize(name), entry)
        return out

    def check(self) -> None:
        if self.conflicts:
            raise UserError(self.conflicts[0])

    def component(self, token: str) -> Registered:
        """Resolve ``name`` or ``kind:name`` (e.g. ``retriever:bm25``) to one component."""
        kind, _, name = token.rpartition(":")
        if kind and kind not in KINDS:
            raise UserError(f"--plugin {token}: unknown kind '{kind}'; use one of {', '.join(KINDS)}")
        kinds = [kind] if kind else list(KINDS)
        matches = [self.names(k)[normalize(name)] for k in kinds if normalize(name) in self.names(k)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            options = " or ".join(f"{m.kind}:{m.spec.name}" for m in matches)
            raise UserError(f"--plugin {token}: several components have that name; write {options}")
        known = sorted({e.spec.name for k in kinds for e in self.entries[k]})
        raise UserError(f"--plugin {token}: no such component{_suggest(name, known)}. "
                        f"Installed: {', '.join(known) or 'none'} (see `r2med list retrievers`)")

    def llm(self, spec: str, **sampling) -> object:
        """A client for ``-o llm=PREFIX:MODEL`` (or ``BASE_URL#MODEL``) from the registered backends."""
        prefix = spec.split(":", 1)[0].strip().lower() if ":" in spec else ""
        backends = self.names("llm")
        if normalize(prefix) not in backends:
            known = ", ".join(sorted(e.spec.name for e in self.entries["llm"])) or "none"
            raise UserError(f"-o llm={spec}: no LLM backend '{prefix or spec}'; write PREFIX:MODEL with a prefix "
                            f"among {known}, or BASE_URL#MODEL (see `r2med list llms`)")
        return backends[normalize(prefix)].spec.create(spec, **sampling)

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
    registry = Registry()
    for kind, hook_name in HOOKS.items():
        expected = EXPECTED[kind]
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
                _add(registry, kind, entry)
    return registry


def _add(registry: Registry, kind: str, entry: Registered) -> None:
    taken = registry.names(kind)
    for name in _names_of(entry.spec):
        other = taken.get(normalize(name))
        if other is not None:
            registry.conflicts.append(
                f"two {kind}s are named '{name}': one from {other.plugin.name} ({other.plugin.module}), "
                f"one from {entry.plugin.name} ({entry.plugin.module}); uninstall one of the packages"
            )
            return
    registry.entries[kind].append(entry)
