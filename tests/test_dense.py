"""Dense retrieval machinery: exact chunked search, the corpus-embedding cache (reuse, resume,
sharing), identical-id dropping, and the transformers encoder's poolings, on a real small model."""

import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from r2med_plugins.dense.cache import EmbeddingCache
from r2med_plugins.dense.search import cosine_top_k

from conftest import SAMPLE, read_jsonl, read_ranking, write_jsonl


def brute_force(queries, docs, k):
    """Reference: full cosine matrix, stable descending sort."""
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    d = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    scores = q @ d.T
    return [[(int(i), float(row[i])) for i in np.argsort(-row, kind="stable")[:k]] for row in scores]


def chunked(docs, size):
    return [(start, docs[start:start + size]) for start in range(0, len(docs), size)]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
@pytest.mark.parametrize("k", [1, 10, 300])
def test_chunked_search_equals_brute_force(chunk, k):
    rng = np.random.default_rng(chunk * 100 + k)
    docs = rng.normal(size=(257, 16)).astype(np.float32)
    docs[100:110] = docs[5]  # exact ties: the lower index must win
    queries = np.vstack([rng.normal(size=(5, 16)).astype(np.float32), docs[5:6]])
    ours = cosine_top_k(queries, chunked(docs, chunk), k)
    reference = brute_force(queries, docs, k)
    for got, want in zip(ours, reference):
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)


def test_cache_fills_resumes_and_is_shared(tmp_path):
    docs = np.arange(50 * 3, dtype=np.float32).reshape(50, 3)
    calls = []

    def encode(start, stop):
        calls.append((start, stop))
        if len(calls) == 3 and crash[0]:
            raise RuntimeError("killed")
        return docs[start:stop]

    crash = [True]
    cache = EmbeddingCache({"model": "m"}, 50, 12, root=tmp_path)
    with pytest.raises(RuntimeError):
        cache.fill(encode)
    assert cache.missing() == [2, 3, 4]  # two chunks finished before the crash
    crash[0] = False
    calls.clear()
    assert cache.fill(encode) == 3 and calls == [(24, 36), (36, 48), (48, 50)]
    assert np.array_equal(np.concatenate([c for _, c in cache.chunks()]), docs)
    assert EmbeddingCache({"model": "m"}, 50, 12, root=tmp_path).fill(encode) == 0
    assert EmbeddingCache({"model": "other"}, 50, 12, root=tmp_path).folder != cache.folder

    # two runs filling one folder at once end with the same, complete content
    shared = [EmbeddingCache({"model": "s"}, 50, 5, root=tmp_path) for _ in range(2)]
    threads = [threading.Thread(target=c.fill, args=(lambda a, b: docs[a:b],)) for c in shared]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert np.array_equal(np.concatenate([c for _, c in shared[0].chunks()]), docs)
    assert not list(shared[0].folder.glob("*.tmp"))


@pytest.fixture
def count_encoded(monkeypatch):
    """Counts texts the sentence-transformers encoder receives, by prompt kind."""
    from r2med_plugins.local_models import SentenceTransformerEncoder

    counts = {"texts": 0, "calls": 0, "fail_after": None}
    original = SentenceTransformerEncoder.encode

    def encode(self, texts, prompt):
        counts["calls"] += 1
        if counts["fail_after"] is not None and counts["calls"] > counts["fail_after"]:
            raise RuntimeError("killed mid-corpus")
        counts["texts"] += len(texts)
        return original(self, texts, prompt)

    monkeypatch.setattr(SentenceTransformerEncoder, "encode", encode)
    return counts


def one_dir(dirs) -> Path:
    """The one results folder of a run (a RunOutcome's ``results_dirs``)."""
    assert len(dirs) == 1, dirs
    return Path(dirs[0])


def saved_run(results, task="R2MEDSampleRetrieval"):
    """A results folder's run, each query's documents best first."""
    return read_ranking(one_dir(results.results_dirs) / f"{task}.trec")


def test_warm_run_encodes_nothing_and_changed_queries_only_those(small_model_path, evaluate, count_encoded):
    n_docs = len(read_jsonl(SAMPLE / "corpus.jsonl"))
    first = evaluate("st", model=str(small_model_path), output="a")
    assert count_encoded["texts"] == n_docs + 10
    count_encoded["texts"] = 0
    second = evaluate("st", model=str(small_model_path), output="b")
    assert count_encoded["texts"] == 0  # corpus and queries read back
    prompted = evaluate("st", model=str(small_model_path), output="p", query_prompt="query: ")
    assert count_encoded["texts"] == 10  # another query prompt: the queries only, documents read back
    assert saved_run(prompted) != saved_run(first)
    count_encoded["texts"] = 0
    no_cache = evaluate("st", model=str(small_model_path), output="c", cache=False)
    assert count_encoded["texts"] == n_docs + 10
    for run in (second, no_cache):
        assert saved_run(run) == saved_run(first)
        assert run["R2MEDSampleRetrieval"].ndcg_at_10 == first["R2MEDSampleRetrieval"].ndcg_at_10


