"""Search-R1's loop (``plugins/gar/search_r1.py``) against its reference, PeterGriffinJin/Search-R1
@ a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06: the reference's texts transcribed here verbatim (and
checked against the fetched repository when it is on this machine), the loop run against the local
scripted server in chat and completions mode with every request compared to the one the reference
builds, and end to end through the CLI with BM25 and a dense retriever."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLE, read_jsonl, read_ranking, tokenizer_with_template, write_jsonl

COMMIT = "a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06"
MIRROR = Path("/work/.mirror/PeterGriffinJin+Search-R1/repo")
MODEL = "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-ppo"
CORPUS = {d["id"]: d["text"] for d in read_jsonl(SAMPLE / "corpus.jsonl")}
QUERIES = read_jsonl(SAMPLE / "query.jsonl")

# -- the reference, verbatim at COMMIT ---------------------------------------------------------------
# (path, first line, last line): the source lines, as they are in the file
INFER_L20_24 = ("infer.py", 20, 24, r'''prompt = f"""Answer the given question. \
You must conduct reasoning inside <think> and </think> first every time you get new information. \
After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>. \
You can search as many times as your want. \
If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"""''')
NQ_SEARCH_L32_36 = ("scripts/data_process/nq_search.py", 32, 36, r'''        prefix = f"""Answer the given question. \
You must conduct reasoning inside <think> and </think> first every time you get new information. \
After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>. \
You can search as many times as your want. \
If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"""''')
NQ_SEARCH_L61_63 = ("scripts/data_process/nq_search.py", 61, 63, """\
            example['question'] = example['question'].strip()
            if example['question'][-1] != '?':
                example['question'] += '?'""")
GENERATION_L61_66 = ("search_r1/llm_agent/generation.py", 61, 66, """\
        responses_str = [resp.split('</search>')[0] + '</search>'
                 if '</search>' in resp 
                 else resp.split('</answer>')[0] + '</answer>'
                 if '</answer>' in resp 
                 else resp
                 for resp in responses_str]""")
GENERATION_L391 = ("search_r1/llm_agent/generation.py", 391, 391, r"""                    next_obs.append(f'\n\n<information>{search_results.pop(0).strip()}</information>\n\n')""")
GENERATION_L396_398 = ("search_r1/llm_agent/generation.py", 396, 398, r"""                    next_obs.append(f'\nMy previous action is invalid. \
If I want to search, I should put the query between <search> and </search>. \
If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n')""")
GENERATION_L422_425 = ("search_r1/llm_agent/generation.py", 422, 425, """\
                pattern = r'<(search|answer)>(.*?)</\\1>'
                match = re.search(pattern, prediction, re.DOTALL)
                if match:
                    content = match.group(2).strip()  # Return only the content inside the tags""")
GENERATION_L464_467 = ("search_r1/llm_agent/generation.py", 464, 467, """\
            content = doc_item['document']['contents']
            title = content.split("\\n")[0]
            text = "\\n".join(content.split("\\n")[1:])
            format_reference += f"Doc {idx+1}(Title: {title}) {text}\\n\"""")
EVALUATE_SH = ("scripts/nq_hotpotqa/evaluate.sh", 20, 23, """\
    data.max_prompt_length=4096 \\
    data.max_response_length=500 \\
    data.max_start_length=2048 \\
    data.max_obs_length=500 \\""")
EVALUATE_SH_TURNS = ("scripts/nq_hotpotqa/evaluate.sh", 63, 65, """\
    max_turns=4 \\
    retriever.url="http://127.0.0.1:8000/retrieve" \\
    retriever.topk=3""")
RAY_TRAINER_L508 = ("verl/trainer/ppo/ray_trainer.py", 508, 508, "                    'do_sample': False,")
TRANSCRIBED = [INFER_L20_24, NQ_SEARCH_L32_36, NQ_SEARCH_L61_63, GENERATION_L61_66, GENERATION_L391, GENERATION_L396_398,
               GENERATION_L422_425, GENERATION_L464_467, EVALUATE_SH, EVALUATE_SH_TURNS, RAY_TRAINER_L508]

# Qwen/Qwen2.5-7B-Instruct's chat template (tokenizer_config.json "chat_template"; the Search-R1
# checkpoints are trained from it and ship it), transcribed.
QWEN25_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
# what it renders for one user message with the generation prompt, written out
QWEN25_BEFORE = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" \
                "<|im_start|>user\n"
