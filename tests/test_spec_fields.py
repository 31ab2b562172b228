"""Every field of the specs a plugin registers (docs/plugins.md, "Specs"), each exercised end to end
by a plugin registered for the test (``test_spec_<field>``), and the one optional member of every
component, ``model_meta()``. test_plugins.py checks that each field has its test and its row."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from pydantic import Field

from conftest import SAMPLE, read_jsonl, read_ranking
from r2med_tasks.plugin import LLMSpec, Options, Query, RerankerSpec, RetrieverSpec, RewriterSpec, hookimpl

TASK = "R2MEDSampleRetrieval"
CORPUS = [row["id"] for row in read_jsonl(SAMPLE / "corpus.jsonl")]


class Ranked:
    """Every document, in corpus order, ``offset`` added to each score; what it searched with kept."""

    def __init__(self, options=None):
        self.offset = getattr(options, "offset", 0.0)
        self.searched: list[Query] = []

    def index(self, corpus, *, task, context):
        self.ids = corpus.ids

    def search(self, queries, *, task, top_k, context):
        self.searched += queries
        return {q.id: {d: 1.0 / (i + 1) + self.offset for i, d in enumerate(self.ids)} for q in queries}


class RankedOptions(Options):
    offset: float = Field(0.0, description="added to every score")
    batch: int = Field(8, ge=1, description="never changes results")
    model: str = Field("org/first", description="the model")


class Named(Ranked):
    """A retriever that names its model by its ``model`` option."""

    def __init__(self, options):
        super().__init__(options)
        self.model = options.model

    def model_meta(self):
        return {"name": self.model, "revision": "r1", "display_name": "Named"}


HOOKS = {RetrieverSpec: "register_retrievers", RewriterSpec: "register_rewriters", RerankerSpec: "register_rerankers",
         LLMSpec: "register_llms"}


def plugin(*specs):
    """A plugin object registering each of ``specs`` under its kind's hook."""
    def hook(kind):
        def register_specs(register):
            for spec in specs:
                if isinstance(spec, kind):
                    register(spec)
        return hookimpl(specname=HOOKS[kind])(register_specs)

    return SimpleNamespace(**{name: hook(kind) for kind, name in HOOKS.items()})


def listed(run_cli, kind: str) -> dict[str, dict]:
    code, out, err = run_cli("list", kind, "--json")
    assert code == 0, err
    return {row["name"]: row for row in json.loads(out)}


class FakeLLM:
    def __init__(self, spec, **sampling):
        self.spec, self.model, self.params = spec, spec.partition(":")[2], sampling

    def generate(self, requests, *, on_result=None, usage=None):
        raise AssertionError("not asked")


# -- what every spec has -----------------------------------------------------------------------------


def test_spec_name(register, evaluate, plugins):
    """``--plugin NAME`` selects a component by it, the pipeline is named by it, and ``-o llm=NAME:``
    picks an LLM backend by it."""
    from r2med_tasks.running.registry import build_registry

    register(plugin(RetrieverSpec(name="my-ranked", factory=Ranked), LLMSpec(name="my-llm", factory=FakeLLM)))
    outcome = evaluate("my-ranked")
    assert outcome[TASK].n_queries == 10 and outcome.display_name == "my-ranked"
    assert build_registry(plugins).llm("my-llm:some-model").model == "some-model"


def test_spec_factory(register, evaluate, plugins, run_cli, tmp_path, monkeypatch):
    """A ``"module:attr"`` factory is imported only when a run selects the component, then called with
    the options instance; an LLM backend's with the whole ``-o llm=`` value and the sampling."""
    from r2med_tasks.running.registry import build_registry

    (tmp_path / "lazy_factory.py").write_text("from r2med_tasks.plugin import Options\n\n\n"
                                              "class Lazy:\n    def __init__(self, options):\n"
                                              "        assert isinstance(options, Options)\n"
                                              "    def index(self, corpus, *, task, context):\n        pass\n"
                                              "    def search(self, queries, *, task, top_k, context):\n"
                                              "        return {q.id: {} for q in queries}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_factory", raising=False)
    register(plugin(RetrieverSpec(name="lazy", factory="lazy_factory:Lazy"), LLMSpec(name="fake", factory=FakeLLM)))
    assert "lazy" in listed(run_cli, "retrievers") and "lazy_factory" not in sys.modules
    assert evaluate("lazy")[TASK].n_queries == 10 and "lazy_factory" in sys.modules
    client = build_registry(plugins).llm("fake:m", temperature=0.3)
    assert (client.spec, client.params) == ("fake:m", {"temperature": 0.3})


