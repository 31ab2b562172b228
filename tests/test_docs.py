"""Every ``r2med-run`` command in README.md and docs/ is accepted as written: plugin names,
options, option values and tasks resolve, checked with ``--dry-run`` (no data, no model, no hub).
docs/writing-plugins.md's examples run from the page's text."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SAMPLE, TESTS, read_jsonl, read_ranking

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


# docs/writing-plugins.md's examples: the code block after each ``<!-- example: NAME -->``
WRITING_PLUGINS = ROOT / "docs" / "writing-plugins.md"
EXAMPLE = re.compile(r"^<!-- example: (.+?) -->\n```\w*\n(.*?)^```", re.DOTALL | re.MULTILINE)
# its examples that are whole plugin modules: the module name its run command loads -> the example
MODULES = {"lay_terms": "rewriter", "word_overlap": "reranker", "ask_search_answer": "agent plugin"}
# its example package, shown file by file: the example -> the file it is
PACKAGE = {"retriever pyproject.toml": "pyproject.toml", "retriever __init__.py": "r2med_example/__init__.py",
           "retriever": "r2med_example/tfidf.py"}


def page_examples() -> dict[str, str]:
    """The page's examples by name, as its text shows them."""
    return dict(EXAMPLE.findall(WRITING_PLUGINS.read_text(encoding="utf-8")))


def write_modules(folder: Path, monkeypatch) -> Path:
    """The page's plugin modules saved in ``folder`` as a reader saves them, importable from there
    (and from nowhere else: a module imported before, from another folder, is forgotten)."""
    examples = page_examples()
    folder.mkdir(parents=True, exist_ok=True)
    for module, name in MODULES.items():
        (folder / f"{module}.py").write_text(examples[name], encoding="utf-8")
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.syspath_prepend(str(folder))
    return folder


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
    from r2med_tasks.running import discovery as plugins_module
    from r2med_tasks.cli import run_command

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    words = shlex.split(command)
    modules = ["r2med_example"]
    while ASSIGNMENT.match(words[0]):  # OPENAI_API_KEY=… r2med-run ...
        key, _, value = words.pop(0).partition("=")
        if key == "PYTHONPATH":  # "." is the folder the reader saved the page's module in
            monkeypatch.syspath_prepend(str(work if value == "." else ROOT / value))
        elif key == "R2MED_PLUGINS":
            modules += [m for m in value.split(",") if m not in modules]
        else:
            monkeypatch.setenv(key, value)
    for line in shell_lines(ROOT / page):  # files the page creates first (e.g. echo '{...}' > tune.json)
        if line.startswith("echo ") and ">" in line:
            subprocess.run(line, shell=True, check=True, cwd=work)
    (work / "runs").mkdir()  # the reader's own run files (docs/leaderboard.md)
    (work / "runs" / "Biology.trec").write_text("0 Q0 some/doc.txt 1 12.5 MySystem\n")
    # the example plugin stands in for `pip install -e tests/example_plugin` (docs/writing-plugins.md),
    # and the page's plugin modules are saved where its commands run (PYTHONPATH=.)
    monkeypatch.syspath_prepend(str(TESTS / "example_plugin"))
    write_modules(work, monkeypatch)
    monkeypatch.setenv("R2MED_PLUGINS", ",".join(modules))
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


# -- docs/writing-plugins.md's examples, from the page's text ---------------------------------------


def test_the_page_has_every_example_with_its_command():
    """A retriever, a rewriter, a reranker and an agent; each plugin module with the command that
    runs it from the folder it is saved in, each command dry-run above."""
    examples = page_examples()
    assert {*PACKAGE, "retriever test", *MODULES.values()} <= set(examples)
    for module, name in MODULES.items():
        assert "@hookimpl" in examples[name] and "def register_" in examples[name], name
        assert any(page == "docs/writing-plugins.md" and command.startswith(f"PYTHONPATH=. R2MED_PLUGINS={module} ")
                   for page, command in RUNS), module


def test_the_page_shows_the_example_package_as_it_is():
    """The retriever's files on the page are tests/example_plugin's, whole: what the suite installs
    and runs (test_plugins.py) is what a reader copies."""
    examples = page_examples()
    for name, path in PACKAGE.items():
        assert examples[name] == (TESTS / "example_plugin" / path).read_text(encoding="utf-8"), path


def test_the_pages_retriever_test_runs(plugins, tmp_path, monkeypatch):
    """The page's pytest test of the retriever, run as written: it loads the plugin
    (r2med_tasks.testing) and evaluates tfidf on the sample, into ``tmp_path/results``."""
    import r2med_tasks as r2med

    monkeypatch.syspath_prepend(str(TESTS / "example_plugin"))
    namespace: dict = {}
    exec(compile(page_examples()["retriever test"], str(WRITING_PLUGINS), "exec"), namespace)  # noqa: S102 (the page's code)
    namespace["test_tfidf_runs"](tmp_path)
    again = r2med.evaluate("tfidf", tasks="sample", output=tmp_path / "results", cache_dir=tmp_path / "cache")
    task = again["R2MEDSampleRetrieval"]  # what the page's test computed, reused
    assert task.status == "cached" and task.n_queries == 10 and 0 < task.ndcg_at_10 <= 1


