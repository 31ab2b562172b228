"""``r2med sweep``: sweep files in every form they come in, jobs that give exactly the results of
sweeps planned and checked before anything runs, and a command line that never imports Ray until a
sweep runs on it. Sweeps that run (here and on Ray) are in test_ray.py."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TESTS

ROOT = TESTS.parent
TASKS = "Biology,Bioinformatics"


def result_files(root: Path) -> dict[str, Path]:
    """Every task result under a results root, by its path below the root."""
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*.trec"))}


def assert_same_results(got: Path, expected: Path, *, subset: bool = False) -> None:
    """Byte-identical runs and per-query scores, equal score dicts (timings aside), same folders
    (with ``subset``: some of ``expected``'s)."""
    files = result_files(got)
    if subset:
        assert files.keys() <= result_files(expected).keys()
    else:
        assert files.keys() == result_files(expected).keys()
    for rel, trec in files.items():
        other = expected / rel
        assert trec.read_bytes() == other.read_bytes(), rel
        per_query = rel.removesuffix(".trec") + ".per_query.tsv"
        assert (got / per_query).read_bytes() == (expected / per_query).read_bytes(), per_query
        scores = [json.loads(p.with_suffix(".json").read_text())["scores"] for p in (trec, other)]
        assert scores[0] == scores[1], rel


def sweep_json(run_cli, *args) -> dict:
    """``r2med sweep ... --json``'s output (test_ray.py's sweeps run through the command line)."""
    code, out, err = run_cli("sweep", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def plan(sweep: Path, *, output: Path = Path("results"), **kwargs) -> list:
    """The jobs of a sweep file, as ``r2med sweep --dry-run`` plans them (``r2med_tasks.sweep``)."""
    from r2med_tasks.sweep.plan import plan_sweep
    from r2med_tasks.sweep.sources import sweep_lines

    return plan_sweep(sweep_lines(sweep.read_text(encoding="utf-8"), str(sweep)), output=output, **kwargs)


# ------------------------------------------------------------------------------------------ reading


def test_every_leaderboard_commands_format_is_a_sweep(run_cli, tmp_path):
    """`r2med leaderboard --commands` in each format (the terminal table wraps long commands over
    rows) reads as the same pipelines, each once (two rows share MedCPT's command)."""
    from r2med_tasks.sweep.sources import sweep_lines

    code, out, _ = run_cli("leaderboard", "--commands", "--format", "json")
    assert code == 0
    commands = list(dict.fromkeys(r["command"] for r in json.loads(out) if r["command"]))
    expected = [shlex.split(c)[1:] for c in commands]
    assert len(expected) >= 60 and max(map(len, commands)) > 120  # the table wraps the longest ones
    for fmt in ("table", "markdown", "csv", "json"):
        code, out, _ = run_cli("leaderboard", "--commands", "--format", fmt)
        assert [words for _, words in sweep_lines(out, "board")] == expected, fmt


def test_argument_lines_toml_grids_and_sweep_defaults(plugins, tmp_path, data_dir):
    """Lines with or without `r2med-run`, comments; the sweep's --output/--data-dir/--tasks fill in
    what a line leaves out; a TOML pipeline × its grid × tasks; duplicates run once."""
    lines = tmp_path / "sweep.txt"
    lines.write_text("# BM25 two ways\nr2med-run --plugin bm25\n--plugin bm25 -o k1=1.2 --tasks Biology  # one task\n"
                     f"--plugin bm25 --output {tmp_path / 'own'}\nr2med-run --plugin bm25\n")
    jobs = plan(lines, tasks=(TASKS,), data_dir=data_dir, output=tmp_path / "out")
    assert [(j.pipeline, j.tasks) for j in jobs] == [
        ("--plugin bm25", ("Biology",)), ("--plugin bm25", ("Bioinformatics",)),
        ("--plugin bm25 -o k1=1.2 --tasks Biology", ("Biology",)),
        (f"--plugin bm25 --output {tmp_path / 'own'}", ("Biology",)),
        (f"--plugin bm25 --output {tmp_path / 'own'}", ("Bioinformatics",))]
    outputs = [j.args[j.args.index("--output") + 1] for j in jobs]
    assert outputs == [str(tmp_path / "out")] * 3 + [str(tmp_path / "own")] * 2
    assert all(j.args[j.args.index("--data-dir") + 1] == str(data_dir) for j in jobs)
    assert len({j.chain for j in jobs}) == 3  # one results folder each: their jobs run in turn

    toml = tmp_path / "grid.toml"
    toml.write_text('tasks = ["Biology"]\n[[pipeline]]\nplugins = ["bm25"]\ngrid = { k1 = [0.9, 1.2], b = [0.4, 0.75] }\n'
                    '[[pipeline]]\nplugins = ["bm25"]\noptions = { query_weighting = "plain" }\n'
                    'tasks = ["Biology", "Bioinformatics"]\n')
    jobs = plan(toml, data_dir=data_dir)
    assert [j.pipeline for j in jobs][:4] == [
        "--plugin bm25 --tasks Biology -o k1=0.9 -o b=0.4", "--plugin bm25 --tasks Biology -o k1=0.9 -o b=0.75",
        "--plugin bm25 --tasks Biology -o k1=1.2 -o b=0.4", "--plugin bm25 --tasks Biology -o k1=1.2 -o b=0.75"]
    assert [j.tasks for j in jobs][4:] == [("Biology",), ("Bioinformatics",)]


@pytest.mark.parametrize("text,message", [
    ("--plugin bm25\n--plugin nope\n", "sweep.txt:2: --plugin nope"),
    ("--plugin bm25 -o k9=1\n", "sweep.txt:1: -o k9=1: no selected component accepts 'k9'"),
    ("--plugin bm25 --top-k zero\n", "sweep.txt:1: Invalid value for '--top-k'"),
    ("bm25\n", "sweep.txt:1: expected r2med-run arguments"),
    ("--plugin bm25 --dry-run\n", "sweep.txt:1: --dry-run"),
    ("# nothing\n", "no r2med-run lines"),
])
def test_bad_sweeps_stop_before_anything_runs(run_cli, tmp_path, text, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("sweep.txt").write_text(text)
    code, _, err = run_cli("sweep", "sweep.txt", "--tasks", "sample")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not Path("results").exists()


def test_bad_toml_sweep(run_cli, tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[[pipeline]]\nplugins = ["bm25"]\ngrid = { k1 = 1.2 }\n')
    code, _, err = run_cli("sweep", sweep, "--dry-run")
    assert code == 2 and "pipeline 1: each grid key takes a non-empty list" in err


def test_jobs_request_what_their_components_declare(plugins, tmp_path):
    """GPU memory estimates of docs/reproducing.md as a share of one GPU (and host memory), a whole
    GPU for a model component that declares none, a CPU for BM25, published generations and APIs;
    on a cluster without GPUs, a CPU for all."""
    from r2med_tasks.sweep.plan import Job, ray_resources

    sweep = tmp_path / "s.txt"
    sweep.write_text("--plugin nvembed\n--plugin e5 -o dtype=fp16\n--plugin bm25 --plugin bge-reranker\n"
                     "--plugin hyde -o source=o3-mini --plugin bm25\n--plugin openai\n")
    jobs = plan(sweep, tasks=("Biology",), output=tmp_path / "out")
    assert [(j.gpu, j.gpu_memory_gb) for j in jobs] == [
        (True, 30), (True, 20), (True, None), (False, None), (False, None)]
    requests = [ray_resources(j, cluster_gpus=8, gpu_memory_gb=80, node_memory=2**40) for j in jobs]
    assert requests == [{"num_cpus": 1, "num_gpus": 0.38, "memory": 30 * 2**30},
                        {"num_cpus": 1, "num_gpus": 0.25, "memory": 20 * 2**30},
                        {"num_cpus": 1, "num_gpus": 1}, {"num_cpus": 1}, {"num_cpus": 1}]
    assert ray_resources(Job(0, "", "", (), (), "", 0, True, 30), cluster_gpus=0, gpu_memory_gb=80,
                         node_memory=2**40) == {"num_cpus": 1}


@pytest.mark.process  # what a fresh interpreter imports
def test_help_never_imports_ray():
    code = ("import sys\nfrom click.testing import CliRunner\nfrom r2med_tasks.cli import cli, run_command\n"
            "assert CliRunner().invoke(run_command, ['--help']).exit_code == 0\n"
            "assert CliRunner().invoke(cli, ['sweep', '--help']).exit_code == 0\n"
            "print(sorted(m for m in ('ray', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------ docs


def test_documented_sweeps_are_accepted(run_cli, tmp_path, monkeypatch):
    """Every `r2med sweep` command in docs/scale-out.md plans (--dry-run) with the files the page
    writes: its TOML example and what `r2med leaderboard --commands` gives."""
    from test_docs import shell_lines

    page = ROOT / "docs" / "scale-out.md"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.toml").write_text(page.read_text().split("```toml\n")[1].split("```")[0])
    commands = [c.strip() for line in shell_lines(page) for c in line.split("&& ") if c.strip().startswith("r2med ")]
    for command in commands:
        words = shlex.split(command)[1:]
        if words[0] == "leaderboard":  # writes the file a sweep reads (--output all.csv)
            code, _, err = run_cli(*words)
            assert code == 0 and "Wrote " in err and (tmp_path / words[words.index("--output") + 1]).is_file(), err
            continue
        code, out, err = run_cli(*words, "--dry-run", "--json", "--output", tmp_path / "results")  # not /shared
        assert code == 0, f"`{command}` -> {err}"
        assert json.loads(out), command
    assert sum(c.startswith("r2med sweep") for c in commands) >= 3


@pytest.mark.parametrize("gpu_jobs, address, ray_address, cuda, ray_installed, expected, note", [
    (False, None, None, False, True, "pool", False),   # nothing on a GPU: processes side by side
    (False, "auto", None, False, False, "ray", False),  # a cluster named: Ray
    (False, None, "ray://head:10001", False, False, "ray", False),
    (True, None, None, False, True, "local", False),   # local models without a GPU: torch keeps the cores busy
    (True, None, None, True, True, "ray", False),      # GPUs to share out
    (True, None, None, True, False, "local", True),    # ... but no Ray: one after another, said once
])
def test_auto_executor(gpu_jobs, address, ray_address, cuda, ray_installed, expected, note, monkeypatch):
    import importlib.util

    from r2med_tasks.sweep import executors
    from r2med_tasks.sweep.executors import choose_executor
    from r2med_tasks.sweep.plan import Job

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray_address:
        monkeypatch.setenv("RAY_ADDRESS", ray_address)
    monkeypatch.setattr(executors, "cuda_here", lambda: cuda)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (find_spec("json") if ray_installed else None) if name == "ray"
                        else find_spec(name, *a))
    jobs = [Job(0, "s:1", "--plugin bm25", ("--plugin", "bm25"), ("Biology",), "out", 0),
            Job(1, "s:2", "--plugin st", ("--plugin", "st"), ("Biology",), "out", 1, gpu=gpu_jobs)]
    chosen, said = choose_executor(jobs, address=address)
    assert chosen == expected and bool(said) == note


@pytest.mark.process  # what a fresh interpreter imports
def test_cuda_is_not_asked_of_torch_where_no_nvidia_device_is(monkeypatch):
    """Choosing a device (or an executor) on a machine without an NVIDIA device imports no torch."""
    code = ("import sys\nfrom r2med_plugins.local_models import cuda_available, parse_devices\n"
            "from r2med_tasks.sweep.executors import cuda_here\n"
            "assert cuda_available() is False and cuda_here() is False and parse_devices('') == ['cpu']\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