def test_spec_description(register, run_cli):
    register(plugin(RetrieverSpec(name="described", factory=Ranked, description="ranks in corpus order"),
                    LLMSpec(name="told", factory=FakeLLM, description="a backend that answers nothing")))
    assert listed(run_cli, "retrievers")["described"]["description"] == "ranks in corpus order"
    assert listed(run_cli, "llms")["told"]["description"] == "a backend that answers nothing"
    code, out, _ = run_cli("plugins", "described", "--json")
    assert code == 0 and json.loads(out)["description"] == "ranks in corpus order"


def test_spec_aliases(register, evaluate, plugins, run_cli):
    """Another name ``--plugin`` takes (in any case), and an LLM backend's other prefix; the results
    are named by the spec's own name."""
    from r2med_tasks.running.registry import build_registry

    register(plugin(RetrieverSpec(name="aliased", factory=Ranked, aliases=("Other-Name",)),
                    LLMSpec(name="primary", factory=FakeLLM, aliases=("secondary",))))
    assert listed(run_cli, "retrievers")["aliased"]["aliases"] == ["Other-Name"]
    assert evaluate("other-name").display_name == "aliased"
    assert build_registry(plugins).llm("secondary:m").spec == "secondary:m"


def test_spec_reference(register, run_cli):
    register(plugin(RetrieverSpec(name="cited", factory=Ranked, reference="https://example.org/paper")))
    assert listed(run_cli, "retrievers")["cited"]["reference"] == "https://example.org/paper"


def test_spec_options(register, evaluate, run_cli, tmp_path):
    """Each field an ``-o`` option: listed with its default and bounds, parsed by its type, refused out
    of bounds in one line, and handed to the factory as one validated instance."""
    made = []
    register(plugin(RetrieverSpec(name="opt", factory=lambda options: made.append(options) or Ranked(options),
                                  options=RankedOptions)))
    schema = listed(run_cli, "retrievers")["opt"]["options"]
    assert schema["offset"]["default"] == 0.0 and schema["batch"]["minimum"] == 1
    evaluate("opt", offset=0.5)
    assert type(made[-1]) is RankedOptions and made[-1].offset == 0.5
    code, _, err = run_cli("run", "--plugin", "opt", "-o", "batch=0", "--tasks", "sample", "--output", tmp_path / "o")
    assert code == 2 and err.strip() == "Error: -o opt.batch=0: must be >= 1"


def test_spec_runtime_options(register, evaluate):
    """An option that never changes results stays out of the identity: changing it reuses the
    results; an ordinary option's change is another experiment."""
    register(plugin(RetrieverSpec(name="rt", factory=Ranked, options=RankedOptions, runtime_options=("batch",))))
    first = evaluate("rt")
    again = evaluate("rt", batch=64)
    assert again.results_dirs == first.results_dirs and again[TASK].status == "cached"
    other = evaluate("rt", offset=1.0)
    assert other.results_dirs != first.results_dirs and Path(other.results_dirs[0]).name == "offset_1.0"


def test_spec_model_options(register, evaluate):
    """An option that chooses the model is identified by the model's name and revision
    (``model_meta()``), never as an experiment of the option's value."""
    register(plugin(RetrieverSpec(name="modelled", factory=Named, options=RankedOptions, model_options=("model",))))
    first, second = evaluate("modelled"), evaluate("modelled", model="org/second")
    assert [Path(o.results_dirs[0]).parts[-2:] for o in (first, second)] == [("org__first", "r1"),
                                                                             ("org__second", "r1")]
    assert "model" not in json.loads((Path(second.results_dirs[0]) / "r2med" / "pipeline.json").read_text()
                                     )["config"]["retriever"]["options"]


