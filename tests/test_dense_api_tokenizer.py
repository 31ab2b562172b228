"""``-o tokenizer=`` on the ``openai`` and ``voyage`` retrievers, offline: a local tokenizer.json
(the ``tokenizers`` library), a local Hugging Face tokenizer folder, or a tiktoken encoding name read
from TIKTOKEN_CACHE_DIR; one-line errors that say what to do; the published configuration's identity
unchanged when the option is left out. Requests go to the local embedding server, never the network."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from r2med_plugins.dense.api import OpenAIEncoder, VoyageEncoder
from r2med_tasks.errors import UserError

from test_dense_api import server  # noqa: E402,F401 - the local embedding server fixture, shared

ENCODERS = {"openai": OpenAIEncoder, "voyage": VoyageEncoder}
WORDS = "one two three four five six seven eight nine ten ,".split()


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    monkeypatch.setenv("VOYAGE_API_KEY", "pa-test-9876543210fedcba")


def word_tokenizer(path: Path, words=WORDS, texts=()) -> Path:
    """A WordLevel tokenizer.json (whitespace and punctuation split, decode joins with spaces): one
    token per word, so a cut is easy to see. ``texts``: words to learn besides ``words``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(words), *texts], trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def byte_bpe_tokenizer(path: Path) -> Path:
    """A byte-level BPE tokenizer.json that adds [CLS]/[SEP] and was saved truncating to 3 tokens
    (which neither transformers nor the API clients apply to a plain encode)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["the patient presented with fever and cough", "héllo wörld\nnew line"], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")])
    tok.enable_truncation(3)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


# -- a local tokenizer.json --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["openai", "voyage"])
def test_a_tokenizer_json_cuts_texts_to_its_own_tokens(name, server, tmp_path):
    path = word_tokenizer(tmp_path / "tok" / "tokenizer.json")
    enc = ENCODERS[name](base_url=server.url, tokenizer=str(path), max_tokens=4, sleep=lambda s: None)
    enc.encode(["one two three four five six", "one  two\nthree", "seven, eight nine ten eleven"], kind="query")
    # 4 WordLevel tokens (',' is one); a text that fits is sent as it is
    assert server.inputs() == [['"one two three four"', '"one  two three"', '"seven , eight nine"']]


@pytest.mark.model  # imports transformers
def test_a_tokenizer_json_cuts_as_transformers_cuts_with_the_same_file(server, tmp_path):
    """Special tokens added and kept, as ``tok(text)["input_ids"]`` and ``tok.decode`` (the published
    Voyage cut) do; the file's own truncation setting is not applied; a folder loads with
    AutoTokenizer (local files only) and cuts the same."""
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from r2med_plugins.dense.api import published_input

    file = byte_bpe_tokenizer(tmp_path / "tokenizer.json")
    folder = tmp_path / "hf"
    PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(str(file)), unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]").save_pretrained(str(folder))
    texts = ["the patient héllo\nwörld with fever", "cough", "new line and new line and new line"]
    reference = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    expected = [published_input(t, reference, 6) for t in texts]
    assert expected[0].startswith('"[CLS]the patient') and expected[1] == '"cough"'  # fits: sent as it is
    for tokenizer in (file, folder):
        VoyageEncoder(base_url=server.url, tokenizer=str(tokenizer), max_tokens=6).encode(texts, kind="document")
    assert server.inputs() == [expected, expected]


def test_the_option_reaches_the_retriever_end_to_end(server, evaluate, tmp_path, monkeypatch):
    """`r2med-run --plugin openai -o tokenizer=FILE`: every query and document is cut with that
    file's tokens (the token limit lowered to 3 here so that every text is cut)."""
    from tokenizers import Tokenizer

    from r2med_plugins.dense import models
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    monkeypatch.setitem(models.DENSE_MODELS, "openai",
                        replace(models.DENSE_MODELS["openai"], query_max_length=3, doc_max_length=3))
    data = SAMPLE_TASK.load()
    texts = [*data.corpus.texts, *(q.text for q in data.queries)]
    path = word_tokenizer(tmp_path / "tokenizer.json", texts=texts[::2])
    tok = Tokenizer.from_file(str(path))

    def cut(text):  # as transformers decodes: special tokens ([UNK] of the words not learnt) kept
        ids = tok.encode(text).ids
        return json.dumps((tok.decode(ids[:3], skip_special_tokens=False) if len(ids) > 3 else text).replace("\n", " "))

    outcome = evaluate("openai", base_url=server.url, tokenizer=str(path))
    assert outcome["sample"].status == "computed"
    sent = [s for batch in server.inputs() for s in batch]
    assert sorted(sent) == sorted(cut(t) for t in texts)
    assert all(len(tok.encode(json.loads(s)).ids) == 3 for s in sent)


