"""RankGPT-style sliding-window listwise reranking over any chat LLM client: an LLM orders a window of
passages at a time ("[3] > [1] > [2]"), the window sliding from the end of the first-stage list to
its front, so strong passages bubble up to the top.

Reproduced: RankGPT (``sunnweiwei/RankGPT`` @2dfde96, ``rank_gpt.py``) and ReasonRank's
``rank_GPT_reasoning`` prompt mode, the one its R2MED runs use (``8421BCD/ReasonRank`` @e6d3ab4);
each function names what it reproduces.

Where this module departs from them, deliberately:

1. RankGPT's windows stop before the front when ``(n - window) % step != 0``, so the top is never
   reranked; here the last window is clamped to the front (see ``sliding_windows``). For 100
   passages, window 20, step 10 (ReasonRank's R2MED runs) the windows are identical.
2. Passages are cut to a fixed ``passage_words`` (RankGPT's starting value, 300): the harness does
   not know the model's tokenizer or context. ReasonRank's token cut and ``ftfy.fix_text`` are not
   done.
3. The digits are read only from the answer after the last ``</think>`` (``answer_text``), else a
   reasoning trace would contribute its digits.
4. A digit string ``int`` rejects ("²") makes RankGPT raise; here, as in ReasonRank, that window
   keeps its order.

A passage may be ``(doc_id, text, annotation)`` (InsertRank's scores): the annotation moves with the
passage from window to window, and the prompts write it after the passage's cut text (InsertRank's own
prompt as it sees fit). Without it the prompts are exactly RankGPT's and ReasonRank's.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import re
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from r2med_tasks.llm import map_concurrently
from r2med_tasks.plugin import Generation, UserError

log = logging.getLogger(__name__)

__all__ = [
    "RANKGPT_SYSTEM",
    "REASONRANK_SYSTEM",
    "ListwiseReranker",
    "ListwiseStats",
    "answer_text",
    "apply_permutation",
    "clean_response",
    "rankgpt_messages",
    "reasonrank_messages",
    "receive_permutation",
    "remove_duplicate",
    "sliding_windows",
    "truncate_words",
]

# --------------------------------------------------------------------------------------------
# Prompts.
# --------------------------------------------------------------------------------------------
# RankGPT rank_gpt.py::get_prefix_prompt (verbatim).
RANKGPT_SYSTEM = ("You are RankGPT, an intelligent assistant that can rank passages based on their relevancy "
                  "to the query.")
RANKGPT_PREFIX = ("I will provide you with {num} passages, each indicated by number identifier []. \n"
                  "Rank the passages based on their relevance to query: {query}.")
RANKGPT_PREFIX_ACK = "Okay, please provide the passages."
RANKGPT_PASSAGE = "[{rank}] {content}"
RANKGPT_PASSAGE_ACK = "Received passage [{rank}]."
# RankGPT rank_gpt.py::get_post_prompt (verbatim, "Only response" included).
RANKGPT_POST = ("Search Query: {query}. \nRank the {num} passages above based on their relevance to the search "
                "query. The passages should be listed in descending order using identifiers. The most relevant "
                "passages should be listed first. The output format should be [] > [], e.g., [1] > [2]. Only "
                "response the ranking results, do not say any word or explain.")

# ReasonRank listwise_prompt_r1.toml::system_prompt_reasoning (verbatim, "you first thinks" included).
REASONRANK_SYSTEM = ("You are RankLLM, an intelligent assistant that can rank passages based on their relevance to "
                     "the query. Given a query and a passage list, you first thinks about the reasoning process in "
                     "the mind and then provides the answer (i.e., the reranked passage list). The reasoning process "
                     "and answer are enclosed within <think> </think> and <answer> </answer> tags, respectively, "
                     "i.e., <think> reasoning process here </think> <answer> answer here </answer>.")
# ReasonRank utils.py::add_prefix_prompt and add_post_prompt for prompt mode rank_GPT_reasoning (verbatim).
REASONRANK_PREFIX = ("I will provide you with {num} passages, each indicated by a numerical identifier []. Rank the "
                     "passages based on their relevance to the search query: {query}.\n")
REASONRANK_POST = ("Search Query: {query}.\nRank the {num} passages above based on their relevance to the search "
                   "query. All the passages should be included and listed using identifiers, in descending order "
                   "of relevance. The format of the answer should be [] > [], e.g., [2] > [1].")

_BRACKETED_NUMBER = re.compile(r"\[(\d+)\]")
_NON_DIGITS = {i: " " for i in range(128) if not chr(i).isdigit()}  # str.translate's table: ASCII to a space


@functools.lru_cache(maxsize=4096)  # a passage is in two windows of its query: cut once
def truncate_words(text: str, max_words: int | None) -> str:
    """RankGPT's passage cut: ``' '.join(text.strip().split()[:max_words])``; ``None`` keeps every word."""
    words = text.strip().split(None, max_words) if max_words else text.split()
    return " ".join(words if max_words is None else words[:max_words])


