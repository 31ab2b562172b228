"""The published dense retrievers: a ``DenseConfig`` turned into a ``Model`` for ``DenseRetriever``,
instructions applied the way each published wrapper applied them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..local_models import SentenceTransformerEncoder, parse_devices
from .config import DenseConfig
from .encoders import GritLMEncoder, NVEmbedEncoder, TransformerEncoder


LOCAL_WEIGHTS = "local weights"  # a cache key's model for -o model=PATH, identified by content


class PublishedModel:
    def __init__(self, config: DenseConfig, *, device: str, batch_size: int, dtype: str,
                 article_queries: bool = False, weights_revision: str | None = None,
                 api_options: dict[str, Any] | None = None) -> None:
        self.config, self.device, self.batch_size, self.dtype = config, device, batch_size or config.batch_size, dtype
        self.article_queries, self.weights_revision = article_queries, weights_revision
        self.api_options = api_options or {}
        self._encoder = None
        self._devices: list[str] | None = None

    def model_meta(self) -> dict[str, Any]:
        c = self.config
        return {"name": f"r2med/{c.name}", "revision": self.weights_revision or c.revision or "unpinned", "display_name": c.published or c.name,
                "adapted_from": c.hf_model,
                "reference": c.reference or None, "similarity_fn_name": "cosine",
                "use_instructions": bool(c.query_instructions or c.doc_instructions),
                "framework": ["API"] if c.backend in ("openai", "voyage") else ["PyTorch"],
                **({"training_overlap": [dict(n) for n in c.training_overlap]} if c.training_overlap else {})}

    def show_retries(self, line) -> None:
        """An API model's retries on the run's status line; a local model keeps nothing (its copies
        go to Ray actors)."""
        if self.config.backend in ("openai", "voyage"):
            self.encoder().show_retries(line)

    def devices(self) -> list[str]:
        if self._devices is None:
            self._devices = ["cpu"] if self.config.backend in ("openai", "voyage") else parse_devices(self.device)
        return self._devices

    def effective_dtype(self) -> str:
        return self.dtype if self.devices()[0].startswith("cuda") else "fp32"

    def load(self) -> None:
        """The weights loaded now, so a run times loading apart from encoding."""
        load = getattr(self.encoder(), "load", None)
        if callable(load):
            load()

    def encoder(self):
        if self._encoder is None:
            c, kw = self.config, {"devices": self.devices(), "batch_size": self.batch_size, "dtype": self.effective_dtype()}
            if c.backend == "transformers":
                self._encoder = TransformerEncoder(c, **kw, query_model=c.hf_doc_model if self.article_queries else None)
            elif c.backend == "instructor":
                self._encoder = SentenceTransformerEncoder(c.hf_model, revision=c.revision, exclude_prompt_from_pooling=True,
                                                           normalize=c.normalize, **kw)
            elif c.backend == "nvembed":
                self._encoder = NVEmbedEncoder(c, **kw)
            elif c.backend == "gritlm":
                self._encoder = GritLMEncoder(c, **kw)
            elif c.backend in ("openai", "voyage"):
                from .api import OpenAIEncoder, VoyageEncoder

                cls = OpenAIEncoder if c.backend == "openai" else VoyageEncoder
                self._encoder = cls(c.hf_model, max_tokens=c.doc_max_length, **self.api_options)
                self._encoder.name_options(c.name)  # its advice: -o openai.timeout=
            else:
                raise ValueError(f"unknown backend {c.backend!r}")
        return self._encoder

    def _encode(self, texts: list[str], instruction: str, max_length: int, kind: str) -> np.ndarray:
        backend, enc = self.config.backend, self.encoder()
        if backend == "transformers":
            texts = [instruction + t for t in texts]
            return enc.encode_queries(texts) if kind == "query" else enc.encode_documents(texts)
        if backend == "instructor":
            return enc.encode(texts, instruction)
        if backend in ("nvembed", "gritlm"):
            return enc.encode(texts, instruction, max_length)
        return enc.encode(texts, kind=kind)

    def encode_queries(self, texts: list[str], task) -> np.ndarray:
        c = self.config
        return self._encode(texts, c.query_instruction(task.key), c.query_max_length, "query")

    def encode_documents(self, texts: list[str], task) -> np.ndarray:
        c = self.config
        return self._encode(texts, c.doc_instruction(task.key), c.doc_max_length, "document")

    def encode_generated(self, texts: list[str], task) -> np.ndarray:
        """GAR documents: with the query instruction for the wrappers that applied it (Instructor,
        NV-Embed, GritLM), without for the others, as published."""
        c = self.config
        return self._encode(texts, c.generated_instruction(task.key), c.query_max_length, "query")

    def query_identity(self, task, kind: str) -> dict[str, Any]:
        """As ``document_identity``, for queries or generated documents."""
        c = self.config
        model = (c.hf_doc_model or c.hf_model) if self.article_queries else c.hf_model
        instruction = c.query_instruction(task.key) if kind == "query" else c.generated_instruction(task.key)
        return {"model": self._weights_name(model), "revision": c.revision, "backend": c.backend,
                "instruction": instruction,
                "pooling": c.pooling, "normalize": c.normalize, "max_length": c.query_max_length,
                "dtype": self.effective_dtype(), "append_eos": c.append_eos,
                "padding_side": c.padding_side or "tokenizer default", **self._recipe_identity()}

    def _weights_name(self, model: str) -> str:
        """How a cache key names the model: a local folder not by its path but by content, so the same
        files elsewhere reuse the embeddings."""
        return LOCAL_WEIGHTS if self.weights_revision and Path(model).is_dir() else model

    def _recipe_identity(self) -> dict[str, Any]:
        """Fields named only where used, so the other configurations' cache keys stay as they were."""
        c = self.config
        return {**({"special_tokens": c.special_tokens} if c.special_tokens else {}),
                **({"truncate_text": True} if c.truncate_text else {}),
                **({"cast_module": True} if c.cast_module else {}),
                **({"weights": self.weights_revision} if self.weights_revision else {}),
                **self._tokenizer_identity()}

    def _tokenizer_identity(self) -> dict[str, Any]:
        """``-o tokenizer=`` by content or name; none for the published one, so naming it explicitly
        reuses the default's embeddings."""
        tokenizer = self.api_options.get("tokenizer")
        if not isinstance(tokenizer, str) or not tokenizer:
            return {}
        from r2med_tasks.plugin import file_content

        from .api import PUBLISHED_TIKTOKEN

        if self.config.backend == "openai" and tokenizer == PUBLISHED_TIKTOKEN:  # a path arrives absolute
            return {}
        return {"tokenizer": file_content(tokenizer)}

    def document_identity(self, task) -> dict[str, Any]:
        c = self.config
        return {"model": self._weights_name(c.hf_doc_model or c.hf_model), "revision": c.revision, "backend": c.backend,
                "doc_instruction": c.doc_instruction(task.key), "pooling": c.pooling, "normalize": c.normalize,
                "max_length": c.doc_max_length, "dtype": self.effective_dtype(), "doc_as_pair": c.doc_as_pair,
                "append_eos": c.append_eos, "padding_side": c.padding_side or "tokenizer default",
                **self._recipe_identity()}
