"""The dense retriever configs (``r2med_plugins.dense.models``) against the published setup.

Expected values are typed here independently of the module: settings from the original
``src/eval_retrieval.py`` (62b7074) and ``src/eval_bench.py`` / ``src/utils.py`` of R2MED/R2MED,
instruction strings copied literally from its ``src/instrcution.py``; for the two models the
ReasonEmbed authors evaluated, their scripts (VectorSpaceLab/agentic-search @ b2f2e40; more in
tests/test_reason_embed.py). Pure data checks: nothing is downloaded or loaded.
"""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys

import pytest

from r2med_plugins.dense.config import ALL_TASKS, DenseConfig
from r2med_plugins.dense.models import DENSE_MODELS
from r2med_tasks.tasks.specs import R2MED_TASKS

TASK_KEYS = {t.key for t in R2MED_TASKS}
BIO, IIYI = "Stack-Biology", "IIYiPatients-EN"

ORDER = [
    "contriever", "medcpt", "inst-l", "inst-xl", "bmr-410m", "bmr-2b", "bmr-7b",
    "bge", "e5", "grit", "sfr", "nvembed", "openai", "voyage", "reason-embed", "qwen3-embedding-8b",
    "diver-retriever-4b", "diver-retriever-4b-1020", "diver-retriever-1b7", "diver-retriever-0b6",
]
R2MED_ORDER = ORDER[:-6]  # the models R2MED's own code ran
DIVER = ORDER[-4:]  # as AQ-MedAI/Diver's Retriever/ code runs them (more in tests/test_diver.py)
EVALUATED_BY = {**{n: "R2MED" for n in R2MED_ORDER}, "reason-embed": "the ReasonEmbed authors",
                "qwen3-embedding-8b": "the ReasonEmbed authors", **{n: "AQ-MedAI/Diver's Retriever/ code" for n in DIVER}}

# name: (hf_model, backend, pooling, normalize, query_max, doc_max, dtype, batch_size)
EXPECTED = {
    "contriever": ("facebook/contriever-msmarco", "transformers", "mean", False, 512, 512, "fp32", 512),
    "medcpt": ("ncbi/MedCPT-Query-Encoder", "transformers", "cls", False, 512, 512, "fp32", 512),
    "inst-l": ("hkunlp/instructor-large", "instructor", "model", True, 512, 512, "fp32", 64),
    "inst-xl": ("hkunlp/instructor-xl", "instructor", "model", True, 512, 512, "fp32", 32),
    "bmr-410m": ("BMRetriever/BMRetriever-410M", "transformers", "last-bmr", False, 512, 512, "fp16", 32),
    "bmr-2b": ("BMRetriever/BMRetriever-2B", "transformers", "last-bmr", False, 1024, 1024, "fp16", 32),
    "bmr-7b": ("BMRetriever/BMRetriever-7B", "transformers", "last-bmr", False, 2048, 2048, "fp16", 64),
    "bge": ("BAAI/bge-large-en-v1.5", "transformers", "cls", True, 512, 512, "fp32", 512),
    "e5": ("intfloat/e5-mistral-7b-instruct", "transformers", "last", True, 2048, 2048, "fp32", 32),
    "grit": ("GritLM/GritLM-7B", "gritlm", "model", True, 512, 2048, "bf16", 64),
    "sfr": ("Salesforce/SFR-Embedding-Mistral", "transformers", "last", True, 2048, 2048, "fp32", 32),
    "nvembed": ("nvidia/NV-Embed-v2", "nvembed", "model", True, 4096, 4096, "fp16", 16),
    "openai": ("text-embedding-3-large", "openai", "model", True, 6000, 6000, "fp32", 64),
    "voyage": ("voyage-3", "voyage", "model", True, 16000, 16000, "fp32", 64),
    # agentic-search @ b2f2e40, ReasonEmbed/evaluation_r2med/scripts: decoder-only-base, last_token, 512/512,
    # batch 256; FlagEmbedding's use_fp16 default True
    "reason-embed": ("hanhainebula/reason-embed-qwen3-8b-0928", "transformers", "last", True, 512, 512, "fp16", 256),
    "qwen3-embedding-8b": ("Qwen/Qwen3-Embedding-8B", "transformers", "last", True, 512, 512, "fp16", 256),
    # AQ-MedAI/Diver @ 95b111b, Retriever/retrievers.py: vLLM task="embed" (dtype auto: the checkpoints' bfloat16,
    # the model's last-token pooling, normalised), Qwen3EmbeddingModel(max_length=16384); vLLM batches itself
    "diver-retriever-4b": ("AQ-MedAI/Diver-Retriever-4B", "transformers", "last", True, 16384, 16384, "bf16", 8),
    "diver-retriever-4b-1020": ("AQ-MedAI/Diver-Retriever-4B-1020", "transformers", "last", True, 16384, 16384,
                                "bf16", 8),
    "diver-retriever-1b7": ("AQ-MedAI/Diver-Retriever-1.7B", "transformers", "last", True, 16384, 16384, "bf16", 8),
    "diver-retriever-0b6": ("AQ-MedAI/Diver-Retriever-0.6B", "transformers", "last", True, 16384, 16384, "bf16", 8),
}

