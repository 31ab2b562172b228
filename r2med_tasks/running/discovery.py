"""Plugin discovery: entry points of the ``r2med`` group, plus unpackaged modules named in
``R2MED_PLUGINS``, for developing a plugin. Built-in components live in the ``r2med`` distribution's
own entry points, so they load exactly as a third-party package does, and load first. A package that
fails to import or register is recorded in ``broken`` and everything else keeps working;
``R2MED_LOAD_PLUGINS=a,b`` loads only those distributions' entry points (the built-ins always load),
the escape hatch when a plugin breaks things.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import os
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pluggy

from ..components import hookspecs
from ..errors import UserError

GROUP = "r2med"
OWN_DISTRIBUTION = "r2med"
EMPTY = '""'  # an empty setting, as a shell line writes it


@dataclass(frozen=True)
class PluginInfo:
    """Where registered components come from: a distribution, or a module ``R2MED_PLUGINS`` names
    (``unpackaged``), and its version."""

    name: str
    version: str | None
    module: str
    unpackaged: bool = False
    distribution: Any = field(default=None, compare=False, repr=False)

    @functools.cached_property  # once per process and plugin set (a frozen dataclass still has a __dict__)
    def code_version(self) -> str | None:
        """What identifies this plugin's code in a run's identity: its version, except for code that
        changes under one version (a module ``R2MED_PLUGINS`` names, a distribution installed from a
        local folder, editable or not), identified by a hash of its package's files. The ``r2med``
        distribution's built-ins keep its version."""
        if self.unpackaged or (self.name != OWN_DISTRIBUTION and _installed_from_path(self.distribution)):
            digest = source_digest(self.module)
            if digest is not None:
                return f"source-{digest[:12]}"
        return self.version


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that failed to import or register: ``entry_point``, the name of its entry point
    (None for a module ``R2MED_PLUGINS`` names)."""

    name: str
    version: str | None
    module: str
    error: str
    entry_point: str | None = None

    def may_provide(self, component: str) -> bool:
        """Whether ``component`` is named like this plugin (its entry point, its package or module,
        with or without an ``r2med-`` prefix): the name a user asks for when it is this plugin's
        component, which its failure left unregistered."""
        from ..tasks.specs import normalize

        module = self.module.partition(":")[0].strip().split(".")[0]
        names = {self.name, module, *([self.entry_point] if self.entry_point else [])}
        keys = {normalize(n) for n in names} | {normalize(n)[len("r2med"):] for n in names
                                                 if normalize(n).startswith("r2med")}
        return normalize(component) in keys - {""}

    def summary(self) -> str:
        return (self.error.strip().splitlines() or ["?"])[0]


class Plugins:
    """A plugin manager together with what each plugin is and which ones failed."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.info: dict[str, PluginInfo] = {}  # pluggy plugin name -> provenance
        self.broken: list[BrokenPlugin] = []
        self.distributions: set[str] = set()  # third-party packages loaded through entry points
        self.env_modules: list[str] = []  # the modules R2MED_PLUGINS names
        self.entry_point_names: dict[str, str] = {}  # an entry point's module -> its name

    def register(self, plugin: object, info: PluginInfo) -> None:
        """Register one plugin object (once: again is a no-op); a plugin with invalid hooks is
        recorded as broken."""
        if self.pm.is_registered(plugin):
            return
        name = info.module if info.module not in self.info else f"{info.name}:{info.module}"
        try:
            self.pm.register(plugin, name=name)
            try:
                self.pm.check_pending()
            except pluggy.PluginValidationError:
                self.pm.unregister(name=name)
                raise
        except pluggy.PluginValidationError as e:
            self.mark_broken(info, f"{type(e).__name__}: {e}")
            return
        except ValueError as e:  # a name taken: pluggy's message goes on to dump every plugin
            self.mark_broken(info, f"ValueError: {str(e).splitlines()[0]}")
            return
        self.info[name] = info

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self.info.pop(name, None)

    def mark_broken(self, info: PluginInfo, error: str) -> None:
        self.broken.append(BrokenPlugin(info.name, info.version, info.module, error,
                                        self.entry_point_names.get(info.module)))

    def load_entry_points(self) -> None:
        allowed = os.environ.get("R2MED_LOAD_PLUGINS")
        allowed_set = None if allowed is None else {a.strip() for a in allowed.split(",") if a.strip()}
        parsed: dict[int, tuple[str, str | None]] = {}
        found = [(ep, *_name_and_version(ep.dist, parsed)) for ep in entry_points(group=GROUP)]
        # the built-ins first: on a name clash, theirs is the one listed
        found.sort(key=lambda row: (row[1] != OWN_DISTRIBUTION, row[1], row[0].name))
        for ep, dist, version in found:
            if allowed_set is not None and dist != OWN_DISTRIBUTION and dist not in allowed_set:
                continue
            info = PluginInfo(dist, version, ep.value, distribution=ep.dist)
            self.entry_point_names.setdefault(ep.value, ep.name)
            try:
                module = ep.load()
            except Exception as e:  # a broken package must not take the others down
                self.mark_broken(info, f"{type(e).__name__}: {e}")
                continue
            self.register(module, info)
            if dist != OWN_DISTRIBUTION and self.pm.is_registered(module):
                self.distributions.add(dist)

    def load_modules(self, names: list[str]) -> None:
        self.env_modules += names
        for name in names:
            info = PluginInfo(name, None, name, unpackaged=True)
            try:
                module = importlib.import_module(name)
            except Exception as e:
                self.mark_broken(info, f"{type(e).__name__}: {e}")
                continue
            self.register(module, info)

    def settings_without(self, info: PluginInfo) -> list[str]:
        """The environment settings that leave ``info``'s package out of a run (none for the
        built-ins, which always load)."""
        settings = []
        if info.name in self.distributions:
            rest = ",".join(sorted(self.distributions - {info.name}))
            settings.append(f"R2MED_LOAD_PLUGINS={rest or EMPTY}")
        module = info.module.partition(":")[0]
        if module in self.env_modules:
            rest = ",".join(m for m in self.env_modules if m != module)
            settings.append(f"R2MED_PLUGINS={rest or EMPTY}")
        return settings

    def plugin_of(self, impl) -> PluginInfo:
        return self.info.get(impl.plugin_name) or PluginInfo(impl.plugin_name, None, impl.plugin_name)