QWEN25_AFTER = "<|im_end|>\n<|im_start|>assistant\n"


def literal(source: str) -> str:
    """The text of the reference's one f-string literal in ``source``: backslash-newlines joined,
    ``\\n`` escapes as newlines (what Python makes of it; the only escapes these hold)."""
    start = re.search(r'f("""|\'|")', source)
    quote = start.group(1)
    body = source[start.end():].rsplit(quote, 1)[0]
    return body.replace("\\\n", "").replace("\\n", "\n")


def reference_prompt(question: str) -> str:
    question = question.strip()
    question = question if question[-1] == "?" else question + "?"  # nq_search.py L61-63
    return literal(INFER_L20_24[3]).replace("{question}", question)


INVALID = literal(GENERATION_L396_398[3])


def info(*ids: str) -> str:
    """The observation of a search that found ``ids``, written out as the reference's f-strings
    (L391, L467) make it for one-line documents: title = the text, an empty rest, then the whole
    stripped (so the last document loses its trailing space and newline)."""
    docs = "".join(f"Doc {i}(Title: {CORPUS[d]}) \n" for i, d in enumerate(ids, 1))
    return f"\n\n<information>{docs.strip()}</information>\n\n"


@pytest.mark.parametrize("path, first, last, text", TRANSCRIBED, ids=[f"{p}:L{a}-{b}" for p, a, b, _ in TRANSCRIBED])
def test_transcriptions_match_the_fetched_repository(path, first, last, text):
    if not (MIRROR / "HEAD").exists():
        pytest.skip(f"PeterGriffinJin/Search-R1 is not fetched at {MIRROR}")
    shown = subprocess.run(["git", "-C", str(MIRROR), "show", f"{COMMIT}:{path}"], capture_output=True, text=True,
                           check=False)
    if shown.returncode:
        pytest.skip(f"{COMMIT[:7]}:{path} is not in the fetched repository")
    assert "\n".join(shown.stdout.split("\n")[first - 1:last]) == text


def test_the_prompt_and_messages_are_the_reference_texts():
    from r2med_plugins.gar import search_r1

    assert literal(INFER_L20_24[3]) == literal(NQ_SEARCH_L32_36[3])  # inference = training prompt
    assert search_r1.PROMPT.format(question="{question}") == literal(INFER_L20_24[3])
    for question in ("What is X?", "  Why does the heart fail  \n", QUERIES[1]["text"]):
        assert search_r1.prompt(question) == reference_prompt(question)
    assert search_r1.prompt("Why\n").endswith("Question: Why?\n")
    assert search_r1.INVALID_ACTION == INVALID
    assert search_r1.INFORMATION == literal(GENERATION_L391[3]).replace("{search_results.pop(0).strip()}",
                                                                         "{results}")
    assert search_r1.DOCUMENT.replace("{i}", "{idx+1}") == literal(GENERATION_L464_467[3].splitlines()[-1])
    for piece in (search_r1.PROMPT, search_r1.INFORMATION, search_r1.DOCUMENT, search_r1.INVALID_ACTION):
        assert piece in search_r1.PROMPTS


def test_limits_and_sampling_are_the_evaluation_configs():
    from r2med_plugins.gar import search_r1

    assert search_r1.defaults(MODEL) == {"temperature": 0.0, "top_p": None, "top_k": None, "repetition_penalty": None,
                                         "max_tokens": 500, "seed": None, "max_turns": 4, "search_limit": None,
                                         "docs": 3}
    assert search_r1.leaderboard_name(MODEL) == "Qwen2.5-7b-it-em-ppo"
    assert search_r1.leaderboard_name(MODEL.replace("7b", "3b")) == "Qwen2.5-3b-it-em-ppo"
    assert search_r1.leaderboard_name("/models/SearchR1-nq_hotpotqa_train-qwen2.5-3b-it-em-ppo/") == \
        "Qwen2.5-3b-it-em-ppo"
    assert search_r1.leaderboard_name("PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-em-ppo") is None  # base


