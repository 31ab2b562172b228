"""The fast paths of the ``bm25`` plugin against the exact ones, token for token.

``encode.encode_corpus`` (chunks found and numbered in numpy, analysed once each, helper processes)
must give exactly the terms of ``analyzer.analyze`` (the Lucene port, checked against pyserini's
recorded output in test_bm25_analyzer.py), and ``BM25Index.from_term_ids`` exactly the index of
``BM25Index.build``. A corrupt index cache entry is rebuilt with one warning line.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLE
from r2med_plugins.bm25 import encode, index
from r2med_plugins.bm25.analyzer import LuceneEnglishAnalyzer, analyze
from r2med_plugins.bm25.encode import TermEncoder, encode_corpus
from r2med_plugins.bm25.index import BM25Index
from r2med_tasks.tasks.datafiles import read_jsonl

TESTS = Path(__file__).parent
REFERENCE = json.loads((TESTS / "data" / "lucene_analyzer_cases.json").read_text(encoding="utf-8"))


def _synthetic():
    spec = importlib.util.spec_from_file_location("synthetic_corpus", TESTS.parent / "benchmarks" / "synthetic_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _decoded(terms, ids, lengths) -> list[list[str]]:
    vocabulary = np.array(terms + [""], dtype=object)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [vocabulary[ids[a:b]].tolist() for a, b in zip(bounds[:-1], bounds[1:])]


def _exact(texts) -> list[list[str]]:
    analyzer = LuceneEnglishAnalyzer()  # a fresh memo: nothing shared with the fast path
    return [analyzer.analyze(t) for t in texts]


# Texts that stress the chunking: runs across the batch edges, chunks of every length around the
# 8-byte words and the 32-byte limit, non-ASCII (class-0 and token characters, beyond the BMP),
# lone surrogates, NUL, the 255-unit token window, empty texts and texts of separators only.
EDGE_TEXTS = [
    "", " ", "...", "\x00a\x00b", "a", "ab", "abcdefgh", "abcdefghi", "abcdefghijklmnop", "abcdefghijklmnopq",
    "x" * 31, "x" * 32, "x" * 33, "y" * 40 + " " + "y" * 40, "a" * 600, "a" * 254 + "\U0001d431" + "b",
    "10–20 TNF-α Ménière's 3,000mg 5mg/kg CD4+ IL-6 COVID-19 HbA1c 1,25-dihydroxyvitamin",
    "日本語のテキスト 中文文本 한국어 텍스트 ΟΔΟΣ İstanbul", "emoji 😀👍🏽 flags 🇫🇷", "lone \ud800 surrogate \udfff",
    "John's users' boss’s O'Neil's rock'n'roll", "e.g. U.S.A. i.e. 3.14 1.2.3 a_b __init__ x:y",
    "http://example.com/a?b=c user@example.com", "\u00a0nbsp\u2028line\u3000ideographic\ufeffbom",
]


def test_fast_path_matches_lucene_fixtures():
    cases = REFERENCE["cases"] + REFERENCE["real_text"]
    got = _decoded(*encode_corpus([c["text"] for c in cases], workers=1))
    assert got == [c["terms"] for c in cases]


def test_fast_path_matches_exact_path_on_edge_texts_and_small_batches():
    texts = EDGE_TEXTS + [" ".join(EDGE_TEXTS)] + EDGE_TEXTS[::-1]
    expected = _exact(texts)
    assert _decoded(*encode_corpus(texts, workers=1)) == expected
    # tiny batches (every text its own batch) and a memo emptied all the time
    encoder = TermEncoder(analyzer=LuceneEnglishAnalyzer(), max_memo_entries=2, batch_bytes=1)
    ids, lengths = encoder.encode(texts)
    assert _decoded(encoder.terms, ids, lengths) == expected


def test_every_distinct_token_of_the_synthetic_and_sample_corpora():
    """The large-vocabulary check: each distinct token, alone, through both paths."""
    synthetic = _synthetic()
    tokens = set(synthetic.vocabulary()) | set(synthetic.SPECIAL)
    for name in ("corpus.jsonl", "query.jsonl"):
        for row in read_jsonl(SAMPLE / name)[0].values:
            tokens.update(row["text"].split())
    for case in REFERENCE["cases"] + REFERENCE["real_text"]:
        tokens.update(case["text"].split())
    tokens = sorted(tokens | {t.lower() for t in tokens})
    assert len(tokens) > 25_000
    exact = LuceneEnglishAnalyzer()  # a fresh memo: nothing shared with the fast path
    assert _decoded(*encode_corpus(tokens, workers=1)) == [exact.analyze(t) for t in tokens]
    # and as running text: the same tokens side by side in documents of random lengths
    rng = random.Random(5)
    shuffled = rng.sample(tokens, len(tokens))
    docs, at = [], 0
    while at < len(shuffled):
        n = rng.choice([1, 2, 7, 40, 300])
        docs.append(" ".join(shuffled[at : at + n]) + rng.choice(["", ".", " –", "!", "'s"]))
        at += n
    assert _decoded(*encode_corpus(docs, workers=1)) == [exact.analyze(d) for d in docs]


def _corpus(n_docs: int = 2400) -> list[str]:
    rng = random.Random(11)
    words = [w for case in REFERENCE["real_text"] for w in case["text"].split()] + EDGE_TEXTS
    return [" ".join(rng.choice(words) for _ in range(rng.choice([0, 1, 5, 30, 120]))) for _ in range(n_docs)]


@pytest.mark.process  # the helper process is what it tests
def test_output_does_not_depend_on_workers(monkeypatch):
    docs = _corpus(800)
    one = encode_corpus(docs, workers=1)
    monkeypatch.setattr(encode, "MIN_DOCS_PER_WORKER", 100)
    terms, ids, lengths = encode_corpus(docs, workers=2)  # a helper process analyses the second half
    assert terms == one[0] and np.array_equal(ids, one[1]) and np.array_equal(lengths, one[2])
    assert _decoded(*one) == _exact(docs)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_dead_helper_is_replaced(monkeypatch, when):
    docs = _corpus(600)
    expected = encode_corpus(docs, workers=1)
    monkeypatch.setattr(encode, "MIN_DOCS_PER_WORKER", 100)
    monkeypatch.setattr(encode, "_helpers", lambda n: [_DeadHelper(when) for _ in range(n)])
    terms, ids, lengths = encode_corpus(docs, workers=2)
    assert terms == expected[0] and np.array_equal(ids, expected[1]) and np.array_equal(lengths, expected[2])


class _DeadHelper:
    """Dies before taking its texts, or after (nothing comes back)."""

    def __init__(self, when: str) -> None:
        self.when = when

    def submit(self, texts) -> bool:
        return self.when == "after"

    def head(self):
        return None


def test_index_from_term_ids_equals_build(monkeypatch):
    monkeypatch.setattr(index, "_BLOCK_TOKENS", 1000)  # many blocks
    docs = _corpus(1200)
    fast = BM25Index.from_term_ids(*encode_corpus(docs, workers=1))
    exact = BM25Index.build(analyze(d) for d in docs)
    assert fast.terms == exact.terms
    assert np.array_equal(fast.idf, exact.idf) and fast.total_tokens == exact.total_tokens
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(fast.term_docs, name), getattr(exact.term_docs, name)), name
    queries = [analyze(d) for d in docs[:20]]
    assert fast.search(queries, top_k=50) == exact.search(queries, top_k=50)


def test_corrupt_index_cache_is_rebuilt_with_one_warning(run_cli, evaluate, tmp_path):
    args = ["run", "--plugin", "bm25", "--tasks", "sample", "--cache-dir", tmp_path / "cache", "--json"]
    first = evaluate("bm25", output="a")
    (stored,) = (tmp_path / "cache").rglob("*.npz")
    good = BM25Index.load(stored.parent)
    data = stored.read_bytes()
    stored.write_bytes(data[: len(data) // 2])  # truncated: zipfile.BadZipFile inside numpy
    code, out2, err = run_cli(*args, "--output", tmp_path / "b")
    assert code == 0, err
    assert json.loads(out2)["tasks"][0]["ndcg_at_10"] == first["sample"].ndcg_at_10
    warnings = [line for line in err.splitlines() if line.strip()]
    assert len(warnings) == 1 and "BM25 index cache" in warnings[0] and "rebuilding" in warnings[0], err
    rebuilt = BM25Index.load(stored.parent)  # rebuilt and saved again
    assert rebuilt.terms == good.terms and rebuilt.total_tokens == good.total_tokens
    assert np.array_equal(rebuilt.idf, good.idf) and (rebuilt.term_docs != good.term_docs).nnz == 0


@pytest.mark.parametrize("damage", ["garbage zip", "empty", "not a zip", "other corpus"])
def test_every_kind_of_unreadable_cache_is_rebuilt(tmp_path, damage):
    from types import SimpleNamespace

    from r2med_plugins.bm25 import BM25Options
    from r2med_plugins.bm25.retriever import BM25Retriever
    from r2med_tasks.components.context import Context
    from r2med_tasks.tasks.taskdata import Corpus

    docs = _corpus(50)
    corpus = Corpus([f"d{i}" for i in range(len(docs))], docs, "checksum")
    lines = []
    context = Context(cache_dir=tmp_path, log=lines.append)
    task = SimpleNamespace(name="T")
    options = BM25Options(k1=0.9, b=0.4, query_weighting="bm25", cache=True)
    BM25Retriever(options).index(corpus, task=task, context=context)
    (stored,) = tmp_path.rglob("*.npz")
    if damage == "other corpus":
        BM25Index.build([["a"], ["b"]]).save(stored.parent)
    else:
        stored.write_bytes({"garbage zip": b"PK\x03\x04" + bytes(range(256)) * 8, "empty": b"",
                            "not a zip": b"not an index"}[damage])
    retriever = BM25Retriever(options)
    retriever.index(corpus, task=task, context=context)
    assert len(lines) == 1 and "rebuilding" in lines[0]
    assert retriever._index.num_docs == len(docs)
    assert BM25Index.load(stored.parent).num_docs == len(docs)
