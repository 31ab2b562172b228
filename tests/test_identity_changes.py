"""Identity sees every change (issue #34): a local model's file written in place with its size,
inode and mtime kept, a file reached through a linked folder, a plugin's data file; and the
fingerprints of a run's models are kept in the run's --cache-dir, nowhere else. Torch-free: a
tiny retriever reads its "weights" itself."""

import json
import sys
from pathlib import Path

import pytest
from pydantic import Field

from r2med_tasks.components import model_refs as models
from r2med_tasks.components.specs import RetrieverSpec
from r2med_tasks.components.hookspecs import hookimpl
from r2med_tasks.components.options import Options
from test_model_identity import fake_model, saved_a_while_ago, write_in_place

class WeightedOptions(Options):
    model: str = Field(description="a model folder")


class Weighted:
    """Scores a document by the weight its first letter has in the model's weights file, and the
    sign its pooling config gives: other bytes, another ranking."""

    def __init__(self, options):
        self.model = options.model

    def model_meta(self):
        name, revision = models.ModelRef(self.model).identity()
        return {"name": name, "revision": revision}

    def index(self, corpus, *, task, context):
        folder = Path(self.model)
        self.weights = (folder / "model.safetensors").read_bytes()
        pooling = folder / "1_Pooling" / "config.json"
        self.sign = -1.0 if pooling.is_file() and "cls" in pooling.read_text() else 1.0
        self.docs = list(zip(corpus.ids, corpus.texts))

    def search(self, queries, *, task, top_k, context):
        scores = {d: self.sign * self.weights[ord((t or " ")[0]) % len(self.weights)] for d, t in self.docs}
        return {q.id: dict(scores) for q in queries}


class WeightedPlugin:
    @hookimpl
    def register_retrievers(self, register):
        register(RetrieverSpec(name="weighted", factory=Weighted, options=WeightedOptions, model_options=("model",),
                               description="a model folder's bytes as scores (tests only)"))


