"""Dense retrieval: cached corpus embeddings, query embeddings, exact cosine top-k, with any
``Model`` adapter. The corpus is encoded chunk by chunk, here or on Ray actors (one per GPU); both
ways batch a chunk exactly alike, so they store the same embeddings, and a lost node costs only
its chunk.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from r2med_tasks.llm import ShowsRetries
from r2med_tasks.plugin import PluginError, UserError

from ..local_models import length_sorted_batches

from .cache import EmbeddingCache, QueryEmbeddingCache
from .search import cosine_top_k


class Model(Protocol):
    def encode_queries(self, texts: list[str], task) -> np.ndarray: ...

    def encode_documents(self, texts: list[str], task) -> np.ndarray: ...

    def encode_generated(self, texts: list[str], task) -> np.ndarray:
        """Rewriter-generated documents, encoded as the published wrapper encoded them."""

    def document_identity(self, task) -> dict[str, Any]:
        """Everything that determines a document's embedding (keys the cache)."""

    def query_identity(self, task, kind: str) -> dict[str, Any]:
        """Optional: everything that determines a query's embedding; with it, query embeddings are
        cached too and a warm run loads no model."""

    def model_meta(self) -> dict[str, Any]: ...


class DenseRetriever:
    """Applies the published rule for dense retrievers itself (``combines_generated``)."""

    def __init__(self, model: Model, *, cache: bool, chunk_size: int, drop_identical_ids: bool,
                 ray_actors: int = 0) -> None:
        self.model, self.use_cache, self.chunk_size = model, cache, chunk_size
        self.drop_identical_ids, self.ray_actors = drop_identical_ids, ray_actors
        self._ids: list[str] = []
        self._chunks: list[tuple[int, np.ndarray]] = []
        self._query_cache: Path | None = None
        self._weights_loaded = False

    def model_meta(self) -> dict[str, Any]:
        return self.model.model_meta()

    def index(self, corpus, *, task, context) -> None:
        if isinstance(self.model, ShowsRetries):  # an API model: its retries on the run's status line
            self.model.show_retries(context.retries)
        self._ids = corpus.ids
        if not self.use_cache:
            self._loaded(context)
            self._chunks = [(0, self.model.encode_documents(corpus.texts, task))]
            return
        identity = self.model.document_identity(task)
        if "corpus" in identity:  # would be overwritten by the corpus checksum: two models, one cache
            raise PluginError(f"{type(self.model).__name__}.document_identity() has a 'corpus' field, which the "
                              "embedding cache keeps for the corpus checksum; name it otherwise")
        cache = EmbeddingCache({**identity, "corpus": corpus.checksum}, len(corpus), self.chunk_size,
                               root=context.cache("embeddings"))
        todo = sum(stop - start for start, stop in map(cache.bounds, cache.missing()))
        if todo:
            what = f"{todo:,} of {len(corpus):,}" if todo < len(corpus) else f"{len(corpus):,}"
            advance = context.progress(f"encoding {what} documents", todo)
            texts = corpus.texts  # read only when a chunk is to be encoded
            if self.ray_actors:
                fill_on_ray(cache, texts, self.model, task, self.ray_actors, advance)
            else:
                self._loaded(context)
                cache.fill(lambda start, stop: encode_chunk(self.model, texts[start:stop], task, advance))
        self._chunks = list(cache.chunks())
        self._query_cache = context.cache("query-embeddings")

    def _loaded(self, context) -> None:
        """The model's weights loaded before its first encoding, timed apart from indexing."""
        load = getattr(self.model, "load", None)
        if callable(load) and not self._weights_loaded:
            with context.loading():
                load()
            self._weights_loaded = True

    def _encoded(self, texts: list[str], task, kind: str, context=None) -> np.ndarray:
        """The model's embeddings of ``texts``, read back when this very call was made before."""
        encoder = self.model.encode_queries if kind == "query" else self.model.encode_generated

        def encode(batch: list[str]) -> np.ndarray:
            if context is not None:
                self._loaded(context)
            return encoder(batch, task)

        identity = getattr(self.model, "query_identity", None)
        if self._query_cache is None or identity is None:
            return encode(texts)
        return QueryEmbeddingCache(identity(task, kind), self._query_cache).encode(texts, encode)

    def query_embeddings(self, queries, task, context=None) -> np.ndarray:
        """One vector per query; with generated documents, the published rule: the mean of the
        query's embedding and each document's."""
        parts = [q.combined("dense") for q in queries]
        heads = [p if isinstance(p, str) else p[0] for p in parts]
        embeddings = self._encoded(heads, task, "query", context)
        tails = [(i, doc) for i, p in enumerate(parts) if not isinstance(p, str) for doc in p[1:]]
        if tails:
            generated = self._encoded([doc for _, doc in tails], task, "generated", context)
            sums, counts = embeddings.astype(np.float32).copy(), np.ones(len(parts), dtype=np.float32)
            for (i, _), vector in zip(tails, generated):
                sums[i] += vector
                counts[i] += 1
            embeddings = sums / counts[:, None]
        return embeddings

    def search(self, queries, *, task, top_k: int, context) -> dict[str, dict[str, float]]:
        if isinstance(self.model, ShowsRetries):
            self.model.show_retries(context.retries)
        embeddings = self.query_embeddings(queries, task, context)
        k = top_k + 1 if self.drop_identical_ids else top_k  # room for the dropped one, as BEIR does
        hits = cosine_top_k(embeddings, self._chunks, min(k, len(self._ids)))
        out = {}
        for query, row in zip(queries, hits):
            docs = {self._ids[i]: s for i, s in row if not (self.drop_identical_ids and self._ids[i] == query.id)}
            out[query.id] = dict(list(docs.items())[:top_k])
        return out


