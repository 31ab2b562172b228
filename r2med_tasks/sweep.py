"""Sweeps: many pipelines × tasks, each pipeline on each task an independent job, run one after
another in this process, side by side in a pool of processes, or as Ray tasks across a cluster,
all into one shared results folder.

A sweep is ``r2med-run`` argument lines (``r2med leaderboard --commands`` in any of its formats
works as is) or a TOML file: pipelines × an options grid × tasks. Every job runs through the
runner, so its results are exactly what ``r2med-run`` writes: the same folders, identities, resume
and per-folder locks. Jobs that hold the same results folder (one pipeline's tasks, a reranker
and its first stage) form a chain and run in turn rather than wait on each other's lock with a
worker idle; chains run side by side. Ray reruns a job whose worker died: each task's files are
written atomically, TaskResult last, so the rerun finishes the lost run's task without mixing two
runs. Ray is imported only by the Ray executor.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any

from .errors import PluginError, UserError, os_problem
from .leaderboard import LIVE_PREFIX
from .models import hub_offline
from .outcomes import RunOutcome

COMMENT = re.compile(r"(^|\s+)#\s.*$")  # a comment, not the '#' of llm=URL#model
GPU_MEMORY_GB = 80.0  # one GPU's memory when the command does not say (an A100/H100 80GB)


@dataclass(frozen=True)
class Job:
    """One pipeline on one task: ``args`` are the ``r2med-run`` arguments that run it."""

    index: int
    line: str  # where the sweep gives it ("sweep.txt:3")
    pipeline: str  # the line's arguments, as the live view names the pipeline
    args: tuple[str, ...]
    tasks: tuple[str, ...]  # short names; one, unless the pipeline tunes across its tasks
    output: str  # its --output
    chain: int  # jobs of one chain share a results folder and run in turn
    gpu: bool = False  # a component runs a local model
    gpu_memory_gb: float | None = None  # its estimate (None: not known, so a whole GPU)


@dataclass
class Outcome:
    """What became of a job: its run, or one line saying why it failed; and what it printed."""

    job: Job
    run: RunOutcome | None = None
    error: str | None = None
    attempts: int = 1
    log: str = ""

    @classmethod
    def of(cls, job: Job, result: dict[str, Any]) -> Outcome:
        """From ``run_job``'s dict."""
        run = RunOutcome.from_json(result["run"]) if "run" in result else None
        return cls(job, run, result.get("error"), log=result.get("log", ""))


# ------------------------------------------------------------------------------------------ reading


def sweep_lines(text: str, source: str) -> list[tuple[str, list[str]]]:
    """(where, r2med-run arguments) of each pipeline a sweep file lists, duplicates dropped."""
    if source.endswith(".toml") or re.search(r"^\s*\[\[pipeline\]\]", text, re.MULTILINE):
        found = _toml_lines(text, source)
    else:
        found = [(f"{source}:{n}", _words(command, f"{source}:{n}")) for n, command in _commands(text, source)]
    seen, unique = set(), []
    for where, words in found:
        if tuple(words) not in seen:
            seen.add(tuple(words))
            unique.append((where, words))
    if not unique:
        raise UserError(f"{source}: no r2med-run lines (one per line, e.g. `r2med-run --plugin bm25`, or a TOML "
                        "sweep with [[pipeline]] tables)")
    return unique


def _words(command: str, where: str) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    return words[1:] if words and words[0] == "r2med-run" else words


