"""Corpus encoding: the progress bar counts documents as they are encoded (issue #15). (Encoding
on Ray actors is tested in test_ray.py, with these helpers.)"""

from __future__ import annotations

import numpy as np

from conftest import SAMPLE
from r2med_tasks import Corpus, TaskSpec
from r2med_tasks.components.context import Context
from r2med_tasks.tasks.datafiles import read_jsonl

TASK = TaskSpec(name="R2MEDSampleRetrieval", short_name="sample", description="")


def corpus(n: int | None = None) -> Corpus:
    rows = read_jsonl(SAMPLE / "corpus.jsonl")[0].values[:n]
    return Corpus([r["id"] for r in rows], [r["text"] for r in rows], f"sample-{len(rows)}")


class Bars:
    """``context.progress`` that records each bar's description, total and advances."""

    def __init__(self) -> None:
        self.bars: list[tuple[str, int, list[int]]] = []

    def __call__(self, description: str, total: int):
        self.bars.append((description, total, []))
        return self.bars[-1][2].append


def retriever(model_path, **kw):
    from r2med_plugins.dense.retriever import DenseRetriever
    from r2med_plugins.dense.st import SentenceTransformerModel

    model = SentenceTransformerModel(str(model_path), None, None, "", "", 0, 4, "cpu")
    return DenseRetriever(model, cache=True, drop_identical_ids=False, **kw)


def cache_of(r, docs: Corpus, root):
    from r2med_plugins.dense.cache import EmbeddingCache

    return EmbeddingCache({**r.model.document_identity(TASK), "corpus": docs.checksum}, len(docs), r.chunk_size,
                          root=root / "embeddings")


def chunk_bytes(r, docs: Corpus, root) -> list[bytes]:
    cache = cache_of(r, docs, root)
    return [cache.chunk_path(i).read_bytes() for i in range(cache.n_chunks)]


def test_progress_counts_documents_as_they_are_encoded(small_model_path, tmp_path):
    """30 documents, chunks of 8192: the bar's total is 30 (not 8192) and it moves every batch (4
    texts), reaching 30; chunks of 20 over 48 documents end on a partial chunk of 8 and reach 48; a
    resumed run counts only what is left. Encoding in groups stores what one call per chunk gives."""
    bars = Bars()
    small = corpus(30)
    retriever(small_model_path, chunk_size=8192).index(small, task=TASK, context=Context(tmp_path, progress=bars))
    assert bars.bars == [("encoding 30 documents", 30, [4] * 7 + [2])]

    bars = Bars()
    docs = corpus()
    r = retriever(small_model_path, chunk_size=20)
    r.index(docs, task=TASK, context=Context(tmp_path, progress=bars))
    (description, total, steps), = bars.bars
    assert (description, total, sum(steps), len(steps)) == ("encoding 48 documents", 48, 48, 12)
    stored = chunk_bytes(r, docs, tmp_path)
    for i, start in enumerate(range(0, 48, 20)):  # the whole chunk in one call, as before the fix
        whole = np.ascontiguousarray(r.model.encode_documents(docs.texts[start:start + 20], TASK), dtype=np.float32)
        assert np.load(cache_of(r, docs, tmp_path).chunk_path(i)).tobytes() == whole.tobytes()
    cache_of(r, docs, tmp_path).chunk_path(2).unlink()
    bars = Bars()
    retriever(small_model_path, chunk_size=20).index(docs, task=TASK, context=Context(tmp_path, progress=bars))
    assert [(d, t, sum(s)) for d, t, s in bars.bars] == [("encoding 8 of 48 documents", 8, 8)]
    assert chunk_bytes(r, docs, tmp_path) == stored
