"""``BM25Index.scores`` (one scipy ``csc_matvec`` call per query over postings stored last term
first) against scipy's public sparse product in ascending term id, bit for bit; and the on-disk
layout (memory-mapped ``.npy`` postings named by the ``.npz``) failing loudly when damaged."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from r2med_plugins.bm25 import index as index_module
from r2med_plugins.bm25.index import BM25Index, EarlierFormat


def _public_scores(index: BM25Index, queries, weighting: str) -> np.ndarray:
    """``query_matrix @ term_docs`` with the terms in ascending id: scipy's csr_matmat adds each
    document's products in ascending term id, as gensim does."""
    ascending = index.weights.T.tocsr()
    return (index.query_matrix(queries, weighting) @ ascending).toarray()


def _json_bytes(value: object) -> np.ndarray:
    return np.frombuffer(json.dumps(value).encode(), dtype=np.uint8)


def _bits(scores: np.ndarray) -> np.ndarray:
    return scores.view(np.int32)


def _random_index(seed: int, n_docs: int, n_words: int) -> tuple[BM25Index, list[list[str]]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(n_words)]
    docs = [[rng.choice(words[: rng.randint(1, n_words)]) for _ in range(rng.choice([0, 1, 3, 20, 90, 400]))]
            for _ in range(n_docs)]
    docs[5] = docs[2] = docs[9]  # identical documents tie
    queries = [[rng.choice(words) for _ in range(rng.randint(1, 300))] for _ in range(40)]
    queries += [
        [],  # empty
        ["unknown", "terms", "only"],
        ["w0", "w0", "w0", "unknown", "w1"],  # repeated and unknown terms
        words,  # every term once
        [docs[2][0]] * 7 if docs[2] else ["w3"],
    ]
    return BM25Index.build(docs), queries


@pytest.fixture(scope="module", params=[(3, 300, 50), (7, 1200, 4000), (11, 40, 3)], ids=["small", "wide", "tiny"])
def indexed(request):
    return _random_index(*request.param)


@pytest.mark.parametrize("weighting", ["bm25", "plain"])
def test_fast_scores_equal_the_public_product_bit_for_bit(indexed, weighting) -> None:
    index, queries = indexed
    fast = index.scores(queries, weighting)
    assert fast.dtype == np.float32 and fast.shape == (len(queries), index.num_docs)
    assert np.array_equal(_bits(fast), _bits(_public_scores(index, queries, weighting)))
    assert not fast[-5:-3].any()  # no known term: every document scores 0


def test_the_comparison_sees_summation_order() -> None:
    """Adding the same float32 products in descending term id changes some scores, so the
    bit-for-bit equality above does check the order."""
    index, queries = _random_index(7, 1200, 4000)
    matrix = index.query_matrix(queries)
    descending = matrix[:, ::-1]
    descending.sort_indices()
    other_order = (descending @ index.term_docs).toarray()
    assert not np.array_equal(_bits(other_order), _bits(index.scores(queries)))
    np.testing.assert_allclose(other_order, index.scores(queries), rtol=1e-5)


@pytest.mark.parametrize("weighting", ["bm25", "plain"])
def test_without_the_private_kernel_the_public_product_is_used(indexed, weighting, monkeypatch) -> None:
    index, queries = indexed
    fast = index.scores(queries, weighting)
    fast_hits = index.search(queries, top_k=10, query_weighting=weighting)
    monkeypatch.setattr(index_module, "_csc_matvec", None)
    assert np.array_equal(_bits(index.scores(queries, weighting)), _bits(fast))
    assert index.search(queries, top_k=10, query_weighting=weighting) == fast_hits


def test_loaded_index_scores_like_the_built_one(indexed, tmp_path) -> None:
    index, queries = indexed
    index.save(tmp_path)
    loaded = BM25Index.load(tmp_path, num_docs=index.num_docs)
    assert np.array_equal(_bits(loaded.scores(queries)), _bits(index.scores(queries)))


def _saved(tmp_path: Path) -> Path:
    index, _ = _random_index(3, 300, 50)
    index.save(tmp_path)
    (postings,) = tmp_path.glob("postings-*")
    return postings


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage", "document ids out of range",
                                    "offsets out of range", "wrong dtype"])
def test_damaged_postings_raise_on_load(tmp_path, damage) -> None:
    postings = _saved(tmp_path)
    indices = postings / "indices.npy"
    if damage == "truncated":
        data = indices.read_bytes()
        indices.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        indices.write_bytes(b"")
    elif damage == "garbage":
        indices.write_bytes(bytes(range(256)) * 8)
    elif damage == "document ids out of range":
        np.save(indices, np.load(indices) + 1000)
    elif damage == "offsets out of range":
        np.save(postings / "indptr.npy", np.load(postings / "indptr.npy") * 2)
    else:
        np.save(postings / "data.npy", np.load(postings / "data.npy").astype(np.float64))
    with pytest.raises((ValueError, EOFError, OSError)):
        BM25Index.load(tmp_path)


