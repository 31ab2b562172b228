"""The authors' complete published record: shipped as data, checked against their own files, shown
by `r2med leaderboard --published`, and as mteb results.

The authors' files (R2MED/R2MED at 45cbac5 and 62b7074) are optional test material under
``../shared/reference/r2med-repo/`` beside the repository; the tests that need them skip without them.
"""

import json
import shutil
from pathlib import Path

import pytest

from r2med_tasks.board.published import DATA, PUBLISHED_CSV
from r2med_tasks.tasks.specs import R2MED_TASKS

ROOT = Path(__file__).parents[1]
AUTHORS = ROOT.parent / "shared" / "reference" / "r2med-repo"
needs_authors = pytest.mark.skipif(not (AUTHORS / "45cbac5" / "results").is_dir(),
                                   reason="the authors' repository snapshots (../shared/reference/r2med-repo) are absent")

SHIPPED = json.loads(DATA.read_text(encoding="utf-8"))
RUNS = SHIPPED["runs"]


def board(**options):
    """The leaderboard (of ./results when it exists), its rows as ``--format json`` writes them."""
    import r2med_tasks as r2med

    return r2med.rank_systems(**options).records()


def test_the_record_holds_every_run_once():
    ids = [r["id"] for r in RUNS]
    names = [r["name"] for r in RUNS]
    assert len(ids) == len(set(ids)) == len(set(names)) == 78
    kinds = {k: [r for r in RUNS if r["kind"] == k] for k in ("leaderboard", "repository")}
    assert len(kinds["leaderboard"]) == 50 and len(kinds["repository"]) == 28
    # Only at 45cbac5: deleted later.
    only_first = sorted(r["id"] for r in RUNS if list(r["files"]) == ["45cbac5"])
    assert only_first == ["gar/hyde/o3-mini/bge", "gar/hyde/o3-mini/bm25", "gar/hyde/o3-mini/nv",
                          "gar/search-r1/qwen-3b-ins/bm25", "reranker/bge-reranker/nv/top_100",
                          "reranker/monobert/nv/top_100", "reranker/rankllama/nv/top_100"]
    for run in RUNS:
        assert set(run["metrics"]) == {t.short_name for t in R2MED_TASKS}
        assert all("ndcg_at_10" in m for m in run["metrics"].values())


def test_medcpt_ships_the_repository_values_beside_the_leaderboards():
    medcpt = next(r for r in RUNS if r["id"] == "base retriever/medcpt")
    assert medcpt["kind"] == "repository" and medcpt["name"] == "MedCPT (repository)"
    from r2med_tasks.scoring.evaluation import leaderboard_average, leaderboard_value

    values = [leaderboard_value(medcpt["metrics"][t.short_name]["ndcg_at_10"]) for t in R2MED_TASKS]
    assert leaderboard_average(values) == 7.87
    with PUBLISHED_CSV.open(encoding="utf-8") as f:
        import csv

        row = next(r for r in csv.DictReader(f) if r["name"] == "MedCPT")
    assert row["avg"] == "9.02" and row["repo_results_status"] == "differs_from_repo_results"


def test_provenance_of_the_runs_deleted_later_is_the_first_commit():
    import csv

    with PUBLISHED_CSV.open(encoding="utf-8") as f:
        status = {r["name"]: r["repo_results_status"] for r in csv.DictReader(f)}
    for name in ("o3-mini + NV-Embed-v2", "o3-mini + BM25", "o3-mini + BGE-Large-en-v1.5",
                 "Search-R1 (Qwen2.5-3b-it-em-ppo) + BM25"):
        assert status[name] == "matches_repo_results"
        assert list(next(r for r in RUNS if r["name"] == name)["files"]) == ["45cbac5"]


# --- every shipped number against the authors' files, read here without the build code ---------------

# The authors' file names at either commit -> the leaderboard's dataset names.
AUTHOR_FILES = {"Stack-Biology": "Biology", "Stack-Bioinformatics": "Bioinformatics", "Stack-Medical": "Medical-Sciences",
                "PMCPatients": "PMC-Clinical", "PMC-Treat": "PMC-Treatment", "IIYiPatients-EN": "IIYi-Clinical",
                "MedXpertQA-Exam": "MedXpertQA-Exam", "MedQA-Diag": "MedQA-Diag", "Biology": "Biology",
                "Bioinformatics": "Bioinformatics", "Medical-Sciences": "Medical-Sciences",
                "PMC-Clinical": "PMC-Clinical", "PMC-Treatment": "PMC-Treatment", "IIYi-Clinical": "IIYi-Clinical"}


