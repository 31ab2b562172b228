"""What a retriever searches with when a rewriter has run: R2MED's runs (``src/eval_bench_BM25.py``,
``src/eval_bench.py``) combined a query and its generated document differently per retriever
family. The generated text is already stripped of its reasoning trace here, so the rules need no
LLM name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .taskdata import Query

# the published evaluation code's ``gar_method`` choices
GAR_METHODS: tuple[str, ...] = ("hyde", "query2doc", "lamer", "search-o1", "search-r1")
RETRIEVER_FAMILIES: tuple[str, ...] = ("bm25", "dense")


def combined_text(method: str, retriever_family: str, query: str, generated: str) -> str | list[str]:
    """The published retrieval-time query for a query and a generated document, outside "r1 mode"
    (an LLM whose output is used as-is).

    BM25, one string: query2doc ``query*2 + " " + generated`` (no separator between the copies),
    lamer ``query + " " + generated``, hyde and the rest ``generated`` only (the query is dropped).
    Dense: query2doc ``query + "[SEP]" + generated``; the rest ``[query, generated]``, a list
    meaning "encode both, average the embeddings"."""
    if method not in GAR_METHODS:
        raise ValueError(f"unknown GAR method {method!r}; expected one of {GAR_METHODS}")
    if retriever_family not in RETRIEVER_FAMILIES:
        raise ValueError(f"unknown retriever family {retriever_family!r}; expected one of {RETRIEVER_FAMILIES}")
    for name, value in (("query", query), ("generated", generated)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be str, not {type(value).__name__}")
    if retriever_family == "bm25":
        if method == "query2doc":
            return query * 2 + " " + generated
        if method == "lamer":
            return query + " " + generated
        return generated
    if method == "query2doc":
        return query + "[SEP]" + generated
    return [query, generated]


def bm25_query(query: Query) -> str:
    """BM25's rule; a reasoning model's answer is searched alone."""
    if not query.generated:
        return query.text
    generated = " ".join(query.generated)
    if query.reasoning:
        return generated
    method = query.method if query.method in GAR_METHODS else "lamer"  # unknown methods: append
    return combined_text(method, "bm25", query.text, generated)


def dense_query(query: Query) -> str | tuple[str, ...]:
    """Dense retrievers' rule: a tuple means "average the embeddings of its texts"."""
    if not query.generated:
        return query.text
    if query.method == "query2doc" and not query.reasoning:
        return combined_text("query2doc", "dense", query.text, " ".join(query.generated))
    return (query.text, *query.generated)
