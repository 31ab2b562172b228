"""One run, one record: the command line, the Python API and sweeps run a request the same way,
and everything that reads a run back (leaderboard rows and commands, compare, the layout) reads its
stored record and identity."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

import r2med_tasks as r2med
from conftest import board_rows, read_jsonl, write_jsonl
from r2med_tasks.errors import UserError

TASK = "R2MEDSampleRetrieval"


def run_json(run_cli, *args):
    code, out, err = run_cli("run", *map(str, args), "--json")
    assert code == 0, err
    return json.loads(out)


def folders_under(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_dir()}


def board(*folders, commands: bool = False, **options):
    """The leaderboard of ``folders`` without published rows, as ``--format json`` writes its rows, and its warnings."""
    shown = r2med.rank_systems(folders, published="none", statistics=not commands, **options)
    return shown.records(commands=commands), shown.warnings


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
    from r2med_tasks.running.request import RunRequest, parse_run_args

    parsed = parse_run_args(["--plugin", "bm25", "-o", "k1=1.2", "--top-k", "50", "--tasks", "sample",
                             "--device", "cpu", "--overwrite"])
    assert parsed == RunRequest(("bm25",), ("k1=1.2",), ("sample",), top_k=50, device="cpu", overwrite=True)
    assert parse_run_args(parsed.arguments()) == parsed
    assert {"plugin_names", "options", "top_k"} <= parsed.given and "output" not in parsed.given
    with pytest.raises(UserError, match="No such option '--frobnicate'"):
        parse_run_args(["--plugin", "bm25", "--frobnicate"])


# ------------------------------------------------------------------------------- commands from the record


def test_printed_commands_rerun_every_task_and_make_no_folder(run_cli, evaluate, tmp_path, data_dir,
                                                              small_model_path):
    """A local model's folder, a hybrid's members and their options, a runtime option: the command
    a row prints is the run's, so running it reuses every task and makes nothing new."""
    out, cache = tmp_path / "out", tmp_path / "cache"
    common = ["--data-dir", data_dir, "--output", out, "--cache-dir", cache]
    evaluate("hybrid", members="bm25,st", options={"st.model": str(small_model_path), "bm25.k1": 1.2},
             tasks="Biology", data_dir=data_dir, output=out)
    # the same st folder as the member's saved run: its record is the latest run's
    evaluate("st", model=str(small_model_path), batch_size=8, device="cpu", tasks=["Biology", "Bioinformatics"],
             data_dir=data_dir, output=out)
    rows, _ = board(out, include_local=True, commands=True)
    commands = {r["system"]: r["command"] for r in rows}  # with the hybrid's member bm25's own saved run
    assert len(commands) == 3 and all(commands.values()), rows
    st = next(c for c in commands.values() if "--plugin st" in c)
    hybrid = next(c for c in commands.values() if "--plugin hybrid" in c)
    # the data folder was given as an absolute path: a placeholder, explained; the output as found
    assert commands["BM25 (k1=1.2)"] == f"r2med-run --plugin bm25 -o k1=1.2 --tasks Biology --data-dir DATA_DIR --output {out}"
    assert all(set(r["placeholders"]) == {"DATA_DIR"} for r in rows)
    assert f"model={small_model_path}" in st and "batch_size=8" in st and "device=cpu" in st
    assert "--tasks Biology,Bioinformatics" in st
    assert "members=bm25,st" in hybrid and f"st.model={small_model_path}" in hybrid and "bm25.k1=1.2" in hybrid
    before = folders_under(out)
    for command in commands.values():
        words = [str(data_dir) if w == "DATA_DIR" else w for w in shlex.split(command)]
        assert words[0] == "r2med-run"
        again = run_json(run_cli, *words[1:], "--cache-dir", cache)
        assert {t["status"] for t in again["tasks"]} == {"cached"}, command
    assert folders_under(out) == before

    # a sweep of those commands plans CPU jobs for the CPU run (the device it ran on is in its command)
    sweep_file = tmp_path / "commands.json"
    sweep_file.write_text(json.dumps(rows))
    code, text, err = run_cli("sweep", sweep_file, "--dry-run", "--json", *common)
    assert code == 0, err
    jobs = json.loads(text)
    assert {j["gpu"] for j in jobs if "st" in j["pipeline"] and "hybrid" not in j["pipeline"]} == {False}