PUBLISHED = {
    "contriever": "Contriever", "medcpt": "MedCPT", "inst-l": "InstructOR-L",
    "inst-xl": "InstructOR-XL", "bmr-410m": "BMRETRIEVER-410M", "bmr-2b": "BMRetriever-2B",
    "bmr-7b": "BMRetriever-7B", "bge": "BGE-Large-en-v1.5", "e5": "E5-mistral-7b-instruct",
    "grit": "GritLM-7B", "sfr": "SFR-Embedding-Mistral", "nvembed": "NV-Embed-v2",
    "openai": "Text-embedding-3-large", "voyage": "Voyage-3", "reason-embed": "BGE-Reasoner-Embed-0928",
    "qwen3-embedding-8b": "Qwen3-Embedding-8B", "diver-retriever-4b": "Diver-Retriever-4B",
    "diver-retriever-4b-1020": "", "diver-retriever-1b7": "", "diver-retriever-0b6": "",  # no published R2MED figure
}
# Published names whose paper row (the GroupRank paper's Diver-Retriever-4B, 42.9) the record does not hold yet

# Exact query instructions for Biology and IIYi (src/instrcution.py)
QUERY_BIO_IIYI = {
    "inst-l": ("Represent the Biology post for retrieving relevant paragraphs: ",
               "Represent the Clinical Case for retrieving similar cases that help diagnose the case: "),
    "inst-xl": ("Represent the Biology post for retrieving relevant paragraphs: ",
                "Represent the Clinical Case for retrieving similar cases that help diagnose the case: "),
    "e5": ("Instruct: Given a Biology post, retrieve relevant passages that help answer the post\nQuery: ",
           "Instruct: Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: "),
    "sfr": ("Instruct: Given a Biology post, retrieve relevant passages that help answer the post\nQuery: ",
            "Instruct: Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: "),
    "nvembed": ("Instruct: Given a Biology post, retrieve relevant passages that help answer the post\nQuery: ",
                "Instruct: Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: "),
    "bmr-410m": ("Given a Biology post, retrieve relevant passages that help answer the post\nQuery: ",
                 "Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: "),
    "bmr-2b": ("Given a Biology post, retrieve relevant passages that help answer the post\nQuery: ",
               "Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: "),
    "bmr-7b": ("Given a Biology post, retrieve relevant passages that help answer the post\nQuery: ",
               "Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: "),
    "grit": ("<|user|>\nGiven a Biology post, retrieve relevant passages that help answer the post\n<|embed|>\n",
             "<|user|>\nGiven a Clinical Case, retrieve similar cases that help diagnose the case\n<|embed|>\n"),
    "bge": ("Represent this sentence for searching relevant passages: ",
            "Represent this sentence for searching relevant passages: "),
}

