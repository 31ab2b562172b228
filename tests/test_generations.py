"""Generations as data: every LLM answer of a run kept per query beside its results (written as the
run goes, part of the task's files), exported in R2MED's published layout and replayed exactly
without one LLM request; and servers that return a reasoning model's thinking apart (vLLM's
reasoning parsers, DeepSeek's API), for live rewriters and both search agents."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from chat_server import split_reasoning
from conftest import SAMPLE, read_jsonl, read_ranking

QUERIES = read_jsonl(SAMPLE / "query.jsonl")
QRELS = read_jsonl(SAMPLE / "qrels.jsonl")
TASK = "R2MEDSampleRetrieval"


def thinking_model(context, partial):
    """A reasoning model on every other query (its thought, then the passage), a plain one on the rest."""
    question = context[-1]["content"]
    digest = hashlib.sha256(question.encode()).hexdigest()
    passage = f"A passage on {question[-80:]} {digest[:8]}"
    if int(digest, 16) % 2:
        return f"<think>Let me recall what {digest[:6]} means.</think>\n\n{passage}"
    return passage


def canonical(body: dict) -> str:
    return json.dumps(body, sort_keys=True)


def results_folder(outcome) -> Path:
    (folder,) = {Path(d) for d in outcome.results_dirs}
    return folder


def hyde(evaluate, server, **options):
    return evaluate("hyde", "bm25", llm=f"{server.url}#test-model", **options)


# -- records -----------------------------------------------------------------------------------
def test_a_live_rewriter_keeps_one_record_per_query(evaluate, chat_server):
    import r2med_tasks as r2med

    chat_server.script = thinking_model
    chat_server.reasoning_tokens = 7
    folder = results_folder(hyde(evaluate, chat_server))
    records = read_jsonl(folder / f"{TASK}.generations.jsonl")
    assert [r["query_id"] for r in records] == [q["id"] for q in QUERIES]
    sent = {json.dumps(r.body["messages"]): r.body for r in chat_server.requests}
    assert len(sent) == len(QUERIES)
    for record, query in zip(records, QUERIES):
        body = next(b for b in sent.values() if query["text"] in b["messages"][-1]["content"])
        written = thinking_model(body["messages"], "")
        assert (record["stage"], record["component"], record["method"]) == ("rewriter", "hyde", "hyde")
        assert record["query"] == query["text"] and record["model"] == "test-model"
        assert record["sampling"] == {k: body[k] for k in ("temperature", "max_tokens", "seed")}
        (sample,) = record["samples"]
        assert sample["text"] == record["output"] == written and "reasoning" not in sample
        assert sample["completion_tokens"] == len(written.split()) and sample["reasoning_tokens"] == 7
        assert sample["seconds"] >= 0 and record["seconds"] == sample["seconds"]
        thought, sep, rest = written.partition("</think>")
        assert (record["answer"], record["r1_mode"]) == ((rest.strip(), True) if sep else (written, False))
    assert r2med.read_generations(folder, "sample") == records  # the Python API, by a short name too
    manifest = json.loads((folder / "r2med" / f"{TASK}.files.json").read_text())
    assert f"{TASK}.generations.jsonl" in manifest  # part of the task's files: an edit recomputes the task


def test_an_edited_record_file_recomputes_the_task(evaluate, chat_server):
    folder = results_folder(hyde(evaluate, chat_server))
    path = folder / f"{TASK}.generations.jsonl"
    kept = path.read_bytes()
    path.write_bytes(kept.replace(b'"hyde"', b'"edited"', 1))
    lines = []
    hyde(evaluate, chat_server, on_message=lines.append)
    assert any("recomputing" in line for line in lines), lines
    assert path.read_bytes() == kept and chat_server.count == len(QUERIES)  # answers from the cache


def test_records_are_written_as_the_run_goes_and_a_resumed_run_completes_them(evaluate, chat_server, tmp_path):
    import r2med_tasks as r2med
    from r2med_tasks.errors import UserError

    chat_server.fail_after(4, "500")
    with pytest.raises(UserError):
        hyde(evaluate, chat_server, concurrency=1)
    (journal,) = (tmp_path / "out").rglob(f"{TASK}.generations.partial.jsonl")
    written = read_jsonl(journal)
    assert len(written) == 4 and all(r["stage"] == "rewriter" for r in written)
    assert r2med.read_generations(journal.parent.parent, "sample") == written  # readable while unfinished
    chat_server.recover()
    folder = results_folder(hyde(evaluate, chat_server))
    assert not journal.exists() and chat_server.answered == len(QUERIES)  # nothing asked twice
    records = {r["query_id"]: r for r in read_jsonl(folder / f"{TASK}.generations.jsonl")}
    assert list(records) == [q["id"] for q in QUERIES]
    assert all(records[r["query_id"]] == r for r in written)  # the four answered before the failure, as they were


# -- export and replay -----------------------------------------------------------------------------
def examples_file(tmp_path) -> Path:
    """Query2Doc's few-shot examples, made up (the authors' ship with the package otherwise)."""
    from r2med_plugins.gar.query2doc_examples import DATASET_KEYS

    path = tmp_path / "examples.json"
    path.write_text(json.dumps({key: f"Example for {key}: a question and a passage." for key in DATASET_KEYS}))
    return path


def agent_server(server, method):
    """The scripted models of the agents' own tests: one search, then an answer."""
    if method == "search-o1":
        from test_search_o1 import QWQ, sample_model, serve

        serve(server, sample_model)
        return QWQ
    from test_search_r1 import MODEL, agent_script

    server.script = agent_script
    return MODEL


