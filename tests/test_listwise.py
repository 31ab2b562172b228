"""RankGPT-style sliding-window listwise reranking (r2med_plugins.rerank.listwise), offline: a fake
client that ranks by a key, and the local chat server scripted to answer rankings."""

from __future__ import annotations

import re
import time

import pytest
from chat_server import ChatServer, fake_answer

from r2med_tasks.llm import ChatClient
from r2med_tasks.llm.answers import Generation
from r2med_tasks.llm.cache import CachedClient, GenerationCache
from r2med_tasks.llm.usage import Usage
from r2med_plugins.rerank.listwise import (
    RANKGPT_SYSTEM,
    REASONRANK_SYSTEM,
    ListwiseReranker,
    answer_text,
    rankgpt_messages,
    reasonrank_messages,
    receive_permutation,
    sliding_windows,
)
from r2med_tasks.errors import UserError


# -- helpers -------------------------------------------------------------------------------------
def window_texts(messages: list[dict]) -> list[str]:
    """The passage texts of a window request, in prompt order (either prompt format)."""
    if messages[0]["content"] == RANKGPT_SYSTEM:
        return [m["content"].split(" ", 1)[1] if " " in m["content"] else ""
                for m in messages[3:-1:2]]
    body = messages[1]["content"]
    return re.findall(r"^\[\d+\] (.*)$", body, flags=re.M)


class FakeClient:
    """A ChatClient stand-in: answers each window with the order ``rank(texts)`` gives (0-based),
    formatted by ``fmt``; records every request it is sent."""

    def __init__(self, rank, fmt=lambda perm: " > ".join(f"[{i + 1}]" for i in perm), model="fake-ranker"):
        self.model = model
        self.params = {"temperature": 0.0}
        self.rank = rank
        self.fmt = fmt
        self.sent: list[list[dict]] = []

    def generate(self, requests, *, on_result=None, usage=None):
        out = []
        for i, messages in enumerate(requests):
            self.sent.append(messages)
            g = Generation(self.fmt(self.rank(window_texts(messages))), 10, 5, "stop", self.model)
            if usage is not None:
                usage.add(g)
            if on_result is not None:
                on_result(i, g)
            out.append(g)
        return out


def by_score(texts: list[str]) -> list[int]:
    """Highest "score N" first; ties keep their window order."""
    scores = [int(re.search(r"score (\d+)", t).group(1)) for t in texts]
    return sorted(range(len(texts)), key=lambda i: -scores[i])


def reverse(texts: list[str]) -> list[int]:
    return list(range(len(texts)))[::-1]


def simulate(items: list, windows: list[tuple[int, int]], rank) -> list:
    """An independent sliding window: each window's items reordered by ``rank`` of their texts."""
    items = list(items)
    for start, end in windows:
        chunk = items[start:end]
        items[start:end] = [chunk[i] for i in rank([t for _, t in chunk])]
    return items


@pytest.fixture
def cache(tmp_path):
    return GenerationCache(tmp_path / "listwise.jsonl")


def through(client, cache, usage=None) -> CachedClient:
    """``client`` as a reranker gets it from ``context.llm``: through ``cache``, tallied in ``usage``."""
    return CachedClient(client, cache, usage if usage is not None else Usage())


SCORES = [7, 3, 22, 15, 1, 9, 30, 12, 5, 18, 2, 27, 11, 6, 24, 14, 0, 19, 8, 26, 4, 13, 21, 10, 17]  # 25, distinct
PASSAGES = [(f"d{i:02d}", f"passage {i} score {s}") for i, s in enumerate(SCORES)]


