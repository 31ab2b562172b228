"""R2MED's eight datasets as MTEB-style tasks, and their data: the task specs (``specs``), what a
task's data is (``taskdata``), its files in R2MED's layout (``datafiles``), rows checked into task
data (``validation``) and loading from a local folder or the hub (``loading``).

``r2med_tasks.tasks`` itself names the specs, as it did when it was one module.
"""

from .specs import GROUPS, PINNED_REVISIONS, R2MED_TASKS, SAMPLE_TASK, SHORT_NAMES, TaskSpec, normalize

__all__ = ["GROUPS", "PINNED_REVISIONS", "R2MED_TASKS", "SAMPLE_TASK", "SHORT_NAMES", "TaskSpec", "normalize"]
