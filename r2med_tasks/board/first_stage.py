"""Rerankers side by side over one first stage (``r2med leaderboard --first-stage X``): the first
stage's own nDCG@10, and for each reranker run over it (``--plugin run-file -o path=X`` then a
reranker) its score, its gain over the first stage, its LLM calls, tokens and cost. A run belongs
here when its retriever is run-file and its revision is X's content digest, wherever X was copied:
two rerankers compared here saw the same candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..results.folder import USAGE_COUNTS, ResultsFolder
from ..results.saved_runs import SavedRuns
from ..scoring.evaluation import leaderboard_average, leaderboard_value
from ..tasks.specs import SHORT_NAMES
from .sources import Row



@dataclass
class FirstStageBoard:
    """``name`` and ``revision`` (content digest, 12 digits) of the first stage; ``scores``: its
    nDCG@10 ×100 per task; ``rerankers``: one dict per run over it, best average first."""

    name: str
    revision: str
    scores: dict[str, float]
    rerankers: list[dict] = field(default_factory=list)

    @property
    def tasks(self) -> list[str]:
        return list(self.scores)

    @property
    def average(self) -> float | None:
        return leaderboard_average(list(self.scores.values())) if self.scores else None

    def to_json(self) -> dict:
        return {"first_stage": self.name, "revision": self.revision, "scores": self.scores,
                "average": self.average, "rerankers": self.rerankers}


def first_stage_scores(path: Path) -> tuple[str, dict[str, float]]:
    """A first stage's name and own nDCG@10 ×100 per task: what its export manifest recorded, else
    (a results folder given as the first stage) its TaskResults."""
    folder = ResultsFolder(path)
    manifest = folder.first_stage()
    if manifest:
        tasks = manifest.get("tasks") if isinstance(manifest.get("tasks"), dict) else {}
        scores = {t: leaderboard_value(e["ndcg_at_10"]) for t, e in tasks.items()
                  if isinstance(e, dict) and isinstance(e.get("ndcg_at_10"), float)}
        return str(manifest.get("name") or path.name), scores
    scores = {}
    for task in folder.run_task_names():
        try:
            scores[task] = leaderboard_value(folder.load(task)[0])
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue
    return folder.display_name(), scores


def first_stage_board(path: Path, rows: list[Row]) -> FirstStageBoard:
    """The runs of ``rows`` that rerank the first stage at ``path``, each with its gain over it
    (per task it has, and on the average over the first stage's tasks when it has them all) and its
    LLM use summed over those tasks (``usd`` None when a price or a cost record is missing)."""
    revision = SavedRuns(path, option="--first-stage").digest[:12]
    name, scores = first_stage_scores(path)
    board = FirstStageBoard(name, revision, scores)
    for row in rows:
        retriever = row.models.get("retriever") if isinstance(row.models.get("retriever"), dict) else {}
        if row.reranker == "-" or row.components.get("retriever", {}).get("component") != "run-file" or \
                retriever.get("revision") != revision:
            continue
        tasks = [t for t in scores if t in row.scores]
        complete = len(tasks) == len(scores)
        average = leaderboard_average([row.scores[t] for t in tasks]) if complete else None
        usage = [(row.costs.get(t) or {}).get("usage") for t in tasks]
        totals = {k: sum(int(u.get(k, 0)) for u in usage if isinstance(u, dict)) for k in USAGE_COUNTS}
        priced = [u.get("usd") if isinstance(u, dict) else (0.0 if t in row.costs else None)
                  for t, u in zip(tasks, usage)]
        board.rerankers.append({
            "system": row.system, "reranker": row.reranker, "llm": (row.models.get("reranker") or {}).get("name"),
            "scores": {t: row.scores[t] for t in tasks},
            "gains": {t: round(row.scores[t] - scores[t], 2) for t in tasks},
            "average": average, "gain": None if average is None else round(average - board.average, 2),
            **totals, "usd": None if not tasks or None in priced else round(sum(priced), 10),
            "source": row.source})
    board.rerankers.sort(key=lambda r: (r["average"] is None, -(r["average"] or 0.0)))
    return board


def first_stage_text(board: FirstStageBoard, fmt: str) -> str:
    """The view in one format: ``json``, ``markdown``, ``csv`` or ``table`` (rich)."""
    import csv
    import io
    import json

    if fmt == "json":
        return json.dumps(board.to_json(), indent=2) + "\n"
    short = [SHORT_NAMES.get(t, t) for t in board.tasks]
    header = ["#", "Reranker", "LLM", "Avg", "Gain", *short, "LLM calls", "Tokens", "Reasoning", "USD"]
    first = ["", f"{board.name} (first stage)", "-", _cell(board.average), "", *(_cell(board.scores[t]) for t in board.tasks),
             "", "", "", ""]
    lines = [first]
    for i, r in enumerate(board.rerankers, 1):
        lines.append([str(i), r["system"], r["llm"] or "-", _cell(r["average"]), _cell(r["gain"], signed=True),
                      *(_cell(r["scores"].get(t)) for t in board.tasks), str(r["requests"] + r["cached"]),
                      str(r["prompt_tokens"] + r["completion_tokens"]), str(r["reasoning_tokens"]),
                      "" if r["usd"] is None else f"{r['usd']:.6g}"])
    if fmt == "csv":
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows([header, *lines])
        return buffer.getvalue()
    if fmt == "markdown":
        return "".join("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n"
                       for cells in [header, ["---"] * len(header), *lines])
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"Rerankers over the first stage {escape(board.name)} (content {board.revision}): nDCG@10 ×100",
                  title_justify="left")
    for col in header:
        table.add_column(col, justify="left" if col in ("Reranker", "LLM") else "right")
    for cells in lines:
        table.add_row(*(escape(c) for c in cells))
    buffer = io.StringIO()
    Console(file=buffer, width=200, highlight=False).print(table)
    if not board.rerankers:
        buffer.write("No reranker run over this first stage in these folders: "
                     "r2med-run --plugin run-file -o path=FIRST_STAGE --plugin RERANKER makes one.\n")
    return buffer.getvalue()


def _cell(value: float | None, signed: bool = False) -> str:
    return "" if value is None else f"{value:+.2f}" if signed else f"{value:.2f}"