def test_spec_members_option(register, evaluate, tmp_path):
    """A composite gets the retrievers its option names, created by the harness with their own
    ``-o MEMBER.key=value``, in the option's order; each member's run is saved as its own pipeline."""
    made = []

    class Composite:
        def __init__(self, options, members):
            made.append(members)
            self.members = members

        def index(self, corpus, *, task, context):
            pass

        def search(self, queries, *, task, top_k, context):
            return context.saved_run(self.members[1], queries=queries)

    class CompositeOptions(Options):
        members: tuple[str, ...] = Field(("ranked", "named"), description="its members")

    register(plugin(RetrieverSpec(name="ranked", factory=Ranked, options=RankedOptions),
                    RetrieverSpec(name="named", factory=Named, options=RankedOptions),
                    RetrieverSpec(name="composite", factory=Composite, options=CompositeOptions,
                                  members_option="members")))
    outcome = evaluate("composite", options={"named.offset": 2.0})
    ((first, second),) = made
    assert type(first) is Ranked and type(second) is Named and (first.offset, second.offset) == (0.0, 2.0)
    record = json.loads((Path(outcome.results_dirs[0]) / "r2med" / "pipeline.json").read_text())
    assert record["config"]["retriever"]["members"] == ["ranked", "named"]
    assert record["components"]["retriever"]["members"] == [{"component": "ranked", "label": "ranked"},
                                                            {"component": "named", "label": "Named"}]
    saved = next(p for p in (tmp_path / "out").rglob(f"{TASK}.trec") if "org__first" in str(p))
    assert read_ranking(Path(outcome.results_dirs[0]) / f"{TASK}.trec") == read_ranking(saved)


def plan(tmp_path, line: str) -> list:
    """The jobs ``r2med sweep`` plans for one line over two tasks."""
    from r2med_tasks.sweep.plan import plan_sweep
    from r2med_tasks.sweep.sources import sweep_lines

    return plan_sweep(sweep_lines(f"{line}\n", "sweep.txt"), tasks=("Biology", "Bioinformatics"),
                      output=tmp_path / "out")


class Tuned(Ranked):
    def __init__(self, options, members):
        super().__init__(options)


class TunedOptions(Options):
    members: tuple[str, ...] = Field(("ranked",), description="its members")
    tune: str = Field("", description="tune across the task group when set")


def test_spec_tuning_option(register, tmp_path):
    """A composite whose tuning option is set sees all of its line's tasks, as one ``r2med-run``
    does: the sweep plans them as one job; unset, one job per task."""
    register(plugin(RetrieverSpec(name="ranked", factory=Ranked),
                    RetrieverSpec(name="tuned", factory=Tuned, options=TunedOptions, members_option="members",
                                  tuning_option="tune")))
    assert [j.tasks for j in plan(tmp_path, "--plugin tuned -o tune=split.json")] == [("Biology", "Bioinformatics")]
    assert [j.tasks for j in plan(tmp_path, "--plugin tuned")] == [("Biology",), ("Bioinformatics",)]


def test_spec_resources(register, tmp_path):
    """What one run needs, from the validated options, for the scheduler; a composite needs the most
    its members declare; a component with a device option that declares nothing gets a whole GPU,
    unless its device is the CPU."""
    class DeviceOptions(Options):
        large: bool = Field(False, description="the large model")
        device: str = Field("", description="where it runs")

    class CompositeOptions(Options):
        members: tuple[str, ...] = Field(("declared",), description="its members")

    def resources(options):
        return {"gpu": True, "gpu_memory_gb": 40 if options.large else 10}

    register(plugin(RetrieverSpec(name="declared", factory=Ranked, options=DeviceOptions, resources=resources),
                    RetrieverSpec(name="on-device", factory=Ranked, options=DeviceOptions),
                    RetrieverSpec(name="composite", factory=Tuned, options=CompositeOptions, members_option="members")))
    needs = {line: {(j.gpu, j.gpu_memory_gb) for j in plan(tmp_path, line)} for line in (
        "--plugin declared", "--plugin declared -o large=true", "--plugin on-device",
        "--plugin on-device -o device=cpu", "--plugin composite -o declared.large=true")}
    assert needs == {"--plugin declared": {(True, 10)}, "--plugin declared -o large=true": {(True, 40)},
                     "--plugin on-device": {(True, None)}, "--plugin on-device -o device=cpu": {(False, None)},
                     "--plugin composite -o declared.large=true": {(True, 40)}}


