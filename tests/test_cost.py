"""Cost and latency per task: LLM usage counted against what a local server reported, cache hits
apart and free, reasoning tokens, dollars at the shipped price table or ``-o price=``, seconds per
stage, and the cost file, recorded once and never part of a run's identity."""

import json
from pathlib import Path

import pytest

from conftest import SAMPLE, make_data_dir, read_jsonl

STAGES = {"rewrite", "index", "search", "rerank", "score"}
TASKS = {"R2MEDBiologyRetrieval": "Stack-Biology", "R2MEDBioinformaticsRetrieval": "Stack-Bioinformatics"}
PRICES = json.loads((Path(__file__).parent.parent / "r2med_tasks" / "data" / "prices" / "prices.json").read_text())["models"]


@pytest.fixture
def two_tasks(tmp_path) -> Path:
    return make_data_dir(tmp_path / "data")  # Biology (10 queries), Bioinformatics (6), ...


def run(evaluate, server, data, *rest, model="test-model", tasks=("Biology", "Bioinformatics"), **options):
    """HyDE live through the local server, then BM25 (and the components ``rest``), through the
    Python API: results under ``out``, caches under ``cache``."""
    return evaluate("hyde", "bm25", *rest, llm=f"{server.url}#{model}", tasks=list(tasks), data_dir=data, **options)


def folder_of(summary) -> Path:
    """The one results folder of a RunOutcome or a --json summary."""
    (folder,) = summary["results_dirs"] if isinstance(summary, dict) else summary.results_dirs
    return Path(folder)


def cost_of(summary, task) -> dict:
    """The task's cost file, as written."""
    return json.loads((folder_of(summary) / "r2med" / f"{task}.cost.json").read_text())


def reported(server, key: str, queries) -> list[dict]:
    """The usage the server reported for the HyDE requests of one task (``key``: its prompts' dataset key)."""
    from r2med_plugins.gar.prompts import build_messages

    prompts = [build_messages("hyde", key, q["text"]) for q in queries]
    return [usage for body, usage in server.reported if body["messages"] in prompts]


def summed(usages: list[dict], name: str) -> int:
    return sum(u[name] for u in usages)


def test_usage_per_task_is_what_the_server_reported(evaluate, chat_server, two_tasks):
    summary = run(evaluate, chat_server, two_tasks)
    assert chat_server.count == 16  # 10 + 6 queries, one request each
    for task, key in TASKS.items():
        queries = read_jsonl(two_tasks / ("Biology" if "Biology" in task else "Bioinformatics") / "query.jsonl")
        usages = reported(chat_server, key, queries)
        assert len(usages) == len(queries)
        assert cost_of(summary, task)["usage"] == {
            "requests": len(queries), "cached": 0, "prompt_tokens": summed(usages, "prompt_tokens"),
            "completion_tokens": summed(usages, "completion_tokens"), "reasoning_tokens": 0,
            "usd": None}  # test-model has no price


def test_json_and_summary_report_each_task_and_the_totals(run_cli, tmp_path, chat_server, two_tasks):
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={chat_server.url}#test-model", "-o", "price=2,8",
                             "--plugin", "bm25", "--tasks", "Biology,Bioinformatics", "--data-dir", two_tasks,
                             "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json")
    assert code == 0, err
    summary = json.loads(out)
    for t in summary["tasks"]:
        recorded = cost_of(summary, t["task"])
        assert t["usage"] == recorded["usage"] and t["seconds"] == recorded["seconds"]
    tokens = sum(u["prompt_tokens"] for _, u in chat_server.reported), \
        sum(u["completion_tokens"] for _, u in chat_server.reported)
    code, out, _ = run_cli("run", "--plugin", "hyde", "-o", f"llm={chat_server.url}#test-model", "-o", "price=2,8",
                           "--plugin", "bm25", "--tasks", "Biology,Bioinformatics", "--data-dir", two_tasks,
                           "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache")
    assert code == 0
    line = " ".join(next(line for line in out.splitlines() if line.startswith("Total:")).split())
    usd = (tokens[0] * 2 + tokens[1] * 8) / 1e6
    assert f"16 LLM requests, {tokens[0]:,} prompt + {tokens[1]:,} completion tokens, ${usd:.4f}" in line
    assert " s (rewrite " in line and "index" in line and "search" in line and "score" in line


