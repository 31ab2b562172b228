"""Files a component reads for a task enter through one door (its ``inputs(task, folder=)``, read into
the task's identity, handed back by ``context.input``): replayed generations edited in place are
recomputed, never reported from an earlier run, whichever way they are found; no built-in component
opens such a file around that door; and a component cannot read through it a file it did not name."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl, write_jsonl
from test_generations import agent_server, results_folder, thinking_model

QUERIES = read_jsonl(SAMPLE / "query.jsonl")
REPO = Path(__file__).resolve().parent.parent


def edit_every_generation(path: Path) -> None:
    """Every generated text of an exported file replaced by words no document holds."""
    rows = read_jsonl(path)
    write_jsonl(path, [{**row, "hy_doc": f"zebra quartz {i}", "answer": f"zebra quartz {i}"}
                       for i, row in enumerate(rows)])


@pytest.mark.parametrize("method, where", [("hyde", "data-dir"), ("lamer", "data-dir"), ("search-o1", "data-dir"),
                                           ("search-r1", "data-dir"), ("hyde", "published_data")])
def test_an_edited_replay_file_is_recomputed_not_reused(evaluate, chat_server, data_dir, tmp_path, method, where):
    """A live run exported, replayed, every generated text edited, the same replay again into the same
    folder: computed anew, with the score a fresh folder gives."""
    import r2med_tasks as r2med

    if method.startswith("search"):
        model = agent_server(chat_server, method)
    else:
        model, chat_server.script = "test-model", thinking_model
    if where == "data-dir":
        task, data, target = "Biology", {"data_dir": data_dir}, data_dir / "Biology"
    else:  # the package's sample, its generations in a folder of their own
        task, data, target = "sample", {}, tmp_path / "generations" / "sample"
    live = evaluate(method, "bm25", llm=f"{chat_server.url}#{model}", tasks=task, output="live", **data)
    r2med.export_generations(results_folder(live), target.parent if where != "data-dir" else data_dir, llm="mine")
    replay = {"source": "mine", **({"published_data": str(target)} if where == "published_data" else {})}
    first = evaluate(method, "bm25", tasks=task, output="replay", **replay, **data)
    assert first[task].status == "computed"
    assert evaluate(method, "bm25", tasks=task, output="replay", **replay, **data)[task].status == "cached"

    edit_every_generation(target / method / "mine" / "query_with_hydoc.jsonl")
    lines = []
    again = evaluate(method, "bm25", tasks=task, output="replay", on_message=lines.append, **replay, **data)
    fresh = evaluate(method, "bm25", tasks=task, output="fresh", **replay, **data)
    assert again[task].status == "computed" and again[task].ndcg_at_10 == fresh[task].ndcg_at_10
    assert again[task].ndcg_at_10 != first[task].ndcg_at_10
    assert any(f"inputs.rewriter.{method}/mine/query_with_hydoc.jsonl" in line for line in lines), lines
    identity = json.loads(next(results_folder(again).glob("r2med/*.identity.json")).read_text())
    assert list(identity["inputs"]["rewriter"]) == [f"{method}/mine/query_with_hydoc.jsonl"]


def test_a_run_without_input_files_keeps_its_identity_as_before(evaluate):
    """No component named a file: the identity has no inputs section (results stay where they were)."""
    outcome = evaluate("bm25")
    identity = json.loads(next(results_folder(outcome).glob("r2med/*.identity.json")).read_text())
    assert "inputs" not in identity and "served" not in identity


def test_context_input_refuses_a_file_not_named(tmp_path):
    from r2med_tasks.components.inputs import read_inputs
    from r2med_tasks.errors import PluginError
    from r2med_tasks.plugin import SAMPLE_TASK

    class Named:
        def inputs(self, task, *, folder):
            return {"mine/a.txt": tmp_path / "a.txt"}

    (tmp_path / "a.txt").write_bytes(b"one")
    files = read_inputs(Named(), SAMPLE_TASK, None, who="rewriter 'x'")
    assert files.read("mine/a.txt") == b"one"
    with pytest.raises(PluginError, match=r"context.input\('mine/b.txt'\) names no file .*mine/a.txt"):
        files.read("mine/b.txt")


@pytest.mark.parametrize("label", ["/etc/passwd", "../up.txt", ""])
def test_a_label_is_a_relative_path_never_a_machine_path(tmp_path, label):
    from r2med_tasks.components.inputs import read_inputs
    from r2med_tasks.errors import PluginError
    from r2med_tasks.plugin import SAMPLE_TASK

    class Named:
        def inputs(self, task, *, folder):
            return {label: tmp_path / "a.txt"}

    with pytest.raises(PluginError, match="a relative path"):
        read_inputs(Named(), SAMPLE_TASK, None, who="rewriter 'x'")


AUDIT = textwrap.dedent('''
    import json, os, sys
    from pathlib import Path

    watched = [Path(p).resolve() for p in sys.argv[2:]]
    task_files = {"corpus.jsonl", "query.jsonl", "qrels.jsonl"}
    around, through = [], []

    def hook(event, args):
        if event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        path = Path(os.fsdecode(args[0])).resolve()
        if path.name in task_files or not any(path.is_relative_to(w) for w in watched):
            return
        frame = sys._getframe(1)
        while frame is not None and not (frame.f_code.co_name == "read_inputs"
                                         and frame.f_code.co_filename.endswith("inputs.py")):
            frame = frame.f_back
        (through if frame is not None else around).append(str(path))

    sys.addaudithook(hook)
    import r2med_tasks as r2med

    for method, options, data_dir in json.loads(sys.argv[1]):
        r2med.evaluate(r2med.pipeline(method, "bm25", **options), tasks="Biology", data_dir=data_dir,
                       output=Path(os.environ["OUT"]) / method, cache_dir=Path(os.environ["OUT"]) / "cache")
    print(json.dumps({"around": around, "through": through}))
''')


@pytest.mark.process  # an audit hook stays for the life of its interpreter
def test_no_built_in_component_opens_a_replay_file_around_the_identity(tmp_path):
    """Every replay the built-in rewriters and agents make, from --data-dir and from -o
    published_data: each file opened under those folders (the task's own three aside) is opened by
    the runner's ``read_inputs``, which puts it in the identity."""
    data, published = tmp_path / "data" / "Biology", tmp_path / "published"
    import shutil

    shutil.copytree(SAMPLE, data)
    methods = ["hyde", "query2doc", "lamer", "search-o1", "search-r1"]
    for root in (data, published):
        for method in methods:
            write_jsonl(root / method / "mine" / "query_with_hydoc.jsonl",
                        [{"id": q["id"], "text": q["text"], "hy_doc": f"about {q['text']}"} for q in QUERIES])
    runs = [(m, {"source": "mine"}, str(data.parent)) for m in methods]
    runs += [(m, {"source": "mine", "published_data": str(published)}, str(data.parent)) for m in methods]
    env = {**os.environ, "OUT": str(tmp_path / "out"), "HF_HUB_OFFLINE": "1", "R2MED_CACHE_DIR": str(tmp_path / "c")}
    done = subprocess.run([sys.executable, "-c", AUDIT, json.dumps(runs), str(data), str(published)], env=env,
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    opened = json.loads(done.stdout.strip().splitlines()[-1])
    assert opened["around"] == []
    assert len(opened["through"]) == len(runs)  # each replay's file, read once, through the door