# -- identity ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["openai", "voyage"])
def test_the_published_configuration_keeps_its_identity(name, plugins, tmp_path):
    """Without ``tokenizer`` a run is the configuration these retrievers had before the option
    existed: same configuration, no experiment, same results folder and embedding cache keys."""
    import r2med_tasks as r2med
    from conftest import dry_run_plan

    from r2med_tasks.tasks.specs import SAMPLE_TASK

    pipeline = r2med.pipeline(name)
    assert pipeline.config() == {"top_k": 100, "retriever": {"component": name, "plugin": "r2med",
                                                             "options": {"drop_identical_ids": True}}}
    assert pipeline.variant() == {}
    plan = dry_run_plan(f"r2med-run --plugin {name} --tasks sample", tmp_path / "out")
    assert plan["experiment"] is None
    assert plan["results_dirs"] == [str(tmp_path / "out" / "local-data" / f"r2med__{name}" / "unpinned")]
    identity = r2med.pipeline(name, cache=False)
    from r2med_tasks.api import registry
    from r2med_tasks.running.pipelines import instantiate

    instantiate(identity, registry())
    model = identity.retriever.instance.model
    assert "tokenizer" not in model.document_identity(SAMPLE_TASK)
    assert "tokenizer" not in model.query_identity(SAMPLE_TASK, "query")


@pytest.mark.parametrize("name", ["openai", "voyage"])
def test_a_tokenizer_file_is_identified_by_its_content_and_a_name_by_its_name(name, plugins, tmp_path):
    import r2med_tasks as r2med
    from r2med_tasks.api import registry
    from r2med_tasks.running.pipelines import instantiate
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    path = word_tokenizer(tmp_path / "tokenizer.json")

    def identities(value):
        pipeline = r2med.pipeline(name, tokenizer=value, cache=False)
        instantiate(pipeline, registry())
        model = pipeline.retriever.instance.model
        return (pipeline.variant()["tokenizer"], pipeline.config()["retriever"]["options"]["tokenizer"],
                model.document_identity(SAMPLE_TASK)["tokenizer"])

    first = identities(str(path))
    assert first[0] == first[1] == first[2]
    assert first[0].startswith("tokenizer.json@sha256:") and str(tmp_path) not in first[0]
    word_tokenizer(path, words=[*WORDS, "eleven"])  # the file edited: another run, other embeddings
    second = identities(str(path))
    assert second[0].startswith("tokenizer.json@sha256:") and second[0] != first[0]
    assert identities("o200k_base") == ("o200k_base",) * 3


def test_openai_with_its_published_encoding_named_reuses_the_defaults_embeddings(plugins):
    import r2med_tasks as r2med
    from r2med_tasks.api import registry
    from r2med_tasks.running.pipelines import instantiate
    from r2med_tasks.tasks.specs import SAMPLE_TASK

    named, default = r2med.pipeline("openai", tokenizer="cl100k_base"), r2med.pipeline("openai")
    for pipeline in (named, default):
        instantiate(pipeline, registry())
    assert named.variant() == {"tokenizer": "cl100k_base"}  # what the user asked for, in the run's name
    assert (named.retriever.instance.model.document_identity(SAMPLE_TASK)
            == default.retriever.instance.model.document_identity(SAMPLE_TASK))


# -- errors: one line, exit code 2, before any request ----------------------------------------
@pytest.mark.parametrize("name", ["openai", "voyage"])
def test_a_missing_tokenizer_file_is_one_line_before_any_request(name, run_cli, server, tmp_path):
    code, out, err = run_cli("run", "--plugin", name, "-o", f"base_url={server.url}", "-o",
                             f"tokenizer={tmp_path / 'nothing' / 'tokenizer.json'}", "--tasks", "sample",
                             "--output", tmp_path / "out")
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [
        f"Error: -o {name}.tokenizer={tmp_path / 'nothing' / 'tokenizer.json'}: no such file or folder; give a local "
        "tokenizer.json or a folder holding a Hugging Face tokenizer, or a tiktoken encoding name such as cl100k_base"]
    assert server.requests == []
    with pytest.raises(UserError, match="no such file or folder") as e:  # the Python API, on first use
        ENCODERS[name](base_url=server.url, tokenizer="missing/tokenizer.json").encode(["x"], kind="query")
    assert "\n" not in str(e.value) and server.requests == []


def test_an_empty_tokenizer_option_is_refused(run_cli, tmp_path):
    code, _, err = run_cli("run", "--plugin", "openai", "-o", "tokenizer=", "--tasks", "sample", "--dry-run")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "leave the option out for the published tokenizer" in err


