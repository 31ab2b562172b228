"""Hostile or careless runs: swapped weights, interrupted and failed rewrites, a full disk, a second
Ctrl-C, folders and links where files should be. None may give a wrong number, a traceback, a
hang, or lose what was computed before."""

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

from conftest import SAMPLE, Forked, read_jsonl, write_jsonl

TASK = "R2MEDBiologyRetrieval"


def one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


# ------------------------------------------------------------------------------- weights are identity


def permute_embedding_rows(model: Path) -> None:
    """Swap two rows of the word embeddings in ``model.safetensors``: another model, the same size."""
    from safetensors.torch import load_file, save_file

    path = model / "model.safetensors"
    size = path.stat().st_size
    tensors = load_file(str(path))
    name = next(n for n in tensors if n.endswith("word_embeddings.weight"))
    weights = tensors[name].clone()
    ids = weights[[1996, 2003]].clone()  # "the", "is": in every text
    weights[[1996, 2003]] = ids[[1, 0]]
    tensors[name] = weights
    save_file(tensors, str(path), metadata={"format": "pt"})
    assert path.stat().st_size == size


def test_swapped_weights_are_another_model(evaluate, tmp_path, data_dir, small_model_path):
    """Same size, same names, other bytes: recomputed (never the old score, never old corpus
    embeddings with new query embeddings), and equal to a fresh run of the swapped model."""
    model = tmp_path / "x" / "best"
    shutil.copytree(small_model_path, model)

    def run(model=model, **kwargs):
        return evaluate("st", model=str(model), data_dir=data_dir, tasks="Biology", **kwargs)

    before = run()
    permute_embedding_rows(model)
    after = run()
    assert after[TASK].status == "computed"
    assert after.results_dirs != before.results_dirs  # another revision: another folder, nothing recomputed over
    overwritten = run(overwrite=True)
    fresh = run(output="fresh", cache_dir="fresh-cache")
    assert after[TASK].ndcg_at_10 == overwritten[TASK].ndcg_at_10 == fresh[TASK].ndcg_at_10
    assert after.revision != before.revision
    # two checkpoints of one name in other folders (x/best, y/best) never share embeddings
    other = tmp_path / "y" / "best"
    shutil.copytree(small_model_path, other)
    again = run(model=other)
    assert again.revision == before.revision and again[TASK].ndcg_at_10 == before[TASK].ndcg_at_10
    embeddings = {p.parent for p in (tmp_path / "cache").rglob("chunk-*.npy")}
    assert len(embeddings) == 2  # one corpus, two models


# ------------------------------------------------------------------------------- a result is replaced whole


def test_a_failed_rewrite_leaves_the_previous_result(run_cli, evaluate, tmp_path, data_dir, monkeypatch):
    from r2med_tasks.files import atomic

    out = tmp_path / "out"
    common = ["--plugin", "bm25", "--data-dir", data_dir, "--tasks", "Biology", "--output", out, "--cache-dir",
              tmp_path / "cache"]
    (folder,) = map(Path, evaluate("bm25", data_dir=data_dir, tasks="Biology", output=out).results_dirs)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "lock"}
    seen = []
    real = atomic.replace_all

    def full_disk(files):
        files = list(files)
        seen.append(all(path.exists() for path, _ in files if path.name == f"{TASK}.json"))
        for path, _ in files:
            if path.name == f"{TASK}.json":
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(files)

    monkeypatch.setattr(atomic, "replace_all", full_disk)
    code, _, err = run_cli("run", *map(str, common), "-o", "k1=0.9", "--overwrite")
    one_line_error(code, err, f"{folder / (TASK + '.json')}: no space left on the device")
    assert seen == [True]  # the old TaskResult was there while the new files were written
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "lock"} == before
    monkeypatch.setattr(atomic, "replace_all", real)
    assert evaluate("bm25", data_dir=data_dir, tasks="Biology", output=out)[TASK].status == "cached"