def _commands(text: str, source: str) -> Iterator[tuple[int, str]]:
    """(line number, command) of argument lines, or of what ``r2med leaderboard --commands`` prints
    (a table with commands wrapped over rows, markdown, CSV or JSON)."""
    stripped = text.lstrip()
    if stripped.startswith("["):  # --format json
        try:
            rows = json.loads(stripped)
        except ValueError as e:
            raise UserError(f"{source}: not JSON ({e}); JSON sweeps are `r2med leaderboard --commands --format json`") from None
        yield from ((n, r["command"]) for n, r in enumerate(rows, 1) if isinstance(r, dict) and r.get("command"))
        return
    lines = text.splitlines()
    if lines and lines[0].startswith("Rank,System"):  # --format csv
        yield from ((n, r["Command"]) for n, r in enumerate(csv.DictReader(lines), 2) if r.get("Command"))
        return
    table = any("r2med-run" in line and not line.strip().startswith("r2med-run") for line in lines)
    command: list | None = None  # [line number, column, text] of a table's command, maybe wrapped
    for n, raw in enumerate(lines, 1):
        if command and raw[command[1]:].strip(" │") and not re.match(r"[\s│|]*\d", raw[:command[1]]):
            command[2] += " " + raw[command[1]:].strip(" │")  # wrapped: no new rank, more text in its column
            continue
        if command:
            yield command[0], command[2]
            command = None
        line = raw.strip()
        if table:  # the terminal table or markdown: a row's command cell, the rest is the table's
            if line.startswith(LIVE_PREFIX):  # the agents' live commands the table lists after it: not run
                continue
            if "r2med-run" in line:
                start = raw.index("r2med-run")
                cell = re.split(r"(?<!\\)[│|]", raw[start:])[0].rstrip()  # up to the next cell
                command = [n, start, html.unescape(cell).replace("\\|", "|")]
            continue
        line = COMMENT.sub("", line).strip()
        if line.startswith(("r2med-run", "-")):
            yield n, line
        elif line:
            raise UserError(f"{source}:{n}: expected r2med-run arguments (`--plugin NAME ...`), got: {line[:60]}")
    if command:
        yield command[0], command[2]


