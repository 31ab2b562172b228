"""Rerankers: cross-encoders and LLM listwise reranking. The run is the reranked top ``rerank_k``
alone, as published (the published runs reranked NV-Embed-v2's top 10).
"""

from __future__ import annotations

from functools import partial
from typing import Literal

from pydantic import Field, create_model

from r2med_tasks.plugin import LLMOptions, Options, Price, RerankerSpec, hookimpl

# name: (model, logit used, leaderboard-style name, reference)
CROSS_ENCODERS = {
    "bge-reranker": ("BAAI/bge-reranker-v2-m3", 0, "bge-reranker-v2-m3", "https://huggingface.co/BAAI/bge-reranker-v2-m3"),
    "monobert": ("castorini/monobert-large-msmarco", 1, "monoBERT", "https://huggingface.co/castorini/monobert-large-msmarco"),
    "cross-encoder": ("cross-encoder/ms-marco-MiniLM-L6-v2", 0, "", "https://www.sbert.net/docs/cross_encoder/pretrained_models.html"),
}
RANKLLAMA = {"model": "castorini/rankllama-v1-7b-lora-passage", "base": "meta-llama/Llama-2-7b-hf"}
RERANK_K = "how many first-stage documents per query to rerank (published: 10)"


def pair_options(name: str, *, batch_size: int, max_length: int = 512, dtype: str = "fp32", **models) -> type:
    """The options of a pair-scoring reranker, ``max_length`` and ``dtype`` defaulting to what the
    published run used (45cbac5's ``src/eval_reranker.py``)."""
    return create_model(
        name, __base__=Options,
        **{key: (str, Field(default, description=text)) for key, (default, text) in models.items()},
        rerank_k=(int, Field(10, ge=1, description=RERANK_K)),
        max_length=(int, Field(max_length, ge=1, le=1_048_576, description="max tokens per (query, document) pair")),
        batch_size=(int, Field(batch_size, ge=1, description="pairs per batch")),
        device=(str, Field("", description="cpu, cuda, cuda:N or cuda:0,cuda:1 (default: best available)")),
        dtype=(Literal["fp32", "fp16", "bf16"], Field(dtype, description="fp32, fp16 or bf16 on GPU (default: as "
                                                                        "published)")),
        cache=(bool, Field(True, description="keep pair scores on disk, so a killed or repeated run scores no "
                                             "pair twice")),
    )


# built once, at import: the registry is rebuilt by every command
CROSS_ENCODER_OPTIONS = {name: pair_options(f"{name}Options", batch_size=32,
                                            model=(model, "hub id or local folder of the cross-encoder"))
                         for name, (model, *_) in CROSS_ENCODERS.items()}
RANKLLAMA_OPTIONS = pair_options("RankLlamaOptions", batch_size=16, max_length=1024, dtype="fp16",
                                 model=(RANKLLAMA["model"], "the LoRA adapter"),
                                 base=(RANKLLAMA["base"], "the base model it was trained on"))


class LLMRerankOptions(LLMOptions):
    llm: str = Field("", description="openai:MODEL, vllm:MODEL, ollama:MODEL or BASE_URL#MODEL (see `r2med list llms`)")
    rerank_k: int = Field(100, ge=1, description="how many first-stage documents per query to rerank")
    window: int = Field(20, ge=1, description="passages per LLM call")
    step: int = Field(10, ge=1, description="window stride")
    passage_words: int = Field(300, ge=1, description="words kept per passage")
    reasoning: bool = Field(False, description="ReasonRank's think-then-rank prompt")
    temperature: float | None = Field(0.0, ge=0, le=2, description="sampling temperature (none: the server's default)")
    max_tokens: int | None = Field(None, ge=1, le=2**31 - 1, description="generation limit (default: the server's)")
    concurrency: int = Field(8, ge=1, le=256, description="requests in flight")
    price: Price = None


class InsertRankOptions(LLMRerankOptions):
    """InsertRank: llm-rerank's options, and how the first stage's scores are written."""

    score_name: str = Field("BM25", min_length=1, description="what the scores are called in the prompt (\"BM25 "
                                                              "score: 12.35\"); the first stage's scores are shown "
                                                              "whatever it is")
    score_decimals: int = Field(2, ge=0, le=10, description="decimals each first-stage score is rounded to")


@hookimpl
def register_rerankers(register):
    for name, (model, label, _, reference) in CROSS_ENCODERS.items():
        register(RerankerSpec(
            name=name,
            factory=partial(make_cross_encoder, name),
            description=f"cross-encoder {model}, raw logits" if name != "cross-encoder"
            else "any sentence-transformers CrossEncoder (-o model=...)",
            options=CROSS_ENCODER_OPTIONS[name],
            runtime_options=("batch_size", "device", "cache"),
            model_options=("model",),
            depth_option="rerank_k",
            reference=reference,
        ))
    register(RerankerSpec(
        name="rankllama",
        factory=make_rankllama,
        description="RankLLaMA-7B (LoRA merged into Llama-2-7B), 'query: ' / 'document: ' inputs, as published",
        options=RANKLLAMA_OPTIONS,
        runtime_options=("batch_size", "device", "cache"),
        model_options=("model", "base"),
        depth_option="rerank_k",
        reference="https://huggingface.co/castorini/rankllama-v1-7b-lora-passage",
    ))
    register(RerankerSpec(
        name="llm-rerank",
        factory=make_llm_reranker,
        description="listwise LLM reranking, RankGPT's sliding window (ReasonRank's reasoning prompt with "
                    "-o reasoning=true), over any LLM backend; answers cached",
        options=LLMRerankOptions,
        runtime_options=("concurrency", "price"),
        model_options=("llm",),
        depth_option="rerank_k",
        reference="https://github.com/sunnweiwei/RankGPT",
    ))
    register(RerankerSpec(
        name="insertrank",
        factory=make_insertrank,
        description="InsertRank: listwise LLM reranking with each passage's first-stage (BM25) score in the "
                    "prompt, llm-rerank's window over any LLM backend; answers cached",
        options=InsertRankOptions,
        runtime_options=("concurrency", "price"),
        model_options=("llm",),
        depth_option="rerank_k",
        reference="https://arxiv.org/abs/2506.14086",
    ))


def make_llm_reranker(options):
    from .llm_rerank import LLMReranker

    return LLMReranker(options)


def make_insertrank(options):
    from .insertrank import InsertRankReranker

    return InsertRankReranker(options)


def make_rankllama(options):
    from r2med_tasks.plugin import ModelRef

    from .rankllama import RankLlamaReranker

    model, base = ModelRef(options.model, option="rankllama.model"), ModelRef(options.base, option="rankllama.base")
    published = (options.model, options.base) == (RANKLLAMA["model"], RANKLLAMA["base"])
    return RankLlamaReranker(options, model=model, base=base, display_name="RankLLaMA" if published else "")


def make_cross_encoder(name: str, options):
    from r2med_tasks.plugin import ModelRef

    from .cross_encoder import CrossEncoderReranker

    model = ModelRef(options.model, option=f"{name}.model")
    default, logit, display, _ = CROSS_ENCODERS[name]
    return CrossEncoderReranker(options, model=model, logit=logit,
                                display_name=display if options.model == default else "")
