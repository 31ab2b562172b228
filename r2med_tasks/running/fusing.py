"""Fusing saved runs (``r2med fuse``), written through the runner's one write path: locked,
claimed, reused when unchanged. A fusion is not a pipeline run: its identity is its inputs' content
and the fusion's settings, and it is scored on the judgments the inputs were scored on.
"""

from __future__ import annotations

import hashlib
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..components.context import default_cache_dir
from ..errors import UserError
from ..results.folder import ResultsFolder, run_name
from ..results.identity import PipelineSpec, code_versions, different_data, differences, digest
from ..results.layout import DEFAULT_OUTPUT, slug
from ..results.outcomes import RunOutcome, TaskOutcome, average_ci
from ..scoring.fusion import DEFAULT_DEPTH, DEFAULT_RRF_K, fuse
from ..scoring.runs import DEFAULT_TOP_K, read_trec
from ..tasks.validation import read_qrels
from .costs import Phases
from .runner import cached_outcome, reusable, save, writing

if TYPE_CHECKING:
    from .registry import Registry


def fuse_saved_runs(inputs: Sequence[str | Path], *, registry: Registry, qrels: str | Path | None,
                    task_name: str | None, data_dir: str | Path | None, output: str | Path, fusion: str,
                    weights: Sequence[float] | None, rrf_k: int, depth: int, top_k: int,
                    cache_dir: str | Path | None, on_wait, allow_different_data: bool) -> RunOutcome:
    """What ``r2med_tasks.fuse_runs`` documents, with the installed plugins' ``registry``."""
    if len(inputs) < 2:
        raise UserError("r2med fuse: give at least two runs")
    weight_list = list(weights) if weights else None
    given = [str(p) for p in inputs]
    inputs = [Path(p) for p in inputs]
    missing = [p for p in inputs if not p.exists()]
    if missing:
        raise UserError(f"{missing[0]}: no such file or folder; give TREC run files or results folders of r2med-run")
    folders = [ResultsFolder(p) for p in inputs if p.is_dir()]
    if folders and len(folders) != len(inputs):
        raise UserError("r2med fuse: give either TREC files or results folders, not both")
    if folders:
        common = set.intersection(*(set(f.run_task_names()) for f in folders))
        if not common:
            raise UserError("r2med fuse: the folders have no task in common (no shared <Task>.trec)")
        jobs = [(registry.tasks([name])[0], [f.trec(name) for f in folders]) for name in sorted(common)]
        differing = {task: lines for task, lines in different_data(folders, sorted(common)).items()
                     if not lines[0].startswith("no stored identity")}  # folders of runs made elsewhere: as TREC files
        if differing and not allow_different_data:
            task, lines = next(iter(differing.items()))
            raise UserError(f"r2med fuse: {task}: the runs were scored on different data ({'; '.join(lines)}); "
                            "fusing them mixes rankings of other queries. Pass --allow-different-data to fuse anyway")
    else:
        differing = {}
        if qrels is None:
            raise UserError("r2med fuse: TREC-file inputs need --qrels FILE")
        jobs = [(registry.tasks([task_name or "sample"])[0], list(inputs))]
    for _, paths in jobs:
        for path in paths:
            if not path.exists():
                raise UserError(f"{path}: no such run file")
            if not path.is_file():
                raise UserError(f"{path}: not a regular file; give a TREC run file")
    names = [run_name(p) for p in inputs]
    display = " ⊕ ".join(names) + f" ({fusion.upper()})"
    inputs_id = [{"name": name, "runs": _content_digest(paths)}
                 for name, paths in zip(names, zip(*(p for _, p in jobs)))]
    config = {"fusion": fusion, "weights": weight_list, "rrf_k": rrf_k, "depth": depth, "top_k": top_k,
              "inputs": inputs_id}
    defaults = {"weights": None, "rrf_k": DEFAULT_RRF_K, "depth": DEFAULT_DEPTH, "top_k": DEFAULT_TOP_K}
    words = ["r2med", "fuse", *given, "--fusion", fusion]
    words += [w for flag, value in (("--qrels", qrels), ("--task", task_name), ("--data-dir", data_dir))
              if value is not None for w in (flag, str(value))]
    words += ["--weights", ",".join(map(repr, weight_list))] if weight_list else []
    words += ["--allow-different-data"] if allow_different_data else []
    words += [w for flag, key in (("--rrf-k", "rrf_k"), ("--depth", "depth"), ("--top-k", "top_k"))
              if config[key] != defaults[key] for w in (flag, str(config[key]))]
    if Path(output) != Path(DEFAULT_OUTPUT):
        words += ["--output", str(output)]
    spec = PipelineSpec(display_name=display, model={"name": f"r2med/{slug(display)}", "revision": digest(inputs_id)},
                   config=config, models={}, code=code_versions({}), composite=False,
                   variant={k: config[k] for k, v in defaults.items() if config[k] != v}, command=tuple(words),
                   components={"retriever": {"component": "fuse", "plugin": "r2med", "label": display,
                                             "members": [{"component": "run", "label": n} for n in names]}})
    fused_runs = []  # everything read and checked before the results folder is touched
    for task, paths in jobs:
        try:
            fused = fuse([read_trec(p) for p in paths], method=fusion, weights=weight_list, rrf_k=rrf_k,
                         depth=depth, top_k=top_k)
        except ValueError as e:
            raise UserError(f"r2med fuse: {e}") from None
        if qrels is not None:
            judgments = read_qrels(Path(qrels))
            data_id = {"source": "qrels-file", "revision": _content_digest([qrels]), "official": False}
        else:
            judgments, data_id = task_qrels(task, Path(data_dir) if data_dir is not None else None,
                                             Path(cache_dir).expanduser() if cache_dir is not None else None)
        for folder in folders:  # each run scored on the data the fusion is scored on
            stored = folder.identity(task.name)
            changed = differences({"data": stored["data"]}, {"data": data_id}) if stored else []
            if changed:
                differing.setdefault(task.name, changed)
                if not allow_different_data:
                    raise UserError(f"r2med fuse: {task.name}: {folder.path} was scored on other data than the "
                                    f"judgments the fusion is scored on ({'; '.join(changed)}); give the data it "
                                    "was run on (--data-dir), or pass --allow-different-data to fuse anyway")
        judged = {q: docs for q, docs in fused.items() if q in judgments}
        if not judged:
            where = qrels if qrels is not None else f"the judgments of {task.name}"
            raise UserError(f"r2med fuse: {where} judge none of the {len(fused)} queries the runs rank; are the "
                            "runs and the judgments of the same task?")
        fused_runs.append((task, judged, judgments, data_id))
    by_kind = {local: ResultsFolder.for_pipeline(Path(output), spec, local=local)
               for local in dict.fromkeys(d["source"] != "hub" for *_, d in fused_runs)}
    for folder in by_kind.values():
        folder.check_claim()
    outcomes, computed = [], {}
    with writing(list(by_kind.values()), on_wait):  # as a run writes: locked, claimed, reused when unchanged
        for task, fused, judgments, data_id in fused_runs:
            folder = by_kind[data_id["source"] != "hub"]
            identity = folder.spec.task_identity(task.name, data_id)
            if reusable(folder, task, identity):
                outcomes.append(cached_outcome(folder, task, data_id))
                continue
            scores, computed[task.name], cost = save(folder, task, fused, judgments, data_id["revision"], identity,
                                                     time.time(), Phases(), costs=False)
            outcomes.append(TaskOutcome.written(task, folder, scores, computed[task.name], cost,
                                                official_data=data_id["official"]))
    main = next(iter(by_kind.values()))
    notes = [f"warning: {task}: fused runs scored on different data ({'; '.join(lines)}), as "
             "--allow-different-data allows" for task, lines in differing.items()]
    return RunOutcome(spec.display_name, spec.label, main.model_name, main.revision, main.experiment,
                      [str(f.path) for f in by_kind.values()], outcomes, command=shlex.join(words),
                      summaries=notes, average_ci=average_ci(outcomes, computed=computed), spec=spec)


def task_qrels(task, data_dir: Path | None, cache_dir: Path | None) -> tuple[dict, dict]:
    """A task's judgments; the corpus ids kept in the cache folder spare parsing the corpus again."""
    source = task.source(data_dir)
    data = source.load(cache_dir=cache_dir or default_cache_dir())
    return data.qrels, source.identity(data.revision)


def _content_digest(paths) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:16]
