"""A sweep's lines: ``r2med-run`` argument lines (what ``r2med leaderboard --commands`` prints, in any
of its formats, works as is) or a TOML file of pipelines × an options grid × tasks."""

from __future__ import annotations

import csv
import html
import json
import re
import shlex
from collections.abc import Iterator
from itertools import product
from typing import Any

from ..errors import UserError
from ..board.render import LIVE_PREFIX

COMMENT = re.compile(r"(^|\s+)#\s.*$")  # a comment, not the '#' of llm=URL#model


MAX_SWEEP_BYTES = 16 * 1024 * 1024  # far more than any sweep, and bounded


def sweep_lines(text: str, source: str) -> list[tuple[str, list[str]]]:
    """(where, r2med-run arguments) of each pipeline a sweep file lists, duplicates dropped."""
    if source.endswith(".toml") or re.search(r"^\s*\[\[pipeline\]\]", text, re.MULTILINE):
        found = _toml_lines(text, source)
    else:
        found = [(f"{source}:{n}", _words(command, f"{source}:{n}")) for n, command in _commands(text, source)]
    seen, unique = set(), []
    for where, words in found:
        if tuple(words) not in seen:
            seen.add(tuple(words))
            unique.append((where, words))
    if not unique:
        raise UserError(f"{source}: no r2med-run lines (one per line, e.g. `r2med-run --plugin bm25`, or a TOML "
                        "sweep with [[pipeline]] tables)")
    return unique


def _words(command: str, where: str) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    return words[1:] if words and words[0] == "r2med-run" else words


def _commands(text: str, source: str) -> Iterator[tuple[int, str]]:
    """(line number, command) of argument lines, or of what ``r2med leaderboard --commands`` prints
    (a table with commands wrapped over rows, markdown, CSV or JSON)."""
    stripped = text.lstrip()
    if stripped.startswith("["):  # --format json
        try:
            rows = json.loads(stripped)
        except ValueError as e:
            raise UserError(f"{source}: not JSON ({e}); JSON sweeps are `r2med leaderboard --commands --format json`") from None
        yield from ((n, r["command"]) for n, r in enumerate(rows, 1) if isinstance(r, dict) and r.get("command"))
        return
    lines = text.splitlines()
    if lines and lines[0].startswith("Rank,System"):  # --format csv
        yield from ((n, r["Command"]) for n, r in enumerate(csv.DictReader(lines), 2) if r.get("Command"))
        return
    table = any("r2med-run" in line and not line.strip().startswith("r2med-run") for line in lines)
    command: list | None = None  # [line number, column, text] of a table's command, maybe wrapped
    for n, raw in enumerate(lines, 1):
        if command and raw[command[1]:].strip(" │") and not re.match(r"[\s│|]*\d", raw[:command[1]]):
            command[2] += " " + raw[command[1]:].strip(" │")  # wrapped: no new rank, more text in its column
            continue
        if command:
            yield command[0], command[2]
            command = None
        line = raw.strip()
        if table:  # the terminal table or markdown: a row's command cell, the rest is the table's
            if line.startswith(LIVE_PREFIX):  # the agents' live commands the table lists after it: not run
                continue
            if "r2med-run" in line:
                start = raw.index("r2med-run")
                cell = re.split(r"(?<!\\)[│|]", raw[start:])[0].rstrip()  # up to the next cell
                command = [n, start, html.unescape(cell).replace("\\|", "|")]
            continue
        line = COMMENT.sub("", line).strip()
        if line.startswith(("r2med-run", "-")):
            yield n, line
        elif line:
            raise UserError(f"{source}:{n}: expected r2med-run arguments (`--plugin NAME ...`), got: {line[:60]}")
    if command:
        yield command[0], command[2]


def _toml_lines(text: str, source: str) -> list[tuple[str, list[str]]]:
    """A TOML sweep: each ``[[pipeline]]`` (``plugins``, fixed ``options``, a ``grid`` of option
    values, ``tasks``, ``top_k``, ``device``, ``output``, ``data_dir``) × every combination of its
    grid; top-level ``tasks``, ``top_k``, ``device``, ``output`` and ``data_dir`` for pipelines that
    set none."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise UserError("TOML sweeps need Python 3.11+ or `pip install tomli`") from None
    from ..components.options import option_text

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{source}: {e}") from None
    shared = {"tasks", "top_k", "device", "output", "data_dir"}  # for every pipeline that sets none
    unknown = set(data) - shared - {"pipeline"}
    if unknown:
        raise UserError(f"{source}: unknown key(s) {', '.join(sorted(unknown))} (top level: "
                        f"{', '.join(sorted(shared))}, [[pipeline]])")
    out = []
    for n, p in enumerate(data.get("pipeline", []), 1):
        where = f"{source}: pipeline {n}"
        keys = {"plugins", "options", "grid", *shared}
        if not isinstance(p, dict) or not p.get("plugins") or set(p) - keys:
            raise UserError(f"{where}: expected plugins = [...] and only {', '.join(sorted(keys - {'plugins'}))}")
        p = {**{k: data[k] for k in shared if k in data}, **p}
        grid = p.get("grid", {})
        if not all(isinstance(v, list) and v for v in grid.values()):
            raise UserError(f"{where}: each grid key takes a non-empty list of values")
        words = [w for name in _listed(p["plugins"]) for w in ("--plugin", name)]
        words += [w for k, v in p.get("options", {}).items() for w in ("-o", f"{k}={option_text(v)}")]
        words += [w for t in _listed(p.get("tasks") or []) for w in ("--tasks", t)]
        words += [w for key, flag in (("top_k", "--top-k"), ("device", "--device"), ("output", "--output"),
                                      ("data_dir", "--data-dir")) if key in p for w in (flag, str(p[key]))]
        for values in product(*grid.values()):
            out.append((where, words + [w for k, v in zip(grid, values) for w in ("-o", f"{k}={option_text(v)}")]))
    return out


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value]
