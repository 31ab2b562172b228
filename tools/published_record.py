"""The authors' complete published record, built: every run in R2MED's GitHub ``results/`` with every
metric, into ``r2med_tasks/data/published/r2med_published.json`` (read at run time by
``r2med_tasks.board.published``) and the ``repo_results_status`` column of the leaderboard CSV.

R2MED/R2MED (MIT) keeps one JSON file of metrics per run and dataset under
``results/<base retriever|gar|reranker>/.../<Dataset>.json``. Two commits matter: 45cbac5, the
first, to which the published numbers trace and which holds runs later deleted (HyDE with o3-mini,
Search-R1 (3B) + BM25, the rerankers over NV-Embed-v2's top 10 and top 100), and 62b7074, the head,
which renamed the files and added runs (HyDE with Qwen-72B, LameR and Query2Doc). The record is
the union of both: a run in both commits has the same figures in both (checked when building).

``python -m tools.published_record SRC_DIR`` reads ``SRC_DIR/<commit>/results/`` for both
commits. A run's ``kind`` is ``leaderboard`` when it is one of the leaderboard's rows (same command,
same nDCG@10 on every dataset), else ``repository`` (a run of the paper or repository only).

The authors' NFCorpus files (``BEIR_NFCorpus.json``, 45cbac5) are not an R2MED task and are left out.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
import sys
from pathlib import Path

from r2med_tasks.files import atomic
from r2med_tasks.board.published import DATA, PUBLISHED_CSV, REPOSITORY
from r2med_tasks.tasks.specs import R2MED_TASKS

COMMITS = ("45cbac5", "62b7074")  # oldest first; a run's figures are read from the first commit holding it

# The authors' file names (45cbac5 used the original dataset keys, 62b7074 the hub names) -> task.
DATASETS = {"Stack-Biology": "Biology", "Stack-Bioinformatics": "Bioinformatics",
            "Stack-Medical": "Medical-Sciences", "MedXpertQA-Exam": "MedXpertQA-Exam", "MedQA-Diag": "MedQA-Diag",
            "PMC-Treat": "PMC-Treatment", "PMCPatients": "PMC-Clinical", "IIYiPatients-EN": "IIYi-Clinical",
            **{t.short_name: t.short_name for t in R2MED_TASKS}}
NOT_R2MED = {"BEIR_NFCorpus"}

# The authors' folder names -> the harness's plugins.
RETRIEVERS = {"bm25": "bm25", "nv": "nvembed", "bge": "bge", "openai": "openai", "voyage": "voyage", "e5": "e5",
              "grit": "grit", "sfr": "sfr", "contriever": "contriever", "medcpt": "medcpt", "inst-l": "inst-l",
              "inst-xl": "inst-xl", "bmr-410m": "bmr-410m", "bmr-2b": "bmr-2b", "bmr-7b": "bmr-7b"}
RERANKERS = {"bge": "bge-reranker", "bge-reranker": "bge-reranker", "mono": "monobert", "monobert": "monobert",
             "llama": "rankllama", "rankllama": "rankllama"}
# 45cbac5's reranker folders (reranker/<name>/top_<k>; its script reranked NV-Embed-v2's run) under
# 62b7074's layout (reranker/<name>/nv/top_<k>), so that one run has one id.
OLD_RERANKER = re.compile(r"^reranker/(bge|mono|llama)/(top_\d+)$")
NEW_RERANKER_NAME = {"bge": "bge-reranker", "mono": "monobert", "llama": "rankllama"}

_METRIC = re.compile(r"^(map|ndcg|precision|recall|MAP|NDCG|P|Recall)(?:_at_|@)(\d+)$")
_METRIC_NAMES = {"map": "map", "MAP": "map", "ndcg": "ndcg", "NDCG": "ndcg", "precision": "precision", "P": "precision",
                 "recall": "recall", "Recall": "recall"}


def metric_name(authors: str) -> str:
    """mteb's name for one of the authors' metric keys (``NDCG@10``/``ndcg_at_10`` -> ``ndcg_at_10``)."""
    if authors.lower() == "mrr":
        return "mrr"
    match = _METRIC.match(authors)
    if not match:
        raise ValueError(f"unknown metric {authors!r}")
    return f"{_METRIC_NAMES[match.group(1)]}_at_{match.group(2)}"


def run_id(folder: str) -> str:
    """The record's id of a run folder (relative to ``results/``), the same in both commits."""
    old = OLD_RERANKER.match(folder)
    return f"reranker/{NEW_RERANKER_NAME[old.group(1)]}/nv/{old.group(2)}" if old else folder


