"""Leaderboard rows' intervals, judged@10 and ties, on results folders built here: the intervals
against the plain resampling loop of test_uncertainty.py, the ties against an exact enumeration of
every sign flip and Holm's correction done by hand."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from pathlib import Path

import pytest

import r2med_tasks as r2med
from r2med_tasks.scoring.significance import average_randomization, paired_randomization, ties_with_best
from r2med_tasks.tasks.specs import R2MED_TASKS
from test_uncertainty import loop_average_interval, loop_interval

BIO, BINF = "R2MEDBiologyRetrieval", "R2MEDBioinformaticsRetrieval"
REVISION = {t.name: t.revision for t in R2MED_TASKS}

# per-query nDCG@10 on Biology (6 queries) and Bioinformatics (5)
SYSTEMS = {
    "best": {BIO: [0.9, 0.8, 1.0, 0.7, 0.9, 0.6], BINF: [0.8, 0.9, 0.7, 1.0, 0.6]},
    "close": {BIO: [0.85, 0.85, 1.0, 0.65, 0.95, 0.55], BINF: [0.75, 0.9, 0.75, 0.95, 0.6]},
    "weak": {BIO: [0.1, 0.0, 0.3, 0.2, 0.1, 0.0], BINF: [0.2, 0.1, 0.0, 0.3, 0.1]},
}
JUDGED = {BIO: [1.0, 0.9, 0.8, 1.0, 0.7, 0.6], BINF: [0.5, 1.0, 1.0, 0.9, 0.8]}


def write_system(root: Path, name: str, per_task: dict[str, list[float]], *, official: bool = True) -> Path:
    """A results folder as r2med-run writes one: TaskResult, per-query file, stored data identity."""
    folder = root / f"acme__{name}" / "v1"
    (folder / "r2med").mkdir(parents=True)
    (folder / "model_meta.json").write_text(json.dumps({"name": f"acme/{name}", "revision": "v1"}))
    for task, values in per_task.items():
        main = round(sum(values) / len(values), 5)
        (folder / f"{task}.json").write_text(json.dumps({
            "dataset_revision": REVISION[task], "task_name": task, "mteb_version": "2.0", "evaluation_time": 1.0,
            "scores": {"test": [{"main_score": main, "ndcg_at_10": main, "hf_subset": "default",
                                 "languages": ["eng-Latn"]}]}}))
        (folder / f"{task}.per_query.tsv").write_text(
            "query_id\tndcg_at_10\tjudged_at_10\tndcg_at_10_condensed\n" +
            "".join(f"q{i}\t{v!r}\t{JUDGED[task][i]!r}\t{min(1.0, v + 0.05)!r}\n" for i, v in enumerate(values)))
        data = {"source": "hub", "revision": REVISION[task], "official": True} if official else \
            {"source": "local", "revision": "sha256-elsewhere", "official": False}
        (folder / "r2med" / f"{task}.identity.json").write_text(json.dumps({"task": task, "data": data}))
    return folder


def exact_p(a: list[list[float]], b: list[list[float]]) -> float:
    """Every sign assignment of the per-query differences, each weighted by 1/n of its task: the
    share whose |mean over tasks of the task means| is at least the observed one."""
    weighted = [(y - x) / len(xs) for xs, ys in zip(a, b) for x, y in zip(xs, ys)]
    observed = abs(sum(weighted))
    hits = sum(1 for signs in itertools.product((1, -1), repeat=len(weighted))
               if abs(sum(s * abs(w) for s, w in zip(signs, weighted))) >= observed - 1e-12)
    return hits / 2 ** len(weighted)


def close_enough(p_mc: float, p: float, trials: int = 10000) -> bool:
    return abs(p_mc - p) <= 4 * math.sqrt(max(p * (1 - p), 1e-4) / trials) + 2 / trials


def test_the_average_test_equals_an_exact_enumeration():
    for name in ("close", "weak"):
        a = [SYSTEMS["best"][t] for t in (BIO, BINF)]
        b = [SYSTEMS[name][t] for t in (BIO, BINF)]
        assert close_enough(average_randomization(a, b), exact_p(a, b)), name
    # one task: the plain paired test, draw for draw
    x, y = SYSTEMS["best"][BIO], SYSTEMS["close"][BIO]
    assert average_randomization([x], [y], trials=500, seed=3) == paired_randomization(x, y, trials=500, seed=3)


def test_ties_with_best_follow_holm_by_hand():
    per_query = {name: [dict(enumerate(s[t])) for t in (BIO, BINF)] for name, s in SYSTEMS.items()}
    out = ties_with_best(per_query, "best")
    p = {n: exact_p([SYSTEMS["best"][t] for t in (BIO, BINF)], [SYSTEMS[n][t] for t in (BIO, BINF)])
         for n in ("close", "weak")}
    low, high = sorted(p, key=p.get)
    holm = {low: min(1.0, 2 * p[low]), high: max(min(1.0, 2 * p[low]), p[high])}
    assert p["weak"] < 0.01 < 0.2 < p["close"]  # far from 0.05: the Monte Carlo error cannot flip a decision
    for name in ("close", "weak"):
        assert close_enough(out[name]["p_holm"], holm[name], trials=10000 // 2), name
        assert out[name]["tied"] is (holm[name] >= 0.05)
    assert out["best"] == {"p_value": None, "p_holm": None, "tied": True}
    assert ties_with_best(per_query, "best") == out  # reproducible: seed 0
    # no common query in a task: not comparable
    per_query["stranger"] = [{"x": 0.5}, {"y": 0.5}]
    assert ties_with_best(per_query, "best")["stranger"]["tied"] is None


def board(root: Path, **options) -> list[dict]:
    """The leaderboard of ``root`` on Biology and Bioinformatics, its rows as ``--format json`` writes them."""
    shown = r2med.rank_systems(root, tasks="Biology,Bioinformatics", **options)
    assert shown.warnings == []
    return shown.records()


def test_rows_carry_intervals_judged_and_ties(run_cli, plugins, tmp_path):
    root = tmp_path / "results"
    for name, per_task in SYSTEMS.items():
        write_system(root, name, per_task)
    write_system(root, "elsewhere", SYSTEMS["weak"], official=False)  # other data: compared with nothing
    rows = {r["system"]: r for r in board(root, include_local=True)}

    best, close, weak = rows["acme/best"], rows["acme/close"], rows["acme/weak"]
    assert [best["tied"], close["tied"], weak["tied"]] == [True, True, False]
    assert close["tie_best"] == weak["tie_best"] == best["tie_best"] == "acme/best"
    assert rows["acme/elsewhere"]["tied"] is None and rows["acme/elsewhere"]["local_data"]
    published = [r for r in rows.values() if r["kind"] == "leaderboard"]
    assert published and all(r["tied"] is None and r["average_ci"] is None and r["ci"] == {} and
                             r["judged_at_10"] is None for r in published)

    for name, row in (("best", best), ("weak", weak)):
        for task, short in ((BIO, "Biology"), (BINF, "Bioinformatics")):
            lo, hi = loop_interval(SYSTEMS[name][task])
            assert row["ci"][short] == [round(100 * lo, 2), round(100 * hi, 2)]
        lo, hi = loop_average_interval([SYSTEMS[name][BINF], SYSTEMS[name][BIO]])  # tasks by name
        assert row["average_ci"] == [round(100 * lo, 2), round(100 * hi, 2)]
        assert row["average_ci"][0] <= row["average"] <= row["average_ci"][1]
    assert best["judged_at_10"] == pytest.approx((sum(JUDGED[BIO]) / 6 + sum(JUDGED[BINF]) / 5) / 2, rel=1e-12)
    assert best["judged"]["Biology"] == pytest.approx(sum(JUDGED[BIO]) / 6, rel=1e-12)
    assert best["ndcg_at_10_condensed"]["Bioinformatics"] == pytest.approx(
        100 * sum(min(1.0, v + 0.05) for v in SYSTEMS["best"][BINF]) / 5, abs=0.006)

    # the view does not move the marks: the family is every row on the shown datasets
    shown = board(root, published="none", retriever="close")
    assert [(r["system"], r["tied"], r["tie_p"]) for r in shown] == [("acme/close", True, close["tie_p"])]
    assert [r["tied"] for r in board(root, published="none", top=1)] == [True]

    # the text formats: the average's interval, the tie, judged@10
    code, text, _ = run_cli("leaderboard", str(root), "--tasks", "Biology,Bioinformatics", "--format", "csv",
                            "--published", "none")
    (record,) = [r for r in csv.DictReader(io.StringIO(text)) if r["System"] == "acme/weak"]
    assert record["Tied"] == "no" and record["Avg 95% CI"] == "{:.2f}–{:.2f}".format(*weak["average_ci"])
    assert float(record["Judged@10"]) == pytest.approx(weak["judged_at_10"], abs=0.005)
    code, wide, _ = run_cli("leaderboard", str(root), "--tasks", "Biology,Bioinformatics", "--wide",
                            "--published", "none")
    assert "Avg 95% CI" in wide and "Tied" in wide and "Judged@10" in wide


def test_a_per_query_file_that_disagrees_with_its_result_gives_no_interval(plugins, tmp_path):
    root = tmp_path / "results"
    folder = write_system(root, "edited", SYSTEMS["best"])
    table = folder / f"{BIO}.per_query.tsv"
    table.write_text(table.read_text().replace("q0\t0.9", "q0\t0.1"))
    shown = r2med.rank_systems(root, tasks="Biology,Bioinformatics", published="none")
    assert len(shown.warnings) == 1 and shown.warnings[0].startswith(f"{table}: its nDCG@10 values average")
    (row,) = shown.records()
    assert "Biology" not in row["ci"] and "Bioinformatics" in row["ci"] and row["average_ci"] is None


def test_a_run_and_its_row_report_the_same_intervals(evaluate, data_dir, tmp_path):
    outcome = evaluate("bm25", tasks="Biology,Bioinformatics", data_dir=data_dir)
    (row,) = board(tmp_path / "out", include_local=True, published="none")
    assert row["average_ci"] == outcome.average_ci
    assert row["ci"] == {o.alias: o.ndcg_at_10_ci for o in outcome.tasks}
    assert row["judged_at_10"] == pytest.approx(sum(o.judged_at_10 for o in outcome.tasks) / 2, rel=1e-12)
    assert row["tied"] is None  # alone on its data


@pytest.mark.parametrize("args, options", [
    ([], {}),
    (["--tasks", "Biology,Bioinformatics", "--include-local"],
     {"tasks": ["Biology,Bioinformatics"], "include_local": True}),
    (["--published", "all", "--retriever", "acme", "--top", "3"], {"published": "all", "retriever": "acme", "top": 3}),
    (["--commands", "--include-local"], {"statistics": False, "include_local": True})])
def test_the_command_shows_the_librarys_rows(run_cli, tmp_path, args, options):
    """``r2med leaderboard --format json`` is ``rank_systems(...).records()``, its warnings the
    library's, one line each: the command and the library cannot drift apart."""
    root = tmp_path / "results"
    for name, per_task in SYSTEMS.items():
        write_system(root, name, per_task)
    write_system(root, "elsewhere", SYSTEMS["weak"], official=False)
    (root / "acme__best" / "v1" / "notes.json").write_text("{not json")  # one warning
    code, out, err = run_cli("leaderboard", root, "--format", "json", *args)
    assert code == 0, err
    shown = r2med.rank_systems(root, **options)
    assert json.loads(out) == shown.records(commands="--commands" in args) and shown.rows
    assert len(shown.warnings) == 1 and err.splitlines() == [f"warning: {w}" for w in shown.warnings]
