"""A sweep's jobs, checked by ``r2med-run``'s own parser before anything runs, chained where they
share a results folder, and what each needs of a GPU."""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..components.model_refs import hub_offline

GPU_MEMORY_GB = 80.0  # one GPU's memory when the command does not say (an A100/H100 80GB)


@dataclass(frozen=True)
class Job:
    """One pipeline on one task: ``args`` are the ``r2med-run`` arguments that run it."""

    index: int
    line: str  # "sweep.txt:3"
    pipeline: str
    args: tuple[str, ...]
    tasks: tuple[str, ...]  # one, unless the pipeline tunes across its tasks
    output: str
    chain: int  # jobs of one chain share a results folder and run in turn
    gpu: bool = False
    gpu_memory_gb: float | None = None  # None: not known, so a whole GPU


def plan_sweep(lines: list[tuple[str, list[str]]], *, output: Path, data_dir: Path | None = None,
               tasks: Sequence[str] = (), cache_dir: Path | None = None) -> list[Job]:
    """The jobs of a sweep: each line's pipeline on each of its tasks, with the sweep's folders where
    the line sets none. Every line is checked here, so a typo stops the sweep before anything runs."""
    from ..api import registry
    from ..board.sources import DATA_DIR_PLACEHOLDER
    from ..running.request import parse_run_args, prepare
    from ..running.runner import result_folders, specs_of

    reg = registry()
    chains = _Chains()
    jobs: list[Job] = []
    seen: set[tuple[str, ...]] = set()
    for where, words in lines:
        try:
            line = parse_run_args(words)
            if "dry_run" in line.given:
                raise UserError("--dry-run: plan the whole sweep with `r2med sweep --dry-run` instead")
            cache = line.cache_dir if "cache_dir" in line.given else cache_dir or line.cache_dir
            data = line.data_dir or data_dir
            if line.data_dir == Path(DATA_DIR_PLACEHOLDER) and data_dir is not None:  # as --commands prints it
                data = data_dir
            request = replace(
                line, output=Path(line.output if "output" in line.given else output).expanduser().absolute(),
                data_dir=Path(data).expanduser().absolute() if data is not None else None,
                cache_dir=Path(cache).expanduser().absolute() if cache is not None else None,
                tasks=line.tasks or (tuple(tasks) or None))
            with hub_offline():  # creating components loads no model; naming one may not download it
                ready = prepare(request, registry=reg)
        except UserError as e:
            raise UserError(f"{where}: {e}") from None
        pipeline = ready.pipeline
        specs = None  # the pipeline's, computed once for the line (as a run computes them)
        gpu, memory = needs(pipeline)
        groups = [ready.tasks] if _tunes_across_tasks(pipeline) else [[t] for t in ready.tasks]
        for group in groups:
            args = tuple(replace(request, tasks=tuple(t.name for t in group)).arguments())
            if args in seen:
                continue
            seen.add(args)
            local = group[0].source(request.data_dir, only_task=len(group) == 1).local
            try:
                with hub_offline():
                    specs = specs or specs_of(pipeline)
                    folders = [str(f.path) for f in result_folders(specs, request.output, local=local) if f]
            except UserError:  # a hub model not in this machine's cache: the line is its own chain
                folders = [where]
            jobs.append(Job(len(jobs), where, shlex.join(words), args, tuple(t.short_name for t in group),
                            str(request.output), chains.of(folders), gpu, memory))
    return [replace(j, chain=chains.find(j.chain)) for j in jobs]


class _Chains:
    """Chains of jobs that hold a common results folder (union-find over folders)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.parent: list[int] = []

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            i = self.parent[i]
        return i

    def of(self, folders: list[str]) -> int:
        roots = set()
        for folder in folders:
            if folder not in self.ids:
                self.ids[folder] = len(self.parent)
                self.parent.append(len(self.parent))
            roots.add(self.find(self.ids[folder]))
        first, *rest = sorted(roots)
        for root in rest:
            self.parent[root] = first
        return first


def _tunes_across_tasks(pipeline) -> bool:
    """A component tuned on a group's tasks sees all of its line's tasks, as in one ``r2med-run``:
    such a line is one job."""
    return any(s.spec.tunes(s.spec.options_of(s.options)) for s in pipeline.ordered())


def needs(pipeline) -> tuple[bool, float | None]:
    """Whether a pipeline runs a local model on a GPU, and the largest memory estimate of its stages
    (they run one after another). A component with a ``device`` option that declares nothing gets a
    whole GPU."""
    estimates = []
    for stage in (s for top in pipeline.ordered() for s in (top, *top.members)):
        if str(stage.options.get("device", "")).strip().lower() == "cpu":
            continue
        spec = stage.spec
        declared = spec.resources(spec.options_of(stage.options)) if spec.resources else None
        if declared is None and "device" in spec.option_fields():
            declared = {"gpu": True, "gpu_memory_gb": None}
        if declared and declared.get("gpu"):
            estimates.append(declared.get("gpu_memory_gb"))
    if not estimates:
        return False, None
    return True, None if None in estimates else max(estimates)


def ray_resources(job: Job, *, cluster_gpus: float, gpu_memory_gb: float, node_memory: float) -> dict[str, Any]:
    """What a job's Ray task requests: a CPU, and for a local model the share of one GPU its
    estimate needs and as much host memory as its weights."""
    if not (job.gpu and cluster_gpus):
        return {"num_cpus": 1}
    if job.gpu_memory_gb is None:
        return {"num_cpus": 1, "num_gpus": 1}
    share = min(1.0, max(0.01, math.ceil(100 * job.gpu_memory_gb / gpu_memory_gb) / 100))
    return {"num_cpus": 1, "num_gpus": share, "memory": min(job.gpu_memory_gb * 2**30, node_memory)}
