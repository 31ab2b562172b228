"""``r2med plugins [NAME]`` and ``r2med list``: what is installed, and each component's options."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from ..errors import UserError
from ..terminal import printable
from .common import err, installed_plugins, out, user_errors, warn_broken


@click.command("plugins", short_help="List installed plugin packages.")
@click.argument("component", required=False, metavar="[NAME]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plugins_command(component, as_json):
    """List installed plugin packages, their versions and components; with NAME (a retriever,
    rewriter or reranker, e.g. bm25 or reranker:monobert), describe that component and its options."""
    plugins, reg = installed_plugins()
    if component is not None:
        with user_errors():
            try:
                entry = reg.component(component)
            except UserError as e:  # "--plugin NAME: no such component ..." as this command's error
                raise UserError(f"r2med plugins {component}: {str(e).partition(': ')[2]}") from None
        show_component(entry, as_json, tasks=[e.spec for e in reg.entries["task"]])
        return
    rows: dict[tuple[str, str | None], dict] = {}
    for kind, entries in reg.entries.items():
        for e in entries:
            row = rows.setdefault((e.plugin.name, e.plugin.version),
                                  {"name": e.plugin.name, "version": e.plugin.version, "components": {}})
            row["components"].setdefault(kind + "s", []).append(e.spec.name)
    for b in plugins.broken:
        rows.setdefault((b.name, b.version), {"name": b.name, "version": b.version, "components": {}})["error"] = b.error
    data = sorted(rows.values(), key=lambda r: r["name"])
    if as_json:
        click.echo(json.dumps({"plugins": data, "conflicts": reg.conflicts}, indent=2))
        return
    table = Table()
    for col in ("Package", "Version", "Components", "Status"):
        table.add_column(col)
    for r in data:
        comps = "; ".join(f"{k}: {', '.join(v)}" for k, v in r["components"].items())
        table.add_row(escape(r["name"]), r["version"] or "-", escape(comps),
                      f"[red]broken: {escape(printable(r['error']))}[/]" if "error" in r else "ok")
    out.print(table)
    for c in reg.conflicts:
        err.print(f"[red]conflict:[/] {escape(printable(c))}")


@click.command("list", short_help="List tasks or components.")
@click.argument("what", type=click.Choice(["tasks", "retrievers", "rewriters", "rerankers", "llms"]))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_command(what, as_json):
    """List tasks or components."""
    plugins, reg = installed_plugins()
    warn_broken(plugins)
    kind = what[:-1]
    entries = reg.entries[kind]
    if kind == "task":
        rows = [{"name": e.spec.name, "alias": e.spec.short_name, "group": e.spec.group,
                 "hub_path": e.spec.hub_path, "revision": e.spec.revision,
                 "documents": e.spec.extra.get("n_docs"), "queries": e.spec.extra.get("n_queries"),
                 "plugin": e.plugin.name, "description": e.spec.description} for e in entries]
        columns = ("name", "alias", "group", "revision", "documents", "queries")
    elif kind == "llm":
        rows = [{"name": e.spec.name, "aliases": list(e.spec.aliases), "plugin": e.plugin.name,
                 "description": e.spec.description} for e in entries]
        columns = ("name", "aliases", "plugin", "description")
    else:
        rows = [{"name": e.spec.name, "aliases": list(e.spec.aliases), "plugin": e.plugin.name,
                 "version": e.plugin.version, "options": e.spec.option_schema(),
                 "description": e.spec.description, "reference": e.spec.reference} for e in entries]
        columns = ("name", "aliases", "plugin", "options", "description", "reference")
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    table = Table()
    for col in columns:
        table.add_column(col.capitalize())
    for r in rows:
        table.add_row(*(escape(_cell(col, r[col])) for col in columns))
    out.print(table)


def show_component(entry, as_json: bool, tasks=()) -> None:
    """One component: what it is, and a table of its options (type, default, bounds, help); for a
    component whose factory describes its inputs (the dense retrievers), the text each task's
    query and documents become."""
    spec = entry.spec
    options = spec.option_schema()
    described = component_inputs(spec, tasks)
    if as_json:
        click.echo(json.dumps({"kind": spec.kind, "name": spec.name, "aliases": list(spec.aliases),
                               "plugin": entry.plugin.name, "version": entry.plugin.version,
                               "description": spec.description, "reference": spec.reference,
                               "options": options, **described}, indent=2))
        return
    aliases = f" (also: {', '.join(spec.aliases)})" if spec.aliases else ""
    version = f" {entry.plugin.version}" if entry.plugin.version else ""
    out.print(f"[bold]{spec.kind} {escape(spec.name)}[/]{escape(aliases)}, from {escape(entry.plugin.name + version)}")
    if spec.description:
        out.print(escape(spec.description))
    if spec.reference:
        out.print(f"Reference: {escape(spec.reference)}")
    if not options:
        out.print("No options.")
    else:
        out.print(f"Options: -o KEY=VALUE (or -o {escape(spec.name)}.KEY=VALUE in a pipeline)")
        table = Table()
        for col in ("Option", "Accepts", "Default", "Description"):
            table.add_column(col)
        for key, o in options.items():
            note = (" [runtime: never changes results]" if o["runtime"] else
                    " [chooses the model: identified by its name and revision]" if o["model"] else "")
            default = "(required)" if o["required"] else _default(o["default"])
            table.add_row(escape(key), escape(o["accepts"]), escape(default), escape(o["description"] + note))
        out.print(table)
    if described:
        show_inputs(described)


INPUT_KINDS = {"query": "Query", "document": "Document", "generated": "Generated document"}


def component_inputs(spec, tasks) -> dict:
    """``{"inputs": {task: {"query": ..., "document": ..., "generated": ...}}, "input_notes": [...]}``
    from a factory with ``describe_inputs(tasks)``, ``{text}`` standing for an input's own text;
    ``{}`` for any other factory. A plugin whose description fails is named, not fatal."""
    describe = getattr(spec.factory, "describe_inputs", None)
    if not callable(describe):
        return {}
    try:
        described = describe(list(tasks))
        inputs = {str(t): {k: str(v[k]) for k in INPUT_KINDS if k in v} for t, v in described["inputs"].items()}
        return {"inputs": inputs, "input_notes": [str(n) for n in described.get("input_notes", [])]}
    except Exception as e:  # a third-party factory's bug must not break the listing
        err.print(f"[yellow]warning:[/] {escape(spec.name)}: cannot describe its inputs "
                  f"({escape(printable(f'{type(e).__name__}: {e}'))})")
        return {}


def show_inputs(described: dict) -> None:
    """The inputs compactly: tasks with the same inputs on one line, newlines shown as ``\\n``."""
    groups: dict[tuple, list[str]] = {}
    for task, texts in described["inputs"].items():
        groups.setdefault(tuple(texts.get(k, "") for k in INPUT_KINDS), []).append(task)
    out.print("Inputs per task ({text}: the query's or document's own text):")
    table = Table()
    for col in ("Tasks", *INPUT_KINDS.values()):
        table.add_column(col)
    for texts, names in groups.items():
        label = "every task" if len(groups) == 1 and len(names) > 1 else ", ".join(names)
        table.add_row(escape(printable(label)), *(escape(printable(t)) for t in texts))
    out.print(table)
    for note in described["input_notes"]:
        out.print(f"- {escape(printable(note))}")


def _default(value) -> str:
    """An option's default as the command line writes it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(str, value)) or '""'
    return str(value) if value != "" else '""'


def _cell(col: str, value) -> str:
    if value is None:
        return "-"
    if col == "options":
        return ", ".join(f"{k}={_default(o['default'])}" for k, o in value.items()) or "-"
    if col == "revision":
        return value[:10]
    if col == "documents":
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(value) or "-"
    return str(value)