def mteb_metric(key: str) -> str:
    if key in ("MRR", "mrr"):
        return "mrr"
    if "@" in key:
        family, k = key.split("@")
        return {"MAP": "map", "NDCG": "ndcg", "P": "precision", "Recall": "recall"}[family] + f"_at_{k}"
    return key  # already map_at_10 etc.


def authors_files() -> dict[tuple[str, str], dict]:
    """{(commit, folder under results/): {dataset: {metric: value}}} for the eight R2MED datasets."""
    found = {}
    for commit in ("45cbac5", "62b7074"):
        for path in (AUTHORS / commit / "results").rglob("*.json"):
            if path.stem == "BEIR_NFCorpus":
                continue
            folder = "results/" + path.parent.relative_to(AUTHORS / commit / "results").as_posix()
            found.setdefault((commit, folder), {})[AUTHOR_FILES[path.stem]] = {
                mteb_metric(k): v for k, v in json.loads(path.read_text())["test"].items()}
    return found


@needs_authors
def test_every_shipped_number_is_the_authors():
    files = authors_files()
    covered = set()
    for run in RUNS:
        for commit, folder in run["files"].items():
            assert run["metrics"] == files[(commit, folder)], (run["id"], commit)
            covered.add((commit, folder))
    assert covered == set(files)  # every file of both commits is in the record
    assert len(files) == 78 + 71 and sum(len(m) for m in files.values()) == (78 + 71) * 8


@needs_authors
def test_every_shipped_mteb_result_is_the_authors_or_the_leaderboards():
    """Each TaskResult under results/r2med-*__*/published/: its metrics are one of the authors'
    files (every provenance entry agrees), or, for a leaderboard row absent from their repository,
    nDCG@10 as the leaderboard prints it."""
    import csv

    files = authors_files()
    with PUBLISHED_CSV.open(encoding="utf-8") as f:
        board_rows = {r["name"]: r for r in csv.DictReader(f)}
    short = {t.name: t.short_name for t in R2MED_TASKS}
    folders = sorted(ROOT.glob("results/r2med-*__*/published"))
    assert len(folders) == 69 + 28
    for folder in folders:
        record = json.loads((folder / "r2med" / "pipeline.json").read_text())
        sources = [p.split("@", 1)[1].split(":", 1) for p in record["published"]["provenance"] if p.startswith("R2MED/R2MED@")]
        for path in folder.glob("R2MED*.json"):
            data = json.loads(path.read_text())
            scores = {k: v for k, v in data["scores"]["test"][0].items()
                      if k not in ("main_score", "hf_subset", "languages", "mteb_version")}  # the metrics
            task = short[data["task_name"]]
            assert data["scores"]["test"][0]["main_score"] == scores["ndcg_at_10"]
            if sources:
                for commit, where in sources:
                    assert scores == files[(commit, where)][task], (path, commit)
            else:
                assert list(scores) == ["ndcg_at_10"]
                assert round(scores["ndcg_at_10"] * 100, 2) == float(board_rows[record["name"]][task]), path


@needs_authors
def test_the_shipped_record_and_csv_status_regenerate(plugins):
    from tools.published_record import build, dumps

    record, csv_text = build(AUTHORS, PUBLISHED_CSV.read_text(encoding="utf-8"))
    assert dumps(record) == DATA.read_text(encoding="utf-8")
    assert csv_text == PUBLISHED_CSV.read_text(encoding="utf-8")


# --- the commands -------------------------------------------------------------------------------------

@pytest.mark.parametrize("run", RUNS, ids=[r["id"] for r in RUNS])
def test_every_shipped_command_dry_runs(run, plugins, tmp_path):
    from conftest import dry_run_plan

    plan = dry_run_plan(run["command"], tmp_path)
    assert len(plan["tasks"]) == 8
    if run["kind"] == "leaderboard":
        assert plan["pipeline"] == run["name"]
    else:
        assert run["name"].startswith(plan["pipeline"])


