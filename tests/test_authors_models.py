"""Model settings of the published runs, as the authors' code ran them (issue 14, items 3, 4, 5, 7):
RankLLaMA's 1024-token pairs, bge-reranker and monoBERT in fp32, MedCPT's queries through the Article
encoder, and each tokenizer's own padding side. Expectations come from the authors' procedure,
computed here; where a check reads the authors' source it uses the optional copy under
``../shared/reference/r2med-repo/`` (not part of this repository) and skips when it is absent."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from r2med_tasks.running.registry import build_registry

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "r2med-repo"
FIRST = REFERENCE / "45cbac5" / "src"
TEXTS = ["Metformin lowers hepatic glucose output.", "A 54-year-old man with fatigue, hyperpigmentation "
         "and hyponatraemia.", "IL-6", "β-lactam antibiotics inhibit cell-wall synthesis in bacteria."]


def authors_source(name: str) -> ast.Module:
    path = FIRST / name
    if not path.is_file():
        pytest.skip(f"optional material {path} is absent")
    return ast.parse(path.read_text(encoding="utf-8"))


def option_defaults(plugins, token: str) -> dict:
    spec = build_registry(plugins).component(token).spec
    return {name: field.default for name, field in spec.options.model_fields.items()}


def options_of(plugins, token: str, **values):
    """The options instance a component's factory gets: its defaults, ``values`` over them."""
    return build_registry(plugins).component(token).spec.options_of(values)


# -- item 3: RankLLaMA at 1024 tokens -----------------------------------------------------------------

def authors_max_length(reranker_name: str) -> int:
    """Evaluate the ``max_length=`` argument of 45cbac5's RerankerModel(...) call for one name."""
    tree = authors_source("eval_reranker.py")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "RerankerModel"]
    (expr,) = [k.value for c in calls for k in c.keywords if k.arg == "max_length"]
    return eval(compile(ast.Expression(expr), "max_length", "eval"), {}, {"reranker_name": reranker_name})


def test_the_published_script_selects_1024_tokens_for_rankllama():
    tree = authors_source("eval_reranker.py")
    names = next(ast.literal_eval(n.value) for n in tree.body
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "reranker_names")
    assert "llama" in names  # the condition's name is one the script loops over: the branch is taken
    assert {name: authors_max_length(name) for name in names} == {"mono": 512, "bge": 512, "llama": 1024}


def test_pair_reranker_defaults_are_the_published_ones(plugins):
    rankllama = option_defaults(plugins, "reranker:rankllama")
    assert (rankllama["max_length"], rankllama["dtype"]) == (1024, "fp16")
    for name in ("bge-reranker", "monobert"):
        defaults = option_defaults(plugins, f"reranker:{name}")
        assert (defaults["max_length"], defaults["dtype"]) == (512, "fp32")


def test_rankllama_feeds_the_pairs_the_authors_fed(plugins, model_path):
    """The authors tokenized each pair alone, ``tokenizer(q, d, max_length=1024)`` (no truncation flag:
    transformers then cuts longest first); our batched, padded inputs hold the same tokens."""
    from transformers import AutoTokenizer

    from r2med_plugins.rerank import make_rankllama

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    seen = []

    class Model:
        def __call__(self, input_ids, attention_mask, **_):
            seen.extend(ids[mask.bool()].tolist() for ids, mask in zip(input_ids, attention_mask))
            return type("Out", (), {"logits": input_ids.sum(dim=1, keepdim=True).float()})()

    reranker = make_rankllama(options_of(plugins, "reranker:rankllama", batch_size=8, device="cpu", cache=False))
    reranker._replicas = [(tokenizer, Model(), "cpu")]
    long_doc = " ".join(f"glucose{i} insulin" for i in range(700))  # well over 1024 tokens
    pairs = [("What lowers glucose?", long_doc), ("IL-6?", TEXTS[1]), ("q", TEXTS[2])]
    reranker.score(pairs)
    expected = [tokenizer(f"query: {q}", f"document: {d}", max_length=1024)["input_ids"] for q, d in pairs]
    assert len(expected[0]) == 1024  # the long pair is cut at 1024, not 512
    assert sorted(seen) == sorted(expected)


# -- item 4: bge-reranker and monoBERT in fp32 -------------------------------------------------------

def test_the_authors_loaded_cross_encoders_without_a_dtype():
    tree = authors_source("utils.py")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RerankerModel")
    loads = [n for n in ast.walk(cls) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "from_pretrained"
             and getattr(n.func.value, "id", "") == "AutoModelForSequenceClassification"]
    dtypes = sorted(next((ast.unparse(k.value) for k in c.keywords if k.arg == "torch_dtype"), "") for c in loads)
    assert dtypes == ["", "torch.float16"]  # bge/mono: no dtype (fp32); llama: fp16


@pytest.mark.model  # torch
@pytest.mark.parametrize("name", ["bge-reranker", "monobert"])
def test_cross_encoders_load_in_fp32_on_gpu_by_default(plugins, monkeypatch, name):
    import torch

    from r2med_plugins.rerank import cross_encoder, make_cross_encoder

    loads = []
    monkeypatch.setattr(cross_encoder, "parse_devices", lambda device: ["cuda:0"])
    monkeypatch.setattr("sentence_transformers.CrossEncoder", lambda *a, **kw: loads.append(kw) or object())
    reranker = make_cross_encoder(name, options_of(plugins, f"reranker:{name}"))
    reranker._load()
    assert [kw["model_kwargs"]["dtype"] for kw in loads] == [torch.float32]
    assert reranker.identity()["dtype"] == "torch.float32"
    half = make_cross_encoder(name, options_of(plugins, f"reranker:{name}", dtype="fp16"))  # the option gives fp16
    assert half.identity()["dtype"] == "torch.float16"


