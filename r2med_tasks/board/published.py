"""The authors' complete published record as the package ships it, with the runs of R2MED published
in other papers (transcribed by hand) and MTEB's R2MED results as the MTEB results repository held
them at one commit. These files are generated at build time by ``tools/``, never at run time. Each
run of the record carries ``kind`` (``leaderboard`` or ``repository``), ``files`` (the commit(s)
and folder it was read from), ``command`` (the ``r2med-run`` command that reproduces it) and
``metrics`` (per task, each metric the authors report, under mteb's names, as they rounded them).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..components.overlap import NOTE_FIELDS, OVERLAP_KEY, overlap_notes
from ..tasks.specs import R2MED_TASKS

DATA = Path(__file__).parents[1] / "data" / "published" / "r2med_published.json"
# ``sha256sum`` lines of every file of the published runs as mteb results, paths relative to ``results/``:
# a results folder claiming to be published is the shipped copy only when its files are these.
MANIFEST = Path(__file__).parents[1] / "data" / "published" / "files.sha256"
PUBLISHED_CSV = Path(__file__).parents[1] / "data" / "leaderboard" / "r2med_leaderboard.csv"
PAPERS = Path(__file__).parents[1] / "data" / "published" / "papers.json"
REPOSITORY = "R2MED/R2MED"
PUBLISHED_KINDS = ("leaderboard", "repository", "paper")  # the kinds of published rows
PAPER_FIELDS = ("paper", "table", "first_stage", "llm")  # what each run of another paper says besides its figures
# MTEB's R2MED results at one commit of the MTEB results repository, their sha256 beside them
MTEB_RECORD = Path(__file__).parents[1] / "data" / "published" / "mteb_r2med.json"
MTEB_RECORD_SHA256 = MTEB_RECORD.with_suffix(".sha256")
MTEB_REPOSITORY = "embeddings-benchmark/results"


@lru_cache(maxsize=4)
def _load(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def published_runs(kind: str | None = None, path: Path = DATA) -> list[dict]:
    """The shipped record's runs (``kind``: ``leaderboard`` or ``repository`` only)."""
    return [r for r in _load(str(path))["runs"] if kind is None or r["kind"] == kind]


def paper_runs(path: Path = PAPERS) -> list[dict]:
    """Runs published in other papers: ``name``, ``rewriter``/``retriever``/``reranker``,
    ``command``, ``source``, ``reference``, ``provenance``, ``note``, where the figures are
    (``paper``: its arXiv id, ``table``), what it reranks (``first_stage``) with which ``llm``
    ("-" for none), the printed ``average`` and ``ndcg_at_10`` (×100, per dataset short name: all
    eight, or none for a run whose paper gives only its average), and, where its models' training
    data overlaps a dataset's source, ``training_overlap`` (``components.overlap``'s notes, each
    naming its ``model``)."""
    runs = _load(str(path))["runs"]
    for run in runs:
        if set(run["ndcg_at_10"]) not in ({t.short_name for t in R2MED_TASKS}, set()):
            raise ValueError(f"{path}: {run['name']!r} gives some of the eight datasets, not all")
        if not isinstance(run.get("average"), (int, float)):
            raise ValueError(f"{path}: {run['name']!r} has no printed average")
        if not all(isinstance(run.get(k), str) and run[k] for k in PAPER_FIELDS):
            raise ValueError(f"{path}: {run['name']!r} does not say each of {', '.join(PAPER_FIELDS)}")
        if overlap_notes(run.get(OVERLAP_KEY)) is None:
            raise ValueError(f"{path}: {run['name']!r}: {OVERLAP_KEY} is not a list of notes "
                             f"({', '.join(('model', *NOTE_FIELDS))})")
    return runs


def mteb_record(path: Path = MTEB_RECORD) -> dict:
    """The shipped record of MTEB's R2MED results (``tools/mteb_record.py``): ``repository``,
    ``commit`` and ``commit_date`` (the commit it was read at), and ``models``, one per model,
    revision and experiment: its mteb ``name``, ``revision``, ``experiment`` (mteb's experiment
    name, or None), ``folder``, ``model_meta`` (the facts of its ``model_meta.json`` the board shows:
    size, licence, open weights, reference, release date) and ``tasks``: per R2MED task (mteb name)
    the file's ``main_score`` and ``ndcg_at_10`` as it gives them (0-1), its ``dataset_revision``
    and ``mteb_version``, and the ``file`` (path in the repository) and its git ``blob`` id."""
    record = _load(str(path))
    for model in record["models"]:
        for task, result in model["tasks"].items():
            score = result.get("main_score")
            if task not in {t.name for t in R2MED_TASKS} or isinstance(score, bool) or \
                    not isinstance(score, (int, float)) or not 0 <= score <= 1:
                raise ValueError(f"{path}: {model['name']}: {task} is no R2MED result with a main score")
    return record


@lru_cache(maxsize=1)
def shipped_files(path: Path = MANIFEST) -> dict[str, str]:
    """The manifest shipped with the package: path under ``results/`` -> sha256."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, name = line.split("  ", 1)
        out[name] = digest
    return out


def provenance(run: dict) -> list[str]:
    """Where a run's figures are, e.g. ``R2MED/R2MED@45cbac5:results/gar/hyde/o3-mini/bm25``."""
    return [f"{REPOSITORY}@{commit}:{folder}" for commit, folder in run["files"].items()]
