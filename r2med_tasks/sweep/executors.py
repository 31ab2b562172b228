"""Running a sweep's jobs, each as ``r2med-run`` would: here, in a pool of processes, or as Ray
tasks. Ray is imported only by the Ray executor."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import PluginError, UserError, os_problem
from .board import Board, Outcome
from .plan import GPU_MEMORY_GB, Job, ray_resources


def run_job(args: Sequence[str], cwd: str | None = None) -> dict[str, Any]:
    """Run one job as ``r2med-run ARGS`` would, quietly, as plain data a worker can return. A mistake
    or a plugin's crash comes back as ``{"error": line}``: only a lost process is the executor's."""
    from rich.console import Console

    from ..running.request import execute, parse_run_args

    console = Console(file=io.StringIO(), width=160, highlight=False, color_system=None)
    try:
        with _inside(cwd):
            outcome = execute(parse_run_args(args), console=console,
                              log=lambda line: console.print(line, markup=False))
    except (UserError, PluginError) as e:
        return {"error": str(e), "log": console.file.getvalue()}
    except OSError as e:  # a full disk, an unwritable cache: the file and what to do
        return {"error": os_problem(e), "log": console.file.getvalue()}
    except Exception as e:  # a crash outside any component: one line, the sweep goes on
        return {"error": f"{type(e).__name__}: {e}", "log": console.file.getvalue()}
    return {"run": outcome.to_json(), "log": console.file.getvalue()}


@contextmanager
def _inside(cwd: str | None):
    """Relative paths in options (``-o path=runs/``) mean what they meant where the sweep started."""
    before = os.getcwd()
    if cwd and cwd != before and os.path.isdir(cwd):
        os.chdir(cwd)
    try:
        yield
    finally:
        if os.getcwd() != before:
            os.chdir(before)


def run_local(jobs: list[Job], board: Board, refresh: Callable[[], None] = lambda: None) -> list[Outcome]:
    """Each job in turn, in this process."""
    cwd = os.getcwd()
    for job in jobs:
        board.start(job.index)
        refresh()
        board.finish(Outcome.of(job, run_job(job.args, cwd)))
        refresh()
    return [board.outcomes[j.index] for j in jobs]


def end_with_parent(parent: int) -> None:
    """On Linux, ask the kernel for SIGTERM when the sweep's process ends, however it ends, so no
    worker runs on with jobs nobody waits for."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it ended before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def run_in_pool(jobs: list[Job], board: Board, *, workers: int | None = None, retries: int = 3,
                refresh: Callable[[], None] = lambda: None) -> list[Outcome]:
    """The chains side by side in a pool of processes; a job whose worker died is run again in a new
    pool, up to ``retries`` times. ``refresh`` is called at least four times a second, so the live
    view needs no thread. Workers are forked where safe (Linux, no other thread): they start with
    everything imported, plugins included."""
    import threading
    from collections import deque
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_context

    chains: dict[int, list[Job]] = {}
    for job in jobs:
        chains.setdefault(job.chain, []).append(job)
    waiting = deque(chains.values())
    size = max(1, min(workers or os.cpu_count() or 1, len(waiting)))
    cwd = os.getcwd()
    lost: deque[tuple[Job, list[Job]]] = deque()
    while waiting or lost:
        forks = sys.platform.startswith("linux") and threading.active_count() == 1
        with ProcessPoolExecutor(max_workers=size, mp_context=get_context("fork" if forks else "spawn"),
                                 initializer=end_with_parent, initargs=(os.getpid(),)) as pool:
            running: dict[Any, tuple[Job, list[Job]]] = {}  # future -> job, rest of its chain

            def submit(job: Job, rest: list[Job], pool=pool, running=running) -> None:
                board.start(job.index)
                running[pool.submit(run_job, job.args, cwd)] = (job, rest)

            while (lost or waiting) and len(running) < size:
                if lost:
                    submit(*lost.popleft())
                else:
                    chain = waiting.popleft()
                    submit(chain[0], chain[1:])
            broken = False
            while running:
                done, _ = wait(list(running), timeout=0.25, return_when=FIRST_COMPLETED)
                for future in done:
                    job, rest = running.pop(future)
                    try:
                        result = future.result()
                    except BrokenProcessPool:  # a worker died: this pool is done
                        broken = True
                        if board.attempts[job.index] <= retries:
                            lost.append((job, rest))
                        else:
                            board.finish(Outcome(job, None, "its worker process died"))
                            if rest:
                                waiting.appendleft(rest)
                        continue
                    board.finish(Outcome.of(job, result))
                    if broken:
                        if rest:
                            waiting.appendleft(rest)
                    elif rest:
                        submit(rest[0], rest[1:])
                    elif waiting:
                        chain = waiting.popleft()
                        submit(chain[0], chain[1:])
                refresh()
    return [board.outcomes[j.index] for j in jobs]


