import json
import subprocess
import sys

import pytest

from r2med_tasks import RetrieverSpec, RewriterSpec, TaskSpec, hookimpl
from r2med_tasks.errors import UserError
from r2med_tasks.running.registry import build_registry
from pathlib import Path

from conftest import SAMPLE, TESTS, read_jsonl, read_ranking


class Echo:
    def index(self, corpus, *, task, context):
        self.ids = corpus.ids

    def search(self, queries, *, task, top_k, context):
        return {q.id: {d: 1.0 / (i + 1) for i, d in enumerate(self.ids)} for q in queries}


def retriever_plugin(name, **kw):
    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name=name, factory=lambda options: Echo(), **kw))

    return Plugin()


def test_hook_register_retrievers(plugins, register):
    register(retriever_plugin("echo", aliases=("ECHO-1",)), "echo-pkg")
    reg = build_registry(plugins)
    entry = reg.component("echo-1")
    assert entry.spec.name == "echo" and entry.plugin.name == "echo-pkg" and entry.kind == "retriever"


def test_hook_register_rewriters(plugins, register):
    class Plugin:
        @hookimpl
        def register_rewriters(self, register):
            register(RewriterSpec(name="upper", factory=lambda options: None))

    register(Plugin())
    assert build_registry(plugins).component("rewriter:upper").kind == "rewriter"


def test_hook_register_rerankers(plugins, register, evaluate, tmp_path):
    """A reranker re-scores the first stage's candidates; the run is ordered by its scores."""
    from r2med_tasks import RerankerSpec

    seen = {}

    class ShortestFirst:
        def rerank(self, queries, corpus, candidates, *, task, context):
            length = dict(zip(corpus.ids, map(len, corpus.texts)))
            seen.update(candidates)
            return {qid: {d: -float(length[d]) for d in docs} for qid, docs in candidates.items()}

    class Plugin:
        @hookimpl
        def register_rerankers(self, register):
            register(RerankerSpec(name="shortest", factory=lambda options: ShortestFirst()))

    register(Plugin(), "rerank-pkg")
    outcome = evaluate("bm25", "shortest", top_k=5)
    assert outcome.display_name == "BM25 + shortest"
    assert len(outcome.results_dirs) == 1
    (folder,) = map(Path, outcome.results_dirs)
    texts = {r["id"]: r["text"] for r in read_jsonl(SAMPLE / "corpus.jsonl")}
    run = read_ranking(folder / "R2MEDSampleRetrieval.trec")
    assert run.keys() == seen.keys()
    for qid, docs in run.items():
        assert all(doc in seen[qid] and score == -len(texts[doc]) for doc, score in docs)
        assert [len(texts[doc]) for doc, _ in docs] == sorted(len(texts[doc]) for doc, _ in docs)
    assert all(len(v) == 5 for v in seen.values())


def test_hook_register_tasks(plugins, register, evaluate):
    """A package can add its own task; it runs like a built-in one."""
    class Plugin:
        @hookimpl
        def register_tasks(self, register):
            register(TaskSpec(name="MyMedRetrieval", short_name="mymed", description="mine", local_path=SAMPLE))

    register(Plugin(), "my-tasks")
    register(retriever_plugin("echo"), "echo-pkg")
    outcome = evaluate("echo", tasks="mymed")
    assert list(outcome) == ["MyMedRetrieval"] and outcome["mymed"].n_queries == 10


def test_register_wrong_spec_type_marks_plugin_broken(plugins, register):
    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RewriterSpec(name="oops", factory=lambda options: Echo()))

    register(Plugin(), "confused-pkg")
    register(retriever_plugin("echo"), "echo-pkg")
    reg = build_registry(plugins)
    assert reg.component("echo").spec.name == "echo"
    assert [b.name for b in plugins.broken] == ["confused-pkg"]
    assert "register_retrievers got RewriterSpec, expected RetrieverSpec" in plugins.broken[0].error


def test_hook_that_raises_marks_plugin_broken(plugins, register, run_cli):
    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            raise RuntimeError("kaboom")

    register(Plugin(), "kaboom-pkg", "2.0")
    code, out, _ = run_cli("plugins", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)["plugins"]}
    assert "kaboom" in rows["kaboom-pkg"]["error"] and rows["kaboom-pkg"]["version"] == "2.0"
    assert {"bm25", "bm25-okapi", "st", "nvembed"} <= set(rows["r2med"]["components"]["retrievers"])


def test_misspelled_hook_is_reported(plugins, register):
    class Plugin:
        @hookimpl
        def register_retreivers(self, register):
            pass

    register(Plugin(), "typo-pkg")
    assert plugins.broken[0].name == "typo-pkg" and "register_retreivers" in plugins.broken[0].error


