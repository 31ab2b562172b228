"""What a plugin author and a new user meet (issue #35):

- the corpus embeddings of ``st`` are keyed by the weights' content and the encoding settings, not
  the model's name: the same weights under another folder, a hub name (``-o name=`` /
  ``-o revision=``) or as a hub cache snapshot encode no document again; other weights do;
- a pipeline with a third-party component is filed under that package's name, never r2med's own
  ``r2med__``; a component without ``model_meta()`` is ``<its package>/<name>``; results an earlier
  r2med filed under ``r2med__…`` are still found and reused;
- a plugin that fails to import is named as broken when its component is asked for;
- ``r2med_tasks.testing`` (the scaffold's tests use it, not ``r2med_tasks.running.discovery``), and the
  "Publishing your plugin" section of docs/writing-plugins.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from r2med_tasks import RerankerSpec, RetrieverSpec, RewriterSpec, hookimpl
from r2med_tasks.errors import PluginError

from conftest import SAMPLE, TESTS, build_wheels, read_jsonl, read_ranking

ROOT = TESTS.parent
SAMPLE_TASK = "R2MEDSampleRetrieval"
HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def one_folder(outcome) -> Path:
    (folder,) = outcome.results_dirs
    return Path(folder)


# -- 6. corpus embeddings keyed by the weights' content -------------------------------------------------


@pytest.fixture
def encoded(monkeypatch) -> dict[str, int]:
    """How many corpus documents and other texts (queries) the sentence-transformers encoder is
    given from now on."""
    from r2med_plugins.local_models import SentenceTransformerEncoder

    corpus = {row["text"] for row in read_jsonl(SAMPLE / "corpus.jsonl")}
    counts = {"documents": 0, "other": 0}
    original = SentenceTransformerEncoder.encode

    def encode(self, texts, prompt):
        for text in texts:
            counts["documents" if text in corpus else "other"] += 1
        return original(self, texts, prompt)

    monkeypatch.setattr(SentenceTransformerEncoder, "encode", encode)
    return counts


def embedding_folders(cache: Path) -> list[Path]:
    return sorted(p.parent for p in (cache / "embeddings").glob("*/identity.json"))


def changed_copy(source: Path, target: Path) -> Path:
    """``source``'s model with one weight changed (its word embeddings nudged): other weights."""
    from safetensors.numpy import load_file, save_file

    shutil.copytree(source, target)
    tensors = load_file(str(target / "model.safetensors"))
    name = next(k for k in sorted(tensors) if k.endswith("word_embeddings.weight"))
    tensors[name] = tensors[name] + 0.05
    save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


def test_the_same_weights_under_a_hub_name_encode_no_document_again(small_model_path, evaluate, encoded, tmp_path):
    n_docs = len(read_jsonl(SAMPLE / "corpus.jsonl"))
    local = evaluate("st", model=str(small_model_path), output="local")
    assert encoded["documents"] == n_docs and len(embedding_folders(tmp_path / "cache")) == 1

    encoded.update(documents=0, other=0)
    named = evaluate("st", model=str(small_model_path), name=HUB_NAME, revision="c9745ed", output="named")
    assert encoded == {"documents": 0, "other": 0}  # corpus and queries read back
    assert one_folder(named).parts[-2:] == ("sentence-transformers__all-MiniLM-L6-v2", "c9745ed")
    assert read_ranking(one_folder(named) / f"{SAMPLE_TASK}.trec") == \
        read_ranking(one_folder(local) / f"{SAMPLE_TASK}.trec")

    elsewhere = shutil.copytree(small_model_path, tmp_path / "copies" / "another-name")  # the same files
    evaluate("st", model=str(elsewhere), output="copy")
    assert encoded == {"documents": 0, "other": 0} and len(embedding_folders(tmp_path / "cache")) == 1

    other = changed_copy(small_model_path, tmp_path / "copies" / "tuned")
    changed = evaluate("st", model=str(other), name=HUB_NAME, revision="c9745ed", output="changed")
    assert encoded["documents"] == n_docs and len(embedding_folders(tmp_path / "cache")) == 2
    assert read_ranking(one_folder(changed) / f"{SAMPLE_TASK}.trec") != \
        read_ranking(one_folder(local) / f"{SAMPLE_TASK}.trec")


