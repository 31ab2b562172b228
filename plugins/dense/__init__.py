"""The leaderboard's dense retrievers, one per published model, each configured as its published run
was; and ``st``, any sentence-transformers model through the same retriever."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Annotated, Any, Literal

from pydantic import Field, create_model

from r2med_tasks.plugin import RetrieverSpec
from r2med_tasks.plugin import UserError
from r2med_tasks.plugin import hookimpl
from r2med_tasks.plugin import APIOptions, Identified, Options, file_content

from .models import DENSE_MODELS
from .st import RAY_ACTORS_OPTION, register_st

# What the API models cut texts with unless ``-o tokenizer=`` says otherwise (as published).
PUBLISHED_TOKENIZERS = {"openai": "tiktoken's cl100k_base", "voyage": "the hub's voyageai/voyage-3 (AutoTokenizer)"}

# GPU memory of one run at the published settings, in GB: estimates from parameter count and
# activations (docs/reproducing.md), which a scheduler reserves per job.
GPU_MEMORY_GB = {"contriever": 2, "medcpt": 2, "inst-l": 3, "inst-xl": 8, "bmr-410m": 4, "bmr-2b": 14, "bmr-7b": 36,
                 "bge": 8, "e5": 40, "grit": 24, "sfr": 40, "nvembed": 30, "reason-embed": 24,
                 "qwen3-embedding-8b": 24, "diver-retriever-4b": 16, "diver-retriever-4b-1020": 16,
                 "diver-retriever-1b7": 8, "diver-retriever-0b6": 4}


@lru_cache(maxsize=None)
def _options(name: str) -> tuple[type, tuple[str, ...]]:
    """The options model of one published model's retriever, which depends on its backend; built
    once per process (the registry is rebuilt for every command)."""
    config = DENSE_MODELS[name]
    kept = "" if config.drop_identical_ids else f"; the published run ({config.evaluated_by}) kept it"
    fields = {
        "drop_identical_ids": (bool, Field(config.drop_identical_ids,
                                           description="drop a document whose id equals the query id"
                                                       + (", as the published evaluator (BEIR) did" if not kept
                                                          else kept))),
        "cache": (bool, Field(True, description="keep corpus embeddings on disk (under --cache-dir) and reuse them")),
        "chunk_size": (int, Field(8192, ge=1, description="documents per cached chunk (a killed run resumes from "
                                                          "the last chunk)")),
    }
    runtime = ["cache", "chunk_size", "batch_size"]
    if config.backend in ("openai", "voyage"):
        fields |= {
            "base_url": (str, Field("", description="API endpoint (default: the provider's)")),
            "concurrency": (int, Field(4, ge=1, le=256, description="requests in flight")),
            "batch_size": (int | None, Field(None, ge=1, description="texts per request (default: the client's)")),
            # a file or folder by its content, an encoding name by its name
            "tokenizer": (Annotated[str, Identified(file_content, when_set=True)],
                          Field("", description="what texts are cut to their token limit with: a tiktoken encoding "
                                                "name (cl100k_base; offline, tiktoken reads it from "
                                                "TIKTOKEN_CACHE_DIR), a local tokenizer.json, or a local folder "
                                                "holding a Hugging Face tokenizer (default: "
                                                f"{PUBLISHED_TOKENIZERS[config.backend]}, as published)")),
        }
        runtime += ["base_url", "concurrency"]
    else:
        fields |= {
            "model": (str, Field(config.hf_model, description="hub id or local folder of the weights (default: the "
                                                              "published model)")),
            "device": (str, Field("", description="cpu, cuda, cuda:N, or cuda:0,cuda:1 for several GPUs (default: "
                                                  "best available)")),
            "dtype": (Literal["fp32", "fp16", "bf16"],
                      Field(config.dtype, description="fp32, fp16 or bf16 on GPU (default: as published; CPU always "
                                                      "computes in fp32)")),
            "batch_size": (int | None, Field(None, ge=1, description="texts per encoding batch (default: as "
                                                                     "published)")),
            "ray_actors": RAY_ACTORS_OPTION,
        }
        runtime += ["device", "ray_actors"]
    if config.hf_doc_model:
        fields |= {
            "doc_model": (str, Field(config.hf_doc_model, description="hub id or local folder of the document "
                                                                      "encoder")),
            "article_queries": (bool, Field(True, description="encode queries with the article encoder too, as "
                                                              "the authors' code did (repo files, avg 7.87); false: "
                                                              "the query encoder")),
        }
    name = "".join(part.title() for part in config.name.replace("_", "-").split("-")) + "Options"
    base = APIOptions if config.backend in ("openai", "voyage") else Options  # an API's time limits
    return create_model(name, __base__=base, **fields), tuple(runtime)


@dataclass(frozen=True)
class APIRetrieverSpec(RetrieverSpec):
    """An API model's spec: an empty ``-o tokenizer=`` is refused rather than taken for another
    configuration of the same run (the option is in a run's identity only when set, so the published
    configuration keeps its results folders)."""

    def parse(self, key: str, raw: str) -> Any:
        if key == "tokenizer" and not raw.strip():
            raise UserError(f"-o {self.name}.tokenizer=: give a tiktoken encoding name (cl100k_base), a local "
                            "tokenizer.json or a folder holding a Hugging Face tokenizer; leave the option out for "
                            "the published tokenizer")
        return super().parse(key, raw)


@hookimpl
def register_retrievers(register):
    for config in DENSE_MODELS.values():
        options, runtime = _options(config.name)
        spec = APIRetrieverSpec if config.backend in ("openai", "voyage") else RetrieverSpec
        register(spec(
            name=config.name,
            factory=PublishedFactory(config.name),
            aliases=config.aliases,
            description=(f"{config.published or config.hf_model} as published in R2MED ({config.hf_model})"
                         if config.evaluated_by == "R2MED" else
                         f"{config.published or config.hf_model} as {config.evaluated_by} ran it "
                         f"({config.hf_model})"),
            options=options,
            runtime_options=runtime,
            model_options=("model", "doc_model"),
            reference=config.reference or None,
            combines_generated=True,  # the published rule for dense retrievers
            resources=partial(published_resources, config.name),
        ))
    register_st(register)


class PublishedFactory:
    """``published_retriever`` for one configuration; ``describe_inputs`` shows the text each task's
    inputs become."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, options):
        return published_retriever(self.name, options)

    def __repr__(self) -> str:
        return f"PublishedFactory({self.name!r})"

    def describe_inputs(self, tasks) -> dict:
        config = DENSE_MODELS[self.name]
        return {"inputs": {task.short_name: config.inputs(task.key) for task in tasks},
                "input_notes": config.input_notes()}


