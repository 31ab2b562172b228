"""Everything that runs on Ray, in one module: conftest's scheduler sends the module to one
pytest worker as a whole, which starts one local Ray (2 CPUs) for all of it, while the other worker
runs the rest of the suite; the local and process-pool sweeps are here too, as they share the one-by-one reference runs.

- Ray actors fill the embedding cache with exactly the embeddings one process computes, one actor
  dying on its first chunk (issue #17).
- ``r2med sweep``: jobs give exactly the results of the same runs made one by one, in this process
  and as Ray tasks, a worker lost mid-job; reruns compute nothing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import TESTS
from test_distributed_encoding import TASK, Bars, chunk_bytes, corpus
from test_sweep import TASKS, assert_same_results, result_files, sweep_json
from r2med_tasks.components.context import Context


@pytest.fixture(scope="module")
def ray_instance():
    """One local Ray (two CPUs) for this module, its workers finding the test plugins; shut down
    when the module ends, mid-suite, not at the end of the session. Its two tests come last in the
    module, so that the idle Ray does not share the cores with the local and pool sweeps. Started as
    Ray's own tests start one (``ray.cluster_utils``), without the autoscaler's monitor and the log
    monitor that ``ray.init`` starts besides (a local cluster of fixed size, logs not shown): two
    processes fewer, about a second of the module's time."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    path = os.pathsep.join(p for p in (str(TESTS / "plugins_for_tests"), os.environ.get("PYTHONPATH")) if p)
    with pytest.MonkeyPatch.context() as mp:
        # in Ray's environment, which its workers inherit: a job-wide runtime_env would have Ray start
        # workers of their own for it (seconds) where the ones it starts with serve
        mp.setenv("PYTHONPATH", path)
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")  # nothing to report offline: its collection is CPU spent
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 2, "include_dashboard": False, "no_monitor": True, "include_log_monitor": False})
        try:
            ray.init(address=cluster.address, log_to_driver=False)
            yield ray
        finally:
            ray.shutdown()
            cluster.shutdown()


def reference_runs(data_dir: Path, small_model_path: Path, root: Path) -> Path:
    """The sweep's pipelines run one by one through the Python API (in this process, each over both
    tasks), into ``root``; returns the folder of run files the run-file pipeline reads."""
    import r2med_tasks as r2med

    cache = root.parent / f"{root.name}-cache"
    pipelines = [r2med.pipeline("bm25"), r2med.pipeline("st", model=str(small_model_path)),
                 r2med.pipeline("hybrid", members=("bm25", "st"), options={"st.model": str(small_model_path)}),
                 r2med.pipeline("dies-once")]
    for p in pipelines:
        res = r2med.evaluate(p, tasks=TASKS.split(","), data_dir=data_dir, output=root, cache_dir=cache)
        if p.retriever.spec.name == "bm25":
            runs = root.parent / "runs"
            (folder,) = res.results_dirs  # tasks read from --data-dir: one (local-data) folder
            shutil.copytree(folder, runs, ignore=shutil.ignore_patterns("*.json", "*.tsv", "r2med"))
    r2med.evaluate(r2med.pipeline("run-file", path=str(runs)), tasks=TASKS.split(","), data_dir=data_dir,
                   output=root, cache_dir=cache)
    return runs


def sweep_file(tmp_path: Path, small_model_path: Path, runs: Path, *, models: bool = True) -> Path:
    """The sweep of the one-by-one runs; without ``models``, only its pipelines that load none."""
    lines = ["r2med-run --plugin bm25", f"--plugin st -o model={small_model_path}",
             f"--plugin hybrid -o members=bm25,st -o st.model={small_model_path}", f"--plugin run-file -o path={runs}",
             "--plugin dies-once"]
    path = tmp_path / "sweep.txt"
    path.write_text("\n".join(line for line in lines if models or "model=" not in line) + "\n")
    return path


