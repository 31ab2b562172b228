"""``run-file``: rankings computed elsewhere, read from TREC run files (one per task) and evaluated
as if a retriever had produced them. Any system's runs get R2MED's scoring and a place on the
leaderboard, and any reranker can start from them.

Scoring follows trec_eval (and pytrec_eval): a query's documents are ordered by the score column,
ties by document id; the rank column only has to be consistent. Each query keeps its ``--top-k``
best-scored documents.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import Field

from r2med_tasks.plugin import RetrieverSpec
from r2med_tasks.plugin import UserError
from r2med_tasks.plugin import hookimpl
from r2med_tasks.plugin import options_model

RUN_FILE_OPTIONS = options_model(
    "RunFileOptions",
    path=(str, Field("", description="a TREC run file (one task), or a folder of <Task>.trec files named by "
                                     "mteb task name or alias (Biology.trec), e.g. a results folder of r2med-run")),
    name=(str, Field("", description="the system's name in results and on the leaderboard (default: the "
                                     "pipeline name a results folder records, else the file or folder name)")),
)


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(
        name="run-file",
        aliases=("trec",),
        factory=RunFileRetriever,
        description="rankings from TREC run files made elsewhere (one per task): evaluate them, or rerank them",
        options=RUN_FILE_OPTIONS,
        model_options=("path", "name"),
        reference="https://trec.nist.gov/trec_eval/",
    ))


class RunFileRetriever:
    def __init__(self, options) -> None:  # RUN_FILE_OPTIONS
        path, name = options.path, options.name
        if not path:
            raise UserError("retriever 'run-file' needs -o path=FILE.trec, or a folder of <Task>.trec files")
        self.path = Path(path).expanduser()
        if not self.path.exists():
            raise UserError(f"-o run-file.path={path}: no such file or folder")
        from r2med_tasks.plugin import results_folder_of, run_name

        self.files = [self.path] if self.path.is_file() else results_folder_of(self.path).trec_files()
        if not self.files:
            raise UserError(f"-o run-file.path={path}: no *.trec file in that folder")

        self.name = name or run_name(self.path.resolve())  # a results folder's pipeline name, else the file's
        digest = hashlib.sha256()
        for file in self.files:  # the runs' content names the results, so different runs never share a folder
            digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
        self.revision = digest.hexdigest()[:12]
        self._task_of_single_file: str | None = None
        self._doc_ids: set[str] = set()

    def model_meta(self) -> dict:
        """Named by the runs; the kind of model is what the results folder they come from says, if
        any (mteb's ``model_type``)."""
        from r2med_tasks.plugin import results_folder_of, slug

        kind = results_folder_of(self.path).model_meta().get("model_type")
        return {"name": f"r2med/{slug(self.name) or 'run'}", "revision": self.revision, "display_name": self.name,
                "framework": [], "open_weights": None,
                **({"model_type": kind} if isinstance(kind, list) and all(isinstance(k, str) for k in kind) else {})}

    def index(self, corpus, *, task, context) -> None:
        self._doc_ids = set(corpus.ids)

    def search(self, queries, *, task, top_k: int, context) -> dict[str, dict[str, float]]:
        from r2med_tasks.plugin import read_trec

        file = self._file_for(task)
        try:
            run = read_trec(file)
        except (OSError, ValueError) as e:
            raise UserError(str(e)) from None
        missing = [q.id for q in queries if q.id not in run]
        if missing:
            raise UserError(f"{file}: no ranking for {len(missing)} of {len(queries)} queries of {task.name} "
                            f"(e.g. {missing[0]!r}); a run must rank documents for every query")
        out = {}
        for q in queries:
            for doc_id in run[q.id]:
                if doc_id not in self._doc_ids:
                    raise UserError(f"{file}: query {q.id!r} ranks document {doc_id!r}, which is not in the corpus "
                                    f"of {task.name}; is this the run of another task or corpus version?")
            out[q.id] = dict(run[q.id])
        return out

    def _file_for(self, task) -> Path:
        if self.path.is_file():
            if self._task_of_single_file not in (None, task.name):
                raise UserError(f"-o run-file.path={self.path}: one run file serves one task; give a folder of "
                                "<Task>.trec files, or --tasks with one task")
            self._task_of_single_file = task.name
            return self.path
        from r2med_tasks.plugin import normalize

        by_stem = {normalize(f.stem): f for f in self.files}
        for name in (task.name, task.short_name, task.key):
            if name and normalize(name) in by_stem:
                return by_stem[normalize(name)]
        raise UserError(f"{self.path}: no run for {task.name} (expected {task.name}.trec or {task.short_name}.trec)")