def _toml_lines(text: str, source: str) -> list[tuple[str, list[str]]]:
    """A TOML sweep: each ``[[pipeline]]`` (``plugins``, fixed ``options``, a ``grid`` of option
    values, ``tasks``, ``top_k``, ``device``, ``output``, ``data_dir``) × every combination of its
    grid; top-level ``tasks``, ``top_k``, ``device``, ``output`` and ``data_dir`` for pipelines that
    set none."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise UserError("TOML sweeps need Python 3.11+ or `pip install tomli`") from None
    from .options import option_text

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{source}: {e}") from None
    shared = {"tasks", "top_k", "device", "output", "data_dir"}  # for every pipeline that sets none
    unknown = set(data) - shared - {"pipeline"}
    if unknown:
        raise UserError(f"{source}: unknown key(s) {', '.join(sorted(unknown))} (top level: "
                        f"{', '.join(sorted(shared))}, [[pipeline]])")
    out = []
    for n, p in enumerate(data.get("pipeline", []), 1):
        where = f"{source}: pipeline {n}"
        keys = {"plugins", "options", "grid", *shared}
        if not isinstance(p, dict) or not p.get("plugins") or set(p) - keys:
            raise UserError(f"{where}: expected plugins = [...] and only {', '.join(sorted(keys - {'plugins'}))}")
        p = {**{k: data[k] for k in shared if k in data}, **p}
        grid = p.get("grid", {})
        if not all(isinstance(v, list) and v for v in grid.values()):
            raise UserError(f"{where}: each grid key takes a non-empty list of values")
        words = [w for name in _listed(p["plugins"]) for w in ("--plugin", name)]
        words += [w for k, v in p.get("options", {}).items() for w in ("-o", f"{k}={option_text(v)}")]
        words += [w for t in _listed(p.get("tasks") or []) for w in ("--tasks", t)]
        words += [w for key, flag in (("top_k", "--top-k"), ("device", "--device"), ("output", "--output"),
                                      ("data_dir", "--data-dir")) if key in p for w in (flag, str(p[key]))]
        for values in product(*grid.values()):
            out.append((where, words + [w for k, v in zip(grid, values) for w in ("-o", f"{k}={option_text(v)}")]))
    return out


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value]


# ------------------------------------------------------------------------------------------ planning


def plan_sweep(lines: list[tuple[str, list[str]]], *, output: Path, data_dir: Path | None = None,
               tasks: Sequence[str] = (), cache_dir: Path | None = None) -> list[Job]:
    """The jobs of a sweep: each line's pipeline on each of its tasks (the line's ``--tasks``, else
    ``tasks``, else what ``r2med-run`` would run), with the sweep's ``output``, ``data_dir`` and
    ``cache_dir`` where the line sets none. Every line is parsed by ``r2med-run``'s parser and
    checked here (:func:`r2med_tasks.request.prepare`), so a typo stops the sweep before anything runs."""
    from .plugins import get_plugins
    from .registry import build_registry
    from .request import parse_run_args, prepare
    from .runner import result_folders

    reg = build_registry(get_plugins())
    chains = _Chains()
    jobs: list[Job] = []
    seen: set[tuple[str, ...]] = set()
    for where, words in lines:
        try:
            parsed = parse_run_args(words)
            if parsed.dry_run:
                raise UserError("--dry-run: plan the whole sweep with `r2med sweep --dry-run` instead")
            line = parsed.request
            cache = line.cache_dir if "cache_dir" in parsed.given else cache_dir or line.cache_dir
            data = line.data_dir or data_dir
            request = replace(
                line, output=Path(line.output if "output" in parsed.given else output).expanduser().absolute(),
                data_dir=Path(data).expanduser().absolute() if data is not None else None,
                cache_dir=Path(cache).expanduser().absolute() if cache is not None else None,
                tasks=line.tasks or (tuple(tasks) or None))
            with hub_offline():  # creating components loads no model; naming one may not download it
                ready = prepare(request, registry=reg)
        except UserError as e:
            raise UserError(f"{where}: {e}") from None
        pipeline = ready.pipeline
        gpu, memory = needs(pipeline)
        groups = [ready.tasks] if _tunes_across_tasks(pipeline) else [[t] for t in ready.tasks]
        for group in groups:
            args = tuple(replace(request, tasks=tuple(t.name for t in group)).arguments())
            if args in seen:
                continue
            seen.add(args)
            local = group[0].local_folder(request.data_dir, only_task=len(group) == 1) is not None
            try:
                with hub_offline():
                    folders = [str(f.path) for f in result_folders(pipeline, request.output, local=local) if f]
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
    """A component tuned on a group's tasks (``hybrid -o tune=``) sees all of its line's tasks, as
    in one ``r2med-run``: such a line is one job."""
    from .components import Composite

    return any(isinstance(s.instance, Composite) and s.instance.tunes_across_tasks for s in pipeline.ordered())


def needs(pipeline) -> tuple[bool, float | None]:
    """Whether a pipeline runs a local model on a GPU, and the largest GPU memory estimate its
    components declare (``DeclaresResources``; stages run one after another, so the largest is what
    it needs). A component with a ``device`` option that declares nothing gets a whole GPU; one set
    to ``device=cpu`` needs none."""
    from .components import Composite, DeclaresResources

    estimates = []
    for stage in pipeline.ordered():
        if str(stage.options.get("device", "")).strip().lower() == "cpu":
            continue
        members = stage.instance.members if isinstance(stage.instance, Composite) else ()
        for instance in (stage.instance, *members):
            declared = instance.resources() if isinstance(instance, DeclaresResources) else None
            if declared is None and instance is stage.instance and "device" in stage.spec.option_fields():
                declared = {"gpu": True, "gpu_memory_gb": None}
            if declared and declared.get("gpu"):
                estimates.append(declared.get("gpu_memory_gb"))
    if not estimates:
        return False, None
    return True, None if None in estimates else max(estimates)


def ray_resources(job: Job, *, cluster_gpus: float, gpu_memory_gb: float, node_memory: float) -> dict[str, Any]:
    """What a job's Ray task requests: a CPU; for a local model on a cluster with GPUs, the share of
    one GPU its estimate needs (all of it when unknown) and as much host memory as the model's
    weights (capped at the largest node's); API and LLM jobs need the CPU only."""
    if not (job.gpu and cluster_gpus):
        return {"num_cpus": 1}
    if job.gpu_memory_gb is None:
        return {"num_cpus": 1, "num_gpus": 1}
    share = min(1.0, max(0.01, math.ceil(100 * job.gpu_memory_gb / gpu_memory_gb) / 100))
    return {"num_cpus": 1, "num_gpus": share, "memory": min(job.gpu_memory_gb * 2**30, node_memory)}


# ------------------------------------------------------------------------------------------ running


def run_job(args: Sequence[str], cwd: str | None = None) -> dict[str, Any]:
    """Run one job as ``r2med-run ARGS`` would (:func:`r2med_tasks.request.execute`), quietly;
    returns ``{"run": RunOutcome.to_json(), "log": what the run printed}`` (warnings,
    "recomputing" lines). A mistake or a plugin's crash comes back as ``{"error": line, "log": ...}``;
    only a lost process is left to the executor."""
    from rich.console import Console

    from .request import execute, parse_run_args

    console = Console(file=io.StringIO(), width=160, highlight=False, color_system=None)
    try:
        with _inside(cwd):
            outcome = execute(parse_run_args(args).request, console=console,
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


class Board:
    """The live view's state: each job queued, running (since when, which attempt), done or failed."""

    def __init__(self, jobs: list[Job], clock: Callable[[], float] = time.time) -> None:
        self.jobs = jobs
        self.clock = clock  # the running jobs' times are counted on it (a test's fake clock)
        self.state = {j.index: "queued" for j in jobs}
        self.started: dict[int, float] = {}
        self.attempts = {j.index: 0 for j in jobs}
        self.outcomes: dict[int, Outcome] = {}

    def start(self, index: int, attempts: int | None = None) -> None:
        if self.state[index] in ("done", "failed"):
            return
        self.state[index] = "running"
        self.started.setdefault(index, self.clock())
        self.attempts[index] = attempts if attempts is not None else self.attempts[index] + 1

    def finish(self, outcome: Outcome) -> None:
        index = outcome.job.index
        outcome.attempts = max(1, self.attempts[index])
        self.state[index] = "failed" if outcome.error else "done"
        self.outcomes[index] = outcome

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for v in self.state.values() if v == s) for s in ("queued", "running", "done", "failed")}

    def render(self, width: int = 100):
        """The live view as a rich table fitting ``width`` columns: the running and failed jobs (at most
        30), each with its pipeline (shortened at word boundaries, a model's path to its last part),
        its tasks, its state and, while it runs, the time since it started, on :attr:`clock` now.
        Called at every refresh of the view (``rich.live.Live(get_renderable=...)``), so the times
        tick between changes of state."""
        from rich.markup import escape
        from rich.table import Table

        from .leaderboard import shorten

        counts = self.counts()
        table = Table(title=", ".join(f"{n} {s}" for s, n in counts.items()), title_justify="left")
        now = self.clock()
        shown = [j for j in self.jobs if self.state[j.index] in ("running", "failed")][:30]
        rows = []
        for j in shown:
            state = self.state[j.index]
            retry = f" (attempt {self.attempts[j.index]})" if self.attempts[j.index] > 1 else ""
            since = elapsed(now - self.started[j.index]) if state == "running" and j.index in self.started else ""
            rows.append([j.pipeline, ",".join(j.tasks), state + retry, since])
        others = [max([len(col), *(len(r[i]) for r in rows)]) for i, col in enumerate(("Task", "State", "Time"), 1)]
        room = max(20, width - sum(others) - 3 * 4 - 1)  # the heavy box: an edge and a space either side of a column
        table.add_column("Pipeline", no_wrap=True, max_width=room)
        for col in ("Task", "State", "Time"):
            table.add_column(col, no_wrap=True, justify="right" if col == "Time" else "left")
        for pipeline, tasks, state, since in rows:
            table.add_row(escape(shorten(pipeline, room)), escape(tasks), state, since)
        return table