def test_a_rewrite_killed_halfway_is_recomputed(run_cli, evaluate, tmp_path, data_dir, monkeypatch):
    """Killed while the new files replace the old: the mix is never reused."""
    import r2med_tasks.files.atomic as atomic

    out = tmp_path / "out"
    common = ["--plugin", "bm25", "--data-dir", data_dir, "--tasks", "Biology", "--output", out, "--cache-dir",
              tmp_path / "cache"]
    first = evaluate("bm25", data_dir=data_dir, tasks="Biology", output=out)
    real_replace = os.replace

    def killed_before_the_manifest(src, dst):
        if str(dst).endswith(".files.json"):
            raise KeyboardInterrupt  # as a kill between two renames: the new TaskResult is in place
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", killed_before_the_manifest)
    code, _, _ = run_cli("run", *map(str, common), "--overwrite")
    assert code == 130
    monkeypatch.setattr(atomic.os, "replace", real_replace)
    code, out_text, err = run_cli("run", *map(str, common), "--json")
    assert code == 0 and "its stored files are not the ones written together" in err, err
    assert json.loads(out_text)["tasks"][0]["ndcg_at_10"] == first[TASK].ndcg_at_10


def test_a_failed_run_leaves_no_folder(plugins, register, run_cli, tmp_path):
    from r2med_tasks import RetrieverSpec, hookimpl

    class Breaks:
        def index(self, corpus, *, task, context):
            raise RuntimeError("broken")

        def search(self, queries, *, task, top_k, context):
            return {}

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="breaks", factory=lambda options: Breaks()))

    register(Plugin(), "broken-pkg")
    code, _, err = run_cli("run", "--plugin", "breaks", "--tasks", "sample", "--output", tmp_path / "out")
    assert code == 2 and "retriever 'breaks' (from broken-pkg) failed while indexing" in err
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []


# ------------------------------------------------------------------------------- errors name what failed


def test_a_cache_that_cannot_be_written_is_named(run_cli, tmp_path, data_dir):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "bm25").write_text("a file where the index folder goes")
    code, _, err = run_cli("run", "--plugin", "bm25", "--data-dir", data_dir, "--tasks", "Biology", "--output",
                           tmp_path / "out", "--cache-dir", cache)
    one_line_error(code, err, f"{cache / 'bm25'} is a file, not a folder")
    assert "failed while" not in err


@pytest.mark.process  # a file-size limit is a process's
def test_the_file_size_limit_names_the_file(tmp_path, data_dir):
    """EFBIG (ulimit -f) while a cache file is written: one line naming the file and the limit, not
    the plugin."""
    import resource

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    corpus = [{"id": f"d{i}", "text": f"document {i} " + "word " * 50} for i in range(400)]
    write_jsonl(data_dir / "Biology" / "corpus.jsonl", [*read_jsonl(data_dir / "Biology" / "corpus.jsonl"), *corpus])
    proc = Forked(["run", "--plugin", "bm25", "--data-dir", data_dir, "--tasks", "Biology", "--output", tmp_path / "out",
                   "--cache-dir", tmp_path / "cache"], before=limited)
    _, err = proc.communicate()
    one_line_error(proc.returncode, err, str(tmp_path / "cache"), "file too large", "--cache-dir", "ulimit -f")
    assert "failed while" not in err  # the limit, not the plugin, is to blame


