"""Generation-augmented retrieval: query rewriters and search agents, which either ask a live LLM
(``-o llm=``) or read the documents the R2MED dataset repos publish (``-o source=``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

from pydantic import Field, create_model, model_validator

from r2med_tasks.plugin import Identified, LLMOptions, Price, RewriterSpec, file_content, hookimpl

from .prompts import METHODS as LIVE  # the agents have their own options

METHODS = {
    "hyde": "HyDE: the LLM writes a passage (or similar case) that answers the query",
    "query2doc": "Query2Doc: the same with two worked examples per dataset",
    "lamer": "LameR: the LLM corrects BM25's top-10 passages into an answer passage",
    "search-o1": "Search-o1: a reasoning LLM searches the task's corpus (-o searcher=NAME) as it thinks, reads "
                 "the results in a Reason-in-Documents step, and answers; live, or the published generations",
    "search-r1": "Search-R1: an RL-trained LLM alternates <search> and <information> turns over the task's corpus, "
                 "then <answer>s; live, or the published generations",
}
AGENTS = ("search-o1", "search-r1")


PUBLISHED_OPTIONS = {
    "source": (str, Field("", description="use the published generations of this LLM (e.g. o3-mini, gpt4, "
                                          "qwen-72b, qwq-32b)")),
    "published_data": (str, Field("", description="folder of <method>/<llm>/query_with_hydoc.jsonl files "
                                                  "(default: --data-dir's task folder, else the hub)")),
    "hub_split": (str, Field("", description="the hub split holding them (default: source with '_' for '-', "
                                             "e.g. o3_mini)")),
}
LIVE_OPTIONS = {
    "llm": (str, Field("", description="generate live: openai:MODEL, vllm:MODEL, ollama:MODEL or BASE_URL#MODEL")),
    "temperature": (float | None, Field(None, ge=0, le=2, description="sampling temperature (default: as "
                                                                      "published: 0.8 for OpenAI, 0.7 otherwise)")),
    "top_p": (float | None, Field(None, ge=0, le=1, description="nucleus sampling (default: 0.8 for OpenAI, the "
                                                                "server's otherwise)")),
    "max_tokens": (int | None, Field(None, ge=1, le=2**31 - 1,
                                    description="generation limit (default: 10240 except on OpenAI)")),
    "seed": (int | None, Field(None, ge=0, le=2**31 - 1, description="sampling seed (default: 42 except on OpenAI)")),
    "concurrency": (int, Field(8, ge=1, le=256, description="requests in flight")),
    "price": (Price, None),
    "examples": (Annotated[str, Identified(file_content)],
                 Field("", description="Query2Doc few-shot examples: a local copy of the original "
                                            "src/example.py or a JSON {key: text} (default: that file at the "
                                            "pinned commit, shipped with r2med)")),
}

AGENT_OPTIONS = {
    "llm": LIVE_OPTIONS["llm"],
    "searcher": (str, Field("bm25", description="the retriever the agent searches the task's corpus with (its "
                                                "options: -o NAME.key=value)")),
    "template": (Annotated[str, Identified(file_content)],
                 Field("", description="a tokenizer folder or hub id whose chat template renders the prompt "
                             "locally (then /completions; default: the server continues the "
                             "assistant turn through /chat/completions)")),
    "temperature": (float | None, Field(None, ge=0, le=2, description="sampling temperature (default: the "
                                                                      "method's reference runs')")),
    "top_p": (float | None, Field(None, ge=0, le=1, description="nucleus sampling (default: the method's)")),
    "top_k": (int | None, Field(None, ge=-1, le=2**31 - 1, description="top-k sampling (default: the method's)")),
    "repetition_penalty": (float | None, Field(None, gt=0, le=10, description="repetition penalty (default: "
                                                                              "the method's)")),
    "max_tokens": (int | None, Field(None, ge=1, le=2**31 - 1, description="tokens per generation (default: the "
                                                                          "method's)")),
    "seed": (int | None, Field(None, ge=0, le=2**31 - 1, description="sampling seed (default: none)")),
    "max_turns": (int | None, Field(None, ge=1, le=1000, description="turns per query, as the method counts them "
                                                                     "(default: the method's)")),
    "search_limit": (int | None, Field(None, ge=0, le=1000, description="searches per query (default: the "
                                                                        "method's)")),
    "docs": (int | None, Field(None, ge=1, le=1000, description="documents each search returns (default: the "
                                                                "method's)")),
    "concurrency": (int, Field(8, ge=1, le=256, description="queries in flight")),
    "price": LIVE_OPTIONS["price"],
}



class GenerationOptions(LLMOptions):
    """Every method's options: the documents come either from the published generations of an LLM
    (``source``) or from one generating live (``llm``, with the API's time limits and the thinking
    controls)."""

    @model_validator(mode="after")
    def one_source(self):
        if bool(self.source) == bool(self.llm):
            raise ValueError("needs exactly one of -o source=LLM (published generations) or -o llm=SPEC "
                             "(generate live)")
        thinking = self.thinking_settings()
        if thinking and self.source:
            raise ValueError(f"-o {next(iter(thinking))}= goes with -o llm=SPEC (generate live); the published "
                             "generations are as they were generated")
        if self.hub_split and not self.source:
            raise ValueError(f"-o hub_split={self.hub_split} goes with -o source=LLM (published generations)")
        return self


# built once, at import: the registry is rebuilt by every command
METHOD_OPTIONS = {method: create_model(f"{method.title().replace('-', '')}Options", __base__=GenerationOptions,
                                       **PUBLISHED_OPTIONS, **(LIVE_OPTIONS if method in LIVE else AGENT_OPTIONS))
                  for method in METHODS}


REFERENCES = {"search-o1": "https://github.com/sunnynexus/Search-o1",
              "search-r1": "https://github.com/PeterGriffinJin/Search-R1"}


@dataclass(frozen=True)
class AgentSpec(RewriterSpec):
    """A search agent's spec: a composite of its searcher when it runs live; a replay searches
    nothing, so it gets no member."""

    def members(self, values: dict[str, Any]) -> list[str]:
        return [] if values.get("source") else super().members(values)


@hookimpl
def register_rewriters(register):
    for method, description in METHODS.items():
        agent = method in AGENTS
        register((AgentSpec if agent else RewriterSpec)(
            name=method, factory=partial(make_agent if agent else make_rewriter, method), description=description,
            options=METHOD_OPTIONS[method], runtime_options=("published_data", "concurrency", "price"),
            model_options=("llm",),  # identified by its model, not the server
            members_option="searcher" if agent else None,
            reference=REFERENCES.get(method, "https://github.com/R2MED/R2MED/blob/main/src/generate_hypothetical_doc.py")))


def make_rewriter(method: str, options):
    from .rewriter import GARRewriter

    return GARRewriter(method, options)


def make_agent(method: str, options, members):
    from .agent import SearchAgent

    return SearchAgent(method, options, members)
