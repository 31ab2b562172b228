"""Offline tests for the GAR prompts and reasoning-trace rules (r2med_plugins.gar).

Expected strings are written out literally, copied from R2MED/R2MED src/instrcution.py,
src/generate_hypothetical_doc.py, src/base.py, src/eval_bench_BM25.py and src/eval_bench.py
(indexed commit 45cbac5).
"""

from __future__ import annotations

import inspect
import json

import pytest

from r2med_plugins.gar import prompts, query2doc_examples, reasoning
from r2med_plugins.gar.prompts import build_messages, build_prompt
from r2med_plugins.gar.reasoning import is_reasoning_llm, query_text, strip_reasoning

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}

# A query text with a newline, a brace pair and trailing whitespace: str.format must insert it
# verbatim (the query is a format *argument*, never part of the template).
QUERY = "Why do I only breathe out of one nostril?\nIs {this} normal?  "

# Stand-in few-shot examples, used ONLY to test how the Query2Doc prompt is assembled; the real
# ones live in upstream src/example.py, which this build does not bundle.
FAKE_EXAMPLES = {k: f"<examples for {k}>" for k in prompts.DATASET_KEYS}


# ---------------------------------------------------------------------------------------------
# Exact prompts
# ---------------------------------------------------------------------------------------------


def test_hyde_biology_exact():
    assert build_messages("hyde", "Stack-Biology", QUERY) == [
        SYSTEM,
        {
            "role": "user",
            "content": "Please write a passage to help answer the Biology post.\n"
            "Post: Why do I only breathe out of one nostril?\nIs {this} normal?  \n"
            "Passage: ",
        },
    ]


def test_hyde_iiyi_exact_and_hub_name():
    expected = [
        SYSTEM,
        {
            "role": "user",
            "content": "Please write a similar case to help diagnose the Clinical Case.\n"
            "Case: A 45-year-old man with fever.\n"
            "Similar Case: ",
        },
    ]
    assert build_messages("hyde", "IIYiPatients-EN", "A 45-year-old man with fever.") == expected
    assert build_messages("hyde", "IIYi-Clinical", "A 45-year-old man with fever.") == expected


def test_query2doc_medqa_diag_prefix_and_real_test():
    messages = build_messages("query2doc", "MedQA-Diag", QUERY, examples=FAKE_EXAMPLES)
    assert messages[0] == SYSTEM
    content = messages[1]["content"]
    prefix = "Write a passage to help answer the Medical Exam.\n\n###Examples:###\n"
    real_test = (
        "\n\n###Real Test:###\n"
        "Exam: Why do I only breathe out of one nostril?\nIs {this} normal?  \n"
        "Passage: "
    )
    assert content.startswith(prefix)
    assert content.endswith(real_test)
    assert content == prefix + "<examples for MedQA-Diag>" + real_test


def test_query2doc_biology_wording_quirk():
    content = build_prompt("query2doc", "Stack-Biology", "q", examples=FAKE_EXAMPLES)
    assert content == (
        "Write a passage that help answer the Biology post.\n\n###Examples:###\n"
        "<examples for Stack-Biology>\n\n###Real Test:###\nPost: q\nPassage: "
    )


def test_query2doc_case_keys():
    content = build_prompt("query2doc", "PMC-Clinical", "q", examples=FAKE_EXAMPLES)
    assert content == (
        "Write a similar case to help diagnose the Clinical Case.\n\n###Examples:###\n"
        "<examples for PMCPatients>\n\n###Real Test:###\nCase: q\nSimilar Case: "
    )


def test_query2doc_examples_go_through_two_format_passes():
    # Upstream: outer.format(EXAMPLE=ex, TEXT="{TEXT}") then .format(TEXT=query), so doubled
    # braces in the examples come out single and a lone brace cannot be formatted at all.
    doubled = dict(FAKE_EXAMPLES, **{"MedQA-Diag": "code {{x}}"})
    assert "code {x}\n\n###Real Test" in build_prompt("query2doc", "MedQA-Diag", "q", examples=doubled)
    single = dict(FAKE_EXAMPLES, **{"MedQA-Diag": "code {x}"})
    with pytest.raises(KeyError):
        build_prompt("query2doc", "MedQA-Diag", "q", examples=single)


