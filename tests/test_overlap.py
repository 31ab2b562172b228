"""Stages that overlap: the corpus is encoded while the rewriter waits on the LLM, and the run is the
one the stages give one after the other, file for file."""

import json
import threading
from pathlib import Path

import pytest


def run_hyde_dense(evaluate, server, model, out):
    outcome = evaluate("hyde", "st", llm=f"{server.url}#test-model", model=str(model), output=out,
                       cache_dir=f"cache-{out}")
    (folder,) = outcome.results_dirs
    return Path(folder)


def test_corpus_is_encoded_while_the_llm_answers_and_the_run_equals_the_sequential_one(
        evaluate, chat_server, small_model_path, monkeypatch):
    from r2med_tasks.running import runner
    from r2med_plugins.local_models import SentenceTransformerEncoder

    encoding = threading.Event()
    original = SentenceTransformerEncoder.encode

    def encode(self, texts, prompt):
        encoding.set()
        return original(self, texts, prompt)

    monkeypatch.setattr(SentenceTransformerEncoder, "encode", encode)
    seen_in_flight = []
    first = threading.Lock()

    def first_answer_waits_for_encoding(body):  # bounded: a sequential runner would only be slow here
        if first.acquire(blocking=False):  # the first request only (several are in flight at once)
            seen_in_flight.append(encoding.wait(timeout=20))
        return 0.0

    chat_server.delay_for = first_answer_waits_for_encoding
    overlapped = run_hyde_dense(evaluate, chat_server, small_model_path, "overlapped")
    assert seen_in_flight == [True]  # documents were encoded while the first LLM request was in flight

    class Inline:  # the sequential runner: the corpus indexed before the rewriter starts
        def __init__(self, work):
            work()

        def done(self):
            return True

        def result(self):
            return None

    monkeypatch.setattr(runner, "Background", Inline)
    encoding.clear()
    seen_in_flight.clear()
    first.release()
    sequential = run_hyde_dense(evaluate, chat_server, small_model_path, "sequential")
    assert seen_in_flight == [True]  # encoded before any request
    for name in ("R2MEDSampleRetrieval.trec", "R2MEDSampleRetrieval.per_query.tsv"):
        assert (overlapped / name).read_bytes() == (sequential / name).read_bytes()
    scores = [json.loads((folder / "R2MEDSampleRetrieval.json").read_text())["scores"]
              for folder in (overlapped, sequential)]
    assert scores[0] == scores[1]


def test_an_indexing_failure_during_rewriting_stops_the_run_with_one_line(run_cli, evaluate, tmp_path, chat_server,
                                                                         small_model_path, monkeypatch):
    from r2med_plugins.local_models import SentenceTransformerEncoder

    def broken(self, texts, prompt):
        raise RuntimeError("device lost")

    monkeypatch.setattr(SentenceTransformerEncoder, "encode", broken)
    code, _, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={chat_server.url}#test-model", "--plugin", "st",
                           "-o", f"model={small_model_path}", "--tasks", "sample", "--output", tmp_path / "out",
                           "--cache-dir", tmp_path / "cache")
    assert code == 2
    assert "while indexing" in err and "device lost" in err and "Traceback" not in err
    # the rewriter's answers are kept: a rerun sends no request again
    sent = chat_server.count
    monkeypatch.undo()
    rerun = evaluate("hyde", "st", llm=f"{chat_server.url}#test-model", model=str(small_model_path))
    assert rerun["sample"].status == "computed" and chat_server.count == sent


@pytest.mark.parametrize("nested", [False, True])
def test_overlapping_phases_are_timed_apart(nested):
    """Two stages at once in two threads: each is top-level in its own thread, both are timed."""
    from r2med_tasks.running.costs import Phases

    phases = Phases()
    started = threading.Barrier(2)

    def stage(name):
        with phases(name):
            started.wait(timeout=5)
            if nested:
                with phases("Scoring"):
                    pass

    other = threading.Thread(target=stage, args=("Encoding corpus",))
    other.start()
    stage("Rewriting queries")
    other.join()
    assert set(phases.cost()["seconds"]) == {"rewrite", "index"}
