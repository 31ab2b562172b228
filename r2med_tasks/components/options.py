"""A component's options: a pydantic class deriving from :class:`Options`, one field per ``-o
key=value``, so each option's type, default, bounds and help are declared once.

Command-line strings are parsed by the field's type: numbers (never with ``_``: Python reads ``1_5``
as 15), ``true/false`` (``1/0``, ``yes/no``, ``on/off``), comma-separated tuples, ``none``/``null``/
empty for optional fields. Each value is checked as parsed, then the options are validated whole, so
a rule between options is the model's own ``model_validator``. An option whose text is not what
identifies it says so with :class:`Identified` (a file by its content: no machine path in an identity).
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from ..errors import UserError

TRUE = ("true", "1", "yes", "on")
FALSE = ("false", "0", "no", "off")
NONE = ("none", "null", "")


class Options(BaseModel):
    """Base of a component's options: unknown keys refused, NaN and infinity refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


@dataclass(frozen=True)
class Identified:
    """In an option's annotation, how it enters a run's identity and experiment name:
    ``Identified(fn)``: as ``fn(value)`` in place of its text; ``Identified(when_set=True)``: only
    when set, so that adding the option to a component keeps the identities it had."""

    by: Callable[[Any], Any] | None = None
    when_set: bool = False


def identity_value(model: type[BaseModel], key: str, value: Any) -> Any:
    """What an option's value stands for in a run's identity."""
    field = model.model_fields.get(key)
    for extra in (field.metadata if field is not None else ()):
        if isinstance(extra, Identified) and extra.by is not None:
            return extra.by(value)
    return value


def file_content(path: Any) -> str:
    """A file or folder option's identity: its name and a hash of its content
    (``split.json@sha256:1f2e3d4c5b6a``); a missing path is its text (the component refuses it)."""
    if not isinstance(path, str) or not path:
        return path
    from .model_refs import content_digest

    target = Path(path).expanduser()
    if not target.exists():
        return path
    return f"{target.name}@sha256:{content_digest(target)[:12]}"


def option_text(value: Any) -> str:
    """An option value as the command line writes it (:func:`parse` turns it back)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(option_text(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def writable(value: Any) -> bool:
    """Whether :func:`option_text` writes ``value`` so that :func:`parse` gives it back."""
    if isinstance(value, (list, tuple)):
        return all(writable(v) and not isinstance(v, (list, tuple)) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Every option that has a default, and that default; not an option identified only when set
    (``Identified(when_set=True)``): a run's identity holds the defaults, and such an option only
    once it is set."""
    return {k: f.get_default(call_default_factory=True) for k, f in model.model_fields.items()
            if not f.is_required() and not any(isinstance(m, Identified) and m.when_set for m in f.metadata)}


def check_defaults(model: type[BaseModel], where: str) -> None:
    """A declared default must be a value its option accepts (a plugin bug, found at registration)."""
    for key, value in defaults(model).items():
        try:
            _validate(model, key, value)
        except ValidationError as e:
            problem = _problem(model, key, e)
            raise TypeError(f"{where}: option {key}'s default {value!r} is refused: {problem}") from None


def parse(model: type[BaseModel], key: str, raw: str, *, where: str) -> Any:
    """The typed value of ``-o key=raw``, or a one-line :class:`UserError` (``-o bm25.k1=-3: must be >= 0``)."""
    if key not in model.model_fields:
        raise UserError(f"{where}={raw}: no option '{key}' (accepted: {', '.join(model.model_fields) or 'none'})")
    annotation = model.model_fields[key].annotation
    inner, optional = _unwrap(annotation)
    text = raw.strip()
    if optional and text.lower() in NONE:
        value: Any = None
    elif _is_sequence(inner):
        value = tuple(part.strip() for part in raw.split(",") if part.strip())
        if _base(_item_type(inner)) in (int, float) and any("_" in part for part in value):
            raise UserError(f"{where}={raw}: expected {describe(model, key)}, written without '_'")
    elif inner is bool:
        if text.lower() not in TRUE + FALSE:
            raise UserError(f"{where}={raw}: expected {describe(model, key)}")
        value = text.lower() in TRUE
    elif inner in (int, float):
        if "_" in text:  # Python and pydantic read 1_5 as 15: a typo of 1.5 would pass unnoticed
            raise UserError(f"{where}={raw}: expected {describe(model, key)}, written without '_'")
        value = text
    else:
        value = raw
    try:
        validated = _validate(model, key, value)
    except ValidationError as e:
        raise UserError(f"{where}={raw}: {_problem(model, key, e)}") from None
    return _settled(validated, f"{where}={raw}")


