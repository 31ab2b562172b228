"""``bm25``: the BM25 behind R2MED's published numbers, and ``bm25-okapi`` (rank-bm25) to compare.

``bm25`` is pyserini's default Lucene English analyzer feeding gensim's ``LuceneBM25Model`` (k1=0.9,
b=0.4) with the query itself BM25-weighted (the authors' ``src/eval_BM25.py::retrieval_bm25``),
rebuilt in numpy/scipy with no Java and no gensim.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from r2med_tasks.plugin import Options, RetrieverSpec, hookimpl

K1 = "term-frequency saturation (0: term counts ignored)"
B = "length normalisation (0: none, 1: full)"


class BM25Options(Options):
    k1: float = Field(0.9, ge=0, description=K1)
    b: float = Field(0.4, ge=0, le=1, description=B)
    query_weighting: Literal["bm25", "plain"] = Field("bm25", description="bm25 (published: query BM25-weighted) or "
                                                                          "plain (textbook Lucene BM25)")
    cache: bool = Field(True, description="keep the index on disk (under --cache-dir) and reuse it")


class OkapiOptions(Options):
    k1: float = Field(1.5, ge=0, description=K1)
    b: float = Field(0.75, ge=0, le=1, description=B)
    epsilon: float = Field(0.25, ge=0, description="floor of a term's IDF, as a fraction of the mean IDF")


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(
        name="bm25",
        factory="r2med_plugins.bm25.retriever:BM25Retriever",
        description="BM25 as the R2MED leaderboard ran it: pyserini's Lucene English analyzer, "
                    "gensim's Lucene BM25 weights on documents and query (k1=0.9, b=0.4).",
        options=BM25Options,
        runtime_options=("cache",),
        combines_generated=True,  # the published rule for BM25
        reference="https://github.com/R2MED/R2MED/blob/main/src/eval_BM25.py",
    ))
    register(RetrieverSpec(
        name="bm25-okapi",
        factory="r2med_plugins.bm25.retriever:OkapiRetriever",
        description="rank-bm25's BM25Okapi over the same analyzer, for comparison (slow: pure Python "
                    "scoring; not the published variant).",
        options=OkapiOptions,
        combines_generated=True,
        reference="https://github.com/dorianbrown/rank_bm25",
    ))
