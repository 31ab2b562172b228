"""Prompts, chat messages and sampling settings of R2MED's published generation (GAR) runs, copied
from R2MED/R2MED @45cbac5 (``src/instrcution.py`` (sic), ``src/generate_hypothetical_doc.py``).

**Query2Doc's few-shot examples are not part of this package** (they are the authors' prose): the
exact outer template is kept here and the examples come from the authors' ``src/example.py`` at run
time (:mod:`.query2doc_examples`).

The prompt builders take the query *text* only, as upstream: the ``doc_id`` and ``answer`` fields
of ``query.jsonl`` never reach a prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .reasoning import is_reasoning_llm

__all__ = [
    "DATASET_KEYS",
    "HUB_NAME_TO_KEY",
    "METHODS",
    "SYSTEM_PROMPT",
    "SKY_SYSTEM_PROMPT",
    "HYDE_TEMPLATES",
    "QUERY2DOC_OUTER_TEMPLATES",
    "LAMER_TEMPLATES",
    "QUERY2DOC_EXAMPLES",
    "LAMER_TOP_K",
    "LAMER_MAX_WORDS",
    "SAMPLING",
    "API_LLMS",
    "VLLM_ENGINE",
    "MODEL_DICT",
    "PublishedLLM",
    "PUBLISHED_LLMS",
    "Query2DocExamplesUnavailable",
    "resolve_key",
    "cut_text",
    "format_lamer_passages",
    "query2doc_template",
    "build_prompt",
    "build_messages",
    "system_prompt",
    "backend",
    "sampling_params",
    "chat_template_kwargs",
]

# ---------------------------------------------------------------------------------------------
# Dataset keys
# ---------------------------------------------------------------------------------------------

# src/generate_hypothetical_doc.py: task_names (this order; the prompt dicts use these keys).
DATASET_KEYS: tuple[str, ...] = (
    "Stack-Biology",
    "Stack-Medical",
    "Stack-Bioinformatics",
    "MedXpertQA-Exam",
    "MedQA-Diag",
    "PMC-Treat",
    "PMCPatients",
    "IIYiPatients-EN",
)

# Hub / mteb dataset names -> the internal keys above, which the released code indexes by.
HUB_NAME_TO_KEY: dict[str, str] = {
    "Biology": "Stack-Biology",
    "Bioinformatics": "Stack-Bioinformatics",
    "Medical-Sciences": "Stack-Medical",
    "MedXpertQA-Exam": "MedXpertQA-Exam",
    "MedQA-Diag": "MedQA-Diag",
    "PMC-Treatment": "PMC-Treat",
    "PMC-Clinical": "PMCPatients",
    "IIYi-Clinical": "IIYiPatients-EN",
}

METHODS: tuple[str, ...] = ("hyde", "query2doc", "lamer")

# ---------------------------------------------------------------------------------------------
# System prompts
# ---------------------------------------------------------------------------------------------

# src/generate_hypothetical_doc.py: both generate_func_by_gpt.process (API) and
# generate_func.process (vLLM) send {"role": "system", "content": "You are a helpful assistant."}
SYSTEM_PROMPT = "You are a helpful assistant."

# src/instrcution.py: SkyAI_system_prompt, for model == "sky-32b". Copied with the same
# backslash-newline continuations, so the value is identical.
SKY_SYSTEM_PROMPT = "Your role as an assistant involves thoroughly exploring questions through a systematic long \
thinking process before providing the final precise and accurate solutions. This requires \
engaging in a comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, \
backtracing, and iteration to develop well-considered thinking process. \
Please structure your response into two main sections: Thought and Solution. \
In the Thought section, detail your reasoning process using the specified format: \
<|begin_of_thought|> {thought with steps separated with '\n\n'} \
<|end_of_thought|> \
Each step should include detailed considerations such as analisying questions, summarizing \
relevant findings, brainstorming new ideas, verifying the accuracy of the current steps, refining \
any errors, and revisiting previous steps. \
In the Solution section, based on various attempts, explorations, and reflections from the Thought \
section, systematically present the final solution that you deem correct. The solution should \
remain a logical, accurate, concise expression style and detail necessary step needed to reach the \
conclusion, formatted as follows: \
<|begin_of_solution|> \
{final formatted, precise, and clear solution} \
<|end_of_solution|> \
Now, try to solve the following question through the above guidelines:"

# ---------------------------------------------------------------------------------------------
# Prompt templates
# ---------------------------------------------------------------------------------------------

# src/instrcution.py: hyde (verbatim).  Filled with .format(TEXT=query_text).
HYDE_TEMPLATES: dict[str, str] = {
    "Stack-Biology": "Please write a passage to help answer the Biology post.\nPost: {TEXT}\nPassage: ",
    "Stack-Medical": "Please write a passage to help answer the Medical Science post.\nPost: {TEXT}\nPassage: ",
    "Stack-Bioinformatics": "Please write a passage to help answer the Bioinformatics post.\nPost: {TEXT}\nPassage: ",
    "MedXpertQA-Exam": "Please write a passage to help answer the Medical Exam.\nExam: {TEXT}\nPassage: ",
    "MedQA-Diag": "Please write a passage to help answer the Medical Exam.\nExam: {TEXT}\nPassage: ",
    "PMC-Treat": "Please write a passage to help answer the Clinical Case.\nCase: {TEXT}\nPassage: ",
    "PMCPatients": "Please write a similar case to help diagnose the Clinical Case.\nCase: {TEXT}\nSimilar Case: ",
    "IIYiPatients-EN": "Please write a similar case to help diagnose the Clinical Case.\nCase: {TEXT}\nSimilar Case: ",
}

# src/instrcution.py: query2doc, the string literals *before* .format(EXAMPLE=Example[key],
# TEXT="{TEXT}") (verbatim).  Note the upstream wording quirk: only Stack-Biology says
# "that help answer", every other key says "to help answer".
QUERY2DOC_OUTER_TEMPLATES: dict[str, str] = {
    "Stack-Biology": "Write a passage that help answer the Biology post.\n\n###Examples:###\n{EXAMPLE}\n\n###Real Test:###\nPost: {TEXT}\nPassage: ",
    "Stack-Medical": "Write a passage to help answer the Medical Science post.\n\n###Examples:###\n{EXAMPLE}\n\n###Real Test:###\nPost: {TEXT}\nPassage: ",
    "Stack-Bioinformatics": "Write a passage to help answer the Bioinformatics post.\n\n###Examples:###\n{EXAMPLE}\n\n###Real Test:###\nPost: {TEXT}\nPassage: ",
    "MedXpertQA-Exam": "Write a passage to help answer the Medical Exam.\n\n###Examples:###\n{EXAMPLE}\n\n###Real Test:###\nExam: {TEXT}\nPassage: ",
    "MedQA-Diag": "Write a passage to help answer the Medical Exam.\n\n###Examples:###\n{EXAMPLE}\n\n###Real Test:###\nExam: {TEXT}\nPassage: ",
    "PMC-Treat": "Write a passage to help answer the Clinical Case.\n\n###Examples:###\n{EXAMPLE}\n\n###Real Test:###\nCase: {TEXT}\nPassage: ",
    "PMCPatients": "Write a similar case to help diagnose the Clinical Case.\n\n###Examples:###\n{EXAMPLE}\n\n###Real Test:###\nCase: {TEXT}\nSimilar Case: ",
    "IIYiPatients-EN": "Write a similar case to help diagnose the Clinical Case.\n\n###Examples:###\n{EXAMPLE}\n\n###Real Test:###\nCase: {TEXT}\nSimilar Case: ",
}

# src/instrcution.py: lamer (verbatim).  Filled with .format(TEXT=query_text, PASSAGE=block)
# where block is format_lamer_passages(top-10 BM25 texts); it starts with "\n", so the prompt
# reads "...Passages: \n[1]. ...".
LAMER_TEMPLATES: dict[str, str] = {
    "Stack-Biology": "Give a Biology post and its possible relevant passages (most of these passages are wrong). Please write a correct passage that help answer the post.\nJust output the correct passage, don't explanation.\n\nPost: {TEXT}\n\nPossible Relevant Passages: {PASSAGE}",
    "Stack-Medical": "Give a Medical Science post and its possible relevant passages (most of these passages are wrong). Please write a correct passage that help answer the post.\nJust output the correct passage, don't explanation.\n\nPost: {TEXT}\n\nPossible Relevant Passages: {PASSAGE}",
    "Stack-Bioinformatics": "Give a Bioinformatics post and its possible relevant passages (most of these passages are wrong). Please write a correct passage that help answer the post.\nJust output the correct passage, don't explanation.\n\nPost: {TEXT}\n\nPossible Relevant Passages: {PASSAGE}",
    "MedXpertQA-Exam": "Give a Medical Exam and its possible relevant passages (most of these passages are wrong). Please write a correct passage that help answer the exam.\nJust output the correct passage, don't explanation.\n\nExam: {TEXT}\n\nPossible Relevant Passages: {PASSAGE}",
    "MedQA-Diag": "Give a Medical Exam and its possible relevant passages (most of these passages are wrong). Please write a correct passage that help answer the exam.\nJust output the correct passage, don't explanation.\n\nExam: {TEXT}\n\nPossible Relevant Passages: {PASSAGE}",
    "PMC-Treat": "Give a Clinical Case and its possible relevant passages (most of these passages are wrong). Please write a correct passage that help answer the case.\nJust output the correct passage, don't explanation.\n\nCase: {TEXT}\n\nPossible Relevant Passages: {PASSAGE}",
    "PMCPatients": "Give a Clinical Case and its possible similar cases (most of these cases are non-similar). Please write a correct similar case that help diagnose the case.\nJust output the correct case, don't explanation.\n\nCase: {TEXT}\n\nPossible Similar Cases: {PASSAGE}",
    "IIYiPatients-EN": "Give a Clinical Case and its possible similar cases (most of these cases are non-similar). Please write a correct similar case that help diagnose the case.\nJust output the correct case, don't explanation.\n\nCase: {TEXT}\n\nPossible Similar Cases: {PASSAGE}",
}

# src/example.py: Example -- shipped as data (query2doc_examples.shipped_query2doc_examples), passed as
# examples=; left empty here so that a prompt never silently takes examples it was not given.
QUERY2DOC_EXAMPLES: dict[str, str] = {}

# src/generate_hypothetical_doc.py: read_data -- e["topk_pid"][:10] from
# ./topk_docs/BM25/{task}.jsonl (BM25 run, see spec §2.1 save_top_k), cut_text(threshold=512).
LAMER_TOP_K = 10
LAMER_MAX_WORDS = 512

# ---------------------------------------------------------------------------------------------
# Sampling and models
# ---------------------------------------------------------------------------------------------

# src/generate_hypothetical_doc.py.
#  "api":  generate_func_by_gpt(temperature=0.8, top_p=0.8) -> chat.completions.create(
#          messages=[system, user], model=..., temperature=0.8, top_p=0.8); no max_tokens, no
#          seed, one completion per query, choices[0].message.content written raw as hy_doc.
#  "vllm": SamplingParams(temperature=0.7, seed=42, max_tokens=10240) (seed = 42 module global);
#          vLLM defaults for everything else (top_p=1.0, n=1, ...); outputs[0].text written raw.
SAMPLING: dict[str, dict[str, Any]] = {
    "api": {"temperature": 0.8, "top_p": 0.8},
    "vllm": {"temperature": 0.7, "seed": 42, "max_tokens": 10240},
}

# src/generate_hypothetical_doc.py: `if model in ["gpt4", "deepseek-r1", "o1-mini"]` selects the
# OpenAI client. "o3-mini" is not in it, although hyde/o3-mini results exist: it can only be an API
# model. OpenAI rejects non-default temperature/top_p for o-series models, so its effective
# sampling is unknown (the runs went through a proxy).
API_LLMS: tuple[str, ...] = ("gpt4", "deepseek-r1", "o1-mini", "o3-mini")

# src/generate_hypothetical_doc.py: LLM(model=path, tensor_parallel_size=4,
# disable_custom_all_reduce=True, trust_remote_code=True, gpu_memory_utilization=0.85), prompts
# sent in batches of 32 (llm.generate(batch_text, sampling_params, use_tqdm=False)).  The README
# pins vllm==0.5.4, transformers==4.44.2.
VLLM_ENGINE: dict[str, Any] = {
    "tensor_parallel_size": 4,
    "disable_custom_all_reduce": True,
    "trust_remote_code": True,
    "gpu_memory_utilization": 0.85,
    "batch_size": 32,
}

# src/generate_hypothetical_doc.py: model_dict (local paths reduced to their "<org>/<name>"
# tail; "LLM-Research" is the ModelScope org of Meta's Llama 3.1 weights).
MODEL_DICT: dict[str, str] = {
    "qwen-7b": "Qwen/Qwen2.5-7B-Instruct",
    "qwen-32b": "Qwen/Qwen2.5-32B-Instruct",
    "qwen-72b": "Qwen/Qwen2.5-72B-Instruct",
    "llama-8b": "LLM-Research/Meta-Llama-3.1-8B-Instruct",
    "llama-70b": "LLM-Research/Meta-Llama-3.1-70B-Instruct",
    "gpt4": "gpt-4o-2024-11-20",
    "o1-mini": "o1-mini-2024-09-12",
    "r1-llama-8b": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    "r1-qwen-32b": "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "r1-llama-70b": "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
    "huatuo-o1-8b": "FreedomIntelligence/HuatuoGPT-o1-8B",
    "huatuo-o1-70b": "FreedomIntelligence/HuatuoGPT-o1-70B",
    "qwq-32b": "Qwen/QwQ-32B",
    "m1-7b": "UCSC-VLAA/m1-7B-23K",
    "sky-32b": "NovaSky-AI/Sky-T1-32B-Preview",
    "deepseek-r1": "DeepSeek-R1",
    "qwen3-8b-no-thinking": "Qwen/Qwen3-8B",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-32b-no-thinking": "Qwen/Qwen3-32B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "searchr1-qwen-7b": "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-ppo",
}


@dataclass(frozen=True)
class PublishedLLM:
    """One LLM of the published GAR runs (``results/gar/<method>/<name>/...`` in the repo)."""

    name: str  # the repo's short name (gar_llm)
    model_id: str  # HF id / API model name
    backend: str  # "api" or "vllm"; "external" for search-o1 / search-r1 agent frameworks
    r1_mode: bool  # name in r1_model_list -> reasoning stripped at retrieval time
    methods: tuple[str, ...]  # gar methods with results under results/gar/ at the indexed commit
    note: str = ""


def _published(name: str, model_id: str, backend: str, methods: tuple[str, ...], note: str = "") -> PublishedLLM:
    return PublishedLLM(name, model_id, backend, is_reasoning_llm(name), methods, note)


# results/gar/<method>/<llm>/ at the indexed commit (hyde: 10 LLMs; query2doc and lamer: 3;
# search-o1: 2; search-r1: 2), model ids from model_dict unless noted.
PUBLISHED_LLMS: dict[str, PublishedLLM] = {
    p.name: p
    for p in (
        _published("gpt4", "gpt-4o-2024-11-20", "api", ("hyde", "query2doc", "lamer")),
        _published(
            "o3-mini", "o3-mini", "api", ("hyde",),
            "not in model_dict at the indexed commit; snapshot and effective sampling unknown",
        ),
        _published("qwen-7b", "Qwen/Qwen2.5-7B-Instruct", "vllm", ("hyde", "query2doc", "lamer")),
        _published("qwen-32b", "Qwen/Qwen2.5-32B-Instruct", "vllm", ("hyde",)),
        _published("qwen-72b", "Qwen/Qwen2.5-72B-Instruct", "vllm", ("hyde", "query2doc", "lamer")),
        _published("llama-70b", "meta-llama/Meta-Llama-3.1-70B-Instruct", "vllm", ("hyde",)),
        _published("r1-qwen-32b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "vllm", ("hyde",)),
        _published("r1-llama-70b", "deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "vllm", ("hyde",)),
        _published("huatuo-o1-70b", "FreedomIntelligence/HuatuoGPT-o1-70B", "vllm", ("hyde",)),
        _published(
            "qwq-32b", "Qwen/QwQ-32B", "vllm", ("hyde", "search-o1"),
            "search-o1 documents come from the external Search-o1 agent, not from these prompts",
        ),
        _published(
            "qwen3-32b", "Qwen/Qwen3-32B", "external", ("search-o1",),
            "Search-o1 agent; no generation prompt in the repo",
        ),
        _published(
            "qwen-7b-ins", "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-ppo", "external",
            ("search-r1",), "Search-R1 agent; model id = model_dict['searchr1-qwen-7b']",
        ),
        _published(
            "qwen-3b-ins", "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-3b-it-em-ppo", "external",
            ("search-r1",), "Search-R1 agent; model id inferred from the leaderboard name, not in the code",
        ),
    )
}


class Query2DocExamplesUnavailable(LookupError):
    """A Query2Doc prompt without the upstream few-shot examples."""


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def resolve_key(name: str) -> str:
    """An internal dataset key (``"PMCPatients"``) from itself or a hub name (``"PMC-Clinical"``)."""
    if name in DATASET_KEYS:
        return name
    if name in HUB_NAME_TO_KEY:
        return HUB_NAME_TO_KEY[name]
    raise KeyError(
        f"unknown R2MED dataset {name!r}; expected one of {DATASET_KEYS} or {tuple(HUB_NAME_TO_KEY)}"
    )


def cut_text(text: str, threshold: int = LAMER_MAX_WORDS) -> str:
    """``generate_func.cut_text``: ``" ".join(text.split()[:threshold])``, so whitespace collapses
    even in texts shorter than the threshold."""
    words = text.split()
    if len(words) > threshold:
        words = words[:threshold]
    return " ".join(words)


def format_lamer_passages(passages: Sequence[str]) -> str:
    """LameR's ``{PASSAGE}`` block, as ``generate_func.read_data`` builds it: the first 10 texts, each
    flattened, cut to 512 words and appended as ``f"\\n[{num+1}]. {text}"``."""
    if isinstance(passages, str):
        raise TypeError("passages must be a sequence of document texts, not a single str")
    block = ""
    for num, text in enumerate(list(passages)[:LAMER_TOP_K]):
        if not isinstance(text, str):
            raise TypeError(f"passage {num} must be str, not {type(text).__name__}")
        text = text.replace("\n", " ")
        text = cut_text(text)
        block = block + f"\n[{num+1}]. {text}"
    return block


def _default_examples(key: str) -> str:
    if key in QUERY2DOC_EXAMPLES:
        return QUERY2DOC_EXAMPLES[key]
    raise Query2DocExamplesUnavailable(
        "a Query2Doc prompt needs the few-shot examples (upstream R2MED src/example.py); pass "
        "examples=shipped_query2doc_examples() or load_query2doc_examples('<R2MED>/src/example.py')"
    )


def query2doc_template(key: str, examples: Mapping[str, str] | None = None) -> str:
    """``instrcution.query2doc[key]``, built like upstream with ``outer.format(EXAMPLE=...,
    TEXT="{TEXT}")``, so literal braces in the examples must be doubled, as there."""
    key = resolve_key(key)
    example = examples[key] if examples is not None else _default_examples(key)
    return QUERY2DOC_OUTER_TEMPLATES[key].format(EXAMPLE=example, TEXT="{TEXT}")


# --- prompts and messages -----------------------------------------------------------------------


def build_prompt(
    method: str,
    key: str,
    query: str,
    passages: Sequence[str] | None = None,
    *,
    examples: Mapping[str, str] | None = None,
) -> str:
    """The user-message text the original sent; ``passages`` (LameR's) are BM25's ranked texts."""
    if not isinstance(query, str):
        raise TypeError(
            f"query must be the query text (str), not {type(query).__name__}; "
            "never pass a query record (its doc_id/answer fields leak labels)"
        )
    if method not in METHODS:
        raise ValueError(f"unknown GAR method {method!r}; expected one of {METHODS}")
    key = resolve_key(key)
    if method == "lamer":
        if passages is None:
            raise ValueError("LameR needs passages: the texts of BM25's top-10 documents")
        return LAMER_TEMPLATES[key].format(TEXT=query, PASSAGE=format_lamer_passages(passages))
    if passages is not None:
        raise ValueError(f"passages are only used by LameR, not by {method!r}")
    if method == "hyde":
        return HYDE_TEMPLATES[key].format(TEXT=query)
    return query2doc_template(key, examples).format(TEXT=query)


def system_prompt(llm: str | None = None) -> str:
    """``SKY_SYSTEM_PROMPT`` for ``sky-32b`` (vLLM path), ``SYSTEM_PROMPT`` for every other LLM."""
    return SKY_SYSTEM_PROMPT if llm == "sky-32b" else SYSTEM_PROMPT


def build_messages(
    method: str,
    key: str,
    query: str,
    passages: list[str] | None = None,
    *,
    llm: str | None = None,
    examples: Mapping[str, str] | None = None,
) -> list[dict]:
    """OpenAI-style chat messages exactly as the original sent them: ``[system, user]``."""
    return [
        {"role": "system", "content": system_prompt(llm)},
        {"role": "user", "content": build_prompt(method, key, query, passages, examples=examples)},
    ]


def backend(llm: str) -> str:
    """``"api"`` for the OpenAI-client models (:data:`API_LLMS`), ``"vllm"`` otherwise."""
    return "api" if llm in API_LLMS else "vllm"


def sampling_params(llm: str) -> dict[str, Any]:
    """A copy of the published sampling parameters for ``llm`` (see :data:`SAMPLING`)."""
    return dict(SAMPLING[backend(llm)])


def chat_template_kwargs(llm: str) -> dict[str, Any] | None:
    """Extra ``apply_chat_template`` arguments of the vLLM path; ``None`` for API models."""
    if backend(llm) == "api":
        return None
    kwargs: dict[str, Any] = {"add_generation_prompt": True}
    if llm in ("qwen3-8b-no-thinking", "qwen3-32b-no-thinking"):
        kwargs["enable_thinking"] = False
    elif llm in ("qwen3-8b", "qwen3-32b"):
        kwargs["enable_thinking"] = True
    return kwargs
