"""Search-o1's loop (Li et al. 2025), faithful to its reference code: sunnynexus/Search-o1 at
commit 6ced48f, ``scripts/run_search_o1.py`` (the loop), ``scripts/prompts.py`` (the prompts),
``scripts/evaluate.py`` (``extract_answer``) and ``scripts/bing_search.py`` (how a web page is
cut). ``L<n>`` below are line numbers of ``run_search_o1.py`` unless another file is named.

One query runs as the reference runs one sequence of its batch (the ``L<n>`` comments below cite
the reference): generations continue one assistant turn until ``<|end_search_query|>``; a new
query under the limit is searched, its documents read by the Reason-in-Documents step, and what
that step extracts is appended; at most ``max_turns`` generations, the last one's search still run.

Judgment calls:

- **The instruction**: the single-hop open-domain QA family's (``nq``/``triviaqa``). R2MED's queries
  are single questions or cases answered from what the search finds, with no chain of entities to
  resolve: not multi-hop, nor math/GPQA/code (whose prompts ask for a boxed choice or code).
- **The search limit: 5**, as those datasets set it (L199-200), since the instruction tells the
  model the limit. ``-o search_limit=`` changes both.
- **Documents** have no title, URL or snippet: each page's JSON keeps ``id`` and ``context``, and
  with no snippet to find the reference keeps the page's first ``max_doc_len * 2`` characters.
- **Reason-in-Documents** goes through ``turn`` as a turn not yet started, so it carries
  ``max_tokens`` (as the reference passes the loop's) and its own fixed sampling.
- **A server that does not say which stop string ended a generation**: an unclosed
  ``<|begin_search_query|>`` means it stopped at ``<|end_search_query|>``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from r2med_tasks.plugin import Turn

from .agent import AgentResult
from .reasoning import strip_reasoning

NAME = "Search-o1"
# QwQ-32B and DeepSeek-R1 open the thought in the chat template: "<think>" is not in their output
OPENS_THINKING = False
REFERENCE = "https://github.com/sunnynexus/Search-o1/tree/6ced48f"

# run_search_o1.py L39-43
# Define special tokens
BEGIN_SEARCH_QUERY = "<|begin_search_query|>"
END_SEARCH_QUERY = "<|end_search_query|>"
BEGIN_SEARCH_RESULT = "<|begin_search_result|>"
END_SEARCH_RESULT = "<|end_search_result|>"

MAX_DOC_LEN = 3000  # L94-99, L205: characters (extract_snippet_with_context's context_chars)


# -- prompts.py, verbatim ------------------------------------------------------------------------
# prompts.py L69-107
def get_webpage_to_reasonchain_instruction(prev_reasoning, search_query, document):
    return f"""**Task Instruction:**

You are tasked with reading and analyzing web pages based on the following inputs: **Previous Reasoning Steps**, **Current Search Query**, and **Searched Web Pages**. Your objective is to extract relevant and helpful information for **Current Search Query** from the **Searched Web Pages** and seamlessly integrate this information into the **Previous Reasoning Steps** to continue reasoning for the original question.

**Guidelines:**

1. **Analyze the Searched Web Pages:**
- Carefully review the content of each searched web page.
- Identify factual information that is relevant to the **Current Search Query** and can aid in the reasoning process for the original question.

2. **Extract Relevant Information:**
- Select the information from the Searched Web Pages that directly contributes to advancing the **Previous Reasoning Steps**.
- Ensure that the extracted information is accurate and relevant.

3. **Output Format:**
- **If the web pages provide helpful information for current search query:** Present the information beginning with `**Final Information**` as shown below.
**Final Information**

[Helpful information]

- **If the web pages do not provide any helpful information for current search query:** Output the following text.

**Final Information**

No helpful information found.

**Inputs:**
- **Previous Reasoning Steps:**  
{prev_reasoning}

- **Current Search Query:**  
{search_query}

- **Searched Web Pages:**  
{document}

