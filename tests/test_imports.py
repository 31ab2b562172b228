"""Import boundaries, read from the source with ``ast`` (nothing is imported to check them).

Every ``import`` / ``from ... import`` statement of every module of ``r2med_tasks`` and
``r2med_plugins`` counts, at module level and inside functions alike (a lazy import is still a
dependency), relative imports resolved against the importing module's package. The rules:

(a) A built-in plugin package (``r2med_plugins.X``: the entry-point modules ``datasets``, ``bm25``,
    ``dense``, ``gar``, ``hybrid``, ``llm``, ``rerank``, ``run_file``) never imports another one,
    except the shared helper modules (:data:`SHARED_HELPERS`: what only built-in plugins use, kept
    out of the core so the plugin API stays small).
(b) Plugins use only the core's public API: the namespace :data:`PLUGIN_API` and the few places in
    :data:`OTHER_PUBLIC`, and from each only the names of its ``__all__``; docs/writing-plugins.md
    lists the namespace's names and ``r2med_tasks.llm``'s exactly, and both stay small. The rest of
    the core (sub-packages, runner, registry, cli, results layout, ...) may change freely.
(c) No import cycles among ``r2med_tasks`` modules. Importing ``a.b.c`` runs the package ``a.b``'s
    ``__init__`` too, so that import counts as an edge to ``a.b`` as well (unless the importer lies
    inside ``a.b``, which is then already imported). Imports under ``if TYPE_CHECKING:`` never run
    and are left out of this rule only.
(d) The library never imports the command line: no module outside ``r2med_tasks.cli`` imports it.
(e) Modules along their seams: a split package's modules import each other in one order
    (:data:`LAYERS`); only ``r2med_tasks.llm.endpoint`` imports the openai SDK; no module shadows a
    data folder; no runtime module imports the build tools (``tools/``) or is a script itself; the
    page's CSS and JS are package data; a constant's value is written in one module (known
    exceptions in :data:`ALLOWED_SAME_VALUE`, likewise only shrinking) and a core name names one thing.

Known exceptions are listed in :data:`ALLOWED_CROSS_PLUGIN` with who removes them; an entry
that no longer matches any import fails :func:`test_allowlist_has_no_stale_entries`, so the list
only shrinks.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import r2med_plugins
import r2med_tasks
from conftest import syntax_tree

CORE = "r2med_tasks"
PLUGINS = "r2med_plugins"

# Where plugins import the core from: one namespace (docs/writing-plugins.md, "The plugin API"), and
# at most three other public places (the LLM transport for API backends; a plugin's own tests).
PLUGIN_API = "r2med_tasks.plugin"
OTHER_PUBLIC = {
    "r2med_tasks.llm",  # endpoints, retries, concurrency of API backends
    "r2med_tasks.testing",  # a plugin's own tests: load_plugin, run_on_sample
}
PUBLIC = {PLUGIN_API, *OTHER_PUBLIC}
LLM_API = "r2med_tasks.llm"

# Modules of r2med_plugins that the built-in plugins share (local models on devices, top-k): not
# plugins themselves (no entry point), importing only the public core.
SHARED_HELPERS = {"local_models", "ranking"}

# (importing plugin package, imported plugin package) -> who removes it. Keep it shrinking.
# (gar -> bm25, LameR's first-stage BM25 in gar/rewriter.py, was the last one; the lead removed it.)
ALLOWED_CROSS_PLUGIN: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    importer: str  # module name
    target: str  # module name (the deepest known module the statement names)
    name: str | None  # the name imported from ``target`` (from-imports of a non-module name)
    line: int
    type_only: bool  # under ``if TYPE_CHECKING:``

    def where(self) -> str:
        return f"{self.importer}:{self.line}"


def module_files() -> dict[str, Path]:
    """Module name -> file, for every module of both packages."""
    out = {}
    for package, root in ((CORE, Path(r2med_tasks.__file__).parent), (PLUGINS, Path(r2med_plugins.__file__).parent)):
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


MODULES = module_files()


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for sub in ast.walk(child):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno)
    return lines


def _resolve(importer: str, level: int, module: str | None) -> str:
    is_package = MODULES[importer].name == "__init__.py"
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def imports_of(importer: str) -> list[Import]:
    tree = syntax_tree(MODULES[importer])
    type_only = _type_checking_lines(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(importer, alias.name, None, node.lineno, node.lineno in type_only))
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(importer, node.level, node.module) if node.level else node.module
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:  # ``from package import module``
                    found.append(Import(importer, sub, None, node.lineno, node.lineno in type_only))
                else:
                    found.append(Import(importer, base, alias.name, node.lineno, node.lineno in type_only))
    return found


@functools.cache
def all_imports() -> list[Import]:
    """Every import statement of the project's modules (parsed when a test first asks: on the worker
    that runs these tests, not at every worker's collection)."""
    return [i for m in MODULES for i in imports_of(m)]


