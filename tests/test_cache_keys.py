"""Every cache key is one unambiguous encoding hashed with sha256: inputs that collided when keys
joined texts with NUL (or let one field stand in for another) now get keys of their own."""

import json
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl, write_jsonl

NUL_SPLITS = [(["a\0b"], ["a", "b"]), (["x\0y", "z"], ["x", "y\0z"]), (["", "a"], ["a", ""]), (["a"], ["a\0"])]


@pytest.mark.parametrize("one, other", NUL_SPLITS)
def test_bm25_query_terms_keys(one, other):
    from r2med_plugins.bm25.retriever import query_terms_key

    assert query_terms_key(one) != query_terms_key(other)
    assert query_terms_key(one) == query_terms_key(list(one)) and len(query_terms_key(one)) == 32
    assert query_terms_key(["\ud800 lone surrogate"]) != query_terms_key(["\udc00 lone surrogate"])  # keyed, no
    # UnicodeEncodeError


@pytest.mark.parametrize("one, other", NUL_SPLITS)
def test_llm_generation_keys(one, other):
    from r2med_tasks.llm.cache import key_for

    def key(texts, served=None):
        return key_for("m", [{"role": "user", "content": t} for t in texts], {"temperature": 0}, served)

    assert key(one) != key(other)
    assert key(["a\0b"]) != key_for("m\0", [{"role": "user", "content": "a"}], {}, None)
    # the served model is part of the key: the same name serving other weights has other keys
    assert len({key(one), key(one, {"id": "m", "root": "/a", "parent": None}),
                key(one, {"id": "m", "root": "/b", "parent": None}), key(one, {"unlisted": True})}) == 4
    assert key(["\ud800"]) != key(["\udc00"])  # a lone surrogate is keyed, not a UnicodeEncodeError


def test_dense_embedding_cache_folders(tmp_path):
    from r2med_plugins.dense.cache import EmbeddingCache

    def folder(identity, n_docs=50, chunk_size=12):
        return EmbeddingCache(identity, n_docs, chunk_size, root=tmp_path).folder

    # before: an identity field named like one of the cache's own replaced it, and str() made a
    # path the string it prints as
    assert folder({"model": "m", "chunk_size": 5}, chunk_size=12) != folder({"model": "m"}, chunk_size=5)
    assert folder({"model": "m", "format": "x"}) != folder({"model": "m"})
    assert folder({"model": Path("m")}) != folder({"model": "m"})
    assert folder({"model": "a\0b", "doc_instruction": ""}) != folder({"model": "a", "doc_instruction": "\0b"})
    assert folder({"model": "m"}, n_docs=50) != folder({"model": "m"}, n_docs=51)
    assert folder({"model": "m"}) == folder({"model": "m"}) and len(folder({"model": "m"}).name) == 32
    assert folder({"doc_instruction": "\ud800"}) != folder({"doc_instruction": "\udc00"})  # keyed, no UnicodeEncodeError


def test_a_document_identity_with_a_corpus_field_is_refused(tmp_path):
    from r2med_plugins.dense.retriever import DenseRetriever
    from r2med_tasks.components.context import Context
    from r2med_tasks.tasks.taskdata import Corpus
    from r2med_tasks.errors import PluginError

    class Model:
        def document_identity(self, task):
            return {"model": "m", "corpus": "another"}

    retriever = DenseRetriever(Model(), cache=True, chunk_size=4, drop_identical_ids=False)
    with pytest.raises(PluginError, match="'corpus' field"):
        retriever.index(Corpus(["d"], ["text"], "0" * 64), task=None, context=Context(tmp_path))


@pytest.mark.parametrize("one, other", [(("a\0b", "c"), ("a", "b\0c")), (("a", "bc"), ("ab", "c")),
                                        (("", "a"), ("a", ""))])
def test_rerank_pair_keys(one, other):
    from r2med_plugins.rerank.scores import pair_key

    assert pair_key(*one) != pair_key(*other)
    assert pair_key("\ud800", "x") != pair_key("\udc00", "x")  # keyed, no UnicodeEncodeError


def test_rerank_journal_is_new_for_the_new_format(tmp_path):
    """Version 1's journal (the name hashed the identity alone) is not read: its keys differ."""
    import hashlib

    from r2med_plugins.rerank.scores import PairScores

    identity = {"scorer": "X", "model": ["m", "r"]}
    old = tmp_path / (hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20] + ".jsonl")
    old.write_text(json.dumps({"key": "k", "score": 1.0}) + "\n")
    assert PairScores(identity, tmp_path).scores == {}


def test_a_lone_surrogate_in_an_answer_is_journaled(tmp_path):
    from r2med_tasks.llm.answers import Generation
    from r2med_tasks.llm.cache import GenerationCache

    cache = GenerationCache(tmp_path / "g.jsonl")
    cache.put("k", Generation("odd \ud800 text", 1, 1, "stop", "m"))
    assert GenerationCache(tmp_path / "g.jsonl").get("k").text == "odd \ud800 text"


def _two_data_sets(root: Path) -> tuple[Path, Path]:
    """Two data sets of one corpus whose query texts differ only in where a NUL splits them:
    joined with NUL they are the same string."""
    queries = {q["id"]: q for q in read_jsonl(SAMPLE / "query.jsonl")}
    t1, t2, t3 = (queries[i]["text"] for i in ("q01", "q02", "q03"))
    qrels = [r for r in read_jsonl(SAMPLE / "qrels.jsonl") if r["q_id"] in ("q01", "q02")]
    folders = []
    for name, texts in (("a", [t1 + "\0" + t2, t3]), ("b", [t1, t2 + "\0" + t3])):
        folder = root / name / "Biology"
        folder.mkdir(parents=True)
        (folder / "corpus.jsonl").write_bytes((SAMPLE / "corpus.jsonl").read_bytes())
        write_jsonl(folder / "query.jsonl", [{**queries[q], "text": t} for q, t in zip(("q01", "q02"), texts)])
        write_jsonl(folder / "qrels.jsonl", qrels)
        folders.append(root / name)
    assert "\0".join([t1 + "\0" + t2, t3]) == "\0".join([t1, t2 + "\0" + t3])
    return folders[0], folders[1]


def test_bm25_data_sets_split_by_nul_differently_get_their_own_scores(evaluate, tmp_path):
    a, b = _two_data_sets(tmp_path / "data")

    def score(data_dir, output, **options):
        (result,) = evaluate("bm25", tasks=None, data_dir=data_dir, output=output, **options).values()
        return result.ndcg_at_10

    fresh_a, fresh_b = score(a, "fresh-a", cache=False), score(b, "fresh-b", cache=False)
    assert fresh_a != fresh_b  # the two data sets do score differently
    assert score(a, "cached-a") == fresh_a  # stores a's query terms
    assert score(b, "cached-b") == fresh_b  # before: read a's terms (same NUL-joined key), a's score
    assert len(list((tmp_path / "cache" / "bm25" / "queries").iterdir())) == 2
