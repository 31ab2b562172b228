"""MTEB's R2MED results on the board: the package's record of the MTEB results repository
(``r2med_tasks/data/published/mteb_r2med.json``, built by ``tools/mteb_record.py``), its rows
under ``--published all`` (source ``mteb``), and ``--mteb-results`` reading R2MED's files only.

A snapshot of embeddings-benchmark/results (a bare git directory) is optional test material under
``/work/.mirror/embeddings-benchmark+results/repo``; the tests that need it skip without it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

import r2med_tasks as r2med
from r2med_tasks.board.published import MTEB_RECORD, MTEB_RECORD_SHA256
from r2med_tasks.tasks.specs import R2MED_TASKS

MIRROR = Path("/work/.mirror/embeddings-benchmark+results/repo")
needs_mirror = pytest.mark.skipif(not (MIRROR / "HEAD").is_file(),
                                  reason="the snapshot of embeddings-benchmark/results (/work/.mirror) is absent")
TASKS = [t.name for t in R2MED_TASKS]
PINNED = {t.name: t.revision for t in R2MED_TASKS}
SHIPPED = json.loads(MTEB_RECORD.read_text(encoding="utf-8"))
LABEL = f"MTEB results (embeddings-benchmark/results@{SHIPPED['commit'][:7]}, {SHIPPED['commit_date'][:10]})"


def x100(score: float) -> float:
    """A score as the board shows it (computed here, not by the package): ×100, rounded to 2
    decimals as Python rounds the float (a 5-decimal score's tie at the third decimal goes where
    the float lies: 0.21235 -> 21.23, 0.05555 -> 5.56)."""
    return round(score * 100, 2)


def board_average(scores: list[float]) -> float:
    """The leaderboard's average: the mean of the 2-decimal values, rounded half up."""
    values = [Decimal(str(x100(s))) for s in scores]
    return float((sum(values) / len(values)).quantize(Decimal("0.01"), ROUND_HALF_UP))


def board(**options) -> list[dict]:
    return r2med.rank_systems(statistics=False, **options).records()


# --- the shipped record ---------------------------------------------------------------------------------

def test_the_shipped_record_is_the_one_its_checksum_names():
    digest, name = MTEB_RECORD_SHA256.read_text(encoding="utf-8").rstrip("\n").split("  ")
    assert name == MTEB_RECORD.name
    assert hashlib.sha256(MTEB_RECORD.read_bytes()).hexdigest() == digest
    from tools.mteb_record import dumps

    assert dumps(SHIPPED) == MTEB_RECORD.read_text(encoding="utf-8")  # as the generator writes it


def test_the_shipped_record_holds_r2med_results_only_and_is_small():
    assert SHIPPED["repository"] == "embeddings-benchmark/results"
    assert len(SHIPPED["commit"]) == 40 and SHIPPED["commit_date"].startswith("20")
    assert MTEB_RECORD.stat().st_size < 150_000
    models = SHIPPED["models"]
    assert len(models) == len({(m["name"], m["revision"], m["experiment"]) for m in models}) == 26
    for model in models:
        assert list(model["tasks"]) == TASKS  # all eight, in the board's order
        for task, result in model["tasks"].items():
            assert result["file"] == f"{model['folder']}/{task}.json" and result["file"].startswith("results/")
            assert result["main_score"] == result["ndcg_at_10"] and 0 <= result["main_score"] <= 1
            assert result["dataset_revision"] == PINNED[task]
    gte = next(m for m in models if m["name"] == "Alibaba-NLP/gte-Qwen2-7B-instruct")
    assert gte["model_meta"]["n_parameters"] == 7069121024 and gte["model_meta"]["license"] == "apache-2.0"


@needs_mirror
def test_the_shipped_record_regenerates_from_the_snapshot():
    from tools.mteb_record import build, dumps

    lines = []
    record = build(MIRROR, commit=SHIPPED["commit"], warn=lines.append)
    assert lines == [] and dumps(record) == MTEB_RECORD.read_text(encoding="utf-8")