def _name_and_version(dist, parsed: dict[int, tuple[str, str | None]]) -> tuple[str, str | None]:
    """A distribution's name and version, its metadata parsed once per discovery (``.name`` and
    ``.version`` each parse it again; a distribution's entry points share one ``dist``)."""
    if dist is None:
        return "?", None
    if id(dist) not in parsed:
        metadata = dist.metadata
        parsed[id(dist)] = metadata["Name"], metadata["Version"]
    return parsed[id(dist)]


def _installed_from_path(dist: Any) -> bool:
    """Whether a distribution was installed from a local folder or file (pip's ``direct_url.json``
    has a ``file://`` url: ``pip install -e .``, ``pip install ./pkg``)."""
    if dist is None:
        return False
    try:
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(url, str) and url.startswith("file://")


MAX_SOURCE_FILES = 10_000  # files of a plugin package hashed for its identity; more is refused
MAX_SOURCE_BYTES = 256 * 2**20  # their bytes together; more is refused
NOT_SOURCE = ("py.typed",)  # PEP 561's empty marker: no content to identify


def source_files(module: str) -> list[tuple[str, Path]]:
    """The files that identify ``module``'s code (:func:`source_digest`): every file under its
    top-level package's folder, code and data alike, through links (the one file, for a top-level
    module), leaving out what Python writes or no program reads; none where there is no such source.
    A package beyond :data:`MAX_SOURCE_FILES` or :data:`MAX_SOURCE_BYTES` is refused in one line,
    never hashed for minutes."""
    from ..components.model_refs import walk_files

    top = module.partition(":")[0].strip().split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    files: list[tuple[str, Path]] = []
    if spec.submodule_search_locations is not None:  # a package (a namespace package: each of its folders)
        for location in spec.submodule_search_locations:
            found = walk_files(Path(location), skip_folder=_not_source_folder, skip_file=_not_source_file,
                               limit=MAX_SOURCE_FILES - len(files))
            if found is None:
                raise UserError(_too_large(top, location, f"more than {MAX_SOURCE_FILES} files"))
            files += found
    elif spec.has_location and spec.origin and spec.origin.endswith(".py"):
        files = [(Path(spec.origin).name, Path(spec.origin))]
    try:
        size = sum(file.stat().st_size for _, file in files)
    except OSError:
        return []
    if size > MAX_SOURCE_BYTES:
        location = next(iter(spec.submodule_search_locations or [spec.origin]))
        raise UserError(_too_large(top, location, f"{_size_text(size)} of files"))
    return sorted(files)


def source_digest(module: str) -> str | None:
    """sha256 of ``module``'s top-level package, whole (:func:`source_files`), by relative path. None
    where there is no such source."""
    files = source_files(module)
    if not files:
        return None
    h = hashlib.sha256()
    for relative, file in files:
        try:
            data = file.read_bytes()
        except OSError:
            return None
        h.update(f"{relative}\0{len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()


def _not_source_folder(name: str) -> bool:
    return name == "__pycache__" or _not_source_file(name)


def _not_source_file(name: str) -> bool:
    return name.startswith((".", "#")) or name.endswith(("~", ".pyc", ".pyo")) or name in NOT_SOURCE


def _size_text(size: int) -> str:
    for unit, name in ((2**30, "GiB"), (2**20, "MiB")):
        if size >= unit:
            return f"{size / unit:.1f} {name}"
    return f"{size} bytes"


def _too_large(top: str, location: str, what: str) -> str:
    return (f"plugin {top}: its package ({location}) holds {what}; a plugin loaded from source (R2MED_PLUGINS, or "
            f"installed from a local folder) is identified by a hash of its whole package, at most "
            f"{MAX_SOURCE_FILES} files and {MAX_SOURCE_BYTES // 2**20} MiB: keep large data (weights, corpora) "
            "outside the package and name it with an option (a model folder given with -o model= is identified by "
            "its content)")


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