def test_a_run_no_command_expresses_says_so(plugins, tmp_path, data_dir):
    import r2med_tasks as r2med

    class Constant:
        def index(self, corpus, *, task, context):
            self.ids = corpus.ids

        def search(self, queries, *, task, top_k, context):
            return {q.id: {d: 1.0 for d in self.ids[:5]} for q in queries}

    out = tmp_path / "out"
    r2med.evaluate(Constant(), tasks="Biology", data_dir=data_dir, output=out, cache_dir=tmp_path / "cache")
    (row,), warnings = board_rows(out)
    assert row.command == "" and row.notes == ["no command: a Constant object passed to r2med_tasks.evaluate"]
    assert warnings == []


def test_a_stored_command_that_builds_another_configuration_is_not_printed(evaluate, tmp_path, data_dir):
    from r2med_tasks.results.folder import runs_under

    out = tmp_path / "out"
    evaluate("bm25", k1=1.2, data_dir=data_dir, tasks="Biology", output=out)
    (run,) = runs_under(out)
    record = run.record()
    record["config"]["retriever"]["options"]["b"] = 0.5  # what a changed plugin default would do
    run.record_file.write_text(json.dumps(record))
    rows, _ = board(out, include_local=True, commands=True)
    assert rows[0]["command"] is None
    rows, _ = board(out, include_local=True)
    assert "now builds another configuration (retriever.b: 0.5 -> 0.4)" in rows[0]["source"]


# ------------------------------------------------------------------------------- components on rows


def test_rows_carry_their_components_and_filters_find_third_party_ones(plugins, register, run_cli, evaluate,
                                                                       tmp_path, data_dir):
    from r2med_tasks import RetrieverSpec, hookimpl
    from r2med_tasks.board.leaderboard import select

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
    evaluate("toy", data_dir=data_dir, tasks="Biology", output=out)
    evaluate("hybrid", members="bm25,bm25-okapi", data_dir=data_dir, tasks="Biology", output=out)
    rows, _ = board_rows(out)
    by_system = {r.system: r for r in rows}
    assert by_system["ToyRetriever"].retriever == "ToyRetriever"
    assert by_system["BM25 ⊕ bm25-okapi (RRF)"].retriever == "BM25 ⊕ bm25-okapi (RRF)"
    found, _ = select(rows, retriever="toy", include_local=True)
    assert [r.system for r in found] == ["ToyRetriever"]
    found, _ = select(rows, retriever="bm25-okapi", include_local=True)  # a member of the hybrid
    assert {r.system for r in found} == {"BM25 ⊕ bm25-okapi (RRF)", "bm25-okapi"}  # and the member's own run
    code, page, err = run_cli("leaderboard", out, "--no-published", "--include-local", "--format", "html")
    assert code == 0 and '<option value="ToyRetriever">' in page


# ------------------------------------------------------------------------------- compare by identity


def test_compare_refuses_runs_scored_on_different_data(run_cli, evaluate, tmp_path, data_dir):
    """The refusal and what differs are the library's; the command marks the task and warns."""
    other = tmp_path / "other"
    shutil.copytree(data_dir, other)
    qrels = read_jsonl(other / "Biology" / "qrels.jsonl")
    qrels[0]["score"] = 2 if qrels[0]["score"] != 2 else 1
    write_jsonl(other / "Biology" / "qrels.jsonl", qrels)
    (a,) = evaluate("bm25", data_dir=data_dir, tasks="Biology", output="a").results_dirs
    (b,) = evaluate("bm25", data_dir=other, tasks="Biology", output="b").results_dirs
    with pytest.raises(UserError) as refused:
        r2med.compare_runs(a, b)
    assert "R2MEDBiologyRetrieval: the runs were scored on different data (data.revision:" in str(refused.value)
    assert "--allow-different-data" in str(refused.value)
    allowed = r2med.compare_runs(a, b, allow_different_data=True)
    assert "data.revision" in allowed.data_differences["R2MEDBiologyRetrieval"][0]
    code, out, err = run_cli("compare", a, b)
    assert code == 2 and "R2MEDBiologyRetrieval: the runs were scored on different data (data.revision:" in err
    assert "--allow-different-data" in err and not out
    code, out, err = run_cli("compare", a, b, "--allow-different-data")
    assert code == 0 and "(different data)" in out and "scored on different data" in err
    assert r2med.compare_runs(a, a).data_differences == {}  # the same data: compared as before


# ------------------------------------------------------------------------------- portable identities


