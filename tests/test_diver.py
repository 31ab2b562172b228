"""Diver-Retriever (``diver-retriever-4b``, ``-4b-1020``, ``-1b7``, ``-0b6``) as AQ-MedAI/Diver's
``Retriever/`` runs it, and the training-data overlap its model cards report, said on every surface
of the board.

Diver's procedure, typed here from its code (AQ-MedAI/Diver @ 95b111b, ``Retriever/retrievers.py``:
``Qwen3EmbeddingModel``), not from the module under test: queries
``'Instruct: Given a web search query, retrieve relevant passages that answer the query\\nQuery:{}'``,
documents ``"Represent this text:{}"``, each cut by ``truncate_text`` (tokens without special tokens,
decoded back) and then embedded by vLLM, which tokenizes each text alone with its special tokens and
pools the last token, normalised. The model here is one layer of MiniLM (a BERT tokenizer: special
tokens on both ends, so the cut can be seen to leave them out).
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace

import numpy as np
import pytest

from r2med_tasks.tasks.specs import R2MED_TASKS

NAMES = {"diver-retriever-4b": "AQ-MedAI/Diver-Retriever-4B", "diver-retriever-4b-1020": "AQ-MedAI/Diver-Retriever-4B-1020",
         "diver-retriever-1b7": "AQ-MedAI/Diver-Retriever-1.7B", "diver-retriever-0b6": "AQ-MedAI/Diver-Retriever-0.6B"}
QUERY_FORMAT = 'Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:{}'
DOC_FORMAT = "Represent this text:{}"
MAX_LENGTH = 16384  # Qwen3EmbeddingModel(model_path, max_length=16384)

QUERIES = ["Why does metformin lower hepatic glucose output?", "IL-6"]
DOCS = ["Metformin inhibits hepatic gluconeogenesis.", "Addison disease: primary adrenal insufficiency.",
        " ".join(f"glucose{i} insulin receptor" for i in range(40))]  # over the test's limit: cut


@pytest.mark.parametrize("name", NAMES)
def test_each_tasks_inputs_are_divers(name):
    from r2med_plugins.dense.models import DENSE_MODELS

    c = DENSE_MODELS[name]
    assert (c.hf_model, c.pooling, c.normalize, c.dtype) == (NAMES[name], "last", True, "bf16")
    assert (c.query_max_length, c.doc_max_length) == (MAX_LENGTH, MAX_LENGTH)
    assert (c.special_tokens, c.truncate_text, c.drop_identical_ids) == ("tokenizer.json", True, False)
    assert not (c.cast_module or c.append_eos or c.autocast or c.instruct_generated_docs)
    for task in R2MED_TASKS:  # one wording for every task: the code never reads run.py's instructions
        for query in QUERIES:
            assert c.query_instruction(task.key) + query == QUERY_FORMAT.format(query)
        for doc in DOCS:
            assert c.doc_instruction(task.key) + doc == DOC_FORMAT.format(doc)
        assert c.inputs(task.key)["query"] == QUERY_FORMAT.format("{text}")


def truncate_text(tokenizer, text: str, max_length: int) -> str:
    """Diver's Qwen3EmbeddingModel.truncate_text."""
    text_ids = tokenizer.encode(text, add_special_tokens=False)
    if len(text_ids) > max_length:
        text_ids = text_ids[:max_length]
        text = tokenizer.decode(text_ids)
    return text


@functools.cache
def loaded(folder):
    from transformers import AutoModel, AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder)), AutoModel.from_pretrained(str(folder)).eval()


def diver_embeddings(folder, texts: list[str], max_length: int) -> tuple[list[list[int]], np.ndarray]:
    """What vLLM's embed did with truncate_text's output: each text tokenized alone, special tokens
    added, no padding; the last token's state, L2-normalised."""
    import torch

    tokenizer, model = loaded(folder)
    ids = [tokenizer(truncate_text(tokenizer, t, max_length))["input_ids"] for t in texts]
    with torch.no_grad():
        out = [model(input_ids=torch.tensor([i])).last_hidden_state[0, -1] for i in ids]
    return ids, torch.nn.functional.normalize(torch.stack(out), dim=-1).numpy()