def plugin_package(module: str) -> str | None:
    """``bm25`` for ``r2med_plugins.bm25.index``; ``None`` outside ``r2med_plugins``."""
    parts = module.split(".")
    return parts[1] if parts[0] == PLUGINS and len(parts) > 1 else None


def cross_plugin_imports() -> list[tuple[tuple[str, str], Import]]:
    out = []
    for imp in all_imports():
        src, dst = plugin_package(imp.importer), plugin_package(imp.target)
        if src and dst and src != dst and dst not in SHARED_HELPERS:
            out.append(((src, dst), imp))
    return out


# ---------------------------------------------------------------- the walker itself


def test_walker_sees_lazy_and_relative_imports():
    """The rules are only as good as the walk: a function-level import and relative imports of
    both kinds must be found and resolved."""
    dense = imports_of("r2med_plugins.dense")
    assert any(i.target == "r2med_plugins.dense.st" for i in dense)  # ``from .st import`` inside a hook
    assert any(i.target == "r2med_plugins.dense.models" and not i.type_only for i in dense)  # module level
    core = imports_of("r2med_tasks.results.folder")
    assert any(i.target == "r2med_tasks.files.atomic" and i.name is None for i in core)  # ``from . import atomic``
    assert any(i.target == "r2med_tasks.mteb_adapter" for i in core)  # inside a method
    tasks = imports_of("r2med_tasks.tasks.specs")
    assert any(i.target.startswith("mteb") and i.type_only for i in tasks)  # TYPE_CHECKING seen as such
    assert {"r2med_plugins.bm25", "r2med_plugins.dense", "r2med_plugins.gar", "r2med_plugins.rerank",
            "r2med_plugins.run_file", "r2med_plugins.hybrid", "r2med_plugins.datasets"} <= set(MODULES)


# ---------------------------------------------------------------- (a) plugins never import each other


def test_no_plugin_package_imports_another():
    found = [f"{imp.where()} imports {imp.target} ({src} -> {dst}); shared code belongs in r2med_tasks, or in "
             "a shared helper module (SHARED_HELPERS)"
             for (src, dst), imp in cross_plugin_imports() if (src, dst) not in ALLOWED_CROSS_PLUGIN]
    assert not found, "\n".join(found)


def test_the_shared_helper_modules_are_no_plugins():
    """A shared helper module registers nothing (no entry point) and imports no plugin package."""
    import tomllib

    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["r2med"]
    assert not {v.rpartition(".")[2] for v in entry_points.values()} & SHARED_HELPERS
    assert all(f"{PLUGINS}.{name}" in MODULES for name in SHARED_HELPERS)
    bad = [f"{imp.where()} imports {imp.target}" for imp in all_imports()
           if plugin_package(imp.importer) in SHARED_HELPERS and plugin_package(imp.target) not in (None, *SHARED_HELPERS)]
    assert not bad, "\n".join(bad)