def test_duplicate_names_name_both_packages(plugins, register, run_cli):
    register(retriever_plugin("echo"), "first-pkg")
    register(retriever_plugin("echo"), "second-pkg")
    code, _, err = run_cli("run", "--plugin", "echo", "--tasks", "sample")
    assert code == 2
    assert "two retrievers are named 'echo': one from first-pkg" in err and "one from second-pkg" in err


def test_a_clash_fails_only_the_lookups_of_its_names(plugins, register):
    """A package's retriever, task and LLM backend that take built-in names: those names (and the
    set-aside retriever's alias) fail when looked up, naming both packages; nothing else does."""
    from r2med_tasks.components.specs import LLMSpec

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="bm25", factory=lambda options: Echo(), aliases=("my-bm25",)))

        @hookimpl
        def register_tasks(self, register):
            register(TaskSpec(name="MySample", short_name="sample", description="mine", local_path=SAMPLE))

        @hookimpl
        def register_llms(self, register):
            register(LLMSpec(name="openai", factory=lambda spec, **sampling: None))

    register(Plugin(), "clashing-pkg")
    reg = build_registry(plugins)
    for lookup in (lambda: reg.component("bm25"), lambda: reg.component("retriever:my-bm25"),
                   lambda: reg.tasks(["sample"]), lambda: reg.llm("openai:gpt-4o")):
        with pytest.raises(UserError, match="one from r2med .*one from clashing-pkg") as err:
            lookup()
        assert "\n" not in str(err.value)
    assert reg.component("bm25-okapi").plugin.name == "r2med" and plugins.broken == []
    assert [t.short_name for t in reg.tasks(["Biology"])] == ["Biology"] and reg.llm("vllm:m").model == "m"
    assert len(reg.conflicts) == 3


def test_same_name_in_two_kinds_needs_a_kind(plugins, register, run_cli):
    class Plugin:
        @hookimpl
        def register_rewriters(self, register):
            register(RewriterSpec(name="echo", factory=lambda options: None))

    register(retriever_plugin("echo"), "echo-pkg")
    register(Plugin(), "rewriter-pkg")
    code, _, err = run_cli("run", "--plugin", "echo", "--tasks", "sample")
    assert code == 2 and "write retriever:echo or rewriter:echo" in err


def test_factory_returning_wrong_object(plugins, register, run_cli):
    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="nothing", factory=lambda options: object()))

    register(Plugin(), "nothing-pkg")
    code, _, err = run_cli("run", "--plugin", "nothing", "--tasks", "sample")
    assert code == 2 and "lacks the Retriever methods" in err


def test_list_retrievers_json(run_cli):
    code, out, _ = run_cli("list", "retrievers", "--json")
    assert code == 0
    st = {r["name"]: r for r in json.loads(out)}["st"]
    assert st["plugin"] == "r2med" and st["options"]["model"]["default"] == "sentence-transformers/all-MiniLM-L6-v2"


LIGHT_COMMANDS = [["run", "--help"], ["plugins"], ["plugins", "bm25"], ["plugins", "nvembed"], ["list", "retrievers"],
                  ["list", "tasks"]]
# Each command in a child forked from one interpreter that has imported r2med_tasks.cli and nothing
# else: a fresh `r2med ARGS` each, without starting Python six times. A child prints what it imported.
HEAVY_AFTER = """
import json, os, sys
from r2med_tasks.cli import cli
for args in json.loads(sys.argv[1]):
    pid = os.fork()
    if pid == 0:
        sys.stdout = open(os.devnull, "w")  # the command's own output
        try:
            cli(args, prog_name="r2med")
        except SystemExit:
            pass
        heavy = sorted(m for m in ("torch", "mteb", "numpy", "datasets", "sentence_transformers", "pandas")
                       if m in sys.modules)
        sys.__stdout__.write(json.dumps([args, heavy]) + "\\n")
        sys.__stdout__.flush()
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
"""


@pytest.fixture(scope="module")
def heavy_imports() -> dict[str, list[str]]:
    """What each of LIGHT_COMMANDS imported of the heavy libraries, run in a fresh process."""
    out = subprocess.run([sys.executable, "-c", HEAVY_AFTER, json.dumps(LIGHT_COMMANDS)], capture_output=True,
                         text=True, check=True).stdout
    return {" ".join(args): heavy for args, heavy in map(json.loads, out.splitlines())}


@pytest.mark.process  # what a fresh interpreter imports
@pytest.mark.parametrize("args", LIGHT_COMMANDS, ids=" ".join)
def test_light_commands_import_no_heavy_library(args, heavy_imports):
    """--help and listings must stay fast: no torch, mteb, numpy or datasets on that path."""
    assert heavy_imports[" ".join(args)] == []