def replace_number(text: str) -> str:
    """ReasonRank's ``replace_number``: "[12]" becomes "(12)", so a passage's own bracketed numbers
    cannot be mistaken for identifiers."""
    return _BRACKETED_NUMBER.sub(r"(\1)", text)


def _annotations(texts: Sequence[str], annotations: Sequence[str] | None) -> Sequence[str]:
    if annotations is None:
        return [""] * len(texts)
    if len(annotations) != len(texts):
        raise UserError(f"listwise prompt: {len(annotations)} annotation(s) for {len(texts)} passage(s)")
    return annotations


def rankgpt_messages(query: str, texts: Sequence[str], passage_words: int | None = 300, *,
                     annotations: Sequence[str] | None = None) -> list[dict]:
    """The chat messages RankGPT's ``create_permutation_instruction`` builds for one window: a user
    turn ``"[i] <text>"`` and an assistant turn ``"Received passage [i]."`` per passage."""
    num = len(texts)
    messages = [{"role": "system", "content": RANKGPT_SYSTEM},
                {"role": "user", "content": RANKGPT_PREFIX.format(num=num, query=query)},
                {"role": "assistant", "content": RANKGPT_PREFIX_ACK}]
    for rank, (text, extra) in enumerate(zip(texts, _annotations(texts, annotations)), start=1):
        content = truncate_words(text, passage_words) + extra
        messages.append({"role": "user", "content": RANKGPT_PASSAGE.format(rank=rank, content=content)})
        messages.append({"role": "assistant", "content": RANKGPT_PASSAGE_ACK.format(rank=rank)})
    messages.append({"role": "user", "content": RANKGPT_POST.format(query=query, num=num)})
    return messages


def reasonrank_messages(query: str, texts: Sequence[str], passage_words: int | None = 300, *,
                        annotations: Sequence[str] | None = None) -> list[dict]:
    """The chat messages of ReasonRank's ``rank_GPT_reasoning`` mode for one window: ONE user message
    holding every passage, "[N]" in the query and passages as "(N)"."""
    query = replace_number(query).strip()
    num = len(texts)
    context = REASONRANK_PREFIX.format(num=num, query=query) + "\n"
    for rank, (text, extra) in enumerate(zip(texts, _annotations(texts, annotations)), start=1):
        context += f"[{rank}] {replace_number(truncate_words(text, passage_words))}{extra}\n"
    context += REASONRANK_POST.format(query=query, num=num)
    return [{"role": "system", "content": REASONRANK_SYSTEM}, {"role": "user", "content": context}]


# --------------------------------------------------------------------------------------------
# Answers.
# --------------------------------------------------------------------------------------------
_THINK_OPEN = re.compile(r"<think\s*>", re.I)
_THINK_CLOSE = re.compile(r"</think\s*>", re.I)
_ANSWER_OPEN = re.compile(r"<answer\s*>", re.I)
_ANSWER_CLOSE = re.compile(r"</answer\s*>", re.I)


