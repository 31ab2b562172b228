"""One run, one record: the command line, the Python API and sweeps run a request the same way,
and everything that reads a run back (leaderboard rows and commands, compare, the layout) reads its
stored record and identity."""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import read_jsonl, write_jsonl

TASK = "R2MEDSampleRetrieval"


def run_json(run_cli, *args):
    code, out, err = run_cli("run", *map(str, args), "--json")
    assert code == 0, err
    return json.loads(out)


def folders_under(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_dir()}


def board(run_cli, *args):
    code, out, err = run_cli("leaderboard", *map(str, args), "--no-published", "--format", "json")
    assert code == 0, err
    return json.loads(out), err


# ------------------------------------------------------------------------------- one entry point


def test_the_cli_the_api_and_a_sweep_give_one_outcome(plugins, run_cli, tmp_path):
    """r2med-run --json, evaluate() and a sweep job report the same outcome, in one shape."""
    import r2med_tasks as r2med

    cli = run_json(run_cli, "--plugin", "bm25", "-o", "k1=1.2", "--tasks", "sample", "--output", tmp_path / "cli",
                   "--cache-dir", tmp_path / "cache")
    api = r2med.evaluate(r2med.pipeline("bm25", k1=1.2), tasks="sample", output=tmp_path / "api",
                         cache_dir=tmp_path / "cache").to_json()
    (tmp_path / "sweep.txt").write_text("r2med-run --plugin bm25 -o k1=1.2 --tasks sample\n")
    code, out, err = run_cli("sweep", tmp_path / "sweep.txt", "--output", tmp_path / "sweep", "--cache-dir",
                             tmp_path / "cache", "--json")
    assert code == 0, err
    swept = json.loads(out)["jobs"][0]["run"]

    def shape(summary, root):
        out = {k: v for k, v in summary.items() if k not in ("results_dirs", "command", "published_average_x100")}
        out["tasks"] = [{k: v for k, v in t.items() if k not in ("results_dir", "published_ndcg_at_10_x100",
                                                                  "seconds")}  # (wall seconds: each run its own)
                        for t in summary["tasks"]]
        out["folders"] = [str(Path(d).relative_to(root)) for d in summary["results_dirs"]]
        return out

    assert shape(cli, tmp_path / "cli") == shape(api, tmp_path / "api") == shape(swept, tmp_path / "sweep")
    assert cli["tasks"][0]["ndcg_at_10"] > 0 and cli["label"] == "BM25 (k1=1.2)"
    assert cli["command"] == "r2med-run --plugin bm25 -o k1=1.2 --tasks sample --output " + shlex.quote(
        str(tmp_path / "cli"))


def test_sweep_lines_are_parsed_by_the_run_parser():
    from r2med_tasks.errors import UserError
    from r2med_tasks.request import RunRequest, parse_run_args

    parsed = parse_run_args(["--plugin", "bm25", "-o", "k1=1.2", "--top-k", "50", "--tasks", "sample",
                             "--device", "cpu", "--overwrite"])
    assert parsed.request == RunRequest(("bm25",), ("k1=1.2",), ("sample",), top_k=50, device="cpu", overwrite=True)
    assert parse_run_args(parsed.request.arguments()).request == parsed.request
    assert {"plugin_names", "options", "top_k"} <= parsed.given and "output" not in parsed.given
    with pytest.raises(UserError, match="No such option '--frobnicate'"):
        parse_run_args(["--plugin", "bm25", "--frobnicate"])


# ------------------------------------------------------------------------------- commands from the record