def test_allowlist_has_no_stale_entries():
    used = {pair for pair, _ in cross_plugin_imports()}
    stale = [f"{pair}: {why}" for pair, why in ALLOWED_CROSS_PLUGIN.items() if pair not in used]
    assert not stale, "no longer imported; remove from ALLOWED_CROSS_PLUGIN:\n" + "\n".join(stale)


# ---------------------------------------------------------------- (b) only the public core


@functools.cache
def exported_names(module: str) -> frozenset[str] | None:
    """A module's ``__all__`` as its source writes it (None without one)."""
    for node in syntax_tree(MODULES[module]).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return frozenset(ast.literal_eval(node.value))
    return None


def test_plugins_use_only_the_public_core():
    """From a public module with an ``__all__`` (the package, ``r2med_tasks.llm``), only its names:
    its own modules' layout may change."""
    bad = []
    for imp in all_imports():
        if not imp.importer.startswith(PLUGINS) or not (imp.target == CORE or imp.target.startswith(CORE + ".")):
            continue
        if imp.target not in PUBLIC or any(p.startswith("_") for p in imp.target.split(".")):
            bad.append(f"{imp.where()} imports {imp.target}, which is not public core API")
        elif imp.name is not None and imp.name.startswith("_"):
            bad.append(f"{imp.where()} imports private name {imp.name} from {imp.target}")
        elif imp.name is not None and imp.name not in (exported_names(imp.target) or {imp.name}):
            bad.append(f"{imp.where()} imports {imp.name} from {imp.target}, which is not in its __all__")
    assert not bad, "\n".join(bad)


def test_public_modules_exist():
    missing = sorted(m for m in PUBLIC if m not in MODULES)
    assert not missing, f"PUBLIC names modules that do not exist: {missing}"
    assert len(OTHER_PUBLIC) <= 3, "one namespace and at most three other public places"


def test_the_plugin_api_exports_what_plugins_use():
    """Every name a built-in plugin takes from the core comes from the namespace or a public place's
    ``__all__`` (checked above); here, the other way: each exported name exists."""
    import importlib

    namespace = importlib.import_module(PLUGIN_API)
    missing = [name for name in exported_names(PLUGIN_API) if not hasattr(namespace, name)]
    assert not missing, f"{PLUGIN_API}.__all__ names what it does not define: {missing}"


def plugin_api_section(title: str = "The plugin API") -> str:
    page = (ROOT / "docs" / "writing-plugins.md").read_text(encoding="utf-8")
    return page.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("module,title", [(PLUGIN_API, "The plugin API"), (LLM_API, "LLM and API backends")])
def test_the_docs_list_the_public_names_exactly(module, title):
    """docs/writing-plugins.md's section on each public place lists, in its tables, each exported name
    once (in the first column, in backticks), and no name the module does not export."""
    rows = [line for line in plugin_api_section(title).splitlines() if line.startswith("| `")]
    listed = [name for row in rows for name in re.findall(r"`([A-Za-z0-9_]+)`", row.split(" | ")[0])]
    exported = exported_names(module)
    assert not {n for n in listed if listed.count(n) > 1}, "listed twice"
    assert set(listed) == exported, (f"exported, not documented: {sorted(exported - set(listed))}; "
                                     f"documented, not exported: {sorted(set(listed) - exported)}")


def test_the_plugin_api_is_learned_in_an_afternoon():
    """At most 40 names in the namespace and 18 for LLM and API backends, under 60 together (simonw/llm
    has about 37): a name more is a concept more for every plugin author."""
    plugin, llm = exported_names(PLUGIN_API), exported_names(LLM_API)
    assert len(plugin) <= 40, f"{len(plugin)} names in {PLUGIN_API}.__all__"
    assert len(llm) <= 18, f"{len(llm)} names in {LLM_API}.__all__"
    assert len(plugin) + len(llm) < 60 and not plugin & llm, "the two namespaces overlap or together hold 60"


def test_the_docs_name_the_other_public_places():
    section = plugin_api_section()
    missing = [m for m in OTHER_PUBLIC if f"`{m}`" not in section]
    assert not missing, f"docs/writing-plugins.md, The plugin API, does not name {missing}"