def test_identities_hold_no_machine_paths_or_endpoints(plugins, evaluate, tmp_path, small_model_path):
    """The same model at two paths is one model; a member's folder and an LLM's address are not
    part of a run's identity, experiment or name."""
    from r2med_tasks.running.request import RunRequest, plan_request

    first, second = tmp_path / "a" / "minilm", tmp_path / "elsewhere" / "deep" / "minilm"
    shutil.copytree(small_model_path, first)
    shutil.copytree(small_model_path, second)
    out = tmp_path / "out"

    def plan(*components, options=()):
        return plan_request(RunRequest(components, options, tasks=("sample",), output=out))

    at_first, at_second = plan("st", options=[f"model={first}"]), plan("st", options=[f"model={second}"])
    assert at_first["results_dirs"] == at_second["results_dirs"]
    hybrid = [plan("hybrid", options=["members=bm25,st", f"st.model={m}", "st.max_length=64"])
              for m in (first, second)]
    assert hybrid[0]["results_dirs"] == hybrid[1]["results_dirs"]
    assert hybrid[0]["experiment"] == "st.max_length_64"
    llm = [plan("hyde", "bm25", options=[f"llm=http://127.0.0.1:{port}/v1#qwen-7b"]) for port in (8001, 8002)]
    assert llm[0]["results_dirs"] == llm[1]["results_dirs"] and llm[0]["label"] == "qwen-7b + BM25"
    for planned in (*hybrid, *llm):
        assert str(tmp_path) not in json.dumps({k: planned[k] for k in ("experiment", "label", "experiment_kwargs")},
                                               default=str)
        assert "127.0.0.1" not in planned["results_dirs"][0]

    # the stored identity and record of a run hold neither folder
    evaluate("hybrid", members="bm25,st", options={"st.model": str(first)}, output=out)
    identity = next(out.rglob(f"r2med/{TASK}.identity.json")).read_text()
    assert str(tmp_path) not in identity and "minilm" in identity  # named by its folder, identified by content


# ------------------------------------------------------------------------------- mteb's own files


def test_a_results_folder_is_what_mtebs_result_cache_writes(official_hub, evaluate, tmp_path):
    """run_settings.jsonl and model_meta.json's model type, against mteb's own ResultCache."""
    import mteb
    from mteb.results import TaskResult

    (folder,) = map(Path, evaluate("bm25", tasks=["Biology", "Bioinformatics"]).results_dirs)
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


def test_model_types_follow_the_components(evaluate):
    (hybrid,) = map(Path, evaluate("hybrid", members="bm25,bm25-okapi").results_dirs)
    assert json.loads((hybrid / "model_meta.json").read_text())["model_type"] == ["hybrid"]
    (run_file,) = map(Path, evaluate("run-file", path=str(hybrid)).results_dirs)
    kind = json.loads((run_file / "model_meta.json").read_text())["model_type"]
    assert kind == ["hybrid"]  # what the results folder it reads says


# ------------------------------------------------------------------------------- official and local data


def test_official_and_local_data_never_share_a_folder(official_hub, evaluate, data_dir):
    hub = evaluate("bm25", tasks="Biology")
    local = evaluate("bm25", tasks="Biology", data_dir=data_dir)
    assert hub.results_dirs != local.results_dirs
    assert "/local-data/" in local.results_dirs[0] and "/local-data/" not in hub.results_dirs[0]
    assert evaluate("bm25", tasks="Biology")["Biology"].status == "cached"
    mixed = evaluate("bm25", tasks=["Biology", "sample"])
    assert len(mixed.results_dirs) == 2
    assert {t.status for t in mixed.values() if t.alias == "Biology"} == {"cached"}


def test_an_agents_template_folder_is_its_content_not_its_path(plugins, tmp_path):
    """``-o template=`` names a tokenizer folder: the same files at two paths are one experiment
    (named by the folder's name, identified by its content), another chat template in the same
    folder another one; no machine path in the plan."""
    from conftest import tokenizer_with_template
    from r2med_tasks.running.request import RunRequest, plan_request

    first, second = tmp_path / "a" / "qwq-template", tmp_path / "elsewhere" / "deep" / "qwq-template"
    for folder in (first, second):
        folder.mkdir(parents=True)
        tokenizer_with_template(folder, "{{ messages[0]['content'] }}")

    def plan(template):
        return plan_request(RunRequest(("search-o1", "bm25"), (f"llm=http://127.0.0.1:1/v1#qwq",
                                                              f"template={template}"),
                                       tasks=("sample",), output=tmp_path / "out"))

    at_first, at_second = plan(first), plan(second)
    assert at_first["results_dirs"] == at_second["results_dirs"]
    assert str(tmp_path) not in json.dumps({k: at_first[k] for k in ("experiment", "label", "experiment_kwargs")},
                                           default=str)
    tokenizer_with_template(second, "{{ messages[-1]['content'] }}")
    assert plan(second)["results_dirs"] != at_first["results_dirs"]