def test_query2doc_without_examples_raises(monkeypatch):
    monkeypatch.setattr(prompts, "QUERY2DOC_EXAMPLES", {})
    with pytest.raises(prompts.Query2DocExamplesUnavailable):
        build_messages("query2doc", "MedQA-Diag", "q")


LONG_PASSAGE = " ".join(f"w{i}" for i in range(600))
LONG_PASSAGE_CUT = " ".join(f"w{i}" for i in range(512))


def test_lamer_pmc_clinical_two_passages_exact():
    passages = ["First case.\nSecond line\n\n  indented\tand tabbed  ", LONG_PASSAGE]
    messages = build_messages("lamer", "PMCPatients", "A case.", passages)
    assert messages == [
        SYSTEM,
        {
            "role": "user",
            "content": "Give a Clinical Case and its possible similar cases (most of these cases are "
            "non-similar). Please write a correct similar case that help diagnose the case.\n"
            "Just output the correct case, don't explanation.\n\n"
            "Case: A case.\n\n"
            "Possible Similar Cases: \n"
            "[1]. First case. Second line indented and tabbed\n"
            "[2]. " + LONG_PASSAGE_CUT,
        },
    ]
    assert build_messages("lamer", "PMC-Clinical", "A case.", passages) == messages


def test_lamer_relevant_passages_wording_and_top10():
    passages = [f"doc {i}" for i in range(12)]
    content = build_prompt("lamer", "Stack-Medical", "q", passages)
    assert content == (
        "Give a Medical Science post and its possible relevant passages (most of these passages "
        "are wrong). Please write a correct passage that help answer the post.\n"
        "Just output the correct passage, don't explanation.\n\nPost: q\n\n"
        "Possible Relevant Passages: "
        + "".join(f"\n[{i + 1}]. doc {i}" for i in range(10))
    )
    assert "[11]" not in content and "doc 10" not in content


def test_lamer_passage_block_and_cut_text():
    assert prompts.format_lamer_passages([]) == ""
    assert prompts.format_lamer_passages(["a\nb"]) == "\n[1]. a b"
    assert prompts.cut_text("  x \u00a0 y\r\nz ") == "x y z"
    assert prompts.cut_text(" ".join(["t"] * 513)) == " ".join(["t"] * 512)
    with pytest.raises(TypeError):
        prompts.format_lamer_passages("a single string")


def test_lamer_requires_passages_and_others_reject_them():
    with pytest.raises(ValueError):
        build_messages("lamer", "PMC-Treat", "q")
    with pytest.raises(ValueError):
        build_messages("hyde", "PMC-Treat", "q", ["p"])


def test_every_key_has_every_method():
    keys = set(prompts.DATASET_KEYS)
    assert len(keys) == 8
    for table in (prompts.HYDE_TEMPLATES, prompts.QUERY2DOC_OUTER_TEMPLATES, prompts.LAMER_TEMPLATES):
        assert set(table) == keys
    assert set(prompts.HUB_NAME_TO_KEY.values()) == keys
    for key in prompts.DATASET_KEYS:
        for method in prompts.METHODS:
            passages = ["p"] if method == "lamer" else None
            messages = build_messages(method, key, "QUERY-TEXT", passages, examples=FAKE_EXAMPLES)
            assert [m["role"] for m in messages] == ["system", "user"]
            assert messages[1]["content"].count("QUERY-TEXT") == 1
            assert "{TEXT}" not in messages[1]["content"]
            assert "{PASSAGE}" not in messages[1]["content"]
            assert "{EXAMPLE}" not in messages[1]["content"]


