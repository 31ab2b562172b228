"""InsertRank (``insertrank``, arXiv 2506.14086): llm-rerank's listwise reranking with each passage's
first-stage BM25 score in the prompt, through the runner against the local chat server, and its
paper row.

The expected prompts are castorini/rank_llm's ``insert_rank_template.yaml`` (its block scalars as YAML
resolves them, typed here) rendered as its ``SingleTurnListwiseInferenceHandler`` renders them, from the
candidates themselves (the first stage's run file and the sample corpus), not from the reranker's code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl, read_ranking

TASK = "R2MEDSampleRetrieval"
ROW = "BM25 + InsertRank(DeepSeek-R1) (InsertRank paper)"
COMMAND = "r2med-run --plugin bm25 --plugin insertrank -o llm=vllm:deepseek-ai/DeepSeek-R1"

# insert_rank_template.yaml: system_message, prefix (|), body (|), suffix (|-)
SYSTEM = "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query"
PREFIX = """I will provide you with {num} passages, each indicated by a numerical identifier []. I will also provide the BM25 scores from a lexical retrieval system.

Rank the passages based on their relevance to the search query: {query}.
"""
BODY = """[{rank}] {candidate}
BM25 score for passge [{rank}]: {score}
"""
SUFFIX = """Search Query: {query}.
Rerank the above {num} passages based on their relevance to the query. Consider both the document content and the BM25 scores as signals for relevance. All the passages should be included and listed using identifiers, in descending order of relevance. The output format should be [] > [], e.g., [2] > [1]. Return the ranking as a list of numbers from 1 to {num}, most relevant first. Answer concisely and directly and only respond with the ranking results, do not say any word or explain."""


def expected_messages(query: str, window: list[tuple[str, str, float]], words: int) -> list[dict]:
    """rank_llm's generate_prompt for one window: "[N]" in the query and passages as "(N)", each
    passage's first ``words`` words, its score as ``f"{score:.3f}"``."""
    query = re.sub(r"\[(\d+)\]", r"(\1)", query)
    body = ""
    for rank, (_, text, score) in enumerate(window, 1):
        content = re.sub(r"\[(\d+)\]", r"(\1)", " ".join(text.strip().split()[:words]))
        body += BODY.format(rank=rank, candidate=content, score=f"{score:.3f}")
    user = PREFIX.format(num=len(window), query=query) + body + SUFFIX.format(num=len(window), query=query)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def reverse_with_a_decoy(messages: list[dict], partial: str = "") -> str:
    """A reasoning model's answer: thinking that names the identifiers in their given order (a decoy),
    then the window in reverse order."""
    n = int(re.search(r"provide you with (\d+) passages", messages[1]["content"]).group(1))
    decoy = " > ".join(f"[{i}]" for i in range(1, n + 1))
    return f"<think>By BM25 alone it would be {decoy}, but the content says otherwise.</think>\n" + \
        " > ".join(f"[{i}]" for i in range(n, 0, -1))


def run_windows(items: list, windows: list[tuple[int, int]]) -> tuple[list, list[list]]:
    """Each window reversed in turn, as the scripted LLM answers; the final list and each window's
    items as they were shown."""
    items, shown = list(items), []
    for start, end in windows:
        shown.append(items[start:end])
        items[start:end] = items[start:end][::-1]
    return items, shown


@pytest.fixture
def sample():
    return ({d["id"]: d["text"] for d in read_jsonl(SAMPLE / "corpus.jsonl")},
            {q["id"]: q["text"] for q in read_jsonl(SAMPLE / "query.jsonl")})


def first_stage(tmp_path: Path) -> dict[str, list[tuple[str, float]]]:
    return read_ranking(next((tmp_path / "out" / "local-data" / "r2med__bm25").glob("*")) / f"{TASK}.trec")