def test_documents_actions_and_cuts_follow_the_reference():
    from r2med_plugins.gar import search_r1

    from r2med_tasks.llm.answers import Generation
    from r2med_tasks.components.searcher import Hit

    hits = [Hit("a", "First line\nsecond line\nthird", 1.0), Hit("b", "Only a title", 0.5)]
    assert search_r1.passages(hits) == "Doc 1(Title: First line) second line\nthird\nDoc 2(Title: Only a title) \n"
    assert search_r1.information(hits) == \
        "\n\n<information>Doc 1(Title: First line) second line\nthird\nDoc 2(Title: Only a title)</information>\n\n"
    assert search_r1.information([]) == "\n\n<information></information>\n\n"
    # the first complete pair decides, its content stripped; an unclosed or crossed pair is no action
    assert search_r1.action_of("<search> a </search><answer>b</answer>") == ("search", "a")
    assert search_r1.action_of("<answer>\nb\n</answer><search>a</search>") == ("answer", "b")
    assert search_r1.action_of("<search>q <answer>a</answer> x</search>") == ("search", "q <answer>a</answer> x")
    assert search_r1.action_of("<search>q</answer>") == (None, "")

    def gen(text, stop=None, finish="stop"):
        return Generation(text, 1, 1, finish, MODEL, stop=stop)

    assert search_r1.response_text(gen("<search>q", "</search>")) == ("<search>q</search>", False)
    # a </answer> before the </search> does not end the generation: the reference cuts at </search>
    assert search_r1.response_text(gen("<answer>a</answer> x <search>q", "</search>")) == \
        ("<answer>a</answer> x <search>q</search>", False)
    assert search_r1.response_text(gen("<answer>a</answer> more </answer>")) == ("<answer>a</answer>", False)
    assert search_r1.response_text(gen("no tags", finish="length")) == ("no tags", False)
    # a server that does not name the stop string: a generation ending inside <search> was cut by it
    assert search_r1.response_text(gen("<think>x</think><search> q ")) == ("<think>x</think><search> q </search>", True)
    assert search_r1.response_text(gen("<search> q ", finish="length")) == ("<search> q ", False)
    # R2MED's rule: the first answer, stripped; the whole text, unstripped, without one
    assert search_r1.answer_of(" <answer> a </answer><answer>b</answer>") == "a"
    assert search_r1.answer_of(" no answer \n") == " no answer \n"


# -- the loop against the scripted server --------------------------------------------------------
QUESTION = QUERIES[0]["text"]  # "Why does untreated type 1 diabetes cause weight loss and fruity-smelling breath?\n..."
# what the model writes at each step, and what the server generates beyond the cut
WRITTEN = [
    "<think>I need to know where the smell comes from.</think>\n<search> ketone bodies acetone breath </search>",
    "<think>The documents mention ketones.</think> I am not sure yet.",
    "<search>insulin deficiency weight loss</search>",
    "<think>One more.</think>\n<search>diabetic ketoacidosis</search>",
    "<think>Now I know.</think>\n<answer> Fat breakdown makes ketone bodies such as acetone </answer>",
]
BEYOND = ["\n\n<information>invented</information>", "", "\nmore", " trailing", "\n\nAnything after the answer."]
FOUND = {"ketone bodies acetone breath": ["s-endo-02", "s-endo-03", "s-nephro-06"],
         "insulin deficiency weight loss": ["s-endo-01", "s-endo-02", "s-cardio-01"],
         "diabetic ketoacidosis": ["s-endo-03", "s-nephro-06", "s-endo-01"]}


def assistant_text(context, partial) -> str:
    """What the assistant has written so far, in either mode (completions: the prompt's tail)."""
    return context.split(QWEN25_AFTER, 1)[1] if isinstance(context, str) else partial


def scripted(context, partial) -> str:
    so_far = assistant_text(context, partial)
    step = so_far.count("</information>") + so_far.count("Let me try again.")  # observations so far
    return WRITTEN[step] + BEYOND[step]


def searcher(calls):
    from r2med_tasks.components.searcher import Hit

    def search(text, k):
        calls.append((text, k))
        return [Hit(d, CORPUS[d], 1.0 / (i + 1)) for i, d in enumerate(FOUND[text][:k])]

    return search


@pytest.fixture
def tokenizer_dir(tmp_path_factory):
    """A small tokenizer folder (the installed MiniLM's files) holding Qwen2.5's chat template."""
    return tokenizer_with_template(tmp_path_factory.mktemp("qwen25-template"), QWEN25_TEMPLATE)


