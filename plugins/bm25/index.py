"""Sparse-matrix BM25 equal to the gensim pipeline behind R2MED's published BM25 numbers.

R2MED (like BRIGHT) scores with gensim, not Lucene::

    dictionary = Dictionary(corpus_tokens)
    model = LuceneBM25Model(dictionary=dictionary, k1=0.9, b=0.4)
    index = SparseMatrixSimilarity(model[map(dictionary.doc2bow, corpus_tokens)], ...,
                                   normalize_queries=False, normalize_documents=False)
    scores = index[model[dictionary.doc2bow(query_tokens)]]

so a document term weighs ``idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` with
``idf = ln(N + 1) - ln(df + 0.5)`` and ``avgdl`` = corpus tokens / N, and the *query* bag of words
goes through the same model ("BM25Q"): query counts saturate against the query's own length and
idf counts twice. This module rebuilds that without gensim, bit for bit: term ids are assigned the
way ``Dictionary`` assigns them (first document first, alphabetical within a document), weights are
computed in float64 with gensim's operation order and stored as float32, and scores add each
document's float32 products in gensim's order, so scores are the same floats and ties fall exactly
where they fall in gensim (then by corpus position, as the reference's stable sort).

Not reproduced: gensim's ``Dictionary`` silently prunes its vocabulary past 2,000,000 terms; a
corpus that big gets a warning and exact, unpruned BM25.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
import sys
import warnings
from array import array
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.sparse as sp

from r2med_tasks.plugin import DEFAULT_TOP_K, atomic

from ..ranking import rank_top_k

__all__ = ["BM25Index", "EarlierFormat", "QueryWeighting"]

QueryWeighting = Literal["bm25", "plain"]

_FORMAT = "r2med-bm25-index/2"


class EarlierFormat(ValueError):
    """An index cache in a format this version no longer reads."""
_FILE_NAME = "bm25_index.npz"
_POSTINGS_PREFIX = "postings-"
_POSTINGS_ARRAYS = ("indptr", "indices", "data")
_GENSIM_PRUNE_AT = 2_000_000
_GENSIM_PRUNE_EVERY = 10_000
_BLOCK_TOKENS = 1 << 20  # tokens per block of documents while building


class _Vocabulary(dict[str, int]):
    """term -> provisional id, handing out the next id to each unseen term."""

    def __missing__(self, term: str) -> int:
        term_id = self[term] = len(self)
        return term_id


class BM25Index:
    """Lucene-variant BM25 over an analysed corpus, searchable in batches. Query weighting ``"bm25"``
    (what R2MED published): a term of count ``c`` in a query of ``ql`` known tokens weighs
    ``idf * c / (c + k1 * (1 - b + b * ql / avgdl))``; ``"plain"``: its count, as Lucene.
    """

    def __init__(
        self,
        terms: list[str],
        term_docs: sp.csr_matrix,
        idf: np.ndarray,
        total_tokens: int,
        k1: float,
        b: float,
    ) -> None:
        """``term_docs``: one row per term in *descending* term id order, so a query's postings lie
        at descending offsets and ``scores`` adds them in gensim's order with one kernel call."""
        self.terms = terms
        self.term_ids = dict(zip(terms, range(len(terms))))
        self.term_docs = term_docs
        self.idf = idf
        self.total_tokens = total_tokens
        self.k1 = k1
        self.b = b
        self.avgdl = total_tokens / term_docs.shape[1]  # as gensim: sum(cfs) / num_docs

    @property
    def num_docs(self) -> int:
        return self.term_docs.shape[1]

    @property
    def num_terms(self) -> int:
        return len(self.terms)

    @property
    def weights(self) -> sp.csc_matrix:
        """float32 (num_docs x num_terms) document term weights (a copy), columns by term id."""
        return self.term_docs[::-1].T

    @classmethod
    def build(
        cls, corpus_tokens: Iterable[Sequence[str]], *, k1: float = 0.9, b: float = 0.4
    ) -> BM25Index:
        """Index tokenized documents; document ``i`` of the corpus is row ``i``."""
        vocab = _Vocabulary()
        provisional = array("i")
        doc_lengths = array("q")
        for doc in corpus_tokens:
            before = len(provisional)
            provisional.extend(map(vocab.__getitem__, doc))
            doc_lengths.append(len(provisional) - before)
        return cls.from_term_ids(list(vocab), np.frombuffer(provisional, dtype=np.int32),
                                 np.frombuffer(doc_lengths, dtype=np.int64), k1=k1, b=b)

    @classmethod
    def from_term_ids(
        cls, terms: Sequence[str], term_ids: np.ndarray, doc_lengths: np.ndarray, *, k1: float = 0.9,
        b: float = 0.4
    ) -> BM25Index:
        """Index a corpus given as term ids, ``terms`` numbered in order of first occurrence. Equal to
        ``build`` over the same tokens."""
        return cls.from_encoded([terms, term_ids, doc_lengths], k1=k1, b=b)

    @classmethod
    def from_encoded(cls, encoded: list, *, k1: float = 0.9, b: float = 0.4) -> BM25Index:
        """``from_term_ids(*encoded)`` that empties ``encoded`` first, so the term ids are freed as
        soon as they have been counted."""
        terms, term_ids, doc_lengths = encoded
        encoded.clear()
        num_docs = len(doc_lengths)
        if num_docs == 0:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        lengths = np.asarray(doc_lengths, dtype=np.int64)
        index_dtype = np.int32 if len(term_ids) < 2**31 else np.int64
        indptr = np.zeros(num_docs + 1, dtype=index_dtype)
        np.cumsum(lengths, out=indptr[1:])
        # vocabulary size after each document: ids number terms by first occurrence, so it is one
        # more than the largest id seen so far
        sizes = np.zeros(num_docs, dtype=np.int64)
        nonempty = np.flatnonzero(lengths)
        if len(nonempty):
            sizes[nonempty] = np.maximum.reduceat(term_ids, indptr[:-1][nonempty].astype(np.int64)) + 1
        np.maximum.accumulate(sizes, out=sizes)
        if np.any(sizes[_GENSIM_PRUNE_EVERY - 1 : -1 : _GENSIM_PRUNE_EVERY] > _GENSIM_PRUNE_AT):
            warnings.warn(
                f"vocabulary exceeds {_GENSIM_PRUNE_AT:,} terms: gensim's Dictionary would have "
                "pruned it, so scores will differ from the reference pipeline",
                RuntimeWarning,
                stacklevel=2,
            )

        # gensim's Dictionary numbers the terms new to a document in sorted order, document by
        # document; provisional ids number them by first occurrence, i.e. in the same blocks.
        provisional_terms = list(terms)
        sorted_terms: list[str] = []
        start = 0
        for end in np.unique(sizes).tolist():
            sorted_terms.extend(sorted(provisional_terms[start:end]))
            start = end
        if len(sorted_terms) != len(provisional_terms):
            raise ValueError("term ids must number the terms in order of first occurrence")
        position = {term: i for i, term in enumerate(provisional_terms)}
        final_id = np.empty(len(sorted_terms), dtype=np.int32)
        final_id[[position[term] for term in sorted_terms]] = np.arange(len(sorted_terms), dtype=np.int32)
        del position
        terms = sorted_terms

        # Documents in blocks of about _BLOCK_TOKENS tokens, so memory stays near the size of the
        # result. A block's tokens are already grouped by document, so they form a CSR matrix with
        # repeated columns; summing those in place gives term frequencies without a COO copy.
        num_terms = len(terms)
        final_id = final_id.astype(index_dtype)
        cuts = np.searchsorted(indptr, np.arange(0, indptr[-1], _BLOCK_TOKENS), side="right") - 1
        bounds = np.unique(np.concatenate([[0], cuts, [num_docs]])).tolist()
        df = np.zeros(num_terms, dtype=np.int64)
        blocks = []
        for first, last in zip(bounds, bounds[1:]):
            lo, hi = int(indptr[first]), int(indptr[last])
            tf = sp.csr_matrix(
                (np.ones(hi - lo, dtype=np.int32), final_id[term_ids[lo:hi]], indptr[first : last + 1] - lo),
                shape=(last - first, num_terms),
            )
            tf.sum_duplicates()  # canonical: one entry per (doc, term), columns ascending
            df += np.bincount(tf.indices, minlength=num_terms)
            # exact-size copies: after sum_duplicates the arrays may be views of token-sized buffers
            counts = tf.data.astype(np.uint16 if tf.data.max(initial=0) < 2**16 else np.int32)
            blocks.append((first, last, tf.indptr.copy(), tf.indices.copy(), counts))
            del tf, counts
        del final_id, term_ids
        release_memory()

        idf = _gensim_idf(df, num_docs)
        total_tokens = int(lengths.sum())
        avgdl = total_tokens / num_docs
        # LuceneBM25Model.get_term_weights: idf * (tf / (tf + k1 * (1 - b + b * dl / avgdl))), the
        # same float64 operations in the same order (in place, so operands may swap sides).
        doc_norm = k1 * ((1 - b) + (b * lengths.astype(np.float64)) / avgdl)
        # The result is term-major (terms x docs, the last term first, docs ascending in each row;
        # see __init__): each block's entries go straight to their places, in document order
        # within each term, as a transpose would.
        nnz = int(df.sum())
        nnz_dtype = np.int32 if nnz < 2**31 else np.int64
        term_indptr = np.zeros(num_terms + 1, dtype=nnz_dtype)
        np.cumsum(df[::-1], out=term_indptr[1:])
        cursor = term_indptr[-2::-1].astype(np.int64)  # where each term id's postings start
        del df
        doc_dtype = np.int32 if num_docs < 2**31 else np.int64
        term_docs_indices = np.empty(nnz, dtype=doc_dtype)
        term_docs_data = np.empty(nnz, dtype=np.float32)
        blocks.reverse()
        while blocks:
            first, last, block_indptr, block_indices, counts = blocks.pop()
            row_sizes = np.diff(block_indptr)
            values = np.repeat(doc_norm[first:last], row_sizes)
            counts = counts.astype(np.float64)
            values += counts
            np.divide(counts, values, out=values)
            del counts
            values *= idf[block_indices]
            order = np.argsort(block_indices, kind="stable")  # by term, documents ascending within
            by_term = block_indices[order]
            group_start = np.flatnonzero(np.diff(by_term, prepend=-1))
            rank = np.arange(len(by_term)) - np.repeat(group_start, np.diff(np.append(group_start, len(by_term))))
            at = cursor[by_term] + rank
            term_docs_indices[at] = np.repeat(np.arange(first, last, dtype=doc_dtype), row_sizes)[order]
            term_docs_data[at] = values[order]
            np.add.at(cursor, by_term[group_start], np.diff(np.append(group_start, len(by_term))))
            del values, block_indices, block_indptr, order, by_term, at, rank
            if len(blocks) % 4 == 0:
                release_memory()  # the blocks written so far, back to the system
        term_docs = sp.csr_matrix((term_docs_data, term_docs_indices, term_indptr), shape=(num_terms, num_docs))
        release_memory()
        return cls(terms, term_docs, idf, total_tokens, k1, b)

    def query_matrix(
        self, queries: Sequence[Sequence[str]], query_weighting: QueryWeighting = "bm25"
    ) -> sp.csr_matrix:
        """float32 (len(queries) x num_terms) matrix of query term weights, one row a query."""
        if query_weighting not in ("bm25", "plain"):
            raise ValueError(f"unknown query_weighting {query_weighting!r}")
        term_ids = self.term_ids
        indptr, cols, values = [0], [], []
        for tokens in queries:
            counts: dict[int, int] = {}
            for token in tokens:
                term_id = term_ids.get(token)
                if term_id is not None:
                    counts[term_id] = counts.get(term_id, 0) + 1
            if counts:
                ids = np.fromiter(counts, dtype=np.int64, count=len(counts))
                tf = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
                if query_weighting == "bm25":
                    query_length = sum(counts.values())
                    norm = self.k1 * (1 - self.b + self.b * query_length / self.avgdl)
                    tf = self.idf[ids] * (tf / (tf + norm))
                order = np.argsort(ids, kind="stable")  # a row's term ids, ascending (each once: counted)
                cols.append(ids[order])
                values.append(tf.astype(np.float32)[order])
            indptr.append(indptr[-1] + len(counts))
        shape = (len(queries), self.num_terms)
        if not cols:
            return sp.csr_matrix(shape, dtype=np.float32)
        # built as CSR directly (sorted, no duplicates): what the COO form summed and sorted into,
        # value for value, without scipy's conversion (most of a lone query's search)
        return sp.csr_matrix((np.concatenate(values), np.concatenate(cols), np.asarray(indptr, dtype=np.int64)),
                             shape=shape)

    def scores(
        self, queries: Sequence[Sequence[str]], query_weighting: QueryWeighting = "bm25"
    ) -> np.ndarray:
        """float32 (len(queries) x num_docs) scores of every document, as gensim computes them."""
        # SparseMatrixSimilarity computes docs x terms @ terms x 1 with scipy's float32 csr_matmat,
        # which sums each document's products in ascending term id. Adding each query term's
        # weight * postings into a float32 row, term by term in ascending id, adds the very same
        # float32 products in the same order, but only visits the postings of the query terms.
        # csc_matvec does that for the "columns" [Ap[c], Ap[c+1]) of Ap: with the postings stored
        # last term first, a query's ranges interleaved as (start, end, start, end, ...) are its
        # terms' postings with empty ranges (end >= next start) in between, weighted 0.
        matrix = self.query_matrix(queries, query_weighting)
        offsets = self.term_docs.indptr
        if _csc_matvec is None or offsets.dtype != self.term_docs.indices.dtype:
            return (matrix @ self.term_docs[::-1]).toarray()  # the public product, ascending terms
        rows = np.flatnonzero(np.diff(matrix.indptr))
        last_row = len(offsets) - 2
        bounds = np.empty(2 * matrix.nnz, dtype=offsets.dtype)
        bounds[0::2] = offsets[last_row - matrix.indices]
        bounds[1::2] = offsets[last_row + 1 - matrix.indices]
        weights = np.zeros(2 * matrix.nnz, dtype=np.float32)
        weights[0::2] = matrix.data
        scores = np.zeros((len(queries), self.num_docs), dtype=np.float32)
        for row, start, end in zip(rows.tolist(), (2 * matrix.indptr[rows]).tolist(),
                                   (2 * matrix.indptr[rows + 1]).tolist()):
            _csc_matvec(self.num_docs, end - start - 1, bounds[start:end], self.term_docs.indices,
                        self.term_docs.data, weights[start : end - 1], scores[row])
        return scores

    def search(
        self,
        queries: Iterable[Sequence[str]],
        top_k: int = DEFAULT_TOP_K,
        query_weighting: QueryWeighting = "bm25",
        batch_size: int = 16,
    ) -> list[list[tuple[int, float]]]:
        """Top ``top_k`` (document index, score) per query, ordered like the reference. Batches run on
        threads (scipy's kernels release the GIL), so a lazy ``queries`` is analysed while the batches
        before it are scored."""
        if top_k < 1:
            raise ValueError("top_k must be positive")

        def batch(chunk: list[Sequence[str]]) -> list[list[tuple[int, float]]]:
            return [rank_top_k(row, top_k) for row in self.scores(chunk, query_weighting)]

        queries = iter(queries)
        first = list(islice(queries, batch_size))
        second = list(islice(queries, batch_size))
        if not second:  # one batch (an agent's few searches at a time): no threads to start
            return batch(first) if first else []
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            pending = [pool.submit(batch, first), pool.submit(batch, second)]
            while chunk := list(islice(queries, batch_size)):
                pending.append(pool.submit(batch, chunk))
            return [hit for done in pending for hit in done.result()]

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the index: the large arrays as ``.npy`` files (memory-mapped by ``load``), then,
        atomically, the ``.npz`` naming their folder, so the index changes only when it is replaced."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        postings = f"{_POSTINGS_PREFIX}{secrets.token_hex(6)}"
        temp = directory / f".{postings}.tmp"
        temp.mkdir()
        try:
            for name in _POSTINGS_ARRAYS:
                with atomic.naming(directory / postings / f"{name}.npy"), open(temp / f"{name}.npy", "wb") as handle:
                    np.save(handle, getattr(self.term_docs, name), allow_pickle=False)
                    handle.flush()
                    os.fsync(handle.fileno())
            temp.rename(directory / postings)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        meta = {
            "format": _FORMAT,
            "k1": self.k1,
            "b": self.b,
            "num_docs": self.num_docs,
            "total_tokens": self.total_tokens,
            "postings": postings,
        }
        target = directory / _FILE_NAME
        with atomic.replacing(target) as handle:
            np.savez(handle, meta=_json_bytes(meta), terms=_json_bytes(self.terms), idf=self.idf)
        for stale in directory.glob(f"{_POSTINGS_PREFIX}*"):
            if stale.name != postings:
                shutil.rmtree(stale, ignore_errors=True)
        return target

    @classmethod
    def load(cls, directory: str | os.PathLike[str], num_docs: int | None = None) -> BM25Index:
        """Read an index written by ``save``; anything but a complete, consistent index raises."""
        directory = Path(directory)
        with np.load(directory / _FILE_NAME, allow_pickle=False) as stored:
            meta = json.loads(stored["meta"].tobytes())
            if meta.get("format") != _FORMAT:
                older = str(meta.get("format", "")).startswith(_FORMAT.rsplit("/", 1)[0] + "/")
                raise (EarlierFormat if older else ValueError)(f"unsupported BM25 index format {meta.get('format')!r}")
            if num_docs is not None and meta["num_docs"] != num_docs:
                raise ValueError(f"index of {meta['num_docs']} documents for a corpus of {num_docs}")
            terms = json.loads(stored["terms"].tobytes())
            idf = stored["idf"]
        if len(idf) != len(terms):
            raise ValueError("index terms and idf differ in length")
        if not re.fullmatch(f"{_POSTINGS_PREFIX}[0-9a-f]+", str(meta.get("postings"))):
            raise ValueError(f"index names no postings folder of its own: {meta.get('postings')!r}")
        postings = directory / meta["postings"]
        indptr, indices, data = (np.load(postings / f"{name}.npy", mmap_mode="r", allow_pickle=False)
                                 for name in _POSTINGS_ARRAYS)
        if data.dtype != np.float32 or idf.dtype != np.float64:
            raise ValueError("index weights of the wrong type")
        term_docs = sp.csr_matrix((data, indices, indptr), shape=(len(terms), meta["num_docs"]), copy=False)
        # every offset and document id in range: the kernels trust them
        term_docs.check_format(full_check=True)
        return cls(terms, term_docs, idf, meta["total_tokens"], meta["k1"], meta["b"])


def release_memory() -> None:
    """Hand freed heap back to the system: glibc keeps it after large numpy temporaries."""
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = lambda: None  # noqa: E731
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _malloc_trim = partial(ctypes.CDLL("libc.so.6").malloc_trim, 0)
            except (OSError, AttributeError):
                pass
    _malloc_trim()


_malloc_trim = None

try:  # private: scores falls back to scipy's public product without it
    from scipy.sparse._sparsetools import csc_matvec as _csc_matvec
except ImportError:
    _csc_matvec = None


def _gensim_idf(df: np.ndarray, num_docs: int) -> np.ndarray:
    """``math.log(N + 1.0) - math.log(df + 0.5)`` exactly as gensim (libm log, not numpy's)."""
    distinct, inverse = np.unique(df, return_inverse=True)
    log_n = math.log(num_docs + 1.0)
    values = np.array([log_n - math.log(d + 0.5) for d in distinct.tolist()], dtype=np.float64)
    return values[inverse.reshape(-1)]


def _json_bytes(value: object) -> np.ndarray:
    return np.frombuffer(json.dumps(value).encode("ascii"), dtype=np.uint8)
