"""Every ``r2med-run`` command in README.md and docs/ is accepted as written: plugin names,
options, option values and tasks resolve, checked with ``--dry-run`` (no data, no model, no hub)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TESTS

ROOT = TESTS.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^[ \t]*```(\w*)\n(.*?)^[ \t]*```", re.S | re.M)
INLINE = re.compile(r"`([^`\n]*r2med-run [^`\n]*)`")
COMMENT = re.compile(r"\s+#\s.*$")  # a shell comment, not the '#' of llm=URL#model
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def shell_lines(page: Path) -> list[str]:
    """The page's commands: fenced shell blocks (continuations joined, comments dropped) and inline code."""
    text = page.read_text(encoding="utf-8")
    lines = []
    for lang, body in FENCE.findall(text):
        if lang not in ("", "bash", "sh", "console"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = COMMENT.sub("", line).strip()
            if line:
                lines.append(line)
    lines += INLINE.findall(FENCE.sub("", text))
    return lines


def documented(program: str) -> list[tuple[str, str]]:
    """(page, command) for every command of ``program`` the pages show."""
    found = []
    for page in PAGES:
        for line in shell_lines(page):
            command = line.rpartition("&& ")[2]  # "pip install . && r2med-run ..."
            words = shlex.split(command)
            while words and ASSIGNMENT.match(words[0]):
                words.pop(0)
            if words and words[0] == program:
                found.append((page.relative_to(ROOT).as_posix(), command))
    return found


RUNS = documented("r2med-run")
# the other commands that need no placeholder (<revision>) and no folder of the reader's (~/...)
OTHERS = [(page, c) for page, c in documented("r2med") if "<" not in c and "~" not in c
          and c.split()[1] in ("list", "plugins", "leaderboard")]


def test_the_pages_document_runs():
    """The extraction itself works: the README's first command and the reproducing tables are found."""
    pages = {page for page, _ in RUNS}
    assert {"README.md", "docs/reproducing.md", "docs/rewriters.md", "docs/hybrid.md"} <= pages
    assert ("README.md", "r2med-run --plugin bm25 --tasks sample") in RUNS
    assert any("--plugin nvembed --plugin monobert" in command for _, command in RUNS)
    assert len(RUNS) >= 30


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, model_path) -> Path:
    """A Hugging Face cache holding all-MiniLM-L6-v2, as a machine that has downloaded it once
    (made once: dry runs only read it)."""
    commit = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"
    cache = tmp_path_factory.mktemp("hf")
    repo = cache / "models--sentence-transformers--all-MiniLM-L6-v2"
    shutil.copytree(model_path, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return cache


@pytest.fixture
def hub_cache_with_minilm(hub_cache, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub_cache))


@pytest.mark.parametrize("page,command", RUNS, ids=[f"{p}:{c}" for p, c in RUNS])
def test_documented_run_is_accepted(page, command, plugins, hub_cache_with_minilm, tmp_path, monkeypatch):
    from r2med_tasks import plugins as plugins_module
    from r2med_tasks.cli import run_command

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    words = shlex.split(command)
    while ASSIGNMENT.match(words[0]):  # OPENAI_API_KEY=… r2med-run ...
        key, _, value = words.pop(0).partition("=")
        if key == "PYTHONPATH":
            monkeypatch.syspath_prepend(str(ROOT / value))
        else:
            monkeypatch.setenv(key, value)
    for line in shell_lines(ROOT / page):  # files the page creates first (e.g. echo '{...}' > tune.json)
        if line.startswith("echo ") and ">" in line:
            subprocess.run(line, shell=True, check=True, cwd=work)
    (work / "runs").mkdir()  # the reader's own run files (docs/leaderboard.md)
    (work / "runs" / "Biology.trec").write_text("0 Q0 some/doc.txt 1 12.5 MySystem\n")
    # the example plugin stands in for `pip install -e tests/example_plugin` (docs/writing-plugins.md)
    monkeypatch.syspath_prepend(str(TESTS / "example_plugin"))
    monkeypatch.setenv("R2MED_PLUGINS", "r2med_example")  # (a command's own R2MED_PLUGINS names the same)
    monkeypatch.setattr(plugins_module, "_plugins", None)
    result = CliRunner().invoke(run_command, [*words[1:], "--dry-run", "--json", "--output", str(work / "results")],
                                catch_exceptions=False)
    assert result.exit_code == 0, f"{page}: `{command}` -> {result.stderr}"
    assert not (work / "results").exists(), "a dry run writes nothing"


def test_other_documented_commands_run(plugins, tmp_path, monkeypatch):
    """`r2med list|plugins|leaderboard` as the pages show them, in a folder with (empty) results folders."""
    from r2med_tasks.cli import cli

    assert len(OTHERS) >= 8
    monkeypatch.chdir(tmp_path)
    for folder in ("results", "other-results"):
        (tmp_path / folder).mkdir()
    for page, command in OTHERS:
        result = CliRunner().invoke(cli, shlex.split(command)[1:], catch_exceptions=False)
        assert result.exit_code == 0, f"{page}: `{command}` -> {result.stderr}"
    assert (tmp_path / "board.html").read_text().startswith("<!DOCTYPE html>")


def test_the_agent_plugin_on_the_page_runs(run_cli, tmp_path, chat_server, docs_agent_plugin):
    """docs/writing-plugins.md's searching agent, taken from the page's text: registered as a plugin,
    run against a local LLM server, its search reaching the searcher and its trajectory kept."""
    import json

    chat_server.script = lambda context, partial: ("endometriosis pain treatment" if "search query" in str(context)
                                                   else "an answer about endometriosis")
    args = ["run", "--plugin", "ask-search-answer", "-o", f"llm={chat_server.url}#m", "--plugin", "bm25",
            "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json"]
    code_, out, err = run_cli(*args)
    assert code_ == 0, err
    summary = json.loads(out)
    assert summary["pipeline"] == "ask-search-answer + BM25" and summary["tasks"][0]["ndcg_at_10"] > 0
    rows = [json.loads(line) for line in next((tmp_path / "out").rglob("*.trajectories.jsonl")).read_text().splitlines()]
    assert len(rows) == 10 and {r["search"] for r in rows} == {"endometriosis pain treatment"}
    assert all(len(r["found"]) == 3 for r in rows) and rows[0]["answer"] == "an answer about endometriosis"
    sent = chat_server.count
    code_, out, err = run_cli(*args[:-1], "--overwrite", "--json")  # recomputed from the cache: no request
    assert code_ == 0 and chat_server.count == sent
