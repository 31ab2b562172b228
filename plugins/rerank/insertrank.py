"""``insertrank``: InsertRank (Seetharaman, Dhole, Bansal, arXiv 2506.14086, WSDM 2026), listwise
reranking by an LLM whose prompt shows each passage's first-stage BM25 score beside its text.

From the paper's abstract: the method, the scores as BM25 gave them, the passages in BM25's order.
The prompt is castorini/rank_llm's ``insert_rank_template.yaml`` (@PR #263), the one public
rendering of the paper's prompt: its system message, a prefix that says BM25 scores are provided, each
passage followed by a line with its score to 3 decimals (``f"{score:.3f}"``, rank_llm's
``SingleTurnListwiseInferenceHandler``), and a suffix asking to weigh content and scores. Window,
stride and passage cut are rank_llm's defaults; the paper's own could not be read
(docs/reproducing.md, "InsertRank").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .listwise import replace_number, truncate_words
from .llm_rerank import LLMReranker

# rank_llm src/rank_llm/rerank/prompt_templates/insert_rank_template.yaml (verbatim, "passge" included),
# its "BM25" the score's name
SYSTEM = "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query"
PREFIX = ("I will provide you with {num} passages, each indicated by a numerical identifier []. I will also provide "
          "the {name} scores from a lexical retrieval system.\n\nRank the passages based on their relevance to the "
          "search query: {query}.\n")
BODY = "[{rank}] {candidate}\n{name} score for passge [{rank}]: {score}\n"
SUFFIX = ("Search Query: {query}.\nRerank the above {num} passages based on their relevance to the query. Consider "
          "both the document content and the {name} scores as signals for relevance. All the passages should be "
          "included and listed using identifiers, in descending order of relevance. The output format should be [] > "
          "[], e.g., [2] > [1]. Return the ranking as a list of numbers from 1 to {num}, most relevant first. Answer "
          "concisely and directly and only respond with the ranking results, do not say any word or explain.")


def score_text(score: float, decimals: int) -> str:
    """A first-stage score as rank_llm writes it (``f"{score:.3f}"``), refused when not finite."""
    score = float(score)
    if not math.isfinite(score):
        from r2med_tasks.plugin import UserError

        raise UserError(f"reranker 'insertrank': a first-stage score is {score!r}; it shows finite scores only")
    return f"{score:.{decimals}f}"


def insertrank_messages(query: str, texts: Sequence[str], passage_words: int | None, *,
                        annotations: Sequence[str], name: str = "BM25") -> list[dict]:
    """rank_llm's single-turn request for one window: ``annotations`` are the passages' scores as
    written; query and passages have "[N]" as "(N)" (rank_llm's ``_replace_number``)."""
    num, query = len(texts), replace_number(query)
    body = "".join(BODY.format(rank=rank, candidate=replace_number(truncate_words(text, passage_words)),
                               name=name, score=score)
                   for rank, (text, score) in enumerate(zip(texts, annotations), start=1))
    user = PREFIX.format(num=num, query=query, name=name) + body + SUFFIX.format(num=num, query=query, name=name)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


class InsertRankReranker(LLMReranker):
    component = "insertrank"

    def passage(self, doc_id: str, text: str, score: float) -> tuple:
        """``(doc_id, text, "12.350")``: the score travels with its passage from window to window."""
        return doc_id, text, score_text(score, self.options.score_decimals)

    def prompt(self):
        name = self.options.score_name

        def messages(query, texts, passage_words, *, annotations):
            return insertrank_messages(query, texts, passage_words, annotations=annotations, name=name)

        return messages

    def model_meta(self) -> dict:
        """The ranking LLM, as ``llm-rerank`` names it, in InsertRank's name: "InsertRank(DeepSeek-R1)"."""
        meta = super().model_meta()
        return {**meta, "display_name": f"InsertRank({meta['display_name']})"}
