"""Search agents against the server-bound ideal: how close ``search-r1`` (and ``search-o1``) come to
an LLM server that answers every request after a fixed latency.

A local OpenAI-compatible server (``latency_server.py``) answers each request after ``--latency``
seconds, however many are in flight, with a scripted agent: a Search-R1 turn
first asks for a search, then answers; a Search-o1 turn first searches, its Reason-in-Documents step
reports, then it answers. N queries of R2MED's offline sample (repeated to N) run through the
agent's ``rewrite``, searching the sample's corpus with BM25, at each ``--concurrency``. With C
queries in flight and T requests per query, the server-bound ideal is ``ceil(N / C) * T *
latency``; the script prints the measured wall time and its ratio to the ideal (the target:
within 1.2x). Each run starts from an empty generation cache, and every query's generation record
is journalled as a run's is. The peer, ``sdk``: the openai SDK's client alone
(``chat.completions.create``) sending the same number of requests from C threads, each thread T
requests per query one after another, nothing else (the floor of a Python client on the machine).

    python benchmarks/agent_speed.py [--queries 64] [--latency 0.25] [--concurrency 8,32] [--method search-r1]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from latency_server import LatencyServer

MODEL = "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-ppo"
QWQ = "Qwen/QwQ-32B"
TURNS = {"search-r1": 2, "search-o1": 3}  # requests per query the scripts below make


def answer(method: str, body: dict) -> tuple[str, str | None]:
    """The scripted agent: search once, then answer; and the stop string that ended the text."""
    messages = body.get("messages", [])
    sofar = messages[-1]["content"] if messages and messages[-1]["role"] == "assistant" else ""
    user = messages[0]["content"] if messages else ""
    if method == "search-r1":
        text = "<answer> a cell answer </answer>" if "<information>" in sofar else \
            "<think> I need facts. </think>\n<search> cell biology </search>"
    elif "**Final Information**" in user or "Task Instruction" in user and "Searched Web Pages" in user:
        text = "**Final Information**\nCells divide."  # the Reason-in-Documents step
    elif "<|begin_search_result|>" in sofar:
        text = "Done.</think>\nThe answer is cell division."
    else:  # the server stops at the end token; the question's end in the reasoning makes each query's step its own
        text = f"Let me search about {user[-40:]!r}.\n<|begin_search_query|>cell biology"
    stop = next((s for s in body.get("stop", []) if s in text), None)
    if method == "search-o1" and "<|begin_search_query|>" in text and "Final" not in text \
            and "<|end_search_query|>" in body.get("stop", []):
        stop = "<|end_search_query|>"
    return text, stop


def measure(method: str, queries: int, latency: float, concurrency: int) -> float:
    """Wall seconds of the agent's ``rewrite`` over ``queries`` sample queries."""
    import r2med_tasks as r2med
    from r2med_tasks.api import registry
    from r2med_tasks.files.journal import Journal
    from r2med_tasks.running.pipelines import base_context
    from r2med_tasks.running.runner import _Current, stage_context
    from r2med_tasks.tasks.taskdata import Query
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    model = MODEL if method == "search-r1" else QWQ
    with LatencyServer(partial(answer, method), model, latency) as base_url, \
            tempfile.TemporaryDirectory() as cache:
        url = f"{base_url}#{model}"
        data = SAMPLE_TASK.load(cache_dir=Path(cache))
        asked = [Query(f"{data.queries[i % len(data.queries)].id}-{i}", data.queries[i % len(data.queries)].text
                       + f" ({i})") for i in range(queries)]
        built = r2med.pipeline(method, "bm25", llm=url, concurrency=concurrency)
        # the records as a run writes them: kept, and appended to a journal (the results folder's in a run)
        journal = Journal(Path(cache) / "records.jsonl", "the generation records")
        current = _Current(SAMPLE_TASK, data, {}, journal=journal)
        context = base_context(registry(), cache_dir=Path(cache)).with_(corpus=data.corpus, records=current.generated)
        context = stage_context(built.stages["rewriter"], context)
        agent = built.stages["rewriter"].instance
        agent.searcher.index(data.corpus, task=SAMPLE_TASK, context=context)  # index outside the timing
        import openai  # noqa: F401 - the SDK's import (once per process) outside the timing too
        started = time.perf_counter()
        rewritten = agent.rewrite(asked, task=SAMPLE_TASK, context=context)
        wall = time.perf_counter() - started
        assert len(current.journal.read()[0]) == queries
    assert len(rewritten) == queries and all(q.generated for q in rewritten)
    assert len(current.generations) == queries
    return wall


def sdk_wall(method: str, queries: int, latency: float, concurrency: int) -> float:
    """Wall seconds of the openai SDK's client alone sending ``queries`` x T requests from
    ``concurrency`` threads, each query's T one after another."""
    import openai

    model = MODEL if method == "search-r1" else QWQ
    with LatencyServer(partial(answer, method), model, latency) as base_url:
        client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0)

        def ask(i: int) -> None:
            messages = [{"role": "user", "content": f"Question {i}"}]
            for _ in range(TURNS[method]):
                client.chat.completions.create(model=model, messages=messages, max_tokens=100)

        client.models.list()  # a connection made, as the agent's client asks GET /models first
        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(ask, range(queries)))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--concurrency", default="8,32")
    parser.add_argument("--method", choices=sorted(TURNS), default="search-r1")
    args = parser.parse_args()
    print(f"{args.method}: {args.queries} queries, server latency {args.latency} s, {TURNS[args.method]} "
          "requests per query")
    print(f"{'concurrency':>11}  {'ideal s':>8}  {'sdk s':>7}  {'r2med s':>8}  {'ratio':>6}  {'r2med/sdk':>9}  target")
    for c in (int(x) for x in args.concurrency.split(",")):
        ideal = math.ceil(args.queries / c) * TURNS[args.method] * args.latency
        sdk = sdk_wall(args.method, args.queries, args.latency, c)
        wall = measure(args.method, args.queries, args.latency, c)
        ratio = wall / ideal if ideal else float("inf")
        print(f"{c:>11}  {ideal:>8.2f}  {sdk:>7.2f}  {wall:>8.2f}  {ratio:>6.2f}  {wall / sdk:>9.2f}  "
              f"{'met' if ratio <= 1.2 else 'MISSED'} (<= 1.2x)", flush=True)


if __name__ == "__main__":
    main()