def test_unknown_key_and_method():
    with pytest.raises(KeyError):
        build_messages("hyde", "Biology-typo", "q")
    with pytest.raises(ValueError):
        build_messages("search-r1", "Stack-Biology", "q")


def test_sky_system_prompt():
    messages = build_messages("hyde", "Stack-Biology", "q", llm="sky-32b")
    assert messages[0]["content"] == prompts.SKY_SYSTEM_PROMPT
    sky = prompts.SKY_SYSTEM_PROMPT
    assert sky.startswith(
        "Your role as an assistant involves thoroughly exploring questions through a systematic "
        "long thinking process before providing"
    )
    assert "<|begin_of_thought|> {thought with steps separated with '\n\n'} <|end_of_thought|> " in sky
    assert sky.endswith("Now, try to solve the following question through the above guidelines:")
    assert build_messages("hyde", "Stack-Biology", "q", llm="gpt4")[0] == SYSTEM


# ---------------------------------------------------------------------------------------------
# No label leakage
# ---------------------------------------------------------------------------------------------


def test_prompts_never_contain_labels():
    record = {
        "id": "0",
        "text": "Why do I only breathe out of one nostril?",
        "doc_id": ["nasal_cycle/Nasal_cycle_3.txt"],
        "answer": "GOLD-ANSWER: the nasal cycle alternates congestion",
        "body_system": "Respiratory",
    }
    for method in prompts.METHODS:
        passages = ["some BM25 passage"] if method == "lamer" else None
        messages = build_messages(method, "Stack-Biology", record["text"], passages, examples=FAKE_EXAMPLES)
        dumped = json.dumps(messages)
        assert record["answer"] not in dumped and "GOLD-ANSWER" not in dumped
        assert record["doc_id"][0] not in dumped
        with pytest.raises(TypeError):
            build_messages(method, "Stack-Biology", record, passages, examples=FAKE_EXAMPLES)
    params = set(inspect.signature(build_messages).parameters)
    assert not params & {"answer", "doc_id", "record", "qrels"}


# ---------------------------------------------------------------------------------------------
# Reasoning-trace stripping (src/base.py::split_response_for_r1)
# ---------------------------------------------------------------------------------------------


def test_r1_list():
    assert reasoning.R1_MODEL_LIST == (
        "r1-llama-8b", "r1-qwen-32b", "r1-llama-70b", "qwq-32b", "huatuo-o1-8b", "huatuo-o1-70b",
        "sky-32b", "qwen3-32b", "qwen3-8b", "qwen-7b-ins", "qwen-3b-ins",
    )
    for llm in reasoning.R1_MODEL_LIST:
        assert is_reasoning_llm(llm)
    for llm in ("gpt4", "o3-mini", "qwen-7b", "qwen-72b", "llama-70b", "qwen-32b", "deepseek-r1"):
        assert not is_reasoning_llm(llm)


@pytest.mark.parametrize("llm", ["r1-qwen-32b", "r1-llama-70b", "r1-llama-8b", "qwq-32b", "qwen3-32b", "qwen3-8b"])
def test_strip_think(llm):
    assert strip_reasoning("<think>\nplan </think> more</think>\n\n  Answer text \n", llm) == "more</think>\n\n  Answer text"
    assert strip_reasoning("hmm...\n</think>\n\nPassage: X\n", llm) == "Passage: X"
    # no tag: whole text, NOT stripped
    assert strip_reasoning("  unfinished thinking \n", llm) == "  unfinished thinking \n"
    assert strip_reasoning("</think>", llm) == ""


@pytest.mark.parametrize("llm", ["huatuo-o1-70b", "huatuo-o1-8b"])
def test_strip_huatuo(llm):
    text = "## Thinking\n\nLet me think.\n\n## Final Response\n\nThe passage.\nLine 2.\n"
    assert strip_reasoning(text, llm) == "The passage.\nLine 2."
    # first occurrence wins, greedy to the end
    assert strip_reasoning("a Final Response b Final Response c", llm) == "b Final Response c"
    assert strip_reasoning("## Final Response", llm) == ""
    assert strip_reasoning(" no marker here \n", llm) == " no marker here \n"