# -- the request ---------------------------------------------------------------------------------
def test_rankgpt_window_messages_are_exact():
    messages = rankgpt_messages("what causes  anemia?", ["  Iron\n deficiency   is common. ", "B12 [1] too", ""])
    assert messages == [
        {"role": "system", "content": "You are RankGPT, an intelligent assistant that can rank passages based on "
                                      "their relevancy to the query."},
        {"role": "user", "content": "I will provide you with 3 passages, each indicated by number identifier []. \n"
                                    "Rank the passages based on their relevance to query: what causes  anemia?."},
        {"role": "assistant", "content": "Okay, please provide the passages."},
        {"role": "user", "content": "[1] Iron deficiency is common."},
        {"role": "assistant", "content": "Received passage [1]."},
        {"role": "user", "content": "[2] B12 [1] too"},
        {"role": "assistant", "content": "Received passage [2]."},
        {"role": "user", "content": "[3] "},
        {"role": "assistant", "content": "Received passage [3]."},
        {"role": "user", "content": "Search Query: what causes  anemia?. \nRank the 3 passages above based on their "
                                    "relevance to the search query. The passages should be listed in descending order "
                                    "using identifiers. The most relevant passages should be listed first. The output "
                                    "format should be [] > [], e.g., [1] > [2]. Only response the ranking results, do "
                                    "not say any word or explain."},
    ]


def test_passages_are_cut_to_passage_words():
    text = " ".join(f"w{i}" for i in range(400))
    assert rankgpt_messages("q", [text])[3]["content"] == "[1] " + " ".join(f"w{i}" for i in range(300))
    assert rankgpt_messages("q", [text], 5)[3]["content"] == "[1] w0 w1 w2 w3 w4"
    assert rankgpt_messages("q", [text], None)[3]["content"] == "[1] " + text


def test_reasonrank_window_messages_are_exact():
    messages = reasonrank_messages(" fever [2] and rash ", ["Measles\n causes [3] rash.", "Dengue   fever"])
    assert messages == [
        {"role": "system", "content": REASONRANK_SYSTEM},
        {"role": "user", "content": "I will provide you with 2 passages, each indicated by a numerical identifier []. "
                                    "Rank the passages based on their relevance to the search query: fever (2) and "
                                    "rash.\n\n[1] Measles causes (3) rash.\n[2] Dengue fever\nSearch Query: fever (2) "
                                    "and rash.\nRank the 2 passages above based on their relevance to the search query. "
                                    "All the passages should be included and listed using identifiers, in descending "
                                    "order of relevance. The format of the answer should be [] > [], e.g., [2] > [1]."},
    ]
    assert REASONRANK_SYSTEM.endswith("enclosed within <think> </think> and <answer> </answer> tags, respectively, "
                                      "i.e., <think> reasoning process here </think> <answer> answer here </answer>.")


def test_the_reranker_sends_the_window_messages_with_the_client_params(cache):
    client = FakeClient(reverse)
    ListwiseReranker(through(client, cache), passage_words=2).rerank_one("q?", [("a", "one two three"), ("b", "four")])
    assert client.sent == [rankgpt_messages("q?", ["one two three", "four"], 2)]
    assert client.sent[0][3]["content"] == "[1] one two"


# -- the windows ---------------------------------------------------------------------------------
def test_sliding_windows():
    assert sliding_windows(25, 20, 10) == [(5, 25), (0, 20)]
    assert sliding_windows(100, 20, 10) == [(80, 100), (70, 90), (60, 80), (50, 70), (40, 60), (30, 50), (20, 40),
                                             (10, 30), (0, 20)]  # RankGPT's windows for top-100
    assert sliding_windows(20, 20, 10) == [(0, 20)]
    assert sliding_windows(10, 20, 10) == [(0, 10)]
    assert sliding_windows(30, 20, 10) == [(10, 30), (0, 20)]
    assert sliding_windows(7, 3, 2) == [(4, 7), (2, 5), (0, 3)]
    assert sliding_windows(1) == [] and sliding_windows(0) == []


