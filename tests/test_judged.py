"""judged@10 and the condensed-list nDCG@10: counted by hand from runs and judgments built here,
in the per-query file, on a run's outcome (computed or reused alike) and with mteb's score dict
left as it was."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import SAMPLE, qrels_of
from r2med_tasks.tasks.datafiles import read_jsonl
from r2med_tasks.scoring.evaluation import PER_QUERY, score


def ndcg10(grades_in_rank_order: list[int], all_grades: list[int]) -> float:
    """trec_eval's nDCG@10: linear gains, log2(rank + 1) discount, ideal from every judged grade."""
    dcg = sum(g / math.log2(r + 1) for r, g in enumerate(grades_in_rank_order[:10], 1))
    ideal = sum(g / math.log2(r + 1) for r, g in enumerate(sorted(all_grades, reverse=True)[:10], 1))
    return dcg / ideal if ideal else 0.0


QRELS = {
    "q1": {"a": 2, "b": 0, "c": 1, "z": 1},  # b judged not relevant; z relevant, ranked 11th
    "q2": {"x": 1, "y": 0},  # two documents retrieved: fewer than 10
    "q3": {"d00": 1, "d11": 1},  # twelve documents with one score: ties broken by id, descending
    "q4": {"r": 1},  # nothing retrieved
    "q5": {"deep": 1},  # judged only below the top 10
}
RUN = {
    "q1": {"u1": 12.0, "a": 11.0, "u2": 10.0, "b": 9.0, "u3": 8.0, "c": 7.0, "u4": 6.0, "u5": 5.0, "u6": 4.0,
           "u7": 3.0, "z": 2.0, "u8": 1.0},
    "q2": {"x": 1.0, "u9": 0.5},
    "q3": {f"d{i:02d}": 1.0 for i in range(12)},
    "q4": {},
    "q5": {**{f"v{i:02d}": 20.0 - i for i in range(14)}, "deep": 1.0},
}


def test_judged_at_10_counted_by_hand():
    _, per_query = score(RUN, QRELS)
    assert set(per_query) == set(QRELS)
    judged = {q: m["judged_at_10"] for q, m in per_query.items()}
    assert judged == {
        "q1": 3 / 10,  # a, b (grade 0 counts), c; z is 11th
        "q2": 1 / 10,  # x of two documents: the denominator stays 10
        "q3": 1 / 10,  # top 10 by id descending: d11 .. d02 (d00 is 12th)
        "q4": 0.0,
        "q5": 0.0,
    }


def test_the_top_10_is_the_one_ndcg_is_computed_on():
    """q3's tie order: trec_eval's (ids descending) puts d11 first and d00 out of the top 10."""
    _, per_query = score(RUN, QRELS)
    assert per_query["q3"]["ndcg_at_10"] == pytest.approx(ndcg10([1], [1, 1]), rel=1e-12)


def test_condensed_ndcg_by_hand():
    _, per_query = score(RUN, QRELS)
    condensed = {q: m["ndcg_at_10_condensed"] for q, m in per_query.items()}
    # q1 without its unjudged documents: a, b, c, z (grades 2, 0, 1, 1)
    assert condensed["q1"] == pytest.approx(ndcg10([2, 0, 1, 1], [2, 0, 1, 1]), rel=1e-12)
    assert per_query["q1"]["ndcg_at_10"] == pytest.approx(ndcg10([0, 2, 0, 0, 0, 1, 0, 0, 0, 0], [2, 0, 1, 1]),
                                                          rel=1e-12)
    assert condensed["q2"] == 1.0  # x alone, first
    assert condensed["q3"] == pytest.approx(ndcg10([1, 1], [1, 1]), rel=1e-12)  # d11 then d00: both in
    assert condensed["q4"] == 0.0  # nothing retrieved
    assert condensed["q5"] == 1.0 and per_query["q5"]["ndcg_at_10"] == 0.0  # the hole-robust view differs