def test_strip_sky():
    llm = "sky-32b"
    text = (
        "<|begin_of_thought|> steps <|end_of_thought|>\n"
        "<|begin_of_solution|>\n\n The solution \n<|end_of_solution|> tail "
        "<|begin_of_solution|> second <|end_of_solution|>"
    )
    assert strip_reasoning(text, llm) == "The solution"
    assert strip_reasoning("<|begin_of_solution|> cut off", llm) == "<|begin_of_solution|> cut off"
    assert strip_reasoning(" plain ", llm) == " plain "


@pytest.mark.parametrize("llm", ["qwen-7b-ins", "qwen-3b-ins"])
def test_strip_search_r1(llm):
    text = "<think>x</think><search>q</search><answer> first\nanswer </answer> <answer>second</answer>"
    assert strip_reasoning(text, llm) == "first\nanswer"
    assert strip_reasoning(" no answer tag ", llm) == " no answer tag "


def test_strip_non_reasoning_llm_is_identity():
    text = "<think>kept</think> Final Response <answer>a</answer>"
    for llm in ("gpt4", "o3-mini", "qwen-7b", "unknown-model"):
        assert strip_reasoning(text, llm) == text


# ---------------------------------------------------------------------------------------------
# Query construction per method x retriever family
# ---------------------------------------------------------------------------------------------


def test_bm25_combination():
    assert query_text("hyde", "bm25", "Q?", "DOC", "qwen-7b") == "DOC"
    assert query_text("query2doc", "bm25", "Q?", "DOC", "gpt4") == "Q?Q? DOC"
    assert query_text("lamer", "bm25", "Q?", "DOC", "qwen-72b") == "Q? DOC"


def test_dense_combination():
    assert query_text("hyde", "dense", "Q?", "DOC", "qwen-7b") == ["Q?", "DOC"]
    assert query_text("lamer", "dense", "Q?", "DOC", "gpt4") == ["Q?", "DOC"]
    assert query_text("query2doc", "dense", "Q?", "DOC", "qwen-72b") == "Q?[SEP]DOC"


@pytest.mark.parametrize("method", ["hyde", "query2doc", "lamer", "search-o1"])
def test_r1_mode_combination(method):
    raw = "<think>long reasoning</think>\n\nANSWER"
    assert query_text(method, "bm25", "Q?", raw, "qwq-32b") == "ANSWER"
    assert query_text(method, "dense", "Q?", raw, "qwq-32b") == ["Q?", "ANSWER"]


def test_search_r1_combination():
    raw = "<think>t</think><answer> Paris </answer>"
    assert query_text("search-r1", "bm25", "Q?", raw, "qwen-7b-ins") == "Paris"
    assert query_text("search-r1", "dense", "Q?", raw, "qwen-3b-ins") == ["Q?", "Paris"]


def test_query_text_rejects_unknowns():
    with pytest.raises(ValueError):
        query_text("hyde", "splade", "q", "d", "gpt4")
    with pytest.raises(ValueError):
        query_text("rm3", "bm25", "q", "d", "gpt4")
    with pytest.raises(TypeError):
        query_text("hyde", "bm25", {"text": "q"}, "d", "gpt4")


# ---------------------------------------------------------------------------------------------
# Sampling, models, chat template
# ---------------------------------------------------------------------------------------------


