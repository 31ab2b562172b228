"""Cross-encoder scores of (query, document) pairs, journaled as each chunk is scored, so a killed
reranking resumes where it stopped. One journal per model identity; texts are not stored.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pathlib import Path

from r2med_tasks.plugin import Journal

CHUNK = 1024  # pairs scored between two journal appends (a multiple of the batch sizes)
FORMAT = "r2med-pair-scores/2"  # 2: ASCII-escaped JSON keys (1 could not key a text holding a lone surrogate)


def _digest(value: Any) -> str:
    """sha256 of ``value``'s canonical JSON, ASCII-escaped so a lone surrogate is itself."""
    blob = json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def pair_key(query: str, document: str) -> str:
    """The key of a (query, document) pair."""
    return _digest([query, document])[:32]


def journal_name(identity: dict[str, Any]) -> str:
    """The journal's file name for a model identity (and this format)."""
    return _digest({"format": FORMAT, "identity": identity})[:20] + ".jsonl"


class PairScores:
    def __init__(self, identity: dict[str, Any], folder: Path) -> None:
        self.journal = Journal(folder / journal_name(identity), "the reranker score cache")
        records, _, _ = self.journal.read()
        self.scores: dict[str, float] = {r["key"]: float(r["score"]) for r in records
                                         if isinstance(r.get("key"), str) and isinstance(r.get("score"), float)}

    def add(self, scores: dict[str, float]) -> None:
        self.journal.append([{"key": k, "score": v} for k, v in scores.items()])
        self.scores.update(scores)
