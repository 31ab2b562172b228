"""R2MED's eight datasets and the offline sample, registered as tasks."""

from r2med_tasks.plugin import hookimpl
from r2med_tasks.plugin import R2MED_TASKS, SAMPLE_TASK


@hookimpl
def register_tasks(register):
    for task in (*R2MED_TASKS, SAMPLE_TASK):
        register(task)
