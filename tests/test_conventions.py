"""The conventions of the ecosystems r2med lives in (#15): ``XDG_CACHE_HOME``, ``OPENAI_BASE_URL``
as the openai SDK reads it, files with the umask's mode, quiet retries and no credentials shown,
and a third-party plugin's name clash failing only the runs that use the name."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import stat
from pathlib import Path

import pytest

from r2med_tasks.files import atomic
from r2med_tasks.components.context import default_cache_dir
from r2med_tasks.errors import UserError
from r2med_tasks.files.journal import Journal
from r2med_tasks.llm import OPENAI_BASE_URL, parse_llm_spec
from r2med_tasks.llm.endpoint import VLLM_BASE_URL
from r2med_tasks.running.registry import build_registry

SECRET = "sk-conv-0123456789SECRETURL"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask():
    """Set the process's umask for one test (the previous one is restored)."""
    previous = os.umask(0o022)
    yield os.umask
    os.umask(previous)


# -- XDG_CACHE_HOME and the umask --------------------------------------------------------------------
def test_default_cache_dir_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "r2med"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the spec: a relative path is ignored
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "r2med"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "r2med"


def test_a_run_caches_under_xdg_cache_home_and_writes_files_as_open_would(plugins, monkeypatch, tmp_path, umask):
    """Under umask 022 every file a run leaves (results, mteb's TaskResult, the lock, the index
    cache) is 0644, as a plain ``open()`` makes it, so results can be shared on a cluster."""
    import r2med_tasks as r2med

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("R2MED_CACHE_DIR", raising=False)
    r2med.evaluate("bm25", tasks="sample", output=tmp_path / "out")  # no cache_dir: the default one
    cached = [p for p in (tmp_path / "xdg" / "r2med").rglob("*") if p.is_file()]
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert cached and any(p.name == "R2MEDSampleRetrieval.json" for p in written)
    assert {str(p): oct(mode(p)) for p in cached + written if mode(p) != 0o644} == {}


@pytest.mark.parametrize("mask,expected", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)],
                         ids=["umask-022", "umask-002", "umask-077"])
def test_atomic_writes_and_journals_take_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    atomic.write_text(tmp_path / "a.json", "{}")
    with atomic.replacing(tmp_path / "b.json") as handle:
        handle.write(b"{}")
    Journal(tmp_path / "j.jsonl", "a journal").append([{"k": 1}])
    assert [mode(tmp_path / name) for name in ("a.json", "b.json", "j.jsonl")] == [expected] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "j.jsonl"]  # no temp file left


def test_a_replaced_file_keeps_its_mode(tmp_path, umask):
    path = tmp_path / "shared.json"
    atomic.write_text(path, "1")
    path.chmod(0o640)
    atomic.write_text(path, "2")
    assert path.read_text() == "2" and mode(path) == 0o640


# -- OPENAI_BASE_URL, as the openai SDK reads it --------------------------------------------------------
def test_openai_base_url_sends_openai_models_to_that_server(chat_server, monkeypatch, plugins):
    import openai

    monkeypatch.setenv("OPENAI_BASE_URL", chat_server.url)
    assert str(openai.OpenAI(api_key="unused").base_url).rstrip("/") == chat_server.url  # the SDK's reading
    client = build_registry(plugins).llm("openai:gpt-4o-mini")
    answer = client.generate([[{"role": "user", "content": "hello"}]])
    assert answer[0].text.startswith("echo:") and chat_server.count == 1
    request = chat_server.requests[0]
    assert request.path == "/v1/chat/completions" and request.body["model"] == "gpt-4o-mini"
    assert "authorization" not in request.headers  # a local server needs no key; sent when set:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    client.generate([[{"role": "user", "content": "again"}]])
    assert chat_server.requests[1].headers["authorization"] == f"Bearer {SECRET}"


def test_openai_base_url_leaves_other_specs_alone(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    assert parse_llm_spec("openai:m")["base_url"] == "http://127.0.0.1:9/v1"
    assert parse_llm_spec("vllm:m")["base_url"] == VLLM_BASE_URL
    assert parse_llm_spec("http://10.0.0.1:8000/v1#m")["base_url"] == "http://10.0.0.1:8000/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", " ")  # blank: unset
    assert parse_llm_spec("openai:m")["base_url"] == OPENAI_BASE_URL
    monkeypatch.setenv("OPENAI_BASE_URL", f"localhost:8000?api-key={SECRET}")
    with pytest.raises(UserError, match="OPENAI_BASE_URL") as err:
        parse_llm_spec("openai:m")
    assert SECRET not in str(err.value)