def with_dies_once(mp: pytest.MonkeyPatch) -> None:
    """The built-in plugins and the test plugin whose process dies once, loaded as workers load them."""
    from r2med_tasks.running import discovery as plugins_module

    mp.setenv("R2MED_LOAD_PLUGINS", "")
    mp.setenv("R2MED_PLUGINS", "dies_once_plugin")
    mp.setattr(plugins_module, "_plugins", None)


@pytest.fixture
def dies_once(plugins, monkeypatch):
    with_dies_once(monkeypatch)


@pytest.fixture(scope="module")
def one_by_one(tmp_path_factory, small_model_path):
    """The data, the one-by-one results and the run files, made once for the module's sweeps."""
    from conftest import make_data_dir

    root = tmp_path_factory.mktemp("one-by-one")
    data = make_data_dir(root / "data")
    with pytest.MonkeyPatch.context() as mp:
        with_dies_once(mp)
        runs = reference_runs(data, small_model_path, root / "results")
    return data, root / "results", runs


def test_local_sweep_gives_the_runs_made_one_by_one(run_cli, dies_once, one_by_one, small_model_path, tmp_path):
    data_dir, expected, runs = one_by_one
    sweep = sweep_file(tmp_path, small_model_path, runs)
    common = ["--data-dir", data_dir, "--tasks", TASKS, "--output", tmp_path / "swept", "--cache-dir",
              tmp_path / "cache"]
    first = sweep_json(run_cli, sweep, *common)
    assert first["failed"] == 0 and len(first["jobs"]) == 10
    assert_same_results(tmp_path / "swept", expected)
    board = {r["label"]: r["average_ndcg_at_10_x100"] for r in first["leaderboard"]}
    assert len(board) == 5 and list(board.values()) == sorted(board.values(), reverse=True)
    again = sweep_json(run_cli, sweep, *common)
    assert {t["status"] for j in again["jobs"] for t in j["run"]["tasks"]} == {"cached"}


