"""Every number written is finite JSON: prices are bounded, and a server's token counts that are not
counts are a warning and counted as unknown (the cost too), never as 0."""

import json
import logging
import math
from pathlib import Path

import pytest


def strict(text: str):
    """JSON as the standard has it: no NaN, no Infinity (mteb's and the leaderboard's readers refuse them)."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("price", ["1e308,1e308", "inf,1", "nan,1", "1,2e6"])
def test_a_price_beyond_bounds_is_refused_in_one_line(run_cli, chat_server, tmp_path, price):
    code, _, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={chat_server.url}#test-model", "-o",
                           f"price={price}", "--plugin", "bm25", "--tasks", "sample", "--output", tmp_path / "out")
    assert code == 2 and "price" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert chat_server.count == 0 and not (tmp_path / "out").exists()


def test_the_largest_price_gives_finite_json(run_cli, chat_server, tmp_path):
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={chat_server.url}#test-model", "-o",
                             "price=1000000,1000000", "--plugin", "bm25", "--tasks", "sample", "--output",
                             tmp_path / "out", "--json")
    assert code == 0, err
    usd = strict(out)["tasks"][0]["usage"]["usd"]
    assert math.isfinite(usd) and usd > 0
    for path in (tmp_path / "out").rglob("*.json*"):
        if path.parent.name == "r2med" or path.suffix == ".jsonl":  # r2med's own files: strict JSON
            for line in (path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]):
                strict(line)
        elif path.name.startswith("R2MED"):  # a TaskResult, as mteb writes it: NaN only where mteb puts it
            text = path.read_text()
            assert "Infinity" not in text and all("nauc" in line for line in text.splitlines() if "NaN" in line)


@pytest.mark.parametrize("bad", [{"prompt_tokens": -1000000}, {"completion_tokens": 1e308},
                                 {"prompt_tokens": "x"}, {"completion_tokens": 10**30}])
def test_token_counts_that_are_not_counts_are_unknown_never_zero(evaluate, chat_server, tmp_path, caplog, bad):
    chat_server.usage_values = bad
    with caplog.at_level(logging.WARNING, logger="r2med_tasks.llm"):
        outcome = evaluate("hyde", "bm25", llm=f"{chat_server.url}#test-model-{abs(hash(str(bad)))}",
                           price=(2.5, 10.0))
    assert any("not counts" in r.getMessage() and "unknown" in r.getMessage() for r in caplog.records)
    (folder,) = {Path(d) for d in outcome.results_dirs}
    cost = strict((folder / "r2med" / "R2MEDSampleRetrieval.cost.json").read_text())
    usage = cost["usage"]
    assert usage["requests"] == 10 and usage["unknown_tokens"] == 10 and usage["usd"] is None
    assert usage["prompt_tokens"] == usage["completion_tokens"] == 0  # of the answers whose counts are known
    records = [json.loads(line) for line in (folder / "R2MEDSampleRetrieval.generations.jsonl").read_text().splitlines()]
    assert len(records) == 10 and all(r["samples"][0]["prompt_tokens"] is None for r in records)