# -- retries and credentials in a run ---------------------------------------------------------------------
def test_a_dead_llm_server_is_one_error_line_and_no_credential_anywhere(run_cli, chat_server, tmp_path, caplog):
    """Every request fails for good: no line per retry, one error line; the URL's password and
    key never reach the output, the results folder or the cache."""
    chat_server.fail_after(0, "500", message=f"upstream for http://u:{SECRET}@x refused")
    host = chat_server.url.removeprefix("http://")
    llm = f"http://user:{SECRET}@{host}?api-key={SECRET}#test-model"
    with caplog.at_level(logging.WARNING):
        code, out, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={llm}", "--plugin", "bm25", "--tasks", "sample",
                                 "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache")
    assert code != 0 and chat_server.count >= 3
    assert caplog.records == []
    (line,) = err.strip().splitlines()
    assert "HTTP 500" in line and "3 time(s)" in line and "***" in line
    stored = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert not list((tmp_path / "out").rglob("pipeline.json"))  # a run that finished no task leaves no record
    assert SECRET not in out + err + stored and "SECRETURL" not in out + err + stored


@pytest.mark.parametrize("spec", [f"http://user:{SECRET}@127.0.0.1:8000/v1", f"htp://user:{SECRET}@host/v1#m",
                                  f"http://127.0.0.1:8000/v1?api-key={SECRET}", f"http://{SECRET}@127.0.0.1:8000/v1"])
def test_a_bad_llm_spec_is_refused_without_its_credentials(plugins, spec):
    with pytest.raises(UserError) as err:
        build_registry(plugins).llm(spec)
    assert "***" in str(err.value) and "SECRETURL" not in str(err.value)



def test_an_option_no_component_takes_is_refused_without_its_credentials(plugins):
    """``-o llm=URL`` given to a pipeline without an LLM: the message quotes the option, key masked."""
    from r2med_tasks.running.pipelines import build_pipeline

    with pytest.raises(UserError) as err:
        build_pipeline(build_registry(plugins), ["bm25"], [f"llm=http://u:{SECRET}@127.0.0.1:8000/v1#m"])
    assert "no selected component accepts 'llm'" in str(err.value)
    assert "***" in str(err.value) and "SECRETURL" not in str(err.value)

# -- plugin name clashes --------------------------------------------------------------------------------
@pytest.fixture
def clash_pkg(plugins, tmp_path, monkeypatch):
    """``clash_plugin`` installed as the package ``clash-pkg``: its metadata on ``sys.path``, as pip
    leaves it, found through the real entry-point machinery (after ``plugins`` set the built-ins)."""
    from r2med_tasks.running import discovery as plugins_module

    info = tmp_path / "site" / "clash_pkg-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[r2med]\nclash = clash_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(plugins_module, "entry_points", importlib.metadata.entry_points)  # not the session's scan
    monkeypatch.setenv("R2MED_LOAD_PLUGINS", "clash-pkg")
    monkeypatch.delenv("R2MED_PLUGINS", raising=False)

    def reload(**env: str):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(plugins_module, "_plugins", None)
        return plugins_module.get_plugins()

    reload()
    return reload


def test_a_name_clash_fails_only_the_runs_that_use_the_name(clash_pkg, run_cli, evaluate, tmp_path):
    args = ("--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache")
    assert evaluate("clash-overlap")["sample"].n_queries == 10
    code, _, err = run_cli("run", "--plugin", "bm25", *args)
    (line,) = err.strip().splitlines()
    assert code == 2 and "two retrievers are named 'bm25': one from r2med" in line and "one from clash-pkg" in line
    assert 'R2MED_LOAD_PLUGINS="" for r2med\'s' in line
    code, out, _ = run_cli("plugins", "--json")
    listing = json.loads(out)
    assert "R2MED_LOAD_PLUGINS" in listing["conflicts"][0]
    assert {r["name"]: r["components"]["retrievers"] for r in listing["plugins"]}["clash-pkg"] == ["clash-overlap"]
    clash_pkg(R2MED_LOAD_PLUGINS="")  # the choice the message offers
    code, out, err = run_cli("run", "--plugin", "bm25", *args, "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["stages"][0] == {"kind": "retriever", "component": "bm25", "plugin": "r2med",
                                            "options": {}}


def test_a_plugin_installed_and_named_in_r2med_plugins_is_registered_once(clash_pkg, run_cli, tmp_path):
    import clash_plugin

    plugins = clash_pkg(R2MED_PLUGINS="clash_plugin")
    assert plugins.broken == [] and plugins.pm.is_registered(clash_plugin)
    assert [info.name for info in plugins.info.values() if info.module == "clash_plugin"] == ["clash-pkg"]
    code, _, err = run_cli("run", "--plugin", "clash-overlap", "--tasks", "sample", "--output", tmp_path, "--dry-run")
    assert code == 0 and "broken" not in err, err
    assert 'R2MED_LOAD_PLUGINS="" R2MED_PLUGINS="" for r2med\'s' in build_registry(plugins).conflicts[0]


def test_every_command_says_what_it_does_uncut_at_80_columns(run_cli, monkeypatch):
    """``r2med --help`` lists each command with a line a terminal of 80 columns shows whole."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli("--help")
    listed = out.split("Commands:", 1)[1].strip().splitlines()
    assert code == 0 and len(listed) >= 13
    assert all(len(line) <= 80 and not line.endswith("...") and line.endswith(".") for line in listed), listed