@pytest.mark.parametrize("rank", [by_score, reverse])
def test_final_order_equals_an_independent_simulation(cache, rank):
    client = FakeClient(rank)
    out = ListwiseReranker(through(client, cache)).rerank_one("which passage scores highest?", PASSAGES)
    expected = simulate(PASSAGES, [(5, 25), (0, 20)], rank)
    assert out == [doc_id for doc_id, _ in expected]
    assert len(client.sent) == 2
    # the first window is passages 5..24 in first-stage order; the second sees the reordered list
    assert window_texts(client.sent[0]) == [t for _, t in PASSAGES[5:25]]
    assert window_texts(client.sent[1]) == [t for _, t in simulate(PASSAGES, [(5, 25)], rank)[0:20]]


def test_sliding_brings_the_best_to_the_top(cache):
    out = ListwiseReranker(through(FakeClient(by_score), cache)).rerank_one("q", PASSAGES)
    best = sorted(PASSAGES, key=lambda p: -int(p[1].split()[-1]))
    # window [5,25) then [0,20), overlap 10: the top 10 overall all reach the top 10, in order
    assert out[:10] == [doc_id for doc_id, _ in best[:10]]


def test_rerank_many_runs_queries_round_by_round(cache):
    client = FakeClient(by_score)
    many = {"q1": PASSAGES, "q2": PASSAGES[:12], "q3": PASSAGES[:1], "q4": []}
    queries = [("q1", "first"), ("q2", "second"), ("q3", "third"), ("q4", "fourth"), ("q5", "no passages")]
    usage = Usage()
    reranker = ListwiseReranker(through(client, cache, usage))
    out = reranker.rerank_many(queries, many)
    assert out["q1"] == [d for d, _ in simulate(PASSAGES, [(5, 25), (0, 20)], by_score)]
    assert out["q2"] == [d for d, _ in simulate(PASSAGES[:12], [(0, 12)], by_score)]
    assert out["q3"] == ["d00"] and out["q4"] == [] and out["q5"] == []
    # round 1: q1's [5,25) and q2's [0,12); round 2: q1's [0,20)
    assert [len(window_texts(m)) for m in client.sent] == [20, 12, 20]
    assert [m[-1]["content"].split(".")[0] for m in client.sent] == ["Search Query: first", "Search Query: second",
                                                                     "Search Query: first"]
    assert usage.sent == 3 and reranker.stats.windows == 3


def test_bad_inputs_are_user_errors(cache):
    client = FakeClient(reverse)
    for option in ({"window": 1}, {"step": 0}, {"passage_words": 0}, {"window": 2.5}):
        with pytest.raises(UserError, match=next(iter(option))):
            ListwiseReranker(through(client, cache), **option)
    with pytest.raises(UserError, match=r"\.generate"):
        ListwiseReranker(object())
    reranker = ListwiseReranker(through(client, cache))
    with pytest.raises(UserError, match="twice"):
        reranker.rerank_many([("q", "a"), ("q", "b")], {})
    with pytest.raises(UserError, match="passage 1"):
        reranker.rerank_one("q", [("a", "x"), ("b", None)])
    with pytest.raises(UserError, match="list of"):
        reranker.rerank_one("q", "not a list")
    assert client.sent == []


# -- repairs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer, num, perm", [
    ("[3] > [1] > [2]", 3, [2, 0, 1]),
    ("[2] > [2] > [9]", 3, [1, 0, 2]),  # duplicate dropped, out of range dropped, missing appended
    ("no ranking", 3, [0, 1, 2]),
    ("", 4, [0, 1, 2, 3]),
    ("[4] > [2]", 5, [3, 1, 0, 2, 4]),  # partial: the rest in original order
    ("[0] > [3] > [1]", 3, [2, 0, 1]),  # [0] is -1: out of range
    ("3, 1, 2 and 12", 3, [2, 0, 1]),  # digits only, anything else separates
    ("[12] > [1]", 12, [11, 0, *range(1, 11)]),  # multi-digit identifiers
    ("Ranking: [2] > [1]²", 3, [0, 1, 2]),  # "²" is a digit int() rejects: the window keeps its order
])
def test_permutation_repair_as_rankgpt(answer, num, perm):
    assert receive_permutation(answer, num) == perm


