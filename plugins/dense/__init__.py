"""The leaderboard's dense retrievers, one per published model, each configured as its published
run was (``models.py``): ``r2med-run --plugin nvembed`` reproduces the NV-Embed-v2 row."""

from __future__ import annotations

from functools import partial

from r2med_tasks.components import RetrieverSpec
from r2med_tasks.hookspecs import hookimpl

from .models import DENSE_MODELS

COMMON_HELP = {
    "drop_identical_ids": "drop a document whose id equals the query id, as the published evaluator (BEIR) did",
    "cache": "keep corpus embeddings on disk (under --cache-dir) and reuse them",
    "chunk_size": "documents per cached chunk (a killed run resumes from the last chunk)",
}
LOCAL_HELP = {
    "device": "cpu, cuda, cuda:N, or cuda:0,cuda:1 for several GPUs (default: best available)",
    "dtype": "fp32, fp16 or bf16 on GPU (default: as published; CPU always computes in fp32)",
    "batch_size": "texts per encoding batch (0: as published)",
}
API_HELP = {
    "base_url": "API endpoint (default: the provider's)", "concurrency": "requests in flight",
    "batch_size": "texts per request (0: the client's default)",
}


def _options(config) -> tuple[dict, dict, tuple[str, ...]]:
    options = {"drop_identical_ids": True, "cache": True, "chunk_size": 8192}
    helps = dict(COMMON_HELP)
    runtime = ["cache", "chunk_size", "batch_size"]
    if config.backend in ("openai", "voyage"):
        options |= {"base_url": "", "concurrency": 4, "batch_size": 0}
        helps |= API_HELP
        runtime += ["base_url", "concurrency"]
    else:
        options |= {"model": config.hf_model, "device": "", "dtype": config.dtype, "batch_size": 0}
        helps |= LOCAL_HELP | {"model": "hub id or local folder of the weights (default: the published model)"}
        runtime += ["device"]
    if config.hf_doc_model:
        options |= {"doc_model": config.hf_doc_model, "article_queries": False}
        helps |= {"doc_model": "hub id or local folder of the document encoder",
                  "article_queries": "encode queries with the article encoder too, as the repo's published files did"}
    return options, helps, tuple(runtime)


@hookimpl
def register_retrievers(register):
    for config in DENSE_MODELS.values():
        options, helps, runtime = _options(config)
        register(RetrieverSpec(
            name=config.name,
            factory=partial(published_retriever, config.name),
            aliases=config.aliases,
            description=f"{config.published or config.hf_model} as published in R2MED ({config.hf_model})",
            options=options,
            option_help=helps,
            runtime_options=runtime,
            model_options=("model", "doc_model"),  # identified by the model's name and revision
            reference=config.reference or None,
        ))


def published_retriever(name: str, *, drop_identical_ids: bool, cache: bool, chunk_size: int, batch_size: int,
                        model: str = "", doc_model: str = "", device: str = "", dtype: str = "fp32",
                        article_queries: bool = False, base_url: str = "", concurrency: int = 4):
    from dataclasses import replace

    from r2med_tasks.errors import UserError

    from r2med_plugins.model_ref import check_model_ref, model_identity
    from .published import PublishedModel
    from .retriever import DenseRetriever

    config = DENSE_MODELS[name]
    chosen = [v for v in (model, doc_model) if v and v not in (config.hf_model, config.hf_doc_model)]
    # other weights than the published ones: revision of a local folder's files, else the hub id
    revision = "+".join(model_identity(v)[1] if model_identity(v)[1] != "unpinned" else v for v in chosen) or None
    if config.backend not in ("openai", "voyage"):  # an API's model is a name, not weights
        for option, value in (("model", model), ("doc_model", doc_model)):
            if value:
                check_model_ref(value, option=f"{name}.{option}")
    config = replace(config, hf_model=model or config.hf_model, hf_doc_model=doc_model or config.hf_doc_model)
    if dtype not in ("fp32", "fp16", "bf16"):
        raise UserError(f"-o {name}.dtype={dtype}: use fp32, fp16 or bf16")
    api = {"base_url": base_url or None, "concurrency": concurrency, **({"batch_size": batch_size} if batch_size else {})}
    adapter = PublishedModel(config, device=device, batch_size=batch_size, dtype=dtype, article_queries=article_queries,
                             weights_revision=revision, api_options=api if config.backend in ("openai", "voyage") else None)
    return DenseRetriever(adapter, cache=cache, chunk_size=chunk_size, drop_identical_ids=drop_identical_ids)
