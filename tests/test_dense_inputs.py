"""`r2med plugins NAME` shows, for every dense retriever, the text each task's query, document and
generated document become, ``{text}`` standing for their own text: compactly in the text output,
in full under ``inputs`` with ``--json``.

Expected strings are typed here from the published sources (R2MED/R2MED ``src/instrcution.py``;
ReasonEmbed's ``code/prompts.py`` @ b2f2e40 with FlagEmbedding's 'Instruct: {}\\nQuery: {}'), not
read from the configurations.
"""

from __future__ import annotations

import json

import pytest

from r2med_tasks.tasks.specs import R2MED_TASKS

SHORT = [t.short_name for t in R2MED_TASKS]

EXPECTED = {  # name: {task: (query, document, generated)}
    "reason-embed": {
        "Biology": ("Instruct: Given a Biology post, retrieve relevant passages that help answer the post.\n"
                    "Query: {text}", "{text}", "{text}"),
        "MedQA-Diag": ("Instruct: Given a Medical Exam, retrieve relevant passages that help answer the exam.\n"
                       "Query: {text}", "{text}", "{text}"),
        "IIYi-Clinical": ("Instruct: Given a Clinical Case, retrieve similar cases that help diagnose the case.\n"
                          "Query: {text}", "{text}", "{text}"),
        "sample": ("Instruct: Given a Medical Science post, retrieve relevant passages that help answer the post.\n"
                   "Query: {text}", "{text}", "{text}"),  # the sample task is worded as Medical-Sciences
    },
    "e5": {
        "Biology": ("Instruct: Given a Biology post, retrieve relevant passages that help answer the post\n"
                    "Query: {text}", "{text}", "{text}"),
        "PMC-Treatment": ("Instruct: Given a Clinical Case, retrieve relevant passages that help answer the case\n"
                          "Query: {text}", "{text}", "{text}"),
    },
    "nvembed": {  # the instruction also on generated documents (the authors' GAR code)
        "Bioinformatics": ("Instruct: Given a Bioinformatics post, retrieve relevant passages that help answer the "
                           "post\nQuery: {text}", "{text}",
                           "Instruct: Given a Bioinformatics post, retrieve relevant passages that help answer the "
                           "post\nQuery: {text}"),
    },
    "bge": {t: ("Represent this sentence for searching relevant passages: {text}", "{text}", "{text}")
            for t in [*SHORT, "sample"]},
    "inst-l": {
        "PMC-Clinical": ("Represent the Clinical Case for retrieving similar cases that help diagnose the case: {text}",
                         "Represent the Clinical Case for retrieval: {text}",
                         "Represent the Clinical Case for retrieving similar cases that help diagnose the case: {text}"),
    },
    "bmr-7b": {
        "MedXpertQA-Exam": ("Given a Medical Exam, retrieve relevant passages that help answer the exam\nQuery: {text}",
                            "Represent this passage\npassage: {text}", "{text}"),
    },
    "openai": {t: ('"{text}"', '"{text}"', '"{text}"') for t in SHORT},  # JSON-quoted, as sent
}


def described(run_cli, name: str) -> dict:
    code, out, err = run_cli("plugins", name, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_json_inputs_are_the_published_texts(run_cli, name):
    data = described(run_cli, name)
    assert set(data["inputs"]) >= {*SHORT, "sample"}
    for task, (query, document, generated) in EXPECTED[name].items():
        assert data["inputs"][task] == {"query": query, "document": document, "generated": generated}, task
    assert data["input_notes"] and all(isinstance(n, str) for n in data["input_notes"])


def test_every_dense_retriever_shows_its_inputs(run_cli):
    from r2med_plugins.dense.models import DENSE_MODELS

    for name, config in DENSE_MODELS.items():
        data = described(run_cli, name)
        for task in R2MED_TASKS:
            texts = data["inputs"][task.short_name]
            assert set(texts) == {"query", "document", "generated"} and all("{text}" in t for t in texts.values())
            if config.backend not in ("openai", "voyage"):  # the instruction, then the text
                assert texts["query"] == config.query_instruction(task.key) + "{text}"
                assert texts["document"] == config.doc_instruction(task.key) + "{text}"
    st = described(run_cli, "st")
    assert st["inputs"]["Biology"] == {"query": "{text}", "document": "{text}", "generated": "{text}"}
    assert "inputs" not in described(run_cli, "bm25")  # not a dense retriever: nothing to show


def test_notes_say_how_the_text_reaches_the_model(run_cli):
    notes = described(run_cli, "reason-embed")["input_notes"]
    assert any("tokenizer.json" in n for n in notes) and any("512" in n for n in notes)
    assert any("EOS appended" in n for n in described(run_cli, "bmr-2b")["input_notes"])
    assert any("JSON-quoted" in n for n in described(run_cli, "voyage")["input_notes"])
    assert any("left out of the pooling" in n for n in described(run_cli, "nvembed")["input_notes"])


def test_the_text_output_groups_tasks_with_the_same_inputs(run_cli):
    code, out, _ = run_cli("plugins", "reason-embed")
    assert code == 0
    lines = out.splitlines()
    rows = [line for line in lines if line.startswith("│") and "{text}" in line]
    tasks_cells = [row.split("│")[1].strip() for row in rows]
    assert "MedXpertQA-Exam, MedQA-Diag" in tasks_cells and "PMC-Clinical, IIYi-Clinical" in tasks_cells
    assert "Medical-Sciences, sample" in tasks_cells
    assert any(".\\nQuery:" in row for row in rows)  # the newline shown as \n, on one line
    code, out, _ = run_cli("plugins", "bge")
    assert "every task" in out and "Represent this sentence for searching relevant passages: {text}" in out


def test_a_plugin_that_cannot_describe_its_inputs_is_named(run_cli, register):
    from r2med_tasks import RetrieverSpec, hookimpl

    class Broken:
        def __call__(self, **options):  # never created by a listing
            raise AssertionError

        def describe_inputs(self, tasks):
            raise RuntimeError("no table")

    class Plugin:
        @hookimpl
        def register_retrievers(self, register):
            register(RetrieverSpec(name="broken-inputs", factory=Broken()))

    register(Plugin())
    code, out, err = run_cli("plugins", "broken-inputs", "--json")
    assert code == 0 and "inputs" not in json.loads(out)
    assert "broken-inputs: cannot describe its inputs (RuntimeError: no table)" in " ".join(err.split())