@pytest.mark.parametrize("answer, text", [
    ("[2] > [1]", "[2] > [1]"),
    ("<think>[1] looks best, [3] not</think>\n[3] > [1]", "\n[3] > [1]"),
    ("<think>x</think> <answer> [2] > [1] </answer> [9]", " [2] > [1] "),
    ("reasoning without an opening tag [5] </think><answer>[1] > [2]</answer>", "[1] > [2]"),
    ("<THINK>x</Think><Answer>[2]</ANSWER>", "[2]"),
    ("<answer>[2] > [1]", "[2] > [1]"),
    ("<think>still thinking about [3] and [1]", ""),  # cut off while reasoning: no ranking
])
def test_answer_text(answer, text):
    assert answer_text(answer) == text


def test_repairs_are_counted(cache):
    answers = iter(["[2] > [2] > [9]", "no ranking", "[3] > [2] > [1]"])
    client = FakeClient(reverse, fmt=lambda perm: next(answers))
    reranker = ListwiseReranker(through(client, cache), window=3, step=1)
    out = reranker.rerank_one("q", [(f"d{i}", f"text {i}") for i in range(5)])
    # windows [2,5) then [1,4) then [0,3)
    # [2,5): "[2]>[2]>[9]" -> d3 d2 d4 ; list d0 d1 d3 d2 d4
    # [1,4): "no ranking" -> unchanged
    # [0,3): "[3]>[2]>[1]" -> d3 d1 d0 ; list d3 d1 d0 d2 d4
    assert out == ["d3", "d1", "d0", "d2", "d4"]
    assert (reranker.stats.windows, reranker.stats.incomplete, reranker.stats.unranked) == (3, 1, 1)


def test_each_querys_unusable_windows_reach_on_done(cache):
    """A window whose answer names no passage keeps its order and counts as unusable for its query."""
    answers = iter(["[2] > [1] > [3]", "I cannot rank these", "[9] > [10]", "[1] > [3] > [2]"])
    client = FakeClient(reverse, fmt=lambda perm: next(answers))
    done = {}
    passages = {q: [(f"{q}-d{i}", f"text {i}") for i in range(4)] for q in ("a", "b")}
    ListwiseReranker(through(client, cache), window=3, step=1).rerank_many(
        [("a", "first"), ("b", "second")], passages,
        on_done=lambda qid, asked, order, unusable: done.update({qid: (len(asked), order, unusable)}))
    # round 1: a's [1,4) "[2]>[1]>[3]", b's [1,4) unusable; round 2: a's [0,3) none in range, b's [0,3)
    assert done["a"] == (2, ["a-d0", "a-d2", "a-d1", "a-d3"], 1)
    assert done["b"] == (2, ["b-d0", "b-d2", "b-d1", "b-d3"], 1)


def test_reasoning_variant_reads_the_ranking_after_think(cache):
    def fmt(perm):
        # the reasoning names every identifier in a misleading order; only the answer counts
        decoy = " ".join(f"[{i}]" for i in range(1, len(perm) + 1))
        return f"<think>Compare {decoy} one by one.</think>\n<answer>{' > '.join(f'[{i + 1}]' for i in perm)}</answer>"

    client = FakeClient(by_score, fmt=fmt)
    reranker = ListwiseReranker(through(client, cache), reasoning=True)
    out = reranker.rerank_one("q", PASSAGES)
    assert out == [d for d, _ in simulate(PASSAGES, [(5, 25), (0, 20)], by_score)]
    assert all(m[0]["content"] == REASONRANK_SYSTEM and len(m) == 2 for m in client.sent)
    assert reranker.stats.incomplete == reranker.stats.unranked == 0