def test_the_encoder_feeds_and_pools_what_divers_code_did(small_model_path):
    from r2med_plugins.dense.models import DENSE_MODELS
    from r2med_plugins.dense.published import PublishedModel

    limit = 24  # MiniLM holds 512 positions; the recipe is the same at any limit
    config = replace(DENSE_MODELS["diver-retriever-4b"], hf_model=str(small_model_path), query_max_length=limit,
                     doc_max_length=limit)
    model = PublishedModel(config, device="cpu", batch_size=0, dtype="bf16")
    biology = R2MED_TASKS[0]
    queries = [QUERY_FORMAT.format(q) for q in QUERIES]
    docs = [DOC_FORMAT.format(d) for d in DOCS]
    encoder = model.encoder()
    tokenizer = encoder._load(str(small_model_path))[0]
    for texts in (queries, docs):
        expected, _ = diver_embeddings(small_model_path, texts, limit)
        batch = encoder._tokenize(tokenizer, texts, limit, as_pair=False)
        assert [i[m.bool()].tolist() for i, m in zip(batch["input_ids"], batch["attention_mask"])] == expected
    ids, _ = diver_embeddings(small_model_path, docs, limit)
    assert len(ids[-1]) == limit + 2  # cut without [CLS] and [SEP], which come after
    np.testing.assert_allclose(model.encode_queries(QUERIES, biology), diver_embeddings(small_model_path, queries, limit)[1],
                               atol=2e-5)
    np.testing.assert_allclose(model.encode_documents(DOCS, biology), diver_embeddings(small_model_path, docs, limit)[1],
                               atol=2e-5)
    identity = model.document_identity(biology)
    assert identity["truncate_text"] is True and identity["doc_instruction"] == "Represent this text:"
    e5 = PublishedModel(DENSE_MODELS["e5"], device="cpu", batch_size=0, dtype="fp32").document_identity(biology)
    assert "truncate_text" not in e5  # other models' caches keep their keys


# --- the overlap said out loud ---------------------------------------------------------------------------------

MEDQA = {"task": "MedQA-Diag", "dataset": "truehealth/medqa"}


@pytest.mark.parametrize("name", NAMES)
def test_each_diver_model_reports_the_medqa_overlap(name):
    from r2med_plugins.dense.models import DENSE_MODELS
    from r2med_plugins.dense.published import PublishedModel

    (note,) = PublishedModel(DENSE_MODELS[name], device="cpu", batch_size=0, dtype="bf16").model_meta()["training_overlap"]
    assert {k: note[k] for k in MEDQA} == MEDQA
    assert note["status"] == "reported, not independently confirmed" and "mteb PR #5039" in note["source"]
    assert "training_overlap" not in PublishedModel(DENSE_MODELS["e5"], device="cpu", batch_size=0,
                                                    dtype="fp32").model_meta()


@pytest.fixture(scope="module")
def diver_run(tmp_path_factory, small_model_path):
    """A run of diver-retriever-0b6 (MiniLM's weights in its place) on the sample task: its record,
    and a board row with the scores of R2MED's tasks and the record's overlap notes."""
    from pathlib import Path

    import r2med_tasks as r2med
    from r2med_tasks.board.sources import Row, recorded_overlaps

    out = tmp_path_factory.mktemp("diver")
    built = r2med.pipeline("diver-retriever-0b6", model=str(small_model_path), device="cpu")
    outcome = r2med.evaluate(built, tasks="sample", output=out / "results", cache_dir=out / "cache")
    (folder,) = outcome.results_dirs
    record = json.loads((Path(folder) / "r2med" / "pipeline.json").read_text())
    row = Row(record["name"], retriever=record["components"]["retriever"]["label"],
              scores={t.name: 10.0 for t in R2MED_TASKS}, source="a run", overlaps=recorded_overlaps(record["components"]))
    return record, row


