"""What a retriever searches with when a rewriter has run: the published combination rules.

R2MED's runs (``src/eval_bench_BM25.py``, ``src/eval_bench.py``) combined a query and its generated
document differently per retriever family; ``reasoning.query_text`` has the full table. Here the
generated text is already stripped of its reasoning trace (``Query.reasoning`` marks a reasoning
model's extracted answer), so these rules need no LLM name.
"""

from __future__ import annotations

from r2med_tasks.data import Query

from .reasoning import GAR_METHODS, query_text


def bm25_query(query: Query) -> str:
    """BM25: HyDE searches with the generated document alone, Query2Doc with the query twice (no
    separator) + the document, LameR with query + document, a reasoning model's answer alone."""
    if not query.generated:
        return query.text
    generated = " ".join(query.generated)
    if query.reasoning:
        return generated
    method = query.method if query.method in GAR_METHODS else "lamer"  # unknown methods: append
    return query_text(method, "bm25", query.text, generated, llm="")


def dense_query(query: Query) -> str | tuple[str, ...]:
    """Dense: a tuple means "average the embeddings of the query and each generated document";
    Query2Doc (not from a reasoning model) is one string joined with "[SEP]"."""
    if not query.generated:
        return query.text
    if query.method == "query2doc" and not query.reasoning:
        return query_text("query2doc", "dense", query.text, " ".join(query.generated), llm="")
    return (query.text, *query.generated)
