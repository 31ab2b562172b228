"""`hybrid`: members run as their own pipelines (saved, reused), fused as Cormack et al.'s RRF or by
score; checked against a fusion the test computes itself from the members' saved runs."""

import json
import shutil
from pathlib import Path

import pytest

from conftest import board_rows, read_ranking
from r2med_tasks.scoring.runs import read_trec


TASK = "R2MEDSampleRetrieval"
LOCAL_DATA = "local-data"  # results on local data (here: the offline sample, --data-dir) lie under it


def one_dir(dirs) -> Path:
    """The one results folder of a run (a RunOutcome's or a --json summary's ``results_dirs``)."""
    assert len(dirs) == 1, dirs
    return Path(dirs[0])


def member_run(tmp_path, folder_name):
    """A member's saved run (each query's documents best first)."""
    return read_trec(next((tmp_path / "out" / LOCAL_DATA / folder_name).rglob("R2MEDSampleRetrieval.trec")))


def test_rrf_equals_an_independent_computation(evaluate, tmp_path):
    results = evaluate("hybrid", members="bm25,bm25-okapi", top_k=20)
    fused = read_ranking(one_dir(results.results_dirs) / f"{TASK}.trec")
    a, b = member_run(tmp_path, "r2med__bm25"), member_run(tmp_path, "r2med__bm25-okapi")
    for qid in fused:
        scores = {}
        for member in (a, b):
            for rank, doc in enumerate(member[qid], 1):
                scores[doc] = scores.get(doc, 0.0) + 1.0 / (60 + rank)
        expected = sorted(scores.items(), key=lambda kv: -kv[1])[:20]
        assert [s for _, s in fused[qid]] == pytest.approx([s for _, s in expected], abs=1e-12)
        assert {d for d, _ in fused[qid]} <= set(scores)
    assert results.display_name == "BM25 ⊕ bm25-okapi (RRF)"


def test_members_are_reused_and_take_their_own_options(evaluate, tmp_path, monkeypatch):
    from r2med_plugins.bm25.retriever import BM25Retriever, OkapiRetriever

    evaluate("hybrid", members="bm25,bm25-okapi", options={"bm25.k1": 1.2})
    assert len(list((tmp_path / "out" / LOCAL_DATA / "r2med__bm25").iterdir())) == 1  # the member with k1=1.2

    def no_call(*args, **kwargs):
        raise AssertionError("a member's saved run must be reused")

    for cls in (BM25Retriever, OkapiRetriever):
        monkeypatch.setattr(cls, "index", no_call)
        monkeypatch.setattr(cls, "search", no_call)
    again = evaluate("hybrid", members="bm25,bm25-okapi", fusion="zscore", options={"bm25.k1": 1.2})
    assert again[TASK].status == "computed" and again.display_name.endswith("(ZSCORE)")


def test_hybrid_results_in_the_leaderboard(evaluate, tmp_path, data_dir):
    outcome = evaluate("hybrid", members="bm25,bm25-okapi", tasks=None, data_dir=data_dir)
    assert list(outcome)[0] == "R2MEDBiologyRetrieval"
    rows, warnings = board_rows(tmp_path / "out")
    hybrid = next(r for r in rows if r.system == "BM25 ⊕ bm25-okapi (RRF)")
    assert hybrid.scores == {t.task: t.ndcg_at_10_x100 for t in outcome.values()} and warnings == []


@pytest.mark.parametrize("args, message", [
    (["-o", "members=bm25"], "name at least two retrievers"),
    (["-o", "fusion=max"], "use one of rrf, zscore, minmax, linear"),
    (["-o", "members=bm25,st", "-o", "weights=1"], "1 weights for 2 members"),
    (["-o", "members=bm25,st", "-o", "nvembed.device=cpu"], "'nvembed' is neither a selected component nor a member"),
])
def test_hybrid_mistakes(run_cli, tmp_path, args, message):
    code, _, err = run_cli("run", "--plugin", "hybrid", *args, "--tasks", "sample", "--output", tmp_path)
    assert code == 2 and message in err