def answer_text(text: str) -> str:
    """The part of an LLM answer that holds the ranking: after the last ``</think>``, within the first
    ``<answer>`` span if any. A ``<think>`` never closed means the model ran out of tokens while
    reasoning: no ranking (ReasonRank would read the unfinished reasoning's digits).
    """
    closes = list(_THINK_CLOSE.finditer(text))
    unfinished = False
    if closes:
        text = text[closes[-1].end():]
    elif _THINK_OPEN.search(text):
        unfinished = True
    opening = _ANSWER_OPEN.search(text)
    if opening is not None:
        rest = text[opening.end():]
        closing = _ANSWER_CLOSE.search(rest)
        return rest[:closing.start()] if closing is not None else rest
    return "" if unfinished else text


def clean_response(response: str) -> str:
    """RankGPT's ``clean_response``: every non-digit character becomes a space, then strip (ASCII
    text, as most answers are, by one substitution; other text character by character, as
    ``str.isdigit`` counts more digits than ``0-9``)."""
    if response.isascii():
        return response.translate(_NON_DIGITS).strip()
    return "".join(c if c.isdigit() else " " for c in response).strip()


def remove_duplicate(response: Sequence[Any]) -> list:
    """RankGPT's ``remove_duplicate``: the first occurrence of each item, in order."""
    new_response: list = []
    for c in response:
        if c not in new_response:
            new_response.append(c)
    return new_response


def receive_permutation(text: str, num: int) -> list[int]:
    """The 0-based order of a window of ``num`` passages that answer ``text`` implies, by RankGPT's
    repair rules: "[2] > [2] > [9]" on 3 passages gives ``[1, 0, 2]``. Never raises."""
    try:
        response = [int(x) - 1 for x in clean_response(answer_text(text)).split()]
    except ValueError:
        response = []
    response = remove_duplicate(response)
    original_rank = list(range(num))
    response = [ss for ss in response if 0 <= ss < num]
    named = set(response)
    return response + [tt for tt in original_rank if tt not in named]


def apply_permutation(items: list, start: int, end: int, permutation: Sequence[int]) -> None:
    """Reorder ``items[start:end]`` in place: position ``start + j`` gets the window's item ``permutation[j]``."""
    cut_range = items[start:end]
    for j, x in enumerate(permutation):
        items[start + j] = cut_range[x]


def sliding_windows(n: int, window: int = 20, step: int = 10) -> list[tuple[int, int]]:
    """The ``[start, end)`` windows for ``n`` passages, from the end to the front, as RankGPT's; the
    first window that would start at or before 0 is clamped to ``[0, min(window, n))`` and is the
    last (25 passages: ``[5, 25), [0, 20)``, where RankGPT would stop after the first)."""
    if n < 2:
        return []
    out = []
    end = n
    while True:
        start = end - window
        if start <= 0:
            out.append((0, min(window, n)))
            return out
        out.append((start, end))
        end -= step


# --------------------------------------------------------------------------------------------
# The reranker.
# --------------------------------------------------------------------------------------------
@dataclass
class ListwiseStats:
    """Per-window tallies: ``incomplete`` answers were repaired, ``unranked`` ones kept their order."""

    windows: int = 0
    incomplete: int = 0
    unranked: int = 0


