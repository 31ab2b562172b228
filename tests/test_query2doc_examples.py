"""Query2Doc's few-shot examples (issue 14, item 8): fetched at run time from the authors'
repository at the pinned commit (here: a local HTTP server on 127.0.0.1 serving a file the test
builds), parsed as data, cached (a second run makes no request), a one-line error offline, and
``-o examples=PATH`` for offline use. The authors' real ``src/example.py`` is read from the optional
copy under ``../shared/reference/r2med-repo/`` (not part of this repository); those checks skip
when it is absent."""

from __future__ import annotations

import ast
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import SAMPLE, read_jsonl

from r2med_plugins.gar import prompts, query2doc_examples

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "r2med-repo"
QUERIES = read_jsonl(SAMPLE / "query.jsonl")
BUILT = {key: f"Post: example question {i} for {key}\nPassage:\nexample answer {i}.\n\nPost: second {i}\nPassage:\n"
              f"second answer {i}." for i, key in enumerate(prompts.DATASET_KEYS)}


def built_example_py() -> bytes:
    """A file shaped like upstream src/example.py: one top-level dict literal named Example."""
    entries = "".join(f"    {key!r}: '''{text}''',\n" for key, text in BUILT.items())
    return f"\nExample = {{\n{entries}}}\n".encode()


class FileServer:
    """Serves one file at /R2MED/R2MED/<commit>/src/example.py and counts the requests."""

    def __init__(self, body: bytes) -> None:
        self.body, self.requests = body, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                server.requests.append(self.path)
                found = self.path.endswith("/src/example.py")
                data = server.body if found else b"not found"
                self.send_response(200 if found else 404)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/R2MED/R2MED/{query2doc_examples.QUERY2DOC_EXAMPLES_COMMIT}/src/example.py"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/R2MED/R2MED/{query2doc_examples.QUERY2DOC_EXAMPLES_COMMIT}/src/example.py"


@pytest.fixture
def chat(chat_server):
    return chat_server


def run_query2doc(run_cli, tmp_path, chat, *extra, output="out"):
    return run_cli("run", "--plugin", "query2doc", "-o", f"llm={chat.url}#test-model", *extra, "--plugin", "bm25",
                   "--tasks", "sample", "--output", tmp_path / output, "--cache-dir", tmp_path / "cache", "--json")


def test_the_pinned_url_is_the_first_commits_example_py():
    assert query2doc_examples.QUERY2DOC_EXAMPLES_COMMIT.startswith("45cbac5") and len(query2doc_examples.QUERY2DOC_EXAMPLES_COMMIT) == 40
    assert query2doc_examples.QUERY2DOC_EXAMPLES_URL == ("https://raw.githubusercontent.com/R2MED/R2MED/"
                                              f"{query2doc_examples.QUERY2DOC_EXAMPLES_COMMIT}/src/example.py")


def test_examples_are_fetched_once_then_read_from_the_cache(evaluate, tmp_path, chat, monkeypatch):
    with FileServer(built_example_py()) as files:
        monkeypatch.setattr(query2doc_examples, "QUERY2DOC_EXAMPLES_URL", files.url)
        first = evaluate("query2doc", "bm25", llm=f"{chat.url}#test-model")
        assert first.display_name == "Query2Doc (test-model) + BM25"
        assert len(files.requests) == 1 and chat.count == len(QUERIES)
        for request in chat.requests:  # each prompt: the served examples, as the authors' template places them
            user = request.body["messages"][1]["content"]
            query = next(q["text"] for q in QUERIES if q["text"] in user)
            assert user == prompts.QUERY2DOC_OUTER_TEMPLATES["Stack-Medical"].format(
                EXAMPLE=BUILT["Stack-Medical"], TEXT="{TEXT}").format(TEXT=query)
        again = evaluate("query2doc", "bm25", llm=f"{chat.url}#test-model", output="again")
        assert again["sample"].ndcg_at_10 == first["sample"].ndcg_at_10
        assert len(files.requests) == 1  # the second run read the cached copy
    cached = list((tmp_path / "cache").rglob("example-*.py"))
    assert len(cached) == 1 and cached[0].read_bytes() == built_example_py()


def test_offline_is_one_line_naming_the_way_out(run_cli, tmp_path, chat, monkeypatch):
    monkeypatch.setattr(query2doc_examples, "QUERY2DOC_EXAMPLES_URL", closed_port_url())
    code, _, err = run_query2doc(run_cli, tmp_path, chat)
    assert code == 2 and "Traceback" not in err and chat.count == 0
    line = next(line for line in err.splitlines() if "cannot load" in line)
    assert "Query2Doc's few-shot examples (R2MED/R2MED@45cbac5 src/example.py)" in line
    assert "URLError" in line and "without network access pass -o examples=PATH" in line


def test_a_file_that_is_not_the_examples_is_refused_and_not_cached(tmp_path, monkeypatch):
    with FileServer(b"Example = {'Stack-Biology': 'only one'}\n") as files:
        with pytest.raises(prompts.Query2DocExamplesUnavailable, match="missing"):
            query2doc_examples.fetch_query2doc_examples(tmp_path, url=files.url)
        files.body = b"import os\nos.system('echo never run')\nExample = open('x').read()\n"
        with pytest.raises(prompts.Query2DocExamplesUnavailable, match="cannot evaluate"):
            query2doc_examples.fetch_query2doc_examples(tmp_path, url=files.url)
    assert not list(tmp_path.iterdir())


def test_examples_path_works_offline(run_cli, tmp_path, chat, monkeypatch):
    monkeypatch.setattr(query2doc_examples, "QUERY2DOC_EXAMPLES_URL", closed_port_url())
    local = tmp_path / "example.py"
    local.write_bytes(built_example_py())
    code, _, err = run_query2doc(run_cli, tmp_path, chat, "-o", f"examples={local}")
    assert code == 0, err
    assert all(BUILT["Stack-Medical"] in r.body["messages"][1]["content"] for r in chat.requests)
    code, _, err = run_query2doc(run_cli, tmp_path, chat, "-o", f"examples={tmp_path / 'absent.py'}", output="o2")
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
    example_tree = ast.parse(real_example_py(commit).read_text(encoding="utf-8"))
    (assign,) = [n for n in example_tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "Example"]
    example = ast.literal_eval(assign.value)
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
    with FileServer(real_example_py(commit).read_bytes()) as files:  # as fetched from GitHub
        fetched = query2doc_examples.fetch_query2doc_examples(tmp_path, url=files.url)
    for key in prompts.DATASET_KEYS:
        ours = prompts.build_prompt("query2doc", key, query, examples=fetched)
        assert ours.encode("utf-8") == expected[key].encode("utf-8"), key
        assert prompts.build_messages("query2doc", key, query, examples=fetched)[1]["content"] == expected[key]
    assert fetched == query2doc_examples.load_query2doc_examples(real_example_py(commit))


def test_the_package_does_not_contain_the_examples():
    example_tree = ast.parse(real_example_py("45cbac5").read_text(encoding="utf-8"))
    example = ast.literal_eval(example_tree.body[0].value)
    root = Path(prompts.__file__).resolve().parents[2]
    files = [p for folder in ("plugins", "r2med_tasks") for p in (root / folder).rglob("*") if p.is_file()
             and p.suffix in {".py", ".json", ".csv", ".md", ".txt", ".jsonl"}]
    snippets = [text.split("\n")[0][:80] for text in example.values()]
    for path in files:
        content = path.read_text(encoding="utf-8", errors="replace")
        assert not any(s in content for s in snippets), path