def test_the_encoding_settings_still_key_the_embeddings(small_model_path, evaluate, encoded, tmp_path):
    """Only the name left the key: another document prompt or length limit encodes again."""
    n_docs = len(read_jsonl(SAMPLE / "corpus.jsonl"))
    evaluate("st", model=str(small_model_path), output="a")
    for i, options in enumerate([{"doc_prompt": "passage: "}, {"max_length": 16}]):
        encoded["documents"] = 0
        evaluate("st", model=str(small_model_path), output=f"b{i}", **options)
        assert encoded["documents"] == n_docs, options
    assert len(embedding_folders(tmp_path / "cache")) == 3


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def hub_cache_of(model: Path, root: Path, commit: str) -> Path:
    """A Hugging Face cache holding ``model`` as the hub client stores a download: each file a blob
    named by its sha256 (a large, LFS file) or its git hash (a small one), linked from the snapshot."""
    repo = root / f"models--{HUB_NAME.replace('/', '--')}"
    for file in sorted(p for p in model.rglob("*") if p.is_file()):
        data = file.read_bytes()
        blob = repo / "blobs" / (hashlib.sha256(data).hexdigest() if len(data) > 100_000 else git_blob_sha1(data))
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / commit / file.relative_to(model)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return root


def test_a_hub_snapshot_of_the_same_weights_reuses_their_embeddings(small_model_path, evaluate, encoded, tmp_path,
                                                                    monkeypatch):
    """``-o model=org/name`` resolved from the hub cache is known by its files' content, the same
    as a local copy's; its large files by the sha256 their blobs are named with, not read again."""
    import huggingface_hub.constants

    from r2med_tasks.components import model_refs as models

    commit = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub_cache_of(small_model_path,
                                                                                     tmp_path / "hf", commit)))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    evaluate("st", model=str(small_model_path), output="local")
    read = []
    real = models._sha256
    monkeypatch.setattr(models, "_sha256", lambda file: read.append(file.name) or real(file))
    encoded.update(documents=0, other=0)
    hub = evaluate("st", model=HUB_NAME, output="hub")
    assert encoded == {"documents": 0, "other": 0} and len(embedding_folders(tmp_path / "cache")) == 1
    assert one_folder(hub).parts[-2:] == ("sentence-transformers__all-MiniLM-L6-v2", commit)
    weights = hashlib.sha256((small_model_path / "model.safetensors").read_bytes()).hexdigest()
    assert read and weights not in read  # the small files were read; the weights' blob is named by its sha256


# -- 7. namespaces ------------------------------------------------------------------------------------


class Echo:
    """A retriever without ``model_meta()``: every document, in corpus order."""

    def index(self, corpus, *, task, context):
        self.ids = corpus.ids

    def search(self, queries, *, task, top_k, context):
        return {q.id: {d: 1.0 / (i + 1) for i, d in enumerate(self.ids)} for q in queries}


class Shout:
    """A rewriter without ``model_meta()``: the query in capitals as its generated document."""

    def rewrite(self, queries, *, task, context):
        from dataclasses import replace

        return [replace(q, generated=(q.text.upper(),), method="shout") for q in queries]


class Flip:
    """A reranker without ``model_meta()``: the first stage's order reversed."""

    def rerank(self, queries, corpus, candidates, *, task, context):
        return {qid: {d: float(i) for i, d in enumerate(docs)} for qid, docs in candidates.items()}


class Components:
    @hookimpl
    def register_retrievers(self, register):
        register(RetrieverSpec(name="echo", factory=lambda options: Echo()))

    @hookimpl
    def register_rewriters(self, register):
        register(RewriterSpec(name="shout", factory=lambda options: Shout()))

    @hookimpl
    def register_rerankers(self, register):
        register(RerankerSpec(name="flip", factory=lambda options: Flip()))


@pytest.fixture
def third_party(register, monkeypatch):
    """echo, shout and flip from the package "shout-pkg"; tfidf from the example package
    (tests/example_plugin), registered as "r2med-example"."""
    monkeypatch.syspath_prepend(str(TESTS / "example_plugin"))
    import r2med_example

    register(Components(), "shout-pkg", "2.1")
    register(r2med_example, "r2med-example", "0.3.0")


