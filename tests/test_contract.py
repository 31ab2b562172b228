"""The plugin contract (issue #28): a component gets one options instance, validated whole; every
component sees one context, whose services a hand-made one refuses in one line; ``keep_tail`` is
the reranker stage's option; nothing inspects a signature; the old forms fail with one line."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path

import pytest
from pydantic import Field, create_model, model_validator

import r2med_plugins
import r2med_tasks
from conftest import SAMPLE, read_jsonl, syntax_tree
from r2med_tasks.components.specs import RerankerSpec, RetrieverSpec, RewriterSpec
from r2med_tasks.components.context import Context
from r2med_tasks.errors import UserError
from r2med_tasks.components.hookspecs import hookimpl
from r2med_tasks.components.options import Options
from r2med_tasks.scoring.runs import read_trec

FIELDS = {"cache_dir", "progress", "log", "keep", "records", "loading", "retries", "corpus", "chat_clients", "served",
          "retrievers", "llm_calls", "tasks", "saved_run", "tuning_judgments", "hold_out", "component", "input"}


def one_line_exit_2(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


# -- what the review found, forbidden by reading the source ----------------------------------------

SIGNATURE_READERS = {"signature", "getfullargspec", "getargspec", "getcallargs", "co_varnames", "co_argcount",
                     "__signature__"}


def test_nothing_inspects_a_signature():
    found = []
    for root in (Path(r2med_tasks.__file__).parent, Path(r2med_plugins.__file__).parent):
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(syntax_tree(path)):
                if isinstance(node, ast.Attribute) and node.attr in SIGNATURE_READERS:
                    found.append(f"{path}:{node.lineno} .{node.attr}")
                elif isinstance(node, ast.ImportFrom) and node.module == "inspect":
                    found.append(f"{path}:{node.lineno} from inspect import ...")
                elif isinstance(node, ast.Import) and any(a.name == "inspect" for a in node.names):
                    found.append(f"{path}:{node.lineno} import inspect")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("kind", [RetrieverSpec, RewriterSpec, RerankerSpec])
def test_dict_form_options_are_refused_naming_the_model_forms(kind):
    with pytest.raises(TypeError) as refused:
        kind(name="old", factory=object, options={"k1": 0.9})
    message = str(refused.value)
    assert "\n" not in message and f"{kind.kind} 'old'" in message
    assert "r2med_tasks.plugin.Options" in message


def test_the_context_is_bounded_and_refuses_what_the_harness_did_not_give():
    """One context for every component; made by hand (a component's own test), each service the
    harness fills refuses with one line."""
    assert {f.name for f in fields(Context)} == FIELDS
    context = Context(cache_dir=Path("cache"))
    assert context.tasks == () and not hasattr(context, "retriever") and not hasattr(context, "data_folder")
    for call in (lambda: context.saved_run(object()), lambda: context.tuning_judgments(None, []),
                 lambda: context.hold_out([]), lambda: context.llm("openai:gpt-4o"),
                 lambda: context.searcher(None, "bm25")):
        with pytest.raises(UserError, match="^no .* is available in this context$"):
            call()


# -- options validated whole -----------------------------------------------------------------------

class PairOptions(Options):
    low: int = Field(1, ge=0, description="the lower bound")
    high: int = Field(10, ge=0, description="the upper bound")

    @model_validator(mode="after")
    def ordered(self):
        if self.low > self.high:
            raise ValueError(f"-o low={self.low} is above -o high={self.high}")
        return self


class Ranked:
    """Scores each corpus document by its place, ``offset`` added (ties: none)."""

    def __init__(self, options):
        MADE.append(options)
        self.offset = getattr(options, "offset", 0.0)
        self.ids: list[str] = []

    def index(self, corpus, *, task, context):
        SEEN.append(("index", context))
        self.ids = corpus.ids

    def search(self, queries, *, task, top_k, context):
        SEEN.append(("search", context))
        return {q.id: {d: 1.0 / (i + 1) + self.offset for i, d in enumerate(self.ids)} for q in queries}


class Composed:
    """A composite: its member's saved run, as it is."""

    def __init__(self, options, members):
        MADE.append((options, members))
        self.members = members

    def index(self, corpus, *, task, context):
        SEEN.append(("composed index", context))

    def search(self, queries, *, task, top_k, context):
        SEEN.append(("composed search", context))
        return context.saved_run(self.members[0], queries=queries)


MADE: list = []
SEEN: list = []


@pytest.fixture
def contract(register):
    MADE.clear()
    SEEN.clear()

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="pair", factory=Ranked, options=PairOptions))
            register(RetrieverSpec(name="ranked", factory=Ranked, options=create_model(
                "RankedOptions", __base__=Options, offset=(float, Field(0.0, description="added to every score")))))
            register(RetrieverSpec(name="composed", factory=Composed, members_option="members", options=create_model(
                "ComposedOptions", __base__=Options, members=(tuple[str, ...], Field(("ranked",), description="its member")))))
            register(RetrieverSpec(name="keywords", factory=KeywordFactory))

    return register(Plugin(), "contract-plugin")


