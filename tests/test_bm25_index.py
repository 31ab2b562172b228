"""BM25Index against the gensim pipeline of R2MED's ``eval_BM25.py`` and a plain numpy BM25."""

from __future__ import annotations

import math
import random
import warnings
from collections import Counter

import numpy as np
import pytest

from r2med_plugins.bm25.analyzer import analyze_many
from r2med_plugins.bm25.index import BM25Index

WORDS = (
    "patient presented with acute chest pain dyspnea fever cough troponin elevated ecg showed st "
    "elevation myocardial infarction diabetes insulin glucose renal failure creatinine dialysis "
    "antibiotic sepsis blood culture lactate hypotension vasopressor biopsy tumor carcinoma "
    "metastasis chemotherapy radiation mutation gene protein receptor kinase inhibitor dose mg "
    "daily weeks months follow-up improved recurrence il-6 tnf-α covid-19 hba1c 7.2 3,000mg"
).split()


def _random_text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS[: rng.randint(8, len(WORDS))]) for _ in range(n_words))


def _corpus() -> list[str]:
    rng = random.Random(13)
    docs = [_random_text(rng, rng.choice([1, 3, 10, 40, 150, 600, 2000])) for _ in range(400)]
    docs[7] = docs[3]  # identical documents tie: the earlier one must come first
    docs[250] = docs[3]
    docs[20] = ""  # no tokens at all
    docs[21] = "the of and"  # only stop words
    docs[30] = "zygomycosis"  # a term found in this document only
    docs[31] = "zygomycosis zygomycosis rare"
    return docs


def _queries() -> list[str]:
    rng = random.Random(29)
    queries = [_random_text(rng, rng.randint(2, 60)) for _ in range(30)]
    return queries + [
        "",  # empty
        "the and of",  # stop words only: empty after analysis
        "qwertyuiop asdfghjkl",  # unknown terms only
        "zygomycosis",  # fewer matching documents than top_k
        "zygomycosis zygomycosis zygomycosis rare qwertyuiop",  # repeated and unknown terms
        "insulin insulin insulin insulin glucose",
        "patient",  # matched by almost every document
    ]


def _gensim_reference(corpus_tokens, query_tokens, top_k=100):
    """The reference code of R2MED ``src/eval_BM25.py::retrieval_bm25``, minus pyserini."""
    pytest.importorskip("gensim")
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    dictionary = Dictionary(corpus_tokens)
    model = LuceneBM25Model(dictionary=dictionary, k1=0.9, b=0.4)
    bm25_corpus = model[list(map(dictionary.doc2bow, corpus_tokens))]
    index = SparseMatrixSimilarity(
        bm25_corpus,
        num_docs=len(corpus_tokens),
        num_terms=len(dictionary),
        normalize_queries=False,
        normalize_documents=False,
    )
    results = []
    for query in query_tokens:
        similarities = index[model[dictionary.doc2bow(query)]].tolist()
        ranked = sorted(enumerate(similarities), key=lambda x: x[1], reverse=True)[:top_k]
        results.append(ranked)
    return dictionary, index, results


@pytest.fixture(scope="module")
def corpus_tokens() -> list[list[str]]:
    return analyze_many(_corpus())


@pytest.fixture(scope="module")
def query_tokens() -> list[list[str]]:
    return analyze_many(_queries())


@pytest.fixture(scope="module")
def index(corpus_tokens) -> BM25Index:
    return BM25Index.build(corpus_tokens)


@pytest.fixture(scope="module")
def reference(corpus_tokens, query_tokens):
    return _gensim_reference(corpus_tokens, query_tokens)


def test_vocabulary_and_weights_are_gensims(index, reference) -> None:
    dictionary, gensim_index, _ = reference
    assert index.terms == [dictionary[i] for i in range(len(dictionary))]
    ours = index.weights.tocsr()
    assert ours.dtype == gensim_index.index.dtype == np.float32
    assert (ours != gensim_index.index).nnz == 0  # bit for bit


def test_search_matches_gensim(index, query_tokens, reference) -> None:
    _, _, expected = reference
    results = index.search(query_tokens, top_k=100)
    assert len(results) == len(expected)
    for ours, theirs in zip(results, expected):
        assert [doc for doc, _ in ours] == [doc for doc, _ in theirs]
        np.testing.assert_allclose(
            [s for _, s in ours], [s for _, s in theirs], rtol=1e-5, atol=0
        )
        assert ours == theirs  # in fact the very same float32 sums


def test_ties_keep_corpus_order(index, query_tokens) -> None:
    results = index.search(query_tokens, top_k=index.num_docs)
    for ranked in results:
        keys = [(-score, doc) for doc, score in ranked]
        assert keys == sorted(keys)
    docs_with_text_of_3 = [doc for doc, _ in results[0] if doc in (3, 7, 250)]
    assert docs_with_text_of_3 == [3, 7, 250]


