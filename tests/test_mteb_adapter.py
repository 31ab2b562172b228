"""``r2med_tasks.mteb_adapter``: the one module that uses mteb, and what r2med reproduces of it.

Checks that the installed mteb is in the adapter's declared range, that pyproject requires the
same range, that no other module imports mteb, that every mteb entry point the adapter uses exists
and behaves as expected on tiny examples, and that the two things r2med computes without mteb equal
what the installed mteb computes: the score dict of its retrieval evaluator (key order and values
bit for bit, on many constructed runs, and its nAUCs on many constructed inputs) and the bytes of a
TaskResult file. A new mteb that changes either fails here.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from packaging.requirements import Requirement

from r2med_tasks import mteb_adapter
from r2med_tasks.scoring.evaluation import K_VALUES, PER_QUERY, PYTREC_PER_QUERY, score
from conftest import TESTS
from test_imports import all_imports

ROOT = Path(__file__).resolve().parents[1]

QRELS = {"q1": {"a": 1, "c": 2}, "q2": {"x": 1}, "q3": {"m": 1}}
RUN = {
    "q1": {"b": 3.0, "a": 2.0, "d": 1.5, "c": 1.0},  # relevant at ranks 2 and 4
    "q2": {"x": 0.9, "y": 0.1},  # relevant first
    "q3": {"n": 5.0, "o": 4.0},  # relevant never retrieved
}


def test_installed_mteb_is_in_the_supported_range():
    installed = version("mteb")
    assert mteb_adapter.installed_version() == installed
    assert mteb_adapter.SUPPORTED.contains(installed), f"mteb {installed} is outside {mteb_adapter.SUPPORTED}"


def test_pyproject_requires_the_adapters_range():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    mteb = [Requirement(d) for d in deps if Requirement(d).name == "mteb"]
    assert len(mteb) == 1 and mteb[0].specifier == mteb_adapter.SUPPORTED


def test_only_the_adapter_imports_mteb():
    users = sorted({i.where() for i in all_imports()
                    if (i.target == "mteb" or i.target.startswith("mteb.")) and not i.type_only
                    and i.importer != "r2med_tasks.mteb_adapter"})
    assert not users, f"mteb imported outside r2med_tasks/mteb_adapter.py: {users}"


@pytest.mark.process  # what a fresh interpreter imports
def test_importing_the_adapter_imports_no_mteb():
    code = "import sys, r2med_tasks.mteb_adapter; print(sorted(m for m in ('mteb', 'torch', 'numpy') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


WARM_WRITE = """
import sys
from pathlib import Path
from r2med_tasks.scoring.evaluation import score
from r2med_tasks.results.folder import ResultsFolder
from r2med_tasks.results.identity import PipelineSpec
spec = PipelineSpec("BM25", {"name": "bm25s", "revision": "0"}, {}, {}, {}, {}, composite=False)
folder = ResultsFolder.for_pipeline(Path(sys.argv[1]), spec)
(folder.path / "model_meta.json").parent.mkdir(parents=True)
(folder.path / "model_meta.json").write_text("{}")  # written by the first task of a run, mteb imported then
run, qrels = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 1.0}}, {"q1": {"b": 1}, "q2": {"c": 0}}
scores, per_query = score(run, qrels)
folder.write("R2MEDBiologyRetrieval", "rev", {}, scores, run, per_query, evaluation_time=1.0, phases=[])
print(sorted(m for m in ("mteb", "sklearn", "pandas", "scipy", "datasets") if m in sys.modules))
"""


@pytest.mark.process  # what a fresh interpreter imports
def test_scoring_and_writing_a_result_import_no_mteb(tmp_path):
    """A warm run (model_meta.json written) scores and writes TaskResults without mteb's import cost."""
    out = subprocess.run([sys.executable, "-c", WARM_WRITE, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert len(list(tmp_path.rglob("R2MEDBiologyRetrieval.json"))) == 1


# ---------------------------------------------------------------- metrics


def ndcg(gains_in_rank_order: list[int], all_gains: list[int], k: int) -> float:
    """nDCG@k with trec_eval's linear gains and log2(rank + 1) discount."""
    dcg = sum(g / math.log2(r + 1) for r, g in enumerate(gains_in_rank_order[:k], 1))
    ideal = sum(g / math.log2(r + 1) for r, g in enumerate(sorted(all_gains, reverse=True)[:k], 1))
    return dcg / ideal if ideal else 0.0


def test_scores_equal_pytrec_eval_and_hand_computed_values():
    scores, per_query = score(RUN, QRELS)

    measures = {f"{m}.{','.join(map(str, K_VALUES))}" for m in ("ndcg_cut", "map_cut", "recall", "P", "success")}
    expected = pytrec_eval.RelevanceEvaluator(QRELS, measures).evaluate(RUN)
    assert per_query.keys() == expected.keys()
    for qid in expected:
        assert list(per_query[qid]) == list(PER_QUERY)  # judged@10 and condensed nDCG: tests/test_judged.py
        for name, measure in PYTREC_PER_QUERY.items():
            assert per_query[qid][name] == expected[qid][measure]

    names = {"ndcg_at": "ndcg_cut", "map_at": "map_cut", "recall_at": "recall", "precision_at": "P", "hit_rate_at": "success"}
    for ours, theirs in names.items():
        for k in K_VALUES:
            mean = sum(expected[q][f"{theirs}_{k}"] for q in expected) / len(expected)
            assert scores[f"{ours}_{k}"] == pytest.approx(mean, abs=5.1e-6), (ours, k)  # mteb keeps 5 decimals

    # by hand: q1 ranks b, a, d, c (gains 0, 1, 0, 2); q2 finds x first; q3 finds nothing
    q1 = ndcg([0, 1, 0, 2], [1, 2], 10)
    assert per_query["q1"]["ndcg_at_10"] == pytest.approx(q1)
    assert scores["ndcg_at_10"] == scores["main_score"] == round((q1 + 1.0 + 0.0) / 3, 5)
    assert scores["mrr_at_10"] == (1 / 2 + 1 + 0) / 3
    assert scores["recall_at_3"] == round((1 / 2 + 1 + 0) / 3, 5)
    assert scores["accuracy"] == scores["recall_at_1"] == round(1 / 3, 5)


def mtebs_scores(run: dict, qrels: dict) -> tuple[dict, dict]:
    """What mteb's retrieval evaluator stores for ``run`` (``main_score`` added as r2med adds it),
    and its per-query pytrec_eval measures."""
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores, make_score_dict

    run = {qid: {d: float(s) for d, s in docs.items()} for qid, docs in run.items()}
    r = calculate_retrieval_scores(run, qrels, list(K_VALUES))
    scores = make_score_dict(ndcg=r.ndcg, _map=r.map, recall=r.recall, precision=r.precision, mrr=r.mrr,
                             naucs=r.naucs, naucs_mrr=r.naucs_mrr, hit_rate=r.hit_rate, task_scores={})
    return {**scores, "main_score": scores["ndcg_at_10"]}, r.all_scores


def constructed(seed: int, n_queries: int, n_docs, score_of, *, grades=(1,), judged=3, shared=False):
    """A run and its judgments: ``n_docs(rng)`` documents per query drawn from a small pool (ids
    collide, so ties are broken by id), scored by ``score_of(rng)``, inserted in random order;
    ``judged`` judgments per query graded from ``grades``, some of documents not retrieved.
    ``shared``: every query gets the same documents and scores."""
    rng = random.Random(seed)
    pool = [f"doc{i}" for i in range(max(50, 2 * n_docs(rng)))]
    run, qrels = {}, {}
    same = None
    for q in range(n_queries):
        qid = f"q{q:03d}"
        if same is None or not shared:
            docs = rng.sample(pool, min(n_docs(rng), len(pool)))
            same = {d: score_of(rng) for d in docs}
        run[qid] = dict(same)
        qrels[qid] = {d: rng.choice(grades) for d in rng.sample(pool, judged)}
    return run, qrels


def tied(rng: random.Random) -> float:
    """Scores from a few values, so most documents tie with others."""
    return rng.choice([0.5, 1.0, 1.0, 2.25])


RUNS = {
    "ties": constructed(1, 60, lambda rng: rng.randrange(1, 40), tied, grades=(0, 1, 2)),
    "float scores": constructed(2, 40, lambda rng: 30, lambda rng: rng.random()),
    "integer scores": constructed(3, 40, lambda rng: 25, lambda rng: rng.randrange(-3, 4)),
    "negative scores": constructed(4, 30, lambda rng: 20, lambda rng: -rng.expovariate(1.0), grades=(1, 2)),
    "empty and one-document runs": constructed(5, 40, lambda rng: rng.choice([0, 1, 1, 2, 10]),
                                               lambda rng: rng.random()),
    "grade 0 only for some queries": constructed(6, 40, lambda rng: 15, tied, grades=(0, 0, 0, 1), judged=2),
    "judged documents not retrieved": constructed(7, 40, lambda rng: 3, lambda rng: rng.random(), judged=8),
    "over 1000 documents": constructed(8, 3, lambda rng: 1300, lambda rng: round(rng.random(), 2), judged=40),
    "identical runs": constructed(9, 20, lambda rng: 12, tied, grades=(0, 1), shared=True),
    "one score for all": constructed(13, 30, lambda rng: 20, lambda rng: 1.0, grades=(0, 1, 2)),
    "one query": constructed(10, 1, lambda rng: 10, lambda rng: rng.random()),
    "two queries": constructed(11, 2, lambda rng: 10, tied, grades=(0, 1, 2)),
    "many queries": constructed(12, 200, lambda rng: rng.randrange(0, 30), tied, grades=(0, 1, 2)),
    "hand-made": (RUN, QRELS),
}


def same(a, b) -> bool:
    """Equal in value and type (``repr``: ``np.float64(0.5)`` is not ``0.5``), NaN equal to NaN."""
    return repr(a) == repr(b)


@pytest.mark.parametrize("case", RUNS)
def test_scores_equal_mtebs_evaluator(case):
    run, qrels = RUNS[case]
    ours, ours_per_query = score(run, qrels)
    theirs, theirs_per_query = mtebs_scores(run, qrels)
    assert list(ours) == list(theirs)  # the TaskResult lists them in this order
    differ = {k: (ours[k], theirs[k]) for k in theirs if not same(ours[k], theirs[k])}
    assert not differ, differ
    assert list(ours_per_query) == list(theirs_per_query)
    assert {q: {name: m[name] for name in PYTREC_PER_QUERY} for q, m in ours_per_query.items()} == \
        {q: {name: m[key] for name, key in PYTREC_PER_QUERY.items()} for q, m in theirs_per_query.items()}


# Query counts around numpy's summation blocks (8 and 128 values), where a sum's order of additions
# changes, and the kinds of values a metric and a confidence take: ties, one value for all, NaN and
# infinite confidences (scores may be infinite).
ABSTENTION_SIZES = (1, 2, 3, 7, 8, 9, 16, 17, 127, 128, 129, 257, 1100)
METRIC_VALUES = {
    "floats": lambda rng, n: rng.random(n),
    "few values": lambda rng, n: rng.choice([0.0, 0.1, 1 / 3, 0.5, 1.0], size=n),
    "two decimals": lambda rng, n: np.round(rng.random(n), 2),
    "one value": lambda rng, n: np.full(n, 0.1),
    "zero for all": lambda rng, n: np.zeros(n),  # a flat oracle curve: NaN
    "0 or 1": lambda rng, n: rng.choice([0.0, 1.0], size=n),
}
CONFIDENCE_VALUES = {
    "floats": lambda rng, n: rng.random(n),
    "ties": lambda rng, n: rng.choice([0.0, 0.5, 2.25, -1.0], size=n),
    "one decimal": lambda rng, n: np.round(rng.normal(size=n), 1),
    "zeros": lambda rng, n: np.zeros(n),
    "nan and inf": lambda rng, n: np.where(rng.random(n) < 0.2, np.nan, np.where(rng.random(n) < 0.2, np.inf,
                                                                                  rng.random(n))),
}


@pytest.mark.parametrize("n", ABSTENTION_SIZES)
def test_naucs_equal_mtebs_nauc(n):
    """The nAUCs, computed for all metrics at once, are mteb's ``nauc`` of each metric and
    confidence function, bit for bit, NaN where mteb's is."""
    import warnings

    from mteb._evaluators.retrieval_metrics import nauc

    from r2med_tasks.scoring.evaluation import _naucs

    rng = np.random.default_rng(n)
    metrics = {f"{kind} {i}": values(rng, n).tolist() for kind, values in METRIC_VALUES.items() for i in range(2)}
    for kinds in [list(CONFIDENCE_VALUES)[i:i + 3] for i in range(len(CONFIDENCE_VALUES) - 2)]:
        confidences = {kind: CONFIDENCE_VALUES[kind](rng, n).tolist() for kind in kinds}
        ours = _naucs(confidences, metrics)
        assert list(ours) == [f"nauc_{key}_{kind}" for key in metrics for kind in kinds]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NaN and inf confidences, as in mteb
            theirs = {f"nauc_{key}_{kind}": nauc(np.array(confidences[kind]), np.array(values))
                      for key, values in metrics.items() for kind in kinds}
        differ = {k: (ours[k], theirs[k]) for k in theirs if not same(ours[k], theirs[k])}
        assert not differ, differ
    assert any(isinstance(v, float) and math.isnan(v) for v in theirs.values())  # "zero for all"


def test_constructed_runs_reach_the_cases_they_are_named_for():
    assert any(isinstance(v, float) and math.isnan(v) for v in score(*RUNS["identical runs"])[0].values())
    assert {len(d) for d in RUNS["empty and one-document runs"][0].values()} >= {0, 1}
    assert any(all(g == 0 for g in j.values()) for j in RUNS["grade 0 only for some queries"][1].values())
    assert max(len(d) for d in RUNS["over 1000 documents"][0].values()) > 1000


# ---------------------------------------------------------------- tasks


def test_task_metadata_of_a_registered_task_carries_the_revision_used():
    from mteb.abstasks.task_metadata import TaskMetadata

    from r2med_tasks.tasks.specs import R2MED_TASKS

    task = R2MED_TASKS[0]
    pinned = mteb_adapter.task_metadata(task.name, task.revision, dict)
    assert isinstance(pinned, TaskMetadata) and pinned.name == task.name and pinned.revision == task.revision
    other = mteb_adapter.task_metadata(task.name, "abc123", dict)
    assert other.revision == other.dataset["revision"] == "abc123" and other.dataset["path"] == task.hub_path


def test_task_metadata_of_an_unknown_task_is_built_from_fields():
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    meta = SAMPLE_TASK.mteb_metadata("local-rev")
    assert meta.name == SAMPLE_TASK.name and meta.revision == "local-rev" and meta.main_score == "ndcg_at_10"


def test_retrieval_task_loads_what_it_is_given():
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    from r2med_tasks.tasks.specs import SAMPLE_TASK

    meta = SAMPLE_TASK.mteb_metadata("rev")
    task = mteb_adapter.retrieval_task("Tiny", meta, lambda: ({"a": "alpha", "b": "beta"}, {"q1": "first?"}, {"q1": {"a": 1}}))
    assert isinstance(task, AbsTaskRetrieval) and type(task).__name__ == "Tiny" and task.metadata == meta
    task.load_data()
    assert task.corpus["test"] == {"a": {"text": "alpha"}, "b": {"text": "beta"}}
    assert task.queries["test"] == {"q1": "first?"} and task.relevant_docs["test"] == {"q1": {"a": 1}}


# ---------------------------------------------------------------- results


def mtebs_task_result(task, revision: str, scores: dict, evaluation_time, phases, path: Path) -> bytes:
    """The file mteb writes for a test split's scores, as ``mteb.evaluate`` builds it."""
    from types import SimpleNamespace

    from mteb.results import TaskResult

    result = TaskResult.from_task_results(SimpleNamespace(metadata=task.mteb_metadata(revision)),
                                          {"test": {"default": scores}}, evaluation_time, evaluation_phases=phases)
    result.to_disk(path)
    return path.read_bytes()


def test_task_result_text_is_what_mteb_writes(tmp_path):
    from mteb.results import TaskResult

    from r2med_tasks.tasks.specs import R2MED_TASKS, SAMPLE_TASK

    scores, _ = score(*RUNS["identical runs"])  # NaN nAUCs, numpy floats
    rounds_apart = 0.0424505  # numpy's round and Python's give different 6-decimal values
    scores.update({"previous_results_model_meta": {"model_name": "bm25s", "revision": "0_1_10"},
                   "tuning_queries": 12, "held_out": True, "note": "ä", "ratio": float("nan"),
                   "tuned": {"b": np.float64(rounds_apart),
                             "k1": [np.float64(rounds_apart), rounds_apart, [rounds_apart]]},
                   "pair": (rounds_apart, 2)})
    phases = [{"name": "Scoring", "start": 1, "end": 2.5, "split": "test", "subset": "default"}]  # ints become floats
    for task, revision in [*((t, t.revision) for t in R2MED_TASKS), (R2MED_TASKS[0], "other-rev"),
                           (SAMPLE_TASK, "local-rev")]:
        path = tmp_path / f"{task.name}.json"
        theirs = mtebs_task_result(task, revision, scores, 2, phases, path)
        path.write_text(mteb_adapter.task_result_text(task.name, revision, scores, 2, phases), encoding="utf-8")
        assert path.read_bytes() == theirs, task.name
    loaded = TaskResult.from_disk(path)
    assert (loaded.task_name, loaded.dataset_revision, loaded.evaluation_time) == (SAMPLE_TASK.name, "local-rev", 2.0)
    assert loaded.scores["test"][0]["main_score"] == round(scores["ndcg_at_10"], 6)


def test_model_meta_registered_and_not():
    name = "sentence-transformers/all-MiniLM-L6-v2"  # in mteb's registry
    registered = mteb_adapter.registered_model_meta(name)
    assert registered is not None and registered.name == name
    assert mteb_adapter.registered_model_meta("nobody/no-such-model") is None

    kwargs = {"experiment_kwargs": {"k1": 1.5}}
    meta = mteb_adapter.model_meta({"name": name, "revision": "r1"}, kwargs, registered=True)
    assert (meta.name, meta.revision, meta.experiment_kwargs) == (name, "r1", {"k1": 1.5})
    assert meta.n_parameters == registered.n_parameters  # the registered entry's other fields are kept

    own = mteb_adapter.model_meta({"name": name, "revision": "r2", "open_weights": False, "not_a_field": 1}, {},
                                  registered=False)
    assert (own.name, own.revision, own.open_weights, own.n_parameters) == (name, "r2", False, None)
    as_json = json.loads(mteb_adapter.model_meta_text({"name": name, "revision": "r2", "open_weights": False,
                                                       "not_a_field": 1}, {}, registered=False))
    assert as_json["name"] == name and as_json["revision"] == "r2" and "not_a_field" not in as_json


def test_model_meta_written_without_mteb_is_mteb_s():
    """model_meta.json of r2med's own names, written without importing mteb, is the text mteb's
    ModelMeta gives, for every built-in component and pipeline kind; names or fields it cannot vouch
    for go through mteb; mteb registers no name in r2med's namespace; the empty fields and the
    frameworks are the installed mteb's."""
    import typing

    import mteb
    from mteb.models import ModelMeta

    assert mteb_adapter.EMPTY_MODEL_META == ModelMeta.create_empty().to_dict()
    assert list(mteb_adapter.EMPTY_MODEL_META) == list(ModelMeta.create_empty().to_dict())
    (framework,) = typing.get_args(ModelMeta.model_fields["framework"].annotation)
    assert mteb_adapter.FRAMEWORKS == set(typing.get_args(framework))
    assert not [m.name for m in mteb.get_model_metas() if (m.name or "").startswith(mteb_adapter.OWN_NAMESPACES)]

    def by_mteb(info, update, registered):
        return json.dumps(mteb_adapter.model_meta(info, update, registered=registered).to_dict(), default=str,
                          indent=4)

    bm25 = {"name": "r2med/bm25", "revision": "lucene-9.4.2-anserini-0.21.0-en-porter-1", "display_name": "BM25",
            "framework": ["NumPy"], "open_weights": True, "use_instructions": False,
            "reference": "https://r2med.github.io/"}
    cases = [(bm25, {"experiment_kwargs": None}, True), (bm25, {"experiment_kwargs": {"k1": 1.2, "b": 0.75}}, True),
             ({"name": "r2med/o3-mini_BM25", "revision": "79837cbbc81b"}, {"experiment_kwargs": None}, False),
             ({"name": "r2med/hybrid", "revision": "f5fdcd38e868", "framework": []}, {"experiment_kwargs": None},
              False),
             ({"name": "r2med/mine", "revision": "0"}, {"experiment_kwargs": {"top_k": 10}}, True),
             ({**bm25, "name": "r2med/splade", "model_type": ["sparse"]}, {"experiment_kwargs": None}, True),
             ({"name": "local/minilm", "revision": "local-cc3dd7cbff2c3089", "framework": ["Sentence Transformers",
              "PyTorch"], "similarity_fn_name": "cosine", "use_instructions": False, "open_weights": True},
              {"experiment_kwargs": None}, True),
             ({"name": "r2med/e5", "revision": "0", "adapted_from": "intfloat/e5-mistral-7b-instruct",
               "similarity_fn_name": "dot"}, {"experiment_kwargs": None}, True),
             ({"name": "r2med/colbert", "revision": "0", "similarity_fn_name": "MaxSim", "adapted_from": None},
              {"experiment_kwargs": None}, True)]
    for info, update, registered in cases:
        assert mteb_adapter.model_meta_text(info, update, registered=registered) == \
            by_mteb(info, update, registered), info
    # not vouched for: mteb builds it (and validates it: a framework mteb does not know is refused)
    odd = {**bm25, "similarity_fn_name": "cosine", "embed_dim": 384}
    assert mteb_adapter.model_meta_text(odd, {}, registered=True) == by_mteb(odd, {}, True)
    with pytest.raises(Exception, match="framework"):
        mteb_adapter.model_meta_text({**bm25, "framework": ["Keras"]}, {}, registered=True)


@pytest.mark.process  # what a fresh interpreter imports
def test_runs_of_built_in_and_third_party_components_import_no_mteb(tmp_path):
    """A first run into a new folder (model_meta.json included) never imports mteb: of a built-in
    component (r2med's namespace) nor of a third party's (a name mteb's model modules never write)."""
    code = ("import sys\nfrom r2med_tasks.cli import cli\n"
            "for plugin in ('bm25', 'overlap'):\n"
            f"    try:\n        cli(['run', '--plugin', plugin, '--tasks', 'sample', '--output', {str(tmp_path / 'out')!r},"
            f" '--cache-dir', {str(tmp_path / 'cache')!r}], prog_name='r2med')\n    except SystemExit as e:\n"
            "        assert not e.code, e.code\n"
            "print(sorted(m for m in ('mteb', 'sklearn', 'torch') if m in sys.modules))\n")
    env = {**os.environ, "R2MED_PLUGINS": "overlap_plugin",
           "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS / "plugins_for_tests"), os.environ.get("PYTHONPATH"))
                                         if p)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    names = sorted(json.loads(meta.read_text())["name"] for meta in (tmp_path / "out").rglob("model_meta.json"))
    assert names == ["overlap_plugin/overlap", "r2med/bm25"]
    assert not mteb_adapter.may_be_registered("overlap_plugin/overlap")


def test_every_name_mteb_registers_passes_the_prefilter():
    """``may_be_registered`` finds every model name the installed mteb registers or renames, so a
    run never writes a registered model's results as an unregistered one's; a future mteb that
    builds names at run time fails here. Names it does not write are not registered."""
    import mteb
    from mteb.models.get_model_meta import _MODEL_RENAMES

    names = {m.name for m in mteb.get_model_metas() if m.name} | set(_MODEL_RENAMES)
    assert len(names) > 500
    assert not sorted(n for n in names if not mteb_adapter.may_be_registered(n))
    for absent in ("nobody/no-such-model", "overlap_plugin/overlap", "r2med/bm25", "my-org/my-model"):
        assert not mteb_adapter.may_be_registered(absent)
        assert mteb_adapter.registered_model_meta(absent) is None
