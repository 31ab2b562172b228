"""Generation records: what an LLM wrote for one query, kept beside the task's results so a live
run can be inspected and replayed exactly (the format: docs/inspecting-runs.md). Never a prompt's
secrets, never an address.
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
    known = generation.tokens_known  # else unknown (null), never 0
    out.update(prompt_tokens=generation.prompt_tokens if known else None,
               completion_tokens=generation.completion_tokens if known else None,
               reasoning_tokens=generation.reasoning_tokens,
               seconds=None if generation.seconds is None else round(generation.seconds, 3))
    return out


def record(query_id: str, generations: Sequence[Generation], *, answer: Any, query: str | None = None,
           output: str | None = None, sampling: dict[str, Any] | None = None, unusable: int = 0,
           **fields: Any) -> dict[str, Any]:
    """One query's record: every answer the stage used for it, in the order asked, what the stage
    took from them (``answer``) and, when not 0, how many of them it could not use (``unusable``: a
    window with no ranking, an empty document), with the query's seconds and, when the server
    reported any, its reasoning tokens summed over its answers (what thinking cost per query);
    ``fields`` are the component's own."""
    samples = [sample(g) for g in generations]
    if output is None:
        output = "".join(g.whole_text() for g in generations)
    seconds = [s["seconds"] for s in samples if s["seconds"] is not None]
    reasoning = sum(s["reasoning_tokens"] for s in samples)
    return {"query_id": query_id, **({"query": query} if query is not None else {}),
            "model": generations[0].model if generations else None,
            "sampling": dict(sampling or {}), "samples": samples, "output": output, "answer": answer,
            **({"unusable": unusable} if unusable != 0 else {}),
            "seconds": round(sum(seconds), 3) if seconds else None,
            **({"reasoning_tokens": reasoning} if reasoning else {}), **fields}
