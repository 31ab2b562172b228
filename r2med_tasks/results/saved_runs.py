"""Rankings computed elsewhere, as a component reads them: a TREC run file (one task's) or a folder
of ``<Task>.trec`` files, a results folder of ``r2med-run`` included. Their name, their identity
(their content) and the kind of model that made them are read here, so a component that evaluates
or reranks saved runs holds none of the results layout."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..scoring.runs import Run, read_trec
from ..tasks.specs import normalize
from .folder import results_folder_of, run_name
from .layout import slug


class SavedRuns:
    """The runs at ``path``; ``option`` is how the user named it (``-o run-file.path``), in the
    one-line refusals (no such file or folder, a folder without runs)."""

    def __init__(self, path: str | Path, *, option: str = "path") -> None:
        self.path, self.option = Path(path).expanduser(), option
        if not self.path.exists():
            raise UserError(f"-o {option}={path}: no such file or folder")
        self.files = [self.path] if self.path.is_file() else results_folder_of(self.path).trec_files()
        if not self.files:
            raise UserError(f"-o {option}={path}: no *.trec file in that folder")
        self._task_of_single_file: str | None = None

    @property
    def name(self) -> str:
        """The system's name: the pipeline name a results folder records, else the file's or folder's."""
        return run_name(self.path.resolve())

    @property
    def digest(self) -> str:
        """sha256 of the runs' file names and bytes: different runs are never one system's results."""
        digest = hashlib.sha256()
        for file in self.files:
            digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
        return digest.hexdigest()

    @property
    def model_type(self) -> list[str] | None:
        """mteb's ``model_type``, as the results folder they come from records it; None when none does."""
        kind = results_folder_of(self.path).model_meta().get("model_type")
        return kind if isinstance(kind, list) and all(isinstance(k, str) for k in kind) else None

    def model_meta(self, name: str = "") -> dict[str, Any]:
        """What results computed from these runs are filed under: ``r2med/<name>`` (default: :attr:`name`),
        revision the first 12 digits of :attr:`digest`, and :attr:`model_type` when known."""
        name = name or self.name
        kind = self.model_type
        return {"name": f"r2med/{slug(name) or 'run'}", "revision": self.digest[:12], "display_name": name,
                "framework": [], "open_weights": None, **({"model_type": kind} if kind is not None else {})}

    def run_for(self, task: Any, queries: Sequence[Any] | None = None,
                doc_ids: Collection[str] | None = None, data: bytes | None = None) -> Run:
        """``task``'s run (:meth:`file_for`; ``data``: its bytes, when read already, as a component's
        ``context.input`` gives them); with ``queries``, theirs only, each of which it must rank; with
        ``doc_ids`` (the task's corpus), every document it ranks must be one of them. A one-line
        ``UserError`` naming the file otherwise (or when there is none, or it does not read)."""
        file = self.file_for(task)
        try:
            run = read_trec(file, data)
        except (OSError, ValueError) as e:
            raise UserError(str(e)) from None
        if queries is not None:
            missing = [q.id for q in queries if q.id not in run]
            if missing:
                raise UserError(f"{file}: no ranking for {len(missing)} of {len(queries)} queries of {task.name} "
                                f"(e.g. {missing[0]!r}); a run must rank documents for every query")
            run = {q.id: dict(run[q.id]) for q in queries}
        for qid, docs in run.items() if doc_ids is not None else ():
            stray = next((d for d in docs if d not in doc_ids), None)
            if stray is not None:
                raise UserError(f"{file}: query {qid!r} ranks document {stray!r}, which is not in the corpus of "
                                f"{task.name}; is this the run of another task or corpus version?")
        return run

    def file_for(self, task: Any) -> Path:
        """``task``'s run file: the one file given (which serves one task), or the folder's file named
        by the task's name, alias or key."""
        if self.path.is_file():
            if self._task_of_single_file not in (None, task.name):
                raise UserError(f"-o {self.option}={self.path}: one run file serves one task; give a folder of "
                                "<Task>.trec files, or --tasks with one task")
            self._task_of_single_file = task.name
            return self.path
        by_stem = {normalize(f.stem): f for f in self.files}
        for name in (task.name, task.short_name, task.key):
            if name and normalize(name) in by_stem:
                return by_stem[normalize(name)]
        raise UserError(f"{self.path}: no run for {task.name} (expected {task.name}.trec or {task.short_name}.trec)")
