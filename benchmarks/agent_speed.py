"""Search agents against the server-bound ideal: how close ``search-r1`` (and ``search-o1``) come to
an LLM server that answers every request after a fixed latency.

A local OpenAI-compatible server, in a process of its own (``/v1/models``, ``/v1/chat/completions``), answers each request
after ``--latency`` seconds, however many are in flight, with a scripted agent: a Search-R1 turn
first asks for a search, then answers; a Search-o1 turn first searches, its Reason-in-Documents step
reports, then it answers. N queries of R2MED's offline sample (repeated to N) run through the
agent's ``rewrite``, searching the sample's corpus with BM25, at each ``--concurrency``. With C
queries in flight and T requests per query, the server-bound ideal is ``ceil(N / C) * T *
latency``; the script prints the measured wall time and its ratio to the ideal (the target:
within 1.2x). Each run starts from an empty generation cache.

    python benchmarks/agent_speed.py [--queries 64] [--latency 0.25] [--concurrency 8,32] [--method search-r1]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-ppo"
QWQ = "Qwen/QwQ-32B"
TURNS = {"search-r1": 2, "search-o1": 3}  # requests per query the scripts below make


def answer(method: str, body: dict) -> str:
    """The scripted agent: search once, then answer."""
    messages = body.get("messages", [])
    sofar = messages[-1]["content"] if messages and messages[-1]["role"] == "assistant" else ""
    user = messages[0]["content"] if messages else ""
    if method == "search-r1":
        return "<answer> a cell answer </answer>" if "<information>" in sofar else \
            "<think> I need facts. </think>\n<search> cell biology </search>"
    if "**Final Information**" in user or "Task Instruction" in user and "Searched Web Pages" in user:
        return "**Final Information**\nCells divide."  # the Reason-in-Documents step
    if "<|begin_search_result|>" in sofar:
        return "Done.</think>\nThe answer is cell division."
    # the server stops at the end token; the question's end in the reasoning makes each query's step its own
    return f"Let me search about {user[-40:]!r}.\n<|begin_search_query|>cell biology"


def serve(method: str, model: str, latency: float, port) -> None:
    """The server, in a process of its own (so its work is not the agent's): ``port`` gets its port."""
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True
        protocol_version = "HTTP/1.1"  # connections kept open, as vLLM's server keeps them

        def log_message(self, *args):
            pass

        def reply(self, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.reply({"object": "list", "data": [{"id": model, "object": "model", "root": model}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency)
            text = answer(method, body)
            stop = next((s for s in body.get("stop", []) if s in text), None)
            if method == "search-o1" and "<|begin_search_query|>" in text and "Final" not in text \
                    and "<|end_search_query|>" in body.get("stop", []):
                stop = "<|end_search_query|>"
            self.reply({"id": "x", "object": "chat.completion", "model": model, "created": 0,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop", "stop_reason": stop}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.request_queue_size = 256
    port.put(httpd.server_address[1])
    httpd.serve_forever()


def measure(method: str, queries: int, latency: float, concurrency: int) -> float:
    """Wall seconds of the agent's ``rewrite`` over ``queries`` sample queries."""
    import r2med_tasks as r2med
    from r2med_tasks.api import registry
    from r2med_tasks.data import Query
    from r2med_tasks.pipelines import base_context
    from r2med_tasks.tasks import SAMPLE_TASK

    model = MODEL if method == "search-r1" else QWQ
    port = multiprocessing.Queue()
    process = multiprocessing.Process(target=serve, args=(method, model, latency, port), daemon=True)
    process.start()
    url = f"http://127.0.0.1:{port.get(timeout=30)}/v1#{model}"
    with tempfile.TemporaryDirectory() as cache:
        data = SAMPLE_TASK.load(cache_dir=Path(cache))
        asked = [Query(f"{data.queries[i % len(data.queries)].id}-{i}", data.queries[i % len(data.queries)].text
                       + f" ({i})") for i in range(queries)]
        built = r2med.pipeline(method, "bm25", llm=url, concurrency=concurrency)
        context = base_context(registry(), cache_dir=Path(cache)).with_(corpus=data.corpus)
        agent = built.stages["rewriter"].instance
        agent.members[0].index(data.corpus, task=SAMPLE_TASK, context=context)  # index outside the timing
        import openai  # noqa: F401 - the SDK's import (once per process) outside the timing too
        started = time.perf_counter()
        rewritten = agent.rewrite(asked, task=SAMPLE_TASK, context=context)
        wall = time.perf_counter() - started
    process.terminate()
    assert len(rewritten) == queries and all(q.generated for q in rewritten)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--concurrency", default="8,32")
    parser.add_argument("--method", choices=sorted(TURNS), default="search-r1")
    args = parser.parse_args()
    print(f"{args.method}: {args.queries} queries, server latency {args.latency} s, {TURNS[args.method]} "
          "requests per query")
    print(f"{'concurrency':>11}  {'ideal s':>8}  {'r2med s':>8}  {'ratio':>6}  target")
    for c in (int(x) for x in args.concurrency.split(",")):
        ideal = math.ceil(args.queries / c) * TURNS[args.method] * args.latency
        wall = measure(args.method, args.queries, args.latency, c)
        ratio = wall / ideal if ideal else float("inf")
        print(f"{c:>11}  {ideal:>8.2f}  {wall:>8.2f}  {ratio:>6.2f}  {'met' if ratio <= 1.2 else 'MISSED'} (<= 1.2x)")


if __name__ == "__main__":
    main()
