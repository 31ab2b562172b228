"""``insertrank``: InsertRank (Seetharaman, Dhole, Bansal, arXiv 2506.14086, WSDM 2026), listwise
reranking by an LLM whose prompt shows each passage's first-stage BM25 score beside its text.

The paper's: the method, ``(q, D1, b1, ..., Dn, bn) -> ranking``, the scores as BM25 gave them, the
passages in BM25's order. The rest could not be read from the paper, so it is ``llm-rerank``'s
convention, with one sentence saying what the scores are (``NOTE``) and a ``SCORE_LINE`` after each
passage (docs/reproducing.md, "InsertRank").
"""

from __future__ import annotations

import math

from .llm_rerank import LLMReranker

# the harness's wording
NOTE = "Each passage is followed by its {name} score from the first-stage retrieval."
SCORE_LINE = "\n{name} score: {score}"


def score_text(score: float, decimals: int) -> str:
    """A first-stage score rounded to ``decimals`` (``12.35``), never "-0.00"."""
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
        """``(doc_id, text, "\\nBM25 score: 12.35")``."""
        return doc_id, text, SCORE_LINE.format(name=self.score_name, score=score_text(score, self.score_decimals))

    def model_meta(self) -> dict:
        """The ranking LLM, as ``llm-rerank`` names it, in InsertRank's name: "InsertRank(DeepSeek-R1)"."""
        meta = super().model_meta()
        return {**meta, "display_name": f"InsertRank({meta['display_name']})"}
