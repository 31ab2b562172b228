"""Rewriters end to end: published generations combined by the published rules (checked against
runs whose queries the test builds by hand), live generation through a local chat server (exact
prompts, cache, resume after a failure), and LameR's BM25 passages."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from chat_server import fake_answer
from conftest import SAMPLE, Forked, read_jsonl, read_ranking, write_jsonl

QUERIES = read_jsonl(SAMPLE / "query.jsonl")
CORPUS = read_jsonl(SAMPLE / "corpus.jsonl")


def hy_doc(q, reasoning=False):
    text = f"A passage on {q['text'][:60]}\nIt names {CORPUS[int(q['id'][1:]) * 3]['text'][:120]}"
    return f"<think>Let me think about {q['id']}.</think>\n  {text}" if reasoning else text


def published_dir(tmp_path, method, llm, reasoning=False) -> Path:
    root = tmp_path / "data"
    shutil.copytree(SAMPLE, root / "Biology", dirs_exist_ok=True)
    write_jsonl(root / "Biology" / method / llm / "query_with_hydoc.jsonl",
                [{"id": q["id"], "text": q["text"], "hy_doc": hy_doc(q, reasoning), "doc_id": q["doc_id"]} for q in QUERIES])
    return root


def rewritten_dir(tmp_path, texts) -> Path:
    """The same task with each query's text replaced: the reference run for a combination rule."""
    root = tmp_path / "expected"
    shutil.copytree(SAMPLE, root / "Biology", dirs_exist_ok=True)
    write_jsonl(root / "Biology" / "query.jsonl", [{**q, "text": texts[q["id"]]} for q in QUERIES])
    return root


def one_dir(dirs) -> Path:
    """The one results folder of a run (a RunOutcome's or a --json summary's ``results_dirs``)."""
    assert len(dirs) == 1, dirs
    return Path(dirs[0])


def trec_of(evaluate, *components, **kwargs):
    """The run of a pipeline on Biology, through the Python API, and its results."""
    results = evaluate(*components, tasks="Biology", **kwargs)
    return read_ranking(next(one_dir(results.results_dirs).glob("*.trec"))), results


@pytest.mark.parametrize("method, llm, rule, name", [
    ("hyde", "qwen-7b", lambda q, g: g, "Qwen2.5-7B-Ins + BM25"),                       # the query is dropped
    ("query2doc", "gpt4", lambda q, g: q * 2 + " " + g, "Query2Doc (GPT4o) + BM25"),  # two copies, no separator
    ("lamer", "qwen-72b", lambda q, g: q + " " + g, "LameR (Qwen2.5-72B-Ins) + BM25"),
    ("hyde", "qwq-32b", lambda q, g: g.split("</think>", 1)[1].strip(), "QwQ-32B + BM25"),  # reasoning: the answer only
    ("search-r1", "qwen-7b-ins", lambda q, g: g, "Search-R1 (Qwen2.5-7b-it-em-ppo) + BM25"),  # no <answer>: all of it
])
def test_published_generations_with_bm25(evaluate, tmp_path, method, llm, rule, name):
    reasoning = llm == "qwq-32b"
    data = published_dir(tmp_path, method, llm, reasoning)
    ours, results = trec_of(evaluate, method, "bm25", source=llm, data_dir=data, output="ours")
    expected = rewritten_dir(tmp_path, {q["id"]: rule(q["text"], hy_doc(q, reasoning)) for q in QUERIES})
    reference, _ = trec_of(evaluate, "bm25", data_dir=expected, output="ref")
    assert ours == reference
    assert results.display_name == name  # as the leaderboard names the row