def test_cache_hits_cost_nothing(evaluate, chat_server, two_tasks):
    first = run(evaluate, chat_server, two_tasks, price=(3, 12), tasks=["Biology"])
    assert cost_of(first, "R2MEDBiologyRetrieval")["usage"]["usd"] > 0
    again = run(evaluate, chat_server, two_tasks, price=(3, 12), overwrite=True, tasks=["Biology"])
    assert chat_server.count == 10  # nothing sent again
    assert cost_of(again, "R2MEDBiologyRetrieval")["usage"] == {
        "requests": 0, "cached": 10, "prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0, "usd": 0.0}


def test_a_task_half_in_the_cache_pays_for_the_rest(evaluate, tmp_path, chat_server, two_tasks):
    """Bioinformatics' prompts are Biology's with another dataset key: none is a cache hit; a second
    Biology (another data folder, the same queries) is all hits, beside its own new ones."""
    run(evaluate, chat_server, two_tasks, tasks=["Biology"])
    sent = chat_server.count
    more = tmp_path / "more"
    make_data_dir(more)
    queries = read_jsonl(SAMPLE / "query.jsonl")
    extra = [{**q, "id": f"x{q['id']}", "text": q["text"] + " (again)"} for q in queries[:3]]
    (more / "Biology" / "query.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries + extra))
    qrels = read_jsonl(more / "Biology" / "qrels.jsonl")
    (more / "Biology" / "qrels.jsonl").write_text("".join(
        json.dumps(r) + "\n" for r in qrels + [{**r, "q_id": f"x{r['q_id']}"} for r in qrels
                                                if r["q_id"] in {q["id"] for q in queries[:3]}]))
    summary = run(evaluate, chat_server, more, price=(1, 1), tasks=["Biology"])
    new = [u for _, u in chat_server.reported[sent:]]
    assert chat_server.count - sent == 3 == len(new)
    assert cost_of(summary, "R2MEDBiologyRetrieval")["usage"] == {
        "requests": 3, "cached": 10, "prompt_tokens": summed(new, "prompt_tokens"),
        "completion_tokens": summed(new, "completion_tokens"), "reasoning_tokens": 0,
        "usd": pytest.approx((summed(new, "prompt_tokens") + summed(new, "completion_tokens")) / 1e6)}


def test_reasoning_tokens_when_the_server_reports_them(evaluate, chat_server, two_tasks):
    chat_server.reasoning_tokens = lambda body: len(body["messages"][-1]["content"]) % 7 + 1
    summary = run(evaluate, chat_server, two_tasks, tasks=["Biology"])
    reasoning = [u["completion_tokens_details"]["reasoning_tokens"] for _, u in chat_server.reported]
    assert len(reasoning) == 10 and sum(reasoning) > 10
    assert cost_of(summary, "R2MEDBiologyRetrieval")["usage"]["reasoning_tokens"] == sum(reasoning)


def test_reasoning_tokens_are_read_from_the_answer():
    from r2med_tasks.llm.answers import parse_chat_completion

    def answer(usage):
        return json.dumps({"model": "m", "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
                           "usage": usage}).encode()

    openai = {"prompt_tokens": 5, "completion_tokens": 40, "completion_tokens_details": {"reasoning_tokens": 32}}
    assert parse_chat_completion(answer(openai), "m").reasoning_tokens == 32
    for usage in ({"prompt_tokens": 5, "completion_tokens": 4}, {"completion_tokens_details": None},
                  {"completion_tokens_details": {"reasoning_tokens": -3}}):
        assert parse_chat_completion(answer(usage), "m").reasoning_tokens == 0  # not reported: none counted


@pytest.mark.parametrize("model, price, expected", [
    ("o3-mini", {}, (PRICES["o3-mini"]["input"], PRICES["o3-mini"]["output"])),  # the shipped table
    ("o3-mini", {"price": (0.5, 2)}, (0.5, 2.0)),  # the option overrides it
    ("some-local-model", {"price": (0.25, 1.5)}, (0.25, 1.5)),  # and prices a model it lacks
    ("some-local-model", {}, None),  # unknown: no dollars
])
def test_dollars_at_the_table_or_the_price_option(evaluate, chat_server, two_tasks, model, price, expected):
    chat_server.serve(model, model)
    summary = run(evaluate, chat_server, two_tasks, model=model, tasks=["Biology"], **price)
    usages = [u for _, u in chat_server.reported]
    usd = cost_of(summary, "R2MEDBiologyRetrieval")["usage"]["usd"]
    if expected is None:
        assert usd is None
    else:
        assert usd == pytest.approx((summed(usages, "prompt_tokens") * expected[0]
                                     + summed(usages, "completion_tokens") * expected[1]) / 1e6)


def test_every_component_that_calls_an_llm_takes_a_price_that_never_identifies_results(plugins):
    from r2med_tasks.running.registry import build_registry

    registry = build_registry(plugins)
    specs = [e.spec for kind in ("rewriter", "reranker", "retriever") for e in registry.entries[kind]
             if "llm" in e.spec.options.model_fields]
    assert {s.name for s in specs} >= {"hyde", "query2doc", "lamer", "search-o1", "search-r1", "llm-rerank"}
    for spec in specs:
        assert "price" in spec.options.model_fields and not spec.identifies_results("price"), spec.name
        assert spec.parse("price", "2.5,10") == (2.5, 10.0)
    from r2med_tasks.errors import UserError

    for bad in ("2.5", "-1,2", "a,b"):
        with pytest.raises(UserError, match="price"):
            specs[0].parse("price", bad)


def test_seconds_for_the_stages_that_ran(evaluate, chat_server, two_tasks):
    folder = folder_of(evaluate("bm25", tasks="Biology", data_dir=two_tasks, output="bm25"))
    cost = json.loads((folder / "r2med" / "R2MEDBiologyRetrieval.cost.json").read_text())
    assert cost["usage"] is None  # no component called an LLM
    assert set(cost["seconds"]) == {"index", "search", "score"} and all(s >= 0 for s in cost["seconds"].values())
    summary = run(evaluate, chat_server, two_tasks, "llm-rerank", rerank_k=3, tasks=["Biology"],
                  options={"llm-rerank.llm": f"{chat_server.url}#test-model"})
    cost = cost_of(summary, "R2MEDBiologyRetrieval")
    assert set(cost["seconds"]) == STAGES and all(s >= 0 for s in cost["seconds"].values())


def test_a_reused_first_stage_counts_as_recorded(evaluate, chat_server, two_tasks):
    """A reranker's task costs its first stage too: measured, or as its saved run recorded it."""
    first = run(evaluate, chat_server, two_tasks, price=(1, 2), tasks=["Biology"])
    recorded = cost_of(first, "R2MEDBiologyRetrieval")
    sent = chat_server.count
    summary = run(evaluate, chat_server, two_tasks, "llm-rerank", price=(1, 2), rerank_k=3, tasks=["Biology"],
                  options={"llm-rerank.llm": f"{chat_server.url}#test-model", "llm-rerank.price": (1, 2)})
    reranking = [u for _, u in chat_server.reported[sent:]]
    assert reranking and chat_server.count - sent == len(reranking)  # the rewriter sent nothing
    cost = cost_of(summary, "R2MEDBiologyRetrieval")
    tokens = summed(reranking, "prompt_tokens"), summed(reranking, "completion_tokens")
    assert cost["usage"] == {
        "requests": recorded["usage"]["requests"] + len(reranking), "cached": 0,
        "prompt_tokens": recorded["usage"]["prompt_tokens"] + tokens[0],
        "completion_tokens": recorded["usage"]["completion_tokens"] + tokens[1], "reasoning_tokens": 0,
        "usd": pytest.approx(recorded["usage"]["usd"] + (tokens[0] + 2 * tokens[1]) / 1e6)}
    assert set(cost["seconds"]) == STAGES
    for stage in ("rewrite", "index", "search"):
        assert cost["seconds"][stage] == recorded["seconds"][stage]


def test_a_rerun_with_another_price_or_after_a_slower_run_reuses_every_task(evaluate, chat_server, two_tasks):
    chat_server.delay = 0.02  # a slower machine
    first = run(evaluate, chat_server, two_tasks, price=(1, 2))
    folder = folder_of(first)
    files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "lock"}
    chat_server.delay = 0
    again = run(evaluate, chat_server, two_tasks, price=(9, 99))
    assert chat_server.count == 16
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "lock"} == files
    assert folder_of(again) == folder and [t.status for t in again.values()] == ["cached", "cached"]
    for t in again.values():  # what was recorded when they were computed, at the first price
        assert t.usage == cost_of(first, t.task)["usage"] and t.seconds == cost_of(first, t.task)["seconds"]
        usages = reported(chat_server, TASKS[t.task], read_jsonl(
            two_tasks / ("Biology" if "Biology" in t.task else "Bioinformatics") / "query.jsonl"))
        assert t.usage["usd"] == pytest.approx((summed(usages, "prompt_tokens") + 2 * summed(usages, "completion_tokens")) / 1e6)


