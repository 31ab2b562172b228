"""The rerankers' frontier on R2MED as other papers publish it (kind ``paper``): GroupRank's R2MED
table (arXiv 2511.11653, Table 2: every reranker over Diver-Retriever-4B's top 100), ReasonRank's
(arXiv 2508.07050, Table 2: over E5-mistral's top 100) and InsertRank's abstract. The figures are
typed here from frontier.md's transcription of the papers, independently of the shipped data:
per-dataset values only where given, averages alone otherwise.
"""

from __future__ import annotations

import shlex

import pytest

from r2med_tasks.scoring.evaluation import leaderboard_average
from r2med_tasks.tasks.specs import R2MED_TASKS

ORDER = ["Biology", "Bioinformatics", "Medical-Sciences", "MedXpertQA-Exam", "MedQA-Diag", "PMC-Treatment",
         "PMC-Clinical", "IIYi-Clinical"]
GROUPRANK = {  # reranker -> (printed average, per dataset or None)
    "GroupRank(32B)": (52.3, [59.5, 69.7, 66.3, 28.8, 41.5, 67.6, 52.2, 32.7]),
    "DeepSeek-V3.1 listwise": (52.0, None), "Qwen3-32B (thinking)": (50.7, None),
    "Qwen3-32B (no thinking)": (50.6, None), "ReasonRank(32B)": (50.2, None), "Rank-K(32B)": (49.5, None),
    "ERank(32B)": (49.3, None), "Rank-R1(14B)": (49.3, None), "Qwen2.5-32B-Instruct listwise": (48.4, None),
    "GroupRank(7B)": (47.8, None), "-": (42.9, None),
}
REASONRANK = {
    "ReasonRank(32B)": (42.85, [45.56, 67.73, 63.45, 18.90, 30.60, 41.08, 46.11, 29.35]),
    "ReasonRank(7B)": (39.53, None), "Rank1(32B)": (39.13, None), "Rank-R1(14B)": (37.99, None), "-": (23.84, None),
}
# plugins other parts of issue #44 add: a command naming one plans once they are merged
PENDING = {"grouprank", "diver-retriever-4b"}


def paper_rows(source: str) -> dict[str, dict]:
    from r2med_tasks.board.published import paper_runs

    return {r["reranker"]: r for r in paper_runs() if r["source"].startswith(source)}


@pytest.mark.parametrize("source, table, first_stage, paper", [
    ("GroupRank paper", GROUPRANK, "Diver-Retriever-4B, top 100", "arXiv 2511.11653"),
    ("ReasonRank paper", REASONRANK, "E5-mistral-7b-instruct, top 100", "arXiv 2508.07050"),
])
def test_every_row_of_the_table_with_its_figures_and_where_they_are(source, table, first_stage, paper):
    rows = paper_rows(source)
    assert set(rows) == set(table)
    for reranker, (average, values) in table.items():
        run = rows[reranker]
        assert run["average"] == average and run["paper"] == paper and run["table"] == "Table 2"
        assert run["ndcg_at_10"] == (dict(zip(ORDER, values)) if values else {})  # no invented per-dataset value
        assert run["first_stage"] == (first_stage if reranker != "-" else "-")
        assert run["llm"] != "-" or reranker == "-"
        if values:
            assert abs(leaderboard_average(values) - average) <= 0.05  # the printed average, to its rounding


def test_papers_lists_them_after_the_leaderboard_ranked_apart():
    import r2med_tasks as r2med

    leaderboard = r2med.rank_systems(statistics=False).records()
    papers = r2med.rank_systems(published="papers", statistics=False).records()
    assert len(papers) == 69 + 18 and {r["kind"] for r in papers} == {"leaderboard", "paper"}
    assert papers[:69] == leaderboard  # the seed's rows first, each at its rank (test_board_sections.py)
    assert {(r["kind"], r["section"]) for r in papers[69:]} == {("paper", "elsewhere")}
    top = papers[69]
    assert top["system"] == "Diver-Retriever-4B + GroupRank(32B) (GroupRank paper)" and top["average"] == 52.29
    assert top["rank"] == 1 and top["average"] > leaderboard[0]["average"]  # above the board's #1, ranked apart
    assert top["source"].startswith("published (GroupRank paper, arXiv 2511.11653, Table 2")
    only_average = next(r for r in papers if r["system"].startswith("Diver-Retriever-4B + ERank(32B)"))
    assert only_average["average"] == 49.3 and "average only" in only_average["source"]


def test_the_terminal_and_the_page_show_their_source(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("leaderboard", "--published", "papers", "--reranker", "GroupRank", "--wide")
    assert code == 0, err
    assert "GroupRank paper, arXiv 2511.11653, Table 2" in out and "paper" in out
    code, out, err = run_cli("leaderboard", "--published", "papers", "--format", "html")
    assert code == 0 and out.count('data-origin="paper"') == 18


def test_every_new_row_has_a_command_that_plans(plugins, tmp_path):
    """Each command dry-runs with the installed plugins; one naming a plugin another part of the
    issue adds is refused for that plugin alone (after the merge, it plans like the others)."""
    from conftest import dry_run_plan
    from r2med_tasks.board.published import paper_runs
    from r2med_tasks.board.sources import command_config

    for run in paper_runs():
        words = shlex.split(run["command"])
        named = {words[i + 1] for i, w in enumerate(words) if w == "--plugin"}
        if command_config(run["command"]) is None:
            assert named & PENDING, run["name"]  # only a plugin of #44's other parts, not merged yet, may stop it
            continue
        plan = dry_run_plan(run["command"], tmp_path)
        assert len(plan["tasks"]) == 8, run["name"]


def test_the_commands_view_gives_every_new_row_one(plugins, tmp_path, monkeypatch):
    import r2med_tasks as r2med

    monkeypatch.chdir(tmp_path)
    rows = [r for r in r2med.rank_systems(published="papers", statistics=False).records(commands=True)
            if r["system"].endswith(("(GroupRank paper)", "(ReasonRank paper)"))]
    assert len(rows) == 16 and all(r["command"].startswith("r2med-run --plugin ") for r in rows)
    assert {r["command"].split()[2] for r in rows} == {"diver-retriever-4b", "e5"}