def test_a_pipeline_with_a_third_party_rewriter_is_filed_under_its_package(third_party, evaluate, tmp_path):
    outcome = evaluate("shout", "bm25")
    folder = one_folder(outcome)
    assert folder.parent.name == "shout-pkg__shout_BM25" and folder.parent.parent == tmp_path / "out" / "local-data"
    assert outcome.model_name == "shout-pkg/shout_BM25" and "r2med__" not in str(folder)
    assert json.loads((folder / "model_meta.json").read_text())["name"] == "shout-pkg/shout_BM25"


@pytest.mark.parametrize("components,package", [
    (("shout", "tfidf"), "shout-pkg"),  # the first stage's package wins
    (("tfidf", "flip"), "r2med-example"),
    (("bm25", "flip"), "shout-pkg"),  # r2med's own retriever, a third party's reranker
    (("shout", "bm25", "flip"), "shout-pkg"),
])
def test_the_first_third_party_component_names_the_folder(third_party, evaluate, components, package):
    outcome = evaluate(*components)
    assert outcome.model_name.startswith(f"{package}/") and one_folder(outcome).parent.name.startswith(f"{package}__")


def test_a_hybrid_with_a_plugins_member_is_that_plugins(third_party, evaluate):
    outcome = evaluate("hybrid", members="bm25,tfidf")
    assert one_folder(outcome).parent.name == "r2med-example__hybrid"
    both_ours = evaluate("hybrid", members="bm25,bm25-okapi", output="ours")
    assert one_folder(both_ours).parent.name == "r2med__hybrid"


def test_a_component_without_model_meta_is_named_by_its_package(third_party, evaluate):
    outcome = evaluate("echo")
    assert outcome.model_name == "shout-pkg/echo" and outcome.revision == "2.1"
    folder = one_folder(outcome)
    assert folder.parts[-2:] == ("shout-pkg__echo", "2.1")
    identity = json.loads((folder / "r2med" / f"{SAMPLE_TASK}.identity.json").read_text())
    assert identity["models"]["retriever"] == {"name": "shout-pkg/echo", "revision": "2.1"}


def test_r2med_components_keep_r2med_names(third_party, run_cli, tmp_path):
    """Folder names of pipelines made only of r2med's components, as docs/results.md names them."""
    def plan(*args):
        code, out, err = run_cli("run", *args, "--tasks", "sample", "--dry-run", "--json", "--output", tmp_path)
        assert code == 0, err
        return json.loads(out)

    bare = plan("--plugin", "bm25")
    assert bare["model_name"] == "r2med/bm25" and Path(bare["results_dirs"][0]).parent.name == "r2med__bm25"
    hyde = plan("--plugin", "hyde", "-o", "source=o3-mini", "--plugin", "bm25")
    assert hyde["model_name"] == "r2med/o3-mini_BM25"
    rerank = plan("--plugin", "bm25", "--plugin", "llm-rerank", "-o", "llm=openai:gpt-4o")
    assert rerank["model_name"] == "r2med/BM25_gpt-4o"
    assert Path(rerank["first_stage_dirs"][0]).parent.name == "r2med__bm25"


def rename_as_before(folder: Path, old_name: str, *, old_model: tuple[str, str] | None = None) -> Path:
    """``folder`` as an earlier r2med wrote it: under ``old_name`` (``org/name``), its
    ``model_meta.json`` naming that, and (``old_model``: new name, old name) its task identities
    naming the model so, their manifests' hashes to match."""
    old = folder.parent.parent / old_name.replace("/", "__") / folder.name
    old.parent.mkdir(parents=True)
    folder.rename(old)
    folder.parent.rmdir()
    meta = json.loads((old / "model_meta.json").read_text())
    (old / "model_meta.json").write_text(json.dumps({**meta, "name": old_name}, indent=4))
    if old_model is not None:
        identity_file = old / "r2med" / f"{SAMPLE_TASK}.identity.json"
        text = identity_file.read_text().replace(f'"{old_model[0]}"', f'"{old_model[1]}"')
        identity_file.write_text(text)
        manifest_file = old / "r2med" / f"{SAMPLE_TASK}.files.json"
        manifest = json.loads(manifest_file.read_text())
        manifest[f"r2med/{SAMPLE_TASK}.identity.json"] = hashlib.sha256(text.encode()).hexdigest()
        manifest_file.write_text(json.dumps(manifest, indent=2))
    return old


