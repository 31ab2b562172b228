"""Reasoning-trace stripping and query construction for R2MED's published GAR runs, reproducing
R2MED/R2MED @45cbac5: ``src/base.py`` (``r1_model_list``, ``split_response_for_r1``) and the
``load_retrieval_data`` of ``src/eval_bench_BM25.py`` and ``src/eval_bench.py``.

Quirks reproduced on purpose:

1. BM25 + HyDE drops the original query: the BM25 query is ``hy_doc`` alone.
2. BM25 + Query2Doc uses ``text*2 + " " + hy_doc``: two copies of the query glued together with
   **no** separator between them (Python string repetition).
3. In "r1 mode" (the LLM is in ``r1_model_list``) BM25 uses the extracted answer **only**, for
   every method, query2doc and lamer included; dense uses ``[text, answer]`` for every method,
   so query2doc loses its ``[SEP]`` form there.
4. ``split_response_for_r1`` strips the extracted answer, but returns the *unstripped* whole text
   when its marker is missing.
"""

from __future__ import annotations

import re

from r2med_tasks.plugin import Query

__all__ = [
    "R1_MODEL_LIST",
    "THINK_TAG_LLMS",
    "HUATUO_LLMS",
    "SKY_LLMS",
    "SEARCH_R1_LLMS",
    "is_reasoning_llm",
    "strip_reasoning",
    "query_text",
]

# src/base.py, line 3-4 (verbatim order):
# r1_model_list = ["r1-llama-8b", "r1-qwen-32b", "r1-llama-70b", "qwq-32b", "huatuo-o1-8b", "huatuo-o1-70b",
#                  "sky-32b", "qwen3-32b", "qwen3-8b", "qwen-7b-ins", "qwen-3b-ins"]
R1_MODEL_LIST: tuple[str, ...] = (
    "r1-llama-8b",
    "r1-qwen-32b",
    "r1-llama-70b",
    "qwq-32b",
    "huatuo-o1-8b",
    "huatuo-o1-70b",
    "sky-32b",
    "qwen3-32b",
    "qwen3-8b",
    "qwen-7b-ins",
    "qwen-3b-ins",
)

# The four branches of src/base.py::split_response_for_r1.
# Branch 1: text after the first "</think>".
THINK_TAG_LLMS: tuple[str, ...] = (
    "r1-llama-8b",
    "r1-qwen-32b",
    "r1-llama-70b",
    "qwq-32b",
    "qwen3-32b",
    "qwen3-8b",
)
# Branch 2: HuatuoGPT-o1 "## Thinking ... ## Final Response ..." format.
HUATUO_LLMS: tuple[str, ...] = ("huatuo-o1-8b", "huatuo-o1-70b")
# Branch 3: Sky-T1 "<|begin_of_solution|> ... <|end_of_solution|>" format.
SKY_LLMS: tuple[str, ...] = ("sky-32b",)
# Branch 4: Search-R1 (Qwen2.5-{3,7}B-it-em-ppo) "<answer> ... </answer>" format.
SEARCH_R1_LLMS: tuple[str, ...] = ("qwen-7b-ins", "qwen-3b-ins")

# Regexes copied verbatim from src/base.py (same flags); its "thinking" regexes only fill an unused
# variable.
_HUATUO_RESPONSE = re.compile(r"Final Response\s*(.*)", re.DOTALL)
_SKY_SOLUTION = re.compile(r"<\|begin_of_solution\|>\s*([\s\S]*?)\s*<\|end_of_solution\|>")
_SEARCH_R1_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def is_reasoning_llm(llm: str) -> bool:
    """``gar_llm in r1_model_list``: API reasoning models (``o3-mini``, ``deepseek-r1``) are *not* in
    it, as their API returns only the final answer."""
    return llm in R1_MODEL_LIST


def strip_reasoning(text: str, llm: str) -> str:
    """Reproduce ``src/base.py::split_response_for_r1(model=llm, text=text)``.

    * r1-* / qwq-32b / qwen3-*: ``text.split("</think>", 1)[1].strip()``; if there is no
      ``</think>`` the whole text is returned **unstripped** (the upstream ``except`` branch).
    * huatuo-o1-*: ``re.search(r"Final Response\\s*(.*)", text, re.DOTALL).group(1).strip()``
      (first occurrence, greedy to the end); whole text, unstripped, if no match.  An empty
      match yields ``""``.
    * sky-32b: the first non-greedy ``<|begin_of_solution|> ... <|end_of_solution|>`` span,
      stripped; whole text if either tag is missing.
    * qwen-7b-ins / qwen-3b-ins (Search-R1): the first ``<answer>(.*?)</answer>`` span
      (DOTALL), stripped; whole text, unstripped, if there is none.
    * any other LLM (gpt4, qwen-7b, ...): ``text`` unchanged.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    if llm in THINK_TAG_LLMS:
        head, sep, tail = text.partition("</think>")
        if not sep:
            return text
        return tail.strip()
    if llm in HUATUO_LLMS:
        match = _HUATUO_RESPONSE.search(text)
        return match.group(1).strip() if match else text
    if llm in SKY_LLMS:
        match = _SKY_SOLUTION.search(text)
        return match.group(1).strip() if match else text
    if llm in SEARCH_R1_LLMS:
        answers = _SEARCH_R1_ANSWER.findall(text)
        return answers[0].strip() if answers else text
    return text


def query_text(
    method: str,
    retriever_family: str,
    query: str,
    generated: str,
    llm: str,
) -> str | list[str]:
    """The retrieval-time query for one GAR query, exactly as the published runs built it.

    BM25 (``src/eval_bench_BM25.py``), a single string:

    ========================  ==========================================
    r1 mode, any method       ``strip_reasoning(generated, llm)`` only
    query2doc                 ``query*2 + " " + generated``
    lamer                     ``query + " " + generated``
    hyde (and anything else)  ``generated`` only -- the query is dropped
    ========================  ==========================================

    Dense (``src/eval_bench.py``); a ``list`` means "encode both, average the embeddings" (the
    wrappers in ``src/utils.py`` return ``(E(instruction + text) + E(x)) / 2``):

    ========================  ==================================================
    r1 mode, any method       ``[query, strip_reasoning(generated, llm)]``
    query2doc                 ``query + "[SEP]" + generated`` (one string, no spaces)
    hyde / lamer / other      ``[query, generated]``
    ========================  ==================================================
    """
    from . import METHODS  # the package's: it imports this module

    if method not in METHODS:
        raise ValueError(f"unknown GAR method {method!r}; expected one of {tuple(METHODS)}")
    r1_mode = is_reasoning_llm(llm)
    answer = strip_reasoning(generated, llm) if r1_mode else generated
    combined = Query("", query, (answer,), method, reasoning=r1_mode).combined(retriever_family)
    return list(combined) if isinstance(combined, tuple) else combined
