"""Search-R1's loop (PeterGriffinJin/Search-R1 @ a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06), run by
``agent.SearchAgent`` as the ``search-r1`` rewriter.

What the reference does, and where (line numbers at that commit):

- the prompt: ``infer.py`` L20-24, the same text as the training prompt of
  ``scripts/data_process/nq_search.py`` L32-36, after the question is stripped and given a final
  "?" when it has none (``nq_search.py`` L61-63, ``infer.py`` L13-15); one user message, which the
  model's (Qwen2.5) chat template renders with the generation prompt
  (``verl/utils/dataset/rl_dataset.py`` L128-129, ``infer.py`` L89): in chat mode the server
  applies it, in completions mode the client renders it from ``-o template=``;
- the loop (``search_r1/llm_agent/generation.py``, ``run_llm_loop`` L220-319): ``max_turns``
  (4: ``scripts/nq_hotpotqa/evaluate.sh``) generations, each followed by the environment's step
  (``execute_predictions`` L353-405), then, when the model has not answered, one final generation
  whose search is not run and whose observation is not appended (L278-310, ``do_search=False``);
- a generation: up to ``max_response_length`` = 500 tokens (``evaluate.sh``
  ``data.max_response_length=500``), greedy in evaluation (``ray_trainer.py`` L508
  ``do_sample: False``, which ``verl/workers/rollout/vllm_rollout/vllm_rollout.py`` L162-171
  turns into temperature 0, top_p 1, top_k -1), no stop string (L105-119: ``max_tokens`` only);
  the text is then cut after the first ``</search>``, else after the first ``</answer>``
  (``_postprocess_responses`` L61-66). Here ``</search>`` is the request's stop
  string (the text up to it is what greedy decoding writes either way; ``Generation.text``
  leaves it out, so it is appended back) and the ``</answer>`` cut is applied to the text, in
  the reference's order: a ``</answer>`` before a ``</search>`` in one generation does not end
  it (the reference keeps the text up to the ``</search>``), so ``</answer>`` is no stop string;
- the action: the first ``<(search|answer)>(.*?)</\\1>`` match (DOTALL) of the generation, its
  content stripped (``postprocess_predictions`` L420-428); none is an invalid action;
- the observations (L385-401): an answer ends the loop; a search appends
  ``\\n\\n<information>{results}</information>\\n\\n`` with the top ``topk`` = 3 documents
  (``GenerationConfig`` L23, ``evaluate.sh`` ``retriever.topk=3``) formatted by
  ``_passages2string`` (L460-469: ``Doc {i}(Title: {first line}) {other lines}\\n`` each) and
  stripped; an invalid action appends the message of L396-398;
- observations longer than ``max_obs_length`` = 500 tokens are cut to their first 500
  (``_process_next_obs`` L80-89): done when ``run`` is given the model's tokenizer, else not.

R2MED's documents have an id and a text only: as the reference does with its corpus's
``contents`` (a ``"Title"`` first line, then the text), the first line of a document's text is
its title and the other lines its text (a one-line document is all title, with an empty text).

R2MED's query text (``src/base.py`` ``split_response_for_r1`` for ``qwen-7b-ins`` and
``qwen-3b-ins``): the first ``<answer>…</answer>`` of the whole assistant text, stripped; all of
that text, as it is, when there is none. The invalid-action message itself holds
``<answer> and </answer>``: after an invalid action that rule gives "and", whatever the model
answers later (the trajectory keeps each turn's action content).

Not reproduced: the reference's token-level cuts of the whole context (the rolling prompt kept to
its last ``max_prompt_length`` = 4096 tokens, L107-115) and its batch-level effects (padding to
the batch's longest observation).
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
# a generation that ends inside an open <search>: the stop string ended it (servers that do not
# say which stop string did: finish_reason "stop" only)
_OPEN_SEARCH = re.compile(r"<search>(?:(?!</?search>|</?answer>).)*\Z", re.DOTALL)

# The checkpoints the leaderboard's Search-R1 rows link, as it names their LLMs.
CHECKPOINTS = {
    "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-ppo": "Qwen2.5-7b-it-em-ppo",
    "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-3b-it-em-ppo": "Qwen2.5-3b-it-em-ppo",
}
R2MED_LLM = "qwen-7b-ins"  # the name under which R2MED's base.py extracts Search-R1's answers (3b: the same rule)


def leaderboard_name(model: str) -> str | None:
    """The leaderboard's name for a served checkpoint ("Qwen2.5-7b-it-em-ppo"), by its hub id or
    its last path part (a local folder, a ``--served-model-name`` without the owner); None for
    other models."""
    for hub_id, name in CHECKPOINTS.items():
        if model == hub_id or model.rstrip("/").rpartition("/")[2] == hub_id.rpartition("/")[2]:
            return name
    return None


def defaults(model: str) -> dict[str, Any]:
    """As the reference evaluates every checkpoint: greedy (temperature 0; top_p 1 and top_k -1,
    vLLM's defaults, are not sent), 500 tokens a generation, 4 turns then a final one, the top 3
    documents, no search limit."""
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
    """The generation as the reference keeps it (``_postprocess_responses``): up to and with its
    first ``</search>``, else its first ``</answer>``, else whole; and whether the ``</search>``
    stop was inferred (the server did not name the stop string)."""
    text = generation.text
    inferred = (generation.stop is None and generation.finish_reason == "stop"
                and _OPEN_SEARCH.search(text) is not None)
    if generation.stop == SEARCH_END or inferred:
        return text + SEARCH_END, inferred
    if ANSWER_END in text:
        return text.split(ANSWER_END)[0] + ANSWER_END, False
    return text, False


def action_of(response: str) -> tuple[str | None, str]:
    """``postprocess_predictions``: the first ``<search>…</search>`` or ``<answer>…</answer>``,
    its content stripped; (None, "") when there is none."""
    match = ACTION.search(response)
    return (match.group(1), match.group(2).strip()) if match else (None, "")


def answer_of(output: str) -> str:
    """R2MED's query text from the whole assistant text (``split_response_for_r1``)."""
    return strip_reasoning(output, R2MED_LLM)


def cut_observation(text: str, tokenizer, limit: int = MAX_OBS_LENGTH) -> tuple[str, bool]:
    """``_process_next_obs``: the observation's first ``limit`` tokens (tokenized without special
    tokens); unchanged without a tokenizer."""
    if tokenizer is None:
        return text, False
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if len(ids) <= limit:
        return text, False
    return tokenizer.decode(ids[:limit]), True


def run(question: str, *, task_key: str, model: str, settings: dict, turn: Callable, search: Callable,
        tokenizer: Any = None) -> AgentResult:
    """One query's loop (``run_llm_loop`` for one question). ``settings``: ``max_turns`` (turns
    whose searches are run; one final turn follows), ``search_limit`` (None: none, as the
    reference; a search over it is answered as the final turn's would be, an empty
    ``<information>``), ``docs`` (documents a search returns), ``max_tokens`` (a generation's).
    ``tokenizer`` (optional, the model's): observations are cut to ``MAX_OBS_LENGTH`` tokens."""
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
