"""The GAR rewriters: a generated document per query, live from an LLM or as published."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from r2med_tasks.plugin import GENERATED_FILE, UserError, generated_rows, parse_jsonl

from .query2doc_examples import reason
from .reasoning import is_reasoning_llm, strip_reasoning

LAMER_DEPTH = 10
# How the leaderboard names the published LLMs (r2med_leaderboard.csv); its LLM rows are HyDE.
LEADERBOARD_NAMES = {
    "o3-mini": "o3-mini", "gpt4": "GPT4o", "huatuo-o1-70b": "HuatuoGPT-o1-70B",
    "r1-llama-70b": "DeepSeek-R1-Distill-Llama-70B", "r1-qwen-32b": "DeepSeek-R1-Distill-Qwen-32B",
    "llama-70b": "Llama3.1-70B-Ins", "qwq-32b": "QwQ-32B", "qwen-32b": "Qwen2.5-32B-Ins",
    "qwen-7b": "Qwen2.5-7B-Ins", "qwen-72b": "Qwen2.5-72B-Ins", "qwen3-32b": "Qwen3-32b",
    "qwen-7b-ins": "Qwen2.5-7b-it-em-ppo", "qwen-3b-ins": "Qwen2.5-3b-it-em-ppo",
}
METHOD_NAMES = {"query2doc": "Query2Doc", "lamer": "LameR", "search-o1": "Search-O1", "search-r1": "Search-R1"}
DEFAULT_KEY = "Stack-Medical"  # prompt wording for tasks outside R2MED (a medical Q&A post)


def generated_document(generation) -> tuple[str, bool]:
    """The document a live rewriter takes from an answer, and whether it is in "r1 mode": after the
    thinking, stripped, as published for r1 models. A server that returned the thinking apart gives
    what a plain server gives."""
    text = generation.whole_text()
    _, sep, answer = text.partition("</think>")
    return (answer.strip(), True) if sep else (text, False)


class GARRewriter:
    def __init__(self, method: str, options) -> None:
        """Exactly one of ``options.source`` and ``options.llm`` is set."""
        self.method, self.options = method, options
        self.source, self.published_data, self.llm = options.source, options.published_data, options.llm
        self.hub_split = options.hub_split or self.source.replace("-", "_")  # the hub's: o3_mini, qwen_72b, ...
        self.sampling = {key: getattr(options, key) for key in ("temperature", "top_p", "max_tokens", "seed")}
        self.concurrency, self.client_options = options.concurrency, options.llm_settings()
        self.price = tuple(options.price) if options.price else None

    def display_name(self) -> str:
        """The rewriter as the leaderboard names it: "o3-mini", "Search-O1 (QwQ-32B)", "Query2Doc (GPT4o)"."""
        if self.source:
            llm = LEADERBOARD_NAMES.get(self.source, self.source)
            if self.method == "search-o1" and self.source == "qwq-32b":
                llm = "QwQ-32b"  # the leaderboard's spelling for this row
        else:
            from r2med_tasks.plugin import LLMRef

            llm = LLMRef(self.llm).model_name
        return f"{METHOD_NAMES[self.method]} ({llm})" if self.method in METHOD_NAMES else llm

    def model_meta(self) -> dict:
        """What writes the documents, never the server's address, named as the leaderboard names it."""
        if self.llm:
            from r2med_tasks.plugin import LLMRef

            return {"name": f"llm/{LLMRef(self.llm).identity}", "revision": "served", "display_name": self.display_name()}
        return {"name": f"published/{self.method}", "revision": self.source, "display_name": self.display_name()}

    def inputs(self, task, *, folder):
        """The files read for ``task``: the replayed generations (``-o published_data``'s file, else the
        one in the task's data folder; none from the hub: the task's pinned revision and the split
        identify them), or Query2Doc's few-shot examples (``-o examples``, by its file name; the
        default, shipped at a pinned commit, is identified by that commit)."""
        if self.source:
            root = Path(self.published_data) if self.published_data else folder
            label = f"{self.method}/{self.source}/{GENERATED_FILE}"
            return {label: root / label} if root is not None else {}
        if self.method != "query2doc" or not self.options.examples:
            return {}
        examples = Path(self.options.examples).expanduser()
        if not examples.is_file():
            raise UserError(f"-o examples={self.options.examples}: no such file; give a copy of R2MED's "
                            "src/example.py or a JSON {dataset key: examples}")
        return {examples.name: examples}

    def rewrite(self, queries, *, task, context):
        if self.source:
            documents = self._published(queries, task, context)
        else:
            documents = self._live(queries, task, context)
        return [replace(q, generated=(g,), method=self.method, reasoning=r) for q, (g, r) in zip(queries, documents)]

    # -- the published generations ---------------------------------------------------------------
    def _published(self, queries, task, context) -> list[tuple[str, bool]]:
        """Each query's generated document and whether it is in "r1 mode": R2MED's rule, or, in a
        file ``r2med export-generations`` wrote, what the live run took, so the replay is the run."""
        files = self.inputs(task, folder=context.corpus.folder)
        if files:
            ((label, path),) = files.items()
            rows = parse_jsonl(context.input(label), str(path))
            table = generated_rows(rows, queries, task=task.name)
        else:
            rows, where = self._from_hub(task)
            table = generated_rows(rows, queries, task=task.name, own=True, name=where)
        r1_mode = is_reasoning_llm(self.source) or self.method.startswith("search")
        out = []
        for q in queries:
            row = table[q.id]
            if isinstance(row.get("answer"), str) and isinstance(row.get("r1_mode"), bool):
                out.append((row["answer"], row["r1_mode"]))
            else:
                out.append((strip_reasoning(row["hy_doc"], self.source), r1_mode))
        return out

    def _from_hub(self, task):
        if not task.hub_path:
            raise UserError(f"{task.name} has no hub dataset: pass -o published_data=DIR or --data-dir")
        split = self.hub_split
        where = f"{task.hub_path}@{task.revision[:7]} config '{self.method}' split '{split}'"
        try:
            import datasets

            rows = datasets.load_dataset(task.hub_path, name=self.method, split=split, revision=task.revision).to_list()
        except Exception as e:  # an unknown split's message lists the splits the config has
            raise UserError(f"cannot load {where} from the Hugging Face hub ({reason(e, 300)}); -o hub_split=NAME "
                            "reads another split; without hub access pass --data-dir DIR with "
                            "<Name>/<method>/<llm>/query_with_hydoc.jsonl") from None
        return rows, where

    # -- live generation -------------------------------------------------------------------------
    def _live(self, queries, task, context) -> list[tuple[str, bool]]:
        from .prompts import build_messages

        on_openai = self.llm.lower().startswith("openai:")
        # unset (None): as published: OpenAI models at temperature 0.8, top_p 0.8; local (vLLM) models at 0.7,
        # seed 42, 10240 tokens
        s = self.sampling
        published = {"temperature": 0.8 if on_openai else 0.7, "top_p": 0.8 if on_openai else None,
                     "max_tokens": None if on_openai else 10240, "seed": None if on_openai else 42}
        params = {k: published[k] if s[k] is None else s[k] for k in published}
        client = context.llm(self.llm, price=self.price, **params, concurrency=self.concurrency, **self.client_options)
        key = task.key or DEFAULT_KEY
        examples = self._query2doc_examples(task, context) if self.method == "query2doc" else None
        passages = self._lamer_passages(queries, task, context) if self.method == "lamer" else {}
        requests = [build_messages(self.method, key, q.text, passages.get(q.id), examples=examples) for q in queries]

        def keep(i: int, generation) -> None:
            answer, r1_mode = generated_document(generation)
            context.generated(queries[i].id, [generation], answer=answer, query=queries[i].text,
                              sampling=client.params, unusable=int(not answer.strip()), method=self.method,
                              r1_mode=r1_mode)

        generations = client.generate(requests, on_answer=keep)
        return [generated_document(g) for g in generations]

    def _query2doc_examples(self, task, context) -> dict[str, str]:
        """The authors' few-shot examples: -o examples=PATH (the bytes the task's identity holds),
        else their src/example.py at the pinned commit, as shipped (parsed as data, never run)."""
        from .prompts import Query2DocExamplesUnavailable
        from .query2doc_examples import parse_query2doc_examples, shipped_query2doc_examples

        if self.options.examples:
            ((label, path),) = self.inputs(task, folder=None).items()
            try:
                return parse_query2doc_examples(context.input(label).decode("utf-8"), str(path),
                                                as_json=path.suffix.lower() == ".json")
            except (ValueError, SyntaxError) as e:  # UnicodeDecodeError included
                raise UserError(f"-o examples={self.options.examples}: {reason(e, 300)}") from None
        try:
            return shipped_query2doc_examples()
        except (Query2DocExamplesUnavailable, ValueError, SyntaxError) as e:
            raise UserError(f"cannot load Query2Doc's few-shot examples: {reason(e, 300)}") from None

    def _lamer_passages(self, queries, task, context) -> dict[str, list[str]]:
        """The published BM25's top-10 documents per query, the passages LameR corrects."""
        found = context.searcher(task, "bm25").search([q.text for q in queries], LAMER_DEPTH)
        return {q.id: [hit.text for hit in hits] for q, hits in zip(queries, found)}
