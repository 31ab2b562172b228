"""Rerankers: cross-encoders, LLM listwise and groupwise reranking. The run is the reranked top ``rerank_k``
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


class ListwiseOptions(LLMOptions):
    """What every sliding-window LLM reranker takes (``llm-rerank``, ``insertrank``)."""

    llm: str = Field("", description="openai:MODEL, vllm:MODEL, ollama:MODEL or BASE_URL#MODEL (see `r2med list llms`)")
    rerank_k: int = Field(100, ge=1, description="how many first-stage documents per query to rerank")
    window: int = Field(20, ge=1, description="passages per LLM call")
    step: int = Field(10, ge=1, description="window stride")
    passage_words: int = Field(300, ge=1, description="words kept per passage")
    temperature: float | None = Field(0.0, ge=0, le=2, description="sampling temperature (none: the server's default)")
    max_tokens: int | None = Field(None, ge=1, le=2**31 - 1, description="generation limit (default: the server's)")
    concurrency: int = Field(8, ge=1, le=256, description="requests in flight")
    price: Price = None


class LLMRerankOptions(ListwiseOptions):
    reasoning: bool = Field(False, description="ReasonRank's think-then-rank prompt")


class InsertRankOptions(ListwiseOptions):
    """InsertRank: the listwise options (window 20, stride 10 and 300 words are also rank_llm's), and
    how the first stage's scores are written."""

    score_name: str = Field("BM25", min_length=1, description="what the scores are called in the prompt (\"BM25 "
                                                              "score for passge [1]: 12.350\"); the first stage's "
                                                              "scores are shown whatever it is")
    score_decimals: int = Field(3, ge=0, le=10, description="decimals each first-stage score is written with "
                                                            "(rank_llm's: 3)")


class GroupRankOptions(LLMOptions):
    """GroupRank: the defaults are the 32B model's run in Diver's ``Reranker/reranker_script.sh``
    (groups of 20 every 20, 6 rounds) and ``rerank_groupwise.py``'s sampling and cuts."""

    llm: str = Field("", description="the scoring LLM: vllm:AQ-MedAI/Diver-GroupRank-32B (or -7B), openai:MODEL, "
                                     "ollama:MODEL or BASE_URL#MODEL (see `r2med list llms`)")
    rerank_k: int = Field(100, ge=1, description="how many first-stage documents per query to rerank")
    group_size: int = Field(20, ge=1, description="documents per LLM call")
    interval: int = Field(20, ge=1, description="a group starts every this many documents of the shuffled list")
    rounds: int = Field(6, ge=1, description="shuffles per query; a document's score is its mean over them")
    seed: int = Field(666, description="seeds each query's shuffles, with the query's id")
    max_doc_len: int = Field(3000, ge=1, description="characters kept per document")
    retriever_weight: float = Field(0.4, ge=0, le=1, description="the first-stage score's weight in the final "
                                                                 "score (0: the groups' mean alone)")
    temperature: float | None = Field(0.3, ge=0, le=2, description="sampling temperature (none: the server's default)")
    top_p: float | None = Field(0.8, gt=0, le=1, description="nucleus sampling (none: the server's default)")
    max_tokens: int | None = Field(8000, ge=1, le=2**31 - 1, description="generation limit (none: the server's)")
    concurrency: int = Field(8, ge=1, le=256, description="requests in flight")
    price: Price = None


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
                    "prompt (castorini/rank_llm's insert_rank_template), llm-rerank's window over any LLM backend; "
                    "answers cached",
        options=InsertRankOptions,
        runtime_options=("concurrency", "price"),
        model_options=("llm",),
        depth_option="rerank_k",
        reference="https://arxiv.org/abs/2506.14086",
    ))
    register(RerankerSpec(
        name="grouprank",
        factory=make_grouprank,
        description="GroupRank: groupwise LLM reranking as AQ-MedAI/Diver's rerank_groupwise.py (random groups, "
                    "0-10 scores averaged over rounds), over any LLM backend; answers cached",
        options=GroupRankOptions,
        runtime_options=("concurrency", "price"),
        model_options=("llm",),
        depth_option="rerank_k",
        reference="https://github.com/AQ-MedAI/Diver",
    ))


def make_llm_reranker(options):
    from .llm_rerank import LLMReranker

    return LLMReranker(options)


def make_insertrank(options):
    from .insertrank import InsertRankReranker

    return InsertRankReranker(options)


def make_grouprank(options):
    from .grouprank import GroupRankReranker

    return GroupRankReranker(options)


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
