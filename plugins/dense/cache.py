"""Corpus embeddings on disk, in chunks, so a killed run resumes mid-corpus and reruns encode nothing.

A cache folder is keyed by everything that determines a document's embedding: model and revision,
document instruction, pooling, length limit, dtype, chunk size and the corpus checksum. Each chunk
(``chunk-00000.npy``, float32, documents in corpus order) is written atomically, so concurrent runs
sharing a folder at worst compute the same chunk twice and one identical copy wins. Chunks are read
back memory-mapped; no pickle anywhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from r2med_tasks import atomic

FORMAT = "r2med-embeddings/1"


class EmbeddingCache:
    def __init__(self, identity: dict[str, Any], n_docs: int, chunk_size: int, root: Path) -> None:
        self.identity = {"format": FORMAT, "chunk_size": chunk_size, **identity}
        key = hashlib.sha256(json.dumps(self.identity, sort_keys=True, default=str).encode()).hexdigest()[:24]
        self.folder = root / key
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
        """Record what the folder holds (so it can be told apart on disk) and return the chunks still to
        encode."""
        atomic.write_json(self.folder / "identity.json", self.identity)
        return self.missing()

    def put(self, i: int, embeddings: np.ndarray) -> None:
        """Store chunk ``i`` atomically, as soon as it is encoded: a killed run (or a lost Ray node)
        costs at most the chunks in flight."""
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