def command_for(rid: str) -> str:
    """The ``r2med-run`` command that runs what the authors' run folder holds."""
    parts = rid.split("/")
    if parts[0] == "base retriever":
        return f"r2med-run --plugin {RETRIEVERS[parts[1]]}"
    if parts[0] == "gar":
        method, source, retriever = parts[1:]
        return f"r2med-run --plugin {method} -o source={source} --plugin {RETRIEVERS[retriever]}"
    if parts[0] == "reranker":
        reranker, retriever, top = parts[1:]
        k = int(top.removeprefix("top_"))
        return (f"r2med-run --plugin {RETRIEVERS[retriever]} --plugin {RERANKERS[reranker]}"
                + ("" if k == 10 else f" -o rerank_k={k}"))
    raise ValueError(f"no command for {rid!r}")


def id_for_command(command: str) -> str | None:
    """The inverse of :func:`command_for` for the leaderboard's commands (None: not an authors' run)."""
    words = shlex.split(command)[1:]
    plugins = [v for f, v in zip(words[::2], words[1::2]) if f in ("--plugin", "-p")]
    options = [v for f, v in zip(words[::2], words[1::2]) if f == "-o"]
    inverse = {v: k for k, v in RETRIEVERS.items()}
    if len(plugins) == 1 and not options and plugins[0] in inverse:
        return f"base retriever/{inverse[plugins[0]]}"
    if len(plugins) == 2 and len(options) == 1 and options[0].startswith("source=") and plugins[1] in inverse:
        return f"gar/{plugins[0]}/{options[0].removeprefix('source=')}/{inverse[plugins[1]]}"
    return None


def read_commit(root: Path) -> dict[str, dict]:
    """``{run folder: {task short name: {metric: value}}}`` from one commit's ``results/``."""
    runs: dict[str, dict] = {}
    for path in sorted((root / "results").rglob("*.json")):
        if path.stem in NOT_R2MED:
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        folder = path.parent.relative_to(root / "results").as_posix()
        metrics = {metric_name(k): v for k, v in data["test"].items()}
        runs.setdefault(folder, {})[DATASETS[path.stem]] = dict(sorted(metrics.items()))
    return runs


def _leaderboard(csv_text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(csv_text)))


def _x100(value: float) -> float:
    return round(round(value, 5) * 100, 2)


def build(src: Path, csv_text: str) -> tuple[dict, str]:
    """The record from ``src/<commit>/results/`` and the leaderboard CSV's text with its
    ``repo_results_status`` column recomputed from the files. Raises ValueError when a run's two
    commits disagree or a run misses a dataset."""
    runs: dict[str, dict] = {}
    for commit in COMMITS:
        for folder, tasks in read_commit(src / commit).items():
            rid = run_id(folder)
            if len(tasks) != len(R2MED_TASKS):
                raise ValueError(f"{commit}/results/{folder}: {len(tasks)} datasets, not {len(R2MED_TASKS)}")
            if rid in runs and runs[rid]["metrics"] != tasks:
                raise ValueError(f"{rid}: {commit} differs from {next(iter(runs[rid]['files']))}")
            run = runs.setdefault(rid, {"id": rid, "files": {}, "metrics": tasks})
            run["files"][commit] = f"results/{folder}"
    board = _leaderboard(csv_text)
    by_id = {}
    for record in board:
        rid = id_for_command(record["command"]) if record["command"] else None
        if rid is not None and rid in runs:
            by_id[rid] = record
    # Each leaderboard row's provenance, recomputed from the files.
    statuses = []
    for record in board:
        rid = id_for_command(record["command"]) if record["command"] else None
        external = "(external)" if record["repo_results_status"].endswith("(external)") else ""
        if rid is None or rid not in runs:
            statuses.append("not_in_repo" + external)
            continue
        same = all(_x100(runs[rid]["metrics"][t.short_name]["ndcg_at_10"]) == float(record[t.short_name])
                   for t in R2MED_TASKS)
        statuses.append("matches_repo_results" if same else "differs_from_repo_results")
    names = {r["name"] for r in board}
    out = []
    for rid in sorted(runs, key=_order):
        run = runs[rid]
        record = by_id.get(rid)
        row_status = statuses[board.index(record)] if record else None
        command = command_for(rid)
        if record is not None:
            assert record["command"] == command, (record["command"], command)
        kind = "leaderboard" if row_status == "matches_repo_results" else "repository"
        name = record["name"] if kind == "leaderboard" else _name(rid, command)
        if kind == "repository" and name in names:
            name = f"{name} (repository)"
        parts = _parts(rid, name, record if kind == "leaderboard" else None)
        note = ""
        if record is not None and kind == "repository":
            note = (f"the leaderboard row {record['name']!r} has other figures (average {record['avg']}); "
                    "these are the repository's")
        out.append({"id": rid, "kind": kind, "name": name, **parts, "command": command,
                    "files": {c: run["files"][c] for c in COMMITS if c in run["files"]},
                    **({"note": note} if note else {}), "metrics": run["metrics"]})
    record = {"repository": REPOSITORY, "commits": list(COMMITS),
              "metrics_note": "as the authors rounded them (5 decimals); mteb's metric names",
              "runs": out}
    buffer = io.StringIO()
    fields = list(board[0])
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator=_line_end(csv_text))
    writer.writeheader()
    for r, status in zip(board, statuses):
        writer.writerow({**r, "repo_results_status": status})
    return record, buffer.getvalue()