def test_sampling_and_models():
    assert prompts.SAMPLING == {
        "api": {"temperature": 0.8, "top_p": 0.8},
        "vllm": {"temperature": 0.7, "seed": 42, "max_tokens": 10240},
    }
    assert prompts.sampling_params("gpt4") == {"temperature": 0.8, "top_p": 0.8}
    assert prompts.sampling_params("qwen-7b") == {"temperature": 0.7, "seed": 42, "max_tokens": 10240}
    assert prompts.backend("o3-mini") == "api"
    assert prompts.MODEL_DICT["gpt4"] == "gpt-4o-2024-11-20"
    published = prompts.PUBLISHED_LLMS
    assert published["gpt4"].model_id == "gpt-4o-2024-11-20"
    assert published["qwen-7b"].model_id == "Qwen/Qwen2.5-7B-Instruct"
    assert set(published["qwen-72b"].methods) == {"hyde", "query2doc", "lamer"}
    assert sorted(n for n, p in published.items() if "query2doc" in p.methods) == ["gpt4", "qwen-72b", "qwen-7b"]
    assert sorted(n for n, p in published.items() if "hyde" in p.methods) == sorted(
        ["gpt4", "o3-mini", "qwen-7b", "qwen-32b", "qwen-72b", "llama-70b",
         "r1-qwen-32b", "r1-llama-70b", "huatuo-o1-70b", "qwq-32b"]
    )
    for name, p in published.items():
        assert p.name == name
        assert p.r1_mode == is_reasoning_llm(name)
    assert [n for n, p in published.items() if p.r1_mode] == [
        "r1-qwen-32b", "r1-llama-70b", "huatuo-o1-70b", "qwq-32b", "qwen3-32b", "qwen-7b-ins", "qwen-3b-ins"
    ]


def test_chat_template_kwargs():
    assert prompts.chat_template_kwargs("gpt4") is None
    assert prompts.chat_template_kwargs("qwen-7b") == {"add_generation_prompt": True}
    assert prompts.chat_template_kwargs("qwen3-32b") == {"add_generation_prompt": True, "enable_thinking": True}
    assert prompts.chat_template_kwargs("qwen3-8b-no-thinking") == {
        "add_generation_prompt": True, "enable_thinking": False,
    }


# ---------------------------------------------------------------------------------------------
# Loading upstream src/example.py
# ---------------------------------------------------------------------------------------------


def _example_py(tmp_path, body):
    path = tmp_path / "example.py"
    path.write_text(body, encoding="utf-8")
    return path


def test_load_examples_from_python_literal(tmp_path):
    entries = ",\n".join(f'    "{k}": """Post: a\nPassage: b"""' for k in prompts.DATASET_KEYS)
    path = _example_py(tmp_path, f"Example = {{\n{entries}\n}}\n")
    examples = query2doc_examples.load_query2doc_examples(path)
    assert examples["MedQA-Diag"] == "Post: a\nPassage: b"


def test_load_examples_from_python_with_names_and_concat(tmp_path):
    body = 'ex1 = "E1"\nex2 = "E2"\nsep = "\\n\\n"\nExample = {\n'
    body += "".join(f'    "{k}": ex1 + sep + ex2,\n' for k in prompts.DATASET_KEYS) + "}\n"
    body += 'import os\nos.system("echo never executed")\n'
    examples = query2doc_examples.load_query2doc_examples(_example_py(tmp_path, body))
    assert set(examples) == set(prompts.DATASET_KEYS)
    assert examples["PMC-Treat"] == "E1\n\nE2"


def test_load_examples_json_missing_key(tmp_path, monkeypatch):
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"Stack-Biology": "x"}), encoding="utf-8")
    with pytest.raises(ValueError, match="missing"):
        query2doc_examples.load_query2doc_examples(partial)

    full = tmp_path / "examples.json"
    full.write_text(json.dumps(FAKE_EXAMPLES), encoding="utf-8")
    loaded = query2doc_examples.load_query2doc_examples(full)
    assert build_prompt("query2doc", "MedQA-Diag", "q", examples=loaded) == build_prompt(
        "query2doc", "MedQA-Diag", "q", examples=FAKE_EXAMPLES
    )