@pytest.mark.parametrize("method", ["hyde", "query2doc"])
def test_published_generations_with_a_dense_retriever(evaluate, tmp_path, small_model_path, method):
    """Dense: HyDE averages the query's and the document's embeddings; Query2Doc encodes
    query + "[SEP]" + document as one text."""
    from sentence_transformers import SentenceTransformer

    model_path = small_model_path

    data = published_dir(tmp_path, method, "gpt4")
    ours, _ = trec_of(evaluate, method, "st", source="gpt4", model=str(model_path), data_dir=data, top_k=5)
    model = SentenceTransformer(str(model_path), device="cpu")
    docs = model.encode([d["text"] for d in CORPUS], normalize_embeddings=True)
    for q in QUERIES:
        if method == "hyde":
            vector = (model.encode(q["text"], normalize_embeddings=True) + model.encode(hy_doc(q), normalize_embeddings=True)) / 2
        else:
            vector = model.encode(q["text"] + "[SEP]" + hy_doc(q), normalize_embeddings=True)
        scores = docs @ (vector / np.linalg.norm(vector))
        assert [d for d, _ in ours[q["id"]]] == [CORPUS[i]["id"] for i in np.argsort(-scores, kind="stable")[:5]]


@pytest.fixture
def server(chat_server):
    """The CLI's clients retry as in production, only with waits of milliseconds instead of up to 30 s."""
    return chat_server


def live(run_cli, tmp_path, server, method="hyde", *extra):
    return run_cli("run", "--plugin", method, "-o", f"llm={server.url}#test-model", "--plugin", "bm25",
                   "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json", *extra)


def live_api(evaluate, server, method="hyde", **options):
    """``live`` through the Python API: the same run, results and cache."""
    return evaluate(method, "bm25", llm=f"{server.url}#test-model", **options)


def test_live_hyde_sends_the_published_prompt_and_caches(evaluate, server):
    from r2med_plugins.gar.prompts import build_messages

    (summary,) = live_api(evaluate, server).summaries
    assert server.count == 10 and "10 requests sent, 0 answered from the cache" in summary
    by_query = {q["text"]: q for q in QUERIES}
    for request in server.requests:
        body = request.body
        assert (body["model"], body["temperature"], body["seed"], body["max_tokens"]) == ("test-model", 0.7, 42, 10240)
        assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
        user = body["messages"][1]["content"]
        query = next(q for text, q in by_query.items() if text in user)
        assert body["messages"] == build_messages("hyde", "Stack-Medical", query["text"])
        assert query["answer"] not in user and not any(d in user for d in query["doc_id"])
    (summary,) = live_api(evaluate, server, overwrite=True).summaries
    assert server.count == 10 and "0 requests sent, 10 answered from the cache" in summary


def test_live_generation_resumes_after_failure(run_cli, evaluate, tmp_path, server):
    server.fail_after(4, "500")  # the server dies after four answers
    code, _, err = live(run_cli, tmp_path, server, "hyde", "-o", "concurrency=1")
    assert code == 2 and "failed" in err and "Traceback" not in err
    answered = server.count
    server.recover()
    (summary,) = live_api(evaluate, server).summaries
    assert "4 answered from the cache" in summary and "6 requests sent" in summary
    assert answered >= 5  # four answers, then the failing attempts


@pytest.mark.parametrize("fault, limits, advice", [
    ("hang", ["timeout=0.3", "max_retries=1"], "the last with no answer within 0.3 s; check that the server answers, "
                                               "or raise -o hyde.timeout=SECONDS"),
    ("429", ["max_retries=1"], "the API is rate-limiting: wait and rerun, lower concurrency, or raise "
                               "-o hyde.max_retries=N (now 1)"),
])
def test_a_server_that_never_answers_fails_in_seconds_naming_the_option(run_cli, tmp_path, server, fault, limits,
                                                                        advice):
    """``-o timeout=`` and ``-o max_retries=`` bound the wait for a server that never answers (or
    keeps refusing): one line naming the option to raise as a composite's option, exit 2."""
    import time

    server.fail_after(0, fault, hang_s=60)
    started = time.monotonic()
    code, _, err = live(run_cli, tmp_path, server, "hyde", "-o", "concurrency=1",
                        *[w for limit in limits for w in ("-o", limit)])
    assert time.monotonic() - started < 20  # two tries of 0.3 s; never the default 600 s
    (line,) = err.strip().splitlines()
    assert code == 2 and "failed 2 time(s) for test-model" in line and line.endswith(advice)
    assert server.count == 2