def test_an_unreadable_tokenizer_json_says_so(server, tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": "not a tokenizer"}')
    with pytest.raises(UserError, match=r"tokenizer=.*tokenizer\.json: not a tokenizer\.json the tokenizers library "
                                        "can read") as e:
        OpenAIEncoder(base_url=server.url, tokenizer=str(bad)).encode(["x"], kind="query")
    assert "\n" not in str(e.value) and server.requests == []


@pytest.mark.model  # imports transformers
def test_a_folder_without_a_tokenizer_says_what_it_needs(server, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"tokenizer=.*empty: the folder holds no Hugging Face tokenizer AutoTokenizer "
                                        r"can load \(.*\); it needs the tokenizer's files") as e:
        VoyageEncoder(base_url=server.url, tokenizer=str(tmp_path / "empty")).encode(["x"], kind="query")
    assert "\n" not in str(e.value) and server.requests == []


def test_missing_tiktoken_names_the_extra(server, monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(UserError, match=r"tokenizer=cl100k_base needs tiktoken.*pip install 'r2med\[api\]'.*"
                                        "TIKTOKEN_CACHE_DIR.*tokenizer=PATH") as e:
        OpenAIEncoder(base_url=server.url, tokenizer="cl100k_base").encode(["x"], kind="query")
    assert "\n" not in str(e.value) and server.requests == []


@pytest.fixture
def offline_tiktoken(monkeypatch, tmp_path):
    """Real tiktoken with an empty TIKTOKEN_CACHE_DIR and no network: every download attempt is
    recorded and fails as an offline machine's does. Returns (cache folder, attempted URLs)."""
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken.load
    import tiktoken.registry

    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})  # nothing loaded before in this process
    attempts = []

    def read_file(blobpath):
        attempts.append(blobpath)
        raise ConnectionError(f"Failed to resolve host of {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", read_file)
    return cache, attempts


@pytest.mark.parametrize("tokenizer", [None, "cl100k_base"])
def test_an_encoding_missing_from_tiktokens_cache_says_what_to_do(tokenizer, offline_tiktoken, server):
    cache, attempts = offline_tiktoken
    with pytest.raises(UserError) as e:
        OpenAIEncoder(base_url=server.url, tokenizer=tokenizer).encode(["x"], kind="query")
    message = str(e.value)
    assert "\n" not in message and server.requests == [] and len(attempts) == 1
    assert message.startswith("cannot load tiktoken's cl100k_base encoding (ConnectionError: ")
    assert f"its cache ({cache}) does not hold it" in message
    assert ("set TIKTOKEN_CACHE_DIR to a folder holding tiktoken's cl100k_base file (fill one on a machine with "
            "network access: TIKTOKEN_CACHE_DIR=DIR python -c \"import tiktoken; tiktoken.get_encoding('cl100k_base')\""
            ", then copy DIR here), or pass tokenizer=PATH, a local tokenizer.json or a folder holding a Hugging Face "
            "tokenizer") in message


def test_an_unknown_encoding_name_lists_the_known_ones(offline_tiktoken, server):
    with pytest.raises(UserError, match=r"tokenizer=cl100k: not a file or folder, nor a tiktoken encoding "
                                        r"\(.*cl100k_base.*\)"):
        VoyageEncoder(base_url=server.url, tokenizer="cl100k").encode(["x"], kind="query")
    assert offline_tiktoken[1] == []


@pytest.mark.parametrize("name", ["openai", "voyage"])
def test_the_cli_reports_an_unavailable_encoding_in_one_line(name, offline_tiktoken, run_cli, server, tmp_path):
    code, _, err = run_cli("run", "--plugin", name, "-o", f"base_url={server.url}", "-o", "tokenizer=o200k_base",
                           "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache")
    assert code == 2 and "Traceback" not in err and server.requests == []
    (line,) = err.strip().splitlines()
    assert line.startswith("Error: cannot load tiktoken's o200k_base encoding") and "TIKTOKEN_CACHE_DIR" in line


def test_an_encoding_in_tiktokens_cache_works_offline(offline_tiktoken, server, monkeypatch):
    """What TIKTOKEN_CACHE_DIR holds is read without a request (here a byte-level stand-in for the
    real file, whose published hash it cannot have, so the hash check is skipped)."""
    import base64

    import tiktoken.load

    cache, attempts = offline_tiktoken
    with pytest.raises(UserError):
        OpenAIEncoder(base_url=server.url).tokenizer()
    (url,) = attempts  # where tiktoken would download cl100k_base from: its cache file is named by that
    ranks = "".join(f"{base64.b64encode(bytes([i])).decode()} {i}\n" for i in range(256))
    (cache / hashlib.sha1(url.encode()).hexdigest()).write_text(ranks)
    monkeypatch.setattr(tiktoken.load, "check_hash", lambda data, expected: True)
    for tokenizer in (None, "cl100k_base"):
        OpenAIEncoder(base_url=server.url, tokenizer=tokenizer, max_tokens=5).encode(["abcdefgh", "abc"], kind="query")
    assert server.inputs() == [['"abcde"', '"abc"']] * 2 and len(attempts) == 1


# -- lazy imports --------------------------------------------------------------------------------
@pytest.mark.process  # what a fresh interpreter imports
def test_no_tokenizer_library_is_imported_until_a_text_is_cut(tmp_path):
    path = word_tokenizer(tmp_path / "tokenizer.json")
    code = ("import sys, r2med_plugins.dense, r2med_plugins.dense.api as api\n"
            "from r2med_tasks.api import registry\n"
            "from r2med_tasks.running.pipelines import instantiate\n"
            "import r2med_tasks as r2med\n"
            f"p = r2med.pipeline('openai', tokenizer={str(path)!r})\n"
            "instantiate(p, registry())\n"
            "print(sorted(m for m in ('tiktoken', 'tokenizers', 'transformers') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
