"""HyDE + BM25 against the server-bound ideal and the openai SDK: how close a live rewriter's run comes
to an LLM server that answers every request after a fixed latency.

A local OpenAI-compatible server (``latency_server.py``) answers each request after ``--latency``
seconds, however many are in flight. N queries (R2MED's offline sample, repeated to N with distinct
texts) are rewritten by HyDE and searched with BM25 through ``r2med_tasks.evaluate``, at each
``--concurrency`` C, from an empty cache; the process has imported everything before the clock
starts. The peers:

- ``ideal``: ``ceil(N / C) * latency``, the server-bound time of N requests C at a time;
- ``sdk``: the openai SDK's client sending the same N requests from C threads (nothing else).

    python benchmarks/rewrite_speed.py [--queries 200] [--latency 0.5] [--concurrency 8,32]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from latency_server import LatencyServer

MODEL = "Qwen/Qwen2.5-7B-Instruct"


def passage(body: dict) -> tuple[str, None]:
    """A hypothetical passage that echoes the end of the question (each query's its own)."""
    return "A passage on " + body["messages"][-1]["content"][-200:], None


def task_folder(root: Path, n: int) -> Path:
    """The offline sample with its queries repeated to ``n`` (distinct texts, the same judgments)."""
    import r2med_tasks

    source = Path(r2med_tasks.__file__).parent / "data" / "sample"
    folder = root / "Biology"
    folder.mkdir(parents=True)
    shutil.copy(source / "corpus.jsonl", folder / "corpus.jsonl")
    queries = [json.loads(line) for line in (source / "query.jsonl").open()]
    qrels = [json.loads(line) for line in (source / "qrels.jsonl").open()]
    with (folder / "query.jsonl").open("w") as q_out, (folder / "qrels.jsonl").open("w") as r_out:
        for i in range(n):
            q = queries[i % len(queries)]
            q_out.write(json.dumps({"id": f"{q['id']}-{i}", "text": f"{q['text']} (case {i})"}) + "\n")
            for r in qrels:
                if r["q_id"] == q["id"]:
                    r_out.write(json.dumps({**r, "q_id": f"{q['id']}-{i}"}) + "\n")
    return root


def r2med_wall(data: Path, url: str, concurrency: int) -> float:
    import r2med_tasks as r2med

    with tempfile.TemporaryDirectory() as tmp:
        built = r2med.pipeline("hyde", "bm25", llm=url, concurrency=concurrency)
        started = time.perf_counter()
        r2med.evaluate(built, tasks="Biology", data_dir=data, output=Path(tmp) / "out", cache_dir=Path(tmp) / "cache")
        return time.perf_counter() - started


def sdk_wall(data: Path, base_url: str, concurrency: int) -> float:
    import openai

    texts = [json.loads(line)["text"] for line in (data / "Biology" / "query.jsonl").open()]
    client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0)

    def ask(text: str) -> str:
        answer = client.chat.completions.create(model=MODEL, temperature=0.7, max_tokens=512, messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"Please write a passage to answer the question.\nQuestion: {text}"}])
        return answer.choices[0].message.content

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        answers = list(pool.map(ask, texts))
    assert len(answers) == len(texts)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", default="8,32")
    args = parser.parse_args()
    import openai  # noqa: F401 - imports outside the timings
    import r2med_tasks  # noqa: F401

    print(f"HyDE + BM25: {args.queries} queries, server latency {args.latency} s, one request per query")
    print(f"{'concurrency':>11}  {'ideal s':>8}  {'sdk s':>7}  {'r2med s':>8}  {'r2med/ideal':>11}  "
          f"{'r2med/sdk':>9}  target")
    with tempfile.TemporaryDirectory() as tmp, LatencyServer(passage, MODEL, args.latency) as base_url:
        data = task_folder(Path(tmp), args.queries)
        for c in (int(x) for x in args.concurrency.split(",")):
            ideal = math.ceil(args.queries / c) * args.latency
            sdk = sdk_wall(data, base_url, c)
            ours = r2med_wall(data, f"{base_url}#{MODEL}", c)
            ratio = ours / ideal
            print(f"{c:>11}  {ideal:>8.2f}  {sdk:>7.2f}  {ours:>8.2f}  {ratio:>11.2f}  {ours / sdk:>9.2f}  "
                  f"{'met' if ratio <= 1.2 else 'MISSED'} (<= 1.2x ideal)", flush=True)


if __name__ == "__main__":
    main()