def test_the_cost_file(evaluate, chat_server, two_tasks):
    """Beside the identity, listed in the task's manifest (written with its files as one), not a
    TaskResult to anyone who reads ``<Task>.json`` files, and read back only when it is the one
    written with them."""
    from r2med_tasks.results.folder import ResultsFolder

    folder = ResultsFolder(folder_of(run(evaluate, chat_server, two_tasks, price=(1, 2), tasks=["Biology"])))
    task = "R2MEDBiologyRetrieval"
    path = folder.cost_file(task)
    assert path == folder.path / "r2med" / f"{task}.cost.json"
    written = json.loads(path.read_text())
    assert list(written) == ["seconds", "usage"]
    assert list(written["usage"]) == ["requests", "cached", "prompt_tokens", "completion_tokens", "reasoning_tokens",
                                      "usd"]
    assert folder.cost(task) == written
    assert f"r2med/{task}.cost.json" in json.loads(folder.manifest_file(task).read_text())
    assert folder.task_names() == [task]
    identity = folder.identity_file(task).read_text()
    assert "price" not in identity and "seconds" not in identity
    path.write_text(json.dumps({**written, "usage": None}))  # edited: not the one written with the result
    assert folder.cost(task) is None


def test_a_plugin_reports_usage_through_the_documented_contract(evaluate, chat_server, docs_agent_plugin):
    """docs/writing-plugins.md's agent (a ``usage`` attribute, ``-o price=``): its task's cost is what
    the server reported for its requests."""
    summary = evaluate("ask-search-answer", "bm25", llm=f"{chat_server.url}#m", price=(4, 16))
    usages = [u for _, u in chat_server.reported]
    assert len(usages) == chat_server.count == 20  # a search query and an answer per query
    assert summary["sample"].usage == {
        "requests": 20, "cached": 0, "prompt_tokens": summed(usages, "prompt_tokens"),
        "completion_tokens": summed(usages, "completion_tokens"), "reasoning_tokens": 0,
        "usd": pytest.approx((4 * summed(usages, "prompt_tokens") + 16 * summed(usages, "completion_tokens")) / 1e6)}