def test_printed_commands_rerun_every_task_and_make_no_folder(run_cli, tmp_path, data_dir, small_model_path):
    """A local model's folder, a hybrid's members and their options, a runtime option: the command
    a row prints is the run's, so running it reuses every task and makes nothing new."""
    out, cache = tmp_path / "out", tmp_path / "cache"
    common = ["--data-dir", data_dir, "--output", out, "--cache-dir", cache]
    run_json(run_cli, "--plugin", "hybrid", "-o", "members=bm25,st", "-o", f"st.model={small_model_path}",
             "-o", "bm25.k1=1.2", "--tasks", "Biology", *common)
    # the same st folder as the member's saved run: its record is the latest run's
    run_json(run_cli, "--plugin", "st", "-o", f"model={small_model_path}", "-o", "batch_size=8", "--device", "cpu",
             "--tasks", "Biology,Bioinformatics", *common)
    rows, _ = board(run_cli, out, "--include-local", "--commands")
    commands = {r["system"]: r["command"] for r in rows}  # with the hybrid's member bm25's own saved run
    assert len(commands) == 3 and all(commands.values()), rows
    st = next(c for c in commands.values() if "--plugin st" in c)
    hybrid = next(c for c in commands.values() if "--plugin hybrid" in c)
    assert commands["BM25 (k1=1.2)"] == "r2med-run --plugin bm25 -o k1=1.2 --tasks Biology"
    assert f"model={small_model_path}" in st and "batch_size=8" in st and "device=cpu" in st
    assert "--tasks Biology,Bioinformatics" in st
    assert "members=bm25,st" in hybrid and f"st.model={small_model_path}" in hybrid and "bm25.k1=1.2" in hybrid
    before = folders_under(out)
    for command in commands.values():
        words = shlex.split(command)
        assert words[0] == "r2med-run"
        again = run_json(run_cli, *words[1:], *common)
        assert {t["status"] for t in again["tasks"]} == {"cached"}, command
    assert folders_under(out) == before

    # a sweep of those commands plans CPU jobs for the CPU run (the device it ran on is in its command)
    sweep_file = tmp_path / "commands.json"
    sweep_file.write_text(json.dumps(rows))
    code, text, err = run_cli("sweep", sweep_file, "--dry-run", "--json", *common)
    assert code == 0, err
    jobs = json.loads(text)
    assert {j["gpu"] for j in jobs if "st" in j["pipeline"] and "hybrid" not in j["pipeline"]} == {False}


def test_a_run_no_command_expresses_says_so(plugins, run_cli, tmp_path, data_dir):
    import r2med_tasks as r2med

    class Constant:
        def index(self, corpus, *, task, context):
            self.ids = corpus.ids

        def search(self, queries, *, task, top_k, context):
            return {q.id: {d: 1.0 for d in self.ids[:5]} for q in queries}

    out = tmp_path / "out"
    r2med.evaluate(Constant(), tasks="Biology", data_dir=data_dir, output=out, cache_dir=tmp_path / "cache")
    rows, _ = board(run_cli, out, "--include-local", "--wide")
    (row,) = rows
    code, text, err = run_cli("leaderboard", out, "--no-published", "--include-local", "--commands", "--format", "json")
    assert json.loads(text)[0]["command"] is None
    assert "no command: a Constant object passed to r2med_tasks.evaluate" in row["source"]


def test_a_stored_command_that_builds_another_configuration_is_not_printed(run_cli, tmp_path, data_dir):
    from r2med_tasks.layout import runs_under

    out = tmp_path / "out"
    run_json(run_cli, "--plugin", "bm25", "-o", "k1=1.2", "--data-dir", data_dir, "--tasks", "Biology", "--output",
             out, "--cache-dir", tmp_path / "cache")
    (run,) = runs_under(out)
    record = run.record()
    record["config"]["retriever"]["options"]["b"] = 0.5  # what a changed plugin default would do
    run.record_file.write_text(json.dumps(record))
    code, text, err = run_cli("leaderboard", out, "--no-published", "--include-local", "--commands", "--format", "json")
    assert json.loads(text)[0]["command"] is None
    rows, _ = board(run_cli, out, "--include-local")
    assert "now builds another configuration (retriever.b: 0.5 -> 0.4)" in rows[0]["source"]


# ------------------------------------------------------------------------------- components on rows


def test_rows_carry_their_components_and_filters_find_third_party_ones(plugins, register, run_cli, tmp_path,
                                                                       data_dir):
    from r2med_tasks import RetrieverSpec, hookimpl

    class Toy:
        def model_meta(self):
            return {"name": "toy-org/toy-retriever", "revision": "1", "display_name": "ToyRetriever"}

        def index(self, corpus, *, task, context):
            self.ids = corpus.ids

        def search(self, queries, *, task, top_k, context):
            return {q.id: {d: 1.0 / (i + 1) for i, d in enumerate(self.ids[:10])} for q in queries}

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="toy", factory=lambda options: Toy()))

    register(Plugin(), "toy-pkg")
    out = tmp_path / "out"
    common = ["--data-dir", data_dir, "--tasks", "Biology", "--output", out, "--cache-dir", tmp_path / "cache"]
    run_json(run_cli, "--plugin", "toy", *common)
    run_json(run_cli, "--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", *common)
    rows, _ = board(run_cli, out, "--include-local")
    by_system = {r["system"]: r for r in rows}
    assert by_system["ToyRetriever"]["retriever"] == "ToyRetriever"
    assert by_system["BM25 ⊕ bm25-okapi (RRF)"]["retriever"] == "BM25 ⊕ bm25-okapi (RRF)"
    found, _ = board(run_cli, out, "--include-local", "--retriever", "toy")
    assert [r["system"] for r in found] == ["ToyRetriever"]
    found, _ = board(run_cli, out, "--include-local", "--retriever", "bm25-okapi")  # a member of the hybrid
    assert {r["system"] for r in found} == {"BM25 ⊕ bm25-okapi (RRF)", "bm25-okapi"}  # and the member's own run
    code, page, err = run_cli("leaderboard", out, "--no-published", "--include-local", "--format", "html")
    assert code == 0 and '<option value="ToyRetriever">' in page


