"""Cross-encoder scores of (query, document) pairs, journaled as each chunk of pairs is scored, so
a killed reranking resumes with the pairs it had not scored and a rerun scores none.

One journal per model identity (weights, effective dtype, length, logit); a line is
``{"key": sha256(query, document), "score": float}``, the float written exactly (JSON keeps every
bit of a double). Texts are not stored.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pathlib import Path

from r2med_tasks.journal import Journal

CHUNK = 1024  # pairs scored between two journal appends (a multiple of the batch sizes)


def pair_key(query: str, document: str) -> str:
    blob = json.dumps([query, document], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


class PairScores:
    def __init__(self, identity: dict[str, Any], folder: Path) -> None:
        name = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
        self.journal = Journal(folder / f"{name}.jsonl", "the reranker score cache")
        records, _, _ = self.journal.read()
        self.scores: dict[str, float] = {r["key"]: float(r["score"]) for r in records
                                         if isinstance(r.get("key"), str) and isinstance(r.get("score"), float)}

    def add(self, scores: dict[str, float]) -> None:
        self.journal.append([{"key": k, "score": v} for k, v in scores.items()])
        self.scores.update(scores)
