"""`reason-embed` (BGE-Reasoner-Embed-0928) and `qwen3-embedding-8b`: R2MED as the ReasonEmbed
authors evaluated it (arXiv 2510.08252, Table 3).

Their procedure, typed here from the sources rather than from the module under test:
VectorSpaceLab/agentic-search @ b2f2e40, ``ReasonEmbed/evaluation_r2med/`` (the two scripts, the
instructions of ``code/prompts.py``), run through FlagOpen/FlagEmbedding @ f7cee83
(``inference/embedder/decoder_only/base.py``: ``BaseLLMEmbedder.encode_single_device`` and
``last_token_pool``; ``abc/inference/AbsEmbedder.py``: ``get_detailed_instruct``). The reference
computations below redo that procedure with the tokenizer's own ``tokenizer.json`` (the Rust
``tokenizers`` library, which is what transformers 4.x's fast tokenizers ran) and the model's
forward pass, and the harness's encoder must agree with them.

The 8B weights are not reachable here; the models are a real decoder of the same architecture
(Qwen3, two small layers, seeded weights) with a byte-level BPE tokenizer built the way Qwen's is,
in both of the tokenizer.json forms that matter (Qwen3-8B's: no EOS; Qwen3-Embedding's: EOS
appended), and one layer of MiniLM (real weights, a BERT post-processor) for an encoder.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from r2med_tasks.tasks.specs import R2MED_TASKS

# agentic-search @ b2f2e40, ReasonEmbed/evaluation_r2med/code/prompts.py: R2MEDInstructions, as written there
PROMPTS_B2F2E40 = {
    "Biology": "Given a Biology post, retrieve relevant passages that help answer the post.",
    "Medical-Sciences": "Given a Medical Science post, retrieve relevant passages that help answer the post.",
    "Bioinformatics": "Given a Bioinformatics post, retrieve relevant passages that help answer the post.",
    "MedXpertQA-Exam": "Given a Medical Exam, retrieve relevant passages that help answer the exam.",
    'MedQA-Diag': "Given a Medical Exam, retrieve relevant passages that help answer the exam.",
    "PMC-Treatment": "Given a Clinical Case, retrieve relevant passages that help answer the case.",
    "PMC-Clinical": "Given a Clinical Case, retrieve similar cases that help diagnose the case.",
    "IIYi-Clinical": "Given a Clinical Case, retrieve similar cases that help diagnose the case.",
}
# Both scripts: --query_instruction_format_for_retrieval 'Instruct: {}\nQuery: {}' (single-quoted in
# the shell: a backslash and an n), --embedder_batch_size 256, --embedder_query_max_length 512,
# --embedder_passage_max_length 512, --pooling_method last_token, --embedder_model_class decoder-only-base
FORMAT = r"Instruct: {}\nQuery: {}"
MAX_LENGTH, BATCH = 512, 256


def detailed_instruct(instruction_format: str, instruction: str, sentence: str) -> str:
    """FlagEmbedding f7cee83, AbsEmbedder.get_detailed_instruct."""
    if "\\n" in instruction_format:
        instruction_format = instruction_format.replace("\\n", "\n")
    return instruction_format.format(instruction, sentence)


def last_token_pool(last_hidden_states, attention_mask):
    """FlagEmbedding f7cee83, inference/embedder/decoder_only/base.py."""
    import torch

    left_padding = (attention_mask[:, -1].sum() == attention_mask.shape[0])
    if left_padding:
        return last_hidden_states[:, -1]
    sequence_lengths = attention_mask.sum(dim=1) - 1
    batch_size = last_hidden_states.shape[0]
    return last_hidden_states[torch.arange(batch_size, device=last_hidden_states.device), sequence_lengths]


QUERIES = ["Why does metformin lower hepatic glucose output?", "IL-6",
           "A 54-year-old man with fatigue, hyperpigmentation and hyponatraemia: what is the diagnosis?"]
DOCS = ["Metformin inhibits hepatic gluconeogenesis.", "Addison disease: primary adrenal insufficiency.",
        " β-lactam antibiotics inhibit cell-wall synthesis in bacteria.\n",  # leading and trailing whitespace kept
        " ".join(f"glucose{i} insulin receptor" for i in range(400))]  # far over 512 tokens: cut


# --- the configurations ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, hf_model, published", [
    ("reason-embed", "hanhainebula/reason-embed-qwen3-8b-0928", "BGE-Reasoner-Embed-0928"),
    ("qwen3-embedding-8b", "Qwen/Qwen3-Embedding-8B", "Qwen3-Embedding-8B"),
])
def test_settings_are_the_scripts(name, hf_model, published):
    from r2med_plugins.dense.models import DENSE_MODELS

    c = DENSE_MODELS[name]
    assert (c.hf_model, c.backend, c.pooling, c.normalize) == (hf_model, "transformers", "last", True)
    assert (c.query_max_length, c.doc_max_length, c.dtype, c.batch_size) == (MAX_LENGTH, MAX_LENGTH, "fp16", BATCH)
    assert (c.special_tokens, c.cast_module, c.append_eos, c.autocast) == ("tokenizer.json", True, False, False)
    assert (c.padding_side, c.doc_as_pair, c.instruct_generated_docs) == ("", False, False)
    assert c.drop_identical_ids is False  # ignore_identical_ids: False
    assert c.published == published and c.revision is None  # the scripts pin no hub commit
    assert "EOS" in c.notes and "b2f2e40" not in c.reference


@pytest.mark.parametrize("name", ["reason-embed", "qwen3-embedding-8b"])
def test_each_tasks_query_and_document_text_is_flag_embeddings(name):
    """Queries: 'Instruct: {prompts.py's instruction}\\nQuery: {query}'; documents: the text alone."""
    from r2med_plugins.dense.models import DENSE_MODELS

    c = DENSE_MODELS[name]
    assert {t.short_name for t in R2MED_TASKS} == set(PROMPTS_B2F2E40)
    for task in R2MED_TASKS:
        for query in QUERIES:
            expected = detailed_instruct(FORMAT, PROMPTS_B2F2E40[task.short_name], query)
            assert c.query_instruction(task.key) + query == expected
            assert expected.startswith("Instruct: ") and ".\nQuery: " in expected  # the period kept, a real newline
        assert c.doc_instruction(task.key) == "" and c.generated_instruction(task.key) == ""
        assert c.inputs(task.key) == {"query": detailed_instruct(FORMAT, PROMPTS_B2F2E40[task.short_name], "{text}"),
                                      "document": "{text}", "generated": "{text}"}