def test_a_run_whose_output_is_no_terminal_says_what_it_waits_for(evaluate, server, monkeypatch):
    """No terminal (a CI log): while requests wait, a line at least every ``WAITING_LINE_S`` says
    for which server (as it may be shown: no password, no key) and how many; a terminal shows its
    progress instead. The server holds its answers until the run has said so: no timing decides."""
    import re
    import threading

    from conftest import wait_until

    monkeypatch.setattr("r2med_tasks.llm.endpoint.WAITING_LINE_S", 0.05)
    server.delay = 600.0  # held until release()
    host = server.url.removeprefix("http://")
    lines: list[str] = []

    def release_once_said() -> None:
        wait_until(lambda: any("(2 request(s) in flight" in line for line in lines))
        server.release()

    releasing = threading.Thread(target=release_once_said, daemon=True)
    releasing.start()
    evaluate("hyde", "bm25", llm=f"http://user:sesame-secret@{host}?api-key=sesame-secret#test-model",
             concurrency=2, on_message=lines.append)
    releasing.join(5)
    said = [line for line in lines if line.startswith("waiting for")]
    assert said and all("sesame-secret" not in line for line in lines)
    assert all(re.fullmatch(rf"waiting for http://\*\*\*@{re.escape(host)}\?api-key=\*\*\* \([12] request\(s\) in "
                            r"flight, the oldest for \d+ s\)", line) for line in said), said


def test_live_answers_reach_bm25(evaluate, tmp_path, server):
    ours = read_ranking(one_dir(live_api(evaluate, server).results_dirs) / "R2MEDSampleRetrieval.trec")
    answers = {}
    for request in server.requests:
        user = request.body["messages"][1]["content"]
        qid = next(q["id"] for q in QUERIES if q["text"] in user)
        answers[qid] = fake_answer(request.body["messages"])
    expected = rewritten_dir(tmp_path, answers)
    shutil.move(str(expected / "Biology"), str(expected / "sample"))
    reference = evaluate("bm25", data_dir=expected / "sample", output="ref")
    assert ours == read_ranking(one_dir(reference.results_dirs) / "R2MEDSampleRetrieval.trec")


def test_lamer_prompts_carry_bm25_top10(evaluate, server):
    from r2med_plugins.gar.prompts import cut_text

    assert live_api(evaluate, server, "lamer").display_name == "LameR (test-model) + BM25"
    top10 = read_ranking(one_dir(evaluate("bm25", output="plain", top_k=10).results_dirs) / "R2MEDSampleRetrieval.trec")
    text_of = {d["id"]: d["text"] for d in CORPUS}
    for request in server.requests:
        user = request.body["messages"][1]["content"]
        qid = next(q["id"] for q in QUERIES if q["text"] in user)
        for rank, (doc, _) in enumerate(top10[qid], 1):
            assert f"\n[{rank}]. {cut_text(text_of[doc].replace(chr(10), ' '))}" in user


@pytest.mark.parametrize("args, message", [
    (["--plugin", "hyde", "--plugin", "bm25"], "needs exactly one of -o source=LLM"),
    (["--plugin", "search-r1", "-o", "source=qwen-7b-ins", "-o", "llm=openai:gpt-4o", "--plugin", "bm25"],
     "needs exactly one of -o source=LLM (published generations) or -o llm=SPEC"),
    (["--plugin", "search-o1", "-o", "llm=http://127.0.0.1:9/v1#m", "-o", "searcher=nope", "--plugin", "bm25"],
     "-o search-o1.searcher: 'nope' is not a retriever (no such component"),
    (["--plugin", "hyde", "-o", "llm=gpt-4o", "--plugin", "bm25"], "no LLM backend 'gpt-4o'"),
])
def test_rewriter_mistakes(run_cli, tmp_path, args, message):
    code, _, err = run_cli("run", *args, "--tasks", "sample", "--output", tmp_path)
    assert code == 2 and message in err and "Traceback" not in err