def cuda_here() -> bool:
    """Whether torch can use a CUDA device here; torch is imported only where one could be."""
    import glob

    hidden = os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1")
    if hidden or not (glob.glob("/dev/nvidia[0-9]*") or os.path.isdir("/proc/driver/nvidia/gpus")):
        return False
    import torch

    return torch.cuda.is_available()


def choose_executor(jobs: list[Job], *, address: str | None) -> tuple[str, str | None]:
    """``--executor auto``: Ray for a cluster or local GPUs (it shares them out); here, one job after
    another, for local models on CPU (torch keeps every core busy, and each process would hold its
    own copy of the model); else a pool. With a note when the choice needs saying."""
    if address or os.environ.get("RAY_ADDRESS"):
        return "ray", None
    if any(j.gpu for j in jobs):
        import importlib.util

        if not cuda_here():
            return "local", None
        if importlib.util.find_spec("ray") is not None:
            return "ray", None
        return "local", ("Jobs run local models on GPUs and Ray is not installed (pip install 'r2med[ray]'), so "
                         "they run one after another in this process.")
    return "pool", None


def run_on_ray(jobs: list[Job], board: Board, *, address: str | None = None, retries: int = 3,
               gpu_memory_gb: float = GPU_MEMORY_GB, refresh: Callable[[], None] = lambda: None,
               note: Callable[[str], None] = lambda line: None) -> list[Outcome]:
    """One Ray task per job; a job whose worker died is run again, up to ``retries`` times. Workers
    get this process's ``R2MED_*`` variables (which plugins to load)."""
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'r2med[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        starts = not (address or os.environ.get("RAY_ADDRESS"))  # a new local Ray: no dashboard
        ray.init(address=address, log_to_driver=False, **({"include_dashboard": False} if starts else {}))
    try:
        cluster = ray.cluster_resources()
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        node_memory = max((n["Resources"].get("memory", 0) for n in nodes), default=0) or cluster.get("memory", 0)
        if any(j.gpu for j in jobs) and not cluster.get("GPU"):
            note("The cluster has no GPUs: jobs with local models run on CPUs.")
        env = {k: v for k, v in os.environ.items() if k.startswith("R2MED_")}
        tracker = ray.remote(num_cpus=0)(_Tracker).remote()
        remote = ray.remote(max_retries=retries)(_remote_job)
        cwd = os.getcwd()
        chains: dict[int, list[Job]] = {}
        for job in jobs:
            chains.setdefault(job.chain, []).append(job)
        running: dict[Any, Job] = {}

        def submit(chain: list[Job]) -> None:
            job = chain.pop(0)
            options = ray_resources(job, cluster_gpus=cluster.get("GPU", 0), gpu_memory_gb=gpu_memory_gb,
                                    node_memory=node_memory)
            ref = remote.options(**options, runtime_env={"env_vars": env}, name=f"r2med: {job.pipeline[:60]}")
            running[ref.remote(job.args, cwd, job.index, tracker)] = job

        for chain in chains.values():
            submit(chain)
        while running:
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for index, attempts in ray.get(tracker.snapshot.remote()).items():
                board.start(index, attempts)
            for ref in ready:
                job = running.pop(ref)
                try:
                    board.finish(Outcome.of(job, ray.get(ref)))
                except ray.exceptions.RayError as e:  # the worker died more often than retries allow
                    board.finish(Outcome(job, None, f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"))
                if chains[job.chain]:
                    submit(chains[job.chain])
            refresh()
        ray.kill(tracker)
    finally:
        if started_here:
            ray.shutdown()
    return [board.outcomes[j.index] for j in jobs]


def _remote_job(args: Sequence[str], cwd: str, index: int, tracker) -> dict[str, Any]:
    """A job inside a Ray worker; it waits for the tracker to count its start, which a worker that
    dies at once would otherwise lose."""
    import ray

    ray.get(tracker.start.remote(index))
    return run_job(args, cwd)


class _Tracker:
    """A Ray actor counting each job's starts: the live view's "running", and its retries."""

    def __init__(self) -> None:
        self.attempts: dict[int, int] = {}

    def start(self, index: int) -> None:
        self.attempts[index] = self.attempts.get(index, 0) + 1

    def snapshot(self) -> dict[int, int]:
        return dict(self.attempts)