def test_identical_ids_are_kept_by_default_as_flag_embedding_kept_them(plugins):
    from r2med_tasks.running.registry import build_registry

    reg = build_registry(plugins)
    for name, default in (("reason-embed", False), ("qwen3-embedding-8b", False), ("e5", True), ("bge", True)):
        assert reg.component(f"retriever:{name}").spec.defaults["drop_identical_ids"] is default, name


def test_the_published_run_is_the_leaderboards_first_row(plugins, tmp_path):
    from conftest import dry_run_plan

    plan = dry_run_plan("r2med-run --plugin reason-embed", tmp_path)
    assert plan["pipeline"] == "BGE-Reasoner-Embed-0928" and len(plan["tasks"]) == 8
    plan = dry_run_plan("r2med-run --plugin qwen3-embedding-8b", tmp_path)
    assert plan["pipeline"] == "Qwen3-Embedding-8B"


def test_top_2000_or_top_100_gives_the_same_ndcg_at_10():
    """FlagEmbedding searched the top 2000 and scored that list; the harness keeps 100: nDCG@10
    reads only the first ten, so pytrec_eval gives the same number for both lists."""
    import pytrec_eval

    rng = np.random.default_rng(0)
    qrels = {f"q{i}": {f"d{j}": int(rng.integers(0, 3)) for j in rng.choice(3000, 30, replace=False)}
             for i in range(20)}
    run = {q: {f"d{j}": float(s) for j, s in enumerate(rng.random(3000))} for q in qrels}
    top = {k: {q: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:k]) for q, docs in run.items()} for k in (100, 2000)}
    scores = {k: pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(top[k]) for k in top}
    assert [scores[100][q]["ndcg_cut_10"] for q in qrels] == [scores[2000][q]["ndcg_cut_10"] for q in qrels]


# --- the encoder against FlagEmbedding's procedure, on real small models -----------------------------------

PRETOKENIZE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")  # Qwen2/Qwen3's pre-tokenizer split