def test_missing_published_file_names_it(run_cli, tmp_path):
    data = published_dir(tmp_path, "hyde", "gpt4")
    code, _, err = run_cli("run", "--plugin", "hyde", "-o", "source=o3-mini", "--plugin", "bm25", "--data-dir", data,
                           "--tasks", "Biology", "--output", tmp_path / "o")
    assert code == 2 and "hyde/o3-mini/query_with_hydoc.jsonl: file not found" in err


def test_hook_register_llms(register, run_cli, tmp_path):
    """A package can add an LLM backend; `-o llm=PREFIX:MODEL` reaches it."""
    from r2med_tasks.llm.answers import Generation
    from r2med_tasks.components.specs import LLMSpec
    from r2med_tasks.components.hookspecs import hookimpl

    seen = []

    class Echo:
        def __init__(self, spec, **sampling):
            self.model, self.params = spec.partition(":")[2], {k: v for k, v in sampling.items() if v is not None}
            seen.append((spec, sampling))

        def generate(self, requests, *, on_result=None, usage=None):
            out = []
            for i, messages in enumerate(requests):
                g = Generation("cardiac " + messages[-1]["content"][-40:], 1, 1, "stop", self.model)
                if usage is not None:
                    usage.add(g)
                if on_result:
                    on_result(i, g)
                out.append(g)
            return out

    class Plugin:
        @hookimpl
        def register_llms(self, register):
            register(LLMSpec(name="echo", factory=Echo))

    register(Plugin(), "echo-llm")
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", "llm=echo:parrot-1", "--plugin", "bm25", "--tasks", "sample",
                             "--output", tmp_path / "o", "--cache-dir", tmp_path / "c", "--json")
    assert code == 0, err
    assert seen[0][0] == "echo:parrot-1" and seen[0][1]["temperature"] == 0.7
    assert json.loads(out)["pipeline"] == "parrot-1 + BM25" and "parrot-1: 10 requests sent" in err
    code, _, err = run_cli("run", "--plugin", "hyde", "-o", "llm=nope:x", "--plugin", "bm25", "--tasks", "sample",
                           "--output", tmp_path / "o2")
    assert code == 2 and "no LLM backend 'nope'" in err


@pytest.fixture
def hub(monkeypatch):
    """A fake hub: Biology's three configs and the `hyde` config's `o3_mini` split at the pinned revision."""
    import datasets

    from r2med_tasks.tasks.specs import R2MED_TASKS

    revision = R2MED_TASKS[0].revision
    tables = {("corpus", "corpus"): CORPUS, ("query", "query"): QUERIES,
              ("qrels", "qrels"): read_jsonl(SAMPLE / "qrels.jsonl"),
              ("hyde", "o3_mini"): [{"id": q["id"], "text": q["text"], "hy_doc": hy_doc(q)} for q in QUERIES]}
    calls = []

    def load_dataset(path, name=None, split=None, revision=None, **kwargs):
        calls.append((path, name, split, revision))
        assert path == "R2MED/Biology" and revision == R2MED_TASKS[0].revision
        if (name, split) not in tables:
            splits = [s for n, s in tables if n == name]
            raise ValueError(f'Unknown split "{split}". Should be one of {splits}.')
        return datasets.Dataset.from_list(tables[name, split])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls, revision


def test_published_generations_from_the_hub(evaluate, tmp_path, hub):
    """`-o source=o3-mini` reads config 'hyde', split 'o3_mini' at the task's pinned revision."""
    calls, revision = hub
    ours, results = trec_of(evaluate, "hyde", "bm25", source="o3-mini", output="ours")
    assert ("R2MED/Biology", "hyde", "o3_mini", revision) in calls
    expected = rewritten_dir(tmp_path, {q["id"]: hy_doc(q) for q in QUERIES})
    reference, _ = trec_of(evaluate, "bm25", data_dir=expected, output="ref")
    assert ours == reference and results.display_name == "o3-mini + BM25"