@needs_mirror
def test_the_shipped_figures_are_the_snapshots_files():
    """Each figure against the repository's own file at the commit (read here with git), and the
    board's averages recomputed from them."""
    def show(path: str) -> dict:
        return json.loads(subprocess.run(["git", "-C", str(MIRROR), "show", f"{SHIPPED['commit']}:{path}"],
                                         check=True, capture_output=True).stdout)

    listed = subprocess.run(["git", "-C", str(MIRROR), "ls-tree", "-r", "--name-only", SHIPPED["commit"], "results"],
                            check=True, capture_output=True, text=True).stdout.split()
    r2med_files = sorted(p for p in listed if p.rsplit("/", 1)[-1].removesuffix(".json") in TASKS)
    assert sorted(r["file"] for m in SHIPPED["models"] for r in m["tasks"].values()) == r2med_files  # 208
    assert len(r2med_files) == 208
    averages = {}
    for model in SHIPPED["models"]:
        scores = [show(model["tasks"][t]["file"])["scores"]["test"][0]["main_score"] for t in TASKS]
        assert scores == [model["tasks"][t]["main_score"] for t in TASKS]
        assert show(f"{model['folder']}/model_meta.json")["name"] == model["name"]
        averages[model["name"]] = board_average(scores)
    shown = {r["system"]: r for r in board(published="all") if r["origin"] == "mteb"}
    assert {name: r["average"] for name, r in shown.items()} == averages
    assert averages["Alibaba-NLP/gte-Qwen2-7B-instruct"] == 32.34 and averages["mteb/baseline-bm25s"] == 13.46


# --- the generator, on a constructed repository -----------------------------------------------------------

ALPHA = dict(zip(TASKS, [0.11111, 0.22222, 0.33333, 0.04444, 0.05555, 0.16666, 0.27777, 0.08888]))
BETA = {TASKS[0]: 0.5, TASKS[1]: 0.25, TASKS[2]: 0.125}


def task_result(task: str, score: float, revision: str | None = None) -> dict:
    """An mteb TaskResult as mteb writes one."""
    return {"dataset_revision": revision or PINNED[task], "task_name": task, "mteb_version": "2.1.0",
            "evaluation_time": 12.5, "kg_co2_emissions": None,
            "scores": {"test": [{"ndcg_at_1": 0.9, "ndcg_at_10": score, "map_at_10": score / 2, "main_score": score,
                                 "hf_subset": "default", "languages": ["eng-Latn"]}]}}


def fake_repository(root: Path, other_files: int = 0) -> Path:
    """A clone of the MTEB results repository in miniature: two models with R2MED results (one with
    all eight, MedQA-Diag at another dataset revision; one with three and no model_meta.json), a
    model with none, and ``other_files`` TaskResults of other tasks (one of them no file at all, one
    not JSON), which no reader opens."""
    alpha = root / "results" / "acme__alpha" / "rev1"
    alpha.mkdir(parents=True)
    for task, score in ALPHA.items():
        revision = "0" * 40 if task == "R2MEDMedQADiagRetrieval" else None
        (alpha / f"{task}.json").write_text(json.dumps(task_result(task, score, revision), indent=2))
    (alpha / "model_meta.json").write_text(json.dumps({
        "name": "acme/alpha", "revision": "rev1", "n_parameters": 110_000_000, "license": "mit",
        "open_weights": True, "reference": "https://example.org/alpha", "release_date": "2025-01-02",
        "embed_dim": 768, "max_tokens": 512.0, "loader_kwargs": {"x": 1}, "citation": "long text",
        "experiment_kwargs": None}, indent=4))
    beta = root / "results" / "acme__beta" / "2"
    beta.mkdir(parents=True)
    for task, score in BETA.items():
        (beta / f"{task}.json").write_text(json.dumps(task_result(task, score)))
    others = [alpha / "NFCorpus.json", alpha / "BrightBiologyRetrieval.json", root / "results" / "acme__gamma" / "v" /
              "SciFact.json", root / "results" / "acme__gamma" / "v" / "Broken.json", beta / "R2MEDBiology.json"]
    for i, path in enumerate(others[:other_files]):
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.name == "Broken.json":
            path.mkdir()  # no file: a reader opening it would fail
        elif i % 2:
            path.write_text("{not json")
        else:
            path.write_text(json.dumps(task_result(TASKS[0], 0.9) | {"task_name": path.stem}))
    return root


