"""``r2med_tasks.mteb_adapter``: the one module that uses mteb.

Checks that the installed mteb is in the adapter's declared range, that pyproject requires the
same range, that no other module imports mteb, and that every mteb entry point the adapter uses
exists and behaves as expected on tiny examples, the metrics against pytrec_eval and hand-computed
values, results files by reading them back with mteb's own loader.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
import pytrec_eval
from packaging.requirements import Requirement

from r2med_tasks import mteb_adapter
from test_imports import ALL_IMPORTS

ROOT = Path(__file__).resolve().parents[1]

QRELS = {"q1": {"a": 1, "c": 2}, "q2": {"x": 1}, "q3": {"m": 1}}
RUN = {
    "q1": {"b": 3.0, "a": 2.0, "d": 1.5, "c": 1.0},  # relevant at ranks 2 and 4
    "q2": {"x": 0.9, "y": 0.1},  # relevant first
    "q3": {"n": 5.0, "o": 4.0},  # relevant never retrieved
}
K_VALUES = (1, 3, 10)


def test_installed_mteb_is_in_the_supported_range():
    installed = version("mteb")
    assert mteb_adapter.installed_version() == installed
    assert mteb_adapter.SUPPORTED.contains(installed), f"mteb {installed} is outside {mteb_adapter.SUPPORTED}"


def test_pyproject_requires_the_adapters_range():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    mteb = [Requirement(d) for d in deps if Requirement(d).name == "mteb"]
    assert len(mteb) == 1 and mteb[0].specifier == mteb_adapter.SUPPORTED


def test_only_the_adapter_imports_mteb():
    users = sorted({i.where() for i in ALL_IMPORTS
                    if (i.target == "mteb" or i.target.startswith("mteb.")) and not i.type_only
                    and i.importer != "r2med_tasks.mteb_adapter"})
    assert not users, f"mteb imported outside r2med_tasks/mteb_adapter.py: {users}"


def test_importing_the_adapter_imports_no_mteb():
    code = "import sys, r2med_tasks.mteb_adapter; print(sorted(m for m in ('mteb', 'torch', 'numpy') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


# ---------------------------------------------------------------- metrics


def ndcg(gains_in_rank_order: list[int], all_gains: list[int], k: int) -> float:
    """nDCG@k with trec_eval's linear gains and log2(rank + 1) discount."""
    dcg = sum(g / math.log2(r + 1) for r, g in enumerate(gains_in_rank_order[:k], 1))
    ideal = sum(g / math.log2(r + 1) for r, g in enumerate(sorted(all_gains, reverse=True)[:k], 1))
    return dcg / ideal if ideal else 0.0


def test_retrieval_scores_equal_pytrec_eval_and_hand_computed_values():
    scores, per_query = mteb_adapter.retrieval_scores(RUN, QRELS, K_VALUES)

    measures = {f"{m}.{','.join(map(str, K_VALUES))}" for m in ("ndcg_cut", "map_cut", "recall", "P", "success")}
    expected = pytrec_eval.RelevanceEvaluator(QRELS, measures).evaluate(RUN)
    assert per_query.keys() == expected.keys()
    for qid in expected:
        for measure, value in expected[qid].items():
            assert per_query[qid][measure] == pytest.approx(value)

    names = {"ndcg_at": "ndcg_cut", "map_at": "map_cut", "recall_at": "recall", "precision_at": "P", "hit_rate_at": "success"}
    for ours, theirs in names.items():
        for k in K_VALUES:
            mean = sum(expected[q][f"{theirs}_{k}"] for q in expected) / len(expected)
            assert scores[f"{ours}_{k}"] == pytest.approx(mean, abs=5.1e-6), (ours, k)  # mteb keeps 5 decimals

    # by hand: q1 ranks b, a, d, c (gains 0, 1, 0, 2); q2 finds x first; q3 finds nothing
    q1 = ndcg([0, 1, 0, 2], [1, 2], 10)
    assert per_query["q1"]["ndcg_cut_10"] == pytest.approx(q1)
    assert scores["ndcg_at_10"] == round((q1 + 1.0 + 0.0) / 3, 5)
    assert scores["mrr_at_10"] == round((1 / 2 + 1 + 0) / 3, 5)
    assert scores["recall_at_3"] == round((1 / 2 + 1 + 0) / 3, 5)
    assert scores["accuracy"] == scores["recall_at_1"] == round(1 / 3, 5)


# ---------------------------------------------------------------- tasks


def test_task_metadata_of_a_registered_task_carries_the_revision_used():
    from mteb.abstasks.task_metadata import TaskMetadata

    from r2med_tasks.tasks import R2MED_TASKS

    task = R2MED_TASKS[0]
    pinned = mteb_adapter.task_metadata(task.name, task.revision, dict)
    assert isinstance(pinned, TaskMetadata) and pinned.name == task.name and pinned.revision == task.revision
    other = mteb_adapter.task_metadata(task.name, "abc123", dict)
    assert other.revision == other.dataset["revision"] == "abc123" and other.dataset["path"] == task.hub_path


def test_task_metadata_of_an_unknown_task_is_built_from_fields():
    from r2med_tasks.tasks import SAMPLE_TASK

    meta = SAMPLE_TASK.mteb_metadata("local-rev")
    assert meta.name == SAMPLE_TASK.name and meta.revision == "local-rev" and meta.main_score == "ndcg_at_10"


def test_retrieval_task_loads_what_it_is_given():
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    from r2med_tasks.tasks import SAMPLE_TASK

    meta = SAMPLE_TASK.mteb_metadata("rev")
    task = mteb_adapter.retrieval_task("Tiny", meta, lambda: ({"a": "alpha", "b": "beta"}, {"q1": "first?"}, {"q1": {"a": 1}}))
    assert isinstance(task, AbsTaskRetrieval) and type(task).__name__ == "Tiny" and task.metadata == meta
    task.load_data()
    assert task.corpus["test"] == {"a": {"text": "alpha"}, "b": {"text": "beta"}}
    assert task.queries["test"] == {"q1": "first?"} and task.relevant_docs["test"] == {"q1": {"a": 1}}


# ---------------------------------------------------------------- results


def test_task_result_round_trips_through_mtebs_loader(tmp_path):
    from mteb.results import TaskResult

    from r2med_tasks.tasks import SAMPLE_TASK

    scores, _ = mteb_adapter.retrieval_scores(RUN, QRELS, K_VALUES)
    scores["main_score"] = scores["ndcg_at_10"]
    phases = [{"name": "Scoring", "start": 1.0, "end": 2.0, "split": "test", "subset": "default"}]
    result = mteb_adapter.task_result(SAMPLE_TASK.mteb_metadata("rev-1"), scores, 2.5, phases)
    mteb_adapter.write_task_result(result, tmp_path / "Sample.json")
    loaded = TaskResult.from_disk(tmp_path / "Sample.json")
    assert loaded.task_name == SAMPLE_TASK.name and loaded.dataset_revision == "rev-1"
    assert loaded.evaluation_time == 2.5
    assert loaded.scores["test"][0]["ndcg_at_10"] == pytest.approx(scores["ndcg_at_10"])
    assert loaded.scores["test"][0]["main_score"] == pytest.approx(scores["ndcg_at_10"])


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
    as_json = mteb_adapter.model_meta_dict(own)
    assert as_json["name"] == name and as_json["revision"] == "r2" and "not_a_field" not in as_json