def test_only_relevant_judged_by_hand():
    """1 for a query none of whose judged documents has grade 0, else 0: a fact of the judgments."""
    _, per_query = score(RUN, QRELS)
    assert {q: m["only_relevant_judged"] for q, m in per_query.items()} == {
        "q1": 0.0, "q2": 0.0,  # b and y are judged not relevant
        "q3": 1.0, "q4": 1.0, "q5": 1.0}


def test_with_only_relevant_documents_judged_judged_at_10_is_p_at_10(evaluate, tmp_path, data_dir):
    """The sample's judgments (as R2MED's) grade every judged document 1: per query, judged@10 is then
    pytrec_eval's P@10 and the outcome says so; one grade 0 added to a task's judgments and it is
    not, for that task only."""
    import pytrec_eval

    from conftest import read_jsonl as plain_jsonl
    from conftest import write_jsonl

    run = sample_run()
    outcome = evaluate("run-file", path=str(write_trec(tmp_path / "mine.trec", run)))
    (task,) = outcome.tasks
    qrels = qrels_of(SAMPLE)
    assert {g for judged in qrels.values() for g in judged.values()} == {1}
    precision = pytrec_eval.RelevanceEvaluator(qrels, {"P.10"}).evaluate(
        {q: {d: s for d, s in docs} for q, docs in run.items()})
    lines = (Path(task.results_dir) / f"{task.task}.per_query.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    table = {line.split("\t")[0]: dict(zip(header[1:], map(float, line.split("\t")[1:]))) for line in lines[1:]}
    assert {q: r["judged_at_10"] for q, r in table.items()} == pytest.approx(
        {q: m["P_10"] for q, m in precision.items()}, abs=1e-12)
    assert {r["only_relevant_judged"] for r in table.values()} == {1.0}
    assert task.only_relevant_judged is True and outcome.to_json()["tasks"][0]["only_relevant_judged"] is True

    rows = plain_jsonl(data_dir / "Biology" / "qrels.jsonl")
    corpus = [r["id"] for r in plain_jsonl(data_dir / "Biology" / "corpus.jsonl")]
    judged = {(r["q_id"], r["p_id"]) for r in rows}
    extra = next(d for d in corpus if (rows[0]["q_id"], d) not in judged)
    write_jsonl(data_dir / "Biology" / "qrels.jsonl", [*rows, {"q_id": rows[0]["q_id"], "p_id": extra, "score": 0}])
    mixed = evaluate("bm25", tasks=["Biology", "Bioinformatics"], data_dir=data_dir, output="mixed")
    assert {t.alias: t.only_relevant_judged for t in mixed.tasks} == {"Biology": False, "Bioinformatics": True}


def test_the_score_dict_is_left_as_mteb_computes_it():
    scores, per_query = score(RUN, QRELS)
    assert not any("judged" in k or "condensed" in k for k in scores)
    assert all(list(m) == list(PER_QUERY) for m in per_query.values())


def write_trec(path: Path, run: dict[str, list[tuple[str, float]]]) -> Path:
    path.write_text("".join(f"{q} Q0 {d} {i} {s} mine\n" for q, docs in run.items()
                            for i, (d, s) in enumerate(docs, 1)))
    return path


def sample_run() -> dict[str, list[tuple[str, float]]]:
    """Per sample query: unjudged documents interleaved with judged ones, one query with 3 documents."""
    qrels = qrels_of(SAMPLE)
    corpus = [row["id"] for row in read_jsonl(SAMPLE / "corpus.jsonl")[0].values]
    run = {}
    for n, (qid, judged) in enumerate(sorted(qrels.items())):
        others = [d for d in corpus if d not in judged][n:n + 12]
        docs = [d for pair in zip(others, sorted(judged)) for d in pair] + others[len(judged):]
        docs = docs[:3] if n == 0 else docs
        run[qid] = [(d, float(len(docs) - i)) for i, d in enumerate(docs)]
    return run


def test_a_run_reports_them_per_query_and_per_task_computed_or_reused(evaluate, tmp_path):
    import pytrec_eval

    run = sample_run()
    path = write_trec(tmp_path / "mine.trec", run)
    first = evaluate("run-file", path=str(path))
    (task,) = first.tasks
    qrels = qrels_of(SAMPLE)
    by_hand = {q: sum(1 for d, _ in docs[:10] if d in qrels[q]) / 10 for q, docs in run.items()}
    assert min(by_hand.values()) < max(by_hand.values())  # the queries differ
    condensed_run = {q: {d: s for d, s in docs if d in qrels[q]} for q, docs in run.items()}
    condensed = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(condensed_run)

    lines = (Path(task.results_dir) / f"{task.task}.per_query.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    assert header == ["query_id", *PER_QUERY]
    table = {line.split("\t")[0]: dict(zip(header[1:], map(float, line.split("\t")[1:]))) for line in lines[1:]}
    assert {q: r["judged_at_10"] for q, r in table.items()} == by_hand
    assert {q: r["ndcg_at_10_condensed"] for q, r in table.items()} == \
        pytest.approx({q: m["ndcg_cut_10"] for q, m in condensed.items()}, rel=1e-12)

    assert task.judged_at_10 == pytest.approx(sum(by_hand.values()) / len(by_hand), rel=1e-12)
    assert task.ndcg_at_10_condensed == pytest.approx(
        sum(m["ndcg_cut_10"] for m in condensed.values()) / len(condensed), rel=1e-12)
    assert task.ndcg_at_10_condensed > task.ndcg_at_10  # the holes cost the main score
    assert task.ndcg_at_10_ci[0] <= task.ndcg_at_10_x100 <= task.ndcg_at_10_ci[1]

    again = evaluate("run-file", path=str(path))
    (reused,) = again.tasks
    assert reused.status == "cached" and task.status == "computed"
    same = ("ndcg_at_10", "n_queries", "judged_at_10", "ndcg_at_10_condensed", "ndcg_at_10_ci", "usage")
    assert {k: getattr(reused, k) for k in same} == {k: getattr(task, k) for k in same}
    assert again.average_ci == first.average_ci == task.ndcg_at_10_ci  # one task: its interval
    assert json.loads(json.dumps(first.to_json()))["tasks"][0]["judged_at_10"] == task.judged_at_10


def test_a_per_query_file_from_before_them_reads_as_unknown(evaluate, tmp_path):
    from r2med_tasks.results.outcomes import TaskOutcome
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    outcome = evaluate("run-file", path=str(write_trec(tmp_path / "mine.trec", sample_run())))
    folder = Path(outcome.tasks[0].results_dir)
    per_query = folder / f"{SAMPLE_TASK.name}.per_query.tsv"
    old = ["\t".join(line.split("\t")[:5]) for line in per_query.read_text().splitlines()]  # the four measures
    per_query.write_text("\n".join(old) + "\n")
    read = TaskOutcome.read(SAMPLE_TASK, folder, status="cached", official_data=False)
    assert read.judged_at_10 is None and read.ndcg_at_10_condensed is None and read.only_relevant_judged is None
    assert read.ndcg_at_10_ci == outcome.tasks[0].ndcg_at_10_ci and read.n_queries == outcome.tasks[0].n_queries


def test_json_keys_say_their_scale(run_cli, tmp_path):
    """``--json``: ``ndcg_at_10`` in [0, 1]; every interval and score ×100 says ``_x100``; read back,
    the outcome is the one written."""
    from r2med_tasks.results.outcomes import RunOutcome

    code, out, err = run_cli("run", "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path / "o", "--json")
    data = json.loads(out)
    (task,) = data["tasks"]
    assert code == 0 and 0 <= task["ndcg_at_10"] <= 1, err
    assert "ndcg_at_10_ci" not in task and "average_ci" not in data
    lo, hi = task["ndcg_at_10_ci_x100"]
    assert lo <= task["ndcg_at_10_x100"] == round(100 * task["ndcg_at_10"], 2) <= hi
    assert data["average_ndcg_at_10_ci_x100"] == [lo, hi]  # one task: its interval
    back = RunOutcome.from_json(data)
    assert back.tasks[0].ndcg_at_10_ci == [lo, hi] and back.average_ci == [lo, hi]
