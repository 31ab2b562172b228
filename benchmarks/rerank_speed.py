"""LLM rerankers against the server-bound ideal: how close ``llm-rerank``, ``insertrank`` and ``grouprank``
come to an LLM server that answers every request after a fixed latency.

A local OpenAI-compatible server (``latency_server.py``) answers each request after ``--latency`` seconds,
however many are in flight. N queries, each with a first stage of K documents (a TREC run read by
``run-file``), are reranked through ``r2med_tasks.evaluate`` at each ``--concurrency`` C, from an
empty cache; the process has imported everything before the clock starts. The ideal is
``max(ceil(R / C), D) * latency`` for R requests of which each query's D must go one after another:
a listwise query's windows depend on one another (D = its window count), a groupwise query's groups
do not (D = 1), so the concurrency comes from across queries.

    python benchmarks/rerank_speed.py [--queries 100] [--depth 100] [--latency 0.05] [--concurrency 8,32]
"""

from __future__ import annotations

import argparse
import json
import math
import re
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", default="8,32")
    parser.add_argument("--rerankers", default="llm-rerank,insertrank,grouprank")
    args = parser.parse_args()
    import r2med_tasks  # noqa: F401 - imports outside the timings

    print(f"{args.queries} queries x top {args.depth}, server latency {args.latency} s")
    print(f"{'reranker':>11}  {'concurrency':>11}  {'ideal s':>8}  {'r2med s':>8}  {'r2med/ideal':>11}  target")
    with tempfile.TemporaryDirectory() as tmp, LatencyServer(answer, MODEL, args.latency) as base_url:
        data, run = task_folder(Path(tmp), args.queries, args.depth)
        wall("llm-rerank", data, run, f"{base_url}#{MODEL}", 32)  # untimed: what a first run loads once
        for reranker in args.rerankers.split(","):
            for c in (int(x) for x in args.concurrency.split(",")):
                best = ideal(reranker, args.queries, args.depth, c, args.latency)
                ours = wall(reranker, data, run, f"{base_url}#{MODEL}", c)
                ratio = ours / best
                print(f"{reranker:>11}  {c:>11}  {best:>8.2f}  {ours:>8.2f}  {ratio:>11.2f}  "
                      f"{'met' if ratio <= 1.2 else 'MISSED'} (<= 1.2x ideal)", flush=True)


if __name__ == "__main__":
    main()