def loop(server, tmp_path, template=None, settings=None, tokenizer=None, calls=None):
    """``search_r1.run`` as ``SearchAgent`` runs it: the real client, the generation cache."""
    from r2med_plugins.gar import search_r1

    from r2med_tasks.llm import ChatClient
    from r2med_tasks.llm.cache import GenerationCache, continue_cached

    server.serve(MODEL, MODEL)
    client = ChatClient(MODEL, base_url=server.url, timeout=5.0, temperature=0.0,
                        template=str(template) if template else None)
    cache = GenerationCache(tmp_path / "chat.jsonl")
    resolved = {"max_turns": 4, "search_limit": None, "docs": 3, "max_tokens": 500, **(settings or {})}
    return search_r1.run(QUESTION, task_key="Stack-Medical", model=MODEL, settings=resolved,
                         turn=lambda t: continue_cached(client, cache, [t])[0],
                         search=searcher([] if calls is None else calls), tokenizer=tokenizer)


# the assistant text before each of the five requests, written out
PARTIALS = [""]
PARTIALS.append(WRITTEN[0] + info(*FOUND["ketone bodies acetone breath"]))
PARTIALS.append(PARTIALS[-1] + WRITTEN[1] + INVALID)
PARTIALS.append(PARTIALS[-1] + WRITTEN[2] + info(*FOUND["insulin deficiency weight loss"]))
PARTIALS.append(PARTIALS[-1] + WRITTEN[3] + info(*FOUND["diabetic ketoacidosis"]))
OUTPUT = PARTIALS[-1] + WRITTEN[4]


@pytest.mark.parametrize("mode", ["chat", "completions"])
def test_the_loop_builds_every_request_as_the_reference(chat_server, tmp_path, tokenizer_dir, mode):
    """Search, an invalid action, two more searches (the fourth turn is the last whose search runs),
    the final turn answers: each request continues exactly the text the reference's rolling state
    holds, and the answer is R2MED's."""
    chat_server.script = scripted
    calls = []
    result = loop(chat_server, tmp_path, tokenizer_dir if mode == "completions" else None, calls=calls)
    user = reference_prompt(QUESTION)
    assert user.endswith("where does the smell come from?\n")
    bodies = [r.body for r in chat_server.requests]
    if mode == "chat":
        expected = [{"model": MODEL, "messages": [{"role": "user", "content": user}], "temperature": 0.0,
                     "max_tokens": 500, "stop": ["</search>"]}]
        expected += [{"model": MODEL, "messages": [{"role": "user", "content": user},
                                                   {"role": "assistant", "content": partial}],
                      "temperature": 0.0, "max_tokens": 500, "stop": ["</search>"],
                      "continue_final_message": True, "add_generation_prompt": False} for partial in PARTIALS[1:]]
        assert [r.path for r in chat_server.requests] == ["/v1/chat/completions"] * 5
    else:
        expected = [{"model": MODEL, "prompt": QWEN25_BEFORE + user + QWEN25_AFTER + partial, "max_tokens": 500,
                     "temperature": 0.0, "stop": ["</search>"]} for partial in PARTIALS]
        assert [r.path for r in chat_server.requests] == ["/v1/completions"] * 5
    assert bodies == expected
    assert calls == [(q, 3) for q in FOUND]
    # R2MED's rule takes the first <answer>...</answer> of the whole text: here the one of the
    # invalid-action message ("...between <answer> and </answer>..."), not the model's
    assert result.output == OUTPUT and result.answer == "and"
    trajectory = result.trajectory
    assert trajectory["turns"][-1]["content"] == "Fat breakdown makes ketone bodies such as acetone"
    assert [t["text"] for t in trajectory["turns"]] == WRITTEN
    assert [(t["action"], t["final"], t["stop"], t.get("observation")) for t in trajectory["turns"]] == [
        ("search", False, "</search>", "information"), (None, False, None, "invalid action"),
        ("search", False, "</search>", "information"), ("search", False, "</search>", "information"),
        ("answer", True, None, None)]
    assert trajectory["searches"] == [{"query": q, "ids": ids} for q, ids in FOUND.items()]
    assert trajectory["tokens"] == {"prompt": sum(t["prompt_tokens"] for t in trajectory["turns"]),
                                    "completion": sum(t["completion_tokens"] for t in trajectory["turns"])}
    assert trajectory["ended"] == "answer" and trajectory["reference"].endswith(COMMIT)
    json.dumps(trajectory)  # kept as JSON lines
    # the same loop again: every turn from the cache
    again = loop(chat_server, tmp_path, tokenizer_dir if mode == "completions" else None)
    assert chat_server.count == 5 and again.output == OUTPUT


