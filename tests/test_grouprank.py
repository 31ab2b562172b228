"""GroupRank (``grouprank``): groupwise reranking as AQ-MedAI/Diver's ``Reranker/rerank_groupwise.py``
(@95b111b) does it, through the runner against the local chat server.

The prompts, the answer reading and the merging are written out here from the Diver code itself
(``group_system_prompt``, ``group_user_prompt``, ``prepare_groups_one_epoch``, ``_extract_rerank_output``,
``avg_scores`` and the final interpolation), not from the reranker's module.
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl, read_ranking

TASK = "R2MEDSampleRetrieval"

# rerank_groupwise.py, GroupReranker.__init__ (typed from the Diver code)
SYSTEM = """Your task is to evaluate and rank documents based on how well they help answer the given query. Follow this evaluation priority:
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
"""
USER = """I will provide you {TOPK} documents, each indicated by a numerical identifier []. Score these documents based on their Usefulness and Relevance to the query.
Query:
{QUERY}

Documents:
{PASSAGES}

## Final Output Format
You must structure your response in exactly two parts: provide your brief reasoning process first, then output final scores in JSON format like below, with document IDs as string keys and integer scores as values for all {TOPK} documents. \nThe reasoning process and answer are enclosed within <reason> </reason> and <answer> </answer> tags, respectively. Do NOT output anything outside the specified tags. Follow this exact format:
<reason> \n[Analyze each document's usefulness and relevance to the query, explaining your scoring rationale]
</reason>
<answer> \n```json
{{"[1]": 5, "[2]": 3, "[3]": 8}}
``` \n</answer>
"""


def reference_messages(query: str, texts: list[str], max_doc_lens: int = 3000) -> list[dict]:
    """prepare_groups_one_epoch's messages for one group (before the chat template)."""
    doc_texts = [re.sub("\n+", " ", t)[:max_doc_lens] for t in texts]
    docs_str = "".join(["[{}]. {}\n\n".format(idx + 1, doc_text) for idx, doc_text in enumerate(doc_texts)])
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER.format(QUERY=query, PASSAGES=docs_str, TOPK=len(texts))}]


def reference_extract(output_str: str) -> dict:
    """_extract_rerank_output (raises where it raises)."""
    answer_match = re.search(r"<answer>(.*?)</answer>", output_str, re.DOTALL)
    if answer_match:
        output_str = answer_match.group(1).strip()
    json_matches = re.findall(r"(?:```json\s*)([\s\S]+?)(?:\s*```)", output_str)
    json_str = json_matches[-1].strip() if json_matches else re.findall(r"\{[\s\S]*?\}", output_str)[-1]
    json_str = json_str.strip()
    json_str = re.sub(r'(\[\d+\])\]', r'\1', json_str)
    if json_str.count('{') > json_str.count('}'):
        json_str += '}'
    json_str = re.sub(r'\s+', ' ', json_str).replace('\n', ' ').strip()
    return dict(json.loads(json_str))


def reference_group(output_str: str, dids: list[str]) -> list[tuple[str, float]]:
    """rerank_by_group's reading of one answer, its fallback included."""
    try:
        idx_score = reference_extract(output_str)
        return [(dids[int(idx.strip().strip('[]')) - 1], score / 10) for idx, score in idx_score.items()]
    except Exception:
        return [(did, 0) for did in dids]


def reference_merge(did_scores: list, first_stage: dict[str, float], weight: float = 0.4) -> list[str]:
    """avg_scores, the sort by mean, then the interpolation with the retriever's scores, as the code does."""
    scores_by_doc = defaultdict(list)
    for doc_id, score in did_scores:
        scores_by_doc[doc_id].append(score)
    average = [(k, sum(v) / len(v)) for k, v in scores_by_doc.items()]
    ranked = dict(sorted(average, key=lambda item: item[1], reverse=True))
    final = {did: (1 - weight) * ranked[did] + weight * first_stage[did] for did in ranked}
    return list(dict(sorted(final.items(), key=lambda x: x[1], reverse=True)))


