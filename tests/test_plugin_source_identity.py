"""A plugin whose code changes under one version (a module R2MED_PLUGINS names, a distribution
installed from a local folder) is identified by a hash of its source files, so a run of edited
code never reuses the results of the code before; an ordinary install keeps its version."""

import json
from pathlib import Path
import sys

import pytest

PLUGIN = '''
from r2med_tasks.components.specs import RetrieverSpec
from r2med_tasks.components.hookspecs import hookimpl

BONUS = {bonus}


class Constant:
    def index(self, corpus, *, task, context):
        self.ids = list(corpus.ids)

    def search(self, queries, *, task, top_k, context):
        return {{q.id: {{d: float(len(d) % 7) + BONUS for d in self.ids}} for q in queries}}


@hookimpl
def register_retrievers(register):
    register(RetrieverSpec(name="edited-constant", factory=lambda options: Constant(), description="tests only"))
'''


@pytest.fixture
def source_plugin(plugins, tmp_path, monkeypatch):
    """``write(bonus)`` writes the module ``edited_plugin`` (forgetting any earlier import) and
    returns the process-wide plugin set rebuilt with ``R2MED_PLUGINS=edited_plugin``."""
    from r2med_tasks.running import discovery as plugins_module

    folder = tmp_path / "src"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("R2MED_PLUGINS", "edited_plugin")
    monkeypatch.delitem(sys.modules, "edited_plugin", raising=False)

    def write(bonus=0.0):
        (folder / "edited_plugin.py").write_text(PLUGIN.format(bonus=bonus))
        sys.modules.pop("edited_plugin", None)
        monkeypatch.setattr(plugins_module, "_plugins", None)
        return plugins_module.get_plugins()

    yield write
    sys.modules.pop("edited_plugin", None)


def info_of(plugins, module):
    (info,) = [i for i in plugins.info.values() if i.module == module]
    return info


def test_a_module_named_in_r2med_plugins_is_identified_by_its_source(source_plugin, monkeypatch):
    from r2med_tasks.running import discovery as plugins_module

    hashed = []
    real = plugins_module.source_digest
    monkeypatch.setattr(plugins_module, "source_digest", lambda module: hashed.append(module) or real(module))
    plugins = source_plugin(0.0)
    assert plugins.broken == [] and hashed == []  # only when a run's identity asks
    first = info_of(plugins, "edited_plugin")
    assert first.version is None and first.unpackaged
    assert first.code_version.startswith("source-") and len(first.code_version) == len("source-") + 12
    assert first.code_version and hashed == ["edited_plugin"]  # once per plugin set
    assert info_of(source_plugin(0.0), "edited_plugin").code_version == first.code_version  # same source
    edited = info_of(source_plugin(1.0), "edited_plugin")
    assert edited.code_version.startswith("source-") and edited.code_version != first.code_version


def test_a_package_is_hashed_whole_and_its_caches_are_not(tmp_path, monkeypatch):
    from r2med_tasks.running.discovery import PluginInfo, source_digest

    package = tmp_path / "pkg_src" / "devpkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text("X = 1\n")
    (package / "sub" / "helpers.py").write_text("Y = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkg_src"))
    first = source_digest("devpkg.plugin:register")
    assert first is not None and source_digest("devpkg") == first
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "plugin.cpython-311.pyc").write_bytes(b"\0" * 10)
    (package / "sub" / "helpers.pyc").write_bytes(b"\0" * 10)
    (package / ".hidden").mkdir()
    (package / ".hidden" / "state").write_text("x")
    (package / "plugin.py~").write_text("X = 0\n")
    (package / "#plugin.py#").write_text("X = 0\n")
    (package / "py.typed").write_text("")
    assert source_digest("devpkg.plugin") == first
    (package / "sub" / "helpers.py").write_text("Y = 3\n")  # another module of the package
    assert source_digest("devpkg.plugin") != first
    assert PluginInfo("devpkg", None, "devpkg.plugin", unpackaged=True).code_version == \
        "source-" + source_digest("devpkg")[:12]
    assert source_digest("no_such_module_here") is None
    assert PluginInfo("no_such_module_here", None, "no_such_module_here", unpackaged=True).code_version is None


def old_source_digest(package):
    """The source hash before data files counted: the ``.py`` files only, in the same form."""
    import hashlib

    h = hashlib.sha256()
    for file in sorted(package.rglob("*.py"), key=lambda f: f.relative_to(package).as_posix()):
        if "__pycache__" not in file.parts:
            data = file.read_bytes()
            h.update(f"{file.relative_to(package).as_posix()}\0{len(data)}\n".encode())
            h.update(data)
    return h.hexdigest()


def test_a_package_of_code_only_keeps_the_identity_it_had(tmp_path, monkeypatch):
    """Data files joined the hash; a package without any keeps its hash, so its results keep
    their identity (the built-ins are identified by r2med's version, whatever their files)."""
    from r2med_tasks.running.discovery import source_digest

    package = tmp_path / "src" / "codepkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .sub.m import Z\n")
    (package / "sub" / "m.py").write_text("Z = 1\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.pyc").write_bytes(b"\0")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    assert source_digest("codepkg") == old_source_digest(package)


