"""Cross-encoder rerankers: a model scores each (query, document) pair."""

from __future__ import annotations

import numpy as np

from r2med_plugins.dense.encoders import parse_devices, quiet_transformers, run_batches, torch_dtype


class CrossEncoderReranker:
    """sentence-transformers' CrossEncoder with raw logits (no sigmoid), as the published scores
    were; ``label`` picks the logit of a two-class model (monoBERT: the "relevant" class, 1)."""

    def __init__(self, model: str, *, rerank_k: int, max_length: int, label: int, batch_size: int, device: str,
                 dtype: str) -> None:
        self.model_ref, self.rerank_k, self.max_length, self.label = model, rerank_k, max_length, label
        self.batch_size, self.device, self.dtype = batch_size, device, dtype
        self._replicas = None

    def _load(self):
        if self._replicas is None:
            import torch
            from sentence_transformers import CrossEncoder

            quiet_transformers()
            self._replicas = [CrossEncoder(self.model_ref, device=d, max_length=self.max_length,
                                           activation_fn=torch.nn.Identity(),
                                           model_kwargs={"dtype": torch_dtype(self.dtype, d)})
                              for d in parse_devices(self.device)]
        return self._replicas

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """One score per (query, document) pair, in input order (batched longest first)."""
        def batch(model, items: list[tuple[str, str]]) -> np.ndarray:
            logits = np.asarray(model.predict(items, batch_size=len(items), convert_to_numpy=True,
                                              show_progress_bar=False), dtype=np.float32)
            return (logits[:, self.label] if logits.ndim == 2 else logits).reshape(-1, 1)

        return run_batches(pairs, self.batch_size, self._load(), batch, length=lambda p: len(p[0]) + len(p[1]))[:, 0]

    def rerank(self, queries, corpus, candidates, *, task) -> dict[str, dict[str, float]]:
        text_of = dict(zip(corpus.ids, corpus.texts))
        query_of = {q.id: q.text for q in queries}
        pairs = [(qid, doc) for qid, docs in candidates.items() for doc in docs]
        scores = self.score([(query_of[qid], text_of[doc]) for qid, doc in pairs])
        out: dict[str, dict[str, float]] = {qid: {} for qid in candidates}
        for (qid, doc), s in zip(pairs, scores.tolist()):
            out[qid][doc] = s
        return out
