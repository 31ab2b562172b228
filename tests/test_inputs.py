"""Files a component reads for a task enter through one door (its ``inputs(task, folder=)``, read into
the task's identity, handed back by ``context.input``): replayed generations edited in place are
recomputed, never reported from an earlier run, whichever way they are found; no built-in component
opens such a file around that door; and a component cannot read through it a file it did not name."""

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import struct
import sys
from pathlib import Path

import pytest

from conftest import SAMPLE, forked, read_jsonl, write_jsonl
from test_dense_api import server  # noqa: F401 - the local embedding server
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


# the functions that read a file into the identity: a component's inputs, a file or model folder
# fingerprinted (an option's content, a local model), saved runs' revision, a plugin's source
READERS = {("read_inputs", "inputs.py"), ("of", "model_refs.py"), ("digest", "saved_runs.py"),
           ("source_digest", "discovery.py")}
TASK_FILES = {"corpus.jsonl", "query.jsonl", "qrels.jsonl"}


def audited_runs(runs, watched: list[str], out: Path) -> dict:
    """The child of ``audit``: an audit hook (it stays for the life of its process) noting each file
    read under ``watched`` and the identity reader it was read through; then the runs."""
    import r2med_tasks as r2med

    folders = [Path(p).resolve() for p in watched]
    prefixes = tuple({str(p) for w in watched for p in (Path(os.path.abspath(w)), Path(w).resolve())})
    opened = []

    def hook(event, args):
        if event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        mode, flags = args[1], args[2]
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (flags or 0) & (os.O_WRONLY | os.O_RDWR):
            return  # written, not read
        if not os.path.abspath(os.fsdecode(args[0])).startswith(prefixes):
            return  # cheap: most opens are elsewhere
        path = Path(os.fsdecode(args[0])).resolve()
        if path.name in TASK_FILES or "__pycache__" in path.parts or not any(path.is_relative_to(w) for w in folders):
            return
        frame = sys._getframe(1)
        while frame is not None and (frame.f_code.co_name, Path(frame.f_code.co_filename).name) not in READERS:
            frame = frame.f_back
        opened.append([str(path), frame and frame.f_code.co_name])

    sys.addaudithook(hook)
    os.chdir(REPO)
    identities = []
    for i, (components, options, data) in enumerate(runs):
        done = r2med.evaluate(r2med.pipeline(*components, **options), **data, output=out / str(i),
                              cache_dir=out / "cache")
        identities.append([json.loads(p.read_text()) for d in done.results_dirs
                           for p in Path(d).glob("r2med/*.identity.json")])
    return {"opened": opened, "identities": identities}


def audit(tmp_path, runs, watched, env=()):
    """The runs (components, options, evaluate's data arguments), one after the other in a process of
    their own (a fork of this worker: an audit hook cannot be removed); every file read under ``watched`` (the task's
    own three aside), with the identity reader it was read through (None: around the identity), and
    each run's stored identities; under ``"native"``, every file the kernel saw opened under
    ``watched`` (by Python or by a native library)."""
    with opened_under(watched) as native:
        done = forked(audited_runs, runs, [str(w) for w in watched], tmp_path / "out",
                      env={"R2MED_CACHE_DIR": str(tmp_path / "c"), **dict(env)})
    return {**done, "native": native}


