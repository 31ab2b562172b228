"""The ReasonEmbed paper's R2MED figures (arXiv 2510.08252, Table 3): BGE-Reasoner-Embed-0928, the
leaderboard's first row, now with its per-dataset values and command, and Qwen3-Embedding-8B, a
published run of another paper (kind ``paper``), shown and filtered like the others.

The figures are typed here from the paper's Table 3 (= VectorSpaceLab/agentic-search @ b2f2e40,
``ReasonEmbed/imgs/r2med-performance.png``), independently of the shipped data.
"""

from __future__ import annotations

import csv

import pytest

from r2med_tasks.scoring.evaluation import leaderboard_average
from r2med_tasks.tasks.specs import R2MED_TASKS

ORDER = ["Biology", "Bioinformatics", "Medical-Sciences", "MedXpertQA-Exam", "MedQA-Diag", "PMC-Treatment",
         "PMC-Clinical", "IIYi-Clinical"]  # the table's columns
TABLE_3 = {
    "ReasonEmbed-Qwen3-8B (Redapter)": ([54.01, 66.33, 67.64, 20.93, 27.96, 51.38, 33.76, 23.43], 43.18),
    "Qwen3-Embedding-8B*": ([21.37, 50.15, 46.65, 18.91, 27.06, 48.76, 37.29, 23.60], 34.22),
}
PAPER_ROW = "Qwen3-Embedding-8B (ReasonEmbed paper)"


def board(commands: bool = False, **options):
    """The leaderboard (of ./results when it exists), its rows as ``--format json`` writes them."""
    import r2med_tasks as r2med

    return r2med.rank_systems(statistics=not commands, **options).records(commands=commands)


def test_the_leaderboards_first_row_has_the_papers_values_and_a_command():
    from r2med_tasks.board.sources import published_rows
    from r2med_tasks.board.published import PUBLISHED_CSV

    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as f:
        record = next(csv.DictReader(f))
    values, average = TABLE_3["ReasonEmbed-Qwen3-8B (Redapter)"]
    assert record["name"] == "BGE-Reasoner-Embed-0928" and record["rank"] == "1"
    assert [float(record[d]) for d in ORDER] == values
    assert record["command"] == "r2med-run --plugin reason-embed"
    assert record["repo_results_status"] == "not_in_repo(external)"  # recomputed by tools.published_record.build
    for where in ("arXiv 2510.08252", "Table 3", "VectorSpaceLab/agentic-search @b2f2e40",
                  "ReasonEmbed/imgs/r2med-performance.png"):
        assert where in record["source"]
    row = published_rows()[0]
    assert row.system == "BGE-Reasoner-Embed-0928" and row.complete and row.published_average is None
    assert row.average == leaderboard_average(values) == average == float(record["avg"])  # computed, not copied
    assert not row.notes and row.source == "published (ReasonEmbed paper, arXiv 2510.08252, Table 3)"


def test_the_other_papers_run_is_shipped_with_its_provenance():
    from r2med_tasks.board.sources import published_rows
    from r2med_tasks.board.published import paper_runs

    (run,) = [r for r in paper_runs() if r["name"] == PAPER_ROW]  # (the InsertRank paper's: test_insertrank.py)
    values, average = TABLE_3["Qwen3-Embedding-8B*"]
    assert run["name"] == PAPER_ROW and [run["ndcg_at_10"][d] for d in ORDER] == values
    assert run["average"] == average == leaderboard_average(values)
    assert run["command"] == "r2med-run --plugin qwen3-embedding-8b"
    assert any("Table 3" in p for p in run["provenance"])
    assert ("VectorSpaceLab/agentic-search@b2f2e40:ReasonEmbed/evaluation_r2med/scripts/baselines/"
            "eval_qwen3_embedding_8b.sh") in run["provenance"]
    rows = {r.system: r for r in published_rows(which="all")}
    row = rows[PAPER_ROW]
    assert (row.kind, row.origin, row.average, row.command) == ("paper", "paper", average, run["command"])
    assert {t.short_name: row.scores[t.name] for t in R2MED_TASKS} == dict(zip(ORDER, values))
    assert PAPER_ROW not in {r.system for r in published_rows()}  # not a leaderboard row


def test_its_command_dry_runs_to_the_rows_model(plugins, tmp_path):
    from conftest import dry_run_plan

    plan = dry_run_plan("r2med-run --plugin qwen3-embedding-8b", tmp_path)
    assert PAPER_ROW.startswith(plan["pipeline"] + " (") and len(plan["tasks"]) == 8


def test_published_all_shows_it_with_its_command(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert PAPER_ROW not in {r["system"] for r in board()}
    (row,) = [r for r in board(published="all") if r["kind"] == "paper" and "ReasonEmbed" in r["system"]]
    assert row["system"] == PAPER_ROW and row["average"] == 34.22
    assert row["provenance"][0].startswith("arXiv 2510.08252")
    commands = {r["system"]: r["command"] for r in board(published="all", commands=True)}
    assert commands[PAPER_ROW] == "r2med-run --plugin qwen3-embedding-8b"
    assert commands["BGE-Reasoner-Embed-0928"] == "r2med-run --plugin reason-embed"
    monkeypatch.setenv("COLUMNS", "120")  # wide enough that the legend's words are on one line
    code, out, _ = run_cli("leaderboard", "--published", "all", "--retriever", "qwen3-embedding")
    assert code == 0 and "paper" in out and "another paper" in out  # the Src column and its legend
    assert board(published="all", retriever="Qwen3-Embedding-8B")[0]["kind"] == "paper"


def test_the_page_filters_it_as_another_papers_run():
    from html import escape

    from r2med_tasks.board.html import ORIGIN_LABELS, render_html
    from r2med_tasks.board.leaderboard import ranked
    from r2med_tasks.board.sources import published_rows

    rows = ranked(published_rows(which="all"))
    page = render_html(rows, [t.name for t in R2MED_TASKS])
    assert f'<input type="checkbox" value="paper" checked> {escape(ORIGIN_LABELS["paper"])} (18)' in page
    assert page.count('data-origin="paper"') == 18  # ReasonEmbed's, InsertRank's, GroupRank's 11, ReasonRank's 5


def test_a_run_of_its_configuration_joins_it(plugins):
    from r2med_tasks.board.leaderboard import merge, published_row_for
    from r2med_tasks.board.sources import Row, command_config, published_rows

    config = command_config("r2med-run --plugin qwen3-embedding-8b")
    run = Row("Qwen3-Embedding-8B", scores={t.name: 0.3 for t in R2MED_TASKS}, key=("r2med/qwen3-embedding-8b", "rev",
                                                                                     None, False),
              config=config, display_name="Qwen3-Embedding-8B")
    rows = merge([*published_rows(which="all"), run])
    paper = next(r for r in rows if r.system == PAPER_ROW)
    assert paper.joined == [run] and len(rows) == 69 + 28 + 18
    # the run summary sets a reason-embed run beside the leaderboard row's published values
    row = published_row_for("BGE-Reasoner-Embed-0928", command_config("r2med-run --plugin reason-embed"))
    assert row is not None and row.scores[R2MED_TASKS[0].name] == 54.01


@pytest.mark.parametrize("name", ["BGE-Reasoner-Embed-0928", PAPER_ROW])
def test_the_runs_table_says_where_the_figures_are(name):
    from tools.runs_table import runs_table

    line = next(line for line in runs_table().splitlines() if f"| {name} |" in line)
    assert "| ReasonEmbed paper, arXiv 2510.08252, Table 3 |" in line and "FlagEmbedding" in line