def test_results_an_earlier_r2med_filed_under_r2med_are_found_and_reused(third_party, evaluate, tmp_path):
    first = evaluate("shout", "bm25")
    old = rename_as_before(one_folder(first), "r2med/shout_BM25")
    again = evaluate("shout", "bm25")
    assert one_folder(again) == old and again[SAMPLE_TASK].status == "cached"
    assert again.model_name == "r2med/shout_BM25"
    assert not (tmp_path / "out" / "local-data" / "shout-pkg__shout_BM25").exists()

    shutil.move(old, tmp_path / "kept-aside")  # moved away: filed under the package's name from now on
    fresh = evaluate("shout", "bm25")
    assert one_folder(fresh).parent.name == "shout-pkg__shout_BM25" and fresh[SAMPLE_TASK].status != "cached"


def test_a_third_party_retriever_named_r2med_before_is_reused(third_party, evaluate, tmp_path):
    """echo had no model name: an earlier r2med named it r2med/echo, in its folder and identities."""
    first = evaluate("echo")
    old = rename_as_before(one_folder(first), "r2med/echo", old_model=("shout-pkg/echo", "r2med/echo"))
    assert json.loads((old / "r2med" / f"{SAMPLE_TASK}.identity.json").read_text())["models"]["retriever"]["name"] \
        == "r2med/echo"
    again = evaluate("echo")
    assert one_folder(again) == old and again[SAMPLE_TASK].status == "cached"


def test_a_folder_of_another_configuration_is_not_taken_over(third_party, evaluate, tmp_path):
    """Only a folder whose record holds this configuration is reused: another's stays untouched."""
    first = evaluate("shout", "bm25")
    old = rename_as_before(one_folder(first), "r2med/shout_BM25")
    record = json.loads((old / "r2med" / "pipeline.json").read_text())
    record["config"]["top_k"] = 7
    (old / "r2med" / "pipeline.json").write_text(json.dumps(record))
    again = evaluate("shout", "bm25")
    assert one_folder(again).parent.name == "shout-pkg__shout_BM25" and again[SAMPLE_TASK].status != "cached"


def test_a_third_party_pipelines_model_meta_is_what_mteb_writes(third_party, tmp_path):
    """Written without importing mteb (a name mteb is never asked about), the same as mteb's."""
    import r2med_tasks as r2med
    from r2med_tasks.mteb_adapter import model_meta
    from r2med_tasks.results.folder import ResultsFolder

    folder = ResultsFolder.for_pipeline(tmp_path, r2med.pipeline("shout", "bm25").spec(), local=True)
    written = json.loads(folder.model_meta_text())
    assert written["name"] == "shout-pkg/shout_BM25"
    info, update = folder._model_meta_args()
    assert written == json.loads(json.dumps(model_meta(info, update, registered=False).to_dict(), default=str))


# -- 8. broken plugins, r2med_tasks.testing, publishing ---------------------------------------------------


@pytest.fixture
def broken_module(plugins, tmp_path, monkeypatch):
    """``r2med_lay_words``, a plugin module with a syntax error, loaded as ``R2MED_PLUGINS`` loads it."""
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "r2med_lay_words.py").write_text("from r2med_tasks import hookimpl\n\ndef register_rewriters(register)\n"
                                               "    pass\n")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "r2med_lay_words", raising=False)
    plugins.load_modules(["r2med_lay_words"])
    assert [b.name for b in plugins.broken] == ["r2med_lay_words"]
    return plugins