def test_a_plugins_data_files_are_part_of_its_source(tmp_path, monkeypatch):
    """A vocabulary, a prompt file, weights: editing any of them is other code, as editing a module is."""
    from r2med_tasks.running.discovery import PluginInfo, source_digest

    package = tmp_path / "src" / "datapkg"
    (package / "prompts").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "vocab.txt").write_text("alpha\nbeta\n")
    (package / "prompts" / "rewrite.txt").write_text("Rewrite: {query}")
    elsewhere = tmp_path / "weights"
    elsewhere.mkdir()
    (elsewhere / "head.bin").write_bytes(b"\1" * 64)
    (package / "weights").symlink_to(elsewhere, target_is_directory=True)  # a linked data folder
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    first = source_digest("datapkg")
    assert first != old_source_digest(package)  # (a package with data files: once, a new identity)
    (package / "vocab.txt").write_text("alpha\ngamma\n")
    second = source_digest("datapkg")
    assert second != first
    (package / "prompts" / "rewrite.txt").write_text("Rewrite briefly: {query}")
    third = source_digest("datapkg")
    assert third != second
    (elsewhere / "head.bin").write_bytes(b"\2" * 64)
    assert source_digest("datapkg") != third
    assert PluginInfo("datapkg", None, "datapkg", unpackaged=True).code_version == \
        "source-" + source_digest("datapkg")[:12]


@pytest.mark.parametrize("limit, value, said", [("MAX_SOURCE_BYTES", 100, "holds 120 bytes of files"),
                                                ("MAX_SOURCE_FILES", 2, "more than 2 files")])
def test_a_package_too_large_to_hash_is_refused_in_one_line(tmp_path, monkeypatch, limit, value, said):
    from r2med_tasks.running import discovery as plugins_module
    from r2med_tasks.errors import UserError
    from r2med_tasks.running.discovery import PluginInfo

    package = tmp_path / "src" / "bigpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.bin").write_bytes(b"x" * 60)
    (package / "b.bin").write_bytes(b"x" * 60)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(plugins_module, limit, value)
    with pytest.raises(UserError) as e:
        PluginInfo("bigpkg", None, "bigpkg", unpackaged=True).code_version
    message = str(e.value)
    assert message.startswith(f"plugin bigpkg: its package ({package}) holds") and said in message
    assert "\n" not in message and "outside the package" in message


def test_ordinary_installs_keep_their_version(plugins):
    from importlib.metadata import version

    infos = [i for i in plugins.info.values() if i.name == "r2med"]
    assert infos and all(i.code_version == i.version == version("r2med") for i in infos)


class FakeDistribution:
    def __init__(self, direct_url):
        self.direct_url = direct_url

    def read_text(self, name):
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)


@pytest.mark.parametrize("direct_url, from_source", [
    ({"url": "file:///home/me/plugin", "dir_info": {"editable": True}}, True),
    ({"url": "file:///home/me/plugin", "dir_info": {}}, True),
    ({"url": "file:///home/me/dist/plugin-1.0-py3-none-any.whl", "archive_info": {}}, True),
    ({"url": "https://files.example/plugin-1.0.tar.gz", "archive_info": {}}, False),
    (None, False),  # from an index: no direct_url.json
])
def test_a_distribution_installed_from_a_local_folder_is_identified_by_its_source(tmp_path, monkeypatch,
                                                                                direct_url, from_source):
    from r2med_tasks.running.discovery import PluginInfo, source_digest

    (tmp_path / "localpkg_plugin.py").write_text("Z = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    info = PluginInfo("localpkg", "1.0", "localpkg_plugin:plugin", distribution=FakeDistribution(direct_url))
    expected = "source-" + source_digest("localpkg_plugin")[:12] if from_source else "1.0"
    assert info.code_version == expected
    # the built-ins' own distribution keeps its version, however it was installed
    assert PluginInfo("r2med", "2.0", "localpkg_plugin", distribution=FakeDistribution(direct_url)).code_version == "2.0"


def test_an_edited_plugin_recomputes_what_its_earlier_source_computed(source_plugin, tmp_path):
    import r2med_tasks as r2med
    from r2med_tasks.results.folder import ResultsFolder

    def run(bonus):
        source_plugin(bonus)
        res = r2med.evaluate("edited-constant", tasks="sample", output=tmp_path / "out", cache_dir=tmp_path / "c")
        (folder,) = res.results_dirs
        return res["R2MEDSampleRetrieval"], Path(folder)

    first, folder = run(0.0)
    again, _ = run(0.0)
    assert (first.status, again.status) == ("computed", "cached")
    edited, same_folder = run(1.0)  # a changed constant: other code, same (absent) version
    assert edited.status == "computed" and same_folder == folder
    identity = ResultsFolder(folder).identity("R2MEDSampleRetrieval")
    assert identity["code"]["edited_plugin"].startswith("source-")