def test_prompts_windows_and_order_through_the_runner(evaluate, chat_server, tmp_path, sample):
    """Top 7 of BM25, windows of 4 sliding by 2 from the bottom up: each request is rank_llm's
    InsertRank template with each passage's own BM25 score (3 decimals) after its cut text, the
    scores moving with their passages from window to window; the run is the order the answers
    (after their </think>) gave; a rerun sends nothing."""
    corpus, queries = sample
    chat_server.script = reverse_with_a_decoy
    options = {"llm": f"{chat_server.url}#ranker", "rerank_k": 7, "window": 4, "step": 2, "passage_words": 8}
    results = evaluate("bm25", "insertrank", **options)
    first = first_stage(tmp_path)
    reranked = read_ranking(Path(results[TASK].results_dir) / f"{TASK}.trec")

    expected_requests = []
    for qid, docs in first.items():
        top = [(d, corpus[d], score) for d, score in docs[:7]]
        assert len(top) == 7  # every sample query has seven BM25 candidates: windows [3,7), [1,5), [0,4)
        final, shown = run_windows(top, [(3, 7), (1, 5), (0, 4)])
        expected_requests += [expected_messages(queries[qid], window, 8) for window in shown]
        assert [d for d, _ in reranked[qid]] == [d for d, _, _ in final]  # only the reranked top 7, as the LLM said
    sent = [r.body["messages"] for r in chat_server.requests]
    key = repr
    assert sorted(map(key, sent)) == sorted(map(key, expected_requests))  # rounds are concurrent: any order
    assert all(r.body["model"] == "ranker" and r.body["temperature"] == 0.0 for r in chat_server.requests)
    assert chat_server.count == 3 * len(first)

    again = evaluate("bm25", "insertrank", **options, overwrite=True)
    assert chat_server.count == 3 * len(first)  # every window answered from the cache
    assert read_ranking(Path(again[TASK].results_dir) / f"{TASK}.trec") == reranked


def test_the_defaults_are_rank_llms(plugins):
    """Top 100, windows of 20 by 10, 300 words (rank_llm's defaults); scores with 3 decimals, called BM25."""
    from r2med_tasks.running.registry import build_registry

    spec = build_registry(plugins).component("insertrank").spec
    defaults = spec.defaults
    assert {k: defaults[k] for k in ("rerank_k", "window", "step", "passage_words", "score_name",
                                     "score_decimals", "temperature")} == {
        "rerank_k": 100, "window": 20, "step": 10, "passage_words": 300, "score_name": "BM25",
        "score_decimals": 3, "temperature": 0.0}
    assert "reasoning" not in defaults  # rank_llm's template is the prompt
    assert spec.reference == "https://arxiv.org/abs/2506.14086"


@pytest.mark.parametrize("score, shown", [(17.0, "17.000"), (3.14159, "3.142"), (9.9996, "10.000"), (0.0, "0.000"),
                                          (-0.0001, "-0.000"), (-2.5, "-2.500"), (123456.789, "123456.789")])
def test_scores_are_written_as_rank_llm_writes_them(plugins, score, shown):
    """f"{score:.3f}", as rank_llm's handler; another name and rounding as options."""
    from r2med_tasks.running.registry import build_registry

    spec = build_registry(plugins).component("insertrank").spec
    assert spec.create({"llm": "vllm:m"}).passage("d1", "text", score) == ("d1", "text", shown)
    other = spec.create({"llm": "vllm:m", "score_decimals": 0, "score_name": "Dense"})
    assert other.passage("d1", "text", 17.6) == ("d1", "text", "18")
    user = other.prompt()("q", ["one"], 300, annotations=["18"])[1]["content"]
    assert "the Dense scores from a lexical retrieval system" in user and "Dense score for passge [1]: 18\n" in user
    assert "the document content and the Dense scores" in user and "BM25" not in user


def test_it_needs_an_llm(plugins):
    from r2med_tasks.errors import UserError
    from r2med_tasks.running.registry import build_registry

    with pytest.raises(UserError, match="reranker 'insertrank' needs -o llm="):
        build_registry(plugins).component("insertrank").spec.create({})


# -- the listwise hook, without a server ---------------------------------------------------------
class FakeClient:
    """Answers each window with ``answer(texts)``; records the requests."""

    def __init__(self, answer, reasoning=None):
        self.model, self.params, self.answer, self.reasoning, self.sent = "fake", {"temperature": 0.0}, answer, \
            reasoning, []

    def generate(self, requests, *, on_result=None, usage=None):
        from dataclasses import fields

        from r2med_tasks.llm.answers import Generation

        out = []
        for i, messages in enumerate(requests):
            self.sent.append(messages)
            extra = {"reasoning": self.reasoning} if self.reasoning is not None else {}
            if extra and "reasoning" not in {f.name for f in fields(Generation)}:
                pytest.skip("this client keeps a reasoning model's thinking in the text")
            g = Generation(self.answer(messages), 10, 5, "stop", self.model, **extra)
            if on_result is not None:
                on_result(i, g)
            out.append(g)
        return out


