"""Results on disk, laid out as mteb's ResultCache lays them out.

``<output>/<org__model>/<revision>/`` holds ``model_meta.json`` and one TaskResult
``<TaskName>.json`` per task (``mteb.ResultCache(<output>/..).load_results()`` reads them),
plus the harness's own files, none of which mteb mistakes for a result:
``<TaskName>.trec`` (top-k run), ``<TaskName>.per_query.tsv`` and ``r2med/pipeline.json``.
Every file is written atomically and the TaskResult last, so it marks a finished task.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from . import atomic
from .errors import UserError
from .evaluation import PER_QUERY

if TYPE_CHECKING:
    from .pipeline import Pipeline


def slug(text: str) -> str:
    """A name safe as one folder name (results are filed under ``r2med/<slug>``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def pipeline_name(revision_folder: Path) -> str | None:
    """The display name a results folder's ``r2med/pipeline.json`` records, if any."""
    try:
        return json.loads((revision_folder / "r2med" / "pipeline.json").read_text(encoding="utf-8"))["name"]
    except (OSError, ValueError, KeyError):
        return None


def model_meta(info: dict[str, Any]):
    """The mteb ModelMeta naming these results (mteb's own entry when it has one)."""
    import mteb
    from mteb.models import ModelMeta

    fields = {k: v for k, v in info.items() if k in ModelMeta.model_fields}
    try:
        registered = mteb.get_model_meta(info["name"])
    except Exception:  # unregistered name: build one from what the component told us
        empty = ModelMeta.create_empty()
        return ModelMeta.model_validate({**{k: getattr(empty, k) for k in ModelMeta.model_fields}, **fields})
    return registered.model_copy(update={"revision": info["revision"]})


class ResultFolder:
    def __init__(self, output: Path, info: dict[str, Any], identity: dict[str, Any], display_name: str) -> None:
        """``info``: the model name, revision and ModelMeta fields naming the folder."""
        self.info = info
        self.name, self.revision = info["name"], info["revision"]
        self.path = output / self.name.replace("/", "__").replace(" ", "_") / self.revision  # mteb's naming
        self.identity = identity
        self.display_name = display_name

    @classmethod
    def of(cls, output: Path, pipeline: Pipeline) -> ResultFolder:
        return cls(output, pipeline.folder_meta(), pipeline.identity(), pipeline.display_name())

    def task_json(self, task_name: str) -> Path:
        return self.path / f"{task_name}.json"

    def trec(self, task_name: str) -> Path:
        return self.path / f"{task_name}.trec"

    def per_query(self, task_name: str) -> Path:
        return self.path / f"{task_name}.per_query.tsv"

    @property
    def pipeline_file(self) -> Path:
        return self.path / "r2med" / "pipeline.json"

    def is_complete(self, task_name: str) -> bool:
        return all(p.exists() for p in (self.task_json(task_name), self.trec(task_name), self.per_query(task_name)))

    def check_claim(self) -> None:
        """Refuse a folder that already holds another pipeline's results."""
        try:
            stored = json.loads(self.pipeline_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return
        if isinstance(stored, dict) and _without_versions(stored.get("pipeline")) != _without_versions(
                json.loads(json.dumps(self.identity, default=str))):
            raise UserError(f"{self.path} holds results of a different pipeline; "
                            "pass another --output or delete that folder")

    def prepare(self) -> None:
        """Claim the folder for this pipeline (refusing one that holds another pipeline's results)."""
        self.check_claim()
        atomic.write_json(self.pipeline_file, {"name": self.display_name, "pipeline": self.identity})

    def write(self, task_metadata, scores: dict, ranked: dict, per_query: dict, *,
              evaluation_time: float, phases: list[dict[str, Any]]) -> None:
        from mteb.results import TaskResult

        name = task_metadata.name
        meta_file = self.path / "model_meta.json"
        if not meta_file.exists():
            atomic.write_text(meta_file, json.dumps(model_meta(self.info).to_dict(), default=str, indent=4))
        tag = self.display_name.replace(" ", "_")
        atomic.write_lines(self.trec(name), (
            f"{qid} Q0 {doc_id} {rank} {score!r} {tag}"
            for qid, docs in ranked.items() for rank, (doc_id, score) in enumerate(docs, 1)))
        atomic.write_lines(self.per_query(name), [
            "\t".join(["query_id", *PER_QUERY]),
            *("\t".join([qid, *(repr(m[k]) for k in PER_QUERY)]) for qid, m in sorted(per_query.items()))])
        result = TaskResult.from_task_results(
            SimpleNamespace(metadata=task_metadata), {"test": {"default": scores}}, evaluation_time,
            evaluation_phases=phases)
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.", suffix=".tmp")
        os.close(fd)
        try:
            result.to_disk(Path(tmp))  # mteb's own serialisation, then an atomic rename
            os.replace(tmp, self.task_json(name))
        finally:
            Path(tmp).unlink(missing_ok=True)

    def read_run(self, task_name: str) -> dict[str, list[tuple[str, float]]]:
        """The saved top-k run of a finished task, in rank order."""
        run: dict[str, list[tuple[str, float]]] = {}
        for line in self.trec(task_name).read_text(encoding="utf-8").splitlines():
            qid, _, doc_id, _, value, _ = line.split(" ", 5)
            run.setdefault(qid, []).append((doc_id, float(value)))
        return run

    def main_score(self, task_name: str) -> tuple[float, int]:
        """The stored main score and number of evaluated queries of a finished task."""
        data = json.loads(self.task_json(task_name).read_text(encoding="utf-8"))
        n = sum(1 for _ in self.per_query(task_name).open(encoding="utf-8")) - 1
        return data["scores"]["test"][0]["main_score"], n


def _without_versions(identity: Any) -> Any:
    if isinstance(identity, dict):
        return {k: _without_versions(v) for k, v in identity.items() if k != "plugin_version"}
    return identity


def run_name(path: Path) -> str:
    """A run's display name: its pipeline's name for a results folder (or a run file in one), else
    the file name."""
    return pipeline_name(path if path.is_dir() else path.parent) or path.stem


def read_per_query_ndcg(folder: Path) -> dict[str, dict[str, float]]:
    """task -> query -> nDCG@10, from a results folder's per-query files."""
    files = sorted(folder.glob("*.per_query.tsv"))
    if not files:
        raise UserError(f"{folder}: no <Task>.per_query.tsv files; pass a results folder written by r2med-run")
    out: dict[str, dict[str, float]] = {}
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        header = lines[0].split("\t") if lines else []
        if "ndcg_at_10" not in header:
            raise UserError(f"{path}:1: no ndcg_at_10 column")
        col = header.index("ndcg_at_10")
        scores = {}
        for n, line in enumerate(lines[1:], 2):
            fields = line.split("\t")
            try:
                scores[fields[0]] = float(fields[col])
            except (IndexError, ValueError):
                raise UserError(f"{path}:{n}: expected a query id and an nDCG@10 value") from None
        out[path.name.removesuffix(".per_query.tsv")] = scores
    return out