def test_leaderboard_rows_commands_are_the_csvs():
    import csv

    with PUBLISHED_CSV.open(encoding="utf-8") as f:
        commands = {r["name"]: r["command"] for r in csv.DictReader(f)}
    for run in RUNS:
        if run["kind"] == "leaderboard":
            assert run["command"] == commands[run["name"]]


# --- r2med leaderboard --published -----------------------------------------------------------------------

def test_published_choices(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    default = board()
    assert len(default) == 69 and {r["kind"] for r in default} == {"leaderboard"}
    assert board(published="leaderboard") == default
    every = board(published="all")
    # and the runs of other papers (ReasonEmbed's, InsertRank's, GroupRank's 11, ReasonRank's 5: test_frontier_rows.py),
    # and MTEB's R2MED results (tests/test_mteb_record.py)
    assert len(every) == 69 + 28 + 18 + 26
    repository = [r for r in every if r["kind"] == "repository"]
    assert {r["system"] for r in repository} == {r["name"] for r in RUNS if r["kind"] == "repository"}
    papers = {r["system"]: r for r in every if r["kind"] == "paper"}
    assert {"Qwen3-Embedding-8B (ReasonEmbed paper)", "BM25 + InsertRank(DeepSeek-R1) (InsertRank paper)"} < set(papers)
    assert papers["Qwen3-Embedding-8B (ReasonEmbed paper)"]["average"] == 34.22
    medcpt = next(r for r in every if r["system"] == "MedCPT (repository)")
    assert medcpt["average"] == 7.87 and medcpt["provenance"] == [
        "R2MED/R2MED@45cbac5:results/base retriever/medcpt", "R2MED/R2MED@62b7074:results/base retriever/medcpt"]
    o3 = next(r for r in every if r["system"] == "o3-mini + BM25")
    assert o3["kind"] == "leaderboard" and o3["provenance"][1:] == ["R2MED/R2MED@45cbac5:results/gar/hyde/o3-mini/bm25"]
    assert board(published="none") == []
    code, out, err = run_cli("leaderboard", "--no-published", "--format", "json")
    assert code == 0 and json.loads(out) == [], err
    code, _, err = run_cli("leaderboard", "--no-published", "--published", "all")
    assert code == 2 and "--no-published contradicts --published all" in err


def test_shipped_folders_follow_the_published_choice(plugins, monkeypatch):
    monkeypatch.chdir(ROOT)  # ./results holds every published run as mteb results
    assert len(board()) == 69
    assert len(board(published="all")) == 69 + 28 + 18 + 26  # + MTEB's R2MED results
    assert board(published="none") == []


# --- as mteb results ------------------------------------------------------------------------------------

def test_shipped_mteb_results_regenerate_and_load(tmp_path, monkeypatch):
    import os

    import mteb

    from tools.published_results import manifest_text, write_published

    monkeypatch.setattr(os, "fsync", lambda fd: None)  # ~900 small files to a temporary folder: no need to sync
    written = write_published(tmp_path / "results")
    shipped = ROOT / "results"
    for path in written:
        assert (shipped / path.relative_to(tmp_path / "results")).read_text() == path.read_text(), path
    generated = {p.relative_to(tmp_path / "results") for p in written}
    on_disk = {p.relative_to(shipped) for p in shipped.glob("r2med-*__*/**/*") if p.is_file()}
    assert on_disk == generated  # nothing stale
    # the package's manifest of them, which tells the shipped copy from a folder claiming to be published
    from r2med_tasks.board.published import MANIFEST

    assert MANIFEST.read_text(encoding="utf-8") == manifest_text(tmp_path / "results", written)
    loaded = mteb.ResultCache(tmp_path).load_results(include_remote=False)
    by_name = {m.model_name: m for m in loaded.model_results}
    assert len(by_name) == 69 + 28  # the other paper's run is the package's data only (not under results/)
    lamer = by_name["r2med-repository/LameR_GPT4o_BM25"]
    run = next(r for r in RUNS if r["id"] == "gar/lamer/gpt4/bm25")
    for result in lamer.task_results:
        scores = result.scores["test"][0]
        short = next(t.short_name for t in R2MED_TASKS if t.name == result.task_name)
        assert scores["recall_at_100"] == run["metrics"][short]["recall_at_100"]
        assert scores["mrr"] == run["metrics"][short]["mrr"]


def test_published_results_record_the_data_they_used(tmp_path):
    """mteb's pinned revision for seven datasets; Medical-Sciences, updated on the hub after the
    published runs, says it predates the pinned revision, but for the ReasonEmbed paper's run
    (October 2025, on the updated data); and the rows stay official."""
    from r2med_tasks.board.sources import result_rows

    pinned = {t.name: t.revision for t in R2MED_TASKS}
    after = 0
    for path in (ROOT / "results").glob("r2med-*__*/published/R2MED*.json"):
        data = json.loads(path.read_text())
        record = json.loads((path.parent / "r2med" / "pipeline.json").read_text())
        if "arXiv 2510.08252" in record["published"]["provenance"][0]:
            assert data["dataset_revision"] == pinned[data["task_name"]]
            after += 1
        elif data["task_name"] == "R2MEDMedicalSciencesRetrieval":
            assert data["dataset_revision"] == "before-" + pinned[data["task_name"]]
        else:
            assert data["dataset_revision"] == pinned[data["task_name"]]
    assert after == 8  # BGE-Reasoner-Embed-0928's eight datasets
    warnings, shipped = [], []
    copy = tmp_path / "results"  # the shipped folders only: never the checkout's own runs (a user's results/)
    for folder in (ROOT / "results").glob("r2med-*__*"):
        shutil.copytree(folder, copy / folder.name)
    rows = result_rows(copy, warnings.append, shipped=shipped)
    # the shipped copies: their rows are the package's (published_rows), read from no folder
    assert not warnings and rows == [] and len(shipped) == 69 + 28


# --- the docs ---------------------------------------------------------------------------------------------

def test_reproducing_lists_every_published_run():
    """docs/reproducing.md's table is generated from the shipped data: one line per published run,
    with its command (dry-run above) and any known difference."""
    from tools.runs_table import TABLE_END, TABLE_START, runs_table

    text = (ROOT / "docs" / "reproducing.md").read_text(encoding="utf-8")
    start, end = text.index(TABLE_START), text.index(TABLE_END) + len(TABLE_END) + 1
    assert text[start:end] == runs_table()
    assert text[start:end].count("\n| ") == 1 + 69 + 28 + 18
    assert "Rows marked \"(*)\"" in text[:start]  # the note the marked rows refer to


def test_no_page_or_module_cites_files_outside_the_repository():
    """Material outside the repository is named as such (../shared/…, optional), never cited as if
    it were a file here."""
    import re

    outside = re.compile(r"r2med_published_ndcg10\.csv|r2med-spec\.md|mteb-notes|/work/shared")
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "r2med_tasks").rglob("*.py"),
             *(ROOT / "plugins").rglob("*.py"), *(ROOT / "tools").rglob("*.py"), *(ROOT / "tests").glob("*.py")]
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in pages if p.name != "test_published.py"
             for m in outside.finditer(p.read_text(encoding="utf-8"))]
    assert found == []


