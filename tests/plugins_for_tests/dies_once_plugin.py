"""A retriever that kills its own process the first time it indexes: a Ray worker lost mid-job;
and a dense model adapter that does the same on its first chunk: a Ray actor lost mid-chunk.

``dies-once`` scores as ``overlap`` does. With R2MED_TEST_DIE_ONCE=<file>, the first ``index`` call
(the one that finds no such file) creates the file and ends its process at once, as a node that
vanishes would; every later call, in any process, runs normally. Load it with
R2MED_PLUGINS=dies_once_plugin (tests/plugins_for_tests on the path), which sweeps pass on to
their Ray workers. ``DiesOncePublished(marker, ...)`` is a published model's adapter with the
marker file given directly (actors get no environment from the caller).
"""

import os

from overlap_plugin import Overlap, OverlapOptions

from r2med_plugins.dense.published import PublishedModel
from r2med_tasks.components.specs import RetrieverSpec
from r2med_tasks.components.hookspecs import hookimpl


def die_once(marker: str | None) -> None:
    """End this process at once if ``marker`` does not exist yet (creating it: one caller wins)."""
    if not marker:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, f"{os.getpid()}\n".encode())
    os.close(fd)
    os._exit(1)


class DiesOnce(Overlap):
    def index(self, corpus, *, task, context):
        die_once(os.environ.get("R2MED_TEST_DIE_ONCE"))
        super().index(corpus, task=task, context=context)


class DiesOncePublished(PublishedModel):
    def __init__(self, marker: str, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.marker = marker

    def encoder(self):
        """Dies when its first chunk asks for the model, before loading it: Ray restarts the actor
        all the same, and the process lost spent no seconds importing the model's libraries."""
        die_once(self.marker)
        return super().encoder()


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(name="dies-once", factory=DiesOnce, options=OverlapOptions,
                           description="overlap, but dies once (tests only)"))