def validated(model: type[BaseModel], values: Mapping[str, Any], *, component: str, name: str) -> BaseModel:
    """The options instance a component gets: ``values`` over the defaults, validated whole, so the
    model's own validators hold. A refusal is one line naming the option, else the component."""
    try:
        return model.model_validate(dict(values))
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        key = first["loc"][0] if first["loc"] else None
        if key in model.model_fields:
            value = values[key] if key in values else defaults(model).get(key)
            raise UserError(f"-o {name}.{key}={option_text(value)}: {_problem(model, key, e)}") from None
        raise UserError(f"{component}: {first.get('ctx', {}).get('error', first['msg'])}") from None


INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # a signed 64-bit integer: what numpy, torch and C libraries take


def _settled(value: Any, where: str) -> Any:
    """An integer beyond 64 bits is refused (libraries would overflow long after the run started),
    and -0.0 is 0.0 (the same value, so the same results folder)."""
    if isinstance(value, (tuple, list)):
        items = [_settled_item(v, f"{where}: item {n} ") for n, v in enumerate(value, 1)]
        return type(value)(items)
    return _settled_item(value, f"{where}: ")


def _settled_item(value: Any, prefix: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        if value > INT_MAX:
            raise UserError(f"{prefix}must be <= {INT_MAX}")
        if value < INT_MIN:
            raise UserError(f"{prefix}must be >= {INT_MIN}")
    elif isinstance(value, float) and value == 0.0:
        return 0.0
    return value


def describe(model: type[BaseModel], key: str) -> str:
    """What an option accepts, in words: ``a number >= 0``, ``true or false``, ``an integer >= 1 or none``."""
    field = model.model_fields[key]
    inner, optional = _unwrap(field.annotation)
    text = _describe_type(inner)
    bounds = _bounds_text(_bounds(field.metadata))
    if bounds:
        text += " " + bounds
    if _is_sequence(inner):
        item = _item_type(inner)
        item_bounds = _bounds_text(_bounds(_metadata(item)))
        text = f"comma-separated {_plural(_base(item))}" + (f" (each {item_bounds})" if item_bounds else "")
    return text + (" or none" if optional else "")


def schema(model: type[BaseModel], *, runtime: tuple[str, ...] = (), model_choice: tuple[str, ...] = ()
           ) -> dict[str, dict[str, Any]]:
    """Each option as JSON-schema-like plain data, always the same keys."""
    out = {}
    for key, field in model.model_fields.items():
        inner, optional = _unwrap(field.annotation)
        required = field.is_required()
        row: dict[str, Any] = {**_type_schema(inner, field.metadata), "nullable": optional, "required": required,
                               "default": None if required else _jsonable(field.get_default(call_default_factory=True))}
        row["items"] = _type_schema(_item_type(inner), _metadata(_item_type(inner))) if _is_sequence(inner) else None
        row |= {"description": field.description or "", "accepts": describe(model, key),
                "runtime": key in runtime, "model": key in model_choice}
        out[key] = row
    return out


# -- internals -------------------------------------------------------------------------------------

def _validate(model: type[BaseModel], key: str, value: Any) -> Any:
    """One option's value checked alone; the model's validators run on the whole."""
    return _field_adapter(model, key).validate_python(value)


@functools.lru_cache(maxsize=None)
def _field_adapter(model: type[BaseModel], key: str) -> TypeAdapter:
    field = model.model_fields[key]
    annotated = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    return TypeAdapter(annotated, config=ConfigDict(**model.model_config))  # its settings: Options refuse NaN


_PHRASES = {
    "greater_than_equal": "must be >= {ge}", "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}", "less_than": "must be < {lt}",
    "too_short": "needs at least {min_length} item(s)", "too_long": "takes at most {max_length} item(s)",
    "finite_number": "must be a finite number",
}


def _problem(model: type[BaseModel], key: str, error: ValidationError) -> str:
    first = error.errors(include_url=False)[0]
    ctx = first.get("ctx") or {}
    loc = first["loc"][1:] if first["loc"][:1] == (key,) else first["loc"]  # whole or alone: the same words
    where = "".join(f" item {p + 1}" for p in loc if isinstance(p, int))
    if first["type"] in _PHRASES:
        phrase = _PHRASES[first["type"]].format(**{k: _number(v) for k, v in ctx.items()})
    elif first["type"] == "literal_error":
        inner, _ = _unwrap(model.model_fields[key].annotation)
        return f"use one of {', '.join(map(str, typing.get_args(inner)))}"
    elif first["type"] in ("value_error", "assertion_error"):
        phrase = str(ctx.get("error", first["msg"]))
    else:
        return f"expected {describe(model, key)}"
    return f"{where.strip()} {phrase}".strip() if where else phrase


def _number(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the type without ``None``, whether ``None`` is accepted)."""
    annotation = _base(annotation)
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = typing.get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        if len(rest) < len(args):
            return (_base(rest[0]) if len(rest) == 1 else Union[tuple(rest)]), True
    return annotation, False


def _base(annotation: Any) -> Any:
    """``Annotated[T, ...]`` -> ``T``."""
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation


def _metadata(annotation: Any) -> list[Any]:
    """The constraints inside ``Annotated[T, Field(ge=0)]``."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return []
    out = []
    for extra in typing.get_args(annotation)[1:]:
        out += getattr(extra, "metadata", None) or [extra]
    return out


def _is_sequence(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (tuple, list, frozenset, set) or annotation in (tuple, list)


def _item_type(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    return args[0] if args else str


_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _type_schema(annotation: Any, metadata: list[Any]) -> dict[str, Any]:
    base = _base(annotation)
    bounds = _bounds(metadata)
    enum = list(typing.get_args(base)) if typing.get_origin(base) is Literal else None
    if enum is not None:
        kind = _TYPE_NAMES.get(type(enum[0]), "string") if enum else "string"
    elif _is_sequence(base):
        kind = "array"
    else:
        kind = _TYPE_NAMES.get(base, "string")
    return {"type": kind, "enum": enum, "minimum": bounds.get("ge"), "maximum": bounds.get("le"),
            "exclusiveMinimum": bounds.get("gt"), "exclusiveMaximum": bounds.get("lt")}


def _bounds(metadata: list[Any]) -> dict[str, Any]:
    out = {}
    for item in metadata:
        for name in ("ge", "gt", "le", "lt", "min_length", "max_length"):
            value = getattr(item, name, None)
            if value is not None:
                out[name] = value
    return out


def _bounds_text(bounds: dict[str, Any]) -> str:
    signs = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return ", ".join(f"{signs[k]} {_number(v)}" for k, v in bounds.items() if k in signs)


def _describe_type(annotation: Any) -> str:
    """A type in words, with its article: ``an integer``, ``a number or text``, ``an Item``."""
    base = _base(annotation)
    if typing.get_origin(base) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(base)))
    if typing.get_origin(base) in (Union, types.UnionType):
        return " or ".join(_describe_type(member) for member in typing.get_args(base))
    known = {bool: "true or false (also 1/0, yes/no, on/off)", int: "an integer", float: "a number",
             str: "text", Any: "a value"}.get(base)
    if known is not None:
        return known
    name = getattr(base, "__name__", str(base))
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _plural(annotation: Any) -> str:
    return {int: "integers", float: "numbers", str: "names", bool: "booleans"}.get(annotation, "values")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
