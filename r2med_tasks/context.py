"""What the harness hands a component with every call: the explicit channel for everything a
component may need beyond its options and its inputs.

No environment variables, no global plugin manager, no signature inspection: a component reads
its cache folder, reports progress, asks for an LLM client or another registered retriever, and
finds the task's local folder here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .data import Corpus
    from .llm import RetryLine
    from .searcher import Searcher


class Progress(Protocol):
    """``progress(description, total)`` shows a bar for work of ``total`` units and returns
    ``advance(n)``; the bar goes when the call that asked for it returns."""

    def __call__(self, description: str, total: int) -> Callable[[int], None]: ...


def no_progress(description: str, total: int) -> Callable[[int], None]:
    return lambda n: None


@dataclass(frozen=True)
class Context:
    """One call's context.

    ``cache_dir``: where this component keeps what is expensive to rebuild (indexes, embeddings,
    generations; subfolders are the component's to choose). ``progress``: see :class:`Progress`.
    ``log``: one line to the user (a warning or a summary). ``corpus``: the task's corpus, for a
    rewriter that needs documents (LameR). ``data_folder``: the task's local folder, when it came
    from one (published generations are read beside it). ``llm(spec, **sampling)``: a chat client
    of a registered LLM backend (``r2med list llms``, made by ``chat_clients``), showing its
    retries on ``retries``, the run's one status line for API retries (``r2med_tasks.llm.RetryLine``;
    a component that calls an API itself hands it to its client: ``ShowsRetries``; by default
    retries are only logged). ``retriever(name, **options)``: a new
    instance of a registered retriever, for components built on another (LameR on BM25);
    ``options`` may also be ``-o``-style ``"key=value"`` strings.

    ``searcher(task, name, *options)``: a registered retriever indexed over this task's corpus, for a
    component that searches while it works (an agent): ``Searcher.search(texts, top_k)`` gives each
    text's best documents, concurrent searches batched. ``keep(name, rows)``: rows of data the
    component wants kept beside the task's results (an agent's trajectories), written as
    ``<Task>.<name>.jsonl`` with them.

    For components composed of other retrievers (``hybrid``): ``tasks``, the run's tasks;
    ``saved_run(retriever, options, task=, queries=)``, the top-k run of another registered
    retriever on a task as its own pipeline (this run's rewriter, then that retriever), read from its
    results folder when its identity matches, else computed and saved there; and, for a component
    that tunes on a user-given split of queries, ``tuning_judgments(task, query_ids)`` (the
    judgments of those queries only) and ``hold_out(query_ids, **scores)`` (leave those queries out
    of this task's scoring and record ``scores`` beside it), so a tuned number is never measured
    on the queries it was tuned on.
    """

    cache_dir: Path
    progress: Progress = no_progress
    log: Callable[[str], None] = lambda line: None
    corpus: Corpus | None = None
    data_folder: Path | None = None
    chat_clients: Callable[..., Any] = field(default=lambda spec, **sampling: _none("an LLM backend"))
    retries: RetryLine = field(default_factory=lambda: _silent_retry_line())
    retriever: Callable[..., Any] = field(default=lambda name, *options, **kw: _none("a retriever"))
    keep: Callable[[str, list[dict]], None] = lambda name, rows: None
    tasks: tuple[Any, ...] = ()
    saved_run: Callable[..., Any] = field(default=lambda retriever, options=(), **kw: _none("saved run"))
    tuning_judgments: Callable[..., Any] = field(default=lambda task, query_ids: _none("judgments"))
    hold_out: Callable[..., Any] = field(default=lambda query_ids, **scores: _none("held-out scoring"))

    def llm(self, spec: str, **sampling: Any) -> Any:
        """A chat client for ``-o llm=spec`` (``chat_clients``), its retries shown on ``retries``."""
        from .llm import ShowsRetries

        client = self.chat_clients(spec, **sampling)
        if isinstance(client, ShowsRetries):
            client.show_retries(self.retries)
        return client

    def searcher(self, task: Any, name: str = "bm25", *options: str) -> Searcher:
        """Retriever ``name`` (with ``-o``-style ``options``, "k1=1.2") indexed over this call's
        corpus (``corpus``), for a component that searches while it works."""
        from .searcher import Searcher

        if self.corpus is None:
            _none("corpus to search")
        return Searcher(self.retriever(name, *options), self.corpus, task, self, label=name)

    def cache(self, *parts: str) -> Path:
        """A path under the cache folder."""
        return self.cache_dir.joinpath(*parts)

    def with_(self, **changes: Any) -> Context:
        return replace(self, **changes)


def _silent_retry_line() -> RetryLine:
    from .llm import RetryLine

    return RetryLine()


def _none(what: str):
    from .errors import UserError

    raise UserError(f"no {what} is available in this context")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/r2med``, else ``~/.cache/r2med`` (the XDG base directory convention)."""
    import os

    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "r2med"
