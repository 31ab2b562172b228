"""``grouprank``: groupwise reranking as GroupRank does it (arXiv 2511.11653; ``AQ-MedAI/Diver`` @95b111b,
``Reranker/rerank_groupwise.py``): each round shuffles a query's candidates and cuts them into groups; the
LLM scores every document of a group 0-10 in one answer; a document's score is the mean of its scores
(divided by 10) over the rounds, and the run is ordered by that mean interpolated with the first stage's
score (``0.6 * group + 0.4 * first stage``, the score file the code writes last).

Reproduced from the code (each function names what it reproduces). Where this module departs from it:

1. The code shuffles with one ``random`` seeded 666 for the whole run, so a query's groups depend on
   the queries before it; here each query draws from its own generator, seeded with ``seed`` and the
   query's id, so its groups are the same whatever else is run.
2. The answer is read after the last ``</think>`` (a thinking model's trace holds its own ``<answer>``).
3. An identifier below 1 (``"[0]"``) makes the code score the group's last document; here it makes the
   group unusable, as an identifier past the end does in the code.
4. A document no usable answer scored is dropped by the code; here it follows the scored ones, in
   first-stage order.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Sequence

from .listwise import answer_text

# rerank_groupwise.py::GroupReranker.__init__, group_system_prompt and group_user_prompt (verbatim)
GROUP_SYSTEM = '''Your task is to evaluate and rank documents based on how well they help answer the given query. Follow this evaluation priority:
1. PRIMARY: Usefulness & Helpfulness - Does the document provide actionable information, solutions, or direct answers that help address the user's needs?
2. SECONDARY: Relevance - Does the document contain information related to the query topic?

Evaluation Process:
1. First, identify the user's core intent and what kind of help they need from the query
2. For each document, assess:
   - How directly it addresses the user's intent
   - What actionable information or answers it provides
   - How much it helps solve the user's problem or need
3. Compare documents against each other to ensure proper ranking
4. Assign scores that reflect the relative usefulness ranking

Scoring Scale (0-10):
- 9-10: Extremely helpful, directly answers the query with actionable information
- 7-8: Very helpful, provides substantial useful information for the query
- 5-6: Moderately helpful, contains some useful information but incomplete
- 3-4: Minimally helpful, limited useful information despite topic relevance
- 1-2: Barely helpful, mentions related topics but provides little useful information
- 0: Not helpful at all, cannot assist with answering the query
'''

GROUP_USER = '''I will provide you {TOPK} documents, each indicated by a numerical identifier []. Score these documents based on their Usefulness and Relevance to the query.
Query:
{QUERY}

Documents:
{PASSAGES}

## Final Output Format
You must structure your response in exactly two parts: provide your brief reasoning process first, then output final scores in JSON format like below, with document IDs as string keys and integer scores as values for all {TOPK} documents. 
The reasoning process and answer are enclosed within <reason> </reason> and <answer> </answer> tags, respectively. Do NOT output anything outside the specified tags. Follow this exact format:
<reason> 
[Analyze each document's usefulness and relevance to the query, explaining your scoring rationale]
</reason>
<answer> 
```json
{{"[1]": 5, "[2]": 3, "[3]": 8}}
``` 
</answer>
'''

# How the leaderboard names the published models, by served model.
LEADERBOARD_NAMES = {"AQ-MedAI/Diver-GroupRank-32B": "GroupRank(32B)", "AQ-MedAI/Diver-GroupRank-7B": "GroupRank(7B)"}


def group_messages(query: str, texts: Sequence[str], max_doc_len: int) -> list[dict]:
    """``prepare_groups_one_epoch``'s request for one group: runs of newlines become one space, each
    text cut to ``max_doc_len`` characters, ``"[i]. text"`` blocks; the server applies the chat template."""
    cut = [_one_line(text, max_doc_len) for text in texts]
    passages = "".join(f"[{i}]. {text}\n\n" for i, text in enumerate(cut, start=1))
    return [{"role": "system", "content": GROUP_SYSTEM},
            {"role": "user", "content": GROUP_USER.format(QUERY=query, PASSAGES=passages, TOPK=len(texts))}]


_NEWLINES = re.compile("\n+")


@functools.lru_cache(maxsize=1 << 16)
def _one_line(text: str, max_doc_len: int) -> str:
    """A document as a group shows it: once per document, not once per group it is in (six)."""
    return _NEWLINES.sub(" ", text)[:max_doc_len]


def plan_groups(doc_ids: Sequence[str], rng: random.Random, *, group_size: int, interval: int,
                rounds: int) -> list[list[str]]:
    """The groups of ``rounds`` rounds (``rerank_by_group``): each round shuffles the list in place (so
    a round shuffles the previous round's order, as the code's ``random.shuffle(docs)`` does), then
    takes ``docs[i:i + group_size]`` every ``interval`` documents."""
    docs, out = list(doc_ids), []
    for _ in range(rounds):
        rng.shuffle(docs)
        out += [docs[i:i + group_size] for i in range(0, len(docs), interval)]
    return out


def extract_scores(text: str) -> dict | None:
    """``_extract_rerank_output``: the JSON object inside ``<answer>`` (the last ```json block, else the
    last ``{...}``), its known slips repaired; None where the code raises."""
    answer = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL)
    if answer:
        text = answer.group(1).strip()
    blocks = re.findall(r"(?:```json\s*)([\s\S]+?)(?:\s*```)", text)
    objects = blocks or re.findall(r"\{[\s\S]*?\}", text)
    if not objects:
        return None
    found = objects[-1].strip()
    found = re.sub(r"(\[\d+\])\]", r"\1", found)
    if found.count("{") > found.count("}"):
        found += "}"
    found = re.sub(r"\s+", " ", found).strip()
    try:
        scores = dict(json.loads(found))
    except (ValueError, TypeError):
        return None
    return scores


def group_scores(text: str, doc_ids: Sequence[str]) -> list[tuple[str, float]] | None:
    """``(doc_id, score / 10)`` for each entry of the answer, in its order, as ``rerank_by_group``
    reads it (a document the answer leaves out gets nothing from this group); None when the answer
    is unusable, where the code scores the whole group 0."""
    scores = extract_scores(answer_text(text))
    if scores is None:
        return None
    out = []
    for key, score in scores.items():
        try:
            index = int(str(key).strip().strip("[]"))
        except ValueError:
            return None
        if not 1 <= index <= len(doc_ids) or isinstance(score, bool) or not isinstance(score, (int, float)):
            return None
        out.append((doc_ids[index - 1], score / 10))
    return out


def merge(doc_ids: Sequence[str], scored: Sequence[tuple[str, float]], first_stage: dict[str, float],
          retriever_weight: float) -> list[str]:
    """The final order: ``avg_scores`` (each document's mean, in order of first appearance) sorted by
    the mean, then by ``(1 - w) * mean + w * first-stage score``, both sorts stable as Python's; the
    documents never scored after them, in ``doc_ids``' order."""
    by_doc: dict[str, list[float]] = {}
    for doc_id, score in scored:
        by_doc.setdefault(doc_id, []).append(score)
    means = sorted(((d, sum(s) / len(s)) for d, s in by_doc.items()), key=lambda item: item[1], reverse=True)
    final = sorted(((d, (1 - retriever_weight) * m + retriever_weight * first_stage[d]) for d, m in means),
                   key=lambda item: item[1], reverse=True)
    return [d for d, _ in final] + [d for d in doc_ids if d not in by_doc]


class GroupRankReranker:
    """``grouprank``: every group of every round is known before any answer, so all of a run's groups
    go to the server in one ``generate`` (as many in flight as ``concurrency``); each query's record is
    written when its last group is answered."""

    component = "grouprank"

    def __init__(self, options) -> None:  # GroupRankOptions
        from r2med_tasks.plugin import UserError

        if not options.llm:
            raise UserError("reranker 'grouprank' needs -o llm=SPEC (e.g. vllm:AQ-MedAI/Diver-GroupRank-32B, "
                            "BASE_URL#MODEL)")
        self.options = options
        self.sampling = {"temperature": options.temperature, "top_p": options.top_p,
                         "max_tokens": options.max_tokens or None, "concurrency": options.concurrency,
                         **options.llm_settings()}
        self.price = tuple(options.price) if options.price else None

    def model_meta(self) -> dict:
        """The scoring LLM, never the server's address; the published models by the paper's names."""
        from r2med_tasks.plugin import LLMRef

        llm = LLMRef(self.options.llm)
        model = llm.model_name
        return {"name": f"llm/{llm.identity}", "revision": "served",
                "display_name": LEADERBOARD_NAMES.get(model, f"GroupRank({model.rsplit('/', 1)[-1]})")}

    def groups(self, qid: str, doc_ids: Sequence[str]) -> list[list[str]]:
        """The groups of query ``qid``: its own generator, seeded with ``seed`` and its id."""
        o = self.options
        return plan_groups(doc_ids, random.Random(f"{o.seed}:{qid}"), group_size=o.group_size,
                           interval=o.interval, rounds=o.rounds)

    def rerank(self, queries, corpus, candidates, *, task, context) -> dict[str, dict[str, float]]:
        client = context.llm(self.options.llm, price=self.price, **self.sampling)
        text_of = dict(zip(corpus.ids, corpus.texts))
        asked = {q.id: q.text for q in queries if q.id in candidates}
        groups = {qid: self.groups(qid, list(candidates[qid])) for qid in asked}
        plan = [(qid, j) for qid in asked for j in range(len(groups[qid]))]  # (query, its group's index)
        answers: dict[str, list] = {qid: [None] * len(groups[qid]) for qid in asked}
        left = {qid: len(groups[qid]) for qid in asked}
        orders: dict[str, list[str]] = {}

        def done(i: int, generation) -> None:  # as each group is answered, cached ones first
            qid, j = plan[i]
            answers[qid][j] = generation
            left[qid] -= 1
            if left[qid] == 0:
                orders[qid] = self._finish(qid, groups[qid], answers[qid], candidates[qid], client, context,
                                           asked[qid])

        client.generate([group_messages(asked[qid], [text_of[d] for d in groups[qid][j]], self.options.max_doc_len)
                         for qid, j in plan], on_answer=done)
        return {qid: {d: float(len(order) - i) for i, d in enumerate(order)} for qid, order in orders.items()}

    def _finish(self, qid, groups, generations, first_stage, client, context, query) -> list[str]:
        """The query's order from its groups' answers, its record handed over."""
        scored, unusable = [], 0
        for group, generation in zip(groups, generations):
            read = group_scores(generation.whole_text(), group)
            if read is None:  # the code's fallback: the whole group scores 0
                unusable += 1
                read = [(d, 0.0) for d in group]
            scored += read
        order = merge(list(first_stage), scored, first_stage, self.options.retriever_weight)
        context.generated(qid, generations, answer=order, query=query, sampling=client.params, unusable=unusable)
        return order
