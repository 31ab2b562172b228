"""Text from files made safe to show on a terminal: a model name such as ``"\x1b]0;pwned\x07"`` read
from a results folder would otherwise retitle, clear or recolour it.
"""

from __future__ import annotations

import unicodedata


def printable(text: object) -> str:
    """``text`` with every control or format character (C0, DEL, C1, bidi overrides) escaped."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else _escaped(c) for c in s)


def _escaped(c: str) -> str:
    if unicodedata.category(c) in ("Zs",):  # non-ASCII spaces are harmless; keep them
        return c
    return repr(c)[1:-1] if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def number(value: float, digits: int = 2, *, signed: bool = False) -> str:
    """A number as the tables show it, never "-0.00"."""
    rounded = round(value, digits) + 0.0  # -0.0 + 0.0 is 0.0
    return f"{rounded:+.{digits}f}" if signed else f"{rounded:.{digits}f}"
