import json

import mteb
import pytest

from conftest import SAMPLE
from r2med_tasks.errors import UserError
from r2med_tasks.running.registry import build_registry
from r2med_tasks.tasks.specs import R2MED_TASKS, SAMPLE_TASK


# mteb's R2MED benchmark, read when this module is collected, before any test imports torch: building
# mteb's benchmarks creates its 2,199 tasks, each seeding torch where torch is imported, and torch
# records the caller's stack for each seed (to report a failed CUDA seeding later). On the worker that
# imports torch, under pytest's deep stacks, that took 9 s; before, it takes 0.3 s.
MTEB_R2MED = {t.metadata.name: t.metadata.dataset for t in mteb.get_benchmark("R2MED").tasks}


def test_tasks_match_mteb_registry():
    """Names, hub paths and pinned revisions are mteb's own, so results merge with MTEB's."""
    ours = {t.name: {"path": t.hub_path, "revision": t.revision} for t in R2MED_TASKS}
    assert ours == {name: {"path": d["path"], "revision": d["revision"]} for name, d in MTEB_R2MED.items()}


def test_list_tasks_json(run_cli):
    code, out, _ = run_cli("list", "tasks", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert len(rows) == 9 and "R2MEDSampleRetrieval" in rows
    assert rows["R2MEDPMCClinicalRetrieval"]["group"] == "clinical-case"
    assert rows["R2MEDMedicalSciencesRetrieval"]["revision"] == "1b48911514c80bf9182222d99752ad75e23b4b47"
    assert sum(r["queries"] for r in rows.values() if r["group"]) == 876  # R2MED's eight
    sample = rows["R2MEDSampleRetrieval"]  # its sizes, counted from the shipped files
    assert (sample["documents"], sample["queries"]) == tuple(
        len((SAMPLE / f).read_text().splitlines()) for f in ("corpus.jsonl", "query.jsonl"))


def test_list_tasks_table(run_cli):
    code, out, _ = run_cli("list", "tasks")
    assert code == 0
    assert "R2MEDIIYiClinicalRetrieval" in out and "974abbc9bc" in out and "sample" in out


@pytest.mark.parametrize("tokens, expected", [
    (["Biology"], ["R2MEDBiologyRetrieval"]),
    (["pmc-clinical"], ["R2MEDPMCClinicalRetrieval"]),
    (["PMC_Clinical,medxpertqa-exam"], ["R2MEDPMCClinicalRetrieval", "R2MEDMedXpertQAExamRetrieval"]),
    (["R2MEDIIYiClinicalRetrieval"], ["R2MEDIIYiClinicalRetrieval"]),
    (["qa-reference"], ["R2MEDBiologyRetrieval", "R2MEDBioinformaticsRetrieval", "R2MEDMedicalSciencesRetrieval"]),
    (["clinical-evidence"], ["R2MEDMedXpertQAExamRetrieval", "R2MEDMedQADiagRetrieval", "R2MEDPMCTreatmentRetrieval"]),
    (["clinical-case", "IIYi-Clinical"], ["R2MEDPMCClinicalRetrieval", "R2MEDIIYiClinicalRetrieval"]),
    (["SAMPLE"], ["R2MEDSampleRetrieval"]),
])
def test_task_names_aliases_and_groups(plugins, tokens, expected):
    assert [t.name for t in build_registry(plugins).tasks(tokens)] == expected


def test_all_eight(plugins):
    assert [t.name for t in build_registry(plugins).tasks(["r2med"])] == [t.name for t in R2MED_TASKS]


def test_unknown_task_suggests(plugins):
    with pytest.raises(UserError, match=r"--tasks Biolgy: no such task or group \(did you mean 'Biology'\?\)"):
        build_registry(plugins).tasks(["Biolgy"])


def test_unknown_task_cli_exit_2(run_cli):
    code, _, err = run_cli("run", "--plugin", "st", "--tasks", "PMC-Clinicl")
    assert code == 2
    assert "did you mean 'PMC-Clinical'?" in err and "Traceback" not in err


def test_hub_loader_uses_pinned_revision(monkeypatch):
    """The hub path asks datasets for mteb's configs and splits at the pinned revision."""
    import datasets

    calls = []
    tables = {
        "corpus": [{"id": "d1", "text": "alpha"}, {"id": "d2", "text": "beta"}],
        "query": [{"id": "q1", "text": "alpha?", "doc_id": ["d1"], "answer": "alpha"}],
        "qrels": [{"q_id": "q1", "p_id": "d1", "score": 1}],
    }

    def fake_load_dataset(path, name=None, split=None, revision=None, **kwargs):
        calls.append((path, name, split, revision))
        return datasets.Dataset.from_list(tables[name])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    task = R2MED_TASKS[0]
    data = task.load()
    assert calls == [("R2MED/Biology", c, c, task.revision) for c in ("corpus", "query", "qrels")]
    assert data.revision == task.revision and data.corpus.ids == ["d1", "d2"]
    assert [q.text for q in data.queries] == ["alpha?"] and data.qrels == {"q1": {"d1": 1}}


def test_hub_unreachable_is_one_line(run_cli, model_path, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    code, _, err = run_cli("run", "--plugin", "st", "-o", f"model={model_path}", "--tasks", "Biology",
                           "--output", tmp_path / "out")
    assert code == 2
    assert "cannot load R2MED/Biology@8b9fec2 from the Hugging Face hub" in err
    assert "--data-dir" in err and "--tasks sample" in err and "Traceback" not in err


def test_unreachable_model_is_one_line(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    code, _, err = run_cli("run", "--plugin", "st", "-o", "model=nobody/no-such-model", "--tasks", "sample")
    assert code == 2
    assert "st: cannot get model nobody/no-such-model" in err and "-o st.model=PATH" in err


def test_sample_task_is_consistent():
    data = SAMPLE_TASK.load()
    assert len(data.corpus) >= 40 and len(data.queries) == 10 and not data.warnings


def test_mteb_task_adapter_matches_harness(small_model_path, evaluate):
    """mteb.evaluate with the same model on our task object scores what the harness scores."""
    import mteb
    from sentence_transformers import SentenceTransformer

    ours = evaluate("st", model=str(small_model_path), output="ours")["sample"].ndcg_at_10

    model = SentenceTransformer(str(small_model_path), device="cpu")
    result = mteb.evaluate(model, SAMPLE_TASK.to_mteb_task(), cache=None, co2_tracker=False,
                           show_progress_bar=False)
    theirs = result.task_results[0].scores["test"][0]["ndcg_at_10"]
    assert ours == pytest.approx(theirs, abs=1e-5)
