"""Corpus texts to term ids at compiled speed, with exactly the terms of ``analyzer.py``.

The exact analyzer spends most of its time finding runs of token characters and looking each one
up. Here numpy does those steps: ASCII characters no token rule accepts cut the UTF-8 buffer into
chunks (the automaton never crosses them, and a multi-byte sequence never holds an ASCII byte), and
chunks are numbered by content as 64-bit words; each distinct chunk then goes to the exact
analyzer once. ``tests/test_bm25_fast.py`` checks the output against ``analyze``.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np

from .analyzer import LuceneEnglishAnalyzer, _char_class
from .index import release_memory

__all__ = ["TermEncoder", "encode_corpus"]

# Bytes that may sit inside a chunk: every non-ASCII byte, and ASCII characters of a token class.
_KEEP = np.array([c >= 0x80 or _char_class(chr(c)) != 0 for c in range(256)], dtype=bool)
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_WORD_LEVELS = 4  # chunks up to 32 bytes are numbered in numpy; longer ones in a dict
_BATCH_BYTES = 1 << 21
_ANALYZER = LuceneEnglishAnalyzer()
_MEMO: dict[bytes, tuple[str, ...]] = {}


def _factorize(values: np.ndarray) -> np.ndarray:
    """Codes 0.. in order of first appearance (pandas' hash table, compiled)."""
    import pandas as pd

    return pd.factorize(values)[0]


class _Terms(dict[str, int]):
    """term -> id, the next id to each unseen term (ids in order of first occurrence)."""

    def __missing__(self, term: str) -> int:
        term_id = self[term] = len(self)
        return term_id


class TermEncoder:
    """Texts -> (term ids, per-text term counts), terms numbered in order of first occurrence.
    ``max_memo_entries`` keeps memory flat on corpora with huge vocabularies."""

    def __init__(self, analyzer: LuceneEnglishAnalyzer | None = None, max_memo_entries: int = 1_000_000,
                 batch_bytes: int = _BATCH_BYTES) -> None:
        self.analyzer = analyzer or _ANALYZER
        self.term_ids = _Terms()
        # chunk -> its terms, shared by the process's encoders from one corpus to the next
        self._memo: dict[bytes, tuple[str, ...]] = _MEMO if analyzer is None else {}
        self._max_memo = max_memo_entries
        self._batch_bytes = batch_bytes

    @property
    def terms(self) -> list[str]:
        return list(self.term_ids)

    def encode(self, texts: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """int32 term ids of all texts one after another, and int64 number of terms of each text."""
        ids: list[np.ndarray] = []
        lengths: list[np.ndarray] = []
        batch: list[bytes] = []
        size = 0
        for text in texts:
            data = text.encode("utf-8", "surrogatepass")
            batch.append(data)
            size += len(data) + 1
            if size >= self._batch_bytes:
                self._encode_batch(batch, ids, lengths)
                batch, size = [], 0
        if batch or not lengths:
            self._encode_batch(batch, ids, lengths)
        return (np.concatenate(ids) if len(ids) > 1 else ids[0],
                np.concatenate(lengths) if len(lengths) > 1 else lengths[0])

    def _analyze_chunk(self, chunk: bytes) -> tuple[str, ...]:
        return tuple(self.analyzer.analyze(chunk.decode("utf-8", "surrogatepass")))

    def _encode_batch(self, docs: list[bytes], ids_out: list[np.ndarray], lengths_out: list[np.ndarray]) -> None:
        # " doc0 doc1 ... docN " + zero padding, so every chunk has a non-chunk byte on each side
        # and an 8-byte read from any chunk byte stays inside the buffer.
        blob = b" ".join([b"", *docs, b""]) + bytes(8 * _WORD_LEVELS)
        buf = np.frombuffer(blob, dtype=np.uint8)
        keep = _KEEP[buf]
        starts = np.flatnonzero(keep[1:] > keep[:-1]) + 1
        ends = np.flatnonzero(keep[:-1] > keep[1:]) + 1
        del keep
        doc_starts = np.ones(len(docs), dtype=np.int64)
        if len(docs) > 1:
            np.cumsum(np.fromiter(map(len, docs[:-1]), dtype=np.int64, count=len(docs) - 1) + 1, out=doc_starts[1:])
            doc_starts[1:] += 1
        first_chunk = np.searchsorted(starts, doc_starts)  # chunk index where each document begins

        chunk_ids = self._number_chunks(blob, starts, ends)
        # chunk ids are in order of first appearance: the first occurrences are where the running
        # maximum grows
        if len(chunk_ids):
            running = np.maximum.accumulate(chunk_ids)
            new = np.empty(len(chunk_ids), dtype=bool)
            new[0] = True
            np.greater(running[1:], running[:-1], out=new[1:])
            first = np.flatnonzero(new)
        else:
            first = np.empty(0, dtype=np.int64)
        memo, analyze, term_id = self._memo, self._analyze_chunk, self.term_ids.__getitem__
        chunk_terms = []
        for s, e in zip(starts[first].tolist(), ends[first].tolist()):
            chunk = blob[s:e]
            terms = memo.get(chunk)
            if terms is None:
                terms = memo[chunk] = analyze(chunk)
            chunk_terms.append(tuple(map(term_id, terms)))
        if len(memo) > self._max_memo:
            memo.clear()

        n_terms = np.fromiter(map(len, chunk_terms), dtype=np.int64, count=len(chunk_terms))
        flat = np.fromiter(chain.from_iterable(chunk_terms), dtype=np.int32, count=int(n_terms.sum()))
        per_chunk = n_terms[chunk_ids]
        if n_terms.size and n_terms.max() <= 1:  # the usual case: a chunk is one term or a stop word
            offsets = np.cumsum(n_terms) - n_terms
            ids = flat[offsets[chunk_ids[per_chunk == 1]]]
        else:
            total = int(per_chunk.sum())
            offsets = np.cumsum(n_terms) - n_terms
            out_starts = np.cumsum(per_chunk) - per_chunk
            ids = flat[np.repeat(offsets[chunk_ids] - out_starts, per_chunk) + np.arange(total)]
        cumulative = np.zeros(len(chunk_ids) + 1, dtype=np.int64)
        np.cumsum(per_chunk, out=cumulative[1:])
        bounds = np.append(first_chunk, len(chunk_ids))
        ids_out.append(ids.astype(np.int32, copy=False))
        lengths_out.append(cumulative[bounds[1:]] - cumulative[bounds[:-1]])

    @staticmethod
    def _number_chunks(blob: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """An id per chunk, equal ids for equal bytes, in order of first appearance."""
        if not len(starts):
            return np.empty(0, dtype=np.int64)
        lengths = ends - starts
        words = np.ndarray(shape=(len(blob) - 7,), dtype="<u8", buffer=blob, offset=0, strides=(1,))
        code = _factorize(words[starts] & _MASKS[np.minimum(lengths, 8)])
        level = np.zeros(len(starts), dtype=np.int64)
        selected = np.flatnonzero(lengths > 8)
        for step in range(1, _WORD_LEVELS):
            if not len(selected):
                break
            rest = lengths[selected] - 8 * step
            word = _factorize(words[starts[selected] + 8 * step] & _MASKS[np.minimum(rest, 8)])
            code[selected] = _factorize((code[selected] << 32) | word)
            level[selected] = step
            selected = selected[rest > 8]
        if len(selected):  # longer than 32 bytes: rare, numbered by content in a dict
            seen: dict[bytes, int] = {}
            code[selected] = [seen.setdefault(blob[s:e], len(seen))
                              for s, e in zip(starts[selected].tolist(), ends[selected].tolist())]
            level[selected] = _WORD_LEVELS
        return _factorize(code | (level << 40))


def _encode_part(texts: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    encoder = TermEncoder()
    ids, lengths = encoder.encode(texts)
    return encoder.terms, ids, lengths


def encode_corpus(texts: Sequence[str], workers: int | None = None) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(terms by id, term ids of every document in order, terms per document). Contiguous parts go to
    helper processes and are merged in order, so the result does not depend on the number of workers;
    a helper that fails has its part analysed here.
    """
    workers = max(1, min(workers if workers is not None else default_workers(),
                         len(texts) // MIN_DOCS_PER_WORKER or 1))
    if workers == 1 or not _HELPERS_LOCK.acquire(blocking=False):  # helpers busy on another thread
        return _encode_part(texts)
    try:
        return _encode_with_helpers(texts, workers)
    finally:
        _HELPERS_LOCK.release()


def _encode_with_helpers(texts: Sequence[str], workers: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    bounds = [len(texts) * i // workers for i in range(workers + 1)]
    helpers = _helpers(workers - 1)
    sent = []
    for helper, first, last in zip(helpers, bounds[1:], bounds[2:]):
        sent.append(helper.submit(texts[first:last]))
    terms, first_ids, first_lengths = _encode_part(texts[: bounds[1]])  # the first part here, meanwhile
    release_memory()
    heads = []
    for helper, ok, first, last in zip(helpers, sent, bounds[1:], bounds[2:]):
        head = helper.head() if ok else None
        heads.append(head if head is not None else (None, _encode_part(texts[first:last])))
    # one numbering by first occurrence over the parts in order; each part's ids are copied (and
    # renumbered) straight into the result, a helper's read from its pipe in pieces
    term_ids = _Terms(zip(terms, range(len(terms))))
    counts = [len(first_ids)] + [len(part[1]) if helper is None else part[2] for helper, part in heads]
    ids = np.empty(sum(counts), dtype=np.int32)
    ids[: len(first_ids)] = first_ids
    lengths = [first_lengths]
    del first_ids, terms
    at = counts[0]
    for (helper, part), count, first, last in zip(heads, counts[1:], bounds[1:], bounds[2:]):
        if helper is None:  # analysed here: (terms, ids, lengths)
            part_terms, part_ids, part_lengths = part
        else:  # (terms, lengths, number of ids), the ids still in the pipe
            part_terms, part_lengths, part_ids = part[0], part[1], None
        mapping = np.fromiter(map(term_ids.__getitem__, part_terms), dtype=np.int32, count=len(part_terms))
        out = ids[at : at + count]
        if helper is not None and not helper.read_ids(out, mapping):  # died mid-way: analysed here
            part_terms, part_ids, part_lengths = _encode_part(texts[first:last])
            mapping = np.fromiter(map(term_ids.__getitem__, part_terms), dtype=np.int32, count=len(part_terms))
        if part_ids is not None:
            np.take(mapping, part_ids, out=out)
        lengths.append(part_lengths)
        at += count
    return list(term_ids), ids, np.concatenate(lengths)


#: Fewer documents than this per worker are analysed in this process alone.
MIN_DOCS_PER_WORKER = 1000


def default_workers() -> int:
    """Processes to analyse with: the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _Helper:
    """A helper process, texts in on stdin and results out on stdout: a plain subprocess, as
    multiprocessing would re-run the user's ``__main__`` (spawn) or copy a threaded process (fork)."""

    def __init__(self) -> None:
        import subprocess
        import sys

        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from r2med_plugins.bm25.encode import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        self._writer = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def submit(self, texts: Sequence[str]) -> bool:
        """Send ``texts`` (on a thread: the helper reads while this process works)."""
        def write() -> None:
            try:
                pickle.dump(list(texts), self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self.proc.stdin.flush()
            except (OSError, ValueError):
                pass

        if not self.alive():
            return False
        self._writer = threading.Thread(target=write, daemon=True)
        self._writer.start()
        return True

    def head(self) -> tuple[_Helper, tuple[list[str], np.ndarray, int]] | None:
        """(self, (terms, per-text term counts, number of ids)) once the helper is done; its ids
        follow on the pipe. ``None`` if the helper died."""
        self._writer.join()
        try:
            return self, pickle.load(self.proc.stdout)
        except Exception:  # the helper died (memory, a signal): its part is analysed here instead
            self.close()
            return None

    def read_ids(self, out: np.ndarray, mapping: np.ndarray) -> bool:
        """Read the helper's ids into ``out``, renumbered through ``mapping``, a piece at a time."""
        view = memoryview(out).cast("B")
        piece = 1 << 20
        for start in range(0, len(out), piece):
            end = min(len(out), start + piece)
            got, want = 0, 4 * (end - start)
            while got < want:
                n = self.proc.stdout.readinto(view[4 * start + got : 4 * end])
                if not n:
                    self.close()
                    return False
                got += n
            out[start:end] = mapping[out[start:end]]
        return True

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


_HELPERS: list[_Helper] = []
_HELPERS_LOCK = threading.Lock()


def _helpers(n: int) -> list[_Helper]:
    """``n`` live helper processes, started on first use (about a second) and reused."""
    _HELPERS[:] = [h for h in _HELPERS if h.alive()]
    if not _HELPERS:
        import atexit

        atexit.register(_close_helpers)
    while len(_HELPERS) < n:
        _HELPERS.append(_Helper())
    return _HELPERS[:n]


def _close_helpers() -> None:
    while _HELPERS:
        _HELPERS.pop().close()


def serve() -> None:
    """A helper process's loop: encode each list of texts read from stdin until it closes."""
    import sys

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            texts = pickle.load(stdin)
        except EOFError:
            return
        terms, ids, lengths = _encode_part(texts)
        del texts
        pickle.dump((terms, lengths, len(ids)), stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(memoryview(np.ascontiguousarray(ids, dtype=np.int32)).cast("B"))
        stdout.flush()
        del terms, ids, lengths