def test_the_final_turn_runs_no_search(chat_server, tmp_path):
    """One turn (max_turns=1), then the final one: its search is neither run nor answered, and
    without an <answer> R2MED's query is the whole text."""
    chat_server.script = lambda context, partial: "<search>diabetic ketoacidosis</search>" if partial else \
        "<search>insulin deficiency weight loss</search>"
    calls = []
    result = loop(chat_server, tmp_path, settings={"max_turns": 1}, calls=calls)
    first = "<search>insulin deficiency weight loss</search>"
    assert result.output == first + info(*FOUND["insulin deficiency weight loss"]) + \
        "<search>diabetic ketoacidosis</search>"
    assert result.answer == result.output and calls == [("insulin deficiency weight loss", 3)]
    assert result.trajectory["searches"][1] == {"query": "diabetic ketoacidosis", "message": "not run: the final turn"}
    assert result.trajectory["ended"] == "final turn" and chat_server.count == 2


def test_search_limit_docs_unnamed_stops_and_cut_observations(chat_server, tmp_path):
    """Options beyond the reference: ``search_limit`` answers a search over it with the empty
    block (what the reference's do_search=False gives); ``docs``; a server that does not name
    the stop string; with the model's tokenizer, observations cut to their first 500 tokens."""

    class Characters:  # a tokenizer with one token per character
        def encode(self, text, add_special_tokens=True):
            assert add_special_tokens is False
            return [ord(c) for c in text]

        def decode(self, ids):
            return "".join(map(chr, ids))

    def model(context, partial):
        return ["<search>ketone bodies acetone breath</search>", "<search>diabetic ketoacidosis</search>",
                "<answer>A</answer> and <search>insulin deficiency weight loss</search>"][partial.count("</search>")]

    chat_server.script = model
    chat_server.stop_reasons = False
    calls = []
    result = loop(chat_server, tmp_path, settings={"search_limit": 1, "docs": 2}, tokenizer=Characters(), calls=calls)
    found = info(*FOUND["ketone bodies acetone breath"][:2])
    assert len(found) > 500
    assert result.output == "<search>ketone bodies acetone breath</search>" + found[:500] + \
        "<search>diabetic ketoacidosis</search>\n\n<information></information>\n\n" + \
        "<answer>A</answer> and <search>insulin deficiency weight loss</search>"
    assert calls == [("ketone bodies acetone breath", 2)] and result.answer == "A"
    turns = result.trajectory["turns"]
    assert [t.get("stop_inferred", False) for t in turns] == [True, True, True]
    assert [t.get("observation_cut", False) for t in turns] == [True, False, False]
    assert result.trajectory["searches"][1] == {"query": "diabetic ketoacidosis",
                                                "message": "over the search limit (1)"}
    assert result.trajectory["observation_limit"] == 500


# -- end to end through the CLI ------------------------------------------------------------------
def first_title(partial: str) -> str:
    return partial.split("Doc 1(Title: ", 1)[1].split(")", 1)[0]


def agent_script(context, partial):
    """Search with the question's first words, then answer with the first document's first words."""
    if "<information>" not in partial:
        question = context[-1]["content"].split("Question: ", 1)[1]
        return f"<think>Let me search.</think>\n<search> {' '.join(question.split()[:8])} </search>"
    return f"<think>Found it.</think>\n<answer> {' '.join(first_title(partial).split()[:12])} </answer>"


def cli(run_cli, tmp_path, server, *retriever):
    return run_cli("run", "--plugin", "search-r1", "-o", f"llm={server.url}#{MODEL}", *retriever,
                   "--tasks", "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json")


def one_dir(out: str) -> Path:
    (folder,) = json.loads(out)["results_dirs"]
    return Path(folder)


def trec_of(results) -> Path:
    (folder,) = results.results_dirs
    return Path(folder) / "R2MEDSampleRetrieval.trec"


def with_texts(tmp_path, name, texts) -> Path:
    """The sample task with each query's text replaced: where a reference run reads its queries."""
    folder = tmp_path / name / "sample"
    shutil.copytree(SAMPLE, folder)
    write_jsonl(folder / "query.jsonl", [{**q, "text": texts[q["id"]]} for q in QUERIES])
    return folder