class KeywordFactory:
    """A factory of the earlier form: every option a keyword argument."""

    def __init__(self, *, k1: float = 0.9):
        self.k1 = k1


def test_a_rule_between_options_is_one_line_naming_them_exit_2(contract, run_cli, tmp_path):
    code, _, err = run_cli("run", "--plugin", "pair", "-o", "low=5", "-o", "high=3", "--tasks", "sample",
                           "--output", tmp_path / "out")
    one_line_exit_2(code, err, "retriever 'pair': -o low=5 is above -o high=3")
    assert not (tmp_path / "out").exists() and MADE == []  # refused before the factory or anything else ran


def test_a_builtin_rule_between_options_is_one_line_exit_2(run_cli, tmp_path):
    code, _, err = run_cli("run", "--plugin", "hybrid", "-o", "members=bm25,bm25-okapi", "-o", "weights=1",
                           "--tasks", "sample", "--output", tmp_path / "out", "--dry-run")
    one_line_exit_2(code, err, "retriever 'hybrid': -o hybrid.weights: 1 weights for 2 members")
    code, _, err = run_cli("run", "--plugin", "hyde", "-o", "llm=openai:gpt-4o", "-o", "hub_split=o3_mini",
                           "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path / "out", "--dry-run")
    one_line_exit_2(code, err, "rewriter 'hyde': -o hub_split=o3_mini goes with -o source=LLM")


def test_the_factory_gets_one_options_instance(contract):
    import r2med_tasks as r2med

    r2med.pipeline("pair", low=2)
    (options,) = MADE
    assert type(options) is PairOptions and (options.low, options.high) == (2, 10)


def test_a_factory_of_the_earlier_form_is_one_line(contract, run_cli, tmp_path):
    code, _, err = run_cli("run", "--plugin", "keywords", "--tasks", "sample", "--output", tmp_path / "out")
    one_line_exit_2(code, err, "retriever 'keywords' (from contract-plugin) could not be created: TypeError",
                    "a factory is called with one argument, the options instance")


def test_an_ordinary_component_gets_the_runs_context(contract, evaluate):
    assert evaluate("ranked")["sample"].status == "computed"
    assert [what for what, _ in SEEN] == ["index", "search"]
    assert all(type(context) is Context and [t.name for t in context.tasks] == ["R2MEDSampleRetrieval"]
               for _, context in SEEN)


def test_a_composite_gets_its_members_and_its_services(contract, evaluate, tmp_path):
    outcome = evaluate("composed", options={"ranked.offset": 0.5})
    (member_options, (options, members)) = MADE  # the member first, created by the harness
    assert member_options.offset == 0.5 and options.members == ("ranked",)
    assert len(members) == 1 and type(members[0]) is Ranked and members[0].offset == 0.5
    contexts = dict(SEEN)
    assert [t.name for t in contexts["composed search"].tasks] == ["R2MEDSampleRetrieval"]
    assert type(contexts["index"]) is type(contexts["search"]) is Context  # the member, through its saved run
    # the member's saved run ranks every document in corpus order (computed here); the composite's is it
    corpus = [row["id"] for row in read_jsonl(SAMPLE / "corpus.jsonl")]
    saved = read_trec(next(p for p in (tmp_path / "out").rglob("R2MEDSampleRetrieval.trec") if "ranked" in str(p)))
    assert saved and all(list(docs) == corpus for docs in saved.values())
    assert read_trec(Path(outcome.results_dirs[0]) / "R2MEDSampleRetrieval.trec") == saved


# -- keep_tail: the reranker stage's option --------------------------------------------------------

# Recorded before keep_tail moved from every reranker's options class to the stage (the configuration
# of each run's identity, and where the results go): the move changes neither.
BM25 = {"component": "bm25", "options": {"b": 0.4, "k1": 0.9, "query_weighting": "bm25"}, "plugin": "r2med"}
BEFORE = {
    ("bge-reranker", ("keep_tail=true",)): (
        {"reranker": {"component": "bge-reranker", "options": {"dtype": "fp32", "keep_tail": True, "max_length": 512,
                                                               "rerank_k": 10}, "plugin": "r2med"},
         "retriever": BM25, "top_k": 100},
        "experiments/bge-reranker.keep_tail_True", {"bge-reranker.keep_tail": True}),
    ("bge-reranker", ()): (
        {"reranker": {"component": "bge-reranker", "options": {"dtype": "fp32", "keep_tail": False, "max_length": 512,
                                                               "rerank_k": 10}, "plugin": "r2med"},
         "retriever": BM25, "top_k": 100},
        "", {}),
    ("monobert", ("monobert.keep_tail=true", "rerank_k=20")): (
        {"reranker": {"component": "monobert", "options": {"dtype": "fp32", "keep_tail": True, "max_length": 512,
                                                           "rerank_k": 20}, "plugin": "r2med"},
         "retriever": BM25, "top_k": 100},
        "experiments/monobert.keep_tail_True__monobert.rerank_k_20",
        {"monobert.keep_tail": True, "monobert.rerank_k": 20}),
}


@pytest.mark.parametrize("reranker,options", list(BEFORE))
def test_keep_tail_identities_are_those_recorded_before_the_move(plugins, reranker, options):
    from r2med_tasks.api import registry
    from r2med_tasks.components.model_refs import hub_offline
    from r2med_tasks.running.pipelines import build_pipeline, instantiate
    from r2med_tasks.results.folder import ResultsFolder
    from r2med_tasks.results.identity import canonical

    config, experiment, variant = BEFORE[(reranker, options)]
    reg = registry()
    with hub_offline():
        pipeline = build_pipeline(reg, ["bm25", reranker], list(options))
        instantiate(pipeline, reg)
        plain = build_pipeline(reg, ["bm25", reranker], [])
        instantiate(plain, reg)
        folder, base = (ResultsFolder.for_pipeline(Path("out"), p.spec(), local=True).path for p in (pipeline, plain))
    assert canonical(pipeline.config()) == config and pipeline.variant() == variant
    assert folder == (base / experiment if experiment else base)
    assert "keep_tail" not in pipeline.stages["reranker"].spec.options.model_fields  # never the reranker's own


def test_rerankers_list_keep_tail_after_their_own_options(run_cli):
    code, out, _ = run_cli("plugins", "bge-reranker", "--json")
    assert code == 0
    options = json.loads(out)["options"]
    assert list(options)[-1] == "keep_tail" and options["keep_tail"]["default"] is False
    assert options["keep_tail"]["type"] == "boolean" and not options["keep_tail"]["runtime"]


# -- the LLM client contract -----------------------------------------------------------------------

def test_an_llm_backend_returning_no_client_is_one_line(register, run_cli, tmp_path):
    from r2med_tasks.components.specs import LLMSpec

    class Plugin:
        @hookimpl
        def register_llms(self, register):
            register(LLMSpec(name="mute", factory=lambda spec, **sampling: object()))

    register(Plugin(), "mute-plugin")
    code, _, err = run_cli("run", "--plugin", "hyde", "-o", "llm=mute:m", "--plugin", "bm25", "--tasks", "sample",
                           "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache")
    one_line_exit_2(code, err, "llm 'mute' (from mute-plugin): its factory returned object", "LLMClient")