def _line_end(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _order(rid: str) -> tuple:
    group = rid.split("/")[0]
    return ({"base retriever": 0, "gar": 1, "reranker": 2}[group], rid)


def _name(rid: str, command: str) -> str:
    """A repository run's name: the pipeline name the harness gives its command, with a reranker's
    ``rerank_k`` when it is not the default 10 ("NV-Embed-v2 + monoBERT (rerank_k=100)")."""
    from r2med_tasks.api import registry
    from r2med_tasks.running.pipelines import build_pipeline, instantiate

    words = shlex.split(command)[1:]
    plugins = [v for f, v in zip(words[::2], words[1::2]) if f == "--plugin"]
    options = [v for f, v in zip(words[::2], words[1::2]) if f == "-o"]
    installed = registry()
    pipeline = build_pipeline(installed, plugins, options, top_k=100)
    instantiate(pipeline, installed)  # creating components loads no model
    name = pipeline.display_name()
    rerank_k = next((o.split("=", 1)[1] for o in options if o.startswith("rerank_k=")), None)
    return f"{name} (rerank_k={rerank_k})" if rerank_k else name


def _parts(rid: str, name: str, record: dict | None) -> dict:
    if record is not None:
        return {"rewriter": record["rewriter"], "retriever": record["retriever"], "reranker": record["reranker"]}
    pieces = re.sub(r" \((repository|rerank_k=\d+)\)$", "", name).split(" + ")
    group = rid.split("/")[0]
    if group == "gar":
        return {"rewriter": pieces[0], "retriever": pieces[1], "reranker": "-"}
    if group == "reranker":
        return {"rewriter": "-", "retriever": pieces[0], "reranker": pieces[1]}
    return {"rewriter": "-", "retriever": pieces[0], "reranker": "-"}


def dumps(record: dict) -> str:
    """The shipped file's text: one line per run's metrics per task, so diffs stay readable."""
    lines = ["{", f'  "repository": {json.dumps(record["repository"])},',
             f'  "commits": {json.dumps(record["commits"])},',
             f'  "metrics_note": {json.dumps(record["metrics_note"])},', '  "runs": [']
    for i, run in enumerate(record["runs"]):
        head = {k: v for k, v in run.items() if k != "metrics"}
        lines.append("    {" + json.dumps(head)[1:-1] + ', "metrics": {')
        tasks = list(run["metrics"].items())
        for j, (task, metrics) in enumerate(tasks):
            lines.append(f"      {json.dumps(task)}: {json.dumps(metrics)}" + ("," if j < len(tasks) - 1 else ""))
        lines.append("    }}" + ("," if i < len(record["runs"]) - 1 else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tools.published_record SRC_DIR\n"
              "  SRC_DIR holds 45cbac5/results/ and 62b7074/results/ of R2MED/R2MED")
        return 2
    record, csv_text = build(Path(argv[0]), PUBLISHED_CSV.read_text(encoding="utf-8"))
    atomic.write_text(DATA, dumps(record))
    atomic.write_text(PUBLISHED_CSV, csv_text)
    print(f"{DATA}: {len(record['runs'])} runs "
          f"({sum(r['kind'] == 'leaderboard' for r in record['runs'])} leaderboard rows); {PUBLISHED_CSV} status column")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
