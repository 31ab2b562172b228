"""Verdicts of reproductions: how far a reproduced figure may land from the published one for each
kind of system, and the matrix of the reproductions kept in results folders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..tasks.specs import R2MED_TASKS

VERDICTS = ("OK", "OKish", "FAIL")
EXACT = 0.005  # half the last printed digit of a published figure (×100, 2 decimals)
LEXICAL = ("bm25", "bm25-okapi")  # retrievers that compute the same numbers on any machine
API = ("openai", "voyage")  # retrievers behind a hosted model, which may change under its name


@dataclass(frozen=True)
class Tolerance:
    """How far from a published figure (nDCG@10 ×100) a reproduction may land: ``ok`` (as printed),
    ``okish`` (this kind of system's), and why."""

    kind: str
    okish: float
    why: str
    ok: float = EXACT

    def verdict(self, difference: float) -> str:
        d = abs(difference) - 1e-9  # the published figure's own rounding, not float noise, decides
        return "OK" if d <= self.ok else "OKish" if d <= self.okish else "FAIL"


TOLERANCES = {
    "lexical": Tolerance("lexical", 0.05, "BM25 over published generations or queries: deterministic, so any "
                                          "difference beyond the figure's rounding is a different computation"),
    "neural": Tolerance("neural", 0.5, "neural encoders and rerankers: GPU kernels, CPUs, fp16/bf16 and batch sizes "
                                       "change the last bits of scores, and ties break differently"),
    "api": Tolerance("api", 2.0, "a hosted model (OpenAI, Voyage) may change behind its name since the published run"),
}


def reproductions(folders: list[Path]) -> list[dict[str, Any]]:
    """The reproductions kept under results ``folders`` (their ``r2med/reproduction.json``), the
    latest of each row, in the board's rank order: the reproduction matrix."""
    from ..files.bounded import UnreadableFile
    from ..results.folder import read_record, runs_under

    latest: dict[str, dict[str, Any]] = {}
    for root in folders:
        for run in runs_under(root):
            try:
                kept = read_record(run.reproduction_file)
            except UnreadableFile:
                continue
            if isinstance(kept.get("row"), str) and kept.get("verdict") in VERDICTS and \
                    str(kept.get("date", "")) >= str(latest.get(kept["row"], {}).get("date", "")):
                latest[kept["row"]] = kept
    return sorted(latest.values(), key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r["row"]))


def matrix_cells(matrix: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The reproduction matrix as text cells: a header, then per reproduced row its rank, name, each
    dataset's verdict with its difference ("OK +0.00"), the average's, the verdict and the date."""
    short = [t.short_name for t in R2MED_TASKS]
    header = ["Rank", "Row", *short, "Average", "Verdict", "Date"]
    rows = []
    for kept in matrix:
        by_task = {c.get("task"): c for c in kept.get("tasks") or [] if isinstance(c, dict)}
        average = kept.get("average") if isinstance(kept.get("average"), dict) else {}
        rows.append([str(kept.get("rank") or "-"), str(kept["row"]),
                     *(_cell(by_task.get(name, {})) for name in short), _cell(average),
                     str(kept.get("verdict")), str(kept.get("date") or "")])
    return header, rows


def _cell(check: dict[str, Any]) -> str:
    from ..terminal import number

    verdict, difference = check.get("verdict"), check.get("difference")
    if verdict not in VERDICTS or not isinstance(difference, (int, float)):
        return "-"
    return f"{verdict} {number(difference, signed=True)}"