# -- what a retriever's spec adds --------------------------------------------------------------------


def test_spec_combines_generated(register, evaluate):
    """A retriever whose spec says ``combines_generated`` gets the rewriter's documents and reads them
    itself (``Query.combined``); any other gets the query's text combined by the BM25 rule, and no
    documents."""
    made = {}

    class Appends:
        def rewrite(self, queries, *, task, context):
            return [replace(q, generated=("a generated passage",), method="hyde") for q in queries]

    def recorder(flag):
        return lambda options: made.setdefault(flag, Ranked(options))

    register(plugin(RetrieverSpec(name="says-false", factory=recorder(False)),
                    RetrieverSpec(name="says-true", factory=recorder(True), combines_generated=True),
                    RewriterSpec(name="appends", factory=lambda options: Appends())))
    evaluate("appends", "says-false")
    evaluate("appends", "says-true")
    assert all(not q.generated for q in made[False].searched)  # combined by the default rule, as documented
    assert [q.text for q in made[False].searched] == [q.combined("bm25") for q in made[True].searched]
    assert all(q.generated == ("a generated passage",) for q in made[True].searched)
    assert made[True].searched[0].combined("bm25") == "a generated passage"  # HyDE's BM25 rule: the document


# -- what a reranker's spec adds ---------------------------------------------------------------------


class DepthOptions(Options):
    depth: int | None = Field(3, ge=1, description="how many to rerank (none: all)")


def test_spec_depth_option(register, evaluate):
    """The harness hands a reranker each query's first ``depth_option`` documents (unset: all the
    first stage kept); without a depth option, all of them."""
    seen = {}

    class Reverses:
        def __init__(self, name):
            self.name = name

        def rerank(self, queries, corpus, candidates, *, task, context):
            seen[self.name] = {q: list(docs) for q, docs in candidates.items()}
            return {q: {d: float(i) for i, d in enumerate(docs)} for q, docs in candidates.items()}

    register(plugin(RetrieverSpec(name="ranked", factory=Ranked),
                    RerankerSpec(name="deep", factory=lambda options: Reverses("deep"), options=DepthOptions,
                                 depth_option="depth"),
                    RerankerSpec(name="all", factory=lambda options: Reverses("all"))))
    reranked = read_ranking(Path(evaluate("ranked", "deep", top_k=20).results_dirs[0]) / f"{TASK}.trec")
    assert all(docs == CORPUS[:3] for docs in seen["deep"].values())
    assert all([d for d, _ in ranked] == CORPUS[:3][::-1] for ranked in reranked.values())
    evaluate("ranked", "deep", top_k=20, depth=None)
    assert all(docs == CORPUS[:20] for docs in seen["deep"].values())
    evaluate("ranked", "all", top_k=5)
    assert all(docs == CORPUS[:5] for docs in seen["all"].values())


# -- the optional member of every component -----------------------------------------------------------


def test_member_model_meta(register, evaluate):
    """``model_meta()`` names the results (its name and revision the folder, its display name the
    pipeline's); without it, a retriever is its plugin's ``<package>/<component>`` at the package's
    version."""
    register(plugin(RetrieverSpec(name="named", factory=Named, options=RankedOptions),
                    RetrieverSpec(name="anonymous", factory=Ranked)), "my-package", "2.5")
    named, anonymous = evaluate("named"), evaluate("anonymous")
    assert Path(named.results_dirs[0]).parts[-2:] == ("org__first", "r1") and named.display_name == "Named"
    assert Path(anonymous.results_dirs[0]).parts[-2:] == ("my-package__anonymous", "2.5")
    assert anonymous.display_name == "anonymous"

