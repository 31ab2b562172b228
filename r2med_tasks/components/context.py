"""What the harness hands a component with every call: the explicit channel for everything it may
need beyond its options and inputs. No environment variables, no global plugin manager, no
signature inspection."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..llm.cache import CachedClient, GenerationCache
    from ..llm.endpoint import RetryLine
    from ..llm.usage import Usage
    from ..tasks.taskdata import Corpus
    from .searcher import Searcher


class Progress(Protocol):
    """``progress(description, total)`` shows a bar for work of ``total`` units and returns
    ``advance(n)``; the bar goes when the call that asked for it returns."""

    def __call__(self, description: str, total: int) -> Callable[[int], None]: ...


def no_progress(description: str, total: int) -> Callable[[int], None]:
    return lambda n: None


@dataclass
class LLMCalls:
    """A stage's LLM calls over a run: one cache and one usage tally for the stage across the run's
    tasks, both made on the first call."""

    usage: Usage | None = None
    cache: GenerationCache | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass(frozen=True)
class Context:
    """One call's context (docs/plugins.md lists its fields). ``loading()`` wraps a model's loading
    so it is timed as a stage of its own, not as the indexing it happens in. A composite also gets
    its members' saved runs, and for tuning on a split of queries ``tuning_judgments`` and
    ``hold_out``, so a tuned number is never measured on the queries it was tuned on. A context made
    by hand refuses what it lacks, in one line.
    """

    cache_dir: Path
    progress: Progress = no_progress
    log: Callable[[str], None] = lambda line: None
    keep: Callable[[str, list[dict]], None] = lambda name, rows: None
    records: Callable[[dict], None] = lambda record: None
    loading: Callable[[], AbstractContextManager] = nullcontext
    retries: RetryLine = field(default_factory=lambda: _silent_retry_line())
    corpus: Corpus | None = None
    chat_clients: Callable[..., Any] = field(default=lambda spec, **sampling: _none("an LLM backend"))
    served: dict = field(default_factory=dict)  # what LLM servers said they serve, asked once a run
    retrievers: Callable[..., Any] = field(default=lambda name, *options: _none("a retriever"))
    llm_calls: LLMCalls = field(default_factory=LLMCalls)
    component: str = ""  # the component called, as -o NAME.key= names its options (for advice)
    tasks: tuple[Any, ...] = ()
    saved_run: Callable[..., Any] = field(default=lambda member, **kw: _none("saved run"))
    tuning_judgments: Callable[..., Any] = field(default=lambda task, query_ids: _none("judgments"))
    hold_out: Callable[..., Any] = field(default=lambda query_ids, **scores: _none("held-out scoring"))
    input: Callable[[str], bytes] = field(default=lambda label: _none("input file"))

    def llm(self, spec: str, *, price: Any = None, **sampling: Any) -> CachedClient:
        """The stage's client for ``-o llm=spec``, answering from the generation cache and tallying
        the stage's usage (priced at ``price``, ``-o price=IN,OUT``); its advice names its time
        limits as the component's options (``-o hyde.timeout=``)."""
        from ..llm.cache import CachedClient, GenerationCache
        from ..llm.endpoint import ShowsRetries
        from ..llm.usage import Usage

        client = self.chat_clients(spec, **sampling)
        if isinstance(client, ShowsRetries):
            client.show_retries(self.retries)
        if self.component and callable(getattr(client, "name_options", None)):
            client.name_options(self.component)
        if callable(getattr(client, "share_served", None)):
            client.share_served(self.served)
        calls, path = self.llm_calls, self.cache("generations", "chat.jsonl")
        with calls.lock:
            if calls.usage is None:
                calls.usage = Usage(model=client.model, price=price)
            if calls.cache is None or calls.cache.path != path:
                calls.cache = GenerationCache(path)
            return CachedClient(client, calls.cache, calls.usage)

    def generated(self, query_id: str, generations: Sequence[Any], *, answer: Any, query: str | None = None,
                  unusable: int = 0, **fields: Any) -> None:
        """Hand over what an LLM wrote for one query, kept beside the results as
        ``<Task>.generations.jsonl``; ``answer`` is what the stage took from ``generations``,
        ``unusable`` how many of them it could not use (the runner counts them: none usable fails)."""
        from ..llm.records import record

        self.records(record(query_id, generations, answer=answer, query=query, unusable=unusable, **fields))

    def searcher(self, task: Any, retriever: Any = "bm25", *options: str) -> Searcher:
        """A retriever indexed over this call's corpus on its first search: a created one, or the
        registered ``retriever`` with ``-o``-style ``options`` ("k1=1.2")."""
        from .searcher import Searcher

        if self.corpus is None:
            _none("corpus to search")
        if isinstance(retriever, str):
            return Searcher(self.retrievers(retriever, *options), self.corpus, task, self, label=retriever)
        return Searcher(retriever, self.corpus, task, self)

    def cache(self, *parts: str) -> Path:
        """A path under the cache folder."""
        return self.cache_dir.joinpath(*parts)

    def with_(self, **changes: Any) -> Context:
        return replace(self, **changes)


def _silent_retry_line() -> RetryLine:
    from ..llm.endpoint import RetryLine

    return RetryLine()


def _none(what: str):
    from ..errors import UserError

    raise UserError(f"no {what} is available in this context")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/r2med``, else ``~/.cache/r2med``."""
    import os

    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "r2med"