def test_asking_for_a_broken_plugins_component_says_it_is_broken(broken_module, run_cli, tmp_path):
    code, out, err = run_cli("run", "--plugin", "lay-words", "--plugin", "bm25", "--tasks", "sample",
                             "--output", tmp_path / "out")
    line = " ".join(err.split())
    assert code == 2
    assert ("--plugin lay-words: the plugin 'r2med_lay_words' that should provide it is broken: SyntaxError:"
            in line) and "(see `r2med plugins`)" in line
    assert "no such component" not in line
    code, _, err = run_cli("plugins", "lay-words")
    assert code == 2 and "r2med plugins lay-words: the plugin 'r2med_lay_words' that should provide it is broken" \
        in " ".join(err.split())


def test_a_name_found_nowhere_mentions_the_broken_plugins(broken_module, run_cli, tmp_path):
    code, _, err = run_cli("run", "--plugin", "no-such-thing", "--tasks", "sample", "--output", tmp_path / "out")
    line = " ".join(err.split())
    assert code == 2 and "--plugin no-such-thing: no such component" in line
    assert "'r2med_lay_words' (SyntaxError:" in line and "(see `r2med plugins`)" in line


def test_an_installed_broken_package_is_named_by_its_entry_point(plugins):
    """The entry point's name (``broken``), its package's (``r2med-broken``, prefix or not) and its
    module's name a component it should provide; another name does not."""
    from r2med_tasks.running.discovery import BrokenPlugin

    broken = BrokenPlugin("r2med-broken", "9.9.9", "r2med_broken", "ImportError: missing", entry_point="broken")
    assert all(broken.may_provide(n) for n in ("broken", "r2med-broken", "r2med_broken", "Broken"))
    assert not broken.may_provide("bm25") and not broken.may_provide("r2med")


@pytest.fixture
def example_module(plugins, monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS / "example_plugin"))
    monkeypatch.delitem(sys.modules, "r2med_example", raising=False)
    return plugins


def test_load_plugin_returns_what_it_registered(example_module):
    from r2med_tasks.testing import load_plugin

    loaded = load_plugin("r2med_example")
    assert loaded.components == {"retrievers": ["tfidf"]}
    assert loaded.specs["retriever:tfidf"].name == "tfidf" and loaded.name == "r2med_example"
    again = load_plugin("r2med_example")  # loaded already: nothing registered twice
    assert again == loaded
    from r2med_tasks.api import registry

    assert registry().conflicts == []


def test_load_plugin_of_an_installed_plugin_keeps_its_package(plugins, monkeypatch):
    """A module its package's entry point registered already: its package's name and version."""
    import types

    from r2med_tasks.running.discovery import PluginInfo
    from r2med_tasks.testing import load_plugin

    @hookimpl
    def register_retrievers(register):
        register(RetrieverSpec(name="echo2", factory=lambda options: Echo()))

    module = types.ModuleType("r2med_installed_echo")
    module.register_retrievers = register_retrievers
    monkeypatch.setitem(sys.modules, module.__name__, module)
    plugins.register(module, PluginInfo("r2med-echo2", "1.4", module.__name__))  # as its entry point does
    loaded = load_plugin(module.__name__)
    assert (loaded.name, loaded.version, loaded.components) == ("r2med-echo2", "1.4", {"retrievers": ["echo2"]})


def test_load_plugin_fails_as_the_plugin_does(plugins, tmp_path, monkeypatch):
    from r2med_tasks.testing import load_plugin

    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "r2med_kaboom.py").write_text("from r2med_tasks import hookimpl\n\n\n@hookimpl\n"
                                            "def register_retrievers(register):\n    raise RuntimeError('kaboom')\n")
    (folder / "r2med_typo.py").write_text("from r2med_tasks import hookimpl\n\n\n@hookimpl\n"
                                          "def register_retreivers(register):\n    pass\n")
    (folder / "r2med_syntax.py").write_text("def broken(:\n")
    monkeypatch.syspath_prepend(str(folder))
    with pytest.raises(PluginError, match="plugin r2med_kaboom is broken: register_retrievers failed: "
                                          "RuntimeError: kaboom"):
        load_plugin("r2med_kaboom")
    with pytest.raises(PluginError, match="plugin r2med_typo is broken: .*register_retreivers"):
        load_plugin("r2med_typo")
    with pytest.raises(SyntaxError):
        load_plugin("r2med_syntax")


