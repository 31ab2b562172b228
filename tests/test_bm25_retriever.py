"""The ``bm25`` retriever end to end: rankings equal gensim's reference pipeline, the index cache is
reused, options change the results folder."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from conftest import SAMPLE, qrels_of, read_jsonl, read_ranking


def one_dir(dirs) -> Path:
    """The one results folder of a run (a RunOutcome's or a --json summary's ``results_dirs``)."""
    assert len(dirs) == 1, dirs
    return Path(dirs[0])


def gensim_reference(corpus, queries, k1=0.9, b=0.4, top_k=100):
    """R2MED's eval_BM25.py scoring, with gensim (the tokens come from our analyzer)."""
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    from r2med_plugins.bm25.analyzer import analyze

    tokens = [analyze(d["text"]) for d in corpus]
    dictionary = Dictionary(tokens)
    model = LuceneBM25Model(dictionary=dictionary, k1=k1, b=b)
    index = SparseMatrixSimilarity(model[list(map(dictionary.doc2bow, tokens))], num_docs=len(tokens),
                                   num_terms=len(dictionary), normalize_queries=False, normalize_documents=False)
    run = {}
    for q in queries:
        scores = index[model[dictionary.doc2bow(analyze(q["text"]))]]
        ranked = sorted(zip([d["id"] for d in corpus], scores), key=lambda x: x[1], reverse=True)[:top_k]
        run[q["id"]] = [(d, float(s)) for d, s in ranked]
    return run


def test_bm25_equals_gensim_reference(evaluate):
    results = evaluate("bm25", top_k=20)
    ours = read_ranking(one_dir(results.results_dirs) / "R2MEDSampleRetrieval.trec")
    reference = gensim_reference(read_jsonl(SAMPLE / "corpus.jsonl"), read_jsonl(SAMPLE / "query.jsonl"), top_k=20)
    assert ours.keys() == reference.keys()
    for qid in reference:
        assert [d for d, _ in ours[qid]] == [d for d, _ in reference[qid]]
        assert [s for _, s in ours[qid]] == pytest.approx([s for _, s in reference[qid]], rel=1e-5)
    ev = pytrec_eval.RelevanceEvaluator(qrels_of(SAMPLE), {"ndcg_cut.10"}).evaluate(
        {q: dict(docs) for q, docs in reference.items()})
    assert results["R2MEDSampleRetrieval"].ndcg_at_10 == pytest.approx(np.mean([v["ndcg_cut_10"] for v in ev.values()]), abs=5e-6)


def test_index_cache_is_reused(evaluate, tmp_path, monkeypatch):
    from r2med_plugins.bm25.index import BM25Index

    first = evaluate("bm25")
    assert len(list((tmp_path / "cache" / "bm25").glob("*/bm25_index.npz"))) == 1

    def no_build(*a, **k):
        raise AssertionError("the cached index should have been loaded")

    monkeypatch.setattr(BM25Index, "build", no_build)
    second = evaluate("bm25", overwrite=True)
    assert second["R2MEDSampleRetrieval"].status == "computed"
    assert second["R2MEDSampleRetrieval"].ndcg_at_10 == first["R2MEDSampleRetrieval"].ndcg_at_10
    folder = one_dir(first.results_dirs)
    assert folder.name.startswith("lucene-") and folder.parent.name == "r2med__bm25"


def test_analysed_queries_are_stored_and_reused_only_for_the_same_texts(evaluate, tmp_path, monkeypatch):
    """A rerun on the same queries (here with another k1) reads their analysed terms instead of
    analysing them again, and ranks exactly as with fresh analysis; other query texts, or a damaged
    stored file, are analysed anew; with -o cache=false nothing is stored."""
    from r2med_plugins.bm25 import retriever as retriever_module

    stored = tmp_path / "cache" / "bm25" / "queries"
    first = evaluate("bm25")
    assert len(list(stored.iterdir())) == 1
    analysed = []
    monkeypatch.setattr(retriever_module, "analyze", lambda text: analysed.append(text) or [])
    again = evaluate("bm25", output="again")
    assert analysed == [] and again["R2MEDSampleRetrieval"].ndcg_at_10 == first["R2MEDSampleRetrieval"].ndcg_at_10
    assert read_ranking(one_dir(again.results_dirs) / "R2MEDSampleRetrieval.trec") == read_ranking(
        one_dir(first.results_dirs) / "R2MEDSampleRetrieval.trec")
    evaluate("bm25", top_k=5, output="k5")  # the same texts: still read
    assert analysed == []

    (path,) = stored.iterdir()
    path.write_text('[["half"')
    evaluate("bm25", output="damaged")
    assert len(analysed) == 10 and json.loads(path.read_text()) == [[]] * 10  # re-analysed, stored again
    analysed.clear()
    evaluate("bm25", output="off", cache=False)
    assert len(analysed) == 10 and len(list(stored.iterdir())) == 1

    analysed.clear()  # terms that cannot be stored (a file where their folder goes, as a read-only
    shutil.rmtree(stored)  # cache would refuse them): analysed and used, the run goes on
    stored.write_text("not a folder")
    unstored = evaluate("bm25", output="unstored")
    assert len(analysed) == 10 and unstored["R2MEDSampleRetrieval"].status == "computed"


def test_a_search_agents_one_query_searches_store_no_terms(tmp_path):
    """An agent searches one query at a time (``context.searcher``): each is analysed, never stored
    (a file per search would cost more than its analysis and pile up in the cache); the same
    texts among others are stored, and the hits are the same either way."""
    from r2med_tasks.api import registry
    from r2med_tasks.running.pipelines import base_context
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    data = SAMPLE_TASK.load(cache_dir=tmp_path / "cache")
    context = base_context(registry(), cache_dir=tmp_path / "cache").with_(corpus=data.corpus)
    searcher = context.searcher(SAMPLE_TASK, "bm25")
    texts = [q.text for q in data.queries[:3]]
    alone = [searcher.search_one(text, 5) for text in texts]
    stored = tmp_path / "cache" / "bm25" / "queries"
    assert not stored.exists() or not list(stored.iterdir())
    assert searcher.search(texts, 5) == alone
    assert len(list(stored.iterdir())) == 1


def test_cache_off_and_corrupt_cache(evaluate, tmp_path):
    uncached = evaluate("bm25", output="a", cache=False)
    assert not (tmp_path / "cache" / "bm25").exists()  # no index kept
    evaluate("bm25", output="b")
    corrupted = list((tmp_path / "cache").rglob("*.npz"))
    assert corrupted  # the index the second run kept
    for f in corrupted:
        f.write_bytes(b"not an index")
    again = evaluate("bm25", output="c")
    assert again["sample"].ndcg_at_10 == uncached["sample"].ndcg_at_10


def test_options_split_folders_and_bad_weighting(run_cli, evaluate, tmp_path):
    default = evaluate("bm25")
    plain = evaluate("bm25", query_weighting="plain")
    tuned = evaluate("bm25", k1=1.2, b=0.75)
    assert len({one_dir(default.results_dirs), one_dir(plain.results_dirs), one_dir(tuned.results_dirs)}) == 3
    code, _, err = run_cli("run", "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path, "-o",
                           "query_weighting=fancy")
    assert code == 2 and "-o bm25.query_weighting=fancy" in err and "bm25, plain" in err


def test_okapi_runs(evaluate):
    results = evaluate("bm25-okapi")
    assert results.model_name == "r2med/bm25-okapi" and results["sample"].ndcg_at_10 > 0