def test_a_missing_postings_folder_is_file_not_found(tmp_path) -> None:
    postings = _saved(tmp_path)
    for f in postings.iterdir():
        f.unlink()
    postings.rmdir()
    with pytest.raises(FileNotFoundError):
        BM25Index.load(tmp_path)


def test_postings_outside_the_index_folder_are_refused(tmp_path) -> None:
    _saved(tmp_path / "elsewhere")
    _saved(tmp_path / "cache")
    stored = tmp_path / "cache" / "bm25_index.npz"
    with np.load(stored) as saved:
        arrays = dict(saved)
    (postings,) = (tmp_path / "elsewhere").glob("postings-*")
    meta = {**json.loads(arrays["meta"].tobytes()), "postings": f"../elsewhere/{postings.name}"}
    arrays["meta"] = _json_bytes(meta)
    np.savez(stored, **arrays)
    with pytest.raises(ValueError, match="postings"):
        BM25Index.load(tmp_path / "cache")


def test_an_index_of_the_previous_format_is_refused(tmp_path) -> None:
    index, _ = _random_index(3, 300, 50)
    meta = {"format": "r2med-bm25-index/1", "k1": 0.9, "b": 0.4, "num_docs": index.num_docs,
            "total_tokens": index.total_tokens}
    np.savez(tmp_path / "bm25_index.npz", meta=_json_bytes(meta), terms=_json_bytes(index.terms), idf=index.idf,
             indptr=index.term_docs.indptr, indices=index.term_docs.indices, data=index.term_docs.data)
    with pytest.raises(EarlierFormat, match="format"):
        BM25Index.load(tmp_path)
    meta["format"] = "someone-else/1"  # not ours at all: unreadable, not earlier
    np.savez(tmp_path / "bm25_index.npz", meta=_json_bytes(meta), terms=_json_bytes(index.terms), idf=index.idf)
    with pytest.raises(ValueError, match="format") as refused:
        BM25Index.load(tmp_path)
    assert not isinstance(refused.value, EarlierFormat)


def test_a_save_removes_postings_no_index_names(tmp_path) -> None:
    index, _ = _random_index(11, 40, 3)
    (tmp_path / "postings-left-by-an-interrupted-save").mkdir()
    index.save(tmp_path)
    index.save(tmp_path)
    assert len(list(tmp_path.glob("postings-*"))) == 1
    loaded = BM25Index.load(tmp_path)  # the postings the index names are the ones kept
    queries = [[t] for t in index.terms]
    assert loaded.terms == index.terms and loaded.search(queries, top_k=40) == index.search(queries, top_k=40)


@pytest.mark.parametrize("damage", ["truncated postings", "previous format", "postings removed"])
def test_retriever_rebuilds_a_damaged_cache(tmp_path, damage) -> None:
    from r2med_plugins.bm25 import BM25Options
    from r2med_plugins.bm25.retriever import BM25Retriever
    from r2med_tasks.components.context import Context
    from r2med_tasks.tasks.taskdata import Corpus

    texts = [f"patient {i} with fever {'cough ' * (i % 4)}" for i in range(60)]
    corpus = Corpus([f"d{i}" for i in range(len(texts))], texts, "checksum")
    lines = []
    context = Context(cache_dir=tmp_path, log=lines.append)
    task = SimpleNamespace(name="T")
    options = BM25Options(k1=0.9, b=0.4, query_weighting="bm25", cache=True)
    first = BM25Retriever(options)
    first.index(corpus, task=task, context=context)
    (stored,) = tmp_path.rglob("bm25_index.npz")
    (postings,) = stored.parent.glob("postings-*")
    if damage == "truncated postings":
        (postings / "data.npy").write_bytes((postings / "data.npy").read_bytes()[:100])
    elif damage == "previous format":
        with np.load(stored) as saved:
            arrays = dict(saved)
        meta = json.loads(arrays["meta"].tobytes())
        arrays["meta"] = _json_bytes({**meta, "format": "r2med-bm25-index/1"})
        np.savez(stored, **arrays)
    else:
        for f in postings.iterdir():
            f.unlink()
        postings.rmdir()
    retriever = BM25Retriever(options)
    retriever.index(corpus, task=task, context=context)
    assert len(lines) == (0 if damage == "postings removed" else 1)  # a removed folder: an interrupted save
    assert all("rebuilding" in line for line in lines)
    if damage == "previous format":  # an upgrade, not damage: said so
        assert lines[0].startswith("note: T: the BM25 index cache was written by an earlier r2med")
    queries = [["fever"], ["cough", "patient"]]
    assert retriever._index.search(queries) == first._index.search(queries)
    assert BM25Index.load(stored.parent, num_docs=len(texts)).num_docs == len(texts)