def scripted(messages: list[dict], partial: str = "") -> str:
    """An answer scoring each document by its text's length mod 11 (ties on purpose); a group of one
    document gets an answer with no scores (unusable)."""
    blocks = re.findall(r"\[(\d+)\]\. (.*?)\n\n", messages[1]["content"])
    if len(blocks) == 1:
        return "<reason>cannot tell</reason><answer>none</answer>"
    scores = ", ".join(f'"[{i}]": {len(text) % 11}' for i, text in blocks)
    return f"<reason> weighing them </reason>\n<answer> \n```json\n{{{scores}}}\n``` \n</answer>"


def groups_by_rule(doc_ids: list[str], qid: str, seed: int, size: int, interval: int, rounds: int) -> list[list[str]]:
    """The documented grouping: the query's own generator (seeded "SEED:QID") shuffles the list in place
    each round, and a group starts every ``interval`` documents."""
    rng, docs, out = random.Random(f"{seed}:{qid}"), list(doc_ids), []
    for _ in range(rounds):
        rng.shuffle(docs)
        out += [docs[i:i + size] for i in range(0, len(docs), interval)]
    return out


def test_prompts_and_merged_ranking_are_the_reference_codes(evaluate, chat_server, tmp_path):
    """BM25's top 7, groups of 3 every 3 over 2 rounds: the requests are the Diver code's, group by
    group; the run is the order the Diver code's reading, averaging and sorting give for the answers
    (the group of one, unusable, scores 0 as the code's fallback does); a rerun sends nothing."""
    corpus = {d["id"]: d["text"] for d in read_jsonl(SAMPLE / "corpus.jsonl")}
    queries = {q["id"]: q["text"] for q in read_jsonl(SAMPLE / "query.jsonl")}
    chat_server.script = scripted
    options = {"llm": f"{chat_server.url}#AQ-MedAI/Diver-GroupRank-7B", "rerank_k": 7, "group_size": 3,
               "interval": 3, "rounds": 2, "retriever_weight": 0.0, "seed": 5}
    results = evaluate("bm25", "grouprank", **options)
    first = read_ranking(next((tmp_path / "out" / "local-data" / "r2med__bm25").glob("*")) / f"{TASK}.trec")
    reranked = read_ranking(Path(results[TASK].results_dir) / f"{TASK}.trec")

    expected_requests = []
    for qid, docs in first.items():
        top = [d for d, _ in docs[:7]]
        groups = groups_by_rule(top, qid, 5, 3, 3, 2)
        requests = [reference_messages(queries[qid], [corpus[d] for d in g]) for g in groups]
        expected_requests += requests
        did_scores = [s for g, r in zip(groups, requests) for s in reference_group(scripted(r), g)]
        expected = reference_merge(did_scores, dict(docs), weight=0.0)
        assert [d for d, _ in reranked[qid]] == expected
    sent = [r.body["messages"] for r in chat_server.requests]
    # the same group twice (a group of one drawn alike in both rounds) is asked once
    assert sorted(map(repr, sent)) == sorted(set(map(repr, expected_requests)))
    body = chat_server.requests[0].body
    assert (body["model"], body["temperature"], body["top_p"], body["max_tokens"]) == (
        "AQ-MedAI/Diver-GroupRank-7B", 0.3, 0.8, 8000)
    (counts,) = results[TASK].llm_answers.values()
    assert counts == {"answers": 6 * len(first), "unusable": 2 * len(first)}  # each query's two groups of one

    evaluate("bm25", "grouprank", **options, overwrite=True)
    assert chat_server.count == len(sent)  # every group answered from the cache


