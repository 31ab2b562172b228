"""Local encoders of the published dense models, each reproducing its published recipe."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np

from r2med_tasks.plugin import UserError

from ..local_models import quiet_transformers, run_batches, torch_dtype
from .config import DenseConfig


class TransformerEncoder:
    """A hub model through ``transformers``, pooled and tokenized as its published run did."""

    def __init__(self, config: DenseConfig, *, devices: list[str], batch_size: int, dtype: str,
                 query_model: str | None = None) -> None:
        self.config, self.devices, self.batch_size, self.dtype = config, devices, batch_size, dtype
        self.query_model = query_model or config.hf_model  # MedCPT's published files used the article encoder
        self.doc_model = config.hf_doc_model or config.hf_model
        self._loaded: dict[str, tuple[Any, list[Any]]] = {}

    def load(self) -> None:
        """The weights loaded now."""
        for model_id in dict.fromkeys((self.doc_model, self.query_model)):
            self._load(model_id)

    def _load(self, model_id: str):
        if model_id not in self._loaded:
            from transformers import AutoModel, AutoTokenizer

            quiet_transformers()
            tokenizer = AutoTokenizer.from_pretrained(model_id, revision=self.config.revision)
            prepare_tokenizer(tokenizer, self.config)
            if self.config.special_tokens == "tokenizer.json":
                use_file_special_tokens(tokenizer, model_id, self.config.revision)
            replicas = []
            for device in self.devices:
                weights = "fp32" if self.config.autocast else self.dtype
                model = AutoModel.from_pretrained(model_id, revision=self.config.revision,
                                                  dtype=torch_dtype(weights, device))
                if self.config.cast_module:
                    model = cast_module(model, torch_dtype(weights, device))
                replicas.append((model.to(device).eval(), device))
            self._loaded[model_id] = (tokenizer, replicas)
        return self._loaded[model_id]

    def _tokenize(self, tokenizer, texts: list[str], max_length: int, as_pair: bool):
        if self.config.truncate_text:
            texts = [cut_text(tokenizer, text, max_length) for text in texts]
            return tokenizer(texts, padding=True, return_tensors="pt")
        if self.config.append_eos:
            ids = tokenizer(texts, max_length=max_length - 1, truncation=True, padding=False,
                            return_attention_mask=False)["input_ids"]
            return tokenizer.pad({"input_ids": [i + [tokenizer.eos_token_id] for i in ids]},
                                 padding=True, return_attention_mask=True, return_tensors="pt")
        if as_pair:
            return tokenizer([""] * len(texts), texts, max_length=max_length, truncation=True,
                             padding=True, return_tensors="pt")
        return tokenizer(texts, max_length=max_length, truncation=True, padding=True, return_tensors="pt")

    def _embed(self, model_id: str, texts: list[str], max_length: int, as_pair: bool) -> np.ndarray:
        import torch

        tokenizer, replicas = self._load(model_id)

        def encode_batch(replica, batch: list[str]) -> np.ndarray:
            model, device = replica
            inputs = {k: v.to(device) for k, v in self._tokenize(tokenizer, batch, max_length, as_pair).items()}
            autocast = self.config.autocast and device.startswith("cuda") and self.dtype != "fp32"
            mixed = torch.autocast("cuda", dtype=torch_dtype(self.dtype, device)) if autocast else nullcontext()
            with torch.inference_mode(), mixed:
                hidden = model(**inputs).last_hidden_state
                pooled = pool(hidden, inputs["attention_mask"], self.config.pooling)
                if self.config.normalize:
                    pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            return pooled.float().cpu().numpy()

        return run_batches(texts, self.batch_size, replicas, encode_batch)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(self.query_model, texts, self.config.query_max_length, as_pair=False)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed(self.doc_model, texts, self.config.doc_max_length, as_pair=self.config.doc_as_pair)


def cut_text(tokenizer, text: str, max_length: int) -> str:
    """Diver's ``truncate_text``: a text over ``max_length`` tokens (special tokens left out) becomes
    the decoded text of its first ``max_length`` tokens; vLLM then tokenized it again, adding the
    special tokens."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    return tokenizer.decode(ids[:max_length]) if len(ids) > max_length else text


