"""Plugin discovery: entry points of the ``r2med`` group, plus modules named in ``R2MED_PLUGINS``.

Built-in components live in the ``r2med`` distribution's own entry points, so they load exactly as
a third-party package does. A package that fails to import or register is recorded in
``broken`` (name, version, error) and everything else keeps working.

Environment:
- ``R2MED_LOAD_PLUGINS=a,b`` loads only those distributions' entry points (built-ins always load);
  an empty value loads none but the built-ins. The escape hatch when a plugin breaks things.
- ``R2MED_PLUGINS=pkg.module,...`` registers unpackaged modules, for developing a plugin.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from importlib.metadata import entry_points

import pluggy

from . import hookspecs

GROUP = "r2med"
OWN_DISTRIBUTION = "r2med"


@dataclass(frozen=True)
class PluginInfo:
    """Where registered components come from: a distribution (or a bare module) and its version."""

    name: str
    version: str | None
    module: str


@dataclass(frozen=True)
class BrokenPlugin:
    name: str
    version: str | None
    module: str
    error: str


class Plugins:
    """A plugin manager together with what each plugin is and which ones failed."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.info: dict[str, PluginInfo] = {}  # pluggy plugin name -> provenance
        self.broken: list[BrokenPlugin] = []

    def register(self, plugin: object, info: PluginInfo) -> None:
        """Register one plugin object; a plugin with invalid hooks is recorded as broken."""
        name = info.module if info.module not in self.info else f"{info.name}:{info.module}"
        try:
            self.pm.register(plugin, name=name)
            try:
                self.pm.check_pending()
            except pluggy.PluginValidationError:
                self.pm.unregister(name=name)
                raise
        except (pluggy.PluginValidationError, ValueError) as e:
            self.mark_broken(info, f"{type(e).__name__}: {e}")
            return
        self.info[name] = info

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self.info.pop(name, None)

    def mark_broken(self, info: PluginInfo, error: str) -> None:
        self.broken.append(BrokenPlugin(info.name, info.version, info.module, error))

    def load_entry_points(self) -> None:
        allowed = os.environ.get("R2MED_LOAD_PLUGINS")
        allowed_set = None if allowed is None else {a.strip() for a in allowed.split(",") if a.strip()}
        for ep in sorted(entry_points(group=GROUP), key=lambda e: (e.dist.name if e.dist else "", e.name)):
            dist = ep.dist.name if ep.dist else "?"
            version = ep.dist.version if ep.dist else None
            if allowed_set is not None and dist != OWN_DISTRIBUTION and dist not in allowed_set:
                continue
            info = PluginInfo(dist, version, ep.value)
            try:
                module = ep.load()
            except Exception as e:  # a broken package must not take the others down
                self.mark_broken(info, f"{type(e).__name__}: {e}")
                continue
            self.register(module, info)

    def load_modules(self, names: list[str]) -> None:
        for name in names:
            info = PluginInfo(name, None, name)
            try:
                module = importlib.import_module(name)
            except Exception as e:
                self.mark_broken(info, f"{type(e).__name__}: {e}")
                continue
            self.register(module, info)

    def plugin_of(self, impl) -> PluginInfo:
        return self.info.get(impl.plugin_name) or PluginInfo(impl.plugin_name, None, impl.plugin_name)


_plugins: Plugins | None = None


def get_plugins() -> Plugins:
    """The process-wide plugins, loaded on first use (never at import time)."""
    global _plugins
    if _plugins is None:
        _plugins = Plugins()
        _plugins.load_entry_points()
        extra = os.environ.get("R2MED_PLUGINS", "")
        _plugins.load_modules([m.strip() for m in extra.split(",") if m.strip()])
    return _plugins
