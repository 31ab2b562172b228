"""Cross-encoder rerankers: a model scores each (query, document) pair."""

from __future__ import annotations

import numpy as np

from ..local_models import parse_devices, quiet_transformers, run_batches, torch_dtype


class CrossEncoderReranker:
    """sentence-transformers' CrossEncoder with raw logits (no sigmoid), as the published scores
    were; ``logit`` picks the logit of a two-class model (monoBERT: the "relevant" class, 1)."""

    def __init__(self, options, *, model, logit: int, display_name: str = "") -> None:
        """``display_name``: the leaderboard's name of the published model, empty for any other."""
        self.model, self.model_ref, self.max_length = model, model.ref, options.max_length
        self.batch_size, self.device, self.dtype = options.batch_size, options.device, options.dtype
        self.cache, self.logit = options.cache, logit
        self.display_name = display_name
        self._replicas = None

    def model_meta(self) -> dict:
        """The model as results name it, with the published model's leaderboard name."""
        name, revision = self.model.identity()
        return {"name": name if "/" in name else f"hub/{name}", "revision": revision, "model_type": ["cross-encoder"],
                **({"display_name": self.display_name} if self.display_name else {})}

    def identity(self) -> dict:
        """What a pair's score depends on besides the pair (the score cache's name)."""
        device = parse_devices(self.device)[0]
        return {"scorer": type(self).__name__, "model": self.model.identity(), "logit": self.logit,
                "max_length": self.max_length, "dtype": str(torch_dtype(self.dtype, device)),
                "device": "cuda" if device.startswith("cuda") else device}

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
        """One score per (query, document) pair, in input order."""
        def batch(model, items: list[tuple[str, str]]) -> np.ndarray:
            logits = np.asarray(model.predict(items, batch_size=len(items), convert_to_numpy=True,
                                              show_progress_bar=False), dtype=np.float32)
            return (logits[:, self.logit] if logits.ndim == 2 else logits).reshape(-1, 1)

        return run_batches(pairs, self.batch_size, self._load(), batch, length=lambda p: len(p[0]) + len(p[1]))[:, 0]

    def rerank(self, queries, corpus, candidates, *, task, context) -> dict[str, dict[str, float]]:
        from .scores import CHUNK, PairScores, pair_key

        text_of = dict(zip(corpus.ids, corpus.texts))
        query_of = {q.id: q.text for q in queries}
        pairs = [(qid, doc) for qid, docs in candidates.items() for doc in docs]
        keys = [pair_key(query_of[qid], text_of[doc]) for qid, doc in pairs]
        cache = PairScores(self.identity(), context.cache("rerank-scores")) if self.cache else None
        scores = dict(cache.scores) if cache else {}
        first = {}  # each distinct pair once, longest first
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        order = sorted(first.values(), key=lambda i: -(len(query_of[pairs[i][0]]) + len(text_of[pairs[i][1]])))
        todo = sum(key not in scores for key in first)
        advance = context.progress(f"scoring {todo:,} pairs", todo) if todo else (lambda n: None)
        for start in range(0, len(order), CHUNK):  # fixed chunks: a resumed run batches as an uninterrupted one
            chunk = [i for i in order[start:start + CHUNK] if keys[i] not in scores]
            if not chunk:
                continue
            values = self.score([(query_of[pairs[i][0]], text_of[pairs[i][1]]) for i in chunk]).tolist()
            fresh = {keys[i]: v for i, v in zip(chunk, values)}
            if cache:
                cache.add(fresh)  # a chunk is journaled whole or not at all
            scores.update(fresh)
            advance(len(chunk))
        out: dict[str, dict[str, float]] = {qid: {} for qid in candidates}
        for (qid, doc), key in zip(pairs, keys):
            out[qid][doc] = scores[key]
        return out
