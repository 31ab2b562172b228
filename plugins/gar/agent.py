"""Search agents as rewriters: an LLM reasons in one assistant turn, searches the task's corpus
through any registered retriever, and answers; R2MED's rule turns the trajectory into the query's
generated document. Each method's loop is its own module, faithful to its reference code; this one
runs them, many queries in flight, every answer cached and every trajectory kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .rewriter import GARRewriter


@dataclass(frozen=True)
class Settings:
    """An agent's limits, each None where the method's default applies."""

    max_turns: int | None = None
    search_limit: int | None = None
    docs: int | None = None  # per search
    max_tokens: int | None = None  # per generation


@dataclass
class AgentResult:
    """One query's run: the whole assistant text, R2MED's query text taken from it, the trajectory."""

    output: str
    answer: str
    trajectory: dict[str, Any] = field(default_factory=dict)


class Loop(Protocol):
    """What a search method's module provides (``search_o1``, ``search_r1``)."""

    NAME: str
    PROMPTS: str  # the method's prompt templates, verbatim: their hash is part of the run's identity
    OPENS_THINKING: bool  # its model writes "<think>" itself: put back when a server split it off

    def defaults(self, model: str) -> dict[str, Any]:
        """Sampling parameters and limits as the method's reference runs ``model``."""

    def leaderboard_name(self, model: str) -> str | None:
        """The leaderboard's name of a served model ("Qwen2.5-7b-it-em-ppo"); None: its own name."""

    def run(self, question: str, *, task_key: str, model: str, settings: dict[str, Any],
            turn: Callable[..., Any], search: Callable[[str, int], list], tokenizer: Any = None) -> AgentResult:
        """One query's loop: ``turn(Turn, sampling=None)`` extends an assistant turn (``sampling`` for
        a step the method samples its own way); ``search(text, k)`` the searcher's top ``k`` hits;
        ``tokenizer`` (when the run has one) for a method that cuts text by tokens."""


def loop_of(method: str) -> Loop:
    if method == "search-o1":
        from . import search_o1

        return search_o1
    from . import search_r1

    return search_r1


class SearchAgent(GARRewriter):
    """Search-o1 or Search-R1, live over any OpenAI-compatible server, or replayed from the published
    generations."""

    def __init__(self, method: str, options, members: list) -> None:
        """``members``: the searcher (cheap: it indexes on its first search), so its model identifies
        a live run; a replay gets none."""
        super().__init__(method, options)
        self.searcher_name, self.template = options.searcher, options.template
        self.sampling |= {"top_k": options.top_k, "repetition_penalty": options.repetition_penalty}
        self.settings = Settings(options.max_turns, options.search_limit, options.docs, self.sampling["max_tokens"])
        self.searcher = members[0] if members else None

    def display_name(self) -> str:
        """As the leaderboard names the method's rows: "Search-R1 (Qwen2.5-7b-it-em-ppo)"."""
        if self.source:
            return super().display_name()
        from r2med_tasks.plugin import LLMRef

        from .rewriter import METHOD_NAMES

        model = LLMRef(self.llm).model_name
        shown = loop_of(self.method).leaderboard_name(model) or model.rstrip("/").rpartition("/")[2]
        return f"{METHOD_NAMES[self.method]} ({shown})"

    def model_meta(self) -> dict:
        """The LLM's model; the method's prompts and the searcher's model make the revision."""
        meta = super().model_meta()
        if not self.llm:
            return meta
        import hashlib
        import json

        searched = dict(self.searcher.model_meta()) if hasattr(self.searcher, "model_meta") else {}
        identity = {"prompts": hashlib.sha256(loop_of(self.method).PROMPTS.encode()).hexdigest(),
                    "searcher": [self.searcher_name, searched.get("name"), str(searched.get("revision"))]}
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
        return {**meta, "revision": f"{meta['revision']}+{digest}"}

    def rewrite(self, queries, *, task, context):
        if self.source:
            return super().rewrite(queries, task=task, context=context)
        from r2med_tasks.llm import map_concurrently
        from r2med_tasks.plugin import LLMRef

        from .rewriter import DEFAULT_KEY

        loop = loop_of(self.method)
        model = LLMRef(self.llm).model_name
        defaults = loop.defaults(model)
        sampling = {k: defaults.get(k) if v is None else v for k, v in self.sampling.items()}
        settings = {k: defaults.get(k) if v is None else v for k, v in vars(self.settings).items()}
        clients: dict[tuple, Any] = {}
        lock = threading.Lock()

        def client_for(step: dict | None):
            """The run's client, or one sampling as a step of the method does (made once)."""
            params = {**sampling, **(step or {})}
            params.pop("max_tokens", None)  # each turn says its own
            key = tuple(sorted(params.items()))
            with lock:
                if key not in clients:
                    clients[key] = context.llm(self.llm, price=self.price, **params, concurrency=self.concurrency,
                                               template=self.template or None, **self.client_options)
                return clients[key]

        client = client_for(None)
        searcher = context.searcher(task, self.searcher)

        def one(i: int, abort) -> AgentResult:
            asked = []

            def turn(request, sampling: dict | None = None):
                """The answer with its thinking in place: vLLM's reasoning parsers put an unclosed
                thought, search tags and all, apart."""
                generation = client_for(sampling).continue_turns([request])[0]
                asked.append(generation)
                if generation.reasoning is None:
                    return generation
                return replace(generation, text=generation.whole_text(opened=loop.OPENS_THINKING))

            result = loop.run(queries[i].text, task_key=task.key or DEFAULT_KEY, model=model, settings=settings,
                              turn=turn, search=searcher.search_one, tokenizer=client.tokenizer())
            context.generated(queries[i].id, asked, answer=result.answer, query=queries[i].text, output=result.output,
                              # a trajectory that ends with no answer: none of its turns gave the query anything
                              sampling=client.params, unusable=0 if result.answer.strip() else len(asked),
                              method=self.method, r1_mode=True)
            advance(1)
            return result

        advance = context.progress(f"{loop.NAME} reasoning and searching", len(queries))
        results = map_concurrently(one, range(len(queries)), self.concurrency, name=loop.NAME, finish_running=True)
        context.keep("trajectories", [{"query_id": q.id, "query": q.text, "output": r.output, "answer": r.answer,
                                       **r.trajectory} for q, r in zip(queries, results)])
        return [replace(q, generated=(r.answer,), method=self.method, reasoning=True) for q, r in zip(queries, results)]
