"""Search-R1's loop (PeterGriffinJin/Search-R1 @ a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06), run by
``agent.SearchAgent`` as the ``search-r1`` rewriter.

The reference (``search_r1/llm_agent/generation.py``, ``run_llm_loop``; the comments below cite its
lines): 4 greedy generations of at most 500 tokens, each followed by the environment's step, then
one final generation whose search is not run. A generation is cut after its first ``</search>``,
else after its first ``</answer>``; here ``</search>`` is the request's stop string (greedy
decoding writes the same text up to it) but ``</answer>`` is not, since one before a ``</search>``
does not end the generation. A search appends the top 3 documents in ``<information>``, cut to 500
tokens when the run has the model's tokenizer.

A document's first line is its title, as in the reference's corpus. R2MED's query text is the
first ``<answer>…</answer>`` of the whole text; the invalid-action message itself holds
``<answer> and </answer>``, so after an invalid action that rule gives "and" (as published).

Not reproduced: the rolling prompt's cut to its last 4096 tokens, and batch-level padding.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .agent import AgentResult
from .reasoning import strip_reasoning

NAME = "Search-R1"
# its prompt has the model write "<think>...</think>" itself (Qwen2.5's template opens nothing)
OPENS_THINKING = True
REFERENCE = "PeterGriffinJin/Search-R1@a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06"

# infer.py L20-24 (= scripts/data_process/nq_search.py L32-36), the backslash-newlines joined.
PROMPT = (
    "Answer the given question. "
    "You must conduct reasoning inside <think> and </think> first every time you get new information. "
    "After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query "
    "</search> and it will return the top searched results between <information> and </information>. "
    "You can search as many times as your want. "
    "If you find no further external knowledge needed, you can directly provide the answer inside <answer> and "
    "</answer>, without detailed illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)
# search_r1/llm_agent/generation.py L391: a search's observation (its results stripped)
INFORMATION = "\n\n<information>{results}</information>\n\n"
# generation.py L467 (_passages2string): one document of the results
DOCUMENT = "Doc {i}(Title: {title}) {text}\n"
# generation.py L396-398: the observation after a generation with no action
INVALID_ACTION = ("\nMy previous action is invalid. "
                  "If I want to search, I should put the query between <search> and </search>. "
                  "If I want to give the final answer, I should put the answer between <answer> and </answer>. "
                  "Let me try again.\n")
PROMPTS = PROMPT + INFORMATION + DOCUMENT + INVALID_ACTION

# scripts/nq_hotpotqa/evaluate.sh (data.max_response_length, data.max_obs_length, max_turns,
# retriever.topk)
MAX_RESPONSE_LENGTH = 500
MAX_OBS_LENGTH = 500
MAX_TURNS = 4
TOPK = 3

SEARCH_END = "</search>"
ANSWER_END = "</answer>"
ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)  # generation.py L422-423
# a generation that ends inside an open <search>: the stop string ended it (for servers that do
# not say which did)
_OPEN_SEARCH = re.compile(r"<search>(?:(?!</?search>|</?answer>).)*\Z", re.DOTALL)

# The checkpoints the leaderboard's Search-R1 rows link, as it names their LLMs.
CHECKPOINTS = {
    "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-ppo": "Qwen2.5-7b-it-em-ppo",
    "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-3b-it-em-ppo": "Qwen2.5-3b-it-em-ppo",
}
R2MED_LLM = "qwen-7b-ins"  # the name under which R2MED's base.py extracts Search-R1's answers


def leaderboard_name(model: str) -> str | None:
    """The leaderboard's name for a served checkpoint ("Qwen2.5-7b-it-em-ppo"), by its hub id or
    last path part; None for other models."""
    for hub_id, name in CHECKPOINTS.items():
        if model == hub_id or model.rstrip("/").rpartition("/")[2] == hub_id.rpartition("/")[2]:
            return name
    return None


def defaults(model: str) -> dict[str, Any]:
    """As the reference evaluates every checkpoint (``evaluate.sh``): greedy, 500 tokens a generation,
    4 turns then a final one, the top 3 documents, no search limit."""
    return {"temperature": 0.0, "top_p": None, "top_k": None, "repetition_penalty": None,
            "max_tokens": MAX_RESPONSE_LENGTH, "seed": None,
            "max_turns": MAX_TURNS, "search_limit": None, "docs": TOPK}


def prompt(question: str) -> str:
    """The user message: the question stripped, with a final "?" added when it has none."""
    question = question.strip()
    if not question.endswith("?"):
        question += "?"
    return PROMPT.format(question=question)


def passages(hits) -> str:
    """``_passages2string``: each document as ``Doc {i}(Title: {first line}) {other lines}\\n``."""
    out = ""
    for i, hit in enumerate(hits):
        lines = hit.text.split("\n")
        out += DOCUMENT.format(i=i + 1, title=lines[0], text="\n".join(lines[1:]))
    return out


def information(hits) -> str:
    return INFORMATION.format(results=passages(hits).strip())


def response_text(generation) -> tuple[str, bool]:
    """The generation as the reference keeps it (``_postprocess_responses`` L61-66), and whether the
    ``</search>`` stop was inferred."""
    text = generation.text
    inferred = (generation.stop is None and generation.finish_reason == "stop"
                and _OPEN_SEARCH.search(text) is not None)
    if generation.stop == SEARCH_END or inferred:
        return text + SEARCH_END, inferred
    if ANSWER_END in text:
        return text.split(ANSWER_END)[0] + ANSWER_END, False
    return text, False


def action_of(response: str) -> tuple[str | None, str]:
    """``postprocess_predictions``: the first action, its content stripped; (None, "") for none."""
    match = ACTION.search(response)
    return (match.group(1), match.group(2).strip()) if match else (None, "")


def answer_of(output: str) -> str:
    """R2MED's query text from the whole assistant text (``split_response_for_r1``)."""
    return strip_reasoning(output, R2MED_LLM)


