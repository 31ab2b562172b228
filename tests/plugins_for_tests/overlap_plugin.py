"""A tiny deterministic retriever for tests: score = number of shared lower-cased words.

Env hooks for the resume and lock tests: R2MED_TEST_LOG (append 'index <task>' per index call) and
R2MED_TEST_BLOCK_ON=<task name> (write '<log>.ready', then wait in search, to be killed: for at
most R2MED_TEST_BLOCK_SECONDS, default 120, or until the file R2MED_TEST_RELEASE names exists).
"""

import os
import re
import time
from pathlib import Path

from pydantic import Field

from r2med_tasks.components.specs import RetrieverSpec
from r2med_tasks.components.hookspecs import hookimpl
from r2med_tasks.components.options import Options

WORD = re.compile(r"\w+")


def words(text):
    return set(WORD.findall(text.lower()))


class OverlapOptions(Options):
    bonus: float = Field(0.0, description="added to every score")


class Overlap:
    def __init__(self, options):
        self.bonus = options.bonus

    def index(self, corpus, *, task, context):
        log = os.environ.get("R2MED_TEST_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"index {task.name}\n")
        self.docs = list(zip(corpus.ids, (words(t) for t in corpus.texts)))

    def search(self, queries, *, task, top_k, context):
        if os.environ.get("R2MED_TEST_BLOCK_ON") == task.name:
            Path(os.environ["R2MED_TEST_LOG"] + ".ready").write_text("ready")
            release = os.environ.get("R2MED_TEST_RELEASE")
            end = time.monotonic() + float(os.environ.get("R2MED_TEST_BLOCK_SECONDS", "120"))
            while time.monotonic() < end and not (release and os.path.exists(release)):
                time.sleep(0.01)
        out = {}
        for q in queries:
            qw = words(q.text)
            out[q.id] = {d: len(qw & w) + self.bonus for d, w in self.docs}
        return out


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(name="overlap", factory=Overlap, options=OverlapOptions,
                           description="shared-word count (tests only)"))