def test_the_final_score_interpolates_the_first_stage_as_the_code():
    """0.6 x the mean group score + 0.4 x the first stage's score, ties in order of first appearance;
    overlapping groups, the code's repairs ("[4]]", a missing "}" in a json block), a repeated identifier
    counted twice, a document left out, an unusable answer scoring its group 0."""
    from r2med_plugins.rerank.grouprank import group_scores, merge

    first = {"a": 0.91, "b": 0.80, "c": 0.75, "d": 0.70, "e": 0.42, "f": 0.40}
    answers = [(["c", "a", "f", "e"], '<answer>```json\n{"[1]": 7, "[2]": 7, "[3]": 2, "[4]]": 9}\n```</answer>'),
               (["f", "e", "b", "d"], '{"[1]": 3, "[2]": 3, "3": 10, "[4]": 7}'),
               (["b", "d"], '<answer>```json\n{"[1]": 6, "[1] ": 8}\n```</answer>'),
               (["a", "c", "d", "b"], '<reason>x</reason><answer> ```json {"[1]": 4, "[2]": 8 ```</answer>'),
               (["e", "a"], '<answer> {"[1]": 4, "[2]": 8 </answer>')]  # no "}": unusable
    mine = [s for group, text in answers for s in group_scores(text, group) or [(d, 0.0) for d in group]]
    reference = [s for group, text in answers for s in reference_group(text, group)]
    assert mine == reference
    assert merge(list(first), mine, first, 0.4) == reference_merge(reference, first, 0.4)
    assert merge(list(first), mine, first, 0.0) == reference_merge(reference, first, 0.0)


@pytest.mark.parametrize("answer", ["no json here", "<answer>```json\n{\"[4]\": 5}\n```</answer>",
                                    '{"[1]": "high"}', '{"first": 3}', "<answer>[1] > [2]</answer>"])
def test_answers_the_code_cannot_read_score_the_group_zero(answer):
    from r2med_plugins.rerank.grouprank import group_scores

    assert group_scores(answer, ["x", "y", "z"]) is None
    assert reference_group(answer, ["x", "y", "z"]) == [("x", 0), ("y", 0), ("z", 0)]


def test_departures_thinking_identifier_zero_and_unscored_documents():
    """The answer after </think> is read; "[0]" makes the group unusable (the code would score the
    last document); a document no answer scored follows the scored ones, in first-stage order."""
    from r2med_plugins.rerank.grouprank import group_scores, merge

    thought = '<think><answer>{"[1]": 0}</answer></think><answer>{"[1]": 9, "[2]": 1}</answer>'
    assert group_scores(thought, ["x", "y"]) == [("x", 0.9), ("y", 0.1)]
    assert group_scores('{"[0]": 9}', ["x", "y"]) is None
    assert merge(["p", "q", "r"], [("r", 0.5)], {"p": 3.0, "q": 2.0, "r": 1.0}, 0.4) == ["r", "p", "q"]


def test_group_prompt_cuts_as_the_code():
    """Runs of newlines become one space, then each document is cut to max_doc_len characters."""
    from r2med_plugins.rerank.grouprank import group_messages

    texts = ["Line one.\n\n\nLine two [3] here.", "x" * 50 + "\nend"]
    assert group_messages("What helps?", texts, 20) == reference_messages("What helps?", texts, 20)
    assert group_messages("q", texts, 3000) == reference_messages("q", texts)


def test_defaults_names_and_seed_in_the_identity(plugins, tmp_path):
    """Groups of 20 every 20 over 6 rounds (reranker_script.sh's 32B run), the code's sampling and cut;
    the published models by the paper's names; the seed is an option, so it is in the identity."""
    from conftest import dry_run_plan
    from r2med_tasks.running.registry import build_registry

    spec = build_registry(plugins).component("grouprank").spec
    assert {k: spec.defaults[k] for k in ("rerank_k", "group_size", "interval", "rounds", "seed", "max_doc_len",
                                          "retriever_weight", "temperature", "top_p", "max_tokens")} == {
        "rerank_k": 100, "group_size": 20, "interval": 20, "rounds": 6, "seed": 666, "max_doc_len": 3000,
        "retriever_weight": 0.4, "temperature": 0.3, "top_p": 0.8, "max_tokens": 8000}
    plan = dry_run_plan("r2med-run --plugin bm25 --plugin grouprank -o llm=vllm:AQ-MedAI/Diver-GroupRank-32B "
                        "-o seed=7", tmp_path)
    assert plan["pipeline"] == "BM25 + GroupRank(32B)"
    assert plan["results_dirs"][0].endswith("/experiments/grouprank.seed_7")  # another seed, another result