def test_members_share_the_rewriter(evaluate, tmp_path):
    """With a rewriter, each member runs as "rewriter + member", saved under that pipeline's name."""
    from test_gar import published_dir

    data = published_dir(tmp_path, "hyde", "qwq-32b", reasoning=True)
    outcome = evaluate("hyde", "hybrid", source="qwq-32b", members="bm25,bm25-okapi", data_dir=data, tasks="Biology")
    assert outcome.display_name == "QwQ-32B + BM25 ⊕ bm25-okapi (RRF)"
    names = {json.loads(p.read_text())["name"] for p in (tmp_path / "out").rglob("r2med/pipeline.json")}
    assert {"QwQ-32B + BM25", "QwQ-32B + bm25-okapi"} <= names


def test_fuse_command_matches_the_hybrid_retriever(run_cli, evaluate, tmp_path):
    """`r2med fuse` over the members' saved folders, or their TREC files with --qrels, gives the same
    run as the hybrid retriever; the result is a results folder the leaderboard reads."""
    from conftest import SAMPLE
    from r2med_tasks.api import fuse_runs

    hybrid = evaluate("hybrid", members="bm25,bm25-okapi")
    members = [next((tmp_path / "out" / LOCAL_DATA / name).glob("*"))
               for name in ("r2med__bm25", "r2med__bm25-okapi")]
    fused = fuse_runs(members, output=tmp_path / "fused", cache_dir=tmp_path / "cache")
    expected = read_ranking(one_dir(hybrid.results_dirs) / f"{TASK}.trec")
    assert read_ranking(one_dir(fused.results_dirs) / "R2MEDSampleRetrieval.trec") == expected
    assert fused[TASK].ndcg_at_10 == hybrid[TASK].ndcg_at_10

    trecs = [str(m / "R2MEDSampleRetrieval.trec") for m in members]
    by_files = fuse_runs(trecs, qrels=SAMPLE / "qrels.jsonl", output=tmp_path / "f2", cache_dir=tmp_path / "cache")
    assert by_files[TASK].ndcg_at_10 == hybrid[TASK].ndcg_at_10
    code, _, err = run_cli("fuse", *trecs, "--output", tmp_path / "f3")
    assert code == 2 and "need --qrels FILE" in err


def test_tuned_weights_are_never_scored_on_their_tuning_queries(evaluate, tmp_path):
    """-o tune: weights chosen on the listed queries (best mean nDCG@10 over a 0.1 grid, checked
    here by brute force), the reported score over the other queries only."""
    import pytrec_eval

    from conftest import SAMPLE, qrels_of
    from r2med_tasks.scoring.fusion import fuse

    tune = tmp_path / "tune.json"
    tune.write_text(json.dumps({"sample": ["q01", "q02", "q03", "q04"]}))
    results = evaluate("hybrid", members="bm25,bm25-okapi", fusion="zscore", tune=str(tune))
    result = json.loads((one_dir(results.results_dirs) / f"{TASK}.json").read_text())["scores"]["test"][0]
    assert result["r2med_tuning_queries"] == 4 and results[TASK].n_queries == 6

    runs = [member_run(tmp_path, "r2med__bm25"), member_run(tmp_path, "r2med__bm25-okapi")]
    qrels = qrels_of(SAMPLE)
    tune_qrels = {q: qrels[q] for q in ["q01", "q02", "q03", "q04"]}

    def mean_ndcg(weights, judged):
        fused = fuse(runs, method="zscore", weights=weights, top_k=100)
        ev = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10"}).evaluate(
            {q: dict(d) for q, d in fused.items() if q in judged})
        return sum(v["ndcg_cut_10"] for v in ev.values()) / len(ev)

    grid = [[i / 10, 1 - i / 10] for i in range(1, 10)]
    best = max(grid, key=lambda w: (mean_ndcg(w, tune_qrels), -grid.index(w)))
    assert result["r2med_tuned_weights"] == pytest.approx(best)
    held_out = {q: r for q, r in qrels.items() if q not in tune_qrels}
    assert result["ndcg_at_10"] == pytest.approx(mean_ndcg(best, held_out), abs=5e-6)


