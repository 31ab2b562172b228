"""Results folders are untrusted input (issue #25): a folder that claims to be published, a FIFO or
a device named like a result, JSON nested a million deep, numbers that are no scores. Each is one
warning naming the file, the rest of the board is still shown with its right values, and nothing
in a folder makes or changes a published row.

The commands run in this process within conftest's ``bounded`` (a time and a memory limit), so a
reader that blocks on a FIFO or reads /dev/zero fails the test instead of hanging the suite or
filling the machine's memory; the tests of terminal encodings run ``r2med`` in a process of its own.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from r2med_tasks.tasks.specs import R2MED_TASKS

from conftest import Forked, bounded

ROOT = Path(__file__).parent.parent
SHORTS = [t.short_name for t in R2MED_TASKS]
BIOLOGY = R2MED_TASKS[0].name  # R2MEDBiologyRetrieval
SHIPPED = ROOT / "results"


def task_result(task: str, ndcg, **metrics) -> dict:
    revision = next(t.revision for t in R2MED_TASKS if t.name == task)
    return {"dataset_revision": revision, "task_name": task, "mteb_version": "2.0", "evaluation_time": 1.0,
            "scores": {"test": [{"main_score": ndcg, "ndcg_at_10": ndcg, **metrics, "hf_subset": "default",
                                 "languages": ["eng-Latn"]}]}}


def write_system(folder: Path, name: str, ndcg: float, *, skip: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for task in R2MED_TASKS:
        if task.name != skip:
            (folder / f"{task.name}.json").write_text(json.dumps(task_result(task.name, ndcg)))
    (folder / "model_meta.json").write_text(json.dumps({"name": name, "revision": folder.name}))
    return folder


def r2med_here(*args) -> tuple[int, str, str]:
    """``r2med ARGS`` in this process, with the built-in plugins only, within ``bounded``'s limits."""
    from r2med_tasks.cli import cli
    from r2med_tasks.running import discovery as plugins_module

    with pytest.MonkeyPatch.context() as mp, bounded():
        mp.setenv("R2MED_LOAD_PLUGINS", "")
        mp.delenv("R2MED_PLUGINS", raising=False)
        mp.setattr(plugins_module, "_plugins", None)
        result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def board(results: Path, *args) -> tuple[list[dict], list[str]]:
    code, out, err = r2med_here("leaderboard", results, "--format", "json", *args)
    assert code == 0, err
    return json.loads(out), [line for line in err.splitlines() if line.strip()]


# --- what each hostile folder holds ------------------------------------------------------------------------

EVIL = Path("evil__x") / "v1"  # a system of seven good results at 0.50 and one hostile file (Biology's)


def evil_system(results: Path) -> Path:
    return write_system(results / EVIL, "evil/x", 0.5, skip=BIOLOGY)


def hostile_result(content):
    """Biology's TaskResult is ``content`` (a dict: JSON; bytes; a callable making the file)."""
    def setup(results: Path) -> Path:
        path = evil_system(results) / f"{BIOLOGY}.json"
        if callable(content):
            content(path)
        else:
            path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
        return path
    return setup


def hostile_file(name: str, make):
    """An evil system with all eight results, whose ``name`` (model_meta.json, r2med/pipeline.json) ``make`` makes."""
    def setup(results: Path) -> Path:
        folder = write_system(results / EVIL, "evil/x", 0.5)
        path = folder / name
        path.parent.mkdir(exist_ok=True)
        path.unlink(missing_ok=True)
        make(path)
        return path
    return setup


def nested(path: Path) -> None:  # 1 MB of JSON nested 500,000 deep
    depth = 500_000
    path.write_text(f'{{"task_name": "{BIOLOGY}", "scores": {"[" * depth}0{"]" * depth}}}')


def sparse(size: int):
    def make(path: Path) -> None:
        with path.open("wb") as f:
            f.truncate(size)
    return make


