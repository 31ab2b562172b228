"""R2MED's eight datasets as MTEB-style tasks, and their data, from a local folder or the hub."""

from .specs import GROUPS, PINNED_REVISIONS, R2MED_TASKS, SAMPLE_TASK, SHORT_NAMES, TaskSpec, normalize

__all__ = ["GROUPS", "PINNED_REVISIONS", "R2MED_TASKS", "SAMPLE_TASK", "SHORT_NAMES", "TaskSpec", "normalize"]
