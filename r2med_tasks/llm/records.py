"""Generation records: what an LLM wrote for one query, kept beside the task's results.

A component that asks an LLM (a rewriter, a search agent, an LLM reranker) hands the harness what
it wrote for each query through ``context.generated(query_id, generations, answer=, query=)``,
which builds the record (:func:`record`); the runner writes them, as they arrive,
to a journal in the results folder and, with the task's other files, to ``<Task>.generations.jsonl``
(one JSON object a line, in the queries' order; listed in the task's manifest, so an edited or
missing file recomputes the task). ``r2med export-generations`` turns them into R2MED's published
layout, so a live run replays exactly (``-o source=``); ``r2med show`` prints them.

A record::

    {"query_id", "stage" ("rewriter" | "reranker"; the runner sets it), "component" (likewise),
     "query" (the text the stage was given), "model" (as the server reported serving it), "sampling" (the parameters sent),
     "samples": [{"text", "reasoning" (only when the server returned it apart), "finish_reason",
                  "stop" (a continued turn's stop string), "prompt_tokens", "completion_tokens",
                  "reasoning_tokens", "seconds" (the request's, retries included; that of the
                  request that produced a cached answer)}, ...],
     "output" (the whole text the model wrote, thinking in place), "answer" (what the stage took
     from it: a generated document, or a reranker's order of document ids), "seconds"
     (the samples' sum), ...component fields}

Nothing else: never a prompt's secrets, never an address (``model`` is redacted at parse time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .answers import Generation

def sample(generation: Generation) -> dict[str, Any]:
    """One answer as a record's sample."""
    out: dict[str, Any] = {"text": generation.text}
    if generation.reasoning is not None:
        out["reasoning"] = generation.reasoning
    out["finish_reason"] = generation.finish_reason
    if generation.stop is not None:
        out["stop"] = generation.stop
    known = generation.tokens_known  # else the server's counts were no counts: unknown (null), never 0
    out.update(prompt_tokens=generation.prompt_tokens if known else None,
               completion_tokens=generation.completion_tokens if known else None,
               reasoning_tokens=generation.reasoning_tokens,
               seconds=None if generation.seconds is None else round(generation.seconds, 3))
    return out


def record(query_id: str, generations: Sequence[Generation], *, answer: Any, query: str | None = None,
           output: str | None = None, sampling: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """One query's record (see the module): ``generations``, every answer the stage used for the
    query, in the order asked; ``answer``, what the stage took from them; ``query``, the text the
    stage was given; ``output``, the whole text (default: the one answer's, thinking in place; the
    answers' joined for several); ``fields``, the component's own (JSON values)."""
    samples = [sample(g) for g in generations]
    if output is None:
        output = "".join(g.whole_text() for g in generations)
    seconds = [s["seconds"] for s in samples if s["seconds"] is not None]
    return {"query_id": query_id, **({"query": query} if query is not None else {}),
            "model": generations[0].model if generations else None,
            "sampling": dict(sampling or {}), "samples": samples, "output": output, "answer": answer,
            "seconds": round(sum(seconds), 3) if seconds else None, **fields}