def expected_models() -> list[dict]:
    """The record's models for :func:`fake_repository`, written out by hand."""
    alpha_tasks = {t: {"main_score": s, "ndcg_at_10": s,
                       "dataset_revision": "0" * 40 if t == "R2MEDMedQADiagRetrieval" else PINNED[t],
                       "mteb_version": "2.1.0", "file": f"results/acme__alpha/rev1/{t}.json"} for t, s in ALPHA.items()}
    beta_tasks = {t: {"main_score": s, "ndcg_at_10": s, "dataset_revision": PINNED[t], "mteb_version": "2.1.0",
                      "file": f"results/acme__beta/2/{t}.json"} for t, s in BETA.items()}
    return [{"name": "acme/alpha", "revision": "rev1", "experiment": None, "folder": "results/acme__alpha/rev1",
             "model_meta": {"release_date": "2025-01-02", "n_parameters": 110_000_000, "embed_dim": 768,
                            "max_tokens": 512.0, "license": "mit", "open_weights": True,
                            "reference": "https://example.org/alpha"}, "tasks": alpha_tasks},
            {"name": "acme/beta", "revision": "2", "experiment": None, "folder": "results/acme__beta/2",
             "model_meta": {}, "tasks": beta_tasks}]


def without_blobs(record: dict) -> list[dict]:
    return [{**m, "tasks": {t: {k: v for k, v in r.items() if k != "blob"} for t, r in m["tasks"].items()}}
            for m in record["models"]]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_the_record_of_a_constructed_repository(tmp_path):
    from tools.mteb_record import blob_id, build, dumps

    root = fake_repository(tmp_path / "clone", other_files=5)
    with pytest.raises(SystemExit, match="not a git checkout"):
        build(root)  # an extracted folder: which commit it is must be given
    commit = "0123456789abcdef0123456789abcdef01234567"
    lines = []
    record = build(root, commit=commit, date="2026-01-02T03:04:05+00:00", warn=lines.append)
    assert lines == []  # the other tasks' files are never read
    assert (record["repository"], record["commit"], record["commit_date"]) == (
        "embeddings-benchmark/results", commit, "2026-01-02T03:04:05+00:00")
    assert without_blobs(record) == expected_models()
    blob = record["models"][0]["tasks"][TASKS[0]]["blob"]
    assert blob == blob_id((root / "results/acme__alpha/rev1" / f"{TASKS[0]}.json").read_bytes())
    assert json.loads(dumps(record)) == record
    # the same from a git checkout of it (its commit is git's), and from its git directory alone
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "results")
    head, date = git(root, "rev-parse", "HEAD"), git(root, "log", "-1", "--format=%cI")
    assert blob == git(root, "rev-parse", f"HEAD:results/acme__alpha/rev1/{TASKS[0]}.json")
    for src in (root, root / ".git"):
        again = build(src, warn=lines.append)
        assert (again["commit"], again["commit_date"]) == (head, date) and again["models"] == record["models"]
    (root / "results/acme__beta/2" / f"{TASKS[0]}.json").write_text(json.dumps(task_result(TASKS[0], 0.6)))
    with pytest.raises(SystemExit, match="1 files differ from HEAD"):
        build(root)  # a checkout whose files are not its commit's
    assert build(root / ".git")["models"] == record["models"]  # (the commit's files)