# Exact document instructions for Biology and IIYi
DOC_BIO_IIYI = {
    "inst-l": ("Represent the Biology paragraph for retrieval: ", "Represent the Clinical Case for retrieval: "),
    "inst-xl": ("Represent the Biology paragraph for retrieval: ", "Represent the Clinical Case for retrieval: "),
    "bmr-410m": ("Represent this passage\npassage: ", "Represent this passage\npassage: "),
    "bmr-2b": ("Represent this passage\npassage: ", "Represent this passage\npassage: "),
    "bmr-7b": ("Represent this passage\npassage: ", "Represent this passage\npassage: "),
    "grit": ("<|embed|>\n", "<|embed|>\n"),
    # Diver's Qwen3EmbeddingModel.embed_docs: "Represent this text:{}".format(doc), every task
    **{name: ("Represent this text:", "Represent this text:") for name in DIVER},
}

# The full e5_q and inst tables, every key (src/instrcution.py)
E5_ALL = {
    "Stack-Biology": "Instruct: Given a Biology post, retrieve relevant passages that help answer the post\nQuery: ",
    "Stack-Medical": "Instruct: Given a Medical Science post, retrieve relevant passages that help answer the post\nQuery: ",
    "Stack-Bioinformatics": "Instruct: Given a Bioinformatics post, retrieve relevant passages that help answer the post\nQuery: ",
    "MedXpertQA-Exam": "Instruct: Given a Medical Exam, retrieve relevant passages that help answer the exam\nQuery: ",
    "MedQA-Diag": "Instruct: Given a Medical Exam, retrieve relevant passages that help answer the exam\nQuery: ",
    "PMC-Treat": "Instruct: Given a Clinical Case, retrieve relevant passages that help answer the case\nQuery: ",
    "PMCPatients": "Instruct: Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: ",
    "IIYiPatients-EN": "Instruct: Given a Clinical Case, retrieve similar cases that help diagnose the case\nQuery: ",
}
INST_Q_ALL = {
    "Stack-Biology": "Represent the Biology post for retrieving relevant paragraphs: ",
    "Stack-Medical": "Represent the Medical Science post for retrieving relevant paragraphs: ",
    "Stack-Bioinformatics": "Represent the Bioinformatics post for retrieving relevant paragraphs: ",
    "MedXpertQA-Exam": "Represent the Medical Exam for retrieving relevant paragraphs that help answer the exam: ",
    "MedQA-Diag": "Represent the Medical Exam for retrieving relevant paragraphs that help answer the exam: ",
    "PMC-Treat": "Represent the Clinical Case for retrieving relevant paragraphs that help answer the case: ",
    "PMCPatients": "Represent the Clinical Case for retrieving similar cases that help diagnose the case: ",
    "IIYiPatients-EN": "Represent the Clinical Case for retrieving similar cases that help diagnose the case: ",
}
INST_D_ALL = {
    "Stack-Biology": "Represent the Biology paragraph for retrieval: ",
    "Stack-Medical": "Represent the Medical Science paragraph for retrieval: ",
    "Stack-Bioinformatics": "Represent the Bioinformatics paragraph for retrieval: ",
    "MedXpertQA-Exam": "Represent the Medical paragraph for retrieval: ",
    "MedQA-Diag": "Represent the Medical paragraph for retrieval: ",
    "PMC-Treat": "Represent the Medical paragraph for retrieval: ",
    "PMCPatients": "Represent the Clinical Case for retrieval: ",
    "IIYiPatients-EN": "Represent the Clinical Case for retrieval: ",
}

PER_TASK_QUERY = {"inst-l", "inst-xl", "bmr-410m", "bmr-2b", "bmr-7b", "e5", "grit", "sfr", "nvembed", "reason-embed",
                  "qwen3-embedding-8b"}
UNINSTRUCTED = {"contriever", "medcpt", "openai", "voyage"}
# the authors' GAR retrieval (``src/eval_retrieval.py``, ``src/base.py``): these wrappers encode GAR generated documents with the query instruction
INSTRUCT_GENERATED = {"inst-l", "inst-xl", "grit", "nvembed"}


def test_models_and_order():
    assert list(DENSE_MODELS) == ORDER
    for key, cfg in DENSE_MODELS.items():
        assert isinstance(cfg, DenseConfig)
        assert cfg.name == key


