"""The searcher an agent gets (``context.searcher``): a retriever over the task's corpus, indexed
once, whose concurrent searches go to the retriever in batches."""

from __future__ import annotations

import threading
import time

import pytest

from r2med_tasks.components.context import Context
from r2med_tasks.tasks.taskdata import Corpus
from r2med_tasks.components.searcher import Hit, Searcher

from conftest import wait_until

IDS = [f"d{i}" for i in range(20)]
TEXTS = [f"text of d{i}" for i in range(20)]


class Recording:
    """Scores a document by how many characters its id shares with the query; records its calls."""

    def __init__(self, delay: float = 0.0, fail: bool = False, gate: threading.Event | None = None):
        self.delay, self.fail, self.gate = delay, fail, gate  # a search waits for ``gate``, if any
        self.indexed, self.batches = 0, []

    def index(self, corpus, *, task, context):
        self.indexed += 1
        self.ids = corpus.ids

    def search(self, queries, *, task, top_k, context):
        self.batches.append([q.text for q in queries])
        if self.gate is not None:
            self.gate.wait(30)
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("the index is gone")
        return {q.id: {d: float(len(set(d) & set(q.text))) + 1.0 / (i + 1) for i, d in enumerate(self.ids)}
                for q in queries}


def searcher(retriever) -> Searcher:
    return Searcher(retriever, Corpus(IDS, TEXTS, "c"), task=None, context=Context(cache_dir=None))


def test_hits_are_the_retrievers_best_with_their_texts():
    found = searcher(Recording()).search(["d1", "d17"], 3)
    assert found[0] == [Hit("d1", "text of d1", 2.5), Hit("d10", "text of d10", 2.0 + 1 / 11),
                        Hit("d11", "text of d11", 2.0 + 1 / 12)]
    assert [h.id for h in found[1]] == ["d17", "d1", "d7"]


def test_concurrent_searches_are_batched_and_the_corpus_indexed_once():
    gate = threading.Event()
    retriever = Recording(gate=gate)
    shared = searcher(retriever)
    results = {}

    def ask(i):
        results[i] = shared.search_one(f"d{i}", 2)

    first = threading.Thread(target=ask, args=(1,))
    first.start()
    wait_until(lambda: retriever.batches)  # the first search is running
    others = [threading.Thread(target=ask, args=(i,)) for i in range(2, 9)]
    for t in others:
        t.start()
    wait_until(lambda: len(shared._pending) == 7)  # the others queued behind it
    gate.set()
    for t in [first, *others]:
        t.join()
    assert retriever.indexed == 1
    assert [len(b) for b in retriever.batches] == [1, 7]  # the seven waiting ones: one call
    assert all(results[i][0].id == f"d{i}" for i in range(1, 9))


def test_a_failing_search_fails_every_search_of_its_batch():
    shared = searcher(Recording(delay=0.2, fail=True))
    errors = []

    def ask():
        try:
            shared.search_one("d1", 2)
        except RuntimeError as e:
            errors.append(str(e))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
        time.sleep(0.02)
    for t in threads:
        t.join(timeout=10)
    assert errors == ["the index is gone"] * 4


def test_the_context_gives_a_searcher_over_its_corpus():
    made = []

    def retriever(name, *options):
        made.append((name, options))
        return Recording()

    context = Context(cache_dir=None, corpus=Corpus(IDS, TEXTS, "c"), retrievers=retriever)
    found = context.searcher(None, "bm25", "k1=1.2").search_one("d3", 1)
    assert made == [("bm25", ("k1=1.2",))] and found[0].id == "d3"
    from r2med_tasks.errors import UserError

    with pytest.raises(UserError, match="no corpus to search"):
        Context(cache_dir=None).searcher(None)