def prepare_tokenizer(tokenizer, config: DenseConfig) -> None:
    """Padding as the published wrappers set it: the tokenizer's own side, except BMRetriever's recipe
    without a pad token, which pads with EOS on the left. Elsewhere a missing pad token is EOS too,
    where the published code would have failed to pad."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
        if config.append_eos:
            tokenizer.padding_side = "left"
    if config.padding_side:
        tokenizer.padding_side = config.padding_side


def use_file_special_tokens(tokenizer, model_id: str, revision: str | None) -> None:
    """Special tokens exactly as the checkpoint's ``tokenizer.json`` adds them, as transformers 4.x
    did for Qwen2's fast tokenizer whatever ``add_eos_token`` said: whatever the installed
    transformers makes of such flags, the inputs stay the published run's."""
    from tokenizers import Tokenizer, processors
    from transformers.utils import cached_file

    path = cached_file(model_id, "tokenizer.json", revision=revision, _raise_exceptions_for_missing_entries=False)
    if path is None or not getattr(tokenizer, "is_fast", False):
        raise UserError(f"{model_id}: no tokenizer.json (or no fast tokenizer); this configuration adds special "
                        "tokens exactly as that file does")
    post = Tokenizer.from_file(str(path)).post_processor
    # no post-processor in the file: no special tokens (a template of the text alone)
    tokenizer.backend_tokenizer.post_processor = post if post is not None else processors.TemplateProcessing(
        single="$A:0", pair="$A:0 $B:1", special_tokens=[])


def cast_module(model, dtype):
    """The model with every floating-point tensor in ``dtype``, as FlagEmbedding's ``half()`` left it:
    loading with ``dtype=`` keeps buffers such as RoPE's ``inv_freq`` in fp32."""
    return model.to(dtype)


def pool(hidden, mask, how: str):
    """Sentence embedding from token states: mean, cls, or last (non-padding) token."""
    import torch

    if how == "mean":
        m = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)
    if how == "cls":
        return hidden[:, 0]
    if how in ("last", "last-bmr"):
        if bool((mask[:, -1] == 1).all()):  # left padding (or no padding): the last position
            return hidden[:, -1]
        lengths = mask.sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), lengths]
    raise ValueError(f"unknown pooling {how!r}")


class NVEmbedEncoder:
    """NV-Embed-v2 through its own ``encode(texts, instruction=, max_length=)`` (remote code)."""

    def __init__(self, config: DenseConfig, *, devices: list[str], batch_size: int, dtype: str) -> None:
        self.config, self.devices, self.batch_size, self.dtype = config, devices, batch_size, dtype
        self._replicas: list[Any] | None = None

    def load(self) -> None:
        """The weights loaded now (else on the first encoding)."""
        self._load()

    def _load(self) -> list[Any]:
        if self._replicas is None:
            from transformers import AutoModel

            quiet_transformers()
            self._replicas = [AutoModel.from_pretrained(self.config.hf_model, revision=self.config.revision,
                                                        trust_remote_code=True,
                                                        dtype=torch_dtype(self.dtype, d)).to(d).eval()
                              for d in self.devices]
        return self._replicas

    def encode(self, texts: list[str], instruction: str, max_length: int) -> np.ndarray:
        import torch

        def encode_batch(model, batch: list[str]) -> np.ndarray:
            with torch.inference_mode():
                emb = model.encode(batch, instruction=instruction, max_length=max_length)
                if self.config.normalize:
                    emb = torch.nn.functional.normalize(emb, p=2, dim=1)
            return emb.float().cpu().numpy()

        return run_batches(texts, self.batch_size, self._load(), encode_batch)


class GritLMEncoder:
    """GritLM-7B in embedding mode through the ``gritlm`` package (``pip install gritlm``)."""

    def __init__(self, config: DenseConfig, *, devices: list[str], batch_size: int, dtype: str) -> None:
        self.config, self.devices, self.batch_size, self.dtype = config, devices, batch_size, dtype
        self._replicas: list[Any] | None = None

    def load(self) -> None:
        """The weights loaded now (else on the first encoding)."""
        self._load()

    def _load(self) -> list[Any]:
        if self._replicas is None:
            try:
                from gritlm import GritLM
            except ImportError:
                raise UserError("retriever 'grit' needs the gritlm package: pip install gritlm") from None
            self._replicas = [GritLM(self.config.hf_model, mode="embedding", torch_dtype=torch_dtype(self.dtype, d),
                                     device_map=d) for d in self.devices]
        return self._replicas

    def encode(self, texts: list[str], instruction: str, max_length: int) -> np.ndarray:
        def encode_batch(model, batch: list[str]) -> np.ndarray:
            return np.asarray(model.encode(batch, instruction=instruction, batch_size=len(batch),
                                           max_length=max_length), dtype=np.float32)

        return run_batches(texts, self.batch_size, self._load(), encode_batch)