@pytest.fixture(autouse=True)
def clean_home(tmp_path, monkeypatch):
    """No R2MED_CACHE_DIR; HOME and XDG_CACHE_HOME in a folder of this test's, to show nothing
    lands in the user's cache; an empty in-process memory of digests."""
    home = tmp_path / "home"
    monkeypatch.delenv("R2MED_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setattr(models, "_digests", {})
    saved_a_while_ago(monkeypatch)  # digests are remembered, as for a model saved before the run
    return home


def run(run_cli, model, out, cache, *extra):
    code, stdout, err = run_cli("run", "--plugin", "weighted", "-o", f"model={model}", "--tasks", "sample",
                                "--output", out, "--cache-dir", cache, "--json", *extra)
    assert code == 0, err
    summary = json.loads(stdout)
    (task,) = summary["tasks"]
    return task, summary, err


def weights_bytes():
    return bytes((i * 37) % 251 for i in range(512))


def test_weights_written_in_place_with_their_mtime_kept_are_recomputed(register, run_cli, tmp_path, clean_home):
    register(WeightedPlugin())
    folder = fake_model(tmp_path / "ckpt", weights_bytes())
    first, summary, _ = run(run_cli, folder, tmp_path / "out", tmp_path / "cache")
    again, _, _ = run(run_cli, folder, tmp_path / "out", tmp_path / "cache")
    assert (first["status"], again["status"]) == ("computed", "cached")
    weights = folder / "model.safetensors"
    write_in_place(weights, bytes((b * 7 + 3) % 256 for b in weights.read_bytes()))  # cp -p of another checkpoint
    edited, _, err = run(run_cli, folder, tmp_path / "out", tmp_path / "cache")
    assert edited["status"] == "computed" and edited["ndcg_at_10"] != first["ndcg_at_10"]
    models._digests.clear()  # another process
    fresh, _, _ = run(run_cli, folder, tmp_path / "fresh", tmp_path / "fresh-cache")  # a fresh --cache-dir agrees
    assert fresh["status"] == "computed" and fresh["ndcg_at_10"] == edited["ndcg_at_10"]
    # the fingerprints of the run's model are in its --cache-dir, and nothing in the user's cache
    stored = json.loads((tmp_path / "cache" / "fingerprints.json").read_text())["files"]
    assert str(weights.resolve()) in stored
    assert (tmp_path / "fresh-cache" / "fingerprints.json").is_file()
    assert not clean_home.exists()


def test_a_dry_run_keeps_its_fingerprints_in_its_cache_dir(register, run_cli, tmp_path, clean_home):
    register(WeightedPlugin())
    folder = fake_model(tmp_path / "ckpt", weights_bytes())
    code, out, err = run_cli("run", "--plugin", "weighted", "-o", f"model={folder}", "--tasks", "sample",
                             "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--dry-run", "--json")
    assert code == 0, err
    assert (tmp_path / "cache" / "fingerprints.json").is_file() and not clean_home.exists()


def test_a_config_in_a_linked_folder_edited_is_recomputed(register, run_cli, tmp_path):
    register(WeightedPlugin())
    folder = fake_model(tmp_path / "ckpt", weights_bytes())
    pooling = tmp_path / "shared" / "pooling"
    pooling.mkdir(parents=True)
    (pooling / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (folder / "1_Pooling").symlink_to(pooling, target_is_directory=True)
    first, before, _ = run(run_cli, folder, tmp_path / "out", tmp_path / "cache")
    (pooling / "config.json").write_text('{"pooling_mode_cls_token": true}')
    edited, after, _ = run(run_cli, folder, tmp_path / "out", tmp_path / "cache")
    assert edited["status"] == "computed" and edited["ndcg_at_10"] != first["ndcg_at_10"]
    assert after["results_dirs"] != before["results_dirs"]  # another revision, filed apart


PACKAGE_PLUGIN = '''
from pathlib import Path

from r2med_tasks.components.specs import RetrieverSpec
from r2med_tasks.components.hookspecs import hookimpl

HERE = Path(__file__).parent


class Vocabulary:
    def index(self, corpus, *, task, context):
        self.words = set((HERE / "data" / "vocab.txt").read_text().split())
        self.docs = [(d, set(t.lower().split())) for d, t in zip(corpus.ids, corpus.texts)]

    def search(self, queries, *, task, top_k, context):
        return {q.id: {d: float(len(w & self.words & set(q.text.lower().split()))) for d, w in self.docs}
                for q in queries}


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(name="vocabulary", factory=lambda options: Vocabulary(), description="tests only"))
'''


@pytest.fixture
def package_plugin(plugins, tmp_path, monkeypatch):
    """The package ``vocab_plugin`` (a module and ``data/vocab.txt``) named in R2MED_PLUGINS;
    ``load()`` gives the process-wide plugin set rebuilt with it, as a new process would."""
    from r2med_tasks.running import discovery as plugins_module

    package = tmp_path / "src" / "vocab_plugin"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text(PACKAGE_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setenv("R2MED_PLUGINS", "vocab_plugin")
    monkeypatch.delitem(sys.modules, "vocab_plugin", raising=False)

    def load():
        sys.modules.pop("vocab_plugin", None)
        monkeypatch.setattr(plugins_module, "_plugins", None)
        return plugins_module.get_plugins()

    yield package, load
    sys.modules.pop("vocab_plugin", None)


def test_a_plugins_data_file_edited_is_recomputed(package_plugin, tmp_path):
    import r2med_tasks as r2med

    package, load = package_plugin

    def evaluate():
        load()
        return r2med.evaluate("vocabulary", tasks="sample", output=tmp_path / "out",
                              cache_dir=tmp_path / "cache")["R2MEDSampleRetrieval"]

    (package / "data" / "vocab.txt").write_text("cell protein gene")
    first, again = evaluate(), evaluate()
    assert (first.status, again.status) == ("computed", "cached")
    (package / "data" / "vocab.txt").write_text("disease patient treatment")
    edited = evaluate()
    assert edited.status == "computed" and edited.ndcg_at_10 != first.ndcg_at_10
