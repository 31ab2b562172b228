"""What a plugin hands back is checked where the runner receives it (``running.received``): a
violation is one line naming the plugin, the query (and document) and what to fix, exit 2, with
nothing written; whatever passes is stored so that every reader of a results folder reads it back."""

import csv
import io
import json
from collections.abc import Mapping

import pytest

from conftest import SAMPLE, read_jsonl
from test_bad_input import assert_user_error, register_retriever


class Twice(Mapping):
    """A mapping whose items name one document twice (a dict cannot)."""

    def __init__(self, doc_id):
        self.doc_id = doc_id

    def __getitem__(self, key):
        return 1.0

    def __iter__(self):
        return iter([self.doc_id, self.doc_id])

    def __len__(self):
        return 2


def register_stage(register, kind, name, make):
    """Register the ``overlap`` retriever, and the ``kind`` ("rewriter" or "reranker") ``name`` of a
    plugin "<name>-plugin", which ``make()`` builds."""
    import overlap_plugin
    from r2med_tasks.components.hookspecs import hookimpl
    from r2med_tasks.components.specs import SPEC_TYPES

    def registering(register):
        register(SPEC_TYPES[kind](name=name, factory=lambda options: make()))

    class Plugin:
        @hookimpl
        def register_rewriters(self, register):
            if kind == "rewriter":
                registering(register)

        @hookimpl
        def register_rerankers(self, register):
            if kind == "reranker":
                registering(register)

    register(overlap_plugin, "overlap-plugin")
    register(Plugin(), f"{name}-plugin")


def written_files(out):
    return sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file()) if out.exists() else []


@pytest.mark.parametrize("bad, message", [
    ({"q01": {"s-cardio-01": float("nan")}}, "returned score nan for query 'q01', document 's-cardio-01'; scores "
                                            "must be finite"),
    ({"q01": {"s-cardio-01": float("inf")}}, "returned score inf for query 'q01', document 's-cardio-01'"),
    ({"q01": {"s-cardio-01": -float("inf")}}, "returned score -inf for query 'q01'"),
    ({"q01": {"s-cardio-01": 10**400}}, "for query 'q01', document 's-cardio-01'; scores must be finite"),
    ({"q01": {"s-cardio-01": "1.0"}}, "returned score '1.0' for query 'q01'"),
    ({"q01": {"not-a-doc": 1.0}}, "returned unknown document id 'not-a-doc' for query 'q01'; results must use the "
                                  "corpus's ids"),
    ({"nope": {"s-cardio-01": 1.0}}, "returned query id 'nope', which is not one of the 10 queries it was given"),
    ({"q01": Twice("s-cardio-01")}, "returned document 's-cardio-01' twice for query 'q01'; return each document "
                                    "once"),
    ({"q01": [("s-cardio-01", 1.0)]}, "returned list for query 'q01'; return each query's results as"),
])
def test_a_retrievers_bad_output_is_one_line_and_nothing_is_written(register, run_cli, tmp_path, bad, message):
    class Bad:
        def index(self, corpus, *, task, context):
            pass

        def search(self, queries, *, task, top_k, context):
            return {q.id: {} for q in queries} | bad

    register_retriever(register, "bad", Bad)
    code, _, err = run_cli("run", "--plugin", "bad", "--tasks", "sample", "--output", tmp_path / "out")
    assert_user_error(code, err, "retriever 'bad' (from bad-plugin) returned", message)
    assert written_files(tmp_path / "out") == []


def test_a_retriever_returning_no_mapping_is_named(register, run_cli, tmp_path):
    class Listing:
        def index(self, corpus, *, task, context):
            pass

        def search(self, queries, *, task, top_k, context):
            return [(q.id, "s-cardio-01", 1.0) for q in queries]

    register_retriever(register, "listing", Listing)
    code, _, err = run_cli("run", "--plugin", "listing", "--tasks", "sample", "--output", tmp_path / "out")
    assert_user_error(code, err, "retriever 'listing' (from listing-plugin) returned list; return {query id: "
                                 "{document id: score}}")


def test_a_task_after_the_bad_one_is_not_written_and_the_one_before_is_kept(register, run_cli, data_dir, tmp_path):
    """The second task's output is refused: the first task's results stay, finished and reusable."""
    class InfOnBioinformatics:
        def index(self, corpus, *, task, context):
            self.ids = corpus.ids

        def search(self, queries, *, task, top_k, context):
            bad = float("inf") if task.short_name == "Bioinformatics" else 1.0
            return {q.id: {self.ids[0]: bad, self.ids[1]: 0.5} for q in queries}

    register_retriever(register, "inf", InfOnBioinformatics)
    args = ("run", "--plugin", "inf", "--data-dir", data_dir, "--tasks")
    code, _, err = run_cli(*args, "Biology,Bioinformatics", "--output", tmp_path / "out")
    assert code == 2 and "Traceback" not in err  # after the trimmed task's data warning, the one line
    assert "retriever 'inf' (from inf-plugin) returned score inf for query" in err.strip().splitlines()[-1]
    names = {p.name for p in written_files(tmp_path / "out")}
    assert "R2MEDBiologyRetrieval.trec" in names and not any("Bioinformatics" in n for n in names)
    code, out, err = run_cli(*args, "Biology", "--output", tmp_path / "out", "--json")
    assert code == 0, err
    assert json.loads(out)["tasks"][0]["status"] == "cached"