def test_tuning_on_every_query_is_refused(run_cli, tmp_path):
    tune = tmp_path / "tune.json"
    tune.write_text(json.dumps({"sample": [f"q{i:02d}" for i in range(1, 11)]}))
    code, _, err = run_cli("run", "--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", f"tune={tune}",
                           "--tasks", "sample", "--output", tmp_path / "o", "--cache-dir", tmp_path / "c")
    assert code == 2 and "needs judged queries both to tune on and to score (10 to tune, 0 left)" in err


def test_weights_are_tuned_per_task_group(evaluate, tmp_path, data_dir):
    """Biology, Bioinformatics and Medical-Sciences form the qa-reference group: one weighting for all
    three, the best mean over the three tasks of mean nDCG@10 on their tuning queries."""
    import pytrec_eval

    from conftest import qrels_of
    from r2med_tasks.scoring.fusion import fuse

    split = {"Biology": ["q01", "q02"], "Bioinformatics": ["q03", "q04"], "Medical-Sciences": ["q05", "q06"]}
    tune = tmp_path / "tune.json"
    tune.write_text(json.dumps(split))
    outcome = evaluate("hybrid", members="bm25,bm25-okapi", fusion="minmax", tune=str(tune), tasks=None,
                       data_dir=data_dir)
    folder = one_dir(outcome.results_dirs)
    recorded = [json.loads(p.read_text())["scores"]["test"][0]["r2med_tuned_weights"] for p in folder.glob("R2MED*.json")]
    assert len(recorded) == 3 and recorded[0] == recorded[1] == recorded[2]  # one weighting for the group

    def task_value(name, weights):
        trec = f"R2MED{name.replace('-', '')}Retrieval.trec"
        runs = [read_trec(next((tmp_path / "out" / LOCAL_DATA / m).glob("*")) / trec)
                for m in ("r2med__bm25", "r2med__bm25-okapi")]
        qrels = {q: r for q, r in qrels_of(data_dir / name).items() if q in split[name]}
        fused = fuse(runs, method="minmax", weights=weights, top_k=100)
        ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate({q: dict(d) for q, d in fused.items()
                                                                              if q in qrels})
        return sum(v["ndcg_cut_10"] for v in ev.values()) / len(ev)

    grid = [[i / 10, 1 - i / 10] for i in range(1, 10)]
    best = max(grid, key=lambda w: (sum(task_value(n, w) for n in split) / 3, -grid.index(w)))
    assert recorded[0] == pytest.approx(best)


def test_fuse_refuses_runs_scored_on_different_data_as_compare_does(run_cli, evaluate, tmp_path, data_dir):
    """Same query ids, other texts: BM25 on the sample and on a copy whose queries are one query's
    text repeated. Refused (exit 2, one line) unless --allow-different-data, and then the output
    says so; a folder of other data than the judgments the fusion is scored on is refused too."""
    from r2med_tasks.api import fuse_runs
    from r2med_tasks.errors import UserError

    from conftest import SAMPLE, read_jsonl, write_jsonl

    queries = read_jsonl(SAMPLE / "query.jsonl")
    other = tmp_path / "other" / "sample"
    shutil.copytree(SAMPLE, other)  # noqa: the sample's files, queries replaced below
    write_jsonl(other / "query.jsonl", [{**q, "text": queries[0]["text"]} for q in queries])
    a = one_dir(evaluate("bm25", output="a").results_dirs)
    b = one_dir(evaluate("bm25", data_dir=other, output="b").results_dirs)
    code, _, err = run_cli("fuse", a, b, "--output", tmp_path / "fused")
    assert code == 2 and "different data" in err and "--allow-different-data" in err and "Traceback" not in err
    assert not (tmp_path / "fused").exists()
    with pytest.raises(UserError, match="different data"):
        fuse_runs([a, b], output=tmp_path / "fused", cache_dir=tmp_path / "cache")
    fused = fuse_runs([a, b], output=tmp_path / "fused", cache_dir=tmp_path / "cache", allow_different_data=True)
    assert any("different data" in line for line in fused.summaries) and "--allow-different-data" in fused.command
    code, out, err = run_cli("fuse", a, b, "--output", tmp_path / "fused2", "--allow-different-data")
    assert code == 0 and "different data" in out + err
    c = one_dir(evaluate("bm25", k1=1.5, data_dir=other, output="c").results_dirs)  # both on the other data
    with pytest.raises(UserError, match="other data than the judgments"):
        fuse_runs([b, c], output=tmp_path / "fused3", cache_dir=tmp_path / "cache")
    fuse_runs([b, c], data_dir=other.parent, output=tmp_path / "fused3", cache_dir=tmp_path / "cache")  # its data


