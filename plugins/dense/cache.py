"""Corpus embeddings on disk, in chunks, so a killed run resumes mid-corpus and reruns encode nothing.
A folder is keyed by everything that determines a document's embedding. Each chunk is written
atomically, so concurrent runs at worst compute one twice; no pickle anywhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from r2med_tasks.plugin import atomic

FORMAT = "r2med-embeddings/2"  # 2: the documents' identity nested under its own key, keyed strictly


def _tagged(value: Any) -> dict[str, list[str]]:
    """A value JSON has no type for (a path, a dtype), as its type and text: ``str()`` alone would
    make it the string it prints as."""
    return {"$object": [f"{type(value).__module__}.{type(value).__qualname__}", str(value)]}


def folder_key(identity: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``identity``, a value JSON has no type for tagged with its
    type, never taken for the string it prints as."""
    blob = json.dumps(identity, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=_tagged)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()[:32]


class EmbeddingCache:
    """``identity`` (what determines a document's embedding) is kept apart from the cache's own
    fields, so no identity field can stand in for one of them."""

    def __init__(self, identity: dict[str, Any], n_docs: int, chunk_size: int, root: Path) -> None:
        self.identity = {"format": FORMAT, "chunk_size": chunk_size, "n_docs": n_docs, "documents": identity}
        self.folder = root / folder_key(self.identity)
        self.n_docs, self.chunk_size = n_docs, chunk_size

    @property
    def n_chunks(self) -> int:
        return -(-self.n_docs // self.chunk_size)

    def chunk_path(self, i: int) -> Path:
        return self.folder / f"chunk-{i:05d}.npy"

    def missing(self) -> list[int]:
        return [i for i in range(self.n_chunks) if not self.chunk_path(i).exists()]

    def bounds(self, i: int) -> tuple[int, int]:
        """First and past-the-last document of chunk ``i`` (the last chunk may be shorter)."""
        return i * self.chunk_size, min(self.n_docs, (i + 1) * self.chunk_size)

    def open(self) -> list[int]:
        """Record what the folder holds and return the chunks still to encode."""
        atomic.write_json(self.folder / "identity.json", self.identity)
        return self.missing()

    def put(self, i: int, embeddings: np.ndarray) -> None:
        """Store chunk ``i`` as soon as it is encoded: a killed run costs at most the chunks in flight."""
        start, stop = self.bounds(i)
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        if embeddings.shape[0] != stop - start:
            raise ValueError(f"encoder returned {embeddings.shape[0]} embeddings for {stop - start} documents")
        with atomic.replacing(self.chunk_path(i)) as f:
            np.save(f, embeddings, allow_pickle=False)

    def fill(self, encode: Callable[[int, int], np.ndarray]) -> int:
        """Encode every missing chunk with ``encode(start, stop)``; returns how many were encoded."""
        todo = self.open()
        for i in todo:
            self.put(i, encode(*self.bounds(i)))
        return len(todo)

    def chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first document index, embeddings) per chunk, memory-mapped."""
        for i in range(self.n_chunks):
            yield i * self.chunk_size, np.load(self.chunk_path(i), mmap_mode="r", allow_pickle=False)



QUERY_FORMAT = "r2med-query-embeddings/1"


class QueryEmbeddingCache:
    """The embeddings of one encoding call's texts (a task's queries): a warm run reads them back and
    loads no model at all. Keyed by the whole ordered list, not text by text: a text's embedding can
    differ in its last bits with its batch mates, so only the same call gives the same numbers."""

    def __init__(self, identity: dict[str, Any], root: Path) -> None:
        self.identity = {"format": QUERY_FORMAT, "texts": identity}
        self.folder = root / folder_key(self.identity)

    def path(self, texts: list[str]) -> Path:
        blob = json.dumps(texts, ensure_ascii=True, separators=(",", ":"))  # a lone surrogate as itself
        return self.folder / f"{hashlib.sha256(blob.encode('ascii')).hexdigest()[:32]}.npy"

    def encode(self, texts: list[str], encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """``texts``' embeddings, read back when this call was made before."""
        path = self.path(texts)
        try:
            stored = np.load(path, allow_pickle=False)
            if (stored.dtype == np.float32 and stored.ndim == 2 and stored.shape[0] == len(texts)
                    and np.isfinite(stored).all()):
                return stored
        except (OSError, ValueError, EOFError):
            pass
        fresh = np.ascontiguousarray(encode(texts), dtype=np.float32)
        if fresh.ndim != 2 or fresh.shape[0] != len(texts):
            raise ValueError(f"encoder returned {fresh.shape[0] if fresh.ndim else 0} embeddings for {len(texts)} texts")
        atomic.write_json(self.folder / "identity.json", self.identity)
        with atomic.replacing(path) as f:
            np.save(f, fresh, allow_pickle=False)
        return fresh