def test_a_run_joins_the_repository_run_it_reproduces(plugins):
    """With --published all, a run of a repository run's command on official data is that row,
    including a setting named in parentheses (top 100 reranked)."""
    from r2med_tasks.board.leaderboard import merge
    from r2med_tasks.board.sources import Row, command_config, published_rows

    def run(command, name):
        return Row(name, scores={t.name: 1.0 for t in R2MED_TASKS}, key=(name, "rev", None, False),
                   config=command_config(command), display_name=name.split(" (")[0])

    rows = merge([*published_rows(which="all"),
                  run("r2med-run --plugin nvembed --plugin monobert -o rerank_k=100",
                      "NV-Embed-v2 + monoBERT (monobert.rerank_k=100)"),
                  run("r2med-run --plugin lamer -o source=gpt4 --plugin bm25", "LameR (GPT4o) + BM25"),
                  run("r2med-run --plugin nvembed --plugin monobert -o rerank_k=20",
                      "NV-Embed-v2 + monoBERT (monobert.rerank_k=20)")])
    assert len(rows) == 69 + 28 + 18 + 1  # the other papers' runs; the rerank_k=20 run is a row of its own
    top100 = next(r for r in rows if r.system == "NV-Embed-v2 + monoBERT (rerank_k=100)")
    lamer = next(r for r in rows if r.system == "LameR (GPT4o) + BM25")
    assert top100.notes and lamer.notes  # joined, and their numbers differ from the published ones