def test_installed_plugin_is_listed_and_broken_one_reported(installed, run_cli):
    installed("r2med-example", "r2med-broken")
    code, out, err = run_cli("plugins", "--json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)["plugins"]}
    assert rows["r2med-example"]["version"] == "0.3.0"
    assert rows["r2med-example"]["components"] == {"retrievers": ["tfidf"]}
    assert rows["r2med-broken"]["version"] == "9.9.9"
    assert "ImportError: r2med_broken needs a library" in rows["r2med-broken"]["error"]


def test_installed_plugin_runs_beside_a_broken_one(installed, run_cli, tmp_path):
    installed("r2med-example", "r2med-broken")
    code, out, err = run_cli("run", "--plugin", "tfidf", "--tasks", "sample", "--output", tmp_path, "--json")
    assert code == 0, err
    assert "plugin r2med-broken 9.9.9 (r2med_broken) is broken" in err
    summary = json.loads(out)
    assert summary["model_name"] == "example/tfidf" and summary["tasks"][0]["n_queries"] == 10
    # the sample is local data: its results lie under local-data/
    pipeline = json.loads((tmp_path / "local-data" / "example__tfidf" / "0.3.0" / "r2med" / "pipeline.json")
                          .read_text())
    assert pipeline["config"]["retriever"]["plugin"] == "r2med-example"
    # installed from a local folder (pip's direct_url.json: file://): its code is known by its source
    assert pipeline["code"]["r2med-example"].startswith("source-")


def test_asking_for_a_broken_packages_component_names_it_broken(installed, run_cli, tmp_path):
    """r2med-broken's entry point is ``broken``: the component a user asks for by that name is its."""
    installed("r2med-example", "r2med-broken")
    code, _, err = run_cli("run", "--plugin", "broken", "--tasks", "sample", "--output", tmp_path)
    assert code == 2
    assert ("--plugin broken: the plugin 'r2med-broken' that should provide it is broken: ImportError: r2med_broken "
            "needs a library that is not installed (see `r2med plugins`)") in " ".join(err.split())


def test_load_plugins_env_restricts_third_party(installed, run_cli):
    installed()  # R2MED_LOAD_PLUGINS="" with the packages installed
    code, out, _ = run_cli("plugins", "--json")
    assert [r["name"] for r in json.loads(out)["plugins"]] == ["r2med"]


def test_unpackaged_module_through_env(plugins, run_cli, monkeypatch):
    """R2MED_PLUGINS names a module on the path (conftest puts tests/plugins_for_tests there)."""
    from r2med_tasks.running import discovery as plugins_module

    def retrievers(modules: str) -> set[str]:
        monkeypatch.setenv("R2MED_PLUGINS", modules)
        monkeypatch.setattr(plugins_module, "_plugins", None)
        code, out, err = run_cli("list", "retrievers", "--json")
        assert code == 0, err
        return {r["name"] for r in json.loads(out)}

    monkeypatch.delitem(sys.modules, "overlap_plugin", raising=False)
    assert {"overlap", "bm25", "st"} <= retrievers("overlap_plugin") and "overlap" not in retrievers("")


def test_user_error_class_is_public():
    """Plugins raise ``r2med_tasks.UserError`` (docs/writing-plugins.md): the core's class, exported."""
    import r2med_tasks

    assert r2med_tasks.UserError is UserError and "UserError" in r2med_tasks.__all__
    assert issubclass(UserError, Exception)


def test_every_hook_is_documented_and_tested():
    """Each hookspec has a section in docs/plugins.md and a test_hook_<name> somewhere in tests/."""
    from r2med_tasks.components import hookspecs

    hooks = [name for name in dir(hookspecs) if name.startswith("register_")]
    docs = (TESTS.parent / "docs" / "plugins.md").read_text()
    tests = "".join(p.read_text() for p in TESTS.glob("test_*.py"))
    for hook in hooks:
        assert f"### `{hook}(register)`" in docs, hook
        assert f"def test_hook_{hook}(" in tests, hook


def test_every_spec_field_is_documented_and_tested():
    """Each field of the specs a plugin registers has a row in docs/plugins.md's "Specs" and a
    test_spec_<field> that exercises it (tests/test_spec_fields.py); likewise the one optional member
    of every component, ``model_meta()``."""
    from dataclasses import fields

    from r2med_tasks.plugin import LLMSpec, RerankerSpec, RetrieverSpec, RewriterSpec

    names = {f.name for spec in (RetrieverSpec, RewriterSpec, RerankerSpec, LLMSpec) for f in fields(spec)}
    page = (TESTS.parent / "docs" / "plugins.md").read_text()
    specs = page.split("\n## Specs\n", 1)[1].split("\n### ", 1)[0]
    tests = "".join(p.read_text() for p in TESTS.glob("test_*.py"))
    assert {"combines_generated", "depth_option", "tuning_option", "resources"} <= names
    for name in names:
        assert f"| `{name}` |" in specs, name
        assert f"def test_spec_{name}(" in tests, name
    assert "| `model_meta() -> dict` |" in page and "def test_member_model_meta(" in tests