Now you should analyze each web page and find helpful information based on the current search query "{search_query}" and previous reasoning steps.
"""


# prompts.py L110-129
def get_singleqa_search_o1_instruction(MAX_SEARCH_LIMIT):
    return (
        "You are a reasoning assistant with the ability to perform web searches to help "
        "you answer the user's question accurately. You have special tools:\n\n"
        "- To perform a search: write <|begin_search_query|> your query here <|end_search_query|>.\n"
        "Then, the system will search and analyze relevant web pages, then provide you with helpful information in the format <|begin_search_result|> ...search results... <|end_search_result|>.\n\n"
        f"You can repeat the search process multiple times if necessary. The maximum number of search attempts is limited to {MAX_SEARCH_LIMIT}.\n\n"
        "Once you have all the information you need, continue your reasoning.\n\n"
        "Example:\n"
        "Question: \"Who got the first Nobel Prize in Physics?\"\n"
        "Assistant thinking steps:\n"
        "- I need to find out who was awarded the first Nobel Prize in Physics.\n\n"
        "Assistant:\n"
        "<|begin_search_query|>first Nobel Prize in Physics winner<|end_search_query|>\n\n"
        "(System returns processed information from relevant web pages)\n\n"
        "Assistant continues reasoning with the new information...\n\n"
        "Remember:\n"
        "- Use <|begin_search_query|> to request a web search and end with <|end_search_query|>.\n"
        "- When done searching, continue your reasoning.\n\n"
    )


# prompts.py L357-370
def get_task_instruction_openqa(question, model_name=None):
    if model_name == 'qwq':
        user_prompt = (
            'Please answer the following question. '
            'You should provide your final answer in the format \\boxed{YOUR_ANSWER}.\n\n'
            f'Question:\n{question}\n\n'
        )
    else:
        user_prompt = (
            'Please answer the following question. You should think step by step to solve it.\n\n'
            'Provide your final answer in the format \\boxed{YOUR_ANSWER}.\n\n'
            f'Question:\n{question}\n\n'
        )
    return user_prompt


# -- run_search_o1.py, verbatim where it is text -------------------------------------------------
def limit_message() -> str:
    """L597: the text appended instead of a search over the limit."""
    return f"\n{BEGIN_SEARCH_RESULT}\nThe maximum search limit is exceeded. You are not allowed to search.\n{END_SEARCH_RESULT}\n"


def repeated_message() -> str:
    """L604: the text appended instead of a search already made."""
    return f"\n{BEGIN_SEARCH_RESULT}\nYou have searched this query. Please refer to previous results.\n{END_SEARCH_RESULT}\n"


def search_result(analysis: str) -> str:
    """L668: the text appended after a search, holding what Reason-in-Documents extracted."""
    return f"\n\n{BEGIN_SEARCH_RESULT}{analysis}{END_SEARCH_RESULT}\n\n"


def web_page_header(i: int) -> str:
    """L647: the line before each document's JSON."""
    return f"**Web Page {i + 1}:**\n"


# The templates, concatenated: their hash identifies a run.
PROMPTS = "\n".join([
    get_singleqa_search_o1_instruction("{MAX_SEARCH_LIMIT}"),
    get_task_instruction_openqa("{question}", model_name="qwq"),
    get_task_instruction_openqa("{question}"),
    get_webpage_to_reasonchain_instruction("{prev_reasoning}", "{search_query}", "{document}"),
    limit_message(), repeated_message(), search_result("{analysis}"), "**Web Page {i + 1}:**\n{page as JSON}",
    f"stop: {END_SEARCH_QUERY}", f"max_doc_len: {MAX_DOC_LEN}",
])


# L304-313: the Reason-in-Documents step samples its own way, whatever the model
STEP_SAMPLING = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}


def leaderboard_name(model: str) -> str | None:
    """The leaderboard's names of its Search-O1 LLMs ("QwQ-32b"); None for another model."""
    return {"qwq-32b": "QwQ-32b", "qwen3-32b": "Qwen3-32b"}.get(model.rstrip("/").rpartition("/")[2].lower())