def test_reasoning_variant_without_answer_tags(cache):
    client = FakeClient(reverse, fmt=lambda perm: "<think>[1] [2] [3]</think>" + " > ".join(f"[{i + 1}]" for i in perm))
    out = ListwiseReranker(through(client, cache), reasoning=True).rerank_one("q", [("a", "x"), ("b", "y"),
                                                                                    ("c", "z")])
    assert out == ["c", "b", "a"]


# -- the cache, through the local chat server ----------------------------------------------------
class RankingServer(ChatServer):
    """The local chat server answering every window by reversing it ("[n] > ... > [1]"), counting
    the passages of a RankGPT request from its prefix turn."""

    def _handler(self):
        base = super()._handler()

        class Handler(base):
            def _completion(self, body, content, finish_reason="stop"):
                messages = body["messages"]
                if content == fake_answer(messages):  # a normal answer, not a scripted fault
                    num = int(re.search(r"provide you with (\d+) passages", messages[1]["content"]).group(1))
                    content = " > ".join(f"[{i}]" for i in range(num, 0, -1))
                super()._completion(body, content, finish_reason)

        return Handler


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for env in ("OPENAI_API_KEY", "VLLM_API_KEY", "OLLAMA_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    with RankingServer() as srv:
        yield srv


def chat_client(server) -> ChatClient:
    return ChatClient("test-ranker", base_url=server.url, temperature=0, sleep=lambda s: None, timeout=5.0)


def test_over_http_and_a_rerun_sends_nothing(server, tmp_path):
    path = tmp_path / "cache.jsonl"
    many = {"q1": PASSAGES, "q2": PASSAGES[:15]}
    queries = [("q1", "first query"), ("q2", "second query")]
    expected = {"q1": [d for d, _ in simulate(PASSAGES, [(5, 25), (0, 20)], reverse)],
                "q2": [d for d, _ in simulate(PASSAGES[:15], [(0, 15)], reverse)]}

    usage = Usage()
    out = ListwiseReranker(through(chat_client(server), GenerationCache(path), usage)).rerank_many(queries, many)
    assert out == expected
    assert server.count == 3 and usage.sent == 3 and usage.cached == 0
    # round one sends both queries' first windows at once: find q1's by its text, not arrival order
    first = next(r for r in server.requests if "first query" in r.body["messages"][1]["content"])
    assert first.body["messages"] == rankgpt_messages("first query", [t for _, t in PASSAGES[5:25]])
    assert first.body["temperature"] == 0.0

    again = Usage()
    out2 = ListwiseReranker(through(chat_client(server), GenerationCache(path), again)).rerank_many(queries, many)
    assert out2 == expected
    assert server.count == 3  # nothing sent the second time
    assert again.sent == 0 and again.cached == 3
    assert "test-ranker" in repr(ListwiseReranker(through(chat_client(server), GenerationCache(path))))


def test_a_failed_window_is_retried_and_nothing_is_lost(server, tmp_path):
    server.fail("500", times=1)
    server.fail("empty_content", times=1)
    cached = through(chat_client(server), GenerationCache(tmp_path / "c.jsonl"))
    out = ListwiseReranker(cached).rerank_one("q", PASSAGES)
    assert out == [d for d, _ in simulate(PASSAGES, [(5, 25), (0, 20)], reverse)]
    assert server.count == 4  # two failures, retried, then the two windows


def test_a_slow_window_holds_back_only_its_own_query(server, cache):
    """No round barrier: while one query's first window is held, another query's three windows are
    sent, answered and followed by the next; never more than ``concurrency`` in flight."""
    def asker(body):
        return re.search(r"relevance to query: (\w+)\.", body["messages"][1]["content"]).group(1)

    seen_before_slow = []  # per slow request: the fast query's windows that had arrived when it was answered

    def hold_slow(body):
        if asker(body) == "slow":
            deadline = time.monotonic() + 3  # reached only with a barrier (under the client's 5 s timeout)
            while sum(asker(r.body) == "fast" for r in list(server.requests)) < 3 and time.monotonic() < deadline:
                time.sleep(0.002)
            seen_before_slow.append(sum(asker(r.body) == "fast" for r in list(server.requests)))
        return 0.0

    server.delay_for = hold_slow
    server.overlap = 2  # no answer before both queries' first windows are in flight, however late a thread starts
    many = {"slow": PASSAGES, "fast": [(f"f{i}", f"other passage {i}") for i in range(40)]}  # 2 windows and 3
    out = ListwiseReranker(through(chat_client(server), cache), concurrency=2).rerank_many(
        [("slow", "slow"), ("fast", "fast")], many)
    assert seen_before_slow == [3, 3]  # with a barrier: 1 (the fast query's second window waits for the slow one)
    assert server.max_in_flight == 2
    assert out == {"slow": [d for d, _ in simulate(PASSAGES, [(5, 25), (0, 20)], reverse)],
                   "fast": [d for d, _ in simulate(many["fast"], [(20, 40), (10, 30), (0, 20)], reverse)]}


def test_a_free_slot_goes_to_the_query_with_the_most_windows_left(server, cache):
    """Hu's rule, one window at a time: the query with the most windows left, the longest waiting
    among equals, so that the last window ends as early as it can (a: 4 windows, b and c: 2 each;
    in turns, a would be left with two windows in a row at the end)."""
    many = {"a": [(f"a{i}", f"alpha {i}") for i in range(50)], "b": PASSAGES, "c": PASSAGES}
    ListwiseReranker(through(chat_client(server), cache), concurrency=1).rerank_many(
        [("a", "a"), ("b", "b"), ("c", "c")], many)
    asked = [re.search(r"relevance to query: (\w+)\.", r.body["messages"][1]["content"]).group(1)
             for r in server.requests]
    assert asked == ["a", "a", "b", "c", "a", "b", "c", "a"]


def test_a_server_that_goes_down_stops_the_run_in_one_line_and_keeps_every_answer(server, tmp_path):
    """Six windows answered, then every request fails: the run ends with the server's error once
    the windows in flight have ended; the rerun sends only the windows that were not answered."""
    many = {f"q{i}": PASSAGES for i in range(4)}  # 2 windows each
    queries = [(q, f"query {q}") for q in many]
    server.fail_after(6)
    with pytest.raises(UserError, match="HTTP 500"):
        ListwiseReranker(through(chat_client(server), GenerationCache(tmp_path / "c.jsonl")),
                         concurrency=3).rerank_many(queries, many)
    assert len(GenerationCache(tmp_path / "c.jsonl")) == 6
    server.recover()
    sent = server.count
    out = ListwiseReranker(through(chat_client(server), GenerationCache(tmp_path / "c.jsonl")),
                           concurrency=3).rerank_many(queries, many)
    assert server.count - sent == 2
    assert out == {q: [d for d, _ in simulate(PASSAGES, [(5, 25), (0, 20)], reverse)] for q in many}


@pytest.mark.parametrize("text", ["", "   ", "one", "  a  b\tc\n d  ", "x " * 400, "αβ γ\u3000δ ε", "[1] > [2]"])
@pytest.mark.parametrize("max_words", [None, 0, 1, 3, 300])
def test_passages_are_cut_and_answers_cleaned_as_rankgpt_does(text, max_words):
    """The cut and the clean, taken faster, give what RankGPT's expressions give (its
    ``' '.join(text.strip().split()[:n])`` and ``clean_response``), Unicode digits included."""
    from r2med_plugins.rerank.listwise import clean_response, truncate_words

    words = text.strip().split()
    assert truncate_words(text, max_words) == " ".join(words if max_words is None else words[:max_words])
    for answer in (text, f"[2] > [1]{text}", "[١] > [²] > [3]", "３ > 1"):
        assert clean_response(answer) == "".join(c if c.isdigit() else " " for c in answer).strip()
