"""``r2med export-mteb RUN DEST`` into a clone of the MTEB results repository, as a careful
contributor: it merges with what the clone holds as mteb's ResultCache merges (run_settings.jsonl),
keeps what is the same and refuses to replace what differs (model_meta.json, TaskResults) unless
asked, never writes outside DEST (links, a missing DEST), reports the problems of what it exported
only (NaN scores included) and says so in its exit status (0 clean, 1 problems, 2 refused)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from conftest import finished_sample_run, on_the_benchmark, snapshot
from r2med_tasks.tasks.specs import PINNED_REVISIONS

SAMPLE = "R2MEDSampleRetrieval"
TASK = "R2MEDBiologyRetrieval"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "8b3219a92973c328a8e22fadcfa821b5dc75636a"  # mteb's ModelMeta of MODEL
MODEL_DIR = "results/sentence-transformers__all-MiniLM-L6-v2"
FOLDER = f"{MODEL_DIR}/{REVISION}"


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory) -> Path:
    """A real run: ``r2med-run --plugin bm25 --tasks sample`` (r2med/bm25 on the offline sample)."""
    return finished_sample_run(tmp_path_factory.mktemp("sample") / "out")


@pytest.fixture(scope="module")
def official_run(tmp_path_factory, sample_run) -> Path:
    """That run's scores as a result on R2MED's official data (Biology at mteb's pinned revision) of
    a model mteb registers, saved by mteb's own ResultCache (TaskResult, model_meta.json,
    run_settings.jsonl): a folder the results repository would merge. Its nAUCs are NaN, as mteb
    writes them when a metric is the same for every query."""
    import mteb
    from mteb.results import TaskResult

    folder = tmp_path_factory.mktemp("official")
    data = json.loads((sample_run / f"{SAMPLE}.json").read_text())
    assert any(isinstance(v, float) and math.isnan(v) for v in data["scores"]["test"][0].values())
    data.update(task_name=TASK, dataset_revision=PINNED_REVISIONS[TASK])
    (folder / f"{TASK}.json").write_text(json.dumps(data))
    mteb.ResultCache(folder / "cache").save_to_cache(TaskResult.from_disk(folder / f"{TASK}.json"),
                                                     mteb.get_model_meta(MODEL))
    return folder / "cache" / FOLDER


@pytest.fixture(scope="module")
def bm25_run(tmp_path_factory, sample_run) -> Path:
    """That run's folder (r2med/bm25, a model mteb does not register) with its result filed as one on
    the benchmark (Biology at mteb's pinned revision): the export refuses the sample itself."""
    return on_the_benchmark(sample_run, tmp_path_factory.mktemp("bm25") / "run")


def test_a_task_mteb_does_not_have_or_local_data_is_refused_before_writing(run_cli, sample_run, bm25_run, tmp_path):
    dest = tmp_path / "clone"
    dest.mkdir()
    code, out, err = export(run_cli, sample_run, dest)
    assert_refused(code, out, err, f"{SAMPLE}.json: task {SAMPLE!r} is not one of mteb's tasks", "nothing was exported")
    assert not any(dest.iterdir())
    local = copy_run(bm25_run, tmp_path / "local")
    data = json.loads((local / f"{TASK}.json").read_text())
    (local / f"{TASK}.json").write_text(json.dumps({**data, "dataset_revision": "local-0123abcd"}))
    code, out, err = export(run_cli, local, dest)
    assert_refused(code, out, err, "dataset_revision 'local-0123abcd' is not mteb's pinned", "without --data-dir")
    assert not any(dest.iterdir())


def copy_run(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def clone_folder(dest: Path, run: Path) -> Path:
    """Where an export of ``run`` (its model_meta.json's name and revision) lands in ``dest``."""
    meta = json.loads((run / "model_meta.json").read_text())
    return dest / "results" / meta["name"].replace("/", "__") / meta["revision"]


def export(run_cli, run: Path, dest: Path, *flags: str) -> tuple[int, str, str]:
    return run_cli("export-mteb", str(run), str(dest), *flags)


def assert_refused(code: int, out: str, err: str, *fragments: str) -> None:
    """Exit 2 with one line and no traceback."""
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    one_line = " ".join(err.split())
    for fragment in fragments:
        assert fragment in one_line, err


# -- run_settings.jsonl: merged as mteb merges -------------------------------------------------------------
def test_run_settings_are_merged_as_mteb_merges_them(run_cli, bm25_run, tmp_path):
    """The clone's run_settings.jsonl holds another task's entry (and a legacy one of the run's
    task): after the export it holds both tasks, exactly as mteb's ResultCache leaves it when it
    merges the run's file into the clone's (``_write_and_merge_keyed_json``)."""
    from mteb.results.task_result import _read_run_settings_from_file, _write_and_merge_keyed_json

    dest = tmp_path / "clone"
    folder = clone_folder(dest, bm25_run)
    folder.mkdir(parents=True)
    other = {"task": "OtherTask", "splits": ["dev", "test"], "version": {"mteb": "2.1.0", "torch": None},
             "encode_kwargs": {"batch_size": 8}, "subsets": ["default"]}
    legacy = {"task": TASK, "split": "test", "subset": "default", "version": {"mteb": "2.0.5"}}
    existing = json.dumps(other) + "\n" + json.dumps(legacy) + "\n"
    (folder / "run_settings.jsonl").write_text(existing)
    expected = tmp_path / "mteb" / "run_settings.jsonl"  # mteb's own merge of the same two files
    expected.parent.mkdir()
    expected.write_text(existing)
    _write_and_merge_keyed_json(expected, _read_run_settings_from_file(bm25_run / "run_settings.jsonl"))

    code, out, err = export(run_cli, bm25_run, dest)
    assert code == 1, err  # the sample run has problems of its own (not mteb's task, not registered)
    merged = (folder / "run_settings.jsonl").read_bytes()
    assert merged == expected.read_bytes()
    entries = [json.loads(line) for line in merged.decode().splitlines()]
    assert entries[0] == other  # kept
    run_entries = [json.loads(line) for line in (bm25_run / "run_settings.jsonl").read_text().splitlines()]
    assert entries[1:] == run_entries  # the run's settings replace the legacy entry of its task

    before = snapshot(dest)  # again: nothing changes
    code, out, err = export(run_cli, bm25_run, dest, "--json")
    assert code == 1 and snapshot(dest) == before
    report = json.loads(out)
    assert report["written"] == [] and len(report["unchanged"]) == 3


# -- model_meta.json and TaskResults already there -----------------------------------------------------------
def test_a_different_model_meta_is_refused_and_left_untouched(run_cli, bm25_run, tmp_path):
    dest = tmp_path / "clone"
    folder = clone_folder(dest, bm25_run)
    folder.mkdir(parents=True)
    meta = json.loads((bm25_run / "model_meta.json").read_text())
    (folder / "model_meta.json").write_text(json.dumps({**meta, "n_parameters": 7, "license": "mit"}, indent=4))
    before = snapshot(dest)
    code, out, err = export(run_cli, bm25_run, dest)
    assert_refused(code, out, err, f"{folder / 'model_meta.json'}: already there",
                   "fields n_parameters, license", "--replace-model-meta")
    assert snapshot(dest) == before  # nothing written: not the meta, not the TaskResult
    code, _, err = export(run_cli, bm25_run, dest, "--replace-model-meta")
    assert code == 1, err
    assert (folder / "model_meta.json").read_bytes() == (bm25_run / "model_meta.json").read_bytes()


def test_an_equal_model_meta_is_kept_as_it_is(run_cli, official_run, tmp_path):
    """The same metadata in other formatting: kept byte for byte, not rewritten."""
    dest = tmp_path / "clone"
    folder = dest / FOLDER
    folder.mkdir(parents=True)
    there = json.dumps(json.loads((official_run / "model_meta.json").read_text()))  # one line
    (folder / "model_meta.json").write_text(there)
    code, out, err = export(run_cli, official_run, dest, "--json")
    assert code == 0, (out, err)
    assert (folder / "model_meta.json").read_text() == there
    assert json.loads(out)["unchanged"] == [str(folder / "model_meta.json")]


def test_a_different_task_result_is_refused_unless_overwrite(run_cli, official_run, tmp_path):
    dest = tmp_path / "clone"
    shutil.copytree(official_run, dest / FOLDER)
    other = json.loads((official_run / f"{TASK}.json").read_text())
    other["scores"]["test"][0]["main_score"] = 0.123
    (dest / FOLDER / f"{TASK}.json").write_text(json.dumps(other, indent=2))
    before = snapshot(dest)
    code, out, err = export(run_cli, official_run, dest)
    assert_refused(code, out, err, f"{dest / FOLDER / TASK}.json: already there with other results", "--overwrite")
    assert snapshot(dest) == before
    code, out, err = export(run_cli, official_run, dest, "--overwrite")
    assert code == 0, (out, err)
    assert (dest / FOLDER / f"{TASK}.json").read_bytes() == (official_run / f"{TASK}.json").read_bytes()


def test_an_identical_task_result_is_left(run_cli, official_run, tmp_path):
    dest = tmp_path / "clone"
    shutil.copytree(official_run, dest / FOLDER)
    before = snapshot(dest)
    code, out, err = export(run_cli, official_run, dest)
    assert code == 0, (out, err)
    assert snapshot(dest) == before  # bytes and modification times
    assert "Already there, left as is" in out


# -- never outside DEST ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("link", ["results", "model", "revision", "task result", "run settings"])
def test_a_link_out_of_the_clone_is_refused(run_cli, bm25_run, tmp_path, link):
    dest, outside = tmp_path / "clone", tmp_path / "outside"
    folder = clone_folder(dest, bm25_run)
    outside.mkdir()
    (outside / "keep.txt").write_text("theirs")
    at = {"results": dest / "results", "model": folder.parent, "revision": folder,
          "task result": folder / f"{TASK}.json", "run settings": folder / "run_settings.jsonl"}[link]
    at.parent.mkdir(parents=True, exist_ok=True)
    if link in ("task result", "run settings"):
        (outside / at.name).write_text("{}")
        at.symlink_to(outside / at.name)
    else:
        at.symlink_to(outside, target_is_directory=True)
    before_outside, before_dest = snapshot(outside), snapshot(dest)
    code, out, err = export(run_cli, bm25_run, dest)
    assert_refused(code, out, err, f"{at}: leads out of {dest}", "through a link")
    assert snapshot(outside) == before_outside  # no file written, changed or added there
    assert snapshot(dest) == before_dest


def test_a_link_inside_the_clone_is_followed(run_cli, bm25_run, tmp_path):
    """A clone whose results/ is a link to a folder of its own: written there."""
    dest = tmp_path / "clone"
    (dest / "stored").mkdir(parents=True)
    (dest / "results").symlink_to(dest / "stored", target_is_directory=True)
    code, _, err = export(run_cli, bm25_run, dest)
    assert code == 1, err
    assert (clone_folder(dest, bm25_run) / f"{TASK}.json").is_file()
    assert (dest / "results").is_symlink() and any((dest / "stored").rglob(f"{TASK}.json"))


def test_a_missing_destination_is_refused_unless_create(run_cli, bm25_run, tmp_path):
    dest = tmp_path / "no-such-clone"
    code, out, err = export(run_cli, bm25_run, dest)
    assert_refused(code, out, err, f"{dest} does not exist", "--create")
    assert not dest.exists()
    code, out, err = export(run_cli, bm25_run, dest, "--create")
    assert code == 1, err
    for name in (f"{TASK}.json", "model_meta.json", "run_settings.jsonl"):  # a new run_settings.jsonl: the run's
        assert (clone_folder(dest, bm25_run) / name).read_bytes() == (bm25_run / name).read_bytes()


# -- what is reported, and the exit status ----------------------------------------------------------------------
def test_problems_the_clone_already_had_are_not_reported(run_cli, official_run, tmp_path):
    """The clone holds, beside the export, results with problems: in the same folder (another
    task of mteb < 2, no run settings entry; a run_settings line of mteb 1.x for it; a corrupt
    file), under another revision of the model and in another model's folder. None is the export's:
    it reports none, and exits 0."""
    dest = tmp_path / "clone"
    folder = dest / FOLDER
    folder.mkdir(parents=True)
    old = json.loads((official_run / f"{TASK}.json").read_text())
    old.update(task_name="R2MEDBioinformaticsRetrieval", mteb_version="1.38.0", dataset_revision="x")
    (folder / "R2MEDBioinformaticsRetrieval.json").write_text(json.dumps(old))
    (folder / "R2MEDMedicalSciencesRetrieval.json").write_text("{")
    (folder / "run_settings.jsonl").write_text(json.dumps({"task": "R2MEDMedicalSciencesRetrieval", "splits": ["test"],
                                                           "version": {"mteb": "1.38.0"}, "subsets": ["default"]})
                                               + "\n{not json\n")
    (folder / "model_meta.json").write_bytes((official_run / "model_meta.json").read_bytes())
    (dest / MODEL_DIR / "1").mkdir()
    (dest / MODEL_DIR / "1" / "R2MEDPMCClinicalRetrieval.json").write_text("[]")  # no model_meta.json either
    (dest / "results" / "acme__unregistered" / "main").mkdir(parents=True)
    (dest / "results" / "acme__unregistered" / "main" / "A.json").write_text("{")

    from r2med_tasks.results.contribution import check_results_tree

    assert len(check_results_tree(dest / "results")) >= 6  # the clone's own problems, all there
    code, out, err = export(run_cli, official_run, dest, "--json")
    assert code == 0, (out, err)
    report = json.loads(out)
    assert report["problems"] == [] and report["ok"] is True


def test_a_nan_score_is_reported_and_exits_1(run_cli, official_run, tmp_path):
    run = copy_run(official_run, tmp_path / "run")
    result = json.loads((run / f"{TASK}.json").read_text())
    result["scores"]["test"][0].update(ndcg_at_10=float("nan"), main_score=float("inf"))
    (run / f"{TASK}.json").write_text(json.dumps(result, indent=2))  # NaN and Infinity, as Python writes them
    dest = tmp_path / "clone"
    dest.mkdir()
    code, out, err = export(run_cli, run, dest, "--json")
    assert code == 1, err
    report = json.loads(out)
    assert report["ok"] is False and report["exported_to"] == str(dest / FOLDER)
    (line,) = report["problems"]
    assert line.startswith(f"{FOLDER}/{TASK}.json: scores that are not numbers (NaN or Infinity) in test/default: ")
    assert "ndcg_at_10" in line and "main_score" in line and "nauc" not in line

    code, out, _ = export(run_cli, run, dest)  # the same, as text
    assert code == 1 and "Before a pull request" in out and "NaN or Infinity" in " ".join(out.split())


def test_a_clean_export_exits_0_and_says_ok(run_cli, official_run, tmp_path):
    dest = tmp_path / "clone"
    dest.mkdir()
    code, out, err = export(run_cli, official_run, dest, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report == {"exported_to": str(dest / FOLDER),
                      "written": [str(dest / FOLDER / n) for n in (f"{TASK}.json", "run_settings.jsonl",
                                                                   "model_meta.json")],
                      "unchanged": [], "problems": [], "ok": True}


def test_a_new_unregistered_model_is_reported_an_old_one_not(run_cli, bm25_run, tmp_path):
    """'not registered in mteb' is the export's when it brings the model's folder; when the clone
    holds the model's results already, the export does not change that check's outcome."""
    dest = tmp_path / "clone"
    dest.mkdir()
    _, out, _ = export(run_cli, bm25_run, dest, "--json")
    assert any("is not registered in mteb" in p for p in json.loads(out)["problems"])
    other = tmp_path / "clone2"
    shutil.copytree(clone_folder(dest, bm25_run), other / "results" / "r2med__bm25" / "x")
    _, out, _ = export(run_cli, bm25_run, other, "--json")
    problems = json.loads(out)["problems"]
    assert problems and not any("is not registered in mteb" in p for p in problems)


def test_run_settings_in_the_clone_that_mteb_cannot_read_is_refused(run_cli, bm25_run, tmp_path):
    dest = tmp_path / "clone"
    folder = clone_folder(dest, bm25_run)
    folder.mkdir(parents=True)
    (folder / "run_settings.jsonl").write_bytes(b'{"task": "\xff"}\n')
    before = snapshot(dest)
    code, out, err = export(run_cli, bm25_run, dest)
    assert_refused(code, out, err, f"{folder / 'run_settings.jsonl'}: not UTF-8 text")
    assert snapshot(dest) == before