def test_end_to_end_with_bm25(run_cli, evaluate, tmp_path, chat_server):
    chat_server.serve(MODEL, MODEL)
    chat_server.script = agent_script
    code, out, err = cli(run_cli, tmp_path, chat_server, "--plugin", "bm25")
    assert code == 0, err
    folder = one_dir(out)
    rows = {r["query_id"]: r for r in read_jsonl(folder / "R2MEDSampleRetrieval.trajectories.jsonl")}
    assert chat_server.count == 20 and set(rows) == {q["id"] for q in QUERIES}
    for q in QUERIES:
        row = rows[q["id"]]
        assert row["query"] == q["text"]
        assert [t["action"] for t in row["turns"]] == ["search", "answer"] and row["ended"] == "answer"
    starts = [r.body["messages"] for r in chat_server.requests if len(r.body["messages"]) == 1]
    assert sorted(m[0]["content"] for m in starts) == sorted(reference_prompt(q["text"]) for q in QUERIES)
    # every search got BM25's top 3 of the corpus, formatted as the reference does
    searched = with_texts(tmp_path, "searched", {qid: r["searches"][0]["query"] for qid, r in rows.items()})
    top3 = read_ranking(trec_of(evaluate("bm25", data_dir=searched, output="top3", top_k=3)))
    for request in [r for r in chat_server.requests if len(r.body["messages"]) == 2]:
        (user, assistant) = request.body["messages"]
        row = next(r for r in rows.values() if reference_prompt(r["query"]) == user["content"])
        ids = [d for d, _ in top3[row["query_id"]]]
        assert row["searches"][0]["ids"] == ids
        assert assistant["content"] == row["turns"][0]["text"] + info(*ids)
        answer = " ".join(CORPUS[ids[0]].split(")", 1)[0].split()[:12])  # what the script answered
        assert row["output"] == assistant["content"] + f"<think>Found it.</think>\n<answer> {answer} </answer>"
        assert row["answer"] == answer
    # BM25 then searched with the answers alone (R2MED's rule for reasoning models' outputs)
    answered = with_texts(tmp_path, "answered", {qid: r["answer"] for qid, r in rows.items()})
    assert read_ranking(folder / "R2MEDSampleRetrieval.trec") == \
        read_ranking(trec_of(evaluate("bm25", data_dir=answered, output="ref")))
    # a rerun asks nothing
    before = (folder / "R2MEDSampleRetrieval.trajectories.jsonl").read_text()
    code, _, err = cli(run_cli, tmp_path, chat_server, "--plugin", "bm25", "--overwrite")
    assert code == 0, err
    assert chat_server.count == 20 and "0 requests sent, 20 answered from the cache" in err
    assert (folder / "R2MEDSampleRetrieval.trajectories.jsonl").read_text() == before


def test_the_run_is_named_as_the_leaderboard_row(run_cli, tmp_path):
    code, out, err = run_cli("run", "--plugin", "search-r1", "-o", f"llm=http://127.0.0.1:9/v1#{MODEL}", "--plugin",
                             "bm25", "--tasks", "sample", "--output", tmp_path, "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["pipeline"] == "Search-R1 (Qwen2.5-7b-it-em-ppo) + BM25"


def test_end_to_end_with_a_dense_retriever(evaluate, chat_server, small_model_path):
    """The answers reach a dense retriever as [text, answer]: the mean of the query's and the
    answer's embeddings, as R2MED's dense runs did."""
    from sentence_transformers import SentenceTransformer

    chat_server.serve(MODEL, MODEL)
    chat_server.script = agent_script
    trec = trec_of(evaluate("search-r1", "st", llm=f"{chat_server.url}#{MODEL}", model=str(small_model_path),
                            top_k=5))
    assert chat_server.count == 20
    rows = {r["query_id"]: r for r in read_jsonl(trec.parent / "R2MEDSampleRetrieval.trajectories.jsonl")}
    ours = read_ranking(trec)
    model = SentenceTransformer(str(small_model_path), device="cpu")
    ids = list(CORPUS)
    docs = model.encode([CORPUS[d] for d in ids], normalize_embeddings=True)
    texts = model.encode([q["text"] for q in QUERIES], normalize_embeddings=True)
    answers = model.encode([rows[q["id"]]["answer"] for q in QUERIES], normalize_embeddings=True)
    for q, vector in zip(QUERIES, (texts + answers) / 2):  # the mean, not re-normalised
        scores = docs @ (vector / np.linalg.norm(vector))
        assert [d for d, _ in ours[q["id"]]] == [ids[i] for i in np.argsort(-scores, kind="stable")[:5]]
