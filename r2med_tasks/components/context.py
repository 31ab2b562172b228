"""What the harness hands a component with every call: the explicit channel for everything a
component may need beyond its options and its inputs.

No environment variables, no global plugin manager, no signature inspection. Every component gets
a :class:`Context`: its cache folder, progress bars, a line to the user, rows to keep beside the
results, the task's corpus, an LLM client (``llm``) and a retriever to search with
(``searcher``). A composite (a component built of other retrievers, ``ComponentSpec.members_option``)
gets a :class:`CompositeContext`, which adds the run's tasks, its members' saved runs and scoring
on a held-out split.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..tasks.taskdata import Corpus
    from ..llm import RetryLine
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
    generations; subfolders are the component's to choose; ``cache(*parts)``). ``progress``: see
    :class:`Progress`. ``log``: one line to the user (a warning or a summary). ``keep(name,
    rows)``: rows of data the component wants kept beside the task's results (an agent's
    trajectories), written as ``<Task>.<name>.jsonl`` with them. ``generated(record)``: what an LLM
    wrote for one query (``r2med_tasks.llm.records.record``), handed over as each query finishes and
    kept beside the results as ``<Task>.generations.jsonl``. ``loading()``: a block that loads a
    model's weights (``with context.loading(): ...``), timed as a stage of its own ("load") rather
    than as the indexing or searching it happens in. ``retries``: the run's one status
    line for API retries (``r2med_tasks.llm.RetryLine``; a component that calls an API itself
    hands it to its client, ``ShowsRetries``; by default retries are only logged). ``corpus``: the
    task's corpus (``corpus.folder``: the task's local folder, when it came from one; published
    generations are read beside it).

    ``llm(spec, **sampling)``: a chat client (``r2med_tasks.llm.LLMClient``) of a registered LLM
    backend (``r2med list llms``), showing its retries on ``retries`` and sharing ``served`` (what
    the run's servers said they serve: ``GET /models`` is asked once a run, and a failure to ask ends
    every client's work at once). ``searcher(task, name,
    *options)``: a registered retriever indexed over this call's corpus, for a component that
    searches while it works (an agent, LameR). ``chat_clients`` and ``retrievers`` are what those
    two make their clients and retrievers with (the run's registered plugins).
    """

    cache_dir: Path
    progress: Progress = no_progress
    log: Callable[[str], None] = lambda line: None
    keep: Callable[[str, list[dict]], None] = lambda name, rows: None
    generated: Callable[[dict], None] = lambda record: None
    loading: Callable[[], AbstractContextManager] = nullcontext  # with context.loading(): load a model
    retries: RetryLine = field(default_factory=lambda: _silent_retry_line())
    corpus: Corpus | None = None
    chat_clients: Callable[..., Any] = field(default=lambda spec, **sampling: _none("an LLM backend"))
    served: dict = field(default_factory=dict)  # what LLM servers said they serve, asked once a run
    retrievers: Callable[..., Any] = field(default=lambda name, *options: _none("a retriever"))

    def llm(self, spec: str, **sampling: Any) -> Any:
        """A chat client for ``-o llm=spec`` (``chat_clients``), its retries shown on ``retries``."""
        from ..llm import ShowsRetries

        client = self.chat_clients(spec, **sampling)
        if isinstance(client, ShowsRetries):
            client.show_retries(self.retries)
        if callable(getattr(client, "share_served", None)):
            client.share_served(self.served)
        return client

    def searcher(self, task: Any, name: str = "bm25", *options: str) -> Searcher:
        """Retriever ``name`` (with ``-o``-style ``options``, "k1=1.2") indexed over this call's
        corpus (``corpus``) on its first search: ``Searcher.search(texts, top_k)`` gives each text's
        best documents, concurrent searches batched."""
        from .searcher import Searcher

        if self.corpus is None:
            _none("corpus to search")
        return Searcher(self.retrievers(name, *options), self.corpus, task, self.ordinary(), label=name)

    def cache(self, *parts: str) -> Path:
        """A path under the cache folder."""
        return self.cache_dir.joinpath(*parts)

    def with_(self, **changes: Any) -> Context:
        return replace(self, **changes)

    def ordinary(self) -> Context:
        """This context as an ordinary component gets it (a composite hands it to its members)."""
        return self if type(self) is Context else Context(**{f.name: getattr(self, f.name) for f in fields(Context)})

    def composed(self, **services: Any) -> CompositeContext:
        """This context with a composite's ``services`` (``CompositeContext``'s fields; one not
        given refuses with one line when called)."""
        return CompositeContext(**{f.name: getattr(self, f.name) for f in fields(Context)}, **services)


@dataclass(frozen=True)
class CompositeContext(Context):
    """What a composite's calls get: the ordinary context and

    ``tasks``, the run's tasks; ``saved_run(member, task=, queries=)``, the top-k run of one of its
    members (a retriever its factory got) on a task as its own pipeline (this run's rewriter, then
    that member), read from its results folder when its identity matches, else computed and saved
    there (``queries``: already rewritten); and, for a composite that tunes on a user-given split
    of queries, ``tuning_judgments(task, query_ids)`` (the judgments of those queries only) and
    ``hold_out(query_ids, **scores)`` (leave those queries out of this task's scoring and record
    ``scores`` beside it), so a tuned number is never measured on the queries it was tuned on.
    """

    tasks: tuple[Any, ...] = ()
    saved_run: Callable[..., Any] = field(default=lambda member, **kw: _none("saved run"))
    tuning_judgments: Callable[..., Any] = field(default=lambda task, query_ids: _none("judgments"))
    hold_out: Callable[..., Any] = field(default=lambda query_ids, **scores: _none("held-out scoring"))


def for_component(context: Context, composes: bool) -> Context:
    """The context a component's call gets: a composite's when it ``composes`` (the services the
    caller has none of refuse with one line), else the ordinary one."""
    if composes:
        return context if isinstance(context, CompositeContext) else context.composed()
    return context.ordinary()


def _silent_retry_line() -> RetryLine:
    from ..llm import RetryLine

    return RetryLine()


def _none(what: str):
    from ..errors import UserError

    raise UserError(f"no {what} is available in this context")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/r2med``, else ``~/.cache/r2med`` (the XDG base directory convention)."""
    import os

    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "r2med"