@pytest.mark.parametrize("method", ["hyde", "query2doc", "lamer", "search-o1", "search-r1"])
def test_an_exported_run_replays_exactly_without_a_request(evaluate, chat_server, data_dir, tmp_path, method):
    import r2med_tasks as r2med

    if method.startswith("search"):
        model = agent_server(chat_server, method)
    else:
        model, chat_server.script = "test-model", thinking_model
    extra = {"examples": str(examples_file(tmp_path))} if method == "query2doc" else {}
    live = evaluate(method, "bm25", llm=f"{chat_server.url}#{model}", tasks="Biology", data_dir=data_dir,
                    output="live", **extra)
    live_run = read_ranking(results_folder(live) / "R2MEDBiologyRetrieval.trec")
    (exported,) = r2med.export_generations(results_folder(live), data_dir, llm="my-llm")
    target = data_dir / "Biology" / method / "my-llm" / "query_with_hydoc.jsonl"
    assert exported.path == target and exported.status == "written" and exported.queries == len(QUERIES)
    rows = read_jsonl(target)
    records = read_jsonl(results_folder(live) / "R2MEDBiologyRetrieval.generations.jsonl")
    relevant = {}
    for j in QRELS:
        relevant.setdefault(j["q_id"], []).append(j["p_id"])
    assert [r["id"] for r in rows] == [q["id"] for q in QUERIES]
    for row, record, query in zip(rows, records, QUERIES):  # R2MED's four fields, and the run's answer
        assert (row["text"], row["hy_doc"], row["doc_id"]) == (query["text"], record["output"], relevant[query["id"]])
        assert (row["answer"], row["r1_mode"]) == (record["answer"], record["r1_mode"])
    asked = chat_server.count
    replay = evaluate(method, "bm25", source="my-llm", tasks="Biology", data_dir=data_dir, output="replay")
    assert chat_server.count == asked  # not one LLM request
    assert read_ranking(results_folder(replay) / "R2MEDBiologyRetrieval.trec") == live_run
    assert replay["Biology"].ndcg_at_10 == live["Biology"].ndcg_at_10
    replayed = read_jsonl(results_folder(replay) / "R2MEDBiologyRetrieval.generations.jsonl")  # what r2med show opens
    assert [(r["query_id"], r["stage"], r["component"], r["generated"], r.get("r1_mode", False)) for r in replayed] == \
        [(r["query_id"], "rewriter", method, [r["answer"]], r["r1_mode"]) for r in records]
    assert not any("samples" in r for r in replayed)  # no LLM answered: nothing to export again
    with pytest.raises(r2med.UserError, match="no LLM generations"):
        r2med.export_generations(results_folder(replay), tmp_path / "again")