def published_retriever(name: str, options):
    """The retriever of published model ``name`` with its ``options``."""
    from dataclasses import replace

    from r2med_tasks.plugin import ModelRef

    from .published import PublishedModel
    from .retriever import DenseRetriever

    config = DENSE_MODELS[name]
    model, doc_model = getattr(options, "model", ""), getattr(options, "doc_model", "")  # an API's have no weights
    device, dtype = getattr(options, "device", ""), getattr(options, "dtype", "fp32")
    batch_size = options.batch_size
    refs = [ModelRef(value, option=f"{name}.{option}") for option, value in (("model", model), ("doc_model", doc_model))
            if value]
    chosen = [r for r in refs if r.ref not in (config.hf_model, config.hf_doc_model)]
    # other weights than the published ones: revision of a local folder's files, else the hub id
    revision = "+".join(rev if (rev := r.identity()[1]) != "unpinned" else r.ref for r in chosen) or None
    config = replace(config, hf_model=model or config.hf_model, hf_doc_model=doc_model or config.hf_doc_model)
    api = None
    if config.backend in ("openai", "voyage"):
        api = {"base_url": options.base_url or None, "concurrency": options.concurrency, **options.api_limits(),
               **({"batch_size": batch_size} if batch_size else {}),
               **({"tokenizer": _tokenizer_option(name, options.tokenizer)} if options.tokenizer else {})}
    adapter = PublishedModel(config, device=device, batch_size=batch_size, dtype=dtype,
                             article_queries=getattr(options, "article_queries", True), weights_revision=revision,
                             api_options=api)
    return DenseRetriever(adapter, cache=options.cache, chunk_size=options.chunk_size,
                          drop_identical_ids=options.drop_identical_ids, ray_actors=getattr(options, "ray_actors", 0))


def published_resources(name: str, options) -> dict:
    """What one run of published model ``name`` needs of a GPU, for a scheduler."""
    config = DENSE_MODELS[name]
    if config.backend in ("openai", "voyage"):
        return {}
    memory = GPU_MEMORY_GB.get(name)
    if memory and options.dtype != "fp32" and config.dtype == "fp32":  # fp32 as published; fp16/bf16 halves it
        memory /= 2
    return {"gpu": True, "gpu_memory_gb": memory}


def _tokenizer_option(name: str, value: str) -> str:
    """``-o tokenizer=`` as the encoder gets it: a path made absolute (it loads on first use, wherever
    the run is then); a missing one is an error now, before any request."""
    from pathlib import Path

    from .api_tokenizers import missing_tokenizer, tokenizer_kind

    kind = tokenizer_kind(value)
    if kind == "missing":
        raise UserError(missing_tokenizer(value, where=f"-o {name}.tokenizer"))
    return value if kind == "tiktoken" else str(Path(value).expanduser().resolve())