# -- item 5: MedCPT queries through the Article encoder ----------------------------------------------

def test_the_authors_encoded_medcpt_queries_with_the_article_encoder():
    tree = authors_source("eval_bench.py")
    paths = next(ast.literal_eval(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") == "model_path_dict")["medcpt"]
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "BiEncoderModel")
    index = {k.arg: ast.literal_eval(k.value.slice) for k in call.keywords if k.arg.endswith("name_or_path")}
    assert Path(paths[index["query_encoder_name_or_path"]]).name == "MedCPT-Article-Encoder"
    assert Path(paths[index["doc_encoder_name_or_path"]]).name == "MedCPT-Article-Encoder"


def test_medcpt_default_encodes_queries_with_the_article_encoder(plugins):
    from r2med_plugins.dense import published_retriever

    assert options_of(plugins, "retriever:medcpt").article_queries is True
    retriever = published_retriever("medcpt", options_of(plugins, "retriever:medcpt", device="cpu"))
    encoder = retriever.model.encoder()
    assert encoder.query_model == encoder.doc_model == "ncbi/MedCPT-Article-Encoder"
    chosen = published_retriever("medcpt", options_of(plugins, "retriever:medcpt", device="cpu", model="org/queries",
                                                      doc_model="org/articles"))
    chosen_encoder = chosen.model.encoder()
    assert chosen_encoder.query_model == "org/articles"  # the document encoder, whatever its weights
    own = published_retriever("medcpt", options_of(plugins, "retriever:medcpt", device="cpu", article_queries=False))
    own_encoder = own.model.encoder()
    assert (own_encoder.query_model, own_encoder.doc_model) == ("ncbi/MedCPT-Query-Encoder",
                                                                "ncbi/MedCPT-Article-Encoder")


# -- item 7: each tokenizer's own padding side --------------------------------------------------------

def config(model: Path, **kw):
    from r2med_plugins.dense.config import DenseConfig

    base = dict(name="t", hf_model=str(model), backend="transformers", pooling="mean", normalize=False,
                query_max_length=64, doc_max_length=64, dtype="fp32", batch_size=16)
    return DenseConfig(**{**base, **kw})


def left_padding_copy(model_path: Path, tmp_path: Path) -> Path:
    """MiniLM whose tokenizer pads on the left by default (its tokenizer_config says so)."""
    folder = tmp_path / "left-minilm"
    shutil.copytree(model_path, folder)
    tokenizer_config = folder / "tokenizer_config.json"
    tokenizer_config.write_text(json.dumps({**json.loads(tokenizer_config.read_text()), "padding_side": "left"}))
    return folder


def authors_mean_embeddings(model: Path, texts: list[str], max_length: int) -> np.ndarray:
    """FlagDRESModel's 'Base' encode: one padded batch with the tokenizer untouched, mean pooling."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, net = AutoTokenizer.from_pretrained(str(model)), AutoModel.from_pretrained(str(model)).eval()
    inputs = tokenizer(texts, padding=True, truncation=True, return_tensors="pt", max_length=max_length)
    with torch.no_grad():
        hidden = net(**inputs, return_dict=True).last_hidden_state
    mask = inputs["attention_mask"]
    return (torch.sum(hidden * mask.unsqueeze(-1).float(), dim=1) / mask.sum(dim=1, keepdim=True).float()).numpy()


def test_a_tokenizer_that_pads_left_keeps_padding_left(model_path, tmp_path):
    from r2med_plugins.dense.encoders import TransformerEncoder

    folder = left_padding_copy(model_path, tmp_path)
    encoder = TransformerEncoder(config(folder), devices=["cpu"], batch_size=16, dtype="fp32")
    assert encoder._load(str(folder))[0].padding_side == "left"
    ours = encoder.encode_queries(TEXTS)
    authors = authors_mean_embeddings(folder, TEXTS, 64)
    assert ours == pytest.approx(authors, abs=1e-5)
    forced = TransformerEncoder(config(folder, padding_side="right"), devices=["cpu"], batch_size=16, dtype="fp32")
    assert np.abs(forced.encode_queries(TEXTS) - authors).max() > 1e-4  # the side matters: the test can tell


def test_bmr_pads_left_only_when_its_tokenizer_has_no_pad_token(model_path):
    from transformers import AutoTokenizer

    from r2med_plugins.dense.encoders import prepare_tokenizer

    bmr = config(model_path, pooling="last-bmr", append_eos=True)
    with_pad = AutoTokenizer.from_pretrained(str(model_path))  # BERT's: has a pad token, pads right
    prepare_tokenizer(with_pad, bmr)
    assert (with_pad.padding_side, with_pad.pad_token) == ("right", "[PAD]")

    without = AutoTokenizer.from_pretrained(str(model_path))
    without.pad_token, without.eos_token = None, "[SEP]"  # a decoder-style tokenizer: EOS, no pad token
    prepare_tokenizer(without, bmr)
    assert (without.padding_side, without.pad_token) == ("left", "[SEP]")

    plain = AutoTokenizer.from_pretrained(str(model_path))
    plain.pad_token, plain.eos_token = None, "[SEP]"
    prepare_tokenizer(plain, config(model_path, pooling="last"))  # outside BMR: the side stays the tokenizer's
    assert (plain.padding_side, plain.pad_token) == ("right", "[SEP]")


def test_published_dense_configs_keep_the_tokenizer_side():
    from r2med_plugins.dense.models import DENSE_MODELS

    assert {c.padding_side for c in DENSE_MODELS.values()} == {""}