@pytest.mark.parametrize("where", ["in-process", pytest.param("command", marks=pytest.mark.process)])
def test_pool_sweep_survives_a_lost_worker_and_reruns_nothing(where, run_cli, dies_once, one_by_one,
                                                                small_model_path, tmp_path, monkeypatch):
    """The default executor for pipelines without local models: a pool of processes (spawned here,
    where pytest's threads run; forked by the command, which has none). Every .trec is
    byte-identical to the one-by-one runs; the job whose worker died ran again (and any job that
    shared its pool); a second sweep computes nothing."""
    import json
    import subprocess
    import sys

    data_dir, expected, runs = one_by_one
    sweep = sweep_file(tmp_path, small_model_path, runs, models=False)
    marker = tmp_path / "died"
    monkeypatch.setenv("R2MED_TEST_DIE_ONCE", str(marker))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(TESTS / "plugins_for_tests"),
                                                                os.environ.get("PYTHONPATH")) if p))
    common = ["--data-dir", data_dir, "--tasks", TASKS, "--output", tmp_path / "swept", "--cache-dir",
              tmp_path / "cache"]

    def sweep_outcome(*extra) -> dict:
        if where == "in-process":
            return sweep_json(run_cli, sweep, *common, *extra)
        done = subprocess.run([sys.executable, "-m", "r2med_tasks.cli", "sweep", str(sweep), *map(str, common),
                               *extra, "--json"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    code, out, _ = run_cli("sweep", sweep, *common, "--dry-run")
    assert code == 0 and "executor pool" in out
    first = sweep_outcome()
    assert first["failed"] == 0 and len(first["jobs"]) == 6
    assert marker.exists()  # a worker did die
    rerun = [j for j in first["jobs"] if j["attempts"] > 1]
    assert {j["attempts"] for j in rerun} == {2} and any("dies-once" in j["pipeline"] for j in rerun)
    assert_same_results(tmp_path / "swept", expected, subset=True)
    assert len(result_files(tmp_path / "swept")) == 6
    again = sweep_outcome()
    assert {t["status"] for j in again["jobs"] for t in j["run"]["tasks"]} == {"cached"}


def contriever(model_path: Path, dies_once: Path | None = None, **kw):
    """A dense retriever under contriever's recipe on the small model's weights: transformers
    without sentence-transformers, so that each actor imports 2 s less (the ``st`` adapter on
    actors is the same code path: ``fill_on_ray`` takes any model adapter)."""
    from dataclasses import replace

    from r2med_plugins.dense.models import DENSE_MODELS
    from r2med_plugins.dense.published import PublishedModel
    from r2med_plugins.dense.retriever import DenseRetriever

    config = replace(DENSE_MODELS["contriever"], hf_model=str(model_path))
    settings = {"device": "cpu", "batch_size": 4, "dtype": "fp32"}
    if dies_once is None:
        model = PublishedModel(config, **settings)
    else:
        from dies_once_plugin import DiesOncePublished

        model = DiesOncePublished(str(dies_once), config, **settings)
    return DenseRetriever(model, cache=True, drop_identical_ids=False, **kw)


def test_ray_actors_store_the_single_process_embeddings(ray_instance, small_model_path, tmp_path):
    """Two actors encode a 48-document corpus in chunks of 10 (the last one partial), one of them
    dying on its first chunk (its chunks go to the other actor while Ray restarts it); every chunk
    file equals, byte for byte, the one a single process writes, and the bar reaches 48."""
    docs = corpus()
    single = contriever(small_model_path, chunk_size=10)
    single.index(docs, task=TASK, context=Context(tmp_path / "single"))
    bars = Bars()
    spread = contriever(small_model_path, tmp_path / "died", chunk_size=10, ray_actors=2)
    spread.index(docs, task=TASK, context=Context(tmp_path / "ray", progress=bars))
    assert chunk_bytes(spread, docs, tmp_path / "ray") == chunk_bytes(single, docs, tmp_path / "single")
    assert [(t, sum(s)) for _, t, s in bars.bars] == [(48, 48)]
    assert (tmp_path / "died").exists()  # an actor did die


def test_ray_sweep_survives_a_lost_worker_and_reruns_nothing(ray_instance, run_cli, dies_once, one_by_one,
                                                             small_model_path, tmp_path, monkeypatch):
    """BM25, a run file and a pipeline whose worker dies once, × 2 tasks, as Ray tasks: every .trec
    byte-identical to the one-by-one runs; the lost job ran again and its result is the same; a
    second sweep computes nothing. (The executor runs any job alike; the pipelines that load a
    model are the local sweep's, and models on Ray the actor test's: in a Ray sweep each would
    have a worker import torch.)"""
    data_dir, expected, runs = one_by_one
    sweep = sweep_file(tmp_path, small_model_path, runs, models=False)
    marker = tmp_path / "died"
    monkeypatch.setenv("R2MED_TEST_DIE_ONCE", str(marker))  # read by the workers, passed on as R2MED_*
    common = ["--data-dir", data_dir, "--tasks", TASKS, "--output", tmp_path / "swept", "--cache-dir",
              tmp_path / "cache", "--executor", "ray"]
    first = sweep_json(run_cli, sweep, *common)
    assert first["failed"] == 0 and len(first["jobs"]) == 6
    assert marker.exists()  # a worker did die
    assert [j["attempts"] for j in first["jobs"] if j["attempts"] > 1] == [2]
    assert len(result_files(tmp_path / "swept")) == 6
    assert_same_results(tmp_path / "swept", expected, subset=True)
    stamps = {rel: p.stat().st_mtime_ns for rel, p in result_files(tmp_path / "swept").items()}
    again = sweep_json(run_cli, sweep, *common)
    assert {t["status"] for j in again["jobs"] for t in j["run"]["tasks"]} == {"cached"}
    assert {rel: p.stat().st_mtime_ns for rel, p in result_files(tmp_path / "swept").items()} == stamps
