"""`r2med leaderboard`: the published table recomputed exactly, runs merged at their rank, bad
files skipped with one line."""

import csv
import json
from pathlib import Path

import pytest

from r2med_tasks.leaderboard import PUBLISHED_CSV
from r2med_tasks.tasks import R2MED_TASKS


def published():
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def board(run_cli, *args):
    code, out, err = run_cli("leaderboard", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out), err


def test_published_ranks_and_averages_reproduced(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./results here
    rows, _ = board(run_cli)
    expected = published()
    assert len(rows) == len(expected) == 69
    for row, record in zip(rows, expected):
        assert (row["rank"], row["system"]) == (int(record["rank"]), record["name"])
        assert row["average"] == float(record["avg"])  # computed from the eight values (but BGE-Reasoner's)


PUBLISHED_WITH_COMMANDS = [r for r in published() if r["command"]]


def test_every_published_row_but_the_external_one_has_a_command(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert [r["name"] for r in published() if not r["command"]] == ["BGE-Reasoner-Embed-0928"]  # external, average only
    rows, _ = board(run_cli, "--commands")
    assert [(r["system"], r["command"] or "") for r in rows] == [(r["name"], r["command"]) for r in published()]
    assert set(rows[0]) == {"rank", "system", "average", "command", "local_data"}


@pytest.mark.parametrize("record", PUBLISHED_WITH_COMMANDS, ids=[r["name"] for r in PUBLISHED_WITH_COMMANDS])
def test_a_published_command_builds_the_row_it_names(record, plugins, tmp_path):
    """Dry-run the command: its pipeline carries the row's name, so its results merge with the row."""
    from conftest import dry_run_plan

    plan = dry_run_plan(record["command"], tmp_path)
    assert plan["pipeline"] == record["name"] and len(plan["tasks"]) == 8


def test_a_folder_without_r2med_results_is_named(run_cli, tmp_path):
    code, out, err = run_cli("run", "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path / "res")
    assert code == 0
    rows, err = board(run_cli, "--no-published", str(tmp_path / "res"))
    assert rows == [] and "res: no results of R2MED tasks (runs on other tasks, such as sample, are not ranked)" in err


def write_result(folder: Path, task: str, ndcg: float, name: str) -> None:
    """A TaskResult on R2MED's official data (mteb's pinned revision)."""
    folder.mkdir(parents=True, exist_ok=True)
    revision = next(t.revision for t in R2MED_TASKS if t.name == task)
    (folder / f"{task}.json").write_text(json.dumps({
        "dataset_revision": revision, "task_name": task, "mteb_version": "2.0", "evaluation_time": 1.0,
        "scores": {"test": [{"main_score": ndcg, "ndcg_at_10": ndcg, "hf_subset": "default", "languages": ["eng-Latn"]}]}}))
    (folder / "model_meta.json").write_text(json.dumps({"name": name, "revision": folder.name}))


def test_a_run_lands_at_its_rank_and_incomplete_ones_after(run_cli, tmp_path):
    results = tmp_path / "results"
    for task in R2MED_TASKS:  # 0.3315 on every dataset -> 33.15 average: between 33.29 and 33.12
        write_result(results / "acme__ranker" / "v1", task.name, 0.3315, "acme/ranker")
    write_result(results / "acme__partial" / "v1", R2MED_TASKS[0].name, 0.99, "acme/partial")
    (results / "acme__ranker" / "v1" / "notes.json").write_text("{not json")  # a foreign file
    rows, err = board(run_cli, str(results))
    names = [r["system"] for r in rows]
    i = names.index("acme/ranker")
    assert rows[i]["average"] == 33.15
    assert rows[i - 1]["average"] >= 33.15 >= rows[i + 1]["average"]
    assert names[-1] == "acme/partial" and "(incomplete)" in rows[-1]["source"]
    assert "notes.json: not an mteb TaskResult" in err and len(err.strip().splitlines()) == 1


def test_results_written_by_r2med_run_merge(run_cli, tmp_path, data_dir):
    """A fresh r2med-run result (here: bm25 on three R2MED-named folders) appears under its name."""
    code, _, err = run_cli("run", "--plugin", "bm25", "--data-dir", data_dir, "--output", tmp_path / "res",
                           "--cache-dir", tmp_path / "c")
    assert code == 0, err
    rows, _ = board(run_cli, str(tmp_path / "res"), "--no-published", "--include-local")
    (row,) = rows
    assert row["system"] == "BM25" and row["average"] is None and row["Biology"] is not None
    assert row["local_data"] is True


def test_filters_and_formats(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows, _ = board(run_cli, "--retriever", "bm25", "--top", "3")
    assert [r["system"] for r in rows] == ["o3-mini + BM25", "GPT4o + BM25", "Search-O1 (QwQ-32b) + BM25"]
    rows, _ = board(run_cli, "--tasks", "clinical-case", "--top", "1")
    assert set(rows[0]) >= {"PMC-Clinical", "IIYi-Clinical"} and "Biology" not in rows[0]
    code, out, _ = run_cli("leaderboard", "--format", "markdown", "--top", "2")
    assert out.splitlines()[2].startswith("| 1 | BGE-Reasoner-Embed-0928 |")
    code, _, _ = run_cli("leaderboard", "--format", "csv", "--output", tmp_path / "board.csv")
    assert (tmp_path / "board.csv").read_text().splitlines()[0].startswith("Rank,System,")


def test_group_ranks_by_its_own_average(run_cli, tmp_path, monkeypatch):
    from r2med_tasks.evaluation import leaderboard_average

    monkeypatch.chdir(tmp_path)
    rows, _ = board(run_cli, "--tasks", "clinical-case")
    expected = sorted((r for r in published() if r["PMC-Clinical"]),
                      key=lambda r: -leaderboard_average([float(r["PMC-Clinical"]), float(r["IIYi-Clinical"])]))
    assert [r["system"] for r in rows[:5]] == [r["name"] for r in expected[:5]]


def test_compare_two_runs(run_cli, tmp_path, data_dir):
    """Differences and p-values from the per-query files, checked against the significance module
    fed the same numbers read independently."""
    from r2med_tasks.significance import compare

    folders = []
    for options in ([], ["-o", "k1=2.0", "-o", "b=0.9"]):
        code, out, err = run_cli("run", "--plugin", "bm25", *options, "--data-dir", data_dir, "--output",
                                 tmp_path / "res", "--cache-dir", tmp_path / "c", "--json")
        assert code == 0, err
        folders.append(Path(json.loads(out)["results_dir"]))
    code, out, err = run_cli("compare", *map(str, folders), "--json", "--trials", "2000")
    assert code == 0, err
    result = json.loads(out)

    def read(folder):
        return {p.name.split(".")[0]: {line.split("\t")[0]: float(line.split("\t")[1])
                                       for line in p.read_text().splitlines()[1:]}
                for p in folder.glob("*.per_query.tsv")}

    a, b = read(folders[0]), read(folders[1])
    assert result == compare(a, b, trials=2000)
    for task, t in result["tasks"].items():
        assert t["difference"] == sum(b[task].values()) / len(b[task]) - sum(a[task].values()) / len(a[task])
    code, _, err = run_cli("compare", str(tmp_path), str(folders[1]))
    assert code == 2 and "no <Task>.per_query.tsv files" in err


def test_html_page_in_headless_chromium(run_cli, tmp_path):
    """The page renders in Debian's Chromium with the rows and the chart; a system named like a
    script stays text."""
    import os
    import re
    import shutil
    import subprocess

    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium for this test")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    results = tmp_path / "results"
    for task in R2MED_TASKS:
        write_result(results / "evil" / "v1", task.name, 0.5, "<script>alert(1)</script>")
    page = tmp_path / "board.html"
    code, _, err = run_cli("leaderboard", str(results), "--format", "html", "--output", str(page))
    assert code == 0, err
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120).stdout
    assert dom.count("<tr") == 1 + 70  # header + 69 published rows + ours
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # shown as text
    assert len(re.findall(r"<script", dom)) == 1  # only the page's own sorting script
    assert dom.count("<rect") == 8 * 5 and "o3-mini + BM25" in dom


def test_export_mteb(run_cli, tmp_path, model_path):
    """A run laid out for the MTEB results repository loads with mteb; what blocks a PR is listed."""
    import mteb

    code, out, err = run_cli("run", "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path / "res",
                             "--cache-dir", tmp_path / "c", "--json")
    run_dir = Path(json.loads(out)["results_dir"])
    code, out, err = run_cli("export-mteb", str(run_dir), str(tmp_path / "repo"), "--json")
    assert code == 0, err
    report = json.loads(out)
    target = Path(report["exported_to"])
    assert target == tmp_path / "repo" / "results" / "r2med__bm25" / run_dir.name
    assert sorted(p.name for p in target.iterdir()) == ["R2MEDSampleRetrieval.json", "model_meta.json"]
    assert any("'r2med/bm25' is not registered in mteb" in p for p in report["problems"])
    loaded = mteb.ResultCache(tmp_path / "repo").load_results(include_remote=False)
    assert [m.model_name for m in loaded.model_results] == ["r2med/bm25"]
    code, _, err = run_cli("export-mteb", str(tmp_path), str(tmp_path / "repo"))
    assert code == 2 and "no model_meta.json" in err


def test_shipped_published_results_are_generated_and_load_in_mteb(tmp_path):
    """results/ ships the published rows as mteb results: regenerating them from the CSV gives the
    same files, mteb loads them, and their scores give back the published values."""
    import mteb

    from r2med_tasks.evaluation import leaderboard_value
    from r2med_tasks.leaderboard import write_published

    shipped = Path(__file__).parent.parent / "results"
    written = write_published(tmp_path / "results")
    for path in written:
        assert (shipped / path.relative_to(tmp_path / "results")).read_text() == path.read_text(), path
    loaded = mteb.ResultCache(tmp_path).load_results(include_remote=False)
    by_name = {m.model_name: m for m in loaded.model_results}
    o3 = by_name["r2med-leaderboard/o3-mini_BM25"]
    values = {t.task_name: leaderboard_value(t.scores["test"][0]["main_score"]) for t in o3.task_results}
    record = next(r for r in published() if r["name"] == "o3-mini + BM25")
    assert values == {t.name: float(record[t.short_name]) for t in R2MED_TASKS}


def test_shipped_rows_are_not_counted_twice(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(Path(__file__).parent.parent)  # ./results holds the shipped published results
    rows, _ = board(run_cli)
    assert len(rows) == 69


def test_results_written_by_mteb_itself_merge(run_cli, tmp_path):
    """A folder filled by mteb's own ResultCache.save_to_cache ranks like any other."""
    import mteb
    from mteb.results import TaskResult

    cache = mteb.ResultCache(tmp_path / "cache")
    meta = mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2")
    for task in R2MED_TASKS:
        scores = {"ndcg_at_10": 0.2, "main_score": 0.2}
        cache.save_to_cache(TaskResult.from_task_results(mteb.get_task(task.name), {"test": {"default": scores}}, 1.0),
                            meta)
    rows, err = board(run_cli, str(tmp_path / "cache" / "results"))
    row = next(r for r in rows if r["system"] == "sentence-transformers/all-MiniLM-L6-v2")
    assert row["average"] == 20.0


def test_run_summary_sets_a_run_beside_its_published_row(official_hub, run_cli, tmp_path):
    """BM25 over all eight tasks of R2MED's (locally served) hub data: each value and the average
    beside BM25's published ones, with the difference."""
    args = ["run", "--plugin", "bm25", "--output", tmp_path / "out", "--cache-dir", tmp_path / "c"]
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    summary = json.loads(out)
    bm25 = next(r for r in published() if r["name"] == "BM25")
    assert [t["published_ndcg_at_10_x100"] for t in summary["tasks"]] == [float(bm25[t.short_name]) for t in R2MED_TASKS]
    assert summary["published_average_x100"] == 15.13
    code, out, _ = run_cli(*args)
    ours = summary["average_ndcg_at_10_x100"]
    assert "Published" in out and f"{ours:.2f} │     15.13 │ {ours - 15.13:+.2f}" in out
    assert "the R2MED leaderboard's row 'BM25'" in out


def test_a_pipeline_without_a_published_row_shows_no_comparison(run_cli, tmp_path):
    code, out, _ = run_cli("run", "--plugin", "bm25-okapi", "--tasks", "sample", "--output", tmp_path, "--json")
    assert all(t["published_ndcg_at_10_x100"] is None for t in json.loads(out)["tasks"])
    code, out, _ = run_cli("run", "--plugin", "bm25-okapi", "--tasks", "sample", "--output", tmp_path)
    assert "Published" not in out