def test_the_generator_leaves_out_what_is_no_result(tmp_path):
    from tools.mteb_record import build

    root = fake_repository(tmp_path / "clone")
    folder = root / "results" / "acme__alpha" / "rev1"
    (folder / f"{TASKS[1]}.json").write_text("{not json")
    (folder / f"{TASKS[2]}.json").write_text(json.dumps(task_result(TASKS[2], 1.5)))
    lines = []
    record = build(root, commit="f" * 40, date="2026-01-02", warn=lines.append)
    assert [line.split(":")[0] for line in lines] == [f"results/acme__alpha/rev1/{t}.json" for t in TASKS[1:3]]
    assert list(record["models"][0]["tasks"]) == [TASKS[0], *TASKS[3:]]


def test_the_records_rows_are_the_folders_rows(tmp_path):
    """The record's rows have the identity, name and source ``--mteb-results`` gives the same
    folders: they merge with them, and with your runs of the same model and revision."""
    from tools.mteb_record import build, write

    from r2med_tasks.board.sources import mteb_record_rows, result_rows

    root = fake_repository(tmp_path / "clone")
    record = build(root, commit="a" * 40, date="2026-03-04T05:06:07+02:00")
    write(record, tmp_path / "record.json")
    assert (tmp_path / "record.sha256").read_text() == \
        f"{hashlib.sha256((tmp_path / 'record.json').read_bytes()).hexdigest()}  record.json\n"
    rows = mteb_record_rows(tmp_path / "record.json")
    from_folders = result_rows(root / "results", [].append, mteb=True)
    assert sorted(r.key for r in rows) == sorted(r.key for r in from_folders) == [
        ("acme/alpha", "rev1", None, False), ("acme/alpha", "rev1", None, True), ("acme/beta", "2", None, False)]
    for row in rows:
        twin = next(r for r in from_folders if r.key == row.key)
        assert (row.system, row.retriever, row.scores, row.origin, row.local) == (
            twin.system, twin.retriever, twin.scores, twin.origin, twin.local)
        assert row.source == ("local data: " if row.local else "") + "MTEB results (embeddings-benchmark/results@aaaaaaa, " \
                                                                      "2026-03-04)"
        assert row.provenance == [f"embeddings-benchmark/results@aaaaaaa:results/acme__{row.system[5:]}/" +
                                  ("rev1" if row.system == "acme/alpha" else "2")]
    alpha = next(r for r in rows if r.key == ("acme/alpha", "rev1", None, False))
    assert alpha.scores == {t: x100(s) for t, s in ALPHA.items() if t != "R2MEDMedQADiagRetrieval"}
    assert alpha.model_meta["n_parameters"] == 110_000_000
    beta = next(r for r in rows if r.system == "acme/beta")
    assert beta.scores == {TASKS[0]: 50.0, TASKS[1]: 25.0, TASKS[2]: 12.5} and beta.average is None


def test_the_board_merges_them_with_your_run_of_the_model(tmp_path):
    """Your mteb run of a model and revision the record holds is one row with it (yours first, a
    note where the figures differ), as with --mteb-results."""
    gte = next(m for m in SHIPPED["models"] if m["name"] == "Alibaba-NLP/gte-Qwen2-7B-instruct")
    folder = tmp_path / "results" / "Alibaba-NLP__gte-Qwen2-7B-instruct" / gte["revision"]
    folder.mkdir(parents=True)
    for task, result in gte["tasks"].items():
        score = 0.5 if task == TASKS[0] else result["main_score"]
        (folder / f"{task}.json").write_text(json.dumps(task_result(task, score)))
    (folder / "model_meta.json").write_text(json.dumps({"name": gte["name"], "revision": gte["revision"]}))
    rows = [r for r in board(published="all", folders=tmp_path / "results") if "gte-Qwen2-7B-instruct" in r["system"]]
    assert len(rows) == 1
    assert rows[0]["origin"] == "run" and rows[0]["Biology"] == 50.0
    assert rows[0]["source"].endswith(f"; {LABEL} differs on Biology")


# --- on the board -----------------------------------------------------------------------------------------