# ---------------------------------------------------------------- (c) no cycles in the core


def runs_on_import(importer: str, target: str) -> list[str]:
    """The modules an import of ``target`` runs: ``target`` and each package above it that is not
    above the importer (those are imported already)."""
    parts = target.split(".")
    above = [".".join(parts[:i]) for i in range(1, len(parts))]
    return [target, *(p for p in above if not (importer == p or importer.startswith(p + ".")))]


def core_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES if m == CORE or m.startswith(CORE + ".")}
    for imp in all_imports():
        if imp.importer not in graph or imp.type_only:
            continue
        for target in runs_on_import(imp.importer, imp.target):
            if target in graph and target != imp.importer:
                graph[imp.importer].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_package_init_edges_count():
    """``from r2med_tasks.cli.run import x`` in a library module runs ``r2med_tasks/cli/__init__``,
    which imports every command: the edge the cycle check must see."""
    assert runs_on_import("r2med_tasks.sweep", "r2med_tasks.cli.run") == ["r2med_tasks.cli.run", "r2med_tasks.cli"]
    assert runs_on_import("r2med_tasks.cli.sweep", "r2med_tasks.cli.common") == ["r2med_tasks.cli.common"]
    assert find_cycle({"r2med_tasks.sweep": {"r2med_tasks.cli"}, "r2med_tasks.cli": {"r2med_tasks.cli.sweep"},
                       "r2med_tasks.cli.sweep": {"r2med_tasks.sweep"}}) is not None


def test_the_library_never_imports_the_command_line():
    cli = f"{CORE}.cli"
    bad = [f"{imp.where()} imports {imp.target}" for imp in all_imports()
           if not (imp.importer == cli or imp.importer.startswith(cli + "."))
           and any(t == cli or t.startswith(cli + ".") for t in runs_on_import(imp.importer, imp.target))]
    assert not bad, "the library imports the command line:\n" + "\n".join(bad)


def test_no_import_cycles_in_the_core():
    cycle = find_cycle(core_graph())
    assert cycle is None, "import cycle (lazy imports count): " + " -> ".join(cycle)


# ---------------------------------------------------------------- (c') layers: imports flow one way

# The core's top-level modules and sub-packages, lowest layer first (docs/architecture.md draws them):
# a module imports only from its own unit and the layers below, lazy imports included (type-only ones
# aside). The package's own __init__ stands outside.
ARCHITECTURE = [
    {"errors", "terminal", "mteb_adapter"},  # leaves: import nothing of r2med
    {"files"}, {"scoring"}, {"tasks"}, {"llm"}, {"components"}, {"results"}, {"plugin"}, {"running"}, {"board"},
    {"api"}, {"sweep"}, {"testing"}, {"cli"},
]
OUTSIDE_LAYERS = {CORE}


def unit_of(module: str) -> str:
    return module.split(".")[1]


def layer_of(unit: str) -> int:
    return next(i for i, layer in enumerate(ARCHITECTURE) if unit in layer)


def test_every_core_unit_has_a_layer():
    units = {unit_of(m) for m in MODULES if m.startswith(CORE + ".") and m not in OUTSIDE_LAYERS}
    placed = set().union(*ARCHITECTURE)
    assert units == placed, f"without a layer: {sorted(units - placed)}; gone: {sorted(placed - units)}"


def test_imports_flow_one_way_between_layers():
    bad = []
    for imp in all_imports():
        if imp.type_only or imp.importer in OUTSIDE_LAYERS or not imp.importer.startswith(CORE + "."):
            continue
        for target in runs_on_import(imp.importer, imp.target):
            if not target.startswith(CORE + ".") or target in OUTSIDE_LAYERS:
                continue
            me, it = unit_of(imp.importer), unit_of(target)
            if layer_of(it) > layer_of(me) or (layer_of(it) == layer_of(me) and it != me and len(ARCHITECTURE[layer_of(me)]) > 1):
                bad.append(f"{imp.where()} ({me}) imports {target} ({it}), a layer above or beside it")
    assert not bad, "\n".join(bad)


