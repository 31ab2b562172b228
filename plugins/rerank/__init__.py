"""Rerankers: cross-encoders and LLM listwise reranking.

Each re-scores the first stage's top ``rerank_k`` documents per query (the published runs reranked
NV-Embed-v2's top 10); documents below keep their first-stage order.
"""

from __future__ import annotations

from functools import partial

from r2med_tasks.components import RerankerSpec
from r2med_tasks.hookspecs import hookimpl

# name: (model, logit used, leaderboard-style name, reference)
CROSS_ENCODERS = {
    "bge-reranker": ("BAAI/bge-reranker-v2-m3", 0, "bge-reranker-v2-m3", "https://huggingface.co/BAAI/bge-reranker-v2-m3"),
    "monobert": ("castorini/monobert-large-msmarco", 1, "monoBERT", "https://huggingface.co/castorini/monobert-large-msmarco"),
    "cross-encoder": ("cross-encoder/ms-marco-MiniLM-L6-v2", 0, "", "https://www.sbert.net/docs/cross_encoder/pretrained_models.html"),
}
HELP = {
    "model": "hub id or local folder of the cross-encoder",
    "rerank_k": "how many first-stage documents per query to rerank (published: 10)",
    "max_length": "max tokens per (query, document) pair", "batch_size": "pairs per batch",
    "device": "cpu, cuda, cuda:N or cuda:0,cuda:1 (default: best available)", "dtype": "fp32, fp16 or bf16 on GPU",
}


@hookimpl
def register_rerankers(register):
    for name, (model, label, _, reference) in CROSS_ENCODERS.items():
        register(RerankerSpec(
            name=name,
            factory=partial(make_cross_encoder, name),
            description=f"cross-encoder {model}, raw logits" if name != "cross-encoder"
            else "any sentence-transformers CrossEncoder (-o model=...)",
            options={"model": model, "rerank_k": 10, "max_length": 512, "batch_size": 32, "device": "",
                     "dtype": "fp16"},
            option_help=HELP,
            runtime_options=("batch_size", "device"),
            reference=reference,
        ))


def make_cross_encoder(name: str, *, model: str, rerank_k: int, max_length: int, batch_size: int, device: str, dtype: str):
    from .cross_encoder import CrossEncoderReranker

    return CrossEncoderReranker(model, rerank_k=rerank_k, max_length=max_length, label=CROSS_ENCODERS[name][1],
                                batch_size=batch_size, device=device, dtype=dtype)
