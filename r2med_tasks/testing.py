"""Helpers for a plugin's own tests (docs/writing-plugins.md, "Test it"): load the plugin as r2med
loads it and see what it registered, then run it on the sample task shipped with r2med::

    from r2med_tasks.testing import load_plugin, run_on_sample

    def test_it_registers_and_runs(tmp_path):
        assert load_plugin("r2med_example").components == {"retrievers": ["tfidf"]}
        sample = run_on_sample("tfidf", folder=tmp_path)
        assert sample.n_queries == 10 and 0 < sample.ndcg_at_10 <= 1

They work the same whether the package is installed or only importable (``pythonpath = ["."]``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import PluginError
from .results.outcomes import TaskOutcome

__all__ = ["LoadedPlugin", "load_plugin", "run_on_sample"]


@dataclass(frozen=True)
class LoadedPlugin:
    """A plugin as ``r2med plugins`` lists it; ``specs`` by ``kind:name`` (``"retriever:tfidf"``)."""

    name: str
    version: str | None
    components: dict[str, list[str]]
    specs: dict[str, Any] = field(repr=False)


def load_plugin(plugin: str | ModuleType) -> LoadedPlugin:
    """Load ``plugin`` as its entry point would, and return what it registered; a plugin whose hooks
    fail raises :class:`PluginError` with the reason ``r2med plugins`` would show."""
    from .running.discovery import get_plugins
    from .running.registry import build_registry

    module = importlib.import_module(plugin) if isinstance(plugin, str) else plugin
    plugins = get_plugins()
    info = _loaded_info(plugins, module)
    if info is None:
        info = _info_of(module)
        before = len(plugins.broken)
        plugins.register(module, info)
        if not plugins.pm.is_registered(module):
            raise PluginError(f"plugin {info.name} is broken: {plugins.broken[before].error}")
    seen = len(plugins.broken)
    registry = build_registry(plugins)
    failed = [b for b in plugins.broken[seen:] if b.module == info.module and b.name == info.name]
    if failed:
        raise PluginError(f"plugin {info.name} is broken: {failed[0].error}")
    components: dict[str, list[str]] = {}
    specs: dict[str, Any] = {}
    for kind, entries in registry.entries.items():
        for entry in entries:
            if entry.plugin == info:
                components.setdefault(kind + "s", []).append(entry.spec.name)
                specs[f"{kind}:{entry.spec.name}"] = entry.spec
    return LoadedPlugin(info.name, info.version, components, specs)


def _loaded_info(plugins, module: ModuleType):
    """The plugin's provenance when it is registered already (by its entry point, or an earlier call)."""
    name = plugins.pm.get_name(module) if plugins.pm.is_registered(module) else None
    if name is not None and name in plugins.info:
        return plugins.info[name]
    for info in plugins.info.values():  # an entry point naming an object of the module (pkg.mod:attr)
        if info.module.partition(":")[0].strip() == module.__name__:
            return info
    return None


def _info_of(module: ModuleType):
    """What an entry point would say of ``module``, else the module as ``R2MED_PLUGINS`` names it."""
    from importlib.metadata import PackageNotFoundError, distribution, packages_distributions

    from .running.discovery import PluginInfo

    top = module.__name__.split(".")[0]
    for name in packages_distributions().get(top, []):
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        return PluginInfo(dist.metadata["Name"], dist.metadata["Version"], module.__name__, distribution=dist)
    return PluginInfo(module.__name__, None, module.__name__, unpackaged=True)


def run_on_sample(*components: str, folder: str | Path, overwrite: bool = False, **options: Any) -> TaskOutcome:
    """Evaluate the pipeline of ``components`` on the sample task shipped with r2med (no download),
    results and caches under ``folder``; an earlier call's result is reused unless ``overwrite``."""
    from .api import evaluate, pipeline
    from .results.layout import DEFAULT_OUTPUT

    folder = Path(folder)
    outcome = evaluate(pipeline(*components, **options), tasks="sample", output=folder / DEFAULT_OUTPUT,
                       cache_dir=folder / "cache", overwrite=overwrite)
    return outcome["sample"]