def test_type_only_imports_flow_one_way_too():
    """A name imported for annotations only still names a layer above: ``results.perquery`` once took
    ``running.registry.Registry`` for a parameter's type; it takes the registry's lookup instead."""
    bad = []
    for imp in all_imports():
        if not imp.type_only or imp.importer in OUTSIDE_LAYERS or not imp.importer.startswith(CORE + "."):
            continue
        for target in runs_on_import(imp.importer, imp.target):
            if target.startswith(CORE + ".") and target not in OUTSIDE_LAYERS and \
                    layer_of(unit_of(target)) > layer_of(unit_of(imp.importer)):
                bad.append(f"{imp.where()} imports {target} for its types, a layer above")
    assert not bad, "\n".join(bad)


def test_the_top_level_stays_small():
    """Sixteen modules at most beside the sub-packages (mteb has 14, pyserini 14): a new module
    belongs in the sub-package of its concern."""
    top = sorted(p.name for p in (ROOT / CORE).glob("*.py"))
    assert len(top) <= 16, f"{len(top)} modules at the top of r2med_tasks: {top}"


@pytest.mark.process  # what an import changes shows only in a fresh interpreter
def test_importing_the_commands_changes_no_global_state():
    """Importing r2med (the commands included) leaves the process as it found it: the import system,
    the standard streams, the Ctrl-C handler and the warning filters. What a command needs of them it
    sets when it runs (``cli._process``), so importing r2med in a notebook or a test changes nothing."""
    code = (
        "import signal, sys, warnings\n"
        "before = (list(sys.meta_path), list(sys.path_hooks), sys.stdout, sys.stderr, sys.stdin, "
        "signal.getsignal(signal.SIGINT), list(warnings.filters), sys.getrecursionlimit())\n"
        "import r2med_tasks, r2med_tasks.plugin, r2med_tasks.cli\n"
        "after = (list(sys.meta_path), list(sys.path_hooks), sys.stdout, sys.stderr, sys.stdin, "
        "signal.getsignal(signal.SIGINT), list(warnings.filters), sys.getrecursionlimit())\n"
        "print([i for i, (a, b) in enumerate(zip(before, after)) if a != b])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


# ---------------------------------------------------------------- (e) modules along their seams

ROOT = Path(r2med_tasks.__file__).parent.parent

# A package split into modules, in the order they may import each other: a module imports only
# the ones before it (type-only imports aside) and never its own package (whose __init__ gathers
# them); the package's __init__ imports only its modules (sweep's: none).
LAYERS = {
    "r2med_tasks.llm": ["secrets", "transport", "endpoint", "specs", "answers", "usage", "messages", "served", "protocols",
                        "template", "chat", "cache", "records"],
    "r2med_tasks.sweep": ["sources", "plan", "board", "executors"],
}


def test_split_packages_import_their_modules_in_order():
    bad = []
    for package, order in LAYERS.items():
        modules = sorted(m.rpartition(".")[2] for m in MODULES if m.startswith(package + "."))
        if sorted(order) != modules:
            bad.append(f"{package}: modules {modules}, but LAYERS lists {sorted(order)}; place each in the order")
        for imp in all_imports():
            inside = imp.target == package or imp.target.startswith(package + ".")
            if imp.type_only or not inside or imp.importer == imp.target:
                continue
            if imp.importer == package:
                if package == "r2med_tasks.sweep" or imp.target == package:
                    bad.append(f"{imp.where()}: the package's __init__ imports {imp.target}")
                continue
            if not imp.importer.startswith(package + "."):
                continue
            me, it = imp.importer.rpartition(".")[2], imp.target.rpartition(".")[2]
            if imp.target == package:
                bad.append(f"{imp.where()} imports its own package {package} (import the module instead)")
            elif order.index(it) >= order.index(me):
                bad.append(f"{imp.where()} imports {imp.target}, which comes after it in {package}: {order}")
    assert not bad, "\n".join(bad)


def test_the_core_imports_the_llm_modules_not_the_namespace():
    """``r2med_tasks.llm.__all__`` is what a backend's author needs; the core imports what it uses
    from the modules that define it (``r2med_tasks.llm.cache``), so the namespace holds no name for
    the core's sake."""
    bad = [f"{imp.where()} imports {imp.name} from {LLM_API}" for imp in all_imports()
           if imp.importer.startswith(CORE + ".") and imp.target == LLM_API and imp.name is not None]
    assert not bad, "\n".join(bad)


def test_only_the_endpoint_module_imports_the_openai_sdk():
    """One place builds the SDK's client and handles its errors: the chat client and the embedding
    encoders share it (``r2med_tasks.llm.Endpoint``), never a copy."""
    bad = [f"{imp.where()} imports {imp.target}" for imp in all_imports()
           if imp.target.split(".")[0] in ("openai", "httpx") and imp.importer != "r2med_tasks.llm.endpoint"]
    assert not bad, "\n".join(bad)


def test_no_module_shadows_a_data_folder():
    """``r2med_tasks/data/`` holds package data: no module named ``data`` (nor after any other
    folder without ``__init__.py``) may shadow it."""
    folders = [p for p in ROOT.joinpath("r2med_tasks").rglob("*") if p.is_dir() and p.name != "__pycache__"
               and not (p / "__init__.py").exists()]
    bad = [str(f.with_suffix(".py").relative_to(ROOT)) for f in folders if f.with_suffix(".py").exists()]
    assert not bad, f"modules named like a data folder: {bad}"


def test_runtime_modules_never_import_the_build_tools():
    """The generators of shipped files live in ``tools/`` (not packaged); the library and plugins
    neither import them nor carry a ``__main__`` block of their own."""
    bad = [f"{imp.where()} imports {imp.target}" for imp in all_imports() if imp.target.split(".")[0] == "tools"]
    for module, path in MODULES.items():
        tree = syntax_tree(path)
        if any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body):
            bad.append(f"{module}: an `if __name__ == '__main__'` block (a generator belongs in tools/)")
    assert not bad, "\n".join(bad)
    assert {"published_record", "published_results", "runs_table"} <= {p.stem for p in (ROOT / "tools").glob("*.py")}


