"""Typed component options: declared as pydantic models (type, default, bounds, help), parsed from
``-o key=value`` by type, refused out of bounds with one line, shown by ``r2med plugins NAME`` and
``r2med list ... --json``."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import pytest
from pydantic import Field, ValidationError, create_model

from conftest import TESTS, r2med_command
from r2med_tasks import RetrieverSpec, hookimpl
from r2med_tasks.errors import UserError
from r2med_tasks.components.options import Options
from r2med_tasks.running.pipelines import build_pipeline, instantiate
from r2med_tasks.running.registry import build_registry
from r2med_tasks.results.identity import canonical


class Echo:
    def __init__(self, options):
        self.options = options

    def index(self, corpus, *, task, context):
        self.ids = corpus.ids

    def search(self, queries, *, task, top_k, context):
        return {q.id: {d: 1.0 / (i + 1) for i, d in enumerate(self.ids)} for q in queries}


KINDS = create_model(
    "KindsOptions", __base__=Options,
    count=(int, Field(3, ge=1, description="a count")),
    ratio=(float, Field(0.5, ge=0, le=1, description="a fraction")),
    flag=(bool, Field(False, description="a switch")),
    text=(str, Field("", description="free text")),
    choice=(Literal["a", "b"], Field("a", description="one of two")),
    weights=(tuple[Annotated[float, Field(ge=0)], ...], Field((), description="numbers")),
    names=(tuple[str, ...], Field(("x", "y"), description="names")),
    limit=(int | None, Field(None, ge=1, description="unset: no limit")),
    label=(str | None, Field(None, description="unset: derived")),
)
SPEC = RetrieverSpec(name="kinds", factory=Echo, options=KINDS, runtime_options=("flag",), model_options=("text",))


@pytest.fixture
def reg(plugins):
    return build_registry(plugins)


def one_line_error(call, *names: str) -> str:
    with pytest.raises(UserError) as e:
        call()
    message = str(e.value)
    assert "\n" not in message
    for name in names:
        assert name in message
    return message


# -- parsing by type -------------------------------------------------------------------------------

def test_each_kind_parses_to_its_type():
    assert SPEC.parse("count", "7") == 7 and type(SPEC.parse("count", "7")) is int
    assert SPEC.parse("ratio", "0.25") == 0.25 and type(SPEC.parse("ratio", "1")) is float
    assert SPEC.parse("text", "hello, world") == "hello, world"
    assert SPEC.parse("choice", "b") == "b"
    assert SPEC.parse("weights", "0.2, 0.8") == (0.2, 0.8)
    assert all(type(w) is float for w in SPEC.parse("weights", "1,2"))
    assert SPEC.parse("weights", "") == ()
    assert SPEC.parse("names", "bm25,st") == ("bm25", "st")
    assert SPEC.parse("limit", "12") == 12


@pytest.mark.parametrize("raw,value", [("true", True), ("1", True), ("yes", True), ("on", True), ("TRUE", True),
                                       ("false", False), ("0", False), ("no", False), ("off", False)])
def test_booleans_accept_the_usual_words(raw, value):
    assert SPEC.parse("flag", raw) is value


@pytest.mark.parametrize("raw", ["none", "null", "", "None"])
def test_optional_options_are_unset_by_none_null_or_empty(raw):
    assert SPEC.parse("limit", raw) is None
    assert SPEC.parse("label", raw) is None


def test_none_is_text_where_an_option_cannot_be_unset():
    assert SPEC.parse("text", "none") == "none"
    one_line_error(lambda: SPEC.parse("count", "none"), "kinds.count")


@pytest.mark.parametrize("key,raw", [("count", "1.5"), ("count", "three"), ("count", "true"), ("ratio", "half"),
                                     ("flag", "maybe"), ("choice", "c"), ("weights", "0.2,heavy"),
                                     ("limit", "1.5")])
def test_wrong_types_are_one_line_naming_the_option(key, raw):
    message = one_line_error(lambda: SPEC.parse(key, raw), f"-o kinds.{key}={raw}")
    assert message.split(": ", 1)[1]  # says what is wrong or accepted


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "Infinity"])
def test_floats_refuse_nan_and_infinity(raw):
    one_line_error(lambda: SPEC.parse("ratio", raw), "kinds.ratio")
    one_line_error(lambda: SPEC.parse("weights", f"1,{raw}"), "kinds.weights")


def test_bounds_name_the_limit():
    assert "must be >= 1" in one_line_error(lambda: SPEC.parse("count", "0"), "kinds.count")
    assert "must be <= 1" in one_line_error(lambda: SPEC.parse("ratio", "1.01"), "kinds.ratio")
    assert ">= 0" in one_line_error(lambda: SPEC.parse("weights", "0.5,-1"), "kinds.weights")
    assert SPEC.parse("ratio", "0") == 0 and SPEC.parse("ratio", "1") == 1  # bounds are inclusive


def test_any_type_is_described_in_english():
    """No "expected a int": unions, and types outside the usual ones, read with their article."""
    from pathlib import Path

    from r2med_tasks.components.options import describe, parse

    odd = create_model("OddOptions", __base__=Options, either=(int | float, 1), path=(Path, Path(".")), table=(dict, {}),
                        anything=(object, None), maybe=(int | str | None, None))
    assert [describe(odd, key) for key in odd.model_fields] == [
        "an integer or a number", "a Path", "a dict", "an object", "an integer or text or none"]
    with pytest.raises(UserError, match=r"^-o odd.either=x: expected an integer or a number$"):
        parse(odd, "either", "x", where="-o odd.either")


def test_unknown_key_lists_the_accepted_ones():
    one_line_error(lambda: SPEC.parse("colour", "red"), "colour", "count", "weights")


def test_model_instances_refuse_a_fraction_for_an_integer():
    with pytest.raises(ValidationError):
        KINDS(count="1.5")
    with pytest.raises(ValidationError):
        KINDS(count=1.5)
    with pytest.raises(ValidationError):
        KINDS(colour="red")  # unknown keys refused
    assert KINDS(count="4").count == 4


# -- the spec's API --------------------------------------------------------------------------------

def test_defaults_and_fields():
    assert SPEC.defaults == {"count": 3, "ratio": 0.5, "flag": False, "text": "", "choice": "a", "weights": (),
                             "names": ("x", "y"), "limit": None, "label": None}
    assert list(SPEC.option_fields()) == list(SPEC.defaults)
    assert SPEC.option_fields()["count"].description == "a count"


def test_factory_gets_one_validated_options_instance():
    made = SPEC.create({"count": 9})
    assert isinstance(made.options, KINDS)
    assert made.options.model_dump() == {"count": 9, "ratio": 0.5, "flag": False, "text": "", "choice": "a",
                                         "weights": (), "names": ("x", "y"), "limit": None, "label": None}


def test_a_class_deriving_from_options_works_as_well():
    class Mine(Options):
        depth: int = Field(10, ge=1, description="how deep")

    spec = RetrieverSpec(name="mine", factory=Echo, options=Mine)
    assert spec.defaults == {"depth": 10} and spec.parse("depth", "4") == 4
    one_line_error(lambda: spec.parse("depth", "0"), "mine.depth", ">= 1")


def test_a_required_option_must_be_given():
    spec = RetrieverSpec(name="needs", factory=Echo, options=create_model("Needs", __base__=Options, path=(str, Field(description="p"))))
    assert spec.defaults == {} and spec.option_schema()["path"]["required"] is True
    one_line_error(lambda: spec.create({}), "-o needs.path")
    assert spec.create({"path": "x"}).options.path == "x"


def test_a_dict_of_defaults_is_refused_naming_the_model_forms():
    with pytest.raises(TypeError) as e:
        RetrieverSpec(name="old", factory=Echo, options={"n": 3, "flag": False})
    message = str(e.value)
    assert "\n" not in message and "retriever 'old'" in message
    assert "r2med_tasks.plugin.Options" in message


def test_bad_declarations_are_refused_at_registration(plugins, register):
    with pytest.raises(TypeError):
        RetrieverSpec(name="bad", factory=Echo, options=42)
    with pytest.raises(TypeError, match="k"):
        RetrieverSpec(name="bad", factory=Echo, options=create_model("Bad", __base__=Options, k=(int, Field(0, ge=1))))

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="bad", factory=Echo,
                                   options=create_model("Bad", __base__=Options, k=(int, Field(0, ge=1)))))

    register(Plugin(), "bad-pkg")
    build_registry(plugins)
    assert any(b.name == "bad-pkg" for b in plugins.broken)


# -- the built-in components' bounds ---------------------------------------------------------------

BAD = [
    ("bm25", "k1", "-3"), ("bm25", "k1", "inf"), ("bm25", "b", "5"), ("bm25", "b", "-0.1"),
    ("bm25-okapi", "k1", "-1"), ("bm25-okapi", "b", "1.5"), ("bm25-okapi", "epsilon", "-1"),
    ("hybrid", "weights", "0.5,-1"), ("hybrid", "rrf_k", "-1"), ("hybrid", "depth", "0"),
    ("hybrid", "fusion", "max"),
    ("st", "batch_size", "0"), ("st", "max_length", "0"), ("st", "chunk_size", "0"),
    ("nvembed", "batch_size", "0"), ("nvembed", "chunk_size", "0"), ("nvembed", "dtype", "fp8"),
    ("openai", "batch_size", "0"), ("openai", "concurrency", "0"),
    ("bge-reranker", "rerank_k", "0"), ("bge-reranker", "batch_size", "0"), ("bge-reranker", "max_length", "0"),
    ("rankllama", "rerank_k", "-5"),
    ("llm-rerank", "window", "0"), ("llm-rerank", "step", "0"), ("llm-rerank", "rerank_k", "0"),
    ("llm-rerank", "temperature", "2.5"), ("llm-rerank", "max_tokens", "0"),
    ("hyde", "temperature", "-0.1"), ("hyde", "top_p", "1.5"), ("hyde", "max_tokens", "0"), ("hyde", "seed", "-1"),
    ("lamer", "concurrency", "0"),
]


@pytest.mark.parametrize("component,key,raw", BAD)
def test_builtin_bounds(reg, component, key, raw):
    spec = reg.component(component).spec
    one_line_error(lambda: spec.parse(key, raw), f"-o {spec.name}.{key}={raw}")


@pytest.mark.parametrize("component,key,raw,value", [
    ("bm25", "k1", "0", 0.0), ("bm25", "b", "0", 0.0), ("bm25", "b", "1", 1.0), ("hybrid", "rrf_k", "0", 0),
    ("hybrid", "depth", "1", 1), ("llm-rerank", "temperature", "none", None), ("hyde", "seed", "0", 0),
    ("st", "max_length", "none", None), ("nvembed", "batch_size", "none", None)])
def test_builtin_edges_are_accepted(reg, component, key, raw, value):
    """A bound's own value is accepted, as the option's type ("none": unset)."""
    parsed = reg.component(component).spec.parse(key, raw)
    assert parsed == value and type(parsed) is type(value)


def test_every_builtin_default_is_within_its_bounds_and_documented(reg):
    for kind in ("retriever", "rewriter", "reranker"):
        for entry in reg.entries[kind]:
            for key, option in entry.spec.option_schema().items():
                assert option["description"], f"{entry.spec.name}.{key} has no help"


def test_sentinels_are_none(reg):
    """Unset means None, not 0 or -1: the factory decides what unset means."""
    assert reg.component("hyde").spec.defaults["temperature"] is None
    assert reg.component("hyde").spec.defaults["seed"] is None
    assert reg.component("st").spec.defaults["max_length"] is None
    assert reg.component("nvembed").spec.defaults["batch_size"] is None
    assert reg.component("llm-rerank").spec.defaults["max_tokens"] is None


def test_llm_reranker_sampling_unset_is_the_servers_default(reg):
    default = build_pipeline(reg, ["bm25", "llm-rerank"], ["llm=openai:gpt-4o"])
    unset = build_pipeline(reg, ["bm25", "llm-rerank"], ["llm=openai:gpt-4o", "temperature=none", "max_tokens=64"])
    instantiate(default, reg)
    instantiate(unset, reg)
    assert default.stages["reranker"].instance.sampling["temperature"] == 0.0
    assert default.stages["reranker"].instance.sampling["max_tokens"] is None
    assert unset.stages["reranker"].instance.sampling["temperature"] is None
    assert unset.stages["reranker"].instance.sampling["max_tokens"] == 64


def test_every_component_calling_an_api_has_time_limits_that_identify_nothing(reg):
    """``-o timeout=`` and ``-o max_retries=`` (``APIOptions``) on every built-in component that calls
    an LLM or embedding API; as runtime settings they leave a run's configuration, experiment and
    folder as they were, and are recorded with the command."""
    from r2med_tasks.plugin import APIOptions

    calling = sorted(e.spec.name for kind in ("retriever", "rewriter", "reranker") for e in reg.entries[kind]
                     if issubclass(e.spec.options, APIOptions))
    assert calling == ["grouprank", "hyde", "insertrank", "lamer", "llm-rerank", "openai", "query2doc", "search-o1", "search-r1",
                       "voyage"]
    for plugins, options in ((["hyde", "bm25", "llm-rerank"], ["llm=openai:gpt-4o"]), (["openai"], [])):
        plain = build_pipeline(reg, plugins, options)
        limited = build_pipeline(reg, plugins, [*options, "timeout=5", "max_retries=0"])
        assert canonical(limited.config()) == canonical(plain.config()) and limited.variant() == plain.variant() == {}
        assert all(s.options["timeout"] == 5.0 and s.options["max_retries"] == 0 for s in limited.stages.values()
                   if issubclass(s.spec.options, APIOptions))
        assert set(limited.runtime_options()) - set(plain.runtime_options()) == {
            f"{s.spec.name}.{k}" if len(plugins) > 1 else k for s in limited.stages.values()
            if issubclass(s.spec.options, APIOptions) for k in ("timeout", "max_retries")}


# -- through the pipeline and the command line -----------------------------------------------------

def test_weights_arrive_as_floats(reg):
    pipeline = build_pipeline(reg, ["hybrid"], ["members=bm25,bm25-okapi", "weights=0.2,0.8", "rrf_k=10"])
    assert pipeline.retriever.options["weights"] == (0.2, 0.8)
    assert pipeline.retriever.options["rrf_k"] == 10
    instantiate(pipeline, reg)
    assert pipeline.retriever.instance.weights == [0.2, 0.8]
    # the recorded configuration stays JSON-shaped: tuples are lists, numbers numbers
    options = canonical(pipeline.config())["retriever"]["options"]
    assert options["weights"] == [0.2, 0.8] and options["rrf_k"] == 10 and "members" not in options


def test_config_holds_every_result_option_and_variant_the_changed_ones(reg):
    pipeline = build_pipeline(reg, ["bm25"], ["k1=1.2", "cache=false"])
    options = pipeline.config()["retriever"]["options"]
    assert options == {"k1": 1.2, "b": 0.4, "query_weighting": "bm25"}  # cache is a runtime option
    assert pipeline.variant() == {"k1": 1.2}
    assert build_pipeline(reg, ["bm25"], ["k1=0.9"]).variant() == {}  # set to its default: no experiment


def test_out_of_bounds_on_the_command_line_is_exit_2_one_line(run_cli, tmp_path):
    code, out, err = run_cli("run", "--plugin", "bm25", "-o", "k1=-3", "--tasks", "sample", "--output", tmp_path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "k1" in lines[0] and ">= 0" in lines[0]
    assert not any(tmp_path.iterdir())  # refused before anything ran


@pytest.mark.process  # the console script's exit status
def test_console_script_refuses_bad_values_with_exit_2(tmp_path):
    result = r2med_command("run", "--plugin", "bm25", "-o", "b=5", "--tasks", "sample", "--output", tmp_path,
                           env={"R2MED_LOAD_PLUGINS": ""})
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "bm25.b=5" in result.stderr
    assert "Traceback" not in result.stderr


# -- display ---------------------------------------------------------------------------------------

def test_plugins_name_shows_a_table_of_options(run_cli, reg):
    code, out, err = run_cli("plugins", "bm25")
    assert code == 0, err
    spec = reg.component("bm25").spec
    flat = " ".join(out.split())
    for key, field in spec.option_fields().items():
        assert key in out
        assert " ".join(field.description.split()[:3]) in flat  # the help, however the table wraps it
    assert ">= 0" in out and "<= 1" in out and "0.9" in out


def test_plugins_name_json(run_cli):
    code, out, _ = run_cli("plugins", "hybrid", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["kind"], data["name"], data["plugin"]) == ("retriever", "hybrid", "r2med")
    weights = data["options"]["weights"]
    assert weights["type"] == "array" and weights["default"] == []
    assert weights["items"]["type"] == "number" and weights["items"]["minimum"] == 0
    assert data["options"]["depth"]["minimum"] == 1 and data["options"]["members"]["model"] is True
    assert data["options"]["fusion"]["enum"] == ["rrf", "zscore", "minmax", "linear"]


def test_plugins_name_accepts_kind_and_alias_and_refuses_unknown(run_cli):
    code, out, err = run_cli("plugins", "reranker:monobert")
    assert code == 0 and out.startswith("reranker monobert, from r2med"), err
    code, out, err = run_cli("plugins", "sentence-transformers")  # an alias of st
    assert code == 0 and out.startswith("retriever st (also: sentence-transformers), from r2med"), err
    code, _, err = run_cli("plugins", "no-such-thing")
    assert code == 2 and "no-such-thing" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("what", ["retrievers", "rewriters", "rerankers"])
def test_listing_json_describes_each_option_with_stable_keys(run_cli, what):
    code, out, _ = run_cli("list", what, "--json")
    assert code == 0
    rows = json.loads(out)
    keys = {frozenset(o) for r in rows for o in r["options"].values()}
    assert len(keys) == 1  # every option of every component has the same keys
    assert {"type", "default", "minimum", "maximum", "description", "nullable", "runtime", "model"} <= set(keys.pop())
    for row in rows:
        for option in row["options"].values():
            assert option["type"] in ("integer", "number", "boolean", "string", "array")


def test_listing_json_shows_bm25_bounds(run_cli):
    rows = {r["name"]: r for r in json.loads(run_cli("list", "retrievers", "--json")[1])}
    k1, b = rows["bm25"]["options"]["k1"], rows["bm25"]["options"]["b"]
    assert (k1["type"], k1["default"], k1["minimum"], k1["maximum"]) == ("number", 0.9, 0, None)
    assert (b["minimum"], b["maximum"]) == (0, 1)
    assert rows["bm25"]["options"]["cache"]["runtime"] is True


# -- a third-party plugin declaring options --------------------------------------------------------

@pytest.fixture
def example(register, monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS / "example_plugin"))
    import r2med_example

    return register(r2med_example, "r2med-example", "0.3.0")


def test_third_party_options_are_typed_bounded_and_shown(example, run_cli, tmp_path):
    code, out, _ = run_cli("plugins", "tfidf", "--json")
    assert code == 0
    options = json.loads(out)["options"]
    assert options["min_df"]["minimum"] == 1 and options["sublinear"]["type"] == "boolean"
    code, _, err = run_cli("run", "--plugin", "tfidf", "-o", "min_df=0", "--tasks", "sample", "--output", tmp_path)
    assert code == 2 and "tfidf.min_df" in err
    code, out, err = run_cli("run", "--plugin", "tfidf", "-o", "sublinear=yes", "-o", "min_df=2", "--tasks", "sample",
                             "--output", tmp_path, "--json")
    assert code == 0, err
    assert json.loads(out)["tasks"][0]["n_queries"] > 0