def test_run_on_sample_runs_and_reuses(example_module, tmp_path):
    from r2med_tasks.testing import load_plugin, run_on_sample

    load_plugin("r2med_example")
    first = run_on_sample("tfidf", folder=tmp_path)
    assert first.n_queries == 10 and 0 < first.ndcg_at_10 <= 1 and first.status != "cached"
    assert list((tmp_path / "results").rglob(f"{SAMPLE_TASK}.trec")) and (tmp_path / "cache").is_dir()
    again = run_on_sample("tfidf", folder=tmp_path)
    assert again.status == "cached" and again.ndcg_at_10 == first.ndcg_at_10
    assert run_on_sample("tfidf", folder=tmp_path, overwrite=True).status != "cached"
    with_option = run_on_sample("tfidf", folder=tmp_path, sublinear=True)  # options as r2med_tasks.pipeline takes them
    assert with_option.n_queries == 10 and with_option.status != "cached"


def test_the_scaffold_tests_use_only_the_documented_api():
    """The generated tests import r2med only through public modules (tests/test_imports.py's PUBLIC,
    listed in docs/writing-plugins.md), never r2med_tasks.running.discovery' internals."""
    from test_imports import PUBLIC

    for template in sorted((ROOT / "r2med_tasks" / "data" / "scaffold").glob("*_test.py.tmpl")):
        text = template.read_text(encoding="utf-8")
        modules = set(re.findall(r"^\s*(?:from|import) (r2med_tasks[\w.]*)", text, re.M))
        assert modules and modules <= PUBLIC, (template.name, sorted(modules - PUBLIC))
        assert "r2med_tasks.testing" in modules and "load_plugin(" in text and "run_on_sample(" in text


def publishing_section() -> str:
    page = (ROOT / "docs" / "writing-plugins.md").read_text(encoding="utf-8")
    return page.split("\n## Publishing your plugin\n", 1)[1].split("\n## ", 1)[0]


def test_the_docs_say_how_to_publish_a_plugin():
    section = publishing_section()
    blocks = "\n".join(re.findall(r"```shell\n(.*?)```", section, re.S)).splitlines()
    for command in ("python -m build", "twine check dist/*", "twine upload --repository testpypi dist/*",
                    "twine upload dist/*", "pip install r2med-NAME", "r2med plugins"):
        assert command in blocks, command
    for words in ("[project.entry-points.r2med]", "`r2med`", "r2med-NAME", "version", "TestPyPI"):
        assert words in section, words


@pytest.mark.process  # the build backend builds the wheel
def test_a_scaffold_package_builds_into_a_wheel_ready_to_publish(run_cli, tmp_path, monkeypatch):
    """What `python -m build` packs (built here by the backend it names, offline): the entry point
    in the ``r2med`` group, the dependency on r2med, and the README as PyPI renders it (markdown)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("new-plugin", "publishable")
    assert code == 0, err
    built = build_wheels(tmp_path / "dist", tmp_path / "r2med-publishable")
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("r2med_publishable-0.1.0-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        info = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(info).decode()
        entry_points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert "[r2med]\npublishable = r2med_publishable" in entry_points
    assert "Name: r2med-publishable" in metadata and "Requires-Dist: r2med" in metadata
    assert "Description-Content-Type: text/markdown" in metadata


def test_a_published_retrievers_local_weights_are_keyed_by_content_not_path(small_model_path, evaluate, tmp_path):
    """`contriever -o model=PATH` (a published retriever over other weights): the same files in
    another folder read the embeddings back; the hub id's own key is unchanged."""
    evaluate("contriever", model=str(small_model_path), output="a")
    assert len(embedding_folders(tmp_path / "cache")) == 1
    elsewhere = shutil.copytree(small_model_path, tmp_path / "copies" / "moved")
    evaluate("contriever", model=str(elsewhere), output="b")
    assert len(embedding_folders(tmp_path / "cache")) == 1  # no second corpus encoding
    (identity,) = [json.loads(p.read_text()) for p in (tmp_path / "cache" / "embeddings").glob("*/identity.json")]
    assert str(small_model_path) not in json.dumps(identity) and identity["documents"]["weights"].startswith("local-")