@pytest.mark.parametrize("option", ["--output", "--data-dir", "--cache-dir"])
def test_an_empty_path_is_refused(run_cli, tmp_path, option, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("run", "--plugin", "bm25", "--tasks", "sample", option, "")
    one_line_error(code, err, option, "empty")
    assert list(tmp_path.iterdir()) == []


def test_a_link_out_of_the_output_is_not_followed(run_cli, tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "local-data").mkdir(parents=True)
    elsewhere.mkdir()
    (out / "local-data" / "r2med__bm25").symlink_to(elsewhere)
    code, _, err = run_cli("run", "--plugin", "bm25", "--tasks", "sample", "--output", out, "--cache-dir",
                           tmp_path / "cache")
    one_line_error(code, err, "r2med__bm25 is a symbolic link leading out of --output")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.process  # a full standard output is a process's
def test_a_full_standard_output_is_not_blamed_on_the_output_folder(tmp_path):
    with open("/dev/full", "w") as full:
        proc = Forked(["run", "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir",
                       tmp_path / "cache", "--json"], stdout=full.fileno())
        _, err = proc.communicate()
    one_line_error(proc.returncode, err, "writing the command's output: no space left on the device")
    assert "--output" not in err


def test_temp_files_a_killed_writer_left_go_with_the_next_write(tmp_path):
    from r2med_tasks.files import atomic

    target = tmp_path / "cache" / "index.npy"
    target.parent.mkdir()
    dead = subprocess.Popen(["true"])  # a process id whose process has ended
    dead.wait()
    orphan = target.parent / f".index.npy.{atomic._HOST}-{dead.pid}-0123456789ab.tmp"
    alive = target.parent / f".index.npy.{atomic._HOST}-{os.getppid()}-0123456789ab.tmp"  # its writer runs
    orphan.write_bytes(b"half")
    alive.write_bytes(b"in progress")
    atomic.write_bytes(target, b"whole")
    assert target.read_bytes() == b"whole" and not orphan.exists() and alive.exists()


# ------------------------------------------------------------------------------- a second Ctrl-C


def interrupt_twice(args: list[str], ready, tmp_path, *, fork: bool = False) -> subprocess.CompletedProcess:
    """Start ``r2med ARGS`` (a fresh interpreter, or with ``fork`` a fork of this one), wait until
    ``ready()`` (the stage under test is running), press Ctrl-C, wait until the run says it was
    interrupted (its first line), then press again: each press comes after the run has answered
    the one before, however loaded the machine, so no timing decides."""
    import threading

    if fork:
        proc = Forked(args)
    else:
        proc = subprocess.Popen([sys.executable, "-m", "r2med_tasks.cli", *map(str, args)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    said = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("Interrupted."):
                said.set()
        said.set()  # the stream ended: the run is over

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 90
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "".join(lines)
        proc.send_signal(signal.SIGINT)
        assert said.wait(60), "no answer to the first Ctrl-C within 60 s"
        second = proc.poll() is None and reader.is_alive()  # a run that already ended gets no second press
        if second:
            proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    reader.join(timeout=10)
    return subprocess.CompletedProcess(args, proc.returncode, "", "".join(lines)), second


def large_task(root: Path, n_docs: int) -> Path:
    """A Biology folder with the sample's queries and judgments and ``n_docs`` more documents."""
    folder = root / "Biology"
    shutil.copytree(SAMPLE, folder)
    with (folder / "corpus.jsonl").open("a", encoding="utf-8") as corpus:  # JSON by hand: 5 times faster
        corpus.writelines(f'{{"id": "x{i}", "text": "padding passage {i} about cells genes proteins {i % 97} and more"}}\n'
                          for i in range(n_docs))
    return root


@pytest.mark.process  # the run gets the signals
@pytest.mark.parametrize("stage", ["dense encoding", "bm25 indexing"])
def test_a_second_ctrl_c_quits_at_once_with_one_line(stage, tmp_path, small_model_path):
    cache = tmp_path / "cache"
    if stage == "dense encoding":
        data = large_task(tmp_path / "data", 20_000)
        args = ["run", "--plugin", "st", "-o", f"model={small_model_path}", "-o", "chunk_size=256"]
        ready = lambda: any(cache.rglob("chunk-*.npy"))  # noqa: E731 - encoding under way
    else:
        data = large_task(tmp_path / "data", 100_000)
        args = ["run", "--plugin", "bm25"]
        ready = lambda: any((cache / "corpus").glob("*.ids"))  # noqa: E731 - the corpus is read: indexing next
    # the encoding run in a fork of this worker, which has the model's libraries loaded; the
    # indexing run in a fresh interpreter, as the command starts
    done, second = interrupt_twice([*args, "--data-dir", data, "--output", tmp_path / "out", "--cache-dir", cache],
                                   ready, tmp_path, fork=stage == "dense encoding")
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr and "Abort" not in done.stderr and "Exception ignored" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("Interrupted. Finished tasks are saved under")
    # the last line: the second press's, or (a press the run had ended before) the first's
    assert lines[-1] in ("Interrupted again: quitting now.", lines[0]) and (second or lines[-1] == lines[0])


# ------------------------------------------------------------------------------- sweeps and threads


def test_a_sweep_file_sets_the_data_folder_for_every_pipeline(run_cli, tmp_path, data_dir):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'data_dir = "{data_dir}"\ntasks = ["Biology"]\n\n[[pipeline]]\nplugins = ["bm25"]\n')
    code, out, err = run_cli("sweep", sweep, "--dry-run", "--json")
    assert code == 0, err
    (job,) = json.loads(out)
    assert ["--data-dir", str(data_dir)] == [w for w in job["args"] if w in ("--data-dir", str(data_dir))]


def test_encodings_at_other_thread_counts_agree_within_the_documented_tolerance(small_model_path):
    """A Ray job given one CPU and a local run given all encode with other torch thread counts:
    the floats may differ in their last bits, never by more than docs/scale-out.md states."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    texts = [row["text"] for row in read_jsonl(SAMPLE / "corpus.jsonl")]
    model = SentenceTransformer(str(small_model_path), device="cpu")
    threads = torch.get_num_threads()
    try:
        encoded = []
        for n in (1, 2):
            torch.set_num_threads(n)
            encoded.append(model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True))
    finally:
        torch.set_num_threads(threads)
    scores = [e @ e[:5].T for e in encoded]
    assert np.max(np.abs(scores[0] - scores[1])) <= 1e-5


@pytest.mark.process  # the terminal's encoding is the process's
@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_cannot_show_every_character_gets_replacements(tmp_path, encoding):
    """The summary's ×100 and a hybrid's ⊕: replaced, not a traceback. (Each command in a process
    whose standard streams have the encoding, as PYTHONIOENCODING gives them.)"""
    out = tmp_path / "out"
    args = ["run", "--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "--tasks", "sample", "--output", str(out),
            "--cache-dir", str(tmp_path / "cache")]
    run = Forked(args, stdout=subprocess.PIPE, encoding=encoding)
    stdout, stderr = run.communicate()
    assert run.returncode == 0 and "Traceback" not in stderr, stderr
    assert b"BM25 ? bm25-okapi (RRF)" in stdout  # no ⊕ in either; latin-1 has the ×
    assert ("nDCG@10 ×100".encode(encoding, "replace")) in stdout
    folder = next(out.rglob("R2MEDSampleRetrieval.per_query.tsv")).parent
    compared = Forked(["compare", folder, folder], stdout=subprocess.PIPE, encoding=encoding)
    stdout, stderr = compared.communicate()
    assert compared.returncode == 0 and "Traceback" not in stderr and b"Traceback" not in stdout, stderr
    assert "nDCG@10 ×100".encode(encoding, "replace") in stdout


def test_a_named_pipe_for_a_run_file_is_refused_not_waited_on(run_cli, tmp_path):
    runs = [tmp_path / "a.trec", tmp_path / "b.trec"]
    os.mkfifo(runs[0])  # a reader that opened it would wait for a writer forever
    runs[1].write_text("s01 Q0 s-bio-01 1 1.0 x\n")
    started = time.monotonic()
    code, _, err = run_cli("fuse", *runs, "--qrels", SAMPLE / "qrels.jsonl", "--output", tmp_path / "out")
    one_line_error(code, err, f"{runs[0]}: not a regular file")
    assert time.monotonic() - started < 30
