"""LLM rerankers against the server-bound ideal: how close ``llm-rerank``, ``insertrank`` and ``grouprank``
come to an LLM server that answers every request after a fixed latency.

A local OpenAI-compatible server (``latency_server.py``) answers each request after ``--latency`` seconds,
however many are in flight. N queries, each with a first stage of K documents (a TREC run read by
``run-file``), are reranked through ``r2med_tasks.evaluate`` at each ``--concurrency`` C, from an
empty cache; the process has imported everything before the clock starts. The ideal is
``max(ceil(R / C), D) * latency`` for R requests of which each query's D must go one after another:
a listwise query's windows depend on one another (D = its window count), a groupwise query's groups
do not (D = 1), so the concurrency comes from across queries.

Two times per run: the reranking, from the first request the server receives to the last answer
it sends (measured by the server: how long the reranker kept it at work), which the target holds
to within 1.2x of the ideal; and the whole ``evaluate()``, which adds what a run does before and
after (reading the first stage, scoring and writing the results: the same at any concurrency).

    python benchmarks/rerank_speed.py [--queries 100] [--depth 100] [--latency 0.05] [--concurrency 8,32] [--repeat 3]

Each configuration runs ``--repeat`` times (wall times on a shared 2-core machine vary by a tenth
or more from run to run): the median is compared with the ideal, and the range is shown.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import tempfile
import time
from pathlib import Path

from latency_server import LatencyServer

MODEL = "ranker"
WORDS = "fever rash cough anaemia insulin renal hepatic cardiac thrombus platelet sodium potassium".split()


def answer(body: dict) -> tuple[str, None]:
    """A listwise window reversed, or every document of a group scored 5."""
    user = body["messages"][-1]["content"]
    if "Score these documents" in user:
        n = int(re.search(r"I will provide you (\d+) documents", user).group(1))
        scores = ", ".join(f'"[{i}]": 5' for i in range(1, n + 1))
        return f"<reason>alike</reason>\n<answer>\n```json\n{{{scores}}}\n```\n</answer>", None
    n = len(re.findall(r"^\[\d+\] ", "\n".join(m["content"] for m in body["messages"]), re.M))
    return " > ".join(f"[{i}]" for i in range(n, 0, -1)), None


def task_folder(root: Path, queries: int, depth: int) -> tuple[Path, Path]:
    """A task of ``queries`` queries over ``queries + depth`` documents, and a run of ``depth`` each."""
    folder = root / "data" / "Biology"
    folder.mkdir(parents=True)
    docs = queries + depth
    with (folder / "corpus.jsonl").open("w") as out:
        for d in range(docs):
            text = " ".join(WORDS[(d + i) % len(WORDS)] for i in range(60))
            out.write(json.dumps({"id": f"d{d}", "text": f"Document {d}: {text}"}) + "\n")
    with (folder / "query.jsonl").open("w") as q_out, (folder / "qrels.jsonl").open("w") as r_out:
        for q in range(queries):
            q_out.write(json.dumps({"id": f"q{q}", "text": f"Case {q}: {WORDS[q % len(WORDS)]} and more"}) + "\n")
            r_out.write(json.dumps({"q_id": f"q{q}", "p_id": f"d{q}", "score": 1}) + "\n")
    run = root / "first.trec"
    with run.open("w") as out:
        for q in range(queries):
            for rank in range(depth):
                out.write(f"q{q} Q0 d{q + rank} {rank + 1} {depth - rank:.3f} first\n")
    return root / "data", run


def ideal(reranker: str, queries: int, depth: int, concurrency: int, latency: float) -> float:
    if reranker == "grouprank":  # 6 rounds of groups of 20 every 20: independent requests
        requests, chain = queries * 6 * math.ceil(depth / 20), 1
    else:  # windows of 20 by 10, from the bottom up, one after another
        chain = 1 + max(0, math.ceil((depth - 20) / 10))
        requests = queries * chain
    return max(math.ceil(requests / concurrency), chain) * latency


def wall(reranker: str, data: Path, run: Path, url: str, concurrency: int) -> float:
    import r2med_tasks as r2med

    with tempfile.TemporaryDirectory() as tmp:
        built = r2med.pipeline("run-file", reranker, path=str(run), llm=url, concurrency=concurrency)
        started = time.perf_counter()
        r2med.evaluate(built, tasks="Biology", data_dir=data, output=Path(tmp) / "out", cache_dir=Path(tmp) / "cache")
        return time.perf_counter() - started


def timed(reranker: str, data: Path, run: Path, server: LatencyServer, concurrency: int) -> tuple[float, float]:
    """(the reranking's span at the server, the whole run's wall time)."""
    server.span()  # a new span: the served-model request of the run before is not in it
    whole = wall(reranker, data, run, f"{server.base_url}#{MODEL}", concurrency)
    return server.span(), whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", default="8,32")
    parser.add_argument("--rerankers", default="llm-rerank,insertrank,grouprank")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import r2med_tasks  # noqa: F401 - imports outside the timings

    print(f"{args.queries} queries x top {args.depth}, server latency {args.latency} s; medians of {args.repeat} "
          "runs (range)")
    print(f"{'reranker':>11}  {'C':>3}  {'ideal s':>7}  {'reranking s':>18}  {'/ideal':>6}  {'whole run s':>18}  "
          f"{'/ideal':>6}  target: reranking <= 1.2x ideal")
    server = LatencyServer(answer, MODEL, args.latency)
    with tempfile.TemporaryDirectory() as tmp, server as base_url:
        data, run = task_folder(Path(tmp), args.queries, args.depth)
        wall("llm-rerank", data, run, f"{base_url}#{MODEL}", 32)  # untimed: what a first run loads once
        for reranker in args.rerankers.split(","):
            for c in (int(x) for x in args.concurrency.split(",")):
                best = ideal(reranker, args.queries, args.depth, c, args.latency)
                spans, walls = zip(*(timed(reranker, data, run, server, c) for _ in range(args.repeat)))
                cells = []
                for times in (spans, walls):
                    middle = statistics.median(times)
                    cells += [f"{middle:.2f} ({min(times):.2f}-{max(times):.2f})", middle / best]
                print(f"{reranker:>11}  {c:>3}  {best:>7.2f}  {cells[0]:>18}  {cells[1]:>6.2f}  {cells[2]:>18}  "
                      f"{cells[3]:>6.2f}  {'met' if cells[1] <= 1.2 else 'MISSED'}", flush=True)


if __name__ == "__main__":
    main()