def test_an_export_never_changes_what_is_there(run_cli, evaluate, chat_server, data_dir, tmp_path):
    chat_server.script = thinking_model
    folder = results_folder(evaluate("hyde", "bm25", llm=f"{chat_server.url}#test-model", tasks="Biology",
                                     data_dir=data_dir))
    code, out, err = run_cli("export-generations", folder, data_dir, "--json")
    assert code == 0, err
    (done,) = json.loads(out)
    target = data_dir / "Biology" / "hyde" / "test-model" / "query_with_hydoc.jsonl"  # the served model's name
    assert Path(done["path"]) == target and done["status"] == "written"
    assert "-o hyde.source=test-model" in done["replay"] and f"--data-dir {data_dir}" in done["replay"]
    code, out, _ = run_cli("export-generations", folder, data_dir, "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "unchanged"
    target.write_text("someone else's generations\n")
    code, _, err = run_cli("export-generations", folder, data_dir)
    assert code == 2 and str(target) in err and "--llm" in err and "Traceback" not in err
    assert target.read_text() == "someone else's generations\n"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (data_dir / "Biology" / "lamer").symlink_to(outside)  # a link out of the data folder is never written through
    shutil.copytree(data_dir / "Biology" / "hyde", tmp_path / "keep")
    records = folder / "R2MEDBiologyRetrieval.generations.jsonl"
    records.write_text(records.read_text().replace('"method": "hyde"', '"method": "lamer"'))
    code, _, err = run_cli("export-generations", folder, data_dir, "--llm", "other")
    assert code == 2 and "outside" in err and not any(outside.iterdir())
    # data the run was not run on: a replay there would not be the run
    other = tmp_path / "other-data"
    shutil.copytree(data_dir / "Bioinformatics", other / "Biology")
    code, _, err = run_cli("export-generations", folder, other)
    assert code == 2 and "not the data" in err and not (other / "Biology" / "lamer").exists()


def test_export_refuses_a_folder_without_generations(run_cli, tmp_path):
    from conftest import finished_sample_run

    folder = finished_sample_run(tmp_path / "out")
    code, _, err = run_cli("export-generations", folder, tmp_path / "data")
    assert code == 2 and "no LLM generations" in err and not (tmp_path / "data").exists()
    code, _, err = run_cli("export-generations", tmp_path, tmp_path / "data")
    assert code == 2 and "not a results folder" in err


# -- reasoning returned apart ----------------------------------------------------------------------
@pytest.mark.parametrize("parser, field", [("deepseek_r1", "reasoning_content"), ("deepseek_r1", "reasoning"),
                                           ("qwen3", "reasoning_content")])
def test_a_server_that_splits_the_thinking_gives_the_same_hyde_run(evaluate, chat_server, parser, field):
    chat_server.script = thinking_model
    plain = evaluate("hyde", "bm25", llm=f"{chat_server.url}#test-model", output="plain", cache_dir="c1")
    chat_server.reasoning_parser, chat_server.reasoning_field = parser, field
    split = evaluate("hyde", "bm25", llm=f"{chat_server.url}#test-model", output="split", cache_dir="c2")
    first, second = (results_folder(r) for r in (plain, split))
    assert read_ranking(first / f"{TASK}.trec") == read_ranking(second / f"{TASK}.trec")
    plain_records = read_jsonl(first / f"{TASK}.generations.jsonl")
    split_records = read_jsonl(second / f"{TASK}.generations.jsonl")
    thoughts = 0
    for a, b in zip(plain_records, split_records):
        assert (a["answer"], a["r1_mode"], a["output"]) == (b["answer"], b["r1_mode"], b["output"])
        reasoning, _ = split_reasoning(parser, a["output"])
        if reasoning:
            thoughts += 1
            assert b["samples"][0]["reasoning"] == reasoning and "<think>" not in b["samples"][0]["text"]
        else:
            assert "reasoning" not in b["samples"][0]
    assert thoughts > 0 if parser == "deepseek_r1" or any("<think>" in r["output"] for r in plain_records) else True


@pytest.mark.parametrize("method", ["search-o1", "search-r1"])
def test_agents_over_a_server_that_splits_the_thinking(evaluate, chat_server, method):
    model = agent_server(chat_server, method)
    plain = evaluate(method, "bm25", llm=f"{chat_server.url}#{model}", output="plain", cache_dir="c1")
    plain_bodies = [r.body for r in chat_server.requests]
    chat_server.reasoning_parser = "deepseek_r1"  # the unclosed thought, search tags and all, comes apart
    split = evaluate(method, "bm25", llm=f"{chat_server.url}#{model}", output="split", cache_dir="c2")
    split_replies = chat_server.requests[len(plain_bodies):]
    assert sorted(map(canonical, (r.body for r in split_replies))) == sorted(map(canonical, plain_bodies))
    first, second = (results_folder(r) for r in (plain, split))
    assert read_ranking(first / f"{TASK}.trec") == read_ranking(second / f"{TASK}.trec")
    trajectories = [read_jsonl(f / f"{TASK}.trajectories.jsonl") for f in (first, second)]
    assert [t["output"] for t in trajectories[0]] == [t["output"] for t in trajectories[1]]
    records = read_jsonl(second / f"{TASK}.generations.jsonl")
    assert any(s.get("reasoning") for r in records for s in r["samples"])
    assert [r["output"] for r in records] == [t["output"] for t in trajectories[1]]


# -- LLM rerankers ---------------------------------------------------------------------------------
def reversing_ranker(context, partial):
    """A listwise ranker that reverses every window (RankGPT's messages: one user turn per passage),
    its thought before the ranking."""
    passages = sum(1 for m in context if m["role"] == "user" and m["content"].startswith("["))
    return "<think>The last ones fit best.</think>\n" + " > ".join(f"[{i}]" for i in range(passages, 0, -1))


def test_an_llm_reranker_keeps_each_querys_windows(evaluate, chat_server, tmp_path):
    # HyDE's requests (no passages) get a document, the reranker's windows a ranking
    chat_server.script = lambda context, partial: reversing_ranker(context, partial).rstrip("\n") + \
        ("" if any(m["content"].startswith("[") for m in context) else "A passage.")
    outcome = evaluate("hyde", "bm25", "llm-rerank", llm=f"{chat_server.url}#test-model",
                       **{"llm-rerank.window": 4, "llm-rerank.step": 2, "llm-rerank.rerank_k": 6})
    folder = results_folder(outcome)
    records = read_jsonl(folder / f"{TASK}.generations.jsonl")
    ids = [q["id"] for q in QUERIES]
    assert [(r["stage"], r["query_id"]) for r in records] == [("rewriter", q) for q in ids] + \
        [("reranker", q) for q in ids]
    ranking = read_ranking(folder / f"{TASK}.trec")
    (first,) = [p.parent for p in (tmp_path / "out").rglob(f"{TASK}.trec") if p.parent != folder]
    first_stage = read_ranking(first / f"{TASK}.trec")
    for record in records[len(ids):]:
        assert record["component"] == "llm-rerank" and record["query"] in {q["text"] for q in QUERIES}
        assert len(record["samples"]) == 2 and all(s["text"].endswith("[1]") for s in record["samples"])
        t = [d for d, _ in first_stage[record["query_id"]][:6]]  # windows [2, 6) then [0, 4), each reversed
        assert record["answer"] == [t[4], t[5], t[1], t[0], t[3], t[2]]
        assert record["answer"] == [d for d, _ in ranking[record["query_id"]]]
    assert read_jsonl(first / f"{TASK}.generations.jsonl") == records[:len(ids)]  # the first stage's own


@pytest.mark.parametrize("ranker", [reversing_ranker, lambda c, p: reversing_ranker(c, p).split("\n", 1)[1]])
def test_an_llm_reranker_over_a_server_that_splits_the_thinking(evaluate, chat_server, ranker):
    """The ranking after the thought, or (a thought never closed: deepseek_r1 puts it all apart) the whole."""
    chat_server.script = ranker
    plain = evaluate("bm25", "llm-rerank", llm=f"{chat_server.url}#test-model", output="plain", cache_dir="c1",
                     **{"llm-rerank.rerank_k": 6, "llm-rerank.window": 4, "llm-rerank.step": 2})
    chat_server.reasoning_parser = "deepseek_r1"
    split = evaluate("bm25", "llm-rerank", llm=f"{chat_server.url}#test-model", output="split", cache_dir="c2",
                     **{"llm-rerank.rerank_k": 6, "llm-rerank.window": 4, "llm-rerank.step": 2})
    first, second = (results_folder(r) for r in (plain, split))
    assert read_ranking(first / f"{TASK}.trec") == read_ranking(second / f"{TASK}.trec")
    assert plain["sample"].ndcg_at_10 == split["sample"].ndcg_at_10
    samples = [s for r in read_jsonl(second / f"{TASK}.generations.jsonl") for s in r["samples"]]
    assert all(s["reasoning"] for s in samples)
