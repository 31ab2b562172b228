"""What a component hands the runner, checked at the one place the runner receives it: a
retriever's or reranker's ranking, a rewriter's queries, the LLM answers its generation records
count. Whatever passes is what scoring, fusion and every reader of a results folder take (plain
dicts of finite floats, ids the task and corpus hold); whatever does not stops the run in one line
naming the plugin, the query (and document) and what to fix, before anything is written.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Container, Mapping, Sequence
from typing import Any

from ..errors import PluginError
from ..scoring.runs import Run, id_problem, shown
from ..tasks.taskdata import Query


def checked_run(run: Any, component: str, *, queries: Collection[str], documents: Container[str],
                judged: Collection[str] = ()) -> Run:
    """``run`` as the runner keeps it: each of ``queries`` it ranks (every ``judged`` one among
    them), its documents each once, from ``documents``, with a finite score, as a float."""
    if not isinstance(run, Mapping):
        raise PluginError(f"{component} returned {type(run).__name__}; return {{query id: {{document id: score}}}}")
    out: Run = {}
    for qid, docs in run.items():
        if qid not in queries or type(qid) is not str:
            kind = "" if type(qid) is str else f" ({type(qid).__name__})"
            which = (type(qid) is str and id_problem(qid)) or (f"is not one of the {len(queries)} queries it was "
                                                               "given; return results only for those, by their ids")
            raise PluginError(f"{component} returned query id {shown(qid)}{kind}, which {which}")
        if qid in out:
            raise PluginError(f"{component} returned query {qid!r} twice; return each query once")
        if not isinstance(docs, Mapping):
            raise PluginError(f"{component} returned {type(docs).__name__} for query {qid!r}; return each query's "
                              "results as {document id: score}")
        ranked = out[qid] = {}
        for doc_id, score in docs.items():
            if doc_id not in documents or type(doc_id) is not str:
                raise PluginError(f"{component} returned unknown document id {shown(doc_id)} for query {qid!r}; "
                                  "results must use the corpus's ids")
            if doc_id in ranked:
                raise PluginError(f"{component} returned document {doc_id!r} twice for query {qid!r}; return each "
                                  "document once per query")
            value = _finite(score)
            if value is None:
                raise PluginError(f"{component} returned score {shown(score, 30)} for query {qid!r}, document "
                                  f"{doc_id!r}; scores must be finite real numbers (not NaN, not ±inf)")
            ranked[doc_id] = value
    missing = [q for q in judged if q not in out]
    if missing:
        raise PluginError(f"{component} returned no results for {len(missing)} queries (e.g. {missing[0]!r}); "
                          "return every query it was given, with {} for one it finds nothing for")
    return out


def _finite(score: Any) -> float | None:
    if not isinstance(score, (int, float)):
        return None
    try:
        value = float(score)
    except OverflowError:  # an int beyond any float
        return None
    return value if math.isfinite(value) else None


def checked_rewrites(rewritten: Any, given: Sequence[Query], component: str) -> list[Query]:
    """``rewritten``, one :class:`Query` per query in ``given``, each with text, generated texts and
    method that are strings, as the retrievers and the generation files take them."""
    if isinstance(rewritten, (str, bytes, Mapping)) or not isinstance(rewritten, Sequence):
        raise PluginError(f"{component} returned {type(rewritten).__name__}; return a list of Query, one per "
                          "query it was given")
    asked = {q.id for q in given}
    out: dict[str, Query] = {}
    for query in rewritten:
        if not isinstance(query, Query):
            raise PluginError(f"{component} returned {shown(query, 60)} ({type(query).__name__}) among its queries; "
                              "return each as a Query (dataclasses.replace(query, generated=(text,)))")
        if type(query.id) is not str or query.id not in asked:
            raise PluginError(f"{component} returned query id {shown(query.id)}, which is not one of the "
                              f"{len(asked)} queries it was given; keep each query's id")
        if query.id in out:
            raise PluginError(f"{component} returned query {query.id!r} twice; return one rewritten query per query")
        bad = _not_text(query)
        if bad is not None:
            what, value = bad
            raise PluginError(f"{component} returned query {query.id!r} with {what} {shown(value, 60)} "
                              f"({type(value).__name__}); text and method are strings, generated a tuple of "
                              "strings")
        out[query.id] = query
    missing = [q.id for q in given if q.id not in out]
    if missing:
        raise PluginError(f"{component} returned no rewritten query for {len(missing)} of {len(given)} queries "
                          f"(e.g. {missing[0]!r}); return one per query it was given")
    return list(out.values())


def _not_text(query: Query) -> tuple[str, Any] | None:
    """The first of a query's fields that should hold text and does not, and its value."""
    if not isinstance(query.generated, (tuple, list)):
        return "generated", query.generated
    fields = (("text", query.text), ("method", query.method), *((f"generated[{i}]", g)
                                                              for i, g in enumerate(query.generated)))
    return next(((name, value) for name, value in fields if not isinstance(value, str)), None)


class Answers:
    """The LLM answers one call of a component handed over in its generation records
    (``context.generated``: each record's ``samples``), and how many of them it could not use (each
    record's ``unusable``). A call that could use none fails: its stage's number would be another
    stage's (a reranker's, the first stage's order) under its name; one that could not use some says
    how many."""

    def __init__(self, component: str) -> None:
        self.component = component
        self.count = self.unusable = self.queries = 0  # answers, unusable ones, queries with one
        self.example: dict | None = None  # the record with an unusable answer of the first query id (whatever
        # order the answers arrived in, so that the message is the same every run)
        self._lock = threading.Lock()

    def add(self, record: dict) -> None:
        samples = record.get("samples")
        count = len(samples) if isinstance(samples, list) else 0
        unusable = record.get("unusable", 0)
        if type(unusable) is not int or not 0 <= unusable <= count:
            raise PluginError(f"{self.component}: context.generated({record.get('query_id')!r}, ..., "
                              f"unusable={shown(unusable, 30)}): unusable counts the answers it could not use, "
                              f"an integer from 0 to the {count} it handed over")
        with self._lock:
            self.count += count
            self.unusable += unusable
            if unusable:
                self.queries += 1
                if self.example is None or str(record.get("query_id")) < str(self.example.get("query_id")):
                    self.example = record

    def judge(self, task: Any, log: Callable[[str], None]) -> None:
        """Fail when no answer was usable; log how many were not, when some were not (``task``: the
        task's spec, named in either)."""
        if not self.unusable:
            return
        name = task.name
        if self.unusable == self.count:
            example = self.example or {}
            raise PluginError(f"{self.component} could not use any of the {self.count} LLM answers for {name} "
                              f"(query {example.get('query_id')!r}: {shown(example.get('output'), 60)}): the model "
                              "does not answer as the component asks; check the model it calls and its limits "
                              "(a max_tokens that cuts the answer off)")
        log(f"warning: {name}: {self.component} could not use {self.unusable} of {self.count} LLM answers, for "
            f"{self.queries} queries (each query's count: \"unusable\" in its generation records)")