def test_nv_alias():
    assert DENSE_MODELS["nvembed"].aliases == ("nv",)
    names = set(DENSE_MODELS)
    aliases = [a for c in DENSE_MODELS.values() for a in c.aliases]
    assert len(aliases) == len(set(aliases)) and not names & set(aliases)


@pytest.mark.parametrize("name", ORDER)
def test_settings_match_spec(name):
    cfg = DENSE_MODELS[name]
    got = (cfg.hf_model, cfg.backend, cfg.pooling, cfg.normalize, cfg.query_max_length,
           cfg.doc_max_length, cfg.dtype, cfg.batch_size)
    assert got == EXPECTED[name]
    assert cfg.published == PUBLISHED[name]
    assert cfg.reference.startswith("https://")
    assert cfg.revision is None  # the original pins no hub commit
    assert cfg.instruct_generated_docs == (name in INSTRUCT_GENERATED)
    # R2MED's evaluator (BEIR) dropped a document whose id is the query's; FlagEmbedding's kept it
    assert cfg.drop_identical_ids is (name in R2MED_ORDER)
    assert cfg.evaluated_by == EVALUATED_BY[name]


def test_published_names_are_leaderboard_rows():
    """Each configuration's published name is a leaderboard row, or (qwen3-embedding-8b) the
    model of another paper's published run, whose name is the row's with the paper in parentheses."""
    import csv

    from r2med_tasks.board.published import PUBLISHED_CSV, paper_runs

    with PUBLISHED_CSV.open(newline="", encoding="utf-8") as f:
        rows = {r["name"] for r in csv.DictReader(f)}
    papers = {r["name"].split(" (")[0]: r for r in paper_runs()}
    for cfg in DENSE_MODELS.values():
        if not cfg.published:
            continue
        assert cfg.published in rows or papers[cfg.published]["command"] == f"r2med-run --plugin {cfg.name}"
    assert not {r["name"] for r in paper_runs()} & rows  # a paper's row is named with its paper


def test_field_values_are_known():
    for cfg in DENSE_MODELS.values():
        assert cfg.backend in {"transformers", "instructor", "nvembed", "gritlm", "openai", "voyage"}
        assert cfg.pooling in {"mean", "cls", "last", "last-bmr", "model"}
        assert cfg.dtype in {"fp32", "fp16", "bf16"}
        assert cfg.padding_side == ""  # every published run kept its tokenizer's padding side
        assert cfg.batch_size > 0 and cfg.query_max_length > 0 and cfg.doc_max_length > 0
        if cfg.backend != "transformers":
            assert cfg.pooling == "model"


def test_medcpt_two_encoders():
    cfg = DENSE_MODELS["medcpt"]
    assert cfg.hf_model == "ncbi/MedCPT-Query-Encoder"
    assert cfg.hf_doc_model == "ncbi/MedCPT-Article-Encoder"
    assert cfg.doc_as_pair is True
    assert "Article" in cfg.notes and "BOTH" in cfg.notes  # the published-files bug is recorded
    others = [c for n, c in DENSE_MODELS.items() if n != "medcpt"]
    assert all(c.hf_doc_model is None and not c.doc_as_pair for c in others)


def test_bmr_mode():
    for name in ("bmr-410m", "bmr-2b", "bmr-7b"):
        cfg = DENSE_MODELS[name]
        assert cfg.append_eos is True  # left padding only when the tokenizer has no pad token
        assert cfg.normalize is False
    others = [c for n, c in DENSE_MODELS.items() if not n.startswith("bmr-")]
    assert not any(c.append_eos for c in others)  # e5/sfr: no EOS appended


@pytest.mark.parametrize("name", sorted(QUERY_BIO_IIYI))
def test_query_instruction_literals(name):
    cfg = DENSE_MODELS[name]
    assert (cfg.query_instruction(BIO), cfg.query_instruction(IIYI)) == QUERY_BIO_IIYI[name]