def cut_observation(text: str, tokenizer, limit: int = MAX_OBS_LENGTH) -> tuple[str, bool]:
    """``_process_next_obs``: the observation's first ``limit`` tokens; unchanged without a tokenizer."""
    if tokenizer is None:
        return text, False
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if len(ids) <= limit:
        return text, False
    return tokenizer.decode(ids[:limit]), True


def run(question: str, *, task_key: str, model: str, settings: dict, turn: Callable, search: Callable,
        tokenizer: Any = None) -> AgentResult:
    """One query's loop (``run_llm_loop`` for one question). A search over ``search_limit`` is
    answered as the final turn's would be, with an empty ``<information>``."""
    from r2med_tasks.plugin import Turn

    def setting(name: str, default):
        value = settings.get(name)
        return default if value is None else value

    max_turns, docs = setting("max_turns", MAX_TURNS), setting("docs", TOPK)
    max_tokens, limit = setting("max_tokens", MAX_RESPONSE_LENGTH), settings.get("search_limit")
    messages = ({"role": "user", "content": prompt(question)},)
    output = ""
    turns: list[dict] = []
    searches: list[dict] = []
    tokens = {"prompt": 0, "completion": 0}
    ended = "final turn"
    for step in range(max_turns + 1):
        final = step == max_turns
        generation = turn(Turn(messages, output, stop=(SEARCH_END,), max_tokens=max_tokens))
        response, inferred = response_text(generation)
        action, content = action_of(response)
        output += response
        tokens["prompt"] += generation.prompt_tokens
        tokens["completion"] += generation.completion_tokens
        record = {"text": response, "stop": generation.stop, "finish_reason": generation.finish_reason,
                  "prompt_tokens": generation.prompt_tokens, "completion_tokens": generation.completion_tokens,
                  "action": action, "content": content if action else None, "final": final}
        if inferred:
            record["stop_inferred"] = True
        turns.append(record)
        if action == "answer":
            ended = "answer"
            break
        if final:  # the reference's last rollout: its search is not run, nothing is appended
            if action == "search":
                searches.append({"query": content, "message": "not run: the final turn"})
            break
        if action == "search":
            if limit is not None and sum("ids" in s for s in searches) >= limit:
                searches.append({"query": content, "message": f"over the search limit ({limit})"})
                observation = INFORMATION.format(results="")
            else:
                hits = search(content, docs)
                searches.append({"query": content, "ids": [h.id for h in hits]})
                observation = information(hits)
        else:
            observation = INVALID_ACTION
        observation, cut = cut_observation(observation, tokenizer)
        record["observation"] = "information" if action == "search" else "invalid action"
        if cut:
            record["observation_cut"] = True
        output += observation
    trajectory = {"turns": turns, "searches": searches, "tokens": tokens, "ended": ended,
                  "observation_limit": MAX_OBS_LENGTH if tokenizer is not None else None,
                  "reference": REFERENCE}
    return AgentResult(output=output, answer=answer_of(output), trajectory=trajectory)