def forged(system: str, ndcg: float, folder_name: str | None = None):
    """A folder claiming to be a published leaderboard row, with its figures."""
    def setup(results: Path) -> Path:
        folder = write_system(results / f"r2med-leaderboard__{folder_name or system}" / "published",
                              f"r2med-leaderboard/{folder_name or system}", ndcg)
        (folder / "r2med").mkdir()
        (folder / "r2med" / "pipeline.json").write_text(json.dumps(
            {"name": system, "published": {"kind": "leaderboard", "average": ndcg * 100, "source": "published"}}))
        return folder
    return setup


def tampered(results: Path) -> Path:
    """The shipped copy of BM25's published results, Biology's nDCG@10 changed from 0.19188 to 0.99188."""
    folder = results / "r2med-leaderboard__BM25" / "published"
    shutil.copytree(SHIPPED / "r2med-leaderboard__BM25" / "published", folder)
    path = folder / f"{BIOLOGY}.json"
    path.write_text(path.read_text().replace('"main_score": 0.19188', '"main_score": 0.99188'))
    return folder


# case: (setup -> the file or folder the warning names, what the warning says, Biology of the evil system)
CASES = {
    "forged published row with 99.00s": (forged("BGE-Reasoner-Embed-0928", 0.99), "claims to be a published row", None),
    "invented system claiming to be published": (forged("TotallyOfficial-9000", 0.6), "claims to be a published row",
                                                 None),
    "shipped copy tampered with": (tampered, "is not the shipped record; shown as a run", None),
    "FIFO named like a result": (hostile_result(os.mkfifo), "a named pipe (FIFO), not a regular file", None),
    "symlink to /dev/zero": (hostile_result(lambda p: p.symlink_to("/dev/zero")), "a device, not a regular file",
                             None),
    "result over 10 MB": (hostile_result(sparse(11 << 20)), "over the 10,485,760-byte limit", None),
    "1 MB of deeply nested JSON": (hostile_result(nested), "JSON nested deeper than 32 levels", None),
    "1e308 metric": (hostile_result(task_result(BIOLOGY, 0.5, recall_at_100=1e308)),
                     "recall_at_100 1e+308 not a score between 0 and 1; left out", 50.0),
    "main_score true": (hostile_result(task_result(BIOLOGY, True)), "nDCG@10 True is not a number (a bool)", None),
    "main_score a string": (hostile_result(task_result(BIOLOGY, "0.9")), "nDCG@10 '0.9' is not a number (a str)",
                            None),
    "main_score NaN": (hostile_result(json.dumps(task_result(BIOLOGY, float("nan"))).encode()),
                       "nDCG@10 nan is not a score between 0 and 1", None),
    "main_score a 400-digit integer": (hostile_result(json.dumps(task_result(BIOLOGY, 10 ** 400)).encode()),
                                       "is not a score between 0 and 1", None),
    "main_score missing": (hostile_result({"task_name": BIOLOGY, "scores": {"test": [{}]}}),
                           "no scores.test[0].main_score", None),
    "task_name a list": (hostile_result({"task_name": [BIOLOGY], "scores": {"test": [{"main_score": 0.5}]}}),
                         "no task_name", None),
    "record a FIFO": (hostile_file("r2med/pipeline.json", os.mkfifo), "a named pipe (FIFO), not a regular file; "
                                                                      "not read", 50.0),
    "model_meta.json a symlink to /dev/zero": (hostile_file("model_meta.json", lambda p: p.symlink_to("/dev/zero")),
                                               "a device, not a regular file; not read", 50.0),
}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """The board of a results folder holding one good system (40.00 on every dataset)."""
    results = tmp_path_factory.mktemp("baseline") / "results"
    write_system(results / "acme__good" / "v1", "acme/good", 0.4)
    rows, warnings = board(results)
    assert warnings == []
    return rows


def without_rank(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "rank"}


