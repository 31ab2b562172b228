"""RankLLaMA: a LoRA over Llama-2-7B scoring "query: q" / "document: d" pairs, as published: fp16,
1024 tokens, score = logits[0][0]. 1024 because the published numbers come from 45cbac5's
``src/eval_reranker.py``, whose name "llama" selects that branch (the later script's "rankllama"
never matches it). Needs ``pip install 'r2med[rankllama]'`` and access to Llama-2.
"""

from __future__ import annotations

import numpy as np

from r2med_tasks.plugin import UserError

from ..local_models import parse_devices, quiet_transformers, run_batches, torch_dtype

from .cross_encoder import CrossEncoderReranker


def pair_texts(query: str, document: str) -> tuple[str, str]:
    """RankLLaMA's input: the two segments it was trained on."""
    return f"query: {query}", f"document: {document}"


class RankLlamaReranker(CrossEncoderReranker):
    def __init__(self, options, *, model, base, display_name: str = "") -> None:
        """``model``: the LoRA adapter, ``base``: its base model."""
        super().__init__(options, model=model, logit=0, display_name=display_name)
        self.base_model, self.base = base, base.ref

    def model_meta(self) -> dict:
        """The adapter's name; its revision and the base model's make the revision."""
        meta = super().model_meta()
        return {**meta, "revision": "{}+{}@{}".format(meta["revision"], *self.base_model.identity())}

    def identity(self) -> dict:
        return {**super().identity(), "base": self.base_model.identity()}

    def _load(self):
        if self._replicas is None:
            try:
                from peft import PeftModel
            except ImportError:
                raise UserError("reranker 'rankllama' needs peft: pip install 'r2med[rankllama]'") from None
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            quiet_transformers()
            tokenizer = AutoTokenizer.from_pretrained(self.base)
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.unk_token
            self._replicas = []
            for device in parse_devices(self.device):
                base = AutoModelForSequenceClassification.from_pretrained(
                    self.base, num_labels=1, dtype=torch_dtype(self.dtype, device))
                base.config.pad_token_id = tokenizer.pad_token_id
                model = PeftModel.from_pretrained(base, self.model_ref).merge_and_unload().to(device).eval()
                self._replicas.append((tokenizer, model, device))
        return self._replicas

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        import torch

        def batch(replica, items: list[tuple[str, str]]) -> np.ndarray:
            tokenizer, model, device = replica
            queries, documents = zip(*(pair_texts(q, d) for q, d in items))
            inputs = tokenizer(list(queries), list(documents), max_length=self.max_length, truncation=True,
                               padding=True, return_tensors="pt").to(device)
            with torch.inference_mode():
                return model(**inputs).logits[:, :1].float().cpu().numpy()

        return run_batches(pairs, self.batch_size, self._load(), batch, length=lambda p: len(p[0]) + len(p[1]))[:, 0]