@contextlib.contextmanager
def opened_under(folders):
    """The files opened under ``folders`` while the block runs, by any process and any library, as
    the kernel reports them (inotify's IN_OPEN: at no cost to the process watched, where tracing its
    system calls slowed it by half). Filled in when the block ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    where, found = {}, set()
    try:
        for folder in folders:
            for root, _, _ in os.walk(Path(folder).resolve()):
                wd = libc.inotify_add_watch(fd, os.fsencode(root), 0x20)  # IN_OPEN
                assert wd >= 0, os.strerror(ctypes.get_errno())
                where[wd] = Path(root)
        yield found
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 1 << 16):
                data += chunk
        at = 0
        while at < len(data):
            wd, mask, _, size = struct.unpack_from("iIII", data, at)
            name = data[at + 16:at + 16 + size].rstrip(b"\0")
            at += 16 + size
            assert not mask & 0x4000, "inotify's queue overflowed"  # IN_Q_OVERFLOW
            if name and not mask & 0x40000000:  # a file's, not a folder's (IN_ISDIR)
                found.add(where[wd] / os.fsdecode(name))
    finally:
        os.close(fd)


def sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


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
    where = {"tasks": "Biology", "data_dir": str(data.parent)}
    runs = [([m, "bm25"], {"source": "mine"}, where) for m in methods]
    runs += [([m, "bm25"], {"source": "mine", "published_data": str(published)}, where) for m in methods]
    opened = audit(tmp_path, runs, [data, published])["opened"]
    assert [path for path, reader in opened if reader is None] == []
    assert len([path for path, reader in opened if reader == "read_inputs"]) == len(runs)  # each replay's file, once


PLUGIN = '''
from pathlib import Path

from r2med_tasks.plugin import RetrieverSpec, hookimpl

HERE = Path(__file__).parent


class Weighted:
    """Scores a document by its id's length times a factor kept in the package's data file."""

    def index(self, corpus, *, task, context):
        self.ids = list(corpus.ids)

    def search(self, queries, *, task, top_k, context):
        factor = float((HERE / "data" / "factor.txt").read_text())
        return {q.id: {d: factor * len(d) for d in self.ids} for q in queries}


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(name="weighted", factory=lambda options: Weighted(), description="tests only"))
'''


@pytest.mark.process
def test_saved_runs_examples_and_a_plugins_files_are_read_only_into_the_identity(tmp_path, chat_server):
    """Saved runs (a folder of them, one file), Query2Doc's -o examples, hybrid's -o tune and a
    plugin package's data file: every file opened under their folders is read through what puts it
    in the identity, and the identity holds each run, examples and tuning file by the sha256 of its
    bytes."""
    from test_query2doc_examples import built_example_py
    from test_run_file import random_run

    from r2med_tasks.running.discovery import source_files

    runs, single, examples, split, package = (tmp_path / "runs", tmp_path / "single", tmp_path / "examples",
                                              tmp_path / "split", tmp_path / "src" / "weighted_plugin")
    for folder in (runs, single, examples, split, package / "data"):
        folder.mkdir(parents=True)
    (runs / "sample.trec").write_text("\n".join(random_run(0)) + "\n")
    (single / "system.trec").write_text("\n".join(random_run(1)) + "\n")
    (examples / "example.py").write_bytes(built_example_py())
    (split / "tune.json").write_text(json.dumps({"sample": ["q01", "q02", "q03"]}))
    (package / "__init__.py").write_text(PLUGIN)
    (package / "data" / "factor.txt").write_text("0.5")
    sample = {"tasks": "sample"}
    done = audit(tmp_path, [(["run-file"], {"path": str(runs)}, sample), (["run-file"], {"path": str(single / "system.trec")}, sample),
                            (["query2doc", "bm25"], {"llm": f"{chat_server.url}#test-model", "examples": str(examples / "example.py")}, sample),
                            (["hybrid"], {"members": "bm25,bm25-okapi", "tune": str(split / "tune.json")}, sample),
                            (["weighted"], {}, sample)],
                 [runs, single, examples, split, package], env={"R2MED_PLUGINS": "weighted_plugin",
                                                         "PYTHONPATH": str(tmp_path / "src")})
    outside = [path for path, reader in done["opened"] if reader is None and not Path(path).is_relative_to(package)]
    assert outside == []
    through = {Path(path).name for path, reader in done["opened"] if reader == "read_inputs"}
    assert through == {"sample.trec", "system.trec", "example.py", "tune.json"}
    (folder_run,), (file_run,), (rewritten,), fused, (weighted,) = done["identities"]
    (tuned,) = [i for i in fused if i["config"]["retriever"]["component"] == "hybrid"]
    assert folder_run["inputs"] == {"retriever": {"sample.trec": sha256(runs / "sample.trec")}}
    assert file_run["inputs"] == {"retriever": {"system.trec": sha256(single / "system.trec")}}
    assert rewritten["inputs"] == {"rewriter": {"example.py": sha256(examples / "example.py")}}
    assert tuned["inputs"] == {"retriever": {"tune.json": sha256(split / "tune.json")}}
    # a plugin's own files, its data read by its code included, are its code's identity (its source)
    sys.path.insert(0, str(tmp_path / "src"))
    try:
        hashed = {p.resolve() for _, p in source_files("weighted_plugin")}
    finally:
        sys.path.remove(str(tmp_path / "src"))
    read = {Path(path) for path, _ in done["opened"] if Path(path).is_relative_to(package)}
    assert package / "data" / "factor.txt" in read and read <= hashed
    assert weighted["code"]["weighted_plugin"].startswith("source-")


def test_folders_that_libraries_open_hold_only_files_their_digest_covers(tmp_path, evaluate, cross_encoder_path,
                                                                         chat_server, server, monkeypatch):
    """Folders that libraries open, not r2med: a reranker's local model over saved runs, an API
    embedder's ``-o tokenizer=`` folder and an agent's ``-o template=`` folder. Every file a run
    opens under one (by torch, transformers or a native library: the kernel reports each) is one of
    the files whose content the identity's digest of that folder covers (the model's revision, the
    option's ``name@sha256:`` in ``config``). In this process: nothing here keeps a loaded model
    between runs, and the model is a copy no earlier test loaded. (That the saved runs are read
    through the identity's door, the audit tests above check.)"""
    from conftest import tokenizer_with_template
    from test_run_file import random_run

    from r2med_tasks.components.model_refs import _model_files, content_digest

    model, runs, tokenizer, template = (tmp_path / "model", tmp_path / "runs", tmp_path / "tokenizer",
                                        tmp_path / "template")
    shutil.copytree(cross_encoder_path, model)
    for folder in (runs, tokenizer, template):
        folder.mkdir()
    (runs / "sample.trec").write_text("\n".join(random_run(2)) + "\n")
    tokenizer_with_template(tokenizer, "{{ messages[0]['content'] }}")
    tokenizer_with_template(template, "{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    chat_server.script = lambda context, partial: "<think>Found it.</think>\n<answer> blood </answer>"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with opened_under([model, tokenizer, template]) as opened:
        outcomes = [evaluate("run-file", "cross-encoder", path=str(runs), model=str(model), rerank_k=5, device="cpu",
                             output="reranked"),
                    evaluate("openai", base_url=server.url, tokenizer=str(tokenizer), output="embedded"),
                    evaluate("search-r1", "bm25", llm=f"{chat_server.url}#agent", template=str(template),
                             output="searched")]
    for folder in (model, tokenizer, template):
        folder = folder.resolve()
        read = {p for p in opened if p.is_relative_to(folder)}
        fingerprinted = {p.resolve() for _, p in _model_files(folder)}
        marker = "config.json" if folder == model.resolve() else "tokenizer_config.json"
        assert folder / marker in read and read <= fingerprinted, (folder, read - fingerprinted)
    reranked, embedded, searched = ([json.loads(p.read_text()) for d in outcome.results_dirs
                                     for p in Path(d).glob("r2med/*.identity.json")] for outcome in outcomes)
    (reranked,) = [i for i in reranked if "reranker" in i["models"]]
    (embedded,), (searched,) = embedded, searched
    assert reranked["models"]["reranker"]["revision"].startswith("local-")
    assert embedded["config"]["retriever"]["options"]["tokenizer"] == f"tokenizer@sha256:{content_digest(tokenizer)[:12]}"
    assert searched["config"]["rewriter"]["options"]["template"] == f"template@sha256:{content_digest(template)[:12]}"


@pytest.mark.parametrize("what", ["run-file", "query2doc", "hybrid"])
def test_a_saved_run_examples_or_tuning_file_edited_in_place_is_recomputed(evaluate, chat_server, tmp_path, what):
    """The same command into the same --output after the file it reads was rewritten in place:
    computed again from the new bytes (a guard: the option's content identified it before too)."""
    from test_query2doc_examples import built_example_py
    from test_run_file import random_run

    if what == "run-file":
        path = tmp_path / "system.trec"
        write = lambda version: path.write_text("\n".join(random_run(version)) + "\n")  # noqa: E731
        run = lambda output: evaluate("run-file", path=str(path), output=output)["R2MEDSampleRetrieval"]  # noqa: E731
    elif what == "hybrid":  # another split: other weights, other queries scored
        path = tmp_path / "tune.json"
        write = lambda version: path.write_text(json.dumps({"sample": ["q01", "q02", "q03", "q04"][version:]}))  # noqa: E731
        run = lambda output: evaluate("hybrid", members="bm25,bm25-okapi", fusion="zscore", tune=str(path),  # noqa: E731
                                      output=output)["R2MEDSampleRetrieval"]
    else:
        path = tmp_path / "example.py"
        write = lambda version: path.write_bytes(built_example_py().replace(b"Example", b"Example" + b" " * version, 1))  # noqa: E731
        run = lambda output: evaluate("query2doc", "bm25", llm=f"{chat_server.url}#test-model", examples=str(path),  # noqa: E731
                                      output=output)["R2MEDSampleRetrieval"]
    write(0)
    assert run("same").status == "computed" and run("same").status == "cached"
    write(1)
    again = run("same")
    assert again.status == "computed" and again.ndcg_at_10 == run("fresh").ndcg_at_10