def qwen_like(folder: Path, *, eos_in_tokenizer_json: bool, padding_side: str) -> Path:
    """A Qwen3 decoder (two layers of 32 dimensions, seeded) and a byte-level BPE tokenizer with
    Qwen's normalizer, pre-tokenizer and special tokens. ``eos_in_tokenizer_json``: the
    tokenizer.json post-processor appends <|endoftext|> (Qwen3-Embedding's); else it is ByteLevel
    (Qwen3-8B's) and tokenizer_config.json says add_eos_token, as FlagEmbedding's fine-tuning saves it."""
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import Qwen3Config, Qwen3Model

    folder.mkdir(parents=True)
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.train_from_iterator([*QUERIES, *DOCS, *PROMPTS_B2F2E40.values(), "Instruct: Query:"] * 5,
                            trainers.BpeTrainer(vocab_size=500, special_tokens=special,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    eot = tok.token_to_id("<|endoftext|>")
    tok.post_processor = (processors.TemplateProcessing(single="$A:0 <|endoftext|>:0",
                                                        pair="$A:0 <|endoftext|>:0 $B:1 <|endoftext|>:1",
                                                        special_tokens=[("<|endoftext|>", eot)])
                          if eos_in_tokenizer_json else processors.ByteLevel(trim_offsets=False))
    tok.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "bos_token": None, "model_max_length": 131072, "padding_side": padding_side,
              "clean_up_tokenization_spaces": False}
    if not eos_in_tokenizer_json:
        config["add_eos_token"] = True
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    torch.manual_seed(0)
    Qwen3Model(Qwen3Config(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                           max_position_embeddings=1024, pad_token_id=eot,
                           eos_token_id=tok.token_to_id("<|im_end|>"))).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory, small_model_path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reason-embed")
    return {"qwen3-8b tokenizer, right padding": qwen_like(root / "a", eos_in_tokenizer_json=False, padding_side="right"),
            "qwen3-8b tokenizer, left padding": qwen_like(root / "b", eos_in_tokenizer_json=False, padding_side="left"),
            "qwen3-embedding tokenizer, left padding": qwen_like(root / "c", eos_in_tokenizer_json=True,
                                                                 padding_side="left"),
            "minilm (bert), right padding": small_model_path}


def file_ids(folder: Path, texts: list[str]) -> list[list[int]]:
    """The ids FlagEmbedding fed: ``tokenizer(text, truncation=True, max_length=512)`` on the
    tokenizer.json alone (special tokens by its post-processor, room left for them by the cut)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_LENGTH)
    return [e.ids for e in tok.encode_batch(texts)]


def flag_embedding(folder: Path, texts: list[str]) -> np.ndarray:
    """BaseLLMEmbedder.encode_single_device on CPU (fp32, as it runs there): ids as above, sorted by
    length, padded per batch on the tokenizer's side, last token pooled, normalised."""
    import torch
    from transformers import AutoModel

    config = json.loads((folder / "tokenizer_config.json").read_text())
    side = config.get("padding_side", "right")
    pad = json.loads((folder / "tokenizer.json").read_text())
    pad_id = next((t["id"] for t in pad["added_tokens"] if t["content"] in ("<|endoftext|>", "[PAD]")))
    model = AutoModel.from_pretrained(str(folder)).eval()
    ids = file_ids(folder, texts)
    order = np.argsort([-len(x) for x in ids], kind="stable")
    out = np.empty((len(texts), model.config.hidden_size), dtype=np.float32)
    for start in range(0, len(order), BATCH):
        batch = [ids[i] for i in order[start:start + BATCH]]
        width = max(map(len, batch))
        rows = [([pad_id] * (width - len(x)) + x) if side == "left" else (x + [pad_id] * (width - len(x))) for x in batch]
        masks = [([0] * (width - len(x)) + [1] * len(x)) if side == "left" else ([1] * len(x) + [0] * (width - len(x)))
                 for x in batch]
        input_ids, mask = torch.tensor(rows), torch.tensor(masks)
        with torch.no_grad():
            hidden = model(input_ids=input_ids, attention_mask=mask, return_dict=True).last_hidden_state
        emb = torch.nn.functional.normalize(last_token_pool(hidden, mask), dim=-1)
        out[order[start:start + BATCH]] = emb.numpy()
    return out


def encoder(folder: Path, name: str = "reason-embed"):
    from dataclasses import replace

    from r2med_plugins.dense.encoders import TransformerEncoder
    from r2med_plugins.dense.models import DENSE_MODELS

    return TransformerEncoder(replace(DENSE_MODELS[name], hf_model=str(folder)), devices=["cpu"], batch_size=BATCH,
                              dtype="fp16")  # fp16 as published: on CPU the harness computes in fp32, as FlagEmbedding


@pytest.mark.parametrize("case", ["qwen3-8b tokenizer, right padding", "qwen3-8b tokenizer, left padding",
                                  "qwen3-embedding tokenizer, left padding", "minilm (bert), right padding"])
def test_the_encoder_feeds_and_pools_what_flag_embedding_did(models, case):
    folder = models[case]
    enc = encoder(folder)
    biology = next(t for t in R2MED_TASKS if t.short_name == "Biology")
    queries = [detailed_instruct(FORMAT, PROMPTS_B2F2E40["Biology"], q) for q in QUERIES]
    # the token ids: exactly the tokenizer.json's (special tokens included), cut at 512
    tokenizer = enc._load(str(folder))[0]
    for texts in (queries, DOCS):
        batch = enc._tokenize(tokenizer, texts, MAX_LENGTH, as_pair=False)
        ours = [ids[mask.bool()].tolist() for ids, mask in zip(batch["input_ids"], batch["attention_mask"])]
        assert ours == file_ids(folder, texts)
    lengths = [len(x) for x in file_ids(folder, DOCS)]
    assert lengths[-1] == MAX_LENGTH and max(lengths[:-1]) < MAX_LENGTH
    # the embeddings, through the published model's adapter (instructions applied by the harness)
    from dataclasses import replace

    from r2med_plugins.dense.models import DENSE_MODELS
    from r2med_plugins.dense.published import PublishedModel

    model = PublishedModel(replace(DENSE_MODELS["reason-embed"], hf_model=str(folder)), device="cpu", batch_size=0,
                           dtype="fp16")
    np.testing.assert_allclose(model.encode_queries(QUERIES, biology), flag_embedding(folder, queries), atol=2e-5)
    np.testing.assert_allclose(model.encode_documents(DOCS, biology), flag_embedding(folder, DOCS), atol=2e-5)
    assert model.effective_dtype() == "fp32"  # CPU: fp32, as FlagEmbedding (use_fp16 off on CPU)


def test_eos_as_each_tokenizer_json_says(models):
    """Qwen3-8B's tokenizer.json appends nothing (its tokenizer_config's add_eos_token has no
    effect); Qwen3-Embedding's appends <|endoftext|> after the text cut to 511 tokens."""
    from tokenizers import Tokenizer

    for case, eos in (("qwen3-8b tokenizer, right padding", False), ("qwen3-embedding tokenizer, left padding", True)):
        folder = models[case]
        tokenizer = encoder(folder)._load(str(folder))[0]
        vocab = Tokenizer.from_file(str(folder / "tokenizer.json"))
        ids = tokenizer(DOCS, truncation=True, max_length=MAX_LENGTH)["input_ids"]
        ends = {vocab.id_to_token(x[-1]) for x in ids}
        if eos:
            assert ends == {"<|endoftext|>"} and len(ids[-1]) == MAX_LENGTH
        else:
            assert not ends & {"<|endoftext|>", "<|im_end|>"}


def test_special_tokens_stay_the_files_whatever_add_eos_token_does(models):
    """A transformers that honours add_eos_token (5.x does, when it is set on the tokenizer) would
    append <|im_end|>; the configuration restores the tokenizer.json post-processor, as
    transformers 4.x ran it."""
    from transformers import AutoTokenizer

    from r2med_plugins.dense.encoders import use_file_special_tokens

    folder = models["qwen3-8b tokenizer, right padding"]
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    plain = tokenizer(DOCS[:2])["input_ids"]
    tokenizer.add_eos_token = True
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert [x[-1] for x in tokenizer(DOCS[:2])["input_ids"]] == [eos, eos]  # the test can tell
    use_file_special_tokens(tokenizer, str(folder), None)
    assert tokenizer(DOCS[:2])["input_ids"] == plain == file_ids(folder, DOCS[:2])


def test_fp16_is_flag_embeddings_model_half(models):
    """FlagEmbedding loads the weights without a dtype and calls model.half(): every floating
    tensor, RoPE's inv_freq buffer too, is fp16. Loading with dtype=fp16 keeps that buffer in fp32;
    cast_module makes the two the same, tensor for tensor."""
    import torch
    from transformers import AutoModel

    from r2med_plugins.dense.encoders import cast_module

    folder = models["qwen3-8b tokenizer, right padding"]
    theirs = AutoModel.from_pretrained(str(folder)).half()
    loaded = AutoModel.from_pretrained(str(folder), dtype=torch.float16)
    assert loaded.rotary_emb.inv_freq.dtype == torch.float32  # the difference cast_module removes
    ours = cast_module(copy.deepcopy(loaded), torch.float16)
    mine, flag = ours.state_dict(keep_vars=True), theirs.state_dict(keep_vars=True)
    buffers = dict(ours.named_buffers())
    assert buffers and all(b.dtype == torch.float16 for b in buffers.values())
    for key, value in dict(theirs.named_buffers()).items():
        assert torch.equal(buffers[key], value), key
    assert mine.keys() == flag.keys()
    for key in flag:
        assert mine[key].dtype == flag[key].dtype and torch.equal(mine[key], flag[key]), key
    assert not torch.equal(theirs.rotary_emb.inv_freq.float(), loaded.rotary_emb.inv_freq)  # rounding that matters


def test_document_cache_keys_name_the_recipe():
    from r2med_plugins.dense.models import DENSE_MODELS
    from r2med_plugins.dense.published import PublishedModel

    task = R2MED_TASKS[0]
    identity = PublishedModel(DENSE_MODELS["reason-embed"], device="cpu", batch_size=0, dtype="fp16").document_identity(task)
    assert identity["special_tokens"] == "tokenizer.json" and identity["cast_module"] is True
    e5 = PublishedModel(DENSE_MODELS["e5"], device="cpu", batch_size=0, dtype="fp32").document_identity(task)
    assert "special_tokens" not in e5 and "cast_module" not in e5  # other models' caches keep their keys