def test_the_runs_record_and_row_carry_the_overlap(diver_run):
    record, row = diver_run
    (note,) = record["components"]["retriever"]["training_overlap"]
    assert {k: note[k] for k in MEDQA} == MEDQA
    (shown,) = row.overlaps
    assert shown == {"model": record["components"]["retriever"]["label"], **note}


def test_a_records_notes_that_are_no_notes_are_left_out():
    from r2med_tasks.board.sources import recorded_overlaps

    good = {**MEDQA, "source": "s", "status": "reported"}
    stages = {"retriever": {"label": "A", "training_overlap": [good]},
              "reranker": {"label": "B", "training_overlap": "not a list",
                           "members": [{"label": "C", "training_overlap": [{**good, "task": "<script>"}]}]}}
    assert recorded_overlaps(stages) == [{"model": "A", **good}]


def test_the_terminal_table_marks_the_row_and_says_why_below(diver_run):
    from r2med_tasks.board.render import render

    _, row = diver_run
    for wide in (False, True):
        text = render([row], [t.name for t in R2MED_TASKS], "table", wide=wide, width=120)
        assert f"{row.system} †" in text
        footnote = next(line for line in text.splitlines() if line.startswith("† #1"))
        assert "truehealth/medqa" in footnote and "MedQA-Diag" in footnote and "not independently confirmed" in footnote
    plain = replace(row, overlaps=[])
    assert "†" not in render([plain], [t.name for t in R2MED_TASKS], "table", width=120)


def test_json_and_the_page_say_it(diver_run):
    from r2med_tasks.board.render import render

    _, row = diver_run
    tasks = [t.name for t in R2MED_TASKS]
    (record,) = json.loads(render([row], tasks, "json"))
    assert [{k: n[k] for k in MEDQA} for n in record["training_overlap"]] == [MEDQA]
    assert "truehealth/medqa" in record["source"]
    page = render([row], tasks, "html")
    assert '<span class="overlap" title="' in page and "truehealth/medqa, the source of MedQA-Diag" in page
    assert '<span class="overlap"' not in render([replace(row, overlaps=[])], tasks, "html")


def test_a_paper_row_carries_its_records_overlap(tmp_path):
    from r2med_tasks.board.published import paper_runs
    from r2med_tasks.board.sources import paper_row

    run = {"name": "Diver-Retriever-4B (a paper)", "rewriter": "-", "retriever": "Diver-Retriever-4B", "reranker": "-",
           "command": "r2med-run --plugin diver-retriever-4b", "source": "a paper", "reference": "https://a",
           "provenance": [], "average": 42.9, "ndcg_at_10": {}, "paper": "arXiv:2511.11653", "table": "Table 2",
           "first_stage": "-", "llm": "-",
           "training_overlap": [{"model": "Diver-Retriever-4B", **MEDQA, "source": "mteb PR #5039",
                                 "status": "reported, not independently confirmed"}]}
    path = tmp_path / "papers.json"
    path.write_text(json.dumps({"about": "", "runs": [run]}))
    (read,) = paper_runs(path)
    assert paper_row(read).overlaps == run["training_overlap"]
    run["training_overlap"] = [{**MEDQA, "source": "x", "status": "y", "task": "MedQA"}]  # no such dataset
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"about": "", "runs": [run]}))
    with pytest.raises(ValueError, match="training_overlap"):
        paper_runs(path)


def test_notes_are_checked_where_they_enter():
    from r2med_tasks.components.overlap import overlap_notes

    good = {**MEDQA, "source": "s", "status": "reported"}
    assert overlap_notes(None) == [] and overlap_notes([good]) == [good]
    for bad in ("a text", [good, 3], [{**good, "status": ""}], [{**good, "extra": "x"}], [{**good, "task": "MedQA"}]):
        assert overlap_notes(bad) is None, bad