def is_qwq(model: str) -> bool:
    """The reference's switch: ``'qwq' in model_path.lower()`` (L212, L337, L388)."""
    return "qwq" in model.lower()


def defaults(model: str) -> dict[str, Any]:
    """Sampling and limits as run_search_o1.py runs its single-hop QA datasets with ``model``."""
    qwq = is_qwq(model)
    return {
        "temperature": 0.7,  # L124-129
        "top_p": 0.8,  # L131-136
        "top_k": 20,  # L138-143 (top_k_sampling)
        "repetition_penalty": 1.05 if qwq else 1.0,  # L210-212
        "max_tokens": 20480 if qwq else 8192,  # L387-394 (not aime/amc/livecode)
        "seed": None,  # none set
        "max_turns": 15,  # L80-84
        "search_limit": 5,  # L199-200 (nq, triviaqa: the single-hop instruction's datasets)
        "docs": 10,  # L204
    }


def task_prompt(question: str, model: str, search_limit: int) -> str:
    """L333-340, L368: the one user message."""
    instruction = get_singleqa_search_o1_instruction(search_limit)
    if is_qwq(model):
        user_prompt = get_task_instruction_openqa(question, model_name='qwq')
    else:
        user_prompt = get_task_instruction_openqa(question)
    return instruction + user_prompt


# L411-417
# Function to extract text between two tags
def extract_between(text: str, start_tag: str, end_tag: str) -> Optional[str]:
    pattern = re.escape(start_tag) + r"(.*?)" + re.escape(end_tag)
    matches = re.findall(pattern, text, flags=re.DOTALL)
    if matches:
        return matches[-1].strip()
    return None


def truncate_reasoning(output: str) -> str:
    """L565-583: the previous reasoning as "Step i" lines, the first, the last four and any holding
    a search tag kept, the others shown as "..."."""
    all_reasoning_steps = output
    all_reasoning_steps = all_reasoning_steps.replace('\n\n', '\n').split("\n")

    truncated_prev_reasoning = ""
    for i, step in enumerate(all_reasoning_steps):
        truncated_prev_reasoning += f"Step {i + 1}: {step}\n\n"

    prev_steps = truncated_prev_reasoning.split('\n\n')
    if len(prev_steps) <= 5:
        truncated_prev_reasoning = '\n\n'.join(prev_steps)
    else:
        truncated_prev_reasoning = ''
        for i, step in enumerate(prev_steps):
            if i == 0 or i >= len(prev_steps) - 4 or BEGIN_SEARCH_QUERY in step or BEGIN_SEARCH_RESULT in step:
                truncated_prev_reasoning += step + '\n\n'
            else:
                if truncated_prev_reasoning[-len('\n\n...\n\n'):] != '\n\n...\n\n':
                    truncated_prev_reasoning += '...\n\n'
    truncated_prev_reasoning = truncated_prev_reasoning.strip('\n')
    return truncated_prev_reasoning


def format_documents(texts: list[str], max_doc_len: int = MAX_DOC_LEN) -> str:
    """L634-650 for documents that are a text only: each one's rank (``id``) and its first
    ``max_doc_len * 2`` characters (L644, what is left with no snippet to find)."""
    formatted_documents = ""
    for i, raw_context in enumerate(texts):
        # json.dumps({"id": i + 1, "context": ...}, ensure_ascii=False, indent=2) + "\n", written out
        # (tested): json's indenting encoder is pure Python
        formatted_documents += web_page_header(i)
        formatted_documents += ('{\n  "id": ' + str(i + 1) + ',\n  "context": '
                                + json.dumps(raw_context[:max_doc_len * 2], ensure_ascii=False) + "\n}\n")
    return formatted_documents


