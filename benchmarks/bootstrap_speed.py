"""Bootstrap intervals at R2MED's size: 876 queries in eight tasks of the datasets' query counts.

Times, best of ``--repeat`` runs after one warm-up, what a run and a leaderboard row compute:

- ``tasks``    the eight per-task intervals (``uncertainty.mean_interval``, 10,000 resamples each)
- ``average``  the interval of the R2MED average (``uncertainty.average_interval_of``: each task's
               queries resampled within the task)
- ``compare``  ``r2med compare``'s statistics for two systems (``significance.compare``: the
               randomization test and the paired intervals, per task and for the average)
- ``ties``     the tie test of one row against the best (``significance.average_randomization``)

and prints the target of issue #27 (the per-task and average intervals of 876 queries under 1 s)
as met or not met. Scores are seeded random nDCG-like values (many zeros, some ones).

    python benchmarks/bootstrap_speed.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from r2med_tasks.scoring.significance import average_randomization, compare
from r2med_tasks.scoring.uncertainty import average_interval_of, mean_interval

# R2MED's query counts (Biology ... IIYi-Clinical): 876 in all
SIZES = {"Biology": 103, "Bioinformatics": 77, "Medical-Sciences": 88, "MedXpertQA-Exam": 97, "MedQA-Diag": 118,
         "PMC-Treatment": 150, "PMC-Clinical": 114, "IIYi-Clinical": 129}


def system(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for task, n in SIZES.items():
        values = rng.random(n)
        values[rng.random(n) < 0.3] = 0.0
        values[rng.random(n) < 0.1] = 1.0
        out[task] = values
    return out


def best_of(repeat: int, work) -> float:
    work()  # warm-up: imports, first allocations
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    a, b = system(0), system(1)
    per_query_a = {t: {f"q{i}": float(v) for i, v in enumerate(values)} for t, values in a.items()}
    per_query_b = {t: {f"q{i}": float(v) for i, v in enumerate(values)} for t, values in b.items()}
    timings = {
        "tasks": best_of(args.repeat, lambda: [mean_interval(v) for v in a.values()]),
        "average": best_of(args.repeat, lambda: average_interval_of(a)),
        "compare": best_of(args.repeat, lambda: compare(per_query_a, per_query_b)),
        "ties": best_of(args.repeat, lambda: average_randomization(list(a.values()), list(b.values()))),
    }
    print(f"{sum(SIZES.values())} queries in {len(SIZES)} tasks, 10,000 resamples / trials, best of {args.repeat}:")
    for name, seconds in timings.items():
        print(f"  {name:<8} {seconds:.3f} s")
    both = timings["tasks"] + timings["average"]
    print(f"target (issue #27): per-task and average intervals under 1 s: {'met' if both < 1 else 'NOT met'} "
          f"({both:.3f} s)")


if __name__ == "__main__":
    main()