def test_unknown_hub_split_lists_the_ones_there(run_cli, tmp_path, hub):
    code, _, err = run_cli("run", "--plugin", "hyde", "-o", "source=qwen3-32b", "--plugin", "bm25",
                           "--tasks", "Biology", "--output", tmp_path)
    assert code == 2 and "Traceback" not in err
    assert "config 'hyde' split 'qwen3_32b'" in err and "Should be one of ['o3_mini']" in err
    assert "-o hub_split=NAME reads another split" in err


def test_hub_split_names_the_split_to_read(evaluate, hub):
    """Where the hub names a split otherwise than the default mapping, -o hub_split= reads it."""
    calls, revision = hub
    results = evaluate("hyde", "bm25", source="qwq-32b", hub_split="o3_mini", tasks="Biology")
    assert ("R2MED/Biology", "hyde", "o3_mini", revision) in calls
    assert results.display_name == "QwQ-32B + BM25"


@pytest.mark.process  # the interrupted run gets the signal
@pytest.mark.parametrize("second_interrupt", [False, True])
def test_ctrl_c_keeps_the_answers_in_flight(evaluate, tmp_path, server, second_interrupt):
    """Ctrl-C during generation: the answers being generated are still stored (the run waits a few
    seconds for them, saying so), or a second Ctrl-C quits at once; either way a rerun sends only the rest.
    The interrupted run has a process of its own (a fork: it gets the signal); the rerun runs in this one.
    The server holds its answers until the run has said what it does with them, and each press
    comes after the run has answered the one before: no timing decides."""
    import signal
    import threading
    import time

    server.delay = 600.0  # held until release()
    args = ["run", "--plugin", "hyde", "-o", f"llm={server.url}#test-model", "-o", "concurrency=2", "--plugin", "bm25",
            "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache"]
    proc = Forked(args)
    lines: list[str] = []
    waiting = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if "in flight" in line:
                waiting.set()
        waiting.set()  # the stream ended: the run is over

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while server.in_flight < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert server.in_flight == 2
    proc.send_signal(signal.SIGINT)
    assert waiting.wait(60), "no answer to the first Ctrl-C within 60 s"
    if second_interrupt:
        proc.send_signal(signal.SIGINT)
    else:
        server.release()  # the two answers the run waits for
    started = time.monotonic()
    proc.wait(timeout=60)
    reader.join(timeout=10)
    err = "".join(lines)
    server.release()
    assert proc.returncode == 130 and "Traceback" not in err
    assert "Interrupted." in err and "Waiting up to 3 s for the 2 request(s) or batch(es) in flight" in err
    assert time.monotonic() - started < (5 if second_interrupt else 10)
    journal = tmp_path / "cache" / "generations" / "chat.jsonl"
    kept = len(journal.read_text().splitlines()) if journal.exists() else 0
    assert kept == (0 if second_interrupt else 2)
    server.delay = 0.0
    sent_before = server.count
    (summary,) = live_api(evaluate, server, concurrency=2).summaries  # the same run, cache and output
    assert server.count - sent_before == 10 - kept and f"{kept} answered from the cache" in summary