def test_the_page_keeps_its_style_and_script_in_package_data():
    """html.py writes the page; its CSS and JavaScript are files (``r2med_tasks/data/page/``),
    so no string in the module but its docstrings is longer than a line or two of markup."""
    tree = syntax_tree(MODULES["r2med_tasks.board.html"])
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(n) is not None}
    long = [(n.lineno, len(n.value)) for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and len(n.value) > 500 and id(n) not in docstrings]
    assert not long, f"r2med_tasks/board/html.py: long strings (line, length) {long}; keep CSS/JS in data/page/"
    assert {p.name for p in (ROOT / "r2med_tasks" / "data" / "page").iterdir()} >= {"leaderboard.css", "leaderboard.js"}


# (module.CONSTANT, module.CONSTANT) written with the same value in two places -> who removes it.
ALLOWED_SAME_VALUE: dict[frozenset[str], str] = {}


def _constant_values() -> dict[str, list[str]]:
    """The source of each module-level constant that is a literal or a compiled pattern (12
    characters or more) -> where it is written (``module.NAME``)."""
    def literal(value: ast.expr) -> bool:
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "re.compile":
            return all(isinstance(a, ast.Constant) for a in value.args)
        try:
            ast.literal_eval(value)
        except ValueError:
            return False
        return True

    found: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for node in syntax_tree(path).body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if (isinstance(target, ast.Name) and target.id.lstrip("_").isupper() and literal(node.value)
                        and len(ast.unparse(node.value)) >= 12):
                    found.setdefault(ast.dump(node.value), []).append(f"{module}.{target.id}")
    return found