def test_published_all_lists_the_26_models_with_the_shipped_figures():
    every = board(published="all")
    shown = [r for r in every if r["origin"] == "mteb"]
    assert len(shown) == 26 and len(every) == 69 + 28 + 18 + 26
    by_name = {r["system"]: r for r in shown}
    for model in SHIPPED["models"]:
        row = by_name[model["name"]]
        assert row["kind"] == "run" and row["section"] == "elsewhere" and row["source"] == LABEL
        assert row["provenance"] == [f"embeddings-benchmark/results@{SHIPPED['commit'][:7]}:{model['folder']}"]
        for task in R2MED_TASKS:
            assert row[task.short_name] == x100(model["tasks"][task.name]["main_score"])
        assert row["average"] == board_average([model["tasks"][t]["main_score"] for t in TASKS])
    assert by_name["Alibaba-NLP/gte-Qwen2-7B-instruct"]["average"] == 32.34
    assert by_name["Salesforce/SFR-Embedding-2_R"]["average"] == 29.52
    assert by_name["mteb/baseline-bm25s"]["average"] == 13.46
    assert by_name["Alibaba-NLP/gte-Qwen2-7B-instruct"]["retriever"] == "gte-Qwen2-7B-instruct"
    # the leaderboard's rows only by default, none with --published none
    assert not any(r["origin"] == "mteb" for r in board())
    assert board(published="none") == []


def test_csv_json_the_table_and_the_page_say_where_they_come_from(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # the table wide enough that each name is one line
    code, out, err = run_cli("leaderboard", "--published", "all", "--format", "csv")
    assert code == 0, err
    records = list(csv.DictReader(io.StringIO(out)))
    gte = next(r for r in records if r["System"] == "Alibaba-NLP/gte-Qwen2-7B-instruct")
    assert gte["Source"] == LABEL and gte["Avg"] == "32.34" and gte["Section"] == "elsewhere"
    code, out, err = run_cli("leaderboard", "--published", "all", "--format", "json", "--retriever", "gte-Qwen2-7B")
    (row,) = json.loads(out)
    assert (row["origin"], row["source"], row["average"]) == ("mteb", LABEL, 32.34)
    code, out, _ = run_cli("leaderboard", "--published", "all", "--retriever", "baseline-bm25s")
    line = next(line for line in out.splitlines() if "mteb/baseline-bm25s" in line)
    assert line.split()[2:4] == ["mteb", "13.46"]  # the Src column
    code, _, err = run_cli("leaderboard", "--published", "all", "--format", "html", "--output", tmp_path / "b.html")
    page = (tmp_path / "b.html").read_text(encoding="utf-8")
    assert code == 0 and page.count('data-origin="mteb"') == 26
    assert 'value="mteb" checked> MTEB result (26)' in page  # the source filter
    assert '<span class="badge mteb">MTEB</span>' in page and "7.1B" in page  # the badge, the model's size


# --- --mteb-results ---------------------------------------------------------------------------------------

def test_mteb_results_reads_r2med_files_only(run_cli, tmp_path):
    """Over a clone, only the R2MED tasks' files are read, chosen by name (a file of another task
    that is no file, or not JSON, is never opened), and one line says how many others there were."""
    clone = fake_repository(tmp_path / "clone", other_files=5)
    code, out, err = run_cli("leaderboard", "--mteb-results", clone, "--published", "none", "--format", "json")
    assert code == 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "5 result files of other tasks skipped unread" in lines[0], err
    rows = {r["system"]: r for r in json.loads(out)}
    assert {name: r["origin"] for name, r in rows.items()} == {"acme/alpha": "mteb", "acme/beta": "mteb"}
    alpha = rows["acme/alpha"]
    assert alpha["Biology"] == x100(ALPHA[TASKS[0]]) and alpha["MedQA-Diag"] is None  # (another revision: local)
    shown = r2med.rank_systems(mteb_results=clone, published="none", statistics=False)
    assert shown.warnings == [f"{clone / 'results'}: 5 result files of other tasks skipped unread (only R2MED's are "
                              "read)"]
    # a clone without other tasks' files: nothing to say
    code, _, err = run_cli("leaderboard", "--mteb-results", fake_repository(tmp_path / "plain"), "--published", "none")
    assert code == 0 and err == ""
