"""What a task's data is: the corpus, the queries a component may see, the judgments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Query:
    """What a component sees of a query: its id, its text and what a rewriter generated for it,
    reasoning traces stripped. ``reasoning`` marks a reasoning model's extracted answer, which the
    published runs combined with the query differently."""

    id: str
    text: str
    generated: tuple[str, ...] = ()
    method: str = ""
    reasoning: bool = False

    def combined(self, family: str) -> str | tuple[str, ...]:
        """What a retriever of ``family`` ("bm25" or "dense") searches with, by R2MED's published
        rules; a tuple's embeddings are averaged."""
        from .combine import RETRIEVER_FAMILIES, bm25_query, dense_query

        if family not in RETRIEVER_FAMILIES:
            raise ValueError(f"unknown retriever family {family!r}; expected one of {RETRIEVER_FAMILIES}")
        return bm25_query(self) if family == "bm25" else dense_query(self)


class Corpus:
    """Documents in source order; caches of indexes and embeddings key on ``checksum``. ``texts``
    may stay in the file until first read: a component that needs only ids (a cached index) never
    pays for parsing hundreds of MB."""

    def __init__(self, ids: list[str], texts: list[str], checksum: str, *, folder: Path | None = None) -> None:
        self.ids, self.checksum = ids, checksum
        self.folder = folder  # published generations lie beside it
        self._texts: list[str] | None = texts
        self._read_texts: Callable[[], list[str]] | None = None

    @classmethod
    def lazy(cls, ids: list[str], checksum: str, read_texts: Callable[[], list[str]], *,
             folder: Path | None = None) -> Corpus:
        """A validated corpus whose texts are ``read_texts()``, called on first access (picklable:
        corpora go to workers)."""
        corpus = cls(ids, [], checksum, folder=folder)
        corpus._texts, corpus._read_texts = None, read_texts
        return corpus

    @property
    def texts(self) -> list[str]:
        if self._texts is None:
            self._texts = self._read_texts()
        return self._texts

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"Corpus({len(self.ids)} documents, checksum={self.checksum[:16]})"


@dataclass
class TaskData:
    corpus: Corpus
    queries: list[Query]
    qrels: dict[str, dict[str, int]]
    revision: str
    source: str
    warnings: list[str] = field(default_factory=list)
