"""The last careless and hostile cases of a probe, each as a user meets it: a closed stdout, a
file-size limit, a full disk while locking, a device as a sweep file, "-0.00", an interval over one
query, a comparison of tasks neither run has, unbounded trials, a damaged run_settings.jsonl, text
that is a number, grades written as text, and a sweep's workers outliving their parent."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SAMPLE, Forked, finished_sample_run, read_jsonl, write_jsonl


@pytest.mark.process  # a closed standard output is a process's
def test_a_closed_stdout_is_no_traceback_and_the_run_still_writes(tmp_path):
    """``r2med ... >&-``: Python has None for the stream; the command's output goes nowhere."""
    shown = Forked(["list", "tasks"], stdout=Forked.CLOSED)
    _, err = shown.communicate()
    assert shown.returncode == 0 and "Traceback" not in err, err
    run = Forked(["run", "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir",
                  tmp_path / "cache"], stdout=Forked.CLOSED)
    _, err = run.communicate()
    assert run.returncode == 0 and "Traceback" not in err, err
    assert list((tmp_path / "out").glob("local-data/*/*/R2MEDSampleRetrieval.json"))


def test_a_full_disk_while_locking_names_the_lock_and_leaves_no_folder(run_cli, tmp_path, monkeypatch):
    real_open = os.open

    def full(path, flags, *args, **kwargs):
        if str(path).endswith(os.path.join("r2med", "lock")):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", full)
    code, _, err = run_cli("run", "--plugin", "bm25", "-o", "b=0.5", "--tasks", "sample", "--output",
                           tmp_path / "out", "--cache-dir", tmp_path / "cache")  # experiments/b_0.5/r2med/lock
    monkeypatch.setattr(os, "open", real_open)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "r2med/lock: no space left" in err and "command's output" not in err
    assert not [p for p in (tmp_path / "out").rglob("*") if p.name in ("lock", "r2med", "b_0.5")]


@pytest.mark.parametrize("source", ["/dev/zero", "fifo"])
def test_a_sweep_file_that_is_a_device_or_a_pipe_is_refused_at_once(run_cli, tmp_path, source):
    if source == "fifo":
        source = tmp_path / "fifo"
        os.mkfifo(source)
    code, _, err = run_cli("sweep", source, "--dry-run")
    assert code == 2 and "not a regular file" in err and "Traceback" not in err


def test_numbers_never_show_a_negative_zero():
    from r2med_tasks.cli.leaderboard import difference_ci
    from r2med_tasks.terminal import number

    assert number(-0.0) == "0.00" and number(-0.004) == "0.00" and number(-0.004, signed=True) == "+0.00"
    assert number(-0.006, signed=True) == "-0.01" and number(12.345678, 4) == "12.3457"
    assert difference_ci({"n_queries": 5, "difference_ci": [-1e-9, 0.01]}) == "[+0.00, +1.00]"


def test_an_interval_over_one_query_says_so(run_cli, evaluate, tmp_path):
    one = tmp_path / "one" / "sample"
    shutil.copytree(SAMPLE, one)
    queries = read_jsonl(SAMPLE / "query.jsonl")
    write_jsonl(one / "query.jsonl", queries[:1])
    a = next(Path(d) for d in evaluate("bm25", data_dir=one, output="a").results_dirs)
    b = next(Path(d) for d in evaluate("bm25", k1=1.6, data_dir=one, output="b").results_dirs)
    code, out, err = run_cli("compare", a, b)
    assert code == 0, err
    row = next(line for line in out.splitlines() if "sample" in line.lower())
    assert "none (1 query)" in row


def test_compare_of_tasks_neither_run_has_and_of_unbounded_trials(run_cli, tmp_path):
    folder = finished_sample_run(tmp_path / "out")
    code, _, err = run_cli("compare", folder, folder, "--tasks", "PMC-Clinical")
    assert code == 2 and "run A has none of them (it has R2MEDSampleRetrieval)" in err and "[]" not in err
    code, _, err = run_cli("compare", folder, folder, "--trials", "1000000000")
    assert code == 2 and "1000000" in err
    import r2med_tasks as r2med
    from r2med_tasks.errors import UserError

    with pytest.raises(UserError, match="--trials"):
        r2med.compare_runs(folder, folder, trials=10**9)


