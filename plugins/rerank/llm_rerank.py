"""``llm-rerank``: listwise reranking by an LLM (RankGPT's sliding window; ReasonRank's reasoning
prompt with ``-o reasoning=true``), over any registered LLM backend, answers cached."""

from __future__ import annotations

# How the leaderboard names rerankers run through an LLM backend, by served model.
LEADERBOARD_NAMES = {"liuwenhan/reasonrank-32B": "ReasonRank(32B)", "liuwenhan/reasonrank-7B": "ReasonRank(7B)"}


class LLMReranker:
    """``llm-rerank``; a subclass shows more of each passage through ``passage`` and asks in its own
    words through ``prompt``."""

    component = "llm-rerank"  # its errors name it

    def __init__(self, options) -> None:  # LLMRerankOptions
        from r2med_tasks.plugin import UserError

        if not options.llm:
            raise UserError(f"reranker '{self.component}' needs -o llm=SPEC (e.g. openai:gpt-4o, vllm:MODEL, "
                            "BASE_URL#MODEL)")
        self.llm, self.window, self.step = options.llm, options.window, options.step
        self.passage_words, self.options = options.passage_words, options
        # max_tokens None: the server's default
        self.sampling = {"temperature": options.temperature, "max_tokens": options.max_tokens or None,
                         "concurrency": options.concurrency, **options.llm_settings()}
        self.price = tuple(options.price) if options.price else None

    def prompt(self):
        """A window's request (``ListwiseReranker``'s ``prompt``): RankGPT's, or ReasonRank's with
        ``-o reasoning=true``, as published."""
        from .listwise import rankgpt_messages, reasonrank_messages

        return reasonrank_messages if self.options.reasoning else rankgpt_messages

    def passage(self, doc_id: str, text: str, score: float) -> tuple:
        """A candidate as ``ListwiseReranker`` takes it; the first stage's score is not shown."""
        return doc_id, text

    def model_meta(self) -> dict:
        """The LLM that ranks, never the server's address, named as the leaderboard names it."""
        from r2med_tasks.plugin import LLMRef

        llm = LLMRef(self.llm)
        model = llm.model_name
        return {"name": f"llm/{llm.identity}", "revision": "served",
                "display_name": LEADERBOARD_NAMES.get(model, model.rsplit("/", 1)[-1])}

    def rerank(self, queries, corpus, candidates, *, task, context) -> dict[str, dict[str, float]]:
        from .listwise import ListwiseReranker

        client = context.llm(self.llm, price=self.price, **self.sampling)
        reranker = ListwiseReranker(client, window=self.window, step=self.step, passage_words=self.passage_words,
                                    prompt=self.prompt(), concurrency=self.options.concurrency)
        text_of = dict(zip(corpus.ids, corpus.texts))

        asked = {q.id: q.text for q in queries}

        def keep(qid: str, answers: list, order: list[str], unusable: int) -> None:  # its windows, as it finishes
            context.generated(qid, answers, answer=order, query=asked[qid], sampling=client.params, unusable=unusable)

        orders = reranker.rerank_many([(q.id, q.text) for q in queries if q.id in candidates],
                                      {qid: [self.passage(d, text_of[d], score) for d, score in docs.items()]
                                       for qid, docs in candidates.items()},
                                      on_done=keep)
        return {qid: {d: float(len(order) - i) for i, d in enumerate(order)} for qid, order in orders.items()}