def test_few_matches_are_padded_with_zero_score_documents_in_corpus_order(
    index, query_tokens
) -> None:
    ranked = index.search([query_tokens[-4]], top_k=6)[0]  # "zygomycosis"
    assert [doc for doc, _ in ranked[:2]] == [31, 30]
    assert all(score > 0 for _, score in ranked[:2])
    assert ranked[2:] == [(0, 0.0), (1, 0.0), (2, 0.0), (3, 0.0)]


def test_queries_without_known_terms_rank_everything_zero(index, query_tokens) -> None:
    for tokens in query_tokens[-7:-4]:  # empty, stop words only, unknown terms only
        assert index.search([tokens], top_k=5)[0] == [(i, 0.0) for i in range(5)]


def test_top_k_larger_than_corpus(index, query_tokens) -> None:
    ranked = index.search(query_tokens[:1], top_k=10_000)[0]
    assert sorted(doc for doc, _ in ranked) == list(range(index.num_docs))


def test_batching_does_not_change_results(index, query_tokens) -> None:
    assert index.search(query_tokens, batch_size=4) == index.search(query_tokens)


def test_plain_weighting_is_textbook_bm25(index, corpus_tokens, query_tokens) -> None:
    """score = sum_t count_q(t) * idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))."""
    k1, b = 0.9, 0.4
    n = len(corpus_tokens)
    avgdl = sum(map(len, corpus_tokens)) / n
    df = Counter(term for doc in corpus_tokens for term in set(doc))
    doc_tf = [Counter(doc) for doc in corpus_tokens]
    expected = np.zeros((len(query_tokens), n))
    for qi, query in enumerate(query_tokens):
        for term, count in Counter(query).items():
            if term not in df:
                continue
            idf = math.log(n + 1) - math.log(df[term] + 0.5)
            for d, tf in enumerate(doc_tf):
                if term in tf:
                    norm = k1 * (1 - b + b * len(corpus_tokens[d]) / avgdl)
                    expected[qi, d] += count * idf * tf[term] / (tf[term] + norm)
    ours = index.scores(query_tokens, query_weighting="plain")
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)
    ranked = index.search(query_tokens, query_weighting="plain")
    for qi, result in enumerate(ranked):
        assert [s for _, s in result] == sorted((s for _, s in result), reverse=True)
        assert [s for _, s in result] == ours[qi][[d for d, _ in result]].tolist()


def test_bm25_query_weighting_saturates_repeated_terms(index) -> None:
    once, thrice = index.query_matrix([["insulin"], ["insulin"] * 3]).toarray()
    term = index.term_ids["insulin"]
    assert once[term] < thrice[term] < 3 * once[term]
    plain = index.query_matrix([["insulin"] * 3], query_weighting="plain").toarray()[0]
    assert plain[term] == 3.0


def test_save_load_round_trip(index, query_tokens, tmp_path) -> None:
    path = index.save(tmp_path / "cache")
    saved = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(saved) == 2 and saved[0] == path.name and saved[1].startswith("postings-")  # no temp left
    loaded = BM25Index.load(tmp_path / "cache")
    assert not loaded.term_docs.data.flags.writeable  # memory-mapped read-only, not read in
    assert loaded.terms == index.terms
    assert (loaded.k1, loaded.b, loaded.avgdl, loaded.num_docs) == (
        index.k1,
        index.b,
        index.avgdl,
        index.num_docs,
    )
    for weighting in ("bm25", "plain"):
        assert loaded.search(query_tokens, query_weighting=weighting) == index.search(
            query_tokens, query_weighting=weighting
        )
    index.save(tmp_path / "cache")  # overwriting an existing index is fine, and drops the old postings
    assert BM25Index.load(tmp_path / "cache").terms == index.terms
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_parameters_reach_the_weights(corpus_tokens, query_tokens) -> None:
    default = BM25Index.build(corpus_tokens)
    other = BM25Index.build(corpus_tokens, k1=1.2, b=0.75)
    assert (other.k1, other.b) == (1.2, 0.75)
    assert not np.array_equal(default.scores(query_tokens), other.scores(query_tokens))


def test_invalid_arguments(index) -> None:
    with pytest.raises(ValueError):
        BM25Index.build([])
    with pytest.raises(ValueError):
        index.search([["patient"]], query_weighting="tfidf")
    with pytest.raises(ValueError):
        index.search([["patient"]], top_k=0)


def test_warns_where_gensim_would_prune_the_vocabulary(monkeypatch) -> None:
    from r2med_plugins.bm25 import index as index_module

    monkeypatch.setattr(index_module, "_GENSIM_PRUNE_AT", 3)
    monkeypatch.setattr(index_module, "_GENSIM_PRUNE_EVERY", 2)
    with pytest.warns(RuntimeWarning, match="pruned"):
        BM25Index.build([["a", "b"], ["c", "d"], ["e"]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BM25Index.build([["a", "b"], ["c", "d"]])  # gensim checks only before a further document
