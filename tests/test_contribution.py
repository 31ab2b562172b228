"""What blocks a pull request to the MTEB results repository, checked before it is opened
(r2med_tasks.results.contribution, and ``r2med export-mteb``, which reports it).

A results tree made by hand as r2med (and mteb) write one, for a model mteb registers at the
revision its ModelMeta gives, passes; each defect the repository's tests (or r2med's knowledge of
its tasks) refuse, introduced alone, gives exactly its own problem lines."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import on_the_benchmark

from r2med_tasks.results.contribution import check_results_tree, mteb_version_above_2
from r2med_tasks.results.export import export_run
from r2med_tasks.mteb_adapter import installed_version, task_result_text
from r2med_tasks.tasks.specs import PINNED_REVISIONS

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "8b3219a92973c328a8e22fadcfa821b5dc75636a"  # mteb's ModelMeta of MODEL (a test checks)
TASK = "R2MEDBiologyRetrieval"
MODEL_DIR = "results/sentence-transformers__all-MiniLM-L6-v2"
FOLDER = f"{MODEL_DIR}/{REVISION}"
META, RESULT, SETTINGS = f"{FOLDER}/model_meta.json", f"{FOLDER}/{TASK}.json", f"{FOLDER}/run_settings.jsonl"
SAMPLE = "R2MEDSampleRetrieval"


def result_text(task: str = TASK, revision: str | None = None) -> str:
    """A TaskResult as r2med writes it (mteb's bytes), of ``task``'s test split."""
    return task_result_text(task, PINNED_REVISIONS[TASK] if revision is None else revision,
                            {"ndcg_at_10": 0.25, "main_score": 0.25}, 1.5, [])


def settings_line(task: str = TASK, **fields) -> str:
    """A run_settings.jsonl row as mteb's ResultCache.save_to_cache writes it."""
    return json.dumps({"task": task, "splits": ["test"], "version": {"mteb": installed_version(), "torch": None},
                       "encode_kwargs": {}, "subsets": ["default"], **fields}) + "\n"


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> Path:
    """DEST holding one valid exported folder (made once; tests copy it)."""
    import mteb

    dest = tmp_path_factory.mktemp("valid")
    folder = dest / FOLDER
    folder.mkdir(parents=True)
    (folder / "model_meta.json").write_text(json.dumps(mteb.get_model_meta(MODEL).to_dict(), default=str, indent=4))
    (folder / f"{TASK}.json").write_text(result_text())
    (folder / "run_settings.jsonl").write_text(settings_line())
    return dest


@pytest.fixture
def dest(valid, tmp_path) -> Path:
    shutil.copytree(valid, tmp_path / "dest")
    return tmp_path / "dest"


def assert_problems(lines: list[str], expected: list[tuple[str, str]]) -> None:
    """Each line is one expected (path, fragment), and each expected one is a line."""
    unmatched = list(lines)
    for path, fragment in expected:
        found = [line for line in unmatched if line.startswith(f"{path}: ") and fragment in line]
        assert found, f"no line for {path}: ...{fragment}... in {lines}"
        unmatched.remove(found[0])
    assert not unmatched, unmatched
    assert all("\n" not in line for line in lines)


def edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def move(dest: Path, old: str, new: str) -> None:
    (dest / new).parent.mkdir(parents=True, exist_ok=True)
    (dest / old).rename(dest / new)


def rename_model(dest: Path, name: str, folder: str) -> None:
    edit_json(dest / META, lambda m: m.update(name=name))
    move(dest, MODEL_DIR, f"results/{folder}")


def revise(dest: Path, revision: object, folder: str | None = None) -> None:
    edit_json(dest / META, lambda m: m.update(revision=revision))
    if folder:
        move(dest, FOLDER, f"{MODEL_DIR}/{folder}")


def second_revision(dest: Path, folder: str, revision: str) -> None:
    shutil.copytree(dest / FOLDER, dest / MODEL_DIR / folder)
    edit_json(dest / MODEL_DIR / folder / "model_meta.json", lambda m: m.update(revision=revision))


def experiment(dest: Path, keep_base: bool) -> None:
    variant = dest / FOLDER / "experiments" / "b_0.9"
    variant.mkdir(parents=True)
    for name in ("model_meta.json", f"{TASK}.json", "run_settings.jsonl"):
        shutil.copy(dest / FOLDER / name, variant / name)
        if not keep_base:
            (dest / FOLDER / name).unlink()
    edit_json(variant / "model_meta.json", lambda m: m.update(experiment_kwargs={"b": 0.9}))


def write(path: str, text: str | bytes) -> Callable[[Path], None]:
    def _write(dest: Path) -> None:
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            (dest / path).write_bytes(text)
        else:
            (dest / path).write_text(text)
    return _write


def append(path: str, text: str) -> Callable[[Path], None]:
    return lambda dest: (dest / path).write_text((dest / path).read_text() + text)


def score_block(change: Callable[[dict], None]) -> Callable[[Path], None]:
    return lambda dest: edit_json(dest / RESULT, lambda r: change(r["scores"]["test"][0]))


OTHER = "0123456789abcdef0123456789abcdef01234567"
MOVED = "results/sentence-transformers__all-MiniLM-L6-v2-copy"
DEFECTS: dict[str, tuple[Callable[[Path], None], list[tuple[str, str]]]] = {
    # layout and model_meta.json (test_correct_folder_structure, test_ensure_correct_metadata)
    "no model_meta.json": (lambda d: (d / META).unlink(), [(FOLDER, "no model_meta.json")]),
    "model_meta.json not JSON": (write(META, "{"), [(META, "not a JSON file")]),
    "a file in the model's folder": (write(f"{MODEL_DIR}/notes.txt", "x"),
                                     [(f"{MODEL_DIR}/notes.txt", "not a revision folder")]),
    "a folder of JSON in the revision folder": (write(f"{FOLDER}/r2med/pipeline.json", "{}"),
                                                [(f"{FOLDER}/r2med", "not part of mteb's layout")]),
    "model folder not the name's": (lambda d: move(d, MODEL_DIR, MOVED),
                                     [(f"{MOVED}/{REVISION}/model_meta.json",
                                       f"belongs in {MODEL_DIR}/, not {MOVED}/")]),
    # every name mteb registers has an organisation, so a name without one is also unregistered
    "name without organisation": (lambda d: rename_model(d, "all-MiniLM-L6-v2", "all-MiniLM-L6-v2"),
                                  [(f"results/all-MiniLM-L6-v2/{REVISION}/model_meta.json", "names no organisation"),
                                   ("results/all-MiniLM-L6-v2", "'all-MiniLM-L6-v2' is not registered in mteb")]),
    "revision not a commit": (lambda d: revise(d, "main", "main"),
                              [(f"{MODEL_DIR}/main/model_meta.json", "'main' is neither a 40-hex commit")]),
    "revision in upper case": (lambda d: revise(d, REVISION.upper(), REVISION.upper()),
                               [(f"{MODEL_DIR}/{REVISION.upper()}/model_meta.json", "neither a 40-hex commit")]),
    "revision null": (lambda d: revise(d, None), [(META, "no revision (got None)")]),
    "revision not the folder's": (lambda d: revise(d, OTHER), [(META, f"revision '{OTHER}' is not its folder's")]),
    "one revision in two folders": (lambda d: second_revision(d, OTHER, REVISION),
                                    [(f"{MODEL_DIR}/{OTHER}/model_meta.json", "is not its folder's name"),
                                     (META, f"also declared in {OTHER}/"),
                                     (f"{MODEL_DIR}/{OTHER}/model_meta.json", f"also declared in {REVISION}/"),
                                     (RESULT, f"also under revision {OTHER}"),
                                     (f"{MODEL_DIR}/{OTHER}/{TASK}.json", f"also under revision {REVISION}")]),
    # (test_duplicate_results)
    "a task under two revisions": (lambda d: second_revision(d, "1", "1"),
                                   [(RESULT, "also under revision 1 "),
                                    (f"{MODEL_DIR}/1/{TASK}.json", f"also under revision {REVISION}")]),
    # TaskResults (test_task_name_matches_filename, check_file_sizes, mteb, PR 676)
    "TaskResult not JSON": (write(RESULT, b"\xff"), [(RESULT, "not a JSON file")]),
    "file name not the task's": (lambda d: move(d, RESULT, f"{FOLDER}/Biology.json"),
                                 [(f"{FOLDER}/Biology.json", f"differs from its task_name '{TASK}'")]),
    "over 10 MB": (append(RESULT, " " * (10 * 1024 * 1024)), [(RESULT, "over the repository's 10 MB limit")]),
    "mteb_version 1.x": (lambda d: edit_json(d / RESULT, lambda r: r.update(mteb_version="1.38.0")),
                         [(RESULT, "mteb_version '1.38.0': the repository takes results of mteb > 2.0.0")]),
    "score block of mteb 2.0.0": (score_block(lambda b: b.update(mteb_version="2.0.0")),
                                  [(RESULT, "score blocks test/default '2.0.0'")]),
    "score block without hf_subset": (score_block(lambda b: b.pop("hf_subset")),
                                      [(RESULT, "scores are not mteb's (a list of score blocks with hf_subset per "
                                                "split: test[0])")]),
    "mteb cannot read it": (lambda d: edit_json(d / RESULT, lambda r: r.update(evaluation_time="slow")),
                            [(RESULT, "mteb cannot read it (ValidationError")]),
    "a NaN score (mteb reads it)": (score_block(lambda b: b.update(ndcg_at_10=float("nan"), recall_at_5=float("-inf"))),
                                    [(RESULT, "scores that are not numbers (NaN or Infinity) in test/default: "
                                              "ndcg_at_10, recall_at_5: the evaluation failed")]),
    # run_settings.jsonl (PR 676)
    "no run_settings.jsonl": (lambda d: (d / SETTINGS).unlink(), [(SETTINGS, "missing")]),
    "run settings of another subset": (write(SETTINGS, settings_line(subsets=["other"])),
                                       [(RESULT, "no entry in run_settings.jsonl for split/subset test/default")]),
    "run settings of mteb 1.x": (write(SETTINGS, settings_line(version={"mteb": "1.38.0"})),
                                 [(SETTINGS, "line 1: version.mteb '1.38.0'")]),
    "run settings line not JSON": (append(SETTINGS, "{bad\n"), [(SETTINGS, "line 2 is not JSON")]),
    "run settings line of no scope": (append(SETTINGS, '{"task": "X", "version": {"mteb": "2.1.0"}}\n'),
                                      [(SETTINGS, "line 2 is not an entry naming a task")]),
    # what r2med knows: mteb's tasks at mteb's revisions, registered models, no option variants
    "a task mteb lacks": (lambda d: (write(f"{FOLDER}/{SAMPLE}.json", result_text(SAMPLE, "sha256-0123"))(d),
                                     append(SETTINGS, settings_line(SAMPLE))(d)),
                          [(f"{FOLDER}/{SAMPLE}.json", f"task '{SAMPLE}' is not one of mteb's tasks")]),
    "local data": (write(RESULT, result_text(revision="sha256-0123")),
                   [(RESULT, f"dataset_revision 'sha256-0123' is not mteb's pinned {PINNED_REVISIONS[TASK]}")]),
    "model mteb does not register": (lambda d: rename_model(d, "my-org/my-model", "my-org__my-model"),
                                     [("results/my-org__my-model", "'my-org/my-model' is not registered in mteb")]),
    "option variant alone (r2med's layout)": (lambda d: experiment(d, keep_base=False),
                                              [(f"{FOLDER}/experiments/b_0.9", "option variant cannot be submitted")]),
    "option variant beside the model's results": (lambda d: experiment(d, keep_base=True),
                                                  [(f"{FOLDER}/experiments/b_0.9",
                                                    "option variant cannot be submitted")]),
}


def test_a_valid_tree_has_no_problem(dest):
    import mteb

    assert mteb.get_model_meta(MODEL).revision == REVISION
    assert mteb.get_task(TASK).metadata.revision == PINNED_REVISIONS[TASK]
    assert check_results_tree(dest / "results") == []


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_each_defect_gives_its_problem(dest, defect):
    introduce, expected = DEFECTS[defect]
    introduce(dest)
    assert_problems(check_results_tree(dest / "results"), expected)


VALID_VARIANTS: dict[str, Callable[[Path], None]] = {
    "legacy run settings (split, subset)": write(SETTINGS, json.dumps(
        {"task": TASK, "split": "test", "subset": "default", "version": {"mteb": "2.1.0"}}) + "\n"),
    "an API version as revision": lambda d: revise(d, "1", "1"),
    "mteb versions with suffixes": lambda d: (edit_json(d / RESULT, lambda r: r.update(mteb_version="2.1.0rc1")),
                                              write(SETTINGS, settings_line(version={"mteb": "2.0.1.dev3"}))(d)),
    "run settings of several splits and tasks": write(SETTINGS, settings_line(splits=["dev", "test"])
                                                      + settings_line("Other")),
    "macOS litter": lambda d: (write("results/.DS_Store", "x")(d), write(f"{MODEL_DIR}/.DS_Store", "x")(d)),
    "files beside the results": write(f"{FOLDER}/{TASK}.trec", "q Q0 d 1 1.0 run\n"),
    "a NaN nAUC (mteb's for a metric the same for every query)": score_block(
        lambda b: b.update(nauc_recall_at_100_max=float("nan"))),
}


@pytest.mark.parametrize("variant", list(VALID_VARIANTS))
def test_what_the_repository_accepts_is_no_problem(dest, variant):
    VALID_VARIANTS[variant](dest)
    assert check_results_tree(dest / "results") == []


def test_a_tree_mteb_itself_writes_has_no_problem(tmp_path):
    """The same result saved by mteb's ResultCache (its model_meta.json and run_settings.jsonl)."""
    import mteb
    from mteb.results import TaskResult

    path = tmp_path / "r.json"
    path.write_text(result_text())
    mteb.ResultCache(tmp_path / "cache").save_to_cache(TaskResult.from_disk(path), mteb.get_model_meta(MODEL))
    assert sorted(p.name for p in (tmp_path / "cache" / FOLDER).iterdir()) == \
        [f"{TASK}.json", "model_meta.json", "run_settings.jsonl"]
    assert check_results_tree(tmp_path / "cache" / "results") == []


@pytest.mark.parametrize("value,above", [("2.0.1", True), ("2.1", True), ("3", True), ("2.26.24", True),
                                         ("2.1.0rc1", True), ("2.0.0", False), ("2", False), ("1.38.0", False),
                                         ("2.0.0rc1", False), ("v2.1.0", False), ("", False), (None, False),
                                         (2.1, False)])
def test_mteb_versions_are_read_as_the_repository_reads_them(value, above):
    assert mteb_version_above_2(value) is above


# -- export_run ----------------------------------------------------------------------------------------
def test_export_copies_a_run_and_reports_nothing_for_a_valid_one(valid, tmp_path):
    export = export_run(valid / FOLDER, tmp_path / "clone", create=True)
    target = export.target
    assert target == tmp_path / "clone" / FOLDER and export.problems == [] and export.ok
    assert {p.name: p.read_bytes() for p in target.iterdir()} == {p.name: p.read_bytes()
                                                                  for p in (valid / FOLDER).iterdir()}


def test_export_reports_the_exported_folder_only(dest, tmp_path):
    """Problems of other folders already in the clone are not the export's; a clash with the same
    model's other revision is."""
    run = tmp_path / "run"
    shutil.copytree(dest / FOLDER, run)
    second_revision(dest, "1", "1")  # the clone holds the task at another revision of the model
    write("results/other__model/x/A.json", "{")(dest)  # and an unrelated broken folder
    problems = export_run(run, dest).problems
    assert_problems(problems, [(RESULT, "also under revision 1 ")])


def test_export_of_an_option_variant_says_it_cannot_be_submitted(dest, tmp_path):
    experiment(dest, keep_base=False)
    export = export_run(dest / FOLDER / "experiments" / "b_0.9", tmp_path / "clone", create=True)
    assert export.target == tmp_path / "clone" / FOLDER / "experiments" / "b_0.9"
    assert_problems(export.problems, [(f"{FOLDER}/experiments/b_0.9", "option variant cannot be submitted")])


def test_export_of_an_r2med_run_lists_its_problems(run_cli, evaluate, tmp_path):
    """`r2med-run --plugin bm25 --tasks sample`, exported: r2med's sample task is refused before
    writing; its result filed as one on the benchmark, a pipeline name (and revision) mteb does not
    register is listed."""
    (sample,) = map(Path, evaluate("bm25", output="res").results_dirs)
    code, _, err = run_cli("export-mteb", sample, tmp_path / "clone", "--create", "--json")
    assert code == 2 and f"task '{SAMPLE}' is not one of mteb's tasks" in err  # refused before writing
    assert not (tmp_path / "clone").exists()
    run = on_the_benchmark(sample, tmp_path / sample.name)
    code, out, err = run_cli("export-mteb", run, tmp_path / "clone", "--create", "--json")
    assert code == 1, err  # problems listed
    report = json.loads(out)
    assert report["ok"] is False
    folder = f"results/r2med__bm25/{run.name}"
    assert report["exported_to"] == str(tmp_path / "clone" / folder)
    copied = {p.name for p in run.iterdir() if p.suffix == ".json" or p.name == "run_settings.jsonl"}
    assert {p.name for p in (tmp_path / "clone" / folder).iterdir()} == copied
    assert_problems(report["problems"], [
        ("results/r2med__bm25", "'r2med/bm25' is not registered in mteb"),
        (f"{folder}/model_meta.json", "neither a 40-hex commit"),
        *([] if "run_settings.jsonl" in copied else [(f"{folder}/run_settings.jsonl", "missing")]),
    ])


@pytest.mark.parametrize("name,folder", [
    ("openai/text-embedding-3-large (embed_dim=512)", "openai__text-embedding-3-large_(embed_dim=512)"),  # mteb's
    ("org/a:b", "org__a_b"),  # not a plain path component everywhere: made safe (and reported as misplaced)
])
def test_export_files_a_model_under_the_repository_folder_of_its_name(valid, tmp_path, name, folder):
    run = tmp_path / "run"
    shutil.copytree(valid / FOLDER, run)
    edit_json(run / "model_meta.json", lambda m: m.update(name=name))
    export = export_run(run, tmp_path / "clone", create=True)
    assert export.target == tmp_path / "clone" / "results" / folder / REVISION
    misplaced = folder != name.replace("/", "__").replace(" ", "_")
    assert any("belongs in results/" in p for p in export.problems) is misplaced