def elapsed(seconds: float) -> str:
    """A running job's time: 7s, 1m05s, 2h03m."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def run_local(jobs: list[Job], board: Board, refresh: Callable[[], None] = lambda: None) -> list[Outcome]:
    """Each job in turn, in this process."""
    cwd = os.getcwd()
    for job in jobs:
        board.start(job.index)
        refresh()
        board.finish(Outcome.of(job, run_job(job.args, cwd)))
        refresh()
    return [board.outcomes[j.index] for j in jobs]


def run_in_pool(jobs: list[Job], board: Board, *, workers: int | None = None, retries: int = 3,
                refresh: Callable[[], None] = lambda: None) -> list[Outcome]:
    """The chains side by side in a pool of processes (one per CPU core, at most one per chain),
    started once for the sweep; each chain's next job goes to a worker when its previous one ends. A
    job whose worker died is run again in a new pool, up to ``retries`` times. ``refresh`` is called
    at least four times a second (the live view needs no thread of its own).

    On Linux, from a process with no other thread, the workers are forked: they start at once with
    everything this process imported (the plugins included), where a spawned worker imports it all
    again; elsewhere, or with threads about (which a fork would copy mid-step), they are spawned."""
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
    lost: deque[tuple[Job, list[Job]]] = deque()  # jobs of a pool that broke, to run again
    while waiting or lost:
        forks = sys.platform.startswith("linux") and threading.active_count() == 1
        with ProcessPoolExecutor(max_workers=size, mp_context=get_context("fork" if forks else "spawn")) as pool:
            running: dict[Any, tuple[Job, list[Job]]] = {}  # future -> its job and the rest of its chain

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
                    except BrokenProcessPool:  # a worker died (killed, out of memory): this pool is done
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


def choose_executor(jobs: list[Job], *, address: str | None) -> tuple[str, str | None]:
    """``--executor auto``: Ray when a cluster is named (``--address``, ``RAY_ADDRESS``) or jobs run local
    models on this machine's GPUs (Ray shares them out); one job after another in this process when
    jobs run local models without a GPU (torch already keeps every core busy, and each process would
    hold its own copy of the model); else a pool of processes. With it, a note when the choice needs
    saying (GPU jobs without Ray installed)."""
    if address or os.environ.get("RAY_ADDRESS"):
        return "ray", None
    if any(j.gpu for j in jobs):
        import importlib.util

        from .encoders import cuda_available

        if not cuda_available():
            return "local", None
        if importlib.util.find_spec("ray") is not None:
            return "ray", None
        return "local", ("Jobs run local models on GPUs and Ray is not installed (pip install 'r2med[ray]'), so "
                         "they run one after another in this process.")
    return "pool", None


def run_on_ray(jobs: list[Job], board: Board, *, address: str | None = None, retries: int = 3,
               gpu_memory_gb: float = GPU_MEMORY_GB, refresh: Callable[[], None] = lambda: None,
               note: Callable[[str], None] = lambda line: None) -> list[Outcome]:
    """One Ray task per job on the cluster at ``address`` (``auto``, ``ray://host:10001``; default:
    ``RAY_ADDRESS``'s, else a local Ray using this machine's CPUs and GPUs). Each chain's next job is
    submitted when its previous one ends; a job whose worker died is run again, up to ``retries``
    times. Workers get this process's ``R2MED_*`` variables (which plugins to load, their test hooks)."""
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'r2med[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        starts = not (address or os.environ.get("RAY_ADDRESS"))  # a new local Ray: no dashboard to start
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
    """A job inside a Ray worker; it tells the tracker it started, once per attempt, and waits for the
    tracker to have counted it (a worker that dies at once would otherwise lose the message)."""
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