@functools.cache
def _repeated_constants() -> dict[frozenset[str], list[str]]:
    return {frozenset(places): places for places in _constant_values().values()
            if len({p.rpartition(".")[0] for p in places}) > 1}


def test_each_constant_has_one_home():
    """A value written in two modules drifts apart (the fusion defaults had four homes, the task
    names' short forms two): one module defines it, the others import it."""
    bad = [f"the same value in {', '.join(sorted(places))}" for key, places in _repeated_constants().items()
           if key not in ALLOWED_SAME_VALUE]
    assert not bad, "\n".join(bad)


def test_same_value_allowlist_has_no_stale_entries():
    stale = [f"{sorted(k)}: {why}" for k, why in ALLOWED_SAME_VALUE.items() if k not in _repeated_constants()]
    assert not stale, "no longer repeated; remove from ALLOWED_SAME_VALUE:\n" + "\n".join(stale)


def test_each_core_name_is_defined_once():
    """Two core modules never define a public function or class of the same name (there were two
    ``registry()`` and two ``run_command``): a name says which thing it is."""
    defined: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if not module.startswith(CORE):
            continue
        for node in syntax_tree(path).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(module)
    bad = [f"{name}: {', '.join(where)}" for name, where in defined.items() if len(where) > 1]
    assert not bad, "defined in several core modules:\n" + "\n".join(bad)


# The suffixes of a results folder's files (r2med_tasks.results.layout's *_SUFFIX constants; a TaskResult's
# ".json" and a kept file's ".jsonl" are too common to tell apart) and its own sub-folder.
RESULT_SUFFIXES = (".trec", ".per_query.tsv", ".identity.json", ".cost.json", ".files.json", ".partial.jsonl")
OWN_FOLDER = "r2med"


def _layout_leaks(tree: ast.AST) -> list[str]:
    """Where a module derives a results path itself: a literal naming a results file by its suffix
    (``f"{task}.trec"``, ``glob("*.per_query.tsv")``; a string with a space in it is a message, not
    a path), or a path inside the ``r2med/`` sub-folder (``folder / "r2med" / name``,
    ``glob("r2med/...")``; a path ending at a folder named r2med, such as the cache's, is another)."""
    def inside_own(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(f"{OWN_FOLDER}/")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and not any(c.isspace() for c in node.value) \
                and node.value.endswith(RESULT_SUFFIXES):
            found.append(f"{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and (inside_own(node.right) or (
                isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Div)
                and isinstance(node.left.right, ast.Constant) and node.left.right.value == OWN_FOLDER)):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "glob", "rglob", "joinpath") and any(inside_own(a) for a in node.args):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_layout_leak_finder_finds_leaks():
    source = ('a = folder / "r2med" / f"{task}.identity.json"\nb = folder.glob("*.trec")\n'
              'c = folder.glob("r2med/.*.tmp")\nd = folder / "r2med/pipeline.json"\n'
              'e = Path.home() / ".cache" / "r2med"\nf = f"no {task}.trec here"\n')
    assert sorted(leak.partition(":")[0] for leak in _layout_leaks(ast.parse(source))) == ["1", "1", "2", "3", "4"]


def test_only_the_layout_names_results_files():
    """Every path of a results folder is built from the results layout's naming rules
    (``r2med_tasks.results.layout``, its constants) by ``ResultsFolder``'s path methods
    (``r2med_tasks.results.folder``): a second derivation of one elsewhere drifts from it."""
    from r2med_tasks.results import layout

    assert set(RESULT_SUFFIXES) <= {v for k, v in vars(layout).items() if k.endswith("_SUFFIX")}
    assert layout.OWN_FOLDER == OWN_FOLDER
    bad = [f"{module}:{leak}" for module, path in MODULES.items()
           if module not in ("r2med_tasks.results.layout", "r2med_tasks.results.folder")
           for leak in _layout_leaks(syntax_tree(path))]
    assert not bad, "results paths built outside r2med_tasks.results (use layout's constants and ResultsFolder's paths):\n" \
        + "\n".join(bad)
