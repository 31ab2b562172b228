"""``r2med new-plugin NAME --kind KIND``: a plugin package to start from, in ``./r2med-NAME/``, as
llm's and datasette's plugin templates make theirs; it installs, ``r2med plugins`` lists it, it runs
on ``--tasks sample`` and passes its own test. The files are written from templates into a hidden
folder beside the new one, which is then renamed to it: a failure leaves nothing half-written, and
nothing is ever written over.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from string import Template

import click
from rich.markup import escape

from ..errors import UserError
from ..terminal import printable
from .common import installed_plugins, out, user_errors

# kind -> (the spec it registers, how a run selects it beside the built-in bm25, what it does)
PLUGIN_KINDS: dict[str, tuple[str, str, str]] = {
    "retriever": ("retriever", "--plugin {name}", "it indexes a task's corpus and scores its documents for each query"),
    "rewriter": ("rewriter", "--plugin {name} --plugin bm25",
                 "it adds generated text to each query before a retriever searches"),
    "reranker": ("reranker", "--plugin bm25 --plugin {name}",
                 "it reorders the top documents of a first-stage retriever"),
    "agent": ("rewriter", "--plugin {name} -o llm=vllm:Qwen/Qwen2.5-7B-Instruct --plugin bm25",
              "it is a rewriter that asks an LLM for a search query, searches the task's corpus and answers from what "
              "it found; the retriever after it searches with that answer"),
}
PLUGIN_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
NAME_LENGTH = 40


def _template(file: str) -> Template:
    from importlib.resources import files

    return Template(files("r2med_tasks").joinpath("data", "scaffold", file).read_text(encoding="utf-8"))


def plugin_files(name: str, kind: str, description: str) -> dict[str, str]:
    """The package's files, relative path -> text, for component ``name`` of ``kind``."""
    spec_kind, run, does = PLUGIN_KINDS[kind]
    snake = name.replace("-", "_")
    module = f"r2med_{snake}"
    values = {"name": name, "kind": kind, "spec_kind": spec_kind, "does": does, "package": f"r2med-{name}",
              "module": module, "snake": snake, "cls": "".join(part.capitalize() for part in name.split("-")),
              "run": run.format(name=name), "description": description,
              # a TOML basic string and a Python string literal alike
              "description_literal": json.dumps(description, ensure_ascii=False)}
    layout = {"pyproject.toml": "pyproject.toml.tmpl", "README.md": "README.md.tmpl", ".gitignore": "gitignore.tmpl",
              f"{module}/__init__.py": f"{kind}_init.py.tmpl", f"{module}/{kind}.py": f"{kind}.py.tmpl",
              f"tests/test_{snake}.py": f"{kind}_test.py.tmpl"}
    return {path: _template(file).substitute(values) for path, file in layout.items()}


def check_plugin_name(name: str) -> None:
    """A one-line UserError unless ``name`` can be a new plugin's component name: lowercase letters,
    digits and single hyphens; no installed component's name; its module and package not taken."""
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    from ..running.registry import KINDS
    from ..tasks.specs import normalize

    where = f"NAME {name!r}"  # repr: control characters escaped
    if not PLUGIN_NAME.fullmatch(name) or len(name) > NAME_LENGTH:
        raise UserError(f"{where}: a plugin's name is lowercase letters, digits and single hyphens, starting with a "
                        f"letter, at most {NAME_LENGTH} characters (e.g. my-retriever); choose another NAME")
    if name.startswith("r2med-"):
        raise UserError(f"{where}: NAME is the component's name and the package is r2med-NAME; drop the 'r2med-' "
                        f"prefix (r2med new-plugin {name.removeprefix('r2med-')})")
    package, module = f"r2med-{name}", f"r2med_{name.replace('-', '_')}"
    _, reg = installed_plugins()
    for kind in KINDS:  # names match whatever their case and hyphens, as --plugin matches them
        entry = reg.names(kind).get(normalize(name))
        if entry is not None or normalize(name) in reg.clashes[kind]:
            taken = f"the {kind} '{entry.spec.name}' of {entry.plugin.name} has" if entry else f"two {kind}s have"
            raise UserError(f"{where}: {taken} that name, so --plugin {name} would not say which; choose another NAME")
    try:
        installed = version(package)
    except PackageNotFoundError:
        installed = None
    if installed is not None:
        raise UserError(f"{where}: the package {package} {installed} is already installed; choose another NAME "
                        f"(or `pip uninstall {package}` first)")
    try:
        importable = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module of that name is loaded, or its finder fails
        importable = True
    if importable:
        raise UserError(f"{where}: a module named {module} can already be imported here; choose another NAME")


def write_plugin(name: str, kind: str, where: Path, description: str | None = None) -> Path:
    """Write the package of component ``name`` (of ``kind``, a key of :data:`PLUGIN_KINDS`) into the
    new folder ``where/r2med-NAME``, and return that folder. Files take the process's umask."""
    if kind not in PLUGIN_KINDS:
        raise UserError(f"--kind {kind!r}: choose one of {', '.join(PLUGIN_KINDS)}")
    check_plugin_name(name)
    description = f"An r2med {kind}: {name}." if description is None else description
    if not description.strip() or not description.isprintable():
        raise UserError(f"--description {description!r}: one line of text, without line breaks or "
                        "control characters")
    target = Path(where) / f"r2med-{name}"
    if os.path.lexists(target):
        raise UserError(f"{target}: already exists; choose another NAME, or move that folder away")
    files = plugin_files(name, kind, description.strip())
    building = target.with_name(f".{target.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    os.mkdir(building)  # as every folder and file below: the umask decides the mode
    try:
        for path, text in files.items():
            file = building / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text, encoding="utf-8")
        if os.path.lexists(target):  # made meanwhile: never replaced
            raise UserError(f"{target}: already exists; choose another NAME, or move that folder away")
        os.rename(building, target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return target


@click.command("new-plugin", short_help="Write a new plugin package.")
@click.argument("name")
@click.option("--kind", type=click.Choice(list(PLUGIN_KINDS)), default="retriever", show_default=True,
              help="What the plugin registers: a retriever, a rewriter, a reranker, or an agent (a rewriter "
                   "that asks an LLM and searches the task's corpus).")
@click.option("--description", metavar="TEXT", help="One line for the package's metadata and README.")
def new_plugin_command(name, kind, description):
    """Start a plugin: write the package of component NAME (lowercase letters, digits, hyphens) into
    a new folder ./r2med-NAME: pyproject.toml with the entry point, the options model, the
    component, a test and a README. It installs with `pip install -e`, `r2med plugins` lists it, it
    runs on `--tasks sample` and passes its own test."""
    with user_errors():
        folder = write_plugin(name, kind, Path.cwd(), description)
    shown = escape(printable(folder.name))
    run = PLUGIN_KINDS[kind][1]
    out.print(f"Created {shown}/, the package of the {kind} {escape(name)}:")
    for path in sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()):
        out.print(f"  {shown}/{escape(path)}")
    out.print("Next:")
    for line in (f"pip install -e './{folder.name}[test]'", "r2med plugins", f"r2med-run {run.format(name=name)} "
                 "--tasks sample", f"cd {folder.name} && python -m pytest"):
        out.print(f"  {escape(line)}")