@pytest.mark.process  # the interrupted run gets the signal
def test_a_first_ctrl_c_abandons_a_server_that_never_answers_within_seconds(evaluate, tmp_path, server, monkeypatch):
    """The server answers four requests, then none: one Ctrl-C ends the run once the grace for work
    in flight is over (exit 130, one line), the requests in flight abandoned and nothing
    half-written; a rerun against the server, answering again, takes the four answers from the
    cache and sends only the rest. (The grace is 1 s here, not 3: the fork inherits it.)"""
    import signal
    import time

    from conftest import wait_until
    from r2med_tasks.cli import common, run

    grace = 1.0
    monkeypatch.setattr(common, "INTERRUPT_GRACE_S", grace)
    monkeypatch.setattr(run, "INTERRUPT_GRACE_S", grace)
    server.fail_after(4, "hang", hang_s=600)
    args = ["run", "--plugin", "hyde", "-o", f"llm={server.url}#test-model", "-o", "concurrency=2", "--plugin", "bm25",
            "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache"]
    proc = Forked(args)
    journal = tmp_path / "cache" / "generations" / "chat.jsonl"
    try:
        wait_until(lambda: server.in_flight == 2 and journal.exists() and len(journal.read_bytes().splitlines()) == 4
                   or proc.poll() is not None, 60)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        started = time.monotonic()
        err = proc.stderr.read()  # to its end: the process's
        proc.wait(30)
    finally:
        proc.kill()
    assert grace <= time.monotonic() - started < grace + 2 and proc.returncode == 130
    (line,) = err.strip().splitlines()
    assert line.startswith("Interrupted. Finished tasks are saved under") and "Waiting up to 1 s for the 2 request(s)" in line
    rows = journal.read_bytes().splitlines()
    assert len(rows) == 4 and all(isinstance(json.loads(row), dict) for row in rows)  # the four answers, whole
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or p.suffix == ".trec"]
    server.recover()
    sent_before = server.count
    (summary,) = live_api(evaluate, server, concurrency=2).summaries  # the same run, cache and output
    assert server.count - sent_before == 6 and "4 answered from the cache" in summary


def replay_with(run_cli, tmp_path, rows, task="Biology"):
    """``hyde -o source=mine`` over a published file of ``rows`` for the sample data as Biology."""
    root = tmp_path / "data"
    shutil.copytree(SAMPLE, root / "Biology", dirs_exist_ok=True)
    path = root / "Biology" / "hyde" / "mine" / "query_with_hydoc.jsonl"
    write_jsonl(path, rows)
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", "source=mine", "--plugin", "bm25", "--data-dir", root,
                             "--tasks", task, "--output", tmp_path / "o", "--json")
    return code, out, err, path


def rows_of(texts=None):
    return [{"id": q["id"], "text": (texts or {}).get(q["id"], q["text"]), "hy_doc": hy_doc(q)} for q in QUERIES]


def test_a_replayed_query_given_twice_with_other_content_is_refused(run_cli, tmp_path):
    rows = rows_of()
    rows.insert(5, {**rows[2], "hy_doc": "another passage"})
    code, out, err, path = replay_with(run_cli, tmp_path, rows)
    (line,) = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err and not out
    assert line.startswith(f"Error: {path}:6: query {QUERIES[2]['id']!r} again, with other content than {path}:3")
    assert "keep one line per query" in line


def test_a_replayed_query_repeated_identically_counts_once(run_cli, tmp_path):
    once = replay_with(run_cli, tmp_path / "once", rows_of())
    rows = rows_of()
    twice = replay_with(run_cli, tmp_path / "twice", rows + rows[:3])
    assert once[0] == twice[0] == 0
    scores = [json.loads(r[1])["tasks"][0]["ndcg_at_10"] for r in (once, twice)]
    assert scores[0] == scores[1]


def test_a_replay_file_with_a_query_the_task_lacks_is_refused(run_cli, tmp_path):
    rows = rows_of() + [{"id": "q-elsewhere", "text": "another task's question", "hy_doc": "a passage"}]
    code, _, err, path = replay_with(run_cli, tmp_path, rows)
    assert code == 2 and "Traceback" not in err
    assert f"{path}:{len(rows)}: query 'q-elsewhere' is not a query of R2MEDBiologyRetrieval" in err
    assert "another task's" in err


def test_another_tasks_replay_file_with_the_same_ids_is_refused(run_cli, tmp_path):
    """Another task's file whose ids happen to be this task's: told apart by its query texts."""
    code, _, err, path = replay_with(run_cli, tmp_path, rows_of({q["id"]: f"other question {i}"
                                                                for i, q in enumerate(QUERIES)}))
    assert code == 2 and "Traceback" not in err
    assert f"{path}:1: query {QUERIES[0]['id']!r} has another text than R2MEDBiologyRetrieval's" in err
