"""``insertrank``: InsertRank (Seetharaman, Dhole, Bansal, "InsertRank: LLMs can reason over BM25
scores to Improve Listwise Reranking", arXiv 2506.14086, WSDM 2026), zero-shot listwise reranking
by an LLM whose prompt shows each passage's first-stage BM25 score beside its text.

What is the paper's, and what is the harness's (docs/reproducing.md, "InsertRank"):

* The paper's: the method, a listwise LLM reranker given the query and each of the first stage's
  documents with its BM25 score, ``(q, D1, b1, ..., Dn, bn) -> ranking``; the scores as BM25 gave
  them (its ablations, not the main configuration, rescale or normalise them and shuffle the
  documents' order), so the passages come in BM25's order; its R2MED figure, 51.1 nDCG@10 averaged
  over the eight datasets with DeepSeek-R1 (the abstract).
* The harness's, because the paper's text beyond that could not be read here: everything else is
  ``llm-rerank``'s convention, which this reranker is (``LLMReranker``, the same window machinery,
  cache, concurrency, usage and retries): RankGPT's prompt (ReasonRank's with ``-o reasoning=true``)
  with one sentence saying what the scores are (``NOTE``) and each passage followed by a line
  ``BM25 score: 12.35`` (``SCORE_LINE``; the first stage's score, unnormalised, 2 decimals by
  default); the top 100 reranked, windows of 20 sliding by 10 from the bottom up; passages cut to
  300 words; the ranking read from the answer after any ``</think>`` (``listwise.answer_text``),
  never from reasoning a server returns apart.
"""

from __future__ import annotations

import math

from .llm_rerank import LLMReranker

# The sentence added to the prompt's opening (the harness's wording) and each passage's score line.
NOTE = "Each passage is followed by its {name} score from the first-stage retrieval."
SCORE_LINE = "\n{name} score: {score}"


def score_text(score: float, decimals: int) -> str:
    """How a first-stage score is written: as it is, rounded to ``decimals`` (``12.35``); a
    negative zero is written without its sign."""
    score = float(score)
    if not math.isfinite(score):
        from r2med_tasks.plugin import UserError

        raise UserError(f"reranker 'insertrank': a first-stage score is {score!r}; it shows finite scores only")
    text = f"{score:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


class InsertRankReranker(LLMReranker):
    component = "insertrank"

    def __init__(self, options) -> None:  # InsertRankOptions
        super().__init__(options)
        self.score_name, self.score_decimals = options.score_name, options.score_decimals
        self.note = NOTE.format(name=self.score_name)

    def passage(self, doc_id: str, text: str, score: float) -> tuple:
        """``(doc_id, text, "\\nBM25 score: 12.35")``: the score follows the passage's cut text."""
        return doc_id, text, SCORE_LINE.format(name=self.score_name, score=score_text(score, self.score_decimals))

    def model_meta(self) -> dict:
        """The ranking LLM, as ``llm-rerank`` names it, in InsertRank's name: "InsertRank(DeepSeek-R1)"."""
        meta = super().model_meta()
        return {**meta, "display_name": f"InsertRank({meta['display_name']})"}