def _int_option(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UserError(f"ListwiseReranker: {name} must be an integer >= {low}, got {value!r}")
    return value


# A window's request: (query, texts, passage_words, annotations=...) -> chat messages
Prompt = Callable[..., list[dict]]


class ListwiseReranker:
    """Sliding-window listwise reranking (RankGPT; ReasonRank's reasoning prompt with ``reasoning=True``)
    through the stage's client, which answers from the generation cache. ``prompt``: another window
    request, in ``rankgpt_messages``' signature (InsertRank's); ``concurrency``: windows in flight at
    once, across queries.
    """

    def __init__(self, client: Any, *, window: int = 20, step: int = 10, passage_words: int | None = 300,
                 reasoning: bool = False, prompt: Prompt | None = None, concurrency: int = 1) -> None:
        for attr in ("model", "params", "generate"):
            if not hasattr(client, attr):
                raise UserError(f"ListwiseReranker: the client must have .model, .params and .generate "
                                f"(like context.llm's); {type(client).__name__} has no .{attr}")
        self.client = client
        self.window = _int_option("window", window, 2)
        self.step = _int_option("step", step, 1)
        self.passage_words = None if passage_words is None else _int_option("passage_words", passage_words, 1)
        self.concurrency = _int_option("concurrency", concurrency, 1)
        self.reasoning = bool(reasoning)
        self.prompt = prompt or (reasonrank_messages if self.reasoning else rankgpt_messages)
        self.stats = ListwiseStats()

    def __repr__(self) -> str:
        return (f"ListwiseReranker({self.client.model!r}, window={self.window}, step={self.step}, "
                f"passage_words={self.passage_words}, reasoning={self.reasoning})")

    def messages(self, query: str, texts: Sequence[str], annotations: Sequence[str] | None = None) -> list[dict]:
        """The chat request for one window of passage ``texts`` (in their current order), each
        followed by its annotation, if any."""
        return self.prompt(query, texts, self.passage_words, annotations=annotations)

    def permutation(self, answer: str, num: int) -> list[int] | None:
        """The window order ``answer`` implies, tallied in ``stats``; None when it names no passage
        of the window (an unusable answer: the window keeps its order)."""
        try:
            named = [int(x) - 1 for x in clean_response(answer_text(answer)).split()]
        except ValueError:
            named = []
        in_range = [x for x in named if 0 <= x < num]
        self.stats.windows += 1
        if not in_range:
            self.stats.unranked += 1
            return None
        if sorted(named) != list(range(num)):
            self.stats.incomplete += 1
        return receive_permutation(answer, num)

    def rerank_one(self, query: str, passages: Sequence[tuple[str, str]]) -> list[str]:
        """The doc ids of ``passages`` (``(doc_id, text)`` in first-stage order) in the new order."""
        return self.rerank_many([("q", query)], {"q": passages})["q"]

    def rerank_many(self, queries: Sequence[tuple[Hashable, str]],
                    passages: dict[Hashable, Sequence[tuple[str, str]]], *,
                    on_done: Callable[[Hashable, list[Generation], list[str], int], None] | None = None
                    ) -> dict[Hashable, list[str]]:
        """``{qid: doc ids in the new order}``. A query's windows go one after another, each sent as
        soon as the one before is answered; up to ``concurrency`` windows of different queries are in
        flight at once, so no query waits for another's (see ``_send_windows``). ``on_done(qid,
        answers, order, unusable)`` as each query's last window is answered, so a component can write
        its record as it finishes (``unusable``: its windows whose answer held no ranking).
        """
        lists: dict[Hashable, list[tuple[str, str]]] = {}
        notes: dict[Hashable, list[str]] = {}  # each passage's annotation, permuted with it
        texts: dict[Hashable, str] = {}
        for item in queries:
            if not isinstance(item, (tuple, list)) or len(item) != 2 or not isinstance(item[1], str):
                raise UserError(f"ListwiseReranker: queries must be (qid, text) pairs, got {item!r:.80}")
            qid, text = item
            if qid in texts:
                raise UserError(f"ListwiseReranker: query id {qid!r} is given twice")
            texts[qid] = text
            lists[qid], notes[qid] = self._check_passages(qid, passages.get(qid, ()))
        plans = {qid: sliding_windows(len(items), self.window, self.step) for qid, items in lists.items()}
        asked: dict[Hashable, list[Generation]] = {qid: [] for qid in texts}
        unusable: dict[Hashable, int] = {}

        def request(qid: Hashable) -> list[dict]:  # the query's next window, in its current order
            start, end = plans[qid][len(asked[qid])]
            return self.messages(texts[qid], [t for _, t in lists[qid][start:end]], notes[qid][start:end])

        def answered(qid: Hashable, answer: Generation) -> int:  # applied in order; the windows it has left
            start, end = plans[qid][len(asked[qid])]
            # the thinking put back in place, as a plain server gives it: answer_text takes what follows
            permutation = self.permutation(answer.whole_text(), end - start)
            if permutation is None:
                unusable[qid] = unusable.get(qid, 0) + 1
            else:
                apply_permutation(lists[qid], start, end, permutation)
                apply_permutation(notes[qid], start, end, permutation)
            asked[qid].append(answer)
            return len(plans[qid]) - len(asked[qid])

        def done(qid: Hashable) -> None:  # its last window answered: its record written
            if on_done is not None:
                on_done(qid, asked.pop(qid), [doc_id for doc_id, _ in lists[qid]], unusable.pop(qid, 0))

        log.info("%s: %d listwise window(s) of %d query(ies), up to %d at once", self.client.model,
                 sum(map(len, plans.values())), len(plans), self.concurrency)
        self._send_windows({qid: len(plan) for qid, plan in plans.items() if plan}, request, answered, done)
        if self.stats.unranked or self.stats.incomplete:
            log.info("%s: %d window(s) answered, %d repaired (ids missing, repeated or out of range), %d with no "
                     "usable ranking (kept in order)", self.client.model, self.stats.windows,
                     self.stats.incomplete, self.stats.unranked)
        return {qid: [doc_id for doc_id, _ in lists[qid]] for qid in texts}

    def _send_windows(self, windows: dict[Hashable, int], request: Callable[[Hashable], list[dict]],
                      answered: Callable[[Hashable, Generation], int], done: Callable[[Hashable], None]) -> None:
        """Ask each query's ``windows`` in turn, ``concurrency`` at a time. A free slot goes to the
        waiting query with the most windows left, the longest waiting among equals (Hu's rule: with
        equal latencies the last window ends as early as it can). The thread whose window was
        answered applies the answer and sends the next window itself, answers applied and prompts
        built one at a time under a lock (no hop through a scheduler thread per window: at 32 in
        flight, those hops cost as much client time as the requests); ``done(qid)`` outside it, so
        the records of finishing queries share a write."""
        turn = itertools.count()
        waiting = [(-left, next(turn), qid) for qid, left in windows.items()]
        heapq.heapify(waiting)
        lock = threading.Lock()

        def take() -> tuple[Hashable, list[dict]] | None:  # (under the lock) the next window to send
            if not waiting:
                return None
            qid = heapq.heappop(waiting)[2]
            return qid, request(qid)

        def work(job: tuple[Hashable, list[dict]] | None, abort: threading.Event) -> None:
            try:
                while job is not None:
                    qid, messages = job
                    answer = self.client.generate([messages])[0]
                    with lock:
                        left = answered(qid, answer)
                        if left:
                            heapq.heappush(waiting, (-left, next(turn), qid))
                        job = None if abort.is_set() else take()
                    if not left:
                        done(qid)
            except BaseException:
                abort.set()  # the others send nothing more, once their window in flight is answered
                raise

        jobs = [take() for _ in range(min(self.concurrency, len(waiting)))]
        # the windows in flight end first, their answers cached (not on Ctrl-C)
        map_concurrently(work, jobs, self.concurrency, name="listwise", finish_running=True)

    @staticmethod
    def _check_passages(qid: Hashable, items: Any) -> tuple[list[tuple[str, str]], list[str]]:
        """The ``(doc_id, text)`` pairs and each one's annotation ("" when it has none)."""
        if isinstance(items, (str, bytes, dict)) or not isinstance(items, Sequence):
            raise UserError(f"ListwiseReranker: the passages of query {qid!r} must be a list of (doc_id, text) "
                            f"pairs, got {type(items).__name__}")
        out, notes = [], []
        for i, item in enumerate(items):
            if (not isinstance(item, (tuple, list)) or len(item) not in (2, 3) or not isinstance(item[1], str)
                    or (len(item) == 3 and not isinstance(item[2], str))):
                raise UserError(f"ListwiseReranker: passage {i} of query {qid!r} must be a (doc_id, text) pair "
                                f"with a text string (or (doc_id, text, annotation)), got {item!r:.80}")
            out.append((item[0], item[1]))
            notes.append(item[2] if len(item) == 3 else "")
        return out, notes