def shown(row: dict) -> dict:
    """A row as ranked, but where its folder lies."""
    return {k: v for k, v in row.items() if k not in ("source", "provenance") or row["kind"] != "run"}


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_folder_is_one_warning_and_the_board_is_still_right(case, baseline, tmp_path):
    setup, says, evil_biology = CASES[case]
    results = tmp_path / "results"
    write_system(results / "acme__good" / "v1", "acme/good", 0.4)
    named = setup(results)
    rows, warnings = board(results)
    assert len(warnings) == 1 and str(named) in warnings[0] and says in warnings[0], warnings
    # the other rows, with their right values; the published rows are the package's, unchanged
    good = next(r for r in rows if r["system"] == "acme/good")
    assert good["average"] == 40.0 and [good[s] for s in SHORTS] == [40.0] * 8
    published = {r["system"]: without_rank(r) for r in rows if r["kind"] != "run"}
    assert published == {r["system"]: without_rank(r) for r in baseline if r["kind"] != "run"}
    runs = [r for r in rows if r["kind"] == "run" and r["system"] != "acme/good"]
    if case.startswith(("forged", "invented", "shipped copy")):  # shown as a run, never as a published row
        (run,) = runs
        system = {"forged published row with 99.00s": "BGE-Reasoner-Embed-0928",
                  "invented system claiming to be published": "TotallyOfficial-9000",
                  "shipped copy tampered with": "BM25"}[case]
        assert run["system"] == system and "claims to be a published row" in run["source"]
        if system == "BM25":
            assert run["Biology"] == 99.19 and run["Bioinformatics"] == next(
                r for r in baseline if r["system"] == "BM25")["Bioinformatics"]
        else:
            assert [run[s] for s in SHORTS] == [99.0 if "99" in case else 60.0] * 8
        return
    (evil,) = runs
    assert evil["system"] == "evil/x"  # (model_meta.json unread: the folder names it)
    assert evil["Biology"] == evil_biology and [evil[s] for s in SHORTS[1:]] == [50.0] * 7


def test_a_copy_of_the_shipped_results_adds_nothing_and_warns_nothing(tmp_path, baseline):
    results = tmp_path / "results"
    write_system(results / "acme__good" / "v1", "acme/good", 0.4)
    for system in ("r2med-leaderboard__BM25", "r2med-repository__LameR_GPT4o_BM25",
                   "r2med-leaderboard__BGE-Reasoner-Embed-0928"):
        shutil.copytree(SHIPPED / system, results / system)
    rows, warnings = board(results)
    assert warnings == [] and [shown(r) for r in rows] == [shown(r) for r in baseline]
    rows, warnings = board(results, "--published", "none")
    assert warnings == [] and [r["system"] for r in rows] == ["acme/good"]


def test_the_repository_board_prints_no_warning(plugins, monkeypatch):
    """./results of the repository holds the shipped copies of every published run."""
    import r2med_tasks as r2med

    monkeypatch.chdir(ROOT)
    # + 2: other papers' runs; + 26: MTEB's R2MED results, as the package records them
    for which, count in (("leaderboard", 69), ("all", 69 + 28 + 18 + 26), ("none", 0)):
        shown = r2med.rank_systems(published=which)
        assert shown.warnings == [] and len(shown.rows) == count, (which, shown.warnings)


def test_html_with_a_1e308_metric(run_cli, tmp_path):
    results = tmp_path / "results"
    folder = write_system(results / "acme__good" / "v1", "acme/good", 0.4)
    (folder / f"{BIOLOGY}.json").write_text(json.dumps(task_result(BIOLOGY, 0.4, recall_at_100=1e308, map_at_10=0.3)))
    code, page, err = run_cli("leaderboard", results, "--format", "html", "--no-published")
    assert code == 0, err
    assert len(err.strip().splitlines()) == 1 and f"{folder / BIOLOGY}.json: recall_at_100 1e+308" in err
    data = json.loads(page.split('<script type="application/json" id="data">')[1].split("</script>")[0])
    (system,) = data["systems"].values()
    assert system["metrics"]["Biology"] == {"map_at_10": 30.0, "ndcg_at_10": 40.0}  # the metric left out