def encode_chunk(model: Model, texts: list[str], task, advance: Callable[[int], None] = lambda n: None) -> np.ndarray:
    """A chunk's embeddings, reporting progress: encoded in groups of one length-sorted batch per
    device, as one call over the whole chunk would batch it, so the embeddings are the same to the bit."""
    group = _group_size(model)
    if group is None or group >= len(texts):
        out = model.encode_documents(texts, task)
        advance(len(texts))
        return out
    out = None
    for indices in length_sorted_batches(texts, group):
        part = model.encode_documents([texts[i] for i in indices], task)
        if out is None:
            out = np.empty((len(texts), part.shape[1]), dtype=np.float32)
        out[indices] = part
        advance(len(indices))
    return out


def _group_size(model: Model) -> int | None:
    """Texts per batch times devices of a local model's encoder; ``None`` for any other."""
    encoder = model.encoder() if callable(getattr(model, "encoder", None)) else None
    batch, devices = getattr(encoder, "batch_size", None), getattr(encoder, "devices", None)
    return batch * len(devices) if isinstance(batch, int) and isinstance(devices, list) and devices else None


def fill_on_ray(cache: EmbeddingCache, texts: list[str], model: Model, task, actors: int,
                advance: Callable[[int], None], in_flight: int = 2) -> None:
    """Encode the cache's missing chunks on ``actors`` Ray actors, each holding the model on a GPU of
    its own. A dying actor's chunks go at once to the next actor free (no chunk waits for a restart),
    and it rejoins once Ray has restarted it."""
    try:
        import ray
    except ImportError:
        raise UserError("-o ray_actors needs Ray: pip install 'r2med[ray]'") from None
    if not isinstance(getattr(model, "model_ref", ""), str):
        raise UserError("-o ray_actors: the model must be a hub name or a folder, not a Python object")
    todo = cache.open()
    if not todo:
        return
    if not ray.is_initialized():
        ray.init()
    gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0

    remote = ray.remote(num_gpus=gpus, num_cpus=1, max_restarts=3, max_task_retries=0)(ChunkEncoder)
    expected = model.document_identity(task)
    pool = [remote.remote(_portable(model), task, expected) for _ in range(min(actors, len(todo)))]
    waiting, running, idle, rejoining = list(todo), {}, [], {}

    def send(actor) -> None:
        if waiting:
            i = waiting.pop(0)
            running[actor.encode.remote(texts[slice(*cache.bounds(i))])] = (i, actor)
        elif actor not in idle:
            idle.append(actor)

    try:
        for actor in pool * in_flight:
            send(actor)
        while running or (waiting and rejoining):
            (ref,), _ = ray.wait([*running, *rejoining], num_returns=1)
            if ref in rejoining:  # a restarted actor is ready
                actor = rejoining.pop(ref)
                with suppress(ray.exceptions.RayActorError):  # out of restarts: the others go on
                    ray.get(ref)
                    for _ in range(in_flight):
                        send(actor)
                continue
            i, actor = running.pop(ref)
            try:
                cache.put(i, ray.get(ref))
            except ray.exceptions.RayTaskError as e:
                cause = e.cause if isinstance(e.cause, UserError) else None
                raise cause or e from None
            except ray.exceptions.RayActorError:  # died (or unreachable) with the chunk
                waiting.insert(0, i)  # to the first actor free; this one rejoins when restarted
                if actor not in rejoining.values():
                    rejoining[actor.__ray_ready__.remote()] = actor
                while waiting and idle:
                    send(idle.pop(0))
                continue
            advance(len(range(*cache.bounds(i))))
            send(actor)
        if waiting:
            raise PluginError(f"-o ray_actors: every actor died more often than it may restart; "
                              f"{len(waiting)} chunks were not encoded (rerun to resume)")
    finally:
        for actor in pool:
            ray.kill(actor)


def _portable(model: Model) -> Model:
    """A copy of the model adapter with nothing loaded, choosing its device where it lands: an actor
    sees only its own GPU."""
    clone = copy.copy(model)
    if str(getattr(clone, "device", "")).startswith("cuda"):
        clone.device = ""
    for loaded in ("_encoder", "_devices"):
        if hasattr(clone, loaded):
            setattr(clone, loaded, None)
    return clone


class ChunkEncoder:
    """A Ray actor's state: the model, loaded on the first chunk and kept for the others."""

    def __init__(self, model: Model, task, expected: dict[str, Any]) -> None:
        self.model, self.task, self.expected = model, task, expected

    def encode(self, texts: list[str]) -> np.ndarray:
        found = self.model.document_identity(self.task)
        if found != self.expected:  # e.g. fp16 on this actor's GPU where the caller, without one, keys fp32
            changed = ", ".join(f"{k}: {self.expected.get(k)} -> {v}" for k, v in found.items()
                                if self.expected.get(k) != v)
            raise UserError(f"-o ray_actors: an actor would encode differently from the cache it fills ({changed}); "
                            "start the run where the actors' device is available, or set -o dtype=fp32")
        return encode_chunk(self.model, texts, self.task)