@pytest.mark.parametrize("folder_arg", [["/nonexistent-results"], ["--mteb-results", "/nonexistent-results"]])
def test_a_leaderboard_of_a_folder_that_is_not_there_is_an_error(run_cli, folder_arg):
    code, _, err = run_cli("leaderboard", *folder_arg)
    assert code == 2 and "/nonexistent-results" in err


@pytest.mark.parametrize("damage", ["deleted", "garbage", "emptied", "another task only"])
def test_a_damaged_run_settings_is_repaired_by_a_rerun(evaluate, tmp_path, damage):
    first = evaluate("bm25")
    folder = next(Path(d) for d in first.results_dirs)
    settings = folder / "run_settings.jsonl"
    whole = settings.read_text()
    if damage == "deleted":
        settings.unlink()
    elif damage == "garbage":
        settings.write_text("{not json\n" + whole)
    elif damage == "emptied":
        settings.write_text("")
    else:
        settings.write_text(json.dumps({"task": "OtherTask", "splits": ["test"], "subsets": ["default"]}) + "\n")
    again = evaluate("bm25")
    assert again["sample"].status == "cached"  # nothing recomputed
    entries = [json.loads(line) for line in settings.read_text().splitlines()]
    ours = [e for e in entries if e["task"] == "R2MEDSampleRetrieval"]
    assert len(ours) == 1 and ours[0]["splits"] == ["test"] and ours[0]["subsets"] == ["default"]
    if damage == "another task only":
        assert any(e["task"] == "OtherTask" for e in entries)  # kept, as mteb merges


def test_a_number_as_a_text_is_refused_and_grades_as_text_are_said(run_cli, evaluate, tmp_path):
    folder = tmp_path / "data" / "sample"
    shutil.copytree(SAMPLE, folder)
    corpus = read_jsonl(SAMPLE / "corpus.jsonl")
    write_jsonl(folder / "corpus.jsonl", [*corpus[:2], {**corpus[2], "text": 123}, *corpus[3:]])
    code, _, err = run_cli("run", "--plugin", "bm25", "--data-dir", folder, "--tasks", "sample", "--output",
                           tmp_path / "out")
    assert code == 2 and "corpus.jsonl:3" in err and "'text' must be a string" in err
    write_jsonl(folder / "corpus.jsonl", corpus)
    qrels = read_jsonl(SAMPLE / "qrels.jsonl")
    write_jsonl(folder / "qrels.jsonl", [{**qrels[0], "score": "1"}, *qrels[1:]])
    lines = []
    outcome = evaluate("bm25", data_dir=folder, on_message=lines.append)
    assert any("qrels.jsonl:1" in line and "written as text" in line for line in lines), lines
    reference = evaluate("bm25", output="ref")
    assert outcome["sample"].ndcg_at_10 == reference["sample"].ndcg_at_10  # read as the grade it spells


@pytest.mark.process  # a parent killed with SIGKILL
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_a_sweeps_workers_end_with_their_parent(tmp_path):
    """A process pool as the sweep makes it (its workers' initializer); the parent killed with
    SIGKILL, which it cannot pass on: its worker ends too."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from multiprocessing import get_context\n"
        "from r2med_tasks.sweep.executors import end_with_parent\n"
        "pool = ProcessPoolExecutor(1, mp_context=get_context('fork'), initializer=end_with_parent,\n"
        "                           initargs=(os.getpid(),))\n"
        "print(pool.submit(os.getpid).result(), flush=True)\n"
        "pool.submit(time.sleep, 60)\n"
        "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        if Path(f"/proc/{worker}/stat").read_text().split()[2] == "Z":
            return  # ended; a zombie until reaped
        time.sleep(0.05)
    os.kill(worker, signal.SIGKILL)
    pytest.fail("the worker outlived its parent")
