"""Sweeps: many pipelines × tasks, each an independent job, run here, in a pool of processes, or on
Ray, all into one results folder. Every job runs through the runner, so its results are exactly
what ``r2med-run`` writes. Jobs that hold the same results folder form a chain and run in turn,
rather than wait on each other's lock with a worker idle; chains run side by side.
"""