# ------------------------------------------------------------------------------------------ summary


@dataclass
class BoardRow:
    """One results folder the sweep wrote or reused: its label and nDCG@10 ×100 per task."""

    label: str
    results_dir: str
    scores: dict[str, float] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)

    def average(self, tasks: list[str]) -> float | None:
        from .evaluation import leaderboard_average

        return leaderboard_average([self.scores[t] for t in tasks]) if all(t in self.scores for t in tasks) else None


def merged_board(outcomes: list[Outcome]) -> tuple[list[BoardRow], list[str]]:
    """What the sweep ran as one leaderboard: a row per results folder, ranked by the average of
    the tasks run (as the leaderboard computes it), rows missing a task last."""
    rows: dict[str, BoardRow] = {}
    tasks: list[str] = []
    for o in outcomes:
        if o.run is None or o.error:
            continue
        for t in o.run.tasks:
            row = rows.setdefault(t.results_dir, BoardRow(o.run.label, t.results_dir))
            row.scores[t.alias] = t.ndcg_at_10_x100
            row.statuses[t.alias] = t.status
            if t.alias not in tasks:
                tasks.append(t.alias)
    ranked = sorted(rows.values(), key=lambda r: (r.average(tasks) is None, -(r.average(tasks) or 0.0)))
    return ranked, tasks