def extract_info(output: str) -> str:
    """evaluate.py L12-43, ``extract_answer(output, mode='infogen')``."""
    extracted_text = ''
    # Extract content after **Final Information** or **Modified Reasoning Steps**
    pattern_info = "\n**Final Information**"
    pattern_step = "\n**Modified Reasoning Steps**"
    if pattern_info in output:
        extracted_text = output.split(pattern_info)[-1].replace("\n","").strip("```").strip()
    elif pattern_step in output:
        extracted_text = output.split(pattern_step)[-1].strip("```").strip()
    else:
        extracted_text = "No helpful information found."
    return extracted_text


def query_text(output: str) -> str:
    """R2MED's query for a Search-o1 output (src/base.py, ``split_response_for_r1``, qwq-32b)."""
    return strip_reasoning(output, "qwq-32b")


def _stopped_at_query(generation) -> bool:
    """Did ``<|end_search_query|>`` end this generation (so that the reference's text ends with it)?"""
    if generation.stop is not None:
        return generation.stop == END_SEARCH_QUERY
    text = generation.text  # the server did not say: an unclosed query means it stopped there
    return generation.finish_reason == "stop" and text.rfind(BEGIN_SEARCH_QUERY) > text.rfind(END_SEARCH_QUERY)


def _tokens(generation) -> dict[str, int]:
    return {"prompt_tokens": generation.prompt_tokens, "completion_tokens": generation.completion_tokens}


def run(question: str, *, task_key: str, model: str, settings: dict[str, Any], turn, search,
        tokenizer: Any = None) -> AgentResult:
    """One query's Search-o1 loop; ``task_key`` is unused (the reference's prompts do not depend on
    the dataset within its QA family)."""
    max_turns, search_limit = settings["max_turns"], settings["search_limit"]
    docs, max_tokens = settings["docs"], settings.get("max_tokens")
    messages = ({"role": "user", "content": task_prompt(question, model, search_limit)},)
    output = ""
    turns: list[dict] = []
    searches: list[dict] = []
    executed: set[str] = set()
    search_count = 0
    prompt_tokens = completion_tokens = 0
    end = "max_turns"
    for _ in range(max_turns):
        generation = turn(Turn(messages, output, stop=(END_SEARCH_QUERY,), max_tokens=max_tokens))
        text = generation.text + (END_SEARCH_QUERY if _stopped_at_query(generation) else "")
        output += text
        turns.append({"text": generation.text, "stop": generation.stop, "finish_reason": generation.finish_reason,
                      **_tokens(generation)})
        prompt_tokens += generation.prompt_tokens
        completion_tokens += generation.completion_tokens
        search_query = extract_between(text, BEGIN_SEARCH_QUERY, END_SEARCH_QUERY)
        if not (search_query and output.rstrip().endswith(END_SEARCH_QUERY)):  # L532, L610-613
            end = "answer"
            break
        if search_count < search_limit and search_query not in executed:  # L533
            hits = search(search_query, docs)
            prompt = get_webpage_to_reasonchain_instruction(truncate_reasoning(output), search_query,
                                                            format_documents([h.text for h in hits]))
            analysis = turn(Turn(({"role": "user", "content": prompt},), max_tokens=max_tokens), sampling=STEP_SAMPLING)
            info = extract_info(analysis.text)
            search_count += 1
            executed.add(search_query)
            output += search_result(info)
            searches.append({"query": search_query, "ids": [h.id for h in hits], "info": info,
                             "analysis": analysis.text, "finish_reason": analysis.finish_reason, **_tokens(analysis)})
            prompt_tokens += analysis.prompt_tokens
            completion_tokens += analysis.completion_tokens
        elif search_count >= search_limit:  # L596-601
            output += limit_message()
            searches.append({"query": search_query, "message": "over the limit"})
        elif search_query in executed:  # L603-608
            output += repeated_message()
            searches.append({"query": search_query, "message": "repeated"})
    trajectory = {"turns": turns, "searches": searches, "end": end,
                  "tokens": {"prompt": prompt_tokens, "completion": completion_tokens}}
    return AgentResult(output=output, answer=query_text(output), trajectory=trajectory)
