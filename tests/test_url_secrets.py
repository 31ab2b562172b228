"""One rule masks a URL's credentials wherever it may show: userinfo (user and password, or a token
alone) and the value of every query parameter except a short list of harmless ones
(``HARMLESS_QUERY_PARAMS``), whatever the parameter's name."""

import json

import pytest

from r2med_tasks.llm import show_url
from r2med_tasks.llm.secrets import HARMLESS_QUERY_PARAMS, mask_urls, redact, url_secrets

S = "hunter2-0123456789"  # the secret value; "0123456789" must never show

# (URL, what it shows as)
CASES = [
    (f"http://h:8000/v1?pwd={S}", "http://h:8000/v1?pwd=***"),
    (f"http://h:8000/v1?pass={S}", "http://h:8000/v1?pass=***"),
    (f"http://h:8000/v1?credential={S}", "http://h:8000/v1?credential=***"),
    (f"http://h:8000/v1?token={S}", "http://h:8000/v1?token=***"),
    (f"https://h/v1?sig={S}&se=2030-01-01", "https://h/v1?sig=***&se=***"),
    (f"https://b.s3.amazonaws.com/v1?X-Amz-Signature={S}", "https://b.s3.amazonaws.com/v1?X-Amz-Signature=***"),
    (f"http://h/v1?key={S}", "http://h/v1?key=***"),
    (f"http://h/v1?zq_never_seen={S}", "http://h/v1?zq_never_seen=***"),
    (f"http://h/v1?{S}", "http://h/v1?***"),  # a bare item: a token
    (f"http://user:{S}@h:8000/v1", "http://***@h:8000/v1"),
    (f"http://{S}:x@h:8000/v1", "http://***@h:8000/v1"),  # the user is masked too
    (f"http://{S}@h:8000/v1", "http://***@h:8000/v1"),  # a token alone in the user's place
    (f"http://u:p@{S}@h/v1", "http://***@h/v1"),  # a password holding "@"
    (f"https://x.openai.azure.com/openai?api-version=2024-10-21&api-key={S}",
     "https://x.openai.azure.com/openai?api-version=2024-10-21&api-key=***"),
    (f"http://h/v1?model=gpt-4o&deployment=prod&pwd={S}#m", "http://h/v1?model=gpt-4o&deployment=prod&pwd=***#m"),
    (f"http://h/v1#m?pwd={S}", "http://h/v1#m?pwd=***"),  # after a spec's '#'
    (f"h:8000/v1?PASS={S}", "h:8000/v1?PASS=***"),  # no scheme
]


@pytest.mark.parametrize("url, shown", CASES)
def test_the_rule(url, shown):
    assert mask_urls(url) == shown == show_url(url)
    assert redact(f"calling {url} failed") == f"calling {shown} failed"
    assert mask_urls(shown) == shown  # masking twice changes nothing


def test_the_allowlist_is_short_and_documented():
    assert HARMLESS_QUERY_PARAMS == {"api-version", "api_version", "model", "deployment"}
    assert "harmless" in mask_urls.__doc__.lower() or "HARMLESS" in mask_urls.__doc__


def test_secrets_echoed_elsewhere_are_masked_too():
    url = f"http://user:{S}@h/v1?credential={S}x&api-version=2024-10-21"
    assert {S, S + "x"} <= set(url_secrets(url)) and "2024-10-21" not in url_secrets(url)
    assert S not in redact(f"the server said: bad credential {S}x for {S}", url_secrets(url))
    assert "1" not in url_secrets("http://h/v1?n=1")  # too short to replace everywhere (masked in URLs)


def _llm_specs(host: str) -> list[str]:
    """A spec per form of credential (the server at ``host``; model ``test-model``)."""
    return [f"http://{host}/v1?{name}={S}-{i}#test-model" for i, name in
            enumerate(("pwd", "pass", "credential", "token", "sig", "X-Amz-Signature", "key", "zq_unknown"))] + [
        f"http://user:{S}-u@{host}/v1#test-model", f"http://{S}-t@{host}/v1#test-model",
        f"http://{host}/v1?api-version=2024-10-21&pwd={S}-a#test-model", f"http://{host}/v1#test-model?pwd={S}-f",
        f"vllm:test-model?credential={S}-v"]


@pytest.mark.parametrize("spec", _llm_specs("127.0.0.1:9"))
def test_no_secret_in_a_dry_run_plan_or_its_folder_names(run_cli, tmp_path, spec):
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={spec}", "--plugin", "bm25", "--tasks", "sample",
                             "--output", tmp_path / "out", "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert S not in out + err and "0123456789" not in out + err
    assert "***" in json.dumps(plan["stages"])
    if "api-version" in spec:
        assert "api-version=2024-10-21" in out  # harmless: shown


def test_no_secret_on_stderr_in_results_or_folder_names_of_a_run(run_cli, chat_server, tmp_path):
    """Real runs against the local server, one per form: those it answers write results, one it
    refuses (401, its message echoing the key) fails with one line; no secret anywhere."""
    host = chat_server.url.removeprefix("http://").removesuffix("/v1")
    specs = _llm_specs(host)[:-1]  # not vllm: (its own address)
    for i, spec in enumerate(specs):
        code, out, err = run_cli("run", "--plugin", "hyde", "-o", f"llm={spec}", "--plugin", "bm25", "--tasks",
                                 "sample", "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--json")
        assert code == 0, err
        assert S not in out + err and "0123456789" not in out + err
    chat_server.models_status = 401
    code, out, err = run_cli("run", "--plugin", "hyde", "-o", f"llm=http://{host}/v1?pwd={S}#test-model", "--plugin",
                             "bm25", "--tasks", "sample", "--output", tmp_path / "out2", "--cache-dir", tmp_path / "c2")
    (line,) = err.strip().splitlines()
    assert code == 2 and "HTTP 401" in line and "pwd=***" in line and S not in line
    written = [p for p in tmp_path.rglob("*")]
    names = "\n".join(str(p.relative_to(tmp_path)) for p in written)
    contents = "".join(p.read_text(errors="replace") for p in written if p.is_file())
    assert S not in names + contents and "0123456789" not in names + contents