@pytest.mark.parametrize("name", ORDER)
def test_doc_instruction_literals(name):
    cfg = DENSE_MODELS[name]
    expected = DOC_BIO_IIYI.get(name, ("", ""))
    assert (cfg.doc_instruction(BIO), cfg.doc_instruction(IIYI)) == expected


def test_full_tables():
    for name in ("e5", "sfr", "nvembed"):
        assert {k: DENSE_MODELS[name].query_instruction(k) for k in TASK_KEYS} == E5_ALL
    for name in ("inst-l", "inst-xl"):
        cfg = DENSE_MODELS[name]
        assert {k: cfg.query_instruction(k) for k in TASK_KEYS} == INST_Q_ALL
        assert {k: cfg.doc_instruction(k) for k in TASK_KEYS} == INST_D_ALL


def test_instruction_keys_are_the_task_keys():
    assert TASK_KEYS == {"Stack-Biology", "Stack-Bioinformatics", "Stack-Medical", "MedXpertQA-Exam",
                         "MedQA-Diag", "PMC-Treat", "PMCPatients", "IIYiPatients-EN"}
    for name, cfg in DENSE_MODELS.items():
        for table in (cfg.query_instructions, cfg.doc_instructions):
            if not table:
                continue
            if set(table) == {ALL_TASKS}:
                continue
            assert set(table) == TASK_KEYS, name
    for name in PER_TASK_QUERY:
        assert set(DENSE_MODELS[name].query_instructions) == TASK_KEYS
        assert all(DENSE_MODELS[name].query_instruction(k) for k in TASK_KEYS)
    for name in UNINSTRUCTED:
        cfg = DENSE_MODELS[name]
        assert all(cfg.query_instruction(k) == "" and cfg.doc_instruction(k) == "" for k in TASK_KEYS)
    # hub names (the released code's KeyError) must not be used as keys
    for cfg in DENSE_MODELS.values():
        assert not {"Biology", "PMC-Treatment", "IIYi-Clinical"} & set(cfg.query_instructions)


def test_structural_relations():
    e5 = DENSE_MODELS["e5"].query_instructions
    for key in TASK_KEYS:
        wording = e5[key]
        assert wording.startswith("Instruct: ") and wording.endswith("\nQuery: ")
        for bmr in ("bmr-410m", "bmr-2b", "bmr-7b"):
            assert DENSE_MODELS[bmr].query_instruction(key) == wording[len("Instruct: "):]
        core = wording[len("Instruct: "):-len("\nQuery: ")]
        assert DENSE_MODELS["grit"].query_instruction(key) == "<|user|>\n" + core + "\n<|embed|>\n"
        assert DENSE_MODELS["bge"].query_instruction(key) == "Represent this sentence for searching relevant passages: "
    assert DENSE_MODELS["nvembed"].query_instructions is e5  # nv = e5_q upstream
    assert DENSE_MODELS["sfr"].query_instructions is e5
    assert set(DENSE_MODELS["bge"].query_instructions) == {ALL_TASKS}
    # inst-l and inst-xl share inst_q / inst_d
    assert DENSE_MODELS["inst-l"].query_instructions == DENSE_MODELS["inst-xl"].query_instructions
    assert DENSE_MODELS["inst-l"].doc_instructions == DENSE_MODELS["inst-xl"].doc_instructions


def test_unknown_task_falls_back():
    assert DENSE_MODELS["bge"].query_instruction("sample") == "Represent this sentence for searching relevant passages: "
    assert DENSE_MODELS["e5"].query_instruction("sample") == ""
    assert DENSE_MODELS["grit"].doc_instruction(None) == "<|embed|>\n"


def test_configs_serialise():
    for cfg in DENSE_MODELS.values():
        assert dataclasses.asdict(cfg)["name"] == cfg.name
        assert pickle.loads(pickle.dumps(cfg)) == cfg


@pytest.mark.process  # what a fresh interpreter imports
def test_import_is_light():
    code = (
        "import sys; import r2med_plugins.dense.models; "
        "heavy = {'torch', 'transformers', 'sentence_transformers', 'gritlm', 'openai', 'voyageai'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
