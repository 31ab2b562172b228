"""Generation-augmented retrieval: query rewriters (HyDE, Query2Doc, LameR) and their prompts.

Each rewriter either asks a live LLM (``-o llm=openai:gpt-4o``, any OpenAI-compatible server) or
reads the documents the R2MED dataset repos publish (``-o source=o3-mini``).
"""

from __future__ import annotations

from functools import partial

from r2med_tasks.components import RewriterSpec
from r2med_tasks.hookspecs import hookimpl

METHODS = {
    "hyde": "HyDE: the LLM writes a passage (or similar case) that answers the query",
    "query2doc": "Query2Doc: the same with two worked examples per dataset",
    "lamer": "LameR: the LLM corrects BM25's top-10 passages into an answer passage",
    "search-o1": "Search-o1 agent outputs (published only)",
    "search-r1": "Search-R1 agent outputs (published only)",
}
LIVE = ("hyde", "query2doc", "lamer")


@hookimpl
def register_rewriters(register):
    for method, description in METHODS.items():
        options = {"source": "", "published_data": "", "hub_split": ""}
        helps = {"source": "use the published generations of this LLM (e.g. o3-mini, gpt4, qwen-72b, qwq-32b)",
                 "published_data": "folder of <method>/<llm>/query_with_hydoc.jsonl files "
                                   "(default: --data-dir's task folder, else the hub)",
                 "hub_split": "the hub split holding them (default: source with '_' for '-', e.g. o3_mini)"}
        runtime = ["published_data"]
        if method in LIVE:
            options |= {"llm": "", "temperature": -1.0, "top_p": -1.0, "max_tokens": 0, "seed": -1,
                        "concurrency": 8, "examples": ""}
            helps |= {"llm": "generate live: openai:MODEL, vllm:MODEL, ollama:MODEL or BASE_URL#MODEL",
                      "temperature": "sampling temperature (default: as published: 0.8 for OpenAI, 0.7 otherwise)",
                      "top_p": "nucleus sampling (default: 0.8 for OpenAI, the server's otherwise)",
                      "max_tokens": "generation limit (default: 10240 except on OpenAI)",
                      "seed": "sampling seed (default: 42 except on OpenAI)",
                      "concurrency": "requests in flight",
                      "examples": "Query2Doc few-shot examples: the original src/example.py or a JSON {key: text}"}
            runtime += ["concurrency"]
        register(RewriterSpec(name=method, factory=partial(make_rewriter, method), description=description,
                              options=options, option_help=helps, runtime_options=tuple(runtime),
                              reference="https://github.com/R2MED/R2MED/blob/main/src/generate_hypothetical_doc.py"))


def make_rewriter(method: str, **options):
    from .rewriter import GARRewriter

    return GARRewriter(method, **options)