def test_reasoning_returned_apart_is_never_read(plugins, tmp_path):
    """A server that returns the thinking apart (DeepSeek's API, vLLM's reasoning parser): the
    ranking comes from the answer, not from the reasoning's identifiers; "[N]" in the query and
    passages sent as "(N)"."""
    from r2med_tasks.llm.cache import CachedClient, GenerationCache
    from r2med_tasks.llm.usage import Usage
    from r2med_tasks.running.registry import build_registry
    from r2med_plugins.rerank.listwise import ListwiseReranker

    insertrank = build_registry(plugins).component("insertrank").spec.create({"llm": "vllm:m"})
    client = FakeClient(lambda messages: "[3] > [1] > [2]", reasoning="[2] > [3] > [1] is what BM25 says")
    cached = CachedClient(client, GenerationCache(tmp_path / "c.jsonl"), Usage())
    passages = [("a", " Measles causes [3]  rash.", 3.0), ("b", "beta", 2.0), ("c", "gamma", 1.25)]
    out = ListwiseReranker(cached, prompt=insertrank.prompt()).rerank_one(
        "fever [2] rash?", [insertrank.passage(*p) for p in passages])
    assert out == ["c", "a", "b"]
    assert client.sent == [expected_messages("fever [2] rash?", passages, 300)]


def test_without_scores_llm_rerank_is_unchanged(tmp_path):
    """The hook adds nothing when unused: llm-rerank's request is RankGPT's exactly."""
    from r2med_tasks.llm.cache import CachedClient, GenerationCache
    from r2med_tasks.llm.usage import Usage
    from r2med_plugins.rerank.listwise import ListwiseReranker

    client = FakeClient(lambda messages: "[2] > [1]")
    cached = CachedClient(client, GenerationCache(tmp_path / "c.jsonl"), Usage())
    ListwiseReranker(cached).rerank_one("q?", [("a", "one"), ("b", "two")])
    assert client.sent[0][1]["content"] == ("I will provide you with 2 passages, each indicated by number identifier "
                                            "[]. \nRank the passages based on their relevance to query: q?.")
    assert [m["content"] for m in client.sent[0][3:7:2]] == ["[1] one", "[2] two"]


# -- the paper row -------------------------------------------------------------------------------
def board(commands: bool = False, **options):
    import r2med_tasks as r2med

    return r2med.rank_systems(statistics=not commands, **options).records(commands=commands)


def test_the_papers_r2med_figure_is_listed_with_its_command(run_cli, tmp_path, monkeypatch):
    """The abstract's 51.1 (DeepSeek-R1, nDCG@10 averaged over R2MED's eight datasets) is a row of
    kind "paper" under --published all, average only, with the command that runs it."""
    monkeypatch.chdir(tmp_path)
    assert ROW not in {r["system"] for r in board()}  # not a leaderboard row
    (row,) = [r for r in board(published="all") if r["system"] == ROW]
    assert row["kind"] == "paper" and row["average"] == 51.1
    assert row["provenance"][0].startswith("arXiv 2506.14086")
    commands = {r["system"]: r["command"] for r in board(published="all", commands=True)}
    assert commands[ROW] == COMMAND
    monkeypatch.setenv("COLUMNS", "120")  # wide enough that the name is one line
    code, out, _ = run_cli("leaderboard", "--published", "all", "--reranker", "insertrank")
    assert code == 0 and "InsertRank(DeepSeek-R1)" in out and "51.10" in out


def test_the_rows_figures_are_the_abstracts_only():
    from r2med_tasks.board.sources import published_rows
    from r2med_tasks.board.published import paper_runs

    (run,) = [r for r in paper_runs() if r["name"] == ROW]
    assert run["average"] == 51.1 and run["ndcg_at_10"] == {}  # no per-dataset figure is claimed
    assert run["reference"] == "https://arxiv.org/abs/2506.14086"
    row = next(r for r in published_rows(which="all") if r.system == ROW)
    assert row.scores == {} and row.average == 51.1 and not row.complete
    assert any("average only" in note for note in row.notes)


def test_its_command_dry_runs_to_the_rows_pipeline(plugins, tmp_path):
    from conftest import dry_run_plan

    plan = dry_run_plan(COMMAND, tmp_path)
    assert ROW == plan["pipeline"] + " (InsertRank paper)" and len(plan["tasks"]) == 8
    assert [s["component"] for s in plan["stages"]] == ["bm25", "insertrank"]