@pytest.mark.parametrize("bad, message", [
    ({"q01": {"s-cardio-01": float("inf")}}, "returned score inf for query 'q01', document 's-cardio-01'"),
    ({"q99": {"s-cardio-01": 1.0}}, "returned query id 'q99', which is not one of the 10 queries it was given"),
])
def test_a_rerankers_bad_output_is_one_line(register, run_cli, tmp_path, bad, message):
    class Bad:
        def rerank(self, queries, corpus, candidates, *, task, context):
            return {qid: dict(docs) for qid, docs in candidates.items()} | bad

    register_stage(register, "reranker", "bad-rerank", Bad)
    code, _, err = run_cli("run", "--plugin", "overlap", "--plugin", "bad-rerank", "--tasks", "sample",
                           "--output", tmp_path / "out")
    assert_user_error(code, err, "reranker 'bad-rerank' (from bad-rerank-plugin) returned", message)
    assert not any(p.name.endswith(".trec") and "bad-rerank" in str(p) for p in (tmp_path / "out").rglob("*"))


@pytest.mark.parametrize("rewrite, message", [
    (lambda qs: qs[1:], "returned no rewritten query for 1 of 10 queries (e.g. 'q01'); return one per query"),
    (lambda qs: [*qs, qs[0]], "returned query 'q01' twice; return one rewritten query per query"),
    (lambda qs: [qs[0].__class__("q99", "x"), *qs[1:]], "returned query id 'q99', which is not one of the 10 "
                                                       "queries it was given"),
    (lambda qs: [q.__class__(q.id, q.text, generated=(None,)) for q in qs], "returned query 'q01' with "
                                                                           "generated[0] None (NoneType)"),
    (lambda qs: [q.__class__(q.id, 7) for q in qs], "returned query 'q01' with text 7 (int); text and method "
                                                   "are strings"),
    (lambda qs: [q.__class__(q.id, q.text, generated="doc") for q in qs], "with generated 'doc' (str)"),
    (lambda qs: {q.id: q for q in qs}, "returned dict; return a list of Query, one per query it was given"),
    (lambda qs: [q.id for q in qs], "returned 'q01' (str) among its queries; return each as a Query"),
])
def test_a_rewriters_bad_output_is_one_line(register, run_cli, tmp_path, rewrite, message):
    class Bad:
        def rewrite(self, queries, *, task, context):
            return rewrite(list(queries))

    register_stage(register, "rewriter", "bad-rewrite", Bad)
    code, _, err = run_cli("run", "--plugin", "bad-rewrite", "--plugin", "overlap", "--tasks", "sample",
                           "--output", tmp_path / "out")
    assert_user_error(code, err, "rewriter 'bad-rewrite' (from bad-rewrite-plugin) returned", message)
    assert written_files(tmp_path / "out") == []


# Scores at the edges of what a float holds, ints among them: what passes the check must come back.
EDGES = [1e308, -1e308, 5e-324, -0.0, 0, 3, 2**70, 0.1 + 0.2, 1 / 3, -2.5, 1e-300, 7]


@pytest.mark.parametrize("scores, stored", [
    (EDGES, True),
    ([float("inf"), *EDGES], False),
    ([*EDGES, -float("inf")], False),
    ([float("nan"), *EDGES], False),
])
def test_what_a_run_stores_every_reader_reads_back(register, run_cli, data_dir, tmp_path, scores, stored):
    """A run written through the runner is read by ``run-file`` (the same ranking, the same score),
    ``r2med show`` (its queries and each query's ranking) and the leaderboard; a run that could not
    be is refused before anything is written."""
    given = {}

    class Edges:
        def index(self, corpus, *, task, context):
            self.ids = corpus.ids

        def search(self, queries, *, task, top_k, context):
            given.update({q.id: dict(zip(self.ids[i:], scores)) for i, q in enumerate(queries)})
            return given

    register_retriever(register, "edges", Edges)
    out = tmp_path / "out"
    code, printed, err = run_cli("run", "--plugin", "edges", "--data-dir", data_dir, "--tasks", "Biology",
                                 "--output", out, "--json")
    if not stored:
        assert_user_error(code, err, "retriever 'edges' (from edges-plugin) returned score")
        assert written_files(out) == []
        return
    assert code == 0, err
    run = json.loads(printed)
    (folder,) = run["results_dirs"]
    assert sorted(given) == sorted(r["id"] for r in read_jsonl(SAMPLE / "query.jsonl"))
    for qid, docs in given.items():
        code, printed, err = run_cli("show", folder, "--query", qid, "--data-dir", data_dir, "--json")
        assert code == 0, err
        best = sorted(docs.items(), key=lambda item: -item[1])[:10]  # ties in the order given
        assert [(d["doc_id"], d["score"]) for d in json.loads(printed)["top"]] == best
    code, printed, err = run_cli("run", "--plugin", "run-file", "-o", f"path={folder}", "--data-dir", data_dir,
                                 "--tasks", "Biology", "--output", tmp_path / "again", "--json")
    assert code == 0, err
    again = json.loads(printed)
    assert again["tasks"][0]["ndcg_at_10"] == run["tasks"][0]["ndcg_at_10"]
    code, printed, err = run_cli("show", folder, *again["results_dirs"], "--json")
    assert code == 0, err
    code, printed, err = run_cli("leaderboard", out, "--include-local", "--no-published", "--format", "csv")
    assert code == 0, err
    (row,) = [r for r in csv.DictReader(io.StringIO(printed)) if "edges" in r["System"]]
    assert float(row["Biology"]) == run["tasks"][0]["ndcg_at_10_x100"]
