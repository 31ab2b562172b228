"""``run-file``: rankings computed elsewhere, read from TREC run files, so any system's runs get
R2MED's scoring and a place on the leaderboard, and any reranker can start from them. As in
trec_eval, documents are ordered by the score column, ties by document id.
"""

from __future__ import annotations

from pydantic import Field

from r2med_tasks.plugin import Options, RetrieverSpec, UserError, hookimpl


class RunFileOptions(Options):
    path: str = Field("", description="a TREC run file (one task), or a folder of <Task>.trec files named by mteb "
                                      "task name or alias (Biology.trec), e.g. a results folder of r2med-run")
    name: str = Field("", description="the system's name in results and on the leaderboard (default: the pipeline "
                                      "name a results folder records, else the file or folder name)")


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(
        name="run-file",
        aliases=("trec",),
        factory=RunFileRetriever,
        description="rankings from TREC run files made elsewhere (one per task): evaluate them, or rerank them",
        options=RunFileOptions,
        model_options=("path", "name"),
        reference="https://trec.nist.gov/trec_eval/",
    ))


class RunFileRetriever:
    def __init__(self, options) -> None:  # RunFileOptions
        from r2med_tasks.plugin import SavedRuns

        if not options.path:
            raise UserError("retriever 'run-file' needs -o path=FILE.trec, or a folder of <Task>.trec files")
        self.runs = SavedRuns(options.path, option="run-file.path")
        self.name = options.name or self.runs.name  # a results folder's pipeline name, else the file's
        self._doc_ids: set[str] = set()

    def model_meta(self) -> dict:
        """Named by the runs, identified by their content."""
        return self.runs.model_meta(self.name)

    def inputs(self, task, *, folder) -> dict:
        """The run file read for ``task``, by its name: its bytes are in the task's identity."""
        file = self.runs.file_for(task)
        return {file.name: file}

    def index(self, corpus, *, task, context) -> None:
        self._doc_ids = set(corpus.ids)

    def search(self, queries, *, task, top_k: int, context) -> dict[str, dict[str, float]]:
        (label,) = self.inputs(task, folder=None)
        return self.runs.run_for(task, queries, self._doc_ids, data=context.input(label))
