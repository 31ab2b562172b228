"""What the harness hands a component with every call: the explicit channel for everything a
component may need beyond its options and its inputs.

No environment variables, no global plugin manager, no signature inspection. Every component gets
a :class:`Context`: its cache folder, progress bars, a line to the user, rows to keep beside the
results, what its LLM wrote, the task's corpus, an LLM client (``llm``), a retriever to search with
(``searcher``) and, for a composite (a component built of other retrievers), the run's tasks, its
members' saved runs and scoring on a held-out split.
"""

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
    """A stage's LLM calls over a run, as ``Context.llm`` makes them: the generation cache they go
    through (the cache folder's ``generations/chat.jsonl``, opened on the first call) and the usage
    they are tallied in (made on the first call, with that client's model and the ``price`` it was
    given: one tally for the stage across the run's tasks), which the runner reads for each task's
    cost file and the run's closing line."""

    usage: Usage | None = None
    cache: GenerationCache | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass(frozen=True)
class Context:
    """One call's context.

    ``cache_dir``: where this component keeps what is expensive to rebuild (indexes, embeddings;
    subfolders are the component's to choose; ``cache(*parts)``). ``progress``: see
    :class:`Progress`. ``log``: one line to the user (a warning or a summary). ``keep(name,
    rows)``: rows of data the component wants kept beside the task's results (an agent's
    trajectories), written as ``<Task>.<name>.jsonl`` with them. ``generated(query_id,
    generations, answer=, query=)``: what an LLM wrote for one query, handed over as each query
    finishes and kept beside the results as ``<Task>.generations.jsonl``. ``loading()``: a block
    that loads a model's weights (``with context.loading(): ...``), timed as a stage of its own
    ("load") rather than as the indexing or searching it happens in. ``retries``: the run's one
    status line for API retries (``r2med_tasks.llm.endpoint.RetryLine``; by default retries are
    only logged). ``corpus``: the task's corpus (``corpus.folder``: the task's local folder, when it
    came from one; published generations are read beside it).

    ``llm(spec, price=, **sampling)``: the stage's client of a registered LLM backend (``r2med
    list llms``), its answers through the generation cache and tallied in the stage's usage.
    ``searcher(task, retriever, *options)``: a retriever indexed over this call's corpus, for a
    component that searches while it works (an agent, LameR).

    A composite (a component built of other retrievers, ``ComponentSpec.members_option``) also
    uses ``tasks``, the run's tasks; ``saved_run(member, task=, queries=)``, the top-k run of one of
    its members (a retriever its factory got) on a task as its own pipeline (this run's rewriter,
    then that member), read from its results folder when its identity matches, else computed and
    saved there (``queries``: already rewritten); and, for one that tunes on a user-given split of
    queries, ``tuning_judgments(task, query_ids)`` (the judgments of those queries only) and
    ``hold_out(query_ids, **scores)`` (leave those queries out of this task's scoring and record
    ``scores`` beside it), so a tuned number is never measured on the queries it was tuned on.
    Where the harness has none of them (a context made by hand), each refuses with one line.

    The rest is what those calls are made with: ``records`` takes the generation records,
    ``chat_clients`` and ``retrievers`` make clients and retrievers of the run's registered plugins,
    ``served`` is what the run's LLM servers said they serve (``GET /models`` is asked once a run,
    and a failure to ask ends every client's work at once), ``llm_calls`` the stage's calls.
    """

    cache_dir: Path
    progress: Progress = no_progress
    log: Callable[[str], None] = lambda line: None
    keep: Callable[[str, list[dict]], None] = lambda name, rows: None
    records: Callable[[dict], None] = lambda record: None
    loading: Callable[[], AbstractContextManager] = nullcontext  # with context.loading(): load a model
    retries: RetryLine = field(default_factory=lambda: _silent_retry_line())
    corpus: Corpus | None = None
    chat_clients: Callable[..., Any] = field(default=lambda spec, **sampling: _none("an LLM backend"))
    served: dict = field(default_factory=dict)  # what LLM servers said they serve, asked once a run
    retrievers: Callable[..., Any] = field(default=lambda name, *options: _none("a retriever"))
    llm_calls: LLMCalls = field(default_factory=LLMCalls)
    tasks: tuple[Any, ...] = ()
    saved_run: Callable[..., Any] = field(default=lambda member, **kw: _none("saved run"))
    tuning_judgments: Callable[..., Any] = field(default=lambda task, query_ids: _none("judgments"))
    hold_out: Callable[..., Any] = field(default=lambda query_ids, **scores: _none("held-out scoring"))

    def llm(self, spec: str, *, price: Any = None, **sampling: Any) -> CachedClient:
        """The stage's client for ``-o llm=spec`` (``chat_clients``), its retries shown on
        ``retries``: ``generate(requests, on_answer=None)`` and ``continue_turns(turns)`` answer from
        the generation cache, else ask and store each answer as it arrives, and tally the requests,
        cache hits and tokens in the stage's usage (made on the first call, priced at ``price``,
        ``-o price=IN,OUT``)."""
        from ..llm.cache import CachedClient, GenerationCache
        from ..llm.endpoint import ShowsRetries
        from ..llm.usage import Usage

        client = self.chat_clients(spec, **sampling)
        if isinstance(client, ShowsRetries):
            client.show_retries(self.retries)
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
                  **fields: Any) -> None:
        """What an LLM wrote for one query (``r2med_tasks.llm.records.record``): ``generations``, every
        answer the stage used for it, in the order asked; ``answer``, what the stage took from them;
        ``query``, the text the stage was given; ``fields``, the component's own (JSON values;
        ``output``, the whole text, and ``sampling``, the parameters sent, among them)."""
        from ..llm.records import record

        self.records(record(query_id, generations, answer=answer, query=query, **fields))

    def searcher(self, task: Any, retriever: Any = "bm25", *options: str) -> Searcher:
        """A retriever indexed over this call's corpus (``corpus``) on its first search: a created
        one (a composite's member), or the registered ``retriever`` (with ``-o``-style ``options``,
        "k1=1.2"). ``Searcher.search(texts, top_k)`` gives each text's best documents, concurrent
        searches batched."""
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
    """``$XDG_CACHE_HOME/r2med``, else ``~/.cache/r2med`` (the XDG base directory convention)."""
    import os

    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "r2med"
