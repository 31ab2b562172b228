"""Query2Doc's few-shot examples (issues 14 and 45): the authors' ``src/example.py`` at the pinned
commit ships with the package, checked by its sha256, parsed as data (never run), so a live run
needs no network; ``-o examples=PATH`` overrides it. The authors' real file is read from the
optional copy under ``../shared/reference/r2med-repo/`` (not part of this repository); those
checks skip when it is absent."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl

from r2med_plugins.gar import prompts, query2doc_examples

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "r2med-repo"
QUERIES = read_jsonl(SAMPLE / "query.jsonl")
BUILT = {key: f"Post: example question {i} for {key}\nPassage:\nexample answer {i}.\n\nPost: second {i}\nPassage:\n"
              f"second answer {i}." for i, key in enumerate(prompts.DATASET_KEYS)}
SHIPPED = Path(query2doc_examples.__file__).with_name("r2med_example.py.txt")


def built_example_py() -> bytes:
    """A file shaped like upstream src/example.py: one top-level dict literal named Example."""
    entries = "".join(f"    {key!r}: '''{text}''',\n" for key, text in BUILT.items())
    return f"\nExample = {{\n{entries}}}\n".encode()


def authors_examples(path: Path) -> dict[str, str]:
    """``Example`` of an example.py, read as a literal (independently of the package's parser)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (assign,) = [n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "Example"]
    return ast.literal_eval(assign.value)


def run_query2doc(run_cli, tmp_path, chat, *extra, output="out"):
    return run_cli("run", "--plugin", "query2doc", "-o", f"llm={chat.url}#test-model", *extra, "--plugin", "bm25",
                   "--tasks", "sample", "--output", tmp_path / output, "--cache-dir", tmp_path / "cache", "--json")


def test_the_shipped_examples_are_the_first_commits_file_with_its_notice():
    assert query2doc_examples.QUERY2DOC_EXAMPLES_COMMIT.startswith("45cbac5") and \
        len(query2doc_examples.QUERY2DOC_EXAMPLES_COMMIT) == 40
    assert hashlib.sha256(SHIPPED.read_bytes()).hexdigest() == \
        "a1636976765b6ce4ce365349e04183bf1d1f40337d2f5f4342f00de03f2363af"
    notice = SHIPPED.with_name("R2MED_LICENSE.txt").read_text()
    assert notice.startswith("MIT License") and "Copyright (c) 2025 R2MED" in notice
    assert "r2med_example.py.txt" in (Path(prompts.__file__).parents[2] / "NOTICE").read_text()


def test_a_live_run_uses_the_shipped_examples_offline(run_cli, tmp_path, chat_server):
    code, _, err = run_query2doc(run_cli, tmp_path, chat_server)
    assert code == 0, err
    shipped = authors_examples(SHIPPED)
    for request in chat_server.requests:  # each prompt: the authors' examples, as their template places them
        user = request.body["messages"][1]["content"]
        query = next(q["text"] for q in QUERIES if q["text"] in user)
        assert user == prompts.QUERY2DOC_OUTER_TEMPLATES["Stack-Medical"].format(
            EXAMPLE=shipped["Stack-Medical"], TEXT="{TEXT}").format(TEXT=query)
    assert not (tmp_path / "cache" / "query2doc-examples").exists()  # nothing fetched, nothing cached


def test_a_shipped_copy_that_is_not_the_commits_is_refused(run_cli, tmp_path, chat_server, monkeypatch):
    changed = tmp_path / "r2med_example.py.txt"
    changed.write_bytes(SHIPPED.read_bytes().replace(b"Passage", b"Paragraph", 1))
    monkeypatch.setattr(query2doc_examples, "SHIPPED_EXAMPLES", changed)
    code, _, err = run_query2doc(run_cli, tmp_path, chat_server)
    assert code == 2 and "Traceback" not in err and chat_server.count == 0
    assert "sha256 differs" in err and "45cbac5" in err


def test_parsing_takes_data_only(tmp_path):
    with pytest.raises(ValueError, match="missing"):
        query2doc_examples.parse_query2doc_examples("Example = {'Stack-Biology': 'only one'}\n", "x.py")
    with pytest.raises(ValueError, match="cannot evaluate"):
        query2doc_examples.parse_query2doc_examples("import os\nos.system('echo never run')\n"
                                                    "Example = open('x').read()\n", "x.py")


def test_examples_path_overrides_the_shipped_ones(run_cli, tmp_path, chat_server):
    local = tmp_path / "example.py"
    local.write_bytes(built_example_py())
    code, _, err = run_query2doc(run_cli, tmp_path, chat_server, "-o", f"examples={local}")
    assert code == 0, err
    assert all(BUILT["Stack-Medical"] in r.body["messages"][1]["content"] for r in chat_server.requests)
    code, _, err = run_query2doc(run_cli, tmp_path, chat_server, "-o", f"examples={tmp_path / 'absent.py'}", output="o2")
    assert code == 2 and "-o examples=" in err and "Traceback" not in err


# -- the authors' real src/example.py -----------------------------------------------------------------

def real_example_py(commit: str) -> Path:
    path = REFERENCE / commit / "src" / "example.py"
    if not path.is_file():
        pytest.skip(f"optional material {path} is absent")
    return path


def authors_query2doc_prompts(commit: str, query: str) -> dict[str, str]:
    """The authors' procedure, computed independently: ``Example`` is the dict literal of
    src/example.py; instrcution.py's ``query2doc[key]`` is its string literal
    ``.format(EXAMPLE=Example[key], TEXT="{TEXT}")``; generate_hypothetical_doc.py then sends
    ``base_prompt.format(TEXT=entry['text'])``."""
    example = authors_examples(real_example_py(commit))
    instruction = REFERENCE / commit / "src" / "instrcution.py"
    if not instruction.is_file():
        pytest.skip(f"optional material {instruction} is absent")
    tree = ast.parse(instruction.read_text(encoding="utf-8"))
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "query2doc")
    out = {}
    for key_node, call in zip(table.keys, table.values):
        key, outer = ast.literal_eval(key_node), ast.literal_eval(call.func.value)
        kwargs = {k.arg: k.value for k in call.keywords}
        assert kwargs["EXAMPLE"].value.id == "Example" and ast.literal_eval(kwargs["EXAMPLE"].slice) == key
        assert ast.literal_eval(kwargs["TEXT"]) == "{TEXT}"
        out[key] = outer.format(EXAMPLE=example[key], TEXT="{TEXT}").format(TEXT=query)
    return out