@pytest.fixture
def page_plugins(plugins, tmp_path, monkeypatch):
    """The page's example package, rewriter and reranker, loaded as a reader loads them:
    ``R2MED_PLUGINS=r2med_example,lay_terms,word_overlap``, the rewriter and reranker saved from the
    page's text."""
    from r2med_tasks.running import discovery as plugins_module

    write_modules(tmp_path / "saved", monkeypatch)
    monkeypatch.syspath_prepend(str(TESTS / "example_plugin"))
    monkeypatch.setenv("R2MED_PLUGINS", "r2med_example,lay_terms,word_overlap")
    monkeypatch.setattr(plugins_module, "_plugins", None)


def sample_queries():
    from r2med_tasks import Query

    return [Query(row["id"], row["text"]) for row in read_jsonl(SAMPLE / "query.jsonl")]


def ranking(outcome) -> dict[str, list[tuple[str, float]]]:
    """Each query's documents and scores, best first, from a run's one results folder."""
    (folder,) = outcome.results_dirs
    return read_ranking(Path(folder) / "R2MEDSampleRetrieval.trec")


def test_the_pages_rewriter_fills_generated_by_the_contract(page_plugins):
    """A tuple of strings and the method's name; the query's id and text kept. What each family of
    retriever then searches with is the page's rule (``Query.combined``)."""
    import dataclasses

    import lay_terms

    queries = sample_queries()
    rewritten = {q.id: q for q in lay_terms.LayTerms(None).rewrite(queries, task=None, context=None)}
    assert [(q.id, q.text) for q in rewritten.values()] == [(q.id, q.text) for q in queries]
    assert all(q.method == "lay-terms" and not q.reasoning and isinstance(q.generated, tuple)
               and all(isinstance(g, str) for g in q.generated) for q in rewritten.values())
    q03, q02 = rewritten["q03"], rewritten["q02"]
    assert q03.text.startswith("Why would ear ringing and spinning dizziness") and q03.generated == ("tinnitus vertigo",)
    assert q03.combined("bm25") == q03.text + " tinnitus vertigo"  # the query once, then the document
    assert q03.combined("dense") == (q03.text, "tinnitus vertigo")  # the mean of both embeddings
    assert q02.generated == () and q02.combined("bm25") == q02.combined("dense") == q02.text  # the query alone
    several = dataclasses.replace(q03, generated=("tinnitus", "vertigo"))  # several documents: each once
    assert several.combined("bm25") == q03.text + " tinnitus vertigo"
    assert several.combined("dense") == (q03.text, "tinnitus", "vertigo")


def test_the_pages_rewriter_reaches_bm25_and_tfidf(page_plugins, evaluate, monkeypatch):
    """lay-terms + bm25 searches with the query and the generated document (BM25's own rule);
    tfidf, which declares no rule, gets the same text as the query's and never sees ``generated``."""
    from r2med_tasks.tasks import combine  # the rules Query.combined applies

    queries = {q.id: q.text for q in sample_queries()}
    expected = {**queries, "q03": queries["q03"] + " tinnitus vertigo"}

    bm25_searched = {}
    original = combine.bm25_query

    def recording(query):
        bm25_searched[query.id] = original(query)
        return bm25_searched[query.id]

    monkeypatch.setattr(combine, "bm25_query", recording)
    rewritten = evaluate("lay-terms", "bm25", output="bm25")
    assert bm25_searched["q03"] == expected["q03"] and bm25_searched["q02"] == queries["q02"]
    plain = evaluate("bm25", output="plain")
    assert 0 < rewritten["sample"].ndcg_at_10 <= 1
    changed = {qid for qid, docs in ranking(rewritten).items() if docs != ranking(plain)[qid]}
    assert "q03" in changed and not changed & {"q02", "q05", "q06"}  # only queries it added words to

    import r2med_example.tfidf

    tfidf_searched = {}
    search = r2med_example.tfidf.TfidfRetriever.search

    def spying(self, queries, **kwargs):
        tfidf_searched.update({q.id: (q.text, q.generated, q.method) for q in queries})
        return search(self, queries, **kwargs)

    monkeypatch.setattr(r2med_example.tfidf.TfidfRetriever, "search", spying)
    outcome = evaluate("lay-terms", "tfidf", output="tfidf")
    assert tfidf_searched["q03"] == (expected["q03"], (), "")
    assert tfidf_searched["q02"] == (queries["q02"], (), "lay-terms")  # nothing generated: the query as it came
    assert 0 < outcome["sample"].ndcg_at_10 <= 1


def test_the_pages_reranker_reorders_the_first_stage(page_plugins, evaluate):
    """bm25 + word-overlap: each query's bm25 top 10 (rerank_k), reordered by score, ties in bm25's
    order; the run is those 10 unless keep_tail=true keeps bm25's other documents below them."""
    first = ranking(evaluate("bm25", output="first"))
    outcome = evaluate("bm25", "word-overlap", output="reranked")
    reranked = ranking(outcome)
    assert outcome.display_name.endswith("word-overlap") and 0 < outcome["sample"].ndcg_at_10 <= 1
    for qid, docs in reranked.items():
        top = [doc for doc, _ in first[qid][:10]]
        assert sorted(doc for doc, _ in docs) == sorted(top)  # the same documents: only reordered
        order = sorted(docs, key=lambda item: (-item[1], top.index(item[0])))  # by score, then bm25's rank
        assert docs == order
    assert sum([d for d, _ in reranked[qid]] != [d for d, _ in first[qid][:10]] for qid in reranked) >= 3  # reordered
    tail = ranking(evaluate("bm25", "word-overlap", output="tail", keep_tail=True))
    for qid, docs in tail.items():
        assert [d for d, _ in docs] == [d for d, _ in reranked[qid]] + [d for d, _ in first[qid][10:]]
