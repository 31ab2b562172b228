"""Sweeps: many pipelines × tasks, each pipeline on each task an independent job, run one after
another in this process, side by side in a pool of processes, or as Ray tasks across a cluster,
all into one shared results folder.

A sweep is ``r2med-run`` argument lines (``r2med leaderboard --commands`` in any of its formats
works as is) or a TOML file: pipelines × an options grid × tasks. Every job runs through the
runner, so its results are exactly what ``r2med-run`` writes: the same folders, identities, resume
and per-folder locks. Jobs that hold the same results folder (one pipeline's tasks, a reranker
and its first stage) form a chain and run in turn rather than wait on each other's lock with a
worker idle; chains run side by side. Ray reruns a job whose worker died: each task's files are
written atomically, TaskResult last, so the rerun finishes the lost run's task without mixing two
runs. Ray is imported only by the Ray executor.

The package, in the order its modules import each other: ``sources`` (a sweep file's lines),
``plan`` (the jobs and what each needs), ``board`` (each job's state and outcome, the live view,
the merged leaderboard), ``executors`` (running the jobs: here, in a pool of processes, on Ray).
"""