def test_damaged_query_embeddings_are_encoded_again(small_model_path, evaluate, tmp_path, count_encoded):
    first = evaluate("st", model=str(small_model_path), output="a")
    stored = list((tmp_path / "cache" / "query-embeddings").glob("*/*.npy"))
    assert len(stored) == 1
    for damage in (b"not numpy", None):
        if damage is None:  # a readable file of the wrong shape
            np.save(stored[0], np.zeros((3, 384), dtype=np.float32))
        else:
            stored[0].write_bytes(damage)
        count_encoded["texts"] = 0
        again = evaluate("st", model=str(small_model_path), output="b", overwrite=True)
        assert count_encoded["texts"] == 10
        assert saved_run(again) == saved_run(first)


@pytest.mark.process  # what a fresh interpreter imports
def test_fully_warm_run_imports_no_torch(small_model_path, evaluate, tmp_path):
    """A run whose corpus and query embeddings are all cached loads no model library (a fresh process)."""
    import subprocess
    import sys

    evaluate("st", model=str(small_model_path), output="cold")
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('HEAVY', sorted(m for m in ('torch', 'transformers', "
             "'sentence_transformers') if m in sys.modules)))\n"
             "from r2med_tasks.cli import run_main\n"
             "sys.argv[0] = 'r2med-run'\n"
             "run_main()\n")
    proc = subprocess.run([sys.executable, "-c", probe, "--plugin", "st", "-o", f"model={small_model_path}",
                           "--tasks", "sample", "--output", str(tmp_path / "warm"), "--cache-dir",
                           str(tmp_path / "cache"), "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY []"
    assert list((tmp_path / "warm").rglob("R2MEDSampleRetrieval.trec"))


def test_killed_encoding_resumes_from_last_chunk(small_model_path, evaluate, tmp_path, count_encoded):
    from r2med_tasks.errors import PluginError

    n_docs = len(read_jsonl(SAMPLE / "corpus.jsonl"))
    count_encoded["fail_after"] = 2  # two 10-document chunks, then the run dies
    with pytest.raises(PluginError, match="killed mid-corpus"):
        evaluate("st", model=str(small_model_path), chunk_size=10)
    chunks = list((tmp_path / "cache" / "embeddings").glob("*/chunk-*.npy"))
    assert len(chunks) == 2
    count_encoded.update(fail_after=None, texts=0)
    evaluate("st", model=str(small_model_path), chunk_size=10)
    assert count_encoded["texts"] == (n_docs - 20) + 10  # the rest of the corpus, then the queries


def test_identical_ids_dropped_only_when_asked(small_model_path, evaluate, tmp_path):
    """IIYi-Clinical shares one id space for queries and documents; R2MED's evaluator dropped a
    document whose id equals the query id."""
    data = tmp_path / "data" / "IIYi-Clinical"
    data.mkdir(parents=True)
    corpus = read_jsonl(SAMPLE / "corpus.jsonl")
    queries = read_jsonl(SAMPLE / "query.jsonl")
    corpus.append({"id": "q01", "text": queries[0]["text"]})  # the query itself, as a document
    write_jsonl(data / "corpus.jsonl", corpus)
    write_jsonl(data / "query.jsonl", queries)
    (data / "qrels.jsonl").write_text((SAMPLE / "qrels.jsonl").read_text())

    def run(output, **options):
        results = evaluate("st", model=str(small_model_path), top_k=5, tasks="IIYi-Clinical",
                           data_dir=tmp_path / "data", output=output, **options)
        return saved_run(results, "R2MEDIIYiClinicalRetrieval")

    kept_run, dropped_run = run("kept"), run("dropped", drop_identical_ids=True)
    assert kept_run["q01"][0][0] == "q01"
    assert "q01" not in [d for d, _ in dropped_run["q01"]] and len(dropped_run["q01"]) == 5
    assert [d for d, _ in dropped_run["q01"]][:4] == [d for d, _ in kept_run["q01"] if d != "q01"]


# --- the transformers encoder, on all-MiniLM-L6-v2's real weights -------------------------------

@pytest.fixture
def minilm_config(model_path):
    from r2med_plugins.dense.config import DenseConfig

    def make(**kw):
        base = dict(name="t", hf_model=str(model_path), backend="transformers", pooling="mean", normalize=True,
                    query_max_length=256, doc_max_length=256, dtype="fp32", batch_size=4)
        return DenseConfig(**{**base, **kw})

    return make


TEXTS = ["Metformin lowers hepatic glucose output.", "A 54-year-old man with fatigue, hyperpigmentation "
         "and hyponatraemia.", "IL-6", "β-lactam antibiotics inhibit cell-wall synthesis in bacteria."]


def test_mean_pooling_equals_sentence_transformers(minilm_config, model_path):
    from sentence_transformers import SentenceTransformer

    from r2med_plugins.dense.encoders import TransformerEncoder

    ours = TransformerEncoder(minilm_config(), devices=["cpu"], batch_size=3, dtype="fp32").encode_documents(TEXTS)
    st = SentenceTransformer(str(model_path), device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert ours == pytest.approx(st, abs=1e-5)


@pytest.mark.model  # torch
def test_last_token_pooling_with_either_padding():
    import torch

    from r2med_plugins.dense.encoders import pool

    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    left = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    assert pool(hidden, right, "last").tolist() == [hidden[0, 1].tolist(), hidden[1, 3].tolist()]
    assert pool(hidden, left, "last").tolist() == [hidden[0, 3].tolist(), hidden[1, 3].tolist()]
    assert pool(hidden, right, "mean")[0].tolist() == hidden[0, :2].mean(dim=0).tolist()
    assert pool(hidden, right, "cls").tolist() == hidden[:, 0].tolist()


@pytest.mark.parametrize("pooling, padding_side", [("cls", "right"), ("last", "right")])
def test_cls_and_last_token_pooling(minilm_config, model_path, pooling, padding_side):
    import torch
    from transformers import AutoModel, AutoTokenizer

    from r2med_plugins.dense.encoders import TransformerEncoder

    config = minilm_config(pooling=pooling, normalize=False, padding_side=padding_side)
    ours = TransformerEncoder(config, devices=["cpu"], batch_size=4, dtype="fp32").encode_queries(TEXTS)
    tokenizer, model = AutoTokenizer.from_pretrained(str(model_path)), AutoModel.from_pretrained(str(model_path))
    for text, row in zip(TEXTS, ours):  # one text at a time: no padding at all
        with torch.inference_mode():
            hidden = model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0]
        assert row == pytest.approx((hidden[0] if pooling == "cls" else hidden[-1]).numpy(), abs=1e-4)


def test_bmr_recipe_appends_eos_and_pads_left(minilm_config, model_path):
    """BMRetriever: truncate to max-1 tokens, append EOS, pad left, take the last token."""
    from transformers import AutoTokenizer

    from r2med_plugins.dense.encoders import TransformerEncoder

    config = minilm_config(pooling="last-bmr", normalize=False, append_eos=True, padding_side="left", query_max_length=10)
    encoder = TransformerEncoder(config, devices=["cpu"], batch_size=4, dtype="fp32")
    tokenizer, _ = encoder._load(str(model_path))
    tokenizer.eos_token = "[SEP]"  # BERT's tokenizer has none; decoder models (BMRetriever) do
    assert tokenizer.padding_side == "left"
    batch = encoder._tokenize(tokenizer, TEXTS, 10, as_pair=False)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert ids.shape[1] == 10 and (ids[:, -1] == tokenizer.eos_token_id).all()
    plain = AutoTokenizer.from_pretrained(str(model_path))
    for text, row, row_mask in zip(TEXTS, ids.tolist(), mask.tolist()):
        expected = plain(text, truncation=True, max_length=9)["input_ids"] + [tokenizer.eos_token_id]
        assert row[10 - len(expected):] == expected and sum(row_mask) == len(expected)
        assert row_mask == [0] * (10 - len(expected)) + [1] * len(expected)  # padded on the left


def test_pair_tokenization_for_medcpt_documents(minilm_config, model_path):
    from r2med_plugins.dense.encoders import TransformerEncoder

    encoder = TransformerEncoder(minilm_config(doc_as_pair=True, pooling="cls"), devices=["cpu"], batch_size=4, dtype="fp32")
    tokenizer, _ = encoder._load(str(model_path))
    ids = encoder._tokenize(tokenizer, ["IL-6"], 512, as_pair=True)["input_ids"][0].tolist()
    assert ids[:2] == [tokenizer.cls_token_id, tokenizer.sep_token_id]  # ("", text): an empty first segment


def test_replicas_give_the_same_embeddings(model_path):
    from r2med_plugins.local_models import SentenceTransformerEncoder

    one = SentenceTransformerEncoder(str(model_path), devices=["cpu"], batch_size=2).encode(TEXTS, "")
    two = SentenceTransformerEncoder(str(model_path), devices=["cpu", "cpu"], batch_size=2).encode(TEXTS, "")
    assert one == pytest.approx(two, abs=1e-6)


def test_cuda_device_without_cuda_is_a_clear_error(run_cli, model_path, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, err = run_cli("run", "--plugin", "st", "-o", f"model={model_path}", "-o", "device=cuda:0",
                           "--tasks", "sample", "--output", tmp_path)
    assert code == 2 and "CUDA is not available here" in err


# --- the published configurations, wired without downloading any model -------------------------

class Recorder:
    """Stands in for an encoder: records what it is asked to encode."""

    def __init__(self):
        self.calls = []

    def _out(self, texts):
        return np.ones((len(texts), 4), dtype=np.float32)

    def encode_queries(self, texts):
        self.calls.append(("query", list(texts)))
        return self._out(texts)

    def encode_documents(self, texts):
        self.calls.append(("document", list(texts)))
        return self._out(texts)

    def encode(self, texts, *args, **kwargs):
        self.calls.append((args, kwargs, list(texts)))
        return self._out(texts)


@pytest.mark.parametrize("name", ["e5", "bmr-7b", "contriever", "bge"])
def test_transformers_backends_prepend_the_task_instruction(name):
    from r2med_plugins.dense.models import DENSE_MODELS
    from r2med_plugins.dense.published import PublishedModel
    from r2med_tasks.tasks.specs import R2MED_TASKS

    config = DENSE_MODELS[name]
    model = PublishedModel(config, device="cpu", batch_size=0, dtype=config.dtype)
    model._encoder = recorder = Recorder()
    for task in R2MED_TASKS:
        model.encode_queries(["q"], task)
        model.encode_documents(["d"], task)
    expected = []
    for task in R2MED_TASKS:
        expected += [("query", [config.query_instructions.get(task.key, config.query_instructions.get("*", "")) + "q"]),
                     ("document", [config.doc_instructions.get(task.key, config.doc_instructions.get("*", "")) + "d"])]
    assert recorder.calls == expected


def test_instruction_backends_pass_the_instruction_apart():
    """NV-Embed and GritLM take the instruction as an argument (excluded from pooling)."""
    from r2med_plugins.dense.models import DENSE_MODELS
    from r2med_plugins.dense.published import PublishedModel
    from r2med_tasks.tasks.specs import R2MED_TASKS

    biology = R2MED_TASKS[0]
    for name in ("nvembed", "grit"):
        config = DENSE_MODELS[name]
        model = PublishedModel(config, device="cpu", batch_size=0, dtype=config.dtype)
        model._encoder = recorder = Recorder()
        model.encode_queries(["q"], biology)
        model.encode_documents(["d"], biology)
        assert recorder.calls == [((config.query_instructions["Stack-Biology"], config.query_max_length), {}, ["q"]),
                                  ((config.doc_instruction("Stack-Biology"), config.doc_max_length), {}, ["d"])]


def test_medcpt_uses_two_encoders_unless_reproducing_the_published_bug():
    from r2med_plugins.dense.encoders import TransformerEncoder
    from r2med_plugins.dense.models import DENSE_MODELS

    config = DENSE_MODELS["medcpt"]
    proper = TransformerEncoder(config, devices=["cpu"], batch_size=1, dtype="fp32")
    assert (proper.query_model, proper.doc_model) == ("ncbi/MedCPT-Query-Encoder", "ncbi/MedCPT-Article-Encoder")
    bug = TransformerEncoder(config, devices=["cpu"], batch_size=1, dtype="fp32", query_model=config.hf_doc_model)
    assert bug.query_model == bug.doc_model == "ncbi/MedCPT-Article-Encoder"


def test_published_retriever_runs_on_local_weights(small_model_path, evaluate, tmp_path):
    """`-o model=PATH` points a published configuration at local weights (here one layer of MiniLM
    under contriever's recipe: mean pooling, cosine), which also gives the run its own folder.
    (Contriever's recipe cuts texts to 512 tokens: so does sentence-transformers, from the
    tokenizer's ``model_max_length``, on this copy.)"""
    weights = shutil.copytree(small_model_path, tmp_path / "weights")
    settings = json.loads((weights / "tokenizer_config.json").read_text())
    (weights / "tokenizer_config.json").write_text(json.dumps({**settings, "model_max_length": 512}))
    contriever = evaluate("contriever", model=str(weights))
    assert contriever.model_name == "r2med/contriever" and contriever.revision.startswith("local-")
    assert one_dir(contriever.results_dirs).parent.name != "experiments"  # other weights: another revision, not an option variant
    st = evaluate("st", model=str(weights), output="st")
    assert contriever["R2MEDSampleRetrieval"].ndcg_at_10 == pytest.approx(st["R2MEDSampleRetrieval"].ndcg_at_10,
                                                                          abs=1e-5)


def test_changed_local_weights_never_reuse_cached_embeddings(small_model_path, evaluate, tmp_path):
    """The same folder with other weights in it: corpus and queries are encoded again (new cache
    entries), and the run equals one on those weights from an empty cache."""
    import shutil

    import torch
    from sentence_transformers import SentenceTransformer

    import r2med_tasks as r2med

    weights = tmp_path / "weights"
    shutil.copytree(small_model_path, weights)
    first = evaluate("contriever", model=str(weights), output="a")
    model = SentenceTransformer(str(weights), device="cpu")
    with torch.no_grad():
        table = model[0].auto_model.embeddings.word_embeddings.weight
        table.add_(torch.randn(table.shape, generator=torch.Generator().manual_seed(0)) * 0.5)
    model.save(str(weights))
    changed = evaluate("contriever", model=str(weights), output="b")
    assert changed.revision != first.revision
    for kind in ("embeddings", "query-embeddings"):
        assert len([p for p in (tmp_path / "cache" / kind).iterdir() if p.is_dir()]) == 2, kind
    fresh = r2med.evaluate(r2med.pipeline("contriever", model=str(weights)), tasks="sample",
                           output=tmp_path / "c", cache_dir=tmp_path / "fresh-cache")
    assert saved_run(changed) == saved_run(fresh) != saved_run(first)


def test_every_published_model_is_listed_with_its_reference(run_cli):
    from r2med_plugins.dense.models import DENSE_MODELS

    rows = {r["name"]: r for r in json.loads(run_cli("list", "retrievers", "--json")[1])}
    for name, config in DENSE_MODELS.items():
        assert rows[name]["reference"] == config.reference and rows[name]["reference"].startswith("https://")
    assert rows["nvembed"]["aliases"] == ["nv"]


def test_device_flag_reaches_model_components(plugins):
    from r2med_tasks.errors import UserError
    from r2med_tasks.running.pipelines import build_pipeline
    from r2med_tasks.running.registry import build_registry

    reg = build_registry(plugins)
    pipeline = build_pipeline(reg, ["nvembed"], [], device="cuda:0,cuda:1")
    assert pipeline.retriever.options["device"] == "cuda:0,cuda:1"
    assert build_pipeline(reg, ["nvembed"], ["device=cpu"], device="cuda:1").retriever.options["device"] == "cpu"
    with pytest.raises(UserError, match="--device cuda: no selected component runs on a device"):
        build_pipeline(reg, ["bm25"], [], device="cuda")


def test_device_flag_reaches_the_members_a_composite_is_given(plugins):
    """``--device`` goes to the members ``-o members=`` names, not to the composite's default ones
    (hybrid's default members are bm25 and nvembed: a run of bm25 + st once failed on nvembed)."""
    from r2med_tasks.running.pipelines import build_pipeline
    from r2med_tasks.running.registry import build_registry

    reg = build_registry(plugins)
    stage = build_pipeline(reg, ["hybrid"], ["members=bm25,st"], device="cpu").retriever
    assert stage.member_options == {"st": ["device=cpu"]}
    explicit = build_pipeline(reg, ["hybrid"], ["members=bm25,st", "st.device=cuda:1"], device="cpu").retriever
    assert explicit.member_options == {"st": ["device=cpu", "device=cuda:1"]}  # the later one, the user's, applies


def test_replicas_stop_after_their_current_batch_when_one_fails():
    """An error (or Ctrl-C) in one replica ends the others after the batch they are on, so a run
    stops promptly instead of encoding the rest of the chunk first."""
    import time

    from r2med_plugins.local_models import run_batches

    done = {"ok": 0}
    lock = threading.Lock()
    encoded_one = threading.Event()

    def encode(replica, items):
        if replica == "bad":
            encoded_one.wait(30)  # fails once the good replica has encoded a batch, however loaded the machine
            raise RuntimeError("out of memory")
        time.sleep(0.02)
        with lock:
            done["ok"] += 1
        encoded_one.set()
        return np.zeros((len(items), 2), dtype=np.float32)

    texts = [f"text {i}" for i in range(400)]
    with pytest.raises(RuntimeError, match="out of memory"):
        run_batches(texts, 2, ["bad", "good"], encode)  # 200 batches, 100 for the good replica
    assert 1 <= done["ok"] < 20
