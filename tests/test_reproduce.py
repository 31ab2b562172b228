"""`r2med reproduce ROW`: a published row's command run on R2MED's data (a local stand-in of the
hub here), each figure judged against the published one with the tolerance of its kind (OK as
printed, OKish within it, FAIL beyond: exit 1), the verdicts kept for the reproduction matrix."""

import csv
import json
from pathlib import Path

import pytest

from r2med_tasks.tasks.specs import R2MED_TASKS

BOARD = Path(__file__).parent.parent / "r2med_tasks" / "data" / "leaderboard"


def published(name: str) -> dict[str, float]:
    """A row's published figures, read from the shipped leaderboard snapshot (not through the package)."""
    path = next(BOARD.glob("*.csv"))
    with path.open(encoding="utf-8", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["name"] == name)
    return {t.short_name: float(row[t.short_name]) for t in R2MED_TASKS}


def got_by_task(folder: Path) -> dict[str, float]:
    """What the run got, ×100 as the leaderboard rounds it, read from its TaskResults."""
    short = {t.name: t.short_name for t in R2MED_TASKS}
    return {short[p.stem]: round(100 * json.loads(p.read_text())["scores"]["test"][0]["main_score"], 2)
            for p in folder.glob("R2MED*.json")}


def verdict(difference: float, okish: float) -> str:
    return "OK" if abs(difference) <= 0.005 + 1e-9 else "OKish" if abs(difference) <= okish + 1e-9 else "FAIL"


def test_a_dry_run_shows_the_command_the_figures_and_the_tolerance(run_cli):
    code, out, err = run_cli("reproduce", "BM25", "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["command"] == "r2med-run --plugin bm25" and plan["verdict"] is None
    assert plan["tolerance"]["kind"] == "lexical"
    assert {c["task"]: c["expected"] for c in plan["tasks"]} == published("BM25")
    code, out, _ = run_cli("reproduce", str(plan["rank"]), "--dry-run", "--json")  # by its rank on the board
    assert code == 0 and json.loads(out)["row"] == "BM25"


def test_reproducing_bm25_judges_every_figure_and_keeps_the_verdicts(official_hub, run_cli, tmp_path):
    code, out, err = run_cli("reproduce", "BM25", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache",
                             "--json")
    result = json.loads(out)
    folder = Path(result["results_dir"])
    got, expected = got_by_task(folder), published("BM25")
    assert len(got) == 8
    for check in result["tasks"]:  # the stand-in data are not R2MED's: the verdicts follow the differences
        difference = got[check["task"]] - expected[check["task"]]
        assert check["got"] == got[check["task"]] and check["difference"] == pytest.approx(difference, abs=1e-6)
        assert check["verdict"] == verdict(difference, 0.05)
    assert result["verdict"] == "FAIL" and code == 1  # far from the published figures: exit 1
    kept = json.loads((folder / "r2med" / "reproduction.json").read_text())
    assert kept["row"] == "BM25" and kept["verdict"] == "FAIL"
    from r2med_tasks.board.verdicts import reproductions

    (matrix_row,) = reproductions([tmp_path / "out"])
    assert matrix_row["row"] == "BM25" and [c["verdict"] for c in matrix_row["tasks"]] == \
        [c["verdict"] for c in result["tasks"]]
    # the matrix in the leaderboard: its own view, and a section of the page
    code, out, err = run_cli("leaderboard", tmp_path / "out", "--reproductions", "--format", "json")
    assert code == 0 and json.loads(out) == [kept]
    code, out, err = run_cli("leaderboard", tmp_path / "out", "--reproductions", "--format", "csv")
    header, line = list(csv.reader(out.splitlines()))
    first = result["tasks"][0]
    assert line[1] == "BM25" and line[header.index(first["task"])].startswith(first["verdict"] + " ")
    code, page, err = run_cli("leaderboard", tmp_path / "out", "--format", "html")
    section = page.split('<section id="reproductions">', 1)[1].split("</section>", 1)[0]
    assert "BM25" in section and section.count("<tr>") == 2 and "verdict-fail" in section


@pytest.mark.parametrize("offset, expected", [(0.0, "OK"), (0.03, "OKish"), (-0.04, "OKish"), (0.2, "FAIL")])
def test_verdicts_against_figures_the_run_reproduces(official_hub, evaluate, tmp_path, monkeypatch, offset, expected):
    """The published figures replaced by the run's own (shifted by ``offset``): OK as printed, OKish
    within BM25's tolerance, FAIL beyond it."""
    import r2med_tasks.board.reproduce as reproduce
    from r2med_tasks.board.sources import Row

    first = evaluate("bm25", tasks="r2med", output="ref")
    mine = {o.task: round(o.ndcg_at_10_x100 + offset, 2) for o in first.tasks}
    row = Row("BM25", scores=mine, command="r2med-run --plugin bm25", kind="leaderboard")
    monkeypatch.setattr(reproduce, "published_row_of", lambda reference: (row, 1))
    from rich.console import Console

    result = reproduce.reproduce("BM25", console=Console(quiet=True), output=tmp_path / "ref",
                                 cache_dir=tmp_path / "cache")
    assert {c.verdict for c in result.tasks} == {expected} and result.verdict == expected


def test_local_data_shows_the_runs_scores_what_it_lacked_and_what_a_verdict_needs(run_cli, tmp_path, data_dir):
    code, out, err = run_cli("reproduce", "BM25", "--data-dir", data_dir, "--output", tmp_path / "out", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["verdict"] is None and not result["official_data"]
    got = got_by_task(Path(result["results_dir"]))
    assert sorted(got) == ["Bioinformatics", "Biology", "Medical-Sciences"]  # what the data folder holds
    assert {c["task"]: c["got"] for c in result["tasks"] if c["got"] is not None} == pytest.approx(got, abs=0.005)
    assert all(c["verdict"] is None and c["difference"] is None for c in result["tasks"])
    lacked = [t.short_name for t in R2MED_TASKS if t.short_name not in got]
    assert result["lacked"] == lacked and len(lacked) == 5
    assert "5 of 8 datasets" in result["note"] and "run without --data-dir" in result["note"]
    code, out, err = run_cli("reproduce", "BM25", "--data-dir", data_dir, "--output", tmp_path / "out")
    assert code == 0, err
    text = " ".join(out.split())
    assert "run without --data-dir" in text and ", ".join(lacked) in text
    biology = next(line for line in out.splitlines() if "Biology" in line and "Bioinformatics" not in line)
    assert f"{got['Biology']:.2f}" in biology  # the run's own score, in the table


def test_a_row_that_is_not_there_is_one_line(run_cli):
    code, _, err = run_cli("reproduce", "BM26", "--dry-run")
    assert code == 2 and "no published row" in err and "Traceback" not in err
    code, _, err = run_cli("reproduce", "999", "--dry-run")
    assert code == 2 and "no such rank" in err


def test_tolerances_by_kind():
    from r2med_tasks.board.reproduce import tolerance_for

    assert tolerance_for("r2med-run --plugin hyde -o source=o3-mini --plugin bm25").kind == "lexical"
    assert tolerance_for("r2med-run --plugin hyde -o source=o3-mini --plugin nvembed").kind == "neural"
    assert tolerance_for("r2med-run --plugin openai").kind == "api"
