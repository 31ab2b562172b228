"""Query2Doc's few-shot examples: the authors' ``src/example.py`` at the pinned commit, shipped with
the package (``r2med_example.py.txt``, byte for byte, its MIT notice in ``R2MED_LICENSE.txt``), or a
local file (``-o examples=``); parsed as data, never executed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .prompts import DATASET_KEYS, Query2DocExamplesUnavailable

__all__ = [
    "QUERY2DOC_EXAMPLES_COMMIT",
    "load_query2doc_examples",
    "parse_query2doc_examples",
    "shipped_query2doc_examples",
]

# The first commit, to which the published runs trace; the default examples are identified by it.
QUERY2DOC_EXAMPLES_COMMIT = "45cbac534475a0f66fec190cba752b5dc452839d"
SHIPPED_EXAMPLES = Path(__file__).with_name("r2med_example.py.txt")  # src/example.py at that commit
SHIPPED_EXAMPLES_SHA256 = "a1636976765b6ce4ce365349e04183bf1d1f40337d2f5f4342f00de03f2363af"


def _eval_node(node: ast.AST, env: Mapping[str, Any]) -> Any:
    """Evaluate the small, side-effect-free subset of Python a data file like example.py uses."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise ValueError(f"unknown name {node.id!r}")
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError("dict unpacking is not supported")
        return {_eval_node(k, env): _eval_node(v, env) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [_eval_node(e, env) for e in node.elts]
        return values if isinstance(node, ast.List) else tuple(values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _eval_node(node.left, env), _eval_node(node.right, env)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        raise ValueError("only str + str is supported")
    if isinstance(node, ast.Subscript):
        return _eval_node(node.value, env)[_eval_node(node.slice, env)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("join", "strip", "format")
        and isinstance(node.func.value, (ast.Constant, ast.Name, ast.BinOp))
    ):
        base = _eval_node(node.func.value, env)
        if not isinstance(base, str):
            raise ValueError("method calls are only supported on str")
        args = [_eval_node(a, env) for a in node.args]
        kwargs = {kw.arg: _eval_node(kw.value, env) for kw in node.keywords if kw.arg is not None}
        return getattr(base, node.func.attr)(*args, **kwargs)
    raise ValueError(f"unsupported expression {type(node).__name__} at line {getattr(node, 'lineno', '?')}")


def _examples_from_python(source: str, filename: str) -> Any:
    tree = ast.parse(source, filename=filename)
    env: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            targets = [t.id for t in stmt.targets]
            value_node = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            targets = [stmt.target.id]
            value_node = stmt.value
        else:
            continue
        try:
            value = _eval_node(value_node, env)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            if "Example" in targets:
                raise ValueError(f"{filename}: cannot evaluate `Example` statically: {exc}") from exc
            continue
        for name in targets:
            env[name] = value
    if "Example" not in env:
        raise ValueError(f"{filename}: no top-level assignment to `Example`")
    return env["Example"]


def parse_query2doc_examples(text: str, name: str, *, as_json: bool = False) -> dict[str, str]:
    """The examples in the text of upstream ``src/example.py`` (or of a JSON object)."""
    data = json.loads(text) if as_json else _examples_from_python(text, name)
    if not isinstance(data, Mapping):
        raise ValueError(f"{name}: Example must be a dict keyed by dataset, got {type(data).__name__}")
    missing = [k for k in DATASET_KEYS if k not in data]
    if missing:
        raise ValueError(f"{name}: Query2Doc examples missing for {missing}")
    return {str(k): v if isinstance(v, str) else str(v) for k, v in data.items()}


def load_query2doc_examples(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read the Query2Doc few-shot examples from upstream ``src/example.py`` or a JSON object
    ``{internal key: examples text}``. Python is parsed, never executed: its ``Example`` assignment
    is evaluated from literals, ``+`` of strings, earlier names and ``str.join/strip/format``.
    """
    path = Path(path)
    return parse_query2doc_examples(path.read_text(encoding="utf-8"), str(path),
                                    as_json=path.suffix.lower() == ".json")


def shipped_query2doc_examples() -> dict[str, str]:
    """The examples of the authors' ``src/example.py`` at the pinned commit, as shipped; a copy whose
    bytes are not that commit's is refused (the default's identity is the commit, not the bytes)."""
    try:
        data = SHIPPED_EXAMPLES.read_bytes()
    except OSError as e:
        raise Query2DocExamplesUnavailable(f"{SHIPPED_EXAMPLES}: {reason(e, 160)}; reinstall r2med") from None
    if hashlib.sha256(data).hexdigest() != SHIPPED_EXAMPLES_SHA256:
        raise Query2DocExamplesUnavailable(f"{SHIPPED_EXAMPLES}: not R2MED/R2MED@{QUERY2DOC_EXAMPLES_COMMIT[:7]}'s "
                                           "src/example.py (its sha256 differs); reinstall r2med")
    return parse_query2doc_examples(data.decode("utf-8"), str(SHIPPED_EXAMPLES))


def reason(e: BaseException, limit: int = 200) -> str:
    """An exception as one short line, "Type: first line of its message", for a message to quote."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:limit]}" if first else type(e).__name__