# ------------------------------------------------------------------------------- compare by identity


def test_compare_refuses_runs_scored_on_different_data(run_cli, tmp_path, data_dir):
    other = tmp_path / "other"
    shutil.copytree(data_dir, other)
    qrels = read_jsonl(other / "Biology" / "qrels.jsonl")
    qrels[0]["score"] = 2 if qrels[0]["score"] != 2 else 1
    write_jsonl(other / "Biology" / "qrels.jsonl", qrels)
    a = run_json(run_cli, "--plugin", "bm25", "--data-dir", data_dir, "--tasks", "Biology", "--output", tmp_path / "a",
                 "--cache-dir", tmp_path / "cache")["results_dirs"][0]
    b = run_json(run_cli, "--plugin", "bm25", "--data-dir", other, "--tasks", "Biology", "--output", tmp_path / "b",
                 "--cache-dir", tmp_path / "cache")["results_dirs"][0]
    code, out, err = run_cli("compare", a, b)
    assert code == 2 and "R2MEDBiologyRetrieval: the runs were scored on different data (data.revision:" in err
    assert "--allow-different-data" in err and not out
    code, out, err = run_cli("compare", a, b, "--allow-different-data", "--json")
    assert code == 0 and "data.revision" in json.loads(out)["data_differences"]["R2MEDBiologyRetrieval"][0]
    code, out, err = run_cli("compare", a, b, "--allow-different-data")
    assert code == 0 and "(different data)" in out and "scored on different data" in err
    code, out, err = run_cli("compare", a, a)  # the same data: compared as before
    assert code == 0 and "different data" not in out + err


# ------------------------------------------------------------------------------- portable identities


def test_identities_hold_no_machine_paths_or_endpoints(run_cli, tmp_path, small_model_path):
    """The same model at two paths is one model; a member's folder and an LLM's address are not
    part of a run's identity, experiment or name."""
    first, second = tmp_path / "a" / "minilm", tmp_path / "elsewhere" / "deep" / "minilm"
    shutil.copytree(small_model_path, first)
    shutil.copytree(small_model_path, second)
    out = tmp_path / "out"

    def plan(*args):
        code, text, err = run_cli("run", *map(str, args), "--tasks", "sample", "--output", out, "--dry-run", "--json")
        assert code == 0, err
        return json.loads(text)

    at_first, at_second = plan("--plugin", "st", "-o", f"model={first}"), plan("--plugin", "st", "-o",
                                                                                f"model={second}")
    assert at_first["results_dirs"] == at_second["results_dirs"]
    hybrid = [plan("--plugin", "hybrid", "-o", "members=bm25,st", "-o", f"st.model={m}", "-o", "st.max_length=64")
              for m in (first, second)]
    assert hybrid[0]["results_dirs"] == hybrid[1]["results_dirs"]
    assert hybrid[0]["experiment"] == "st.max_length_64"
    llm = [plan("--plugin", "hyde", "-o", f"llm=http://127.0.0.1:{port}/v1#qwen-7b", "--plugin", "bm25")
           for port in (8001, 8002)]
    assert llm[0]["results_dirs"] == llm[1]["results_dirs"] and llm[0]["label"] == "qwen-7b + BM25"
    for planned in (*hybrid, *llm):
        assert str(tmp_path) not in json.dumps({k: planned[k] for k in ("experiment", "label", "experiment_kwargs")})
        assert "127.0.0.1" not in planned["results_dirs"][0]

    # the stored identity and record of a run hold neither folder
    run_json(run_cli, "--plugin", "hybrid", "-o", "members=bm25,st", "-o", f"st.model={first}", "--tasks", "sample",
             "--output", out, "--cache-dir", tmp_path / "cache")
    identity = next(out.rglob(f"r2med/{TASK}.identity.json")).read_text()
    assert str(tmp_path) not in identity and "minilm" in identity  # named by its folder, identified by content