@pytest.mark.parametrize("commit", ["45cbac5", "62b7074"])
def test_each_prompt_holds_its_datasets_real_examples_byte_for_byte(commit, tmp_path):
    query = QUERIES[0]["text"]
    expected = authors_query2doc_prompts(commit, query)
    assert sorted(expected) == sorted(prompts.DATASET_KEYS)
    fetched = query2doc_examples.load_query2doc_examples(real_example_py(commit))
    for key in prompts.DATASET_KEYS:
        ours = prompts.build_prompt("query2doc", key, query, examples=fetched)
        assert ours.encode("utf-8") == expected[key].encode("utf-8"), key
        assert prompts.build_messages("query2doc", key, query, examples=fetched)[1]["content"] == expected[key]
    if commit == "45cbac5":  # the shipped default is this commit's file, byte for byte
        assert SHIPPED.read_bytes() == real_example_py(commit).read_bytes()
        assert query2doc_examples.shipped_query2doc_examples() == fetched


def test_the_package_holds_the_examples_once():
    """The authors' text ships in its one data file, not copied into code or docs."""
    example = authors_examples(real_example_py("45cbac5"))
    root = Path(prompts.__file__).resolve().parents[2]
    files = [p for folder in ("plugins", "r2med_tasks") for p in (root / folder).rglob("*") if p.is_file()
             and p.suffix in {".py", ".json", ".csv", ".md", ".txt", ".jsonl"}]
    snippets = [text.split("\n")[0][:80] for text in example.values()]
    holding = [p for p in files if any(s in p.read_text(encoding="utf-8", errors="replace") for s in snippets)]
    assert holding == [SHIPPED.resolve()]
