"""Runs and their scores: pure computation over rankings and judgments, knowing nothing of tasks,
plugins or results folders."""
