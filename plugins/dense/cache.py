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

    def fill(self, encode: Callable[[int, int], np.ndarray], on_chunk: Callable[[int], None] = lambda n: None) -> int:
        """Encode every missing chunk with ``encode(start, stop)``; returns how many were encoded."""
        atomic.write_json(self.folder / "identity.json", self.identity)
        todo = self.missing()
        for i in todo:
            start, stop = i * self.chunk_size, min(self.n_docs, (i + 1) * self.chunk_size)
            embeddings = np.ascontiguousarray(encode(start, stop), dtype=np.float32)
            if embeddings.shape[0] != stop - start:
                raise ValueError(f"encoder returned {embeddings.shape[0]} embeddings for {stop - start} documents")
            with atomic.replacing(self.chunk_path(i)) as f:
                np.save(f, embeddings, allow_pickle=False)
            on_chunk(stop - start)
        return len(todo)

    def chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first document index, embeddings) per chunk, memory-mapped."""
        for i in range(self.n_chunks):
            yield i * self.chunk_size, np.load(self.chunk_path(i), mmap_mode="r", allow_pickle=False)