def test_markdown_shows_link_and_image_syntax_as_text(run_cli, tmp_path):
    markdown_it = pytest.importorskip("markdown_it")
    names = ["[click](http://evil)", "![x](http://evil/img)", "<http://evil>", "*em* _em_ `code` ~~del~~"]
    for i, name in enumerate(names):
        write_system(tmp_path / "results" / f"evil__{i}" / "v1", name, 0.3 + i / 100)
    code, out, err = run_cli("leaderboard", tmp_path / "results", "--no-published", "--format", "markdown")
    assert code == 0, err
    html = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(out)
    assert "<a " not in html and "<img" not in html and "<em>" not in html and "<code>" not in html
    assert "<s>" not in html
    for name in names:  # shown as the text it is
        assert f"<td>{name.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')}</td>" in html


def test_compare_refuses_a_query_that_appears_twice(run_cli, tmp_path):
    for run, lines in (("a", ["q1\t0.2", "q2\t0.4"]), ("b", ["q1\t0.3", "q2\t0.5", "q1\t0.9"])):
        (tmp_path / run).mkdir()
        (tmp_path / run / f"{BIOLOGY}.per_query.tsv").write_text("query_id\tndcg_at_10\n" + "\n".join(lines) + "\n")
    code, out, err = run_cli("compare", tmp_path / "a", tmp_path / "b", "--allow-different-data")
    assert code == 2 and out == "", out
    assert err.strip().splitlines() == [
        f"Error: {tmp_path / 'b' / BIOLOGY}.per_query.tsv:4: query 'q1' appears twice (first on line 2); a query "
        "has one value: pass a results folder written by r2med-run"]


def test_compare_refuses_a_per_query_file_that_is_a_fifo(tmp_path):
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
    (tmp_path / "a" / f"{BIOLOGY}.per_query.tsv").write_text("query_id\tndcg_at_10\nq1\t0.2\n")
    os.mkfifo(tmp_path / "b" / f"{BIOLOGY}.per_query.tsv")
    code, _, err = r2med_here("compare", tmp_path / "a", tmp_path / "b")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "per_query.tsv: a named pipe (FIFO), not a regular file" in err


def test_export_refuses_list_valued_experiment_kwargs_in_one_line(run_cli, tmp_path):
    folder = write_system(tmp_path / "run", "acme/good", 0.4)
    (folder / "model_meta.json").write_text(json.dumps({"name": "acme/good", "revision": "v1",
                                                        "experiment_kwargs": ["b", 0.9]}))
    code, _, err = run_cli("export-mteb", folder, tmp_path / "repo")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{folder / 'model_meta.json'}: experiment_kwargs is a list, not an object of options" in err
    assert not (tmp_path / "repo").exists()  # nothing written


def test_export_refuses_a_result_that_is_a_fifo(tmp_path):
    folder = write_system(tmp_path / "run", "acme/good", 0.4, skip=BIOLOGY)
    os.mkfifo(folder / f"{BIOLOGY}.json")
    code, _, err = r2med_here("export-mteb", folder, tmp_path / "repo")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{BIOLOGY}.json: a named pipe (FIFO), not a regular file" in err


@pytest.mark.process  # the terminal's encoding is the process's
@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_the_leaderboard_degrades_on_a_terminal_that_cannot_show_every_character(tmp_path, encoding):
    results = tmp_path / "results"
    write_system(results / "acme__fused" / "v1", "acme/bm25 ⊕ e5 (RRF)", 0.4)
    (results / "acme__fused" / "v1" / "bad⊕.json").write_text("{")  # a warning naming a file with ⊕
    for fmt in ("table", "markdown"):  # a process of its own: its streams have the encoding, as PYTHONIOENCODING gives them
        done = Forked(["leaderboard", results, "--format", fmt], stdout=subprocess.PIPE, encoding=encoding,
                      env={"R2MED_LOAD_PLUGINS": "", "R2MED_PLUGINS": None})
        stdout, stderr = done.communicate(60)
        assert done.returncode == 0 and "Traceback" not in stderr, stderr
        assert b"acme/bm25 ? e5 (RRF)" in stdout or b"acme/bm25 ? e5 \\(RRF\\)" in stdout
        assert len(stderr.strip().splitlines()) == 1 and "bad" in stderr
