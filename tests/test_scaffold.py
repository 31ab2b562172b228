"""``r2med new-plugin NAME --kind KIND`` (r2med_tasks/cli/scaffold.py): the package of each kind
installs for real (pip), ``r2med plugins`` lists it, it runs on the sample task through the command
line, and its own tests pass, run with pytest in its folder as its README says. Bad input is one
line and exit status 2, and writes nothing.

The four packages are written and pip-installed once per session (conftest's ``plugin_packages``);
listing, running and testing them happen in this process, with their folder on ``sys.path``."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from r2med_tasks.cli.scaffold import PLUGIN_KINDS

from conftest import SCAFFOLDS, TESTS

ROOT = TESTS.parent
TEMPLATES = ROOT / "r2med_tasks" / "data" / "scaffold"
# kind -> the component's name here, and how this module's runs select it (as the README and docs do)
KINDS = {
    "retriever": (SCAFFOLDS["retriever"], ["--plugin", "my-retriever"]),
    "rewriter": (SCAFFOLDS["rewriter"], ["--plugin", "my-rewriter", "--plugin", "bm25"]),
    "reranker": (SCAFFOLDS["reranker"], ["--plugin", "bm25", "--plugin", "my-reranker"]),
    "agent": (SCAFFOLDS["agent"], ["--plugin", "my-agent", "--plugin", "bm25"]),  # -o llm= of the test's server
}
PIPELINES = {"retriever": "my-retriever", "rewriter": "my-rewriter + BM25", "reranker": "BM25 + my-reranker",
             "agent": "my-agent + BM25"}
PACKAGES = [f"r2med-{name}" for name, _ in KINDS.values()]


def files_of(kind: str) -> set[str]:
    name = KINDS[kind][0]
    module, snake = "r2med_" + name.replace("-", "_"), name.replace("-", "_")
    return {"pyproject.toml", "README.md", ".gitignore", f"{module}/__init__.py", f"{module}/{kind}.py",
            f"tests/test_{snake}.py"}


def tree(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


# -- the packages --------------------------------------------------------------------------------------

def test_each_kind_is_a_package_with_its_entry_point(scaffolds):
    for kind, (name, _) in KINDS.items():
        folder = scaffolds / f"r2med-{name}"
        assert tree(folder) == files_of(kind)
        project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
        module = "r2med_" + name.replace("-", "_")
        assert project["project"]["name"] == f"r2med-{name}" and project["project"]["version"] == "0.1.0"
        assert project["project"]["dependencies"] == ["r2med"]
        assert project["project"]["entry-points"]["r2med"] == {name: module}
        assert project["project"]["optional-dependencies"]["test"] == ["pytest"]
        for path in folder.rglob("*.py"):  # valid Python, every placeholder filled in
            source = path.read_text(encoding="utf-8")
            compile(source, str(path), "exec")
            assert "$" not in source, path
        run = f"r2med-run {PLUGIN_KINDS[kind][1].format(name=name)} --tasks sample"  # -o llm=... for the agent
        assert run in (folder / "README.md").read_text(encoding="utf-8")
    assert not [p for p in scaffolds.iterdir() if p.name.startswith(".")], "no temporary folder left"


def test_every_template_is_used():
    used = {"pyproject.toml.tmpl", "README.md.tmpl", "gitignore.tmpl"}
    used |= {f"{kind}{part}.py.tmpl" for kind in PLUGIN_KINDS for part in ("", "_init", "_test")}
    assert {p.name for p in TEMPLATES.iterdir()} == used
    assert set(PLUGIN_KINDS) == set(KINDS)


def test_the_description_is_written_as_given(tmp_path, run_cli, monkeypatch):
    """Quotes, backslashes and non-ASCII text reach the metadata and the spec unchanged."""
    monkeypatch.chdir(tmp_path)
    text = 'Says "hello" \\ to the corpus, ünïcode and a $dollar'
    code, out, err = run_cli("new-plugin", "quoted", "--kind", "reranker", "--description", text)
    assert code == 0, err
    folder = tmp_path / "r2med-quoted"
    assert tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]["description"] == text
    init = ast.parse((folder / "r2med_quoted" / "__init__.py").read_text(encoding="utf-8"))
    (spec,) = [n for n in ast.walk(init) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "RerankerSpec"]
    assert ast.literal_eval(next(k.value for k in spec.keywords if k.arg == "description")) == text
    assert text in (folder / "README.md").read_text(encoding="utf-8")


def test_files_take_the_umask(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    previous = os.umask(0o027)
    try:
        code, _, err = run_cli("new-plugin", "masked")
    finally:
        os.umask(previous)
    assert code == 0, err
    folder = tmp_path / "r2med-masked"
    modes = {p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o777) for p in [folder, *folder.rglob("*")]}
    assert {path: mode for path, mode in modes.items()
            if mode != (oct(0o750) if (tmp_path / path).is_dir() else oct(0o640))} == {}


# -- installed: listed, run, tested ---------------------------------------------------------------------

def test_each_kind_is_listed_by_r2med_plugins(installed, run_cli):
    installed(*PACKAGES)
    code, out, err = run_cli("plugins", "--json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)["plugins"]}
    for kind, (name, _) in KINDS.items():  # the agent is a rewriter
        assert rows[f"r2med-{name}"]["version"] == "0.1.0" and "error" not in rows[f"r2med-{name}"]
        assert rows[f"r2med-{name}"]["components"] == {PLUGIN_KINDS[kind][0] + "s": [name]}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_runs_on_the_sample_task(kind, installed, run_cli, tmp_path, request):
    name, plugins = KINDS[kind]
    installed(*PACKAGES)
    args = ["run", *plugins, "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache",
            "--json"]
    server = None
    if kind == "agent":
        server = request.getfixturevalue("chat_server")  # a local OpenAI-compatible server (NO_PROXY set)
        args[3:3] = ["-o", f"llm={server.url}#test-model"]
    code, out, err = run_cli(*args)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["pipeline"] == PIPELINES[kind]
    if kind == "retriever":  # filed under the package's name (its model_meta), not r2med's own namespace
        assert summary["model_name"] == "r2med-my-retriever/my-retriever" and "/r2med__" not in str(summary)
    (task,) = summary["tasks"]
    assert task["n_queries"] == 10 and 0 < task["ndcg_at_10"] <= 1
    (folder,) = summary["results_dirs"]
    if kind != "retriever":  # a pipeline with the package's component: filed under the package's name
        assert Path(folder).parent.name.startswith(f"r2med-{name}__"), folder
    (record,) = Path(folder).rglob("pipeline.json")  # (a reranker's first stage has its own folder)
    pipeline = json.loads(record.read_text())
    assert pipeline["config"][PLUGIN_KINDS[kind][0]]["plugin"] == f"r2med-{name}"
    assert pipeline["code"][f"r2med-{name}"].startswith("source-")  # installed from a folder: known by its source
    if server is not None:
        assert server.count == 20  # per query: a search query, then an answer
        assert len((next((tmp_path / "out").rglob("*.trajectories.jsonl"))).read_text().splitlines()) == 10


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_package_passes_its_own_tests(kind, scaffolds, installed, tmp_path, monkeypatch, capsys):
    """``python -m pytest`` in the package's folder (a copy: a run leaves caches): a pytest session
    of its own, with the package's pytest configuration and none of this suite's (run in this
    process, with the packages installed, as PYTHONPATH puts them)."""
    name = KINDS[kind][0]
    folder = shutil.copytree(scaffolds / f"r2med-{name}", tmp_path / f"r2med-{name}")
    installed(*PACKAGES)
    for key in [k for k in os.environ if k.startswith("PYTEST_")]:  # not this suite's
        monkeypatch.delenv(key)
    monkeypatch.chdir(folder)
    before = set(sys.modules)
    try:
        code = pytest.main(["-q", "-p", "no:cacheprovider"])
    finally:  # its test module and its package as imported from the folder
        for module in set(sys.modules) - before:
            if (getattr(sys.modules[module], "__file__", None) or "").startswith(str(folder)):
                del sys.modules[module]
    output = capsys.readouterr().out
    assert code == 0, output
    passed = re.search(r"(\d+) passed", output)
    assert passed and int(passed.group(1)) >= 2 and not re.search(r"\d+ (failed|error)", output)


# -- refused: one line, exit 2, nothing written -------------------------------------------------------

@pytest.mark.parametrize("args,says", [
    (["My-Plugin"], "NAME 'My-Plugin': a plugin's name is lowercase letters, digits and single hyphens"),
    (["my_plugin"], "NAME 'my_plugin': a plugin's name is lowercase letters"),
    (["two--hyphens"], "single hyphens"),
    (["9lives"], "starting with a letter"),
    (["x" * 41], "at most 40 characters"),
    (["bad\x1bname"], "NAME 'bad\\x1bname'"),
    (["r2med-mine"], "drop the 'r2med-' prefix (r2med new-plugin mine)"),
    (["bm25"], "the retriever 'bm25' of r2med has that name"),
    (["bm-25"], "the retriever 'bm25' of r2med has that name"),  # names match whatever their hyphens
    (["hyde", "--kind", "retriever"], "the rewriter 'hyde' of r2med has that name"),
    (["nv"], "the retriever 'nvembed' of r2med has that name"),  # an alias
    (["tasks"], "a module named r2med_tasks can already be imported here"),
    (["plugins"], "a module named r2med_plugins can already be imported here"),
    (["fine", "--kind", "ranker"], "Invalid value for '--kind': 'ranker' is not one of 'retriever', 'rewriter', "
                                   "'reranker', 'agent'"),
    (["fine", "--description", "two\nlines"], "--description 'two\\nlines': one line of text"),
    (["fine", "--description", "  "], "--description '  ': one line of text"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_input_is_one_line_and_writes_nothing(args, says, run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("new-plugin", *args)
    assert code == 2 and out == ""
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


def test_a_third_party_component_name_or_package_is_taken(run_cli, register, tmp_path, monkeypatch):
    import importlib.metadata

    from r2med_tasks import RetrieverSpec, hookimpl

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="echo", factory=lambda options: None))

    register(Plugin(), "echo-pkg")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("new-plugin", "echo")
    assert code == 2 and "NAME 'echo': the retriever 'echo' of echo-pkg has that name" in err
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.2" if name == "r2med-taken" else real(name))
    code, _, err = run_cli("new-plugin", "taken")
    assert code == 2 and "the package r2med-taken 1.2 is already installed; choose another NAME" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("existing", ["folder", "file", "link"])
def test_an_existing_folder_is_never_written_over(existing, run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "r2med-mine"
    if existing == "folder":
        target.mkdir()
        (target / "notes.txt").write_text("mine")
    elif existing == "file":
        target.write_text("mine")
    else:
        target.symlink_to(tmp_path / "nowhere")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, out, err = run_cli("new-plugin", "mine")
    assert code == 2 and f"{target}: already exists; choose another NAME, or move that folder away" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_a_failed_write_leaves_nothing(run_cli, tmp_path, monkeypatch):
    """The package is built in a hidden folder and renamed: a full disk midway leaves no half package."""
    import errno

    written = []
    real = Path.write_text

    def fill_up(self, *args, **kwargs):
        if len(written) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        written.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(Path, "write_text", fill_up)
    code, out, err = run_cli("new-plugin", "mine")
    assert code == 2 and "no space left on the device" in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.process  # what a fresh interpreter imports
def test_new_plugin_imports_no_heavy_library(tmp_path):
    """`r2med new-plugin --help`, and writing a package, load no torch, mteb, numpy or pandas."""
    code = (
        "import sys\n"
        "from r2med_tasks.cli import cli\n"
        "for args in (['new-plugin', '--help'], ['new-plugin', 'light', '--kind', 'agent']):\n"
        "    try:\n        cli(args, prog_name='r2med')\n    except SystemExit:\n        pass\n"
        "heavy = sorted(m for m in ('torch', 'mteb', 'numpy', 'datasets', 'sentence_transformers', 'pandas', 'openai')"
        " if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "R2MED_LOAD_PLUGINS": ""})
    assert result.returncode == 0, result.stderr
    assert "--kind [retriever|rewriter|reranker|agent]" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "HEAVY []" and (tmp_path / "r2med-light").is_dir()


def test_the_docs_show_the_commands_tested_here(run_cli, tmp_path, monkeypatch):
    """docs/writing-plugins.md's "Start from a scaffold" shows the commands this module runs for the
    retriever (pip installs it with --target here, not -e), the next steps ``new-plugin`` prints. Its
    block is `shell`, which tests/test_docs.py's dry runs leave out: my-retriever exists only once
    its first line has run."""
    page = (ROOT / "docs" / "writing-plugins.md").read_text(encoding="utf-8")
    section = page.split("\n## Start from a scaffold\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```shell\n", 1)[1].split("```", 1)[0].splitlines()
    name, plugins = KINDS["retriever"]
    assert block[0] == f"r2med new-plugin {name} --kind retriever"
    assert block[3] == f"r2med-run {' '.join(plugins)} --tasks sample"
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*block[0].split()[1:])
    assert code == 0, err
    assert [line.strip() for line in out.split("Next:\n", 1)[1].splitlines()] == block[1:]


def test_the_generated_retriever_test_judges_rankings_by_score_not_dict_order(tmp_path, monkeypatch):
    """The scaffold's ranking test passes a retriever whose run lists documents in any order (the
    harness keeps the top-k by score), and fails one that ranks the wrong document first."""
    import types
    from string import Template

    from r2med_tasks.cli.scaffold import _template

    source = _template("retriever_test.py.tmpl").template
    body = "def " + source.split("def test_the_best_match_comes_first", 1)[1].split("\n\n\ndef ", 1)[0]
    code = Template("def test_the_best_match_comes_first" + body[len("def "):]).substitute(
        cls="Words", module="words", name="words")

    def verdict(scores: dict[str, float]) -> bool:
        class Words:
            def __init__(self, options):
                pass

            def index(self, corpus, *, task, context):
                pass

            def search(self, queries, *, task, top_k, context):
                return {"q1": dict(scores)}

        from r2med_tasks.plugin import Corpus, Query

        module = types.SimpleNamespace(WordsOptions=lambda: None)
        namespace = {"Words": Words, "words": module, "Corpus": Corpus, "Query": Query}
        exec(code, namespace)
        try:
            namespace["test_the_best_match_comes_first"]()
        except AssertionError:
            return False
        return True

    assert verdict({"a": 0.4, "b": 0.0, "c": 0.9})  # listed in corpus order, not best first
    assert verdict({"c": 0.9, "a": 0.4})
    assert not verdict({"a": 0.9, "c": 0.4})