# ------------------------------------------------------------------------------- mteb's own files


def test_a_results_folder_is_what_mtebs_result_cache_writes(official_hub, run_cli, tmp_path):
    """run_settings.jsonl and model_meta.json's model type, against mteb's own ResultCache."""
    import mteb
    from mteb.results import TaskResult

    folder = Path(run_json(run_cli, "--plugin", "bm25", "--tasks", "Biology,Bioinformatics", "--output",
                           tmp_path / "out", "--cache-dir", tmp_path / "cache")["results_dirs"][0])
    meta = json.loads((folder / "model_meta.json").read_text())
    assert meta["model_type"] == ["sparse"]
    cache = mteb.ResultCache(cache_path=tmp_path / "mteb")
    for task in ("R2MEDBiologyRetrieval", "R2MEDBioinformaticsRetrieval"):
        cache.save_to_cache(TaskResult.from_disk(folder / f"{task}.json"), model_name=meta["name"],
                            model_revision=meta["revision"], encode_kwargs={})
    written = next((tmp_path / "mteb").rglob("run_settings.jsonl"))
    assert (folder / "run_settings.jsonl").read_bytes() == written.read_bytes()
    assert [json.loads(line)["task"] for line in written.read_text().splitlines()] == [
        "R2MEDBiologyRetrieval", "R2MEDBioinformaticsRetrieval"]  # one file, merged across the tasks


def test_model_types_follow_the_components(run_cli, tmp_path):
    out = tmp_path / "out"
    common = ["--tasks", "sample", "--output", out, "--cache-dir", tmp_path / "cache"]
    hybrid = run_json(run_cli, "--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", *common)
    assert json.loads((Path(hybrid["results_dirs"][0]) / "model_meta.json").read_text())["model_type"] == ["hybrid"]
    run_file = run_json(run_cli, "--plugin", "run-file", "-o", f"path={hybrid['results_dirs'][0]}", *common)
    kind = json.loads((Path(run_file["results_dirs"][0]) / "model_meta.json").read_text())["model_type"]
    assert kind == ["hybrid"]  # what the results folder it reads says


# ------------------------------------------------------------------------------- official and local data


def test_official_and_local_data_never_share_a_folder(official_hub, run_cli, tmp_path, data_dir):
    common = ["--plugin", "bm25", "--tasks", "Biology", "--output", tmp_path / "out", "--cache-dir",
              tmp_path / "cache"]
    hub = run_json(run_cli, *common)
    local = run_json(run_cli, *common, "--data-dir", data_dir)
    assert hub["results_dirs"] != local["results_dirs"]
    assert "/local-data/" in local["results_dirs"][0] and "/local-data/" not in hub["results_dirs"][0]
    code, out, err = run_cli("run", *map(str, common), "--json")
    assert code == 0 and "recomputing" not in err and json.loads(out)["tasks"][0]["status"] == "cached"
    mixed = run_json(run_cli, *common[:2], "--tasks", "Biology,sample", *common[4:])
    assert len(mixed["results_dirs"]) == 2
    assert {t["status"] for t in mixed["tasks"] if t["alias"] == "Biology"} == {"cached"}


# ------------------------------------------------------------------------------- combines_generated


def test_a_retriever_that_says_false_gets_the_default_combination(plugins, register, evaluate):
    from r2med_tasks import RetrieverSpec, RewriterSpec, hookimpl
    from r2med_tasks.combine import default_query

    seen = {}

    class Appends:
        def rewrite(self, queries, *, task, context):
            return [replace(q, generated=("a generated passage",), method="hyde") for q in queries]

    def recorder(flag):
        class Recorder:
            combines_generated = flag

            def index(self, corpus, *, task, context):
                self.ids = corpus.ids

            def search(self, queries, *, task, top_k, context):
                seen[flag] = list(queries)
                return {q.id: {self.ids[0]: 1.0} for q in queries}
        return Recorder

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="says-false", factory=lambda options: recorder(False)()))
            register(RetrieverSpec(name="says-true", factory=lambda options: recorder(True)()))

        @hookimpl
        def register_rewriters(self, register):
            register(RewriterSpec(name="appends", factory=lambda options: Appends()))

    register(Plugin(), "recorders")
    evaluate("appends", "says-false")
    evaluate("appends", "says-true")
    assert all(not q.generated for q in seen[False])  # combined by the default rule, as documented
    assert [q.text for q in seen[False]] == [default_query(q) for q in seen[True]]
    assert all(q.generated == ("a generated passage",) for q in seen[True])