def test_fuse_writes_as_a_run_does_reused_until_an_input_changes(evaluate, tmp_path):
    """A fusion is written as a run writes its tasks: fused again into the same folder it is reused,
    its files untouched; an input run that changed is fused anew."""
    from conftest import SAMPLE
    from r2med_tasks.api import fuse_runs

    a = one_dir(evaluate("bm25", output="a").results_dirs) / f"{TASK}.trec"
    b = one_dir(evaluate("bm25-okapi", output="b").results_dirs) / f"{TASK}.trec"
    changed = tmp_path / "changed.trec"
    shutil.copy(b, changed)

    def fused():
        return fuse_runs([a, changed], qrels=SAMPLE / "qrels.jsonl", output=tmp_path / "fused")

    first = fused()
    written = {p: p.read_bytes() for p in (tmp_path / "fused").rglob("*") if p.is_file() and p.name != "lock"}
    again = fused()
    assert (first[TASK].status, again[TASK].status) == ("computed", "cached")
    assert {p: p.read_bytes() for p in written} == written
    lines = changed.read_text().splitlines()
    changed.write_text("\n".join(lines[1:]) + "\n")  # one document fewer in the second run
    anew = fused()
    assert anew[TASK].status == "computed" and anew.results_dirs != first.results_dirs


def test_fuse_of_missing_paths_names_the_first(run_cli, tmp_path):
    code, _, err = run_cli("fuse", tmp_path / "nope-a", tmp_path / "nope-b")
    assert code == 2 and "nope-a: no such file or folder" in err and "not both" not in err


@pytest.mark.parametrize("plugins_and_option", [(("st",), "model"), (("hybrid",), "st.model")])
def test_an_unreachable_model_names_the_option_as_the_pipeline_takes_it(run_cli, tmp_path, plugins_and_option):
    """Offline, a hub id that is not cached is one line whose advice works as typed, alone or as a
    hybrid's member (``-o st.model=`` names st's model in both)."""
    components, key = plugins_and_option
    extra = ["-o", "members=bm25,st"] if components == ("hybrid",) else []
    code, _, err = run_cli("run", *[w for c in components for w in ("--plugin", c)], *extra, "-o",
                           f"{key}=nonexistent-org/no-model", "--tasks", "sample", "--output", tmp_path / "out")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "pass -o st.model=PATH to a local copy" in err


@pytest.mark.parametrize("content, said", [(None, "no such file"), (b"{not json", "cannot read a JSON"),
                                           (b"[1, 2]", "expected a JSON object")])
def test_a_bad_tuning_file_is_one_line_before_any_member_runs(run_cli, tmp_path, content, said):
    tune = tmp_path / "tune.json"
    if content is not None:
        tune.write_bytes(content)
    code, _, err = run_cli("run", "--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", f"tune={tune}",
                           "--tasks", "sample", "--output", tmp_path / "o", "--cache-dir", tmp_path / "c")
    assert code == 2 and f"-o hybrid.tune={tune}" in err and said in err and "Traceback" not in err, err
    assert not list((tmp_path / "o").rglob("*.trec"))  # no member computed
