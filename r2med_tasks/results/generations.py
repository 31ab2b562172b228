"""A run's rewriter generations shared as R2MED publishes its own, in
``<DATA_DIR>/<Task>/<method>/<llm>/query_with_hydoc.jsonl``, so that the rewriter with ``-o
source=<llm>`` replays the run exactly without one LLM request. Each line holds R2MED's fields
(``id``, ``text``: the query, ``hy_doc``: everything the LLM wrote, its thinking in place,
``doc_id``: the query's relevant documents) and two of ours that R2MED's code ignores, ``answer``
(the document the run took from ``hy_doc``) and ``r1_mode`` (whether it is combined with the query
as a reasoning LLM's is), so the replay needs no rule of which LLM thinks how. An export never
changes a file that is there."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import atomic
from ..tasks.combine import GAR_METHODS
from ..tasks.datafiles import FILES, GENERATED_FILE
from ..tasks.loading import local_revision
from ..errors import UserError
from .folder import ResultsFolder
from .layout import safe_component


@dataclass(frozen=True)
class Exported:
    """One task's export: where, how many queries, whether it was ``"written"`` or was already
    there (``"unchanged"``), and the command that replays it."""

    task: str
    method: str
    llm: str
    path: Path
    queries: int
    status: str
    replay: str

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "method": self.method, "llm": self.llm, "path": str(self.path),
                "queries": self.queries, "status": self.status, "replay": self.replay}


def llm_folder_name(model: str) -> str:
    """The ``<llm>`` folder of a served model: its last path part, lower-cased
    ("Qwen/Qwen2.5-7B-Instruct" -> "qwen2.5-7b-instruct"), safe as a folder name."""
    return safe_component(model.rstrip("/").rpartition("/")[2].lower() or "llm")


def export_records(run_dir: str | Path, data_dir: str | Path, *, tasks: list[Any], llm: str | None = None,
                       judgments: Any) -> list[Exported]:
    """Write the rewriter's generation records of ``run_dir`` for ``tasks`` under ``data_dir``.
    ``llm``: the ``<llm>`` folder (default: the served model's); ``judgments(task)``: the task's
    ``{query: {doc: grade}}``, for ``doc_id``."""
    folder, data_dir = ResultsFolder(Path(run_dir)), Path(data_dir)
    if not folder.record_file.is_file():
        raise UserError(f"{run_dir}: not a results folder r2med wrote (no r2med/{folder.record_file.name}); give "
                        "the folder r2med-run printed after 'Results:'")
    if llm is not None and (not llm or safe_component(llm) != llm or llm in (".", "..")):
        raise UserError(f"--llm {llm!r}: one folder name of letters, digits and . _ - (for example qwen2.5-7b)")
    if data_dir.exists() and not data_dir.is_dir():
        raise UserError(f"{data_dir}: not a folder; give the data folder to write into")
    planned = []
    for task in tasks:
        records = [r for r in folder.generations(task.name) if r.get("stage") == "rewriter" and "samples" in r]
        if not records or not folder.generations_file(task.name).is_file():
            continue
        planned.append((task, records))
    for path, problem in folder.problems().items():
        raise UserError(f"{path}: {problem}; rerun the task to write it again")
    if not planned:
        raise UserError(f"{run_dir}: no LLM generations to export (a finished run with a live rewriter or search "
                        "agent has them; a replay's or a rewriter's that calls no LLM are its rewritten queries only)")
    exported = []
    for task, records in planned:
        exported.append(_export_task(folder, data_dir, task, records, llm, judgments))
    return exported


def _export_task(folder: ResultsFolder, data_dir: Path, task: Any, records: list[dict], llm: str | None,
                 judgments: Any) -> Exported:
    methods = {r.get("method") for r in records}
    if len(methods) != 1 or next(iter(methods)) not in GAR_METHODS:
        raise UserError(f"{folder.generations_file(task.name)}: records of {sorted(map(str, methods))}, not of one "
                        f"of R2MED's methods ({', '.join(GAR_METHODS)})")
    method = next(iter(methods))
    for r in records:
        if not (isinstance(r.get("answer"), str) and isinstance(r.get("output"), str)
                and isinstance(r.get("query"), str) and isinstance(r.get("r1_mode"), bool)):
            raise UserError(f"{folder.generations_file(task.name)}: the record of query {r['query_id']!r} lacks "
                            "query, output, answer or r1_mode; rerun the task to write it again")
    name = llm or llm_folder_name(str(records[0].get("model") or "llm"))
    folder_here = task_folder(data_dir, task)
    local = all((folder_here / f).is_file() for f in FILES)
    if local:  # the replay reads this data (--data-dir): it must be the data the run read
        identity = folder.identity(task.name) or {}
        ran_on = (identity.get("data") or {}).get("revision")
        here = local_revision(folder_here)
        if ran_on != here:
            raise UserError(f"{folder_here}: not the data {task.short_name} was run on (files {here[:12]}, the run's "
                            f"{str(ran_on)[:12]}); a replay there would not be the run: export into the run's own "
                            "data folder, or into an empty folder")
    qrels = judgments(task)
    rows = [{"id": r["query_id"], "text": r["query"], "hy_doc": r["output"],
             "doc_id": [d for d, grade in qrels.get(r["query_id"], {}).items() if grade > 0],
             "answer": r["answer"], "r1_mode": r["r1_mode"]} for r in records]
    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
    target = folder_here / method / name / GENERATED_FILE
    status = _write_new(data_dir, target, data)
    where = ["--data-dir", str(data_dir)] if local else ["-o", f"{method}.published_data={folder_here}"]
    replay = shlex.join(["r2med-run", "--plugin", method, "-o", f"{method}.source={name}", *_first_stage(folder),
                         *where, "--tasks", task.short_name])
    return Exported(task.name, method, name, target, len(rows), status, replay)


def task_folder(data_dir: Path, task: Any) -> Path:
    """The task's folder in ``data_dir``: one there already (R2MED's names, any case), else its short name."""
    if data_dir.is_dir():
        for child in sorted(data_dir.iterdir()):
            if child.is_dir() and child.name.lower() in (task.short_name.lower(), task.name.lower()):
                return child
    return data_dir / task.short_name


def _first_stage(folder: ResultsFolder) -> list[str]:
    """The run's retriever (and reranker) as ``--plugin`` words, from its record."""
    components = folder.record().get("components") or {}
    words = []
    for kind in ("retriever", "reranker"):
        name = (components.get(kind) or {}).get("component")
        if isinstance(name, str):
            words += ["--plugin", name]
    return words


def _write_new(root: Path, target: Path, data: bytes) -> str:
    """``data`` as a new file ``target`` under ``root``: "written"; "unchanged" when the file holds
    those bytes already; a ``UserError`` when it holds others or a link leads out of ``root``."""
    if not target.parent.resolve().is_relative_to(root.resolve()):  # before any folder is made
        raise UserError(f"{target.parent}: outside {root} (through a link); the export writes only inside it")
    if target.is_symlink():
        raise UserError(f"{target}: a link; the export writes only new files")
    if target.exists():
        try:
            same = target.is_file() and target.read_bytes() == data
        except OSError as e:
            raise UserError(f"{target}: cannot be read ({e.strerror}); the export leaves it as it is") from None
        if same:
            return "unchanged"
        raise UserError(f"{target}: already there with other generations; the export never replaces a file: give "
                        "--llm ANOTHER-NAME, or remove it yourself")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.export.tmp")
    atomic.write_bytes(tmp, data)
    try:
        os.link(tmp, target)  # never over a file another process put there meanwhile
    except FileExistsError:
        raise UserError(f"{target}: appeared while exporting; the export leaves it as it is") from None
    finally:
        tmp.unlink(missing_ok=True)
    return "written"
