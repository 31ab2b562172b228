"""What a run's LLM calls cost: requests, cache hits, tokens and dollars, each answer priced as it
arrives (``-o price=IN,OUT``, else the dated table shipped in ``data/prices/prices.json``)."""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from .answers import Generation
from .secrets import redact


@dataclass
class Usage:
    """A thread-safe tally of requests sent (tokens billed) and answers from the cache (free). Each
    answer is priced as it arrives: at ``price`` when set, else the table's price of the model that
    answered, else of the one asked for; ``usd`` is None once an answer had no known price.
    ``a - b`` is what a call added (the runner's per-task usage)."""

    sent: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    priced_usd: float = field(default=0.0, compare=False)
    unpriced: int = field(default=0, compare=False)
    unknown_tokens: int = 0  # answers sent without token counts
    model: str = ""
    price: tuple[float, float] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    COUNTS = ("sent", "cached", "prompt_tokens", "completion_tokens", "reasoning_tokens", "priced_usd", "unpriced",
              "unknown_tokens")

    @property
    def usd(self) -> float | None:
        """Dollars of the answers sent; None when one had no known price or token counts."""
        return None if self.unpriced or self.unknown_tokens else self.priced_usd

    def describe(self, model: str) -> str:
        """One line for the end of a run: requests, cache hits, tokens and, when known, the cost."""
        dollars = self.usd if self.sent else None
        price = f", about {usd_text(dollars)}" if dollars is not None else ""
        reasoning = f" ({self.reasoning_tokens:,} reasoning)" if self.reasoning_tokens else ""
        unknown = f", {self.unknown_tokens} answer(s) without token counts" if self.unknown_tokens else ""
        return (f"{redact(model)}: {self.sent} requests sent, {self.cached} answered from the cache, "
                f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens{reasoning}{unknown}"
                f"{price}")

    def add(self, generation: Generation) -> None:
        """Count and price an answer the API sent."""
        price = self.price or price_of(generation.model) or price_of(self.model)
        with self._lock:
            self.sent += 1
            if not generation.tokens_known:
                self.unknown_tokens += 1
                return
            self.prompt_tokens += generation.prompt_tokens
            self.completion_tokens += generation.completion_tokens
            self.reasoning_tokens += generation.reasoning_tokens
            if price is None:
                self.unpriced += 1
            else:
                self.priced_usd += dollars(price, generation.prompt_tokens, generation.completion_tokens)

    def add_cached(self, n: int) -> None:
        """Count ``n`` answers taken from the cache."""
        with self._lock:
            self.cached += n

    def tally(self) -> Usage:
        """The counts, copied (without ``model`` and ``price``)."""
        with self._lock:
            return Usage(**{name: getattr(self, name) for name in self.COUNTS})

    def __add__(self, other: Usage) -> Usage:
        mine, theirs = self.tally(), other.tally()
        return Usage(**{name: getattr(mine, name) + getattr(theirs, name) for name in self.COUNTS})

    def __sub__(self, other: Usage) -> Usage:
        mine, theirs = self.tally(), other.tally()
        return Usage(**{name: getattr(mine, name) - getattr(theirs, name) for name in self.COUNTS})

    def to_json(self) -> dict[str, Any]:
        """As a task's cost file and ``--json`` show it."""
        t = self.tally()
        return {"requests": t.sent, "cached": t.cached, "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens, "reasoning_tokens": t.reasoning_tokens,
                **({"unknown_tokens": t.unknown_tokens} if t.unknown_tokens else {}),
                "usd": None if t.usd is None else round(t.usd, 10)}


def usd_text(amount: float) -> str:
    """Dollars as a summary shows them: cents, or four decimals under a dollar ("$0.0012")."""
    return f"${amount:.2f}" if amount >= 1 or amount == 0 else f"${amount:.4f}"


def dollars(price: tuple[float, float], prompt_tokens: int, completion_tokens: int) -> float:
    """What tokens cost at ``price`` (dollars per million input and output tokens)."""
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


MAX_PRICE = 1e6  # dollars per million tokens: far above any model's list price, and finite
PRICE_HELP = ("dollars per million input and output tokens, IN,OUT (e.g. 2.5,10), for the reported cost "
              "(default: the price table shipped with r2med, r2med_tasks/data/prices/prices.json; a model it lacks "
              "has no cost)")


_Amount = Annotated[float, Field(ge=0, le=MAX_PRICE)]
Price = Annotated[tuple[_Amount, _Amount] | None, Field(description=PRICE_HELP)]
"""The ``-o price=IN,OUT`` option of every component that calls an LLM; its bounds keep a cost
finite, as JSON writes it."""


@functools.cache
def price_table() -> dict[str, tuple[float, float]]:
    """The shipped price table: model -> (input, output), dollars per million tokens."""
    from importlib.resources import files

    table = json.loads(files("r2med_tasks").joinpath("data", "prices", "prices.json").read_text(encoding="utf-8"))
    return {model: (float(entry["input"]), float(entry["output"])) for model, entry in table["models"].items()}


def price_of(model: str | None) -> tuple[float, float] | None:
    """A model's price in the shipped table, None when it has none."""
    return price_table().get(model) if model else None


def cost(model: str, usage: Usage, prices: dict[str, tuple[float, float]] | None = None) -> float | None:
    """Dollars for ``usage``'s tokens at ``model``'s price (the shipped table unless given); None if unknown."""
    price = (price_table() if prices is None else prices).get(model)
    if price is None:
        return None
    return dollars(price, usage.prompt_tokens, usage.completion_tokens)