def test_usage_counts_every_answer_of_concurrent_callers():
    """Agents tally turns from many threads into one Usage."""
    import threading

    from r2med_tasks.llm.answers import Generation
    from r2med_tasks.llm.usage import Usage

    usage = Usage(price=(1.0, 1.0))
    answer = Generation("x", 3, 2, "stop", "m", reasoning_tokens=1)

    def work():
        for _ in range(2000):
            usage.add(answer)
            usage.add_cached(1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert usage.to_json() == {"requests": 16000, "cached": 16000, "prompt_tokens": 48000, "completion_tokens": 32000,
                               "reasoning_tokens": 16000, "usd": pytest.approx(0.08)}


def test_leaderboard_rows_carry_cost_and_seconds_per_query(evaluate, tmp_path, chat_server, two_tasks):
    import r2med_tasks as r2med
    from conftest import board_rows

    summary = run(evaluate, chat_server, two_tasks, price=(2, 8))
    evaluate("bm25", tasks=["Biology", "Bioinformatics"], data_dir=two_tasks)
    board, warnings = board_rows(tmp_path / "out")
    rows = {r.rewriter: r for r in board}
    assert len(rows) == 2 and warnings == []
    hyde = next(r for name, r in rows.items() if name != "-")  # labelled by its LLM
    usd = sum(u["prompt_tokens"] * 2 + u["completion_tokens"] * 8 for _, u in chat_server.reported) / 1e6
    seconds = sum(sum(cost_of(summary, t)["seconds"].values()) for t in TASKS)
    assert hyde.usd_per_query == pytest.approx(usd / 16, rel=1e-9)  # 10 + 6 queries
    assert hyde.seconds_per_query == pytest.approx(seconds / 16, rel=1e-9)
    bm25 = rows["-"]
    assert bm25.usd_per_query == 0.0 and bm25.seconds_per_query > 0
    records = r2med.rank_systems(tmp_path / "out", published="none", include_local=True,
                                 tasks="Biology,Bioinformatics").records()  # the --format json rows show them
    shown = {r["rewriter"]: (r["usd_per_query"], r["seconds_per_query"]) for r in records}
    assert shown == {name: (r.usd_per_query, r.seconds_per_query) for name, r in rows.items()}


def test_loading_a_model_is_its_own_stage(run_cli, evaluate, tmp_path, small_model_path):
    """A dense run: loading the weights is timed as "load", taken out of the stage it happened in
    (indexing here: the first encoding); a warm rerun (embeddings cached) loads nothing."""
    outcome = evaluate("st", model=str(small_model_path), output="st")
    folder = folder_of(outcome)
    seconds = json.loads((folder / "r2med" / "R2MEDSampleRetrieval.cost.json").read_text())["seconds"]
    phases = json.loads((folder / "R2MEDSampleRetrieval.json").read_text())["evaluation_phases"]
    (load,) = [p for p in phases if p["name"] == "Loading model"]  # once: the weights stay loaded
    (corpus,) = [p for p in phases if p["name"] == "Encoding corpus"]
    assert corpus["start"] <= load["start"] <= load["end"] <= corpus["end"]
    assert seconds["load"] == pytest.approx(load["end"] - load["start"], abs=2e-3)
    assert seconds["index"] == pytest.approx((corpus["end"] - corpus["start"]) - seconds["load"], abs=2e-3)
    code, out, err = run_cli("run", "--plugin", "st", "-o", f"model={small_model_path}", "--tasks", "sample",
                             "--output", tmp_path / "again", "--cache-dir", tmp_path / "cache")
    assert code == 0, err
    total = next(line for line in (out + err).splitlines() if line.startswith("Total:"))
    assert "load" not in total  # the embeddings of the corpus and the queries were cached: no model loaded
