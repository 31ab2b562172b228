"""The LLM chat client, the generation cache, and the OpenAI-SDK plumbing every API client shares.

- ``ChatClient(model, base_url=...)``: chat completions through the official ``openai`` SDK
  (``openai.OpenAI(...).chat.completions.create``), one request per messages list, from a small
  thread pool, answers in input order (``generate``). Works with OpenAI, vLLM, Ollama or anything
  speaking that API.
- ``parse_llm_spec("openai:gpt-4o" | "vllm:NAME" | "ollama:NAME" | "http://host:port/v1#NAME")``:
  the ``ChatClient`` keyword arguments for a command-line spec; ``llm_model_name(spec)``.
- ``GenerationCache(path)``: a JSONL journal, one line per answer, appended (and fsynced) as each
  answer arrives, so a killed run keeps everything already paid for; ``key_for`` its keys.
- ``generate_cached(client, cache, requests)``: asks the server which model it serves
  (``ChatClient.served_model``, ``GET /models``), then sends only what the cache lacks for that model.
- ``Turn`` and ``ChatClient.continue_turns(turns)``: extend an assistant turn until a stop string
  (search agents), through ``/chat/completions`` with vLLM's ``continue_final_message`` or, given
  ``template=`` (a tokenizer), a chat template rendered here and ``/completions``;
  ``continue_cached(client, cache, turns)`` as ``generate_cached``, keyed by ``turn_key``.
- ``Usage``: requests sent, cache hits, tokens (reasoning tokens where the server reports them) and
  dollars, each answer priced as it arrives (``-o price=IN,OUT``, else the dated table shipped in
  ``data/prices/prices.json``: ``price_table()``, ``price_of(model)``); ``cost(model, usage)``.
- Shared with the embedding clients (``r2med_plugins.dense.api``): ``openai_client`` (the one place
  an ``openai.OpenAI`` is built: base URL, key, timeout, no SDK retries, no redirects),
  ``APICaller`` (the retry loop: ``RetryPolicy``, ``Retry-After``, one-line ``UserError``s; its
  retries are one status line, a ``RetryLine``, which a run hands its clients through
  ``Context.retries`` and ``ShowsRetries``), ``api_key``, ``scrub``/``redact``/``show_url`` (on
  ``mask_urls``), ``map_concurrently``.
- ``openai_base_url()``: where ``openai:`` goes, ``$OPENAI_BASE_URL`` as the SDK reads it.

Keys come from an environment variable, read on every call and never stored (not on the client,
not in the cache); they and anything shaped like one (``sk-...``, a ``Bearer`` token, and in a URL
its userinfo and every query value but a few harmless ones: ``mask_urls``, the one rule) are
scrubbed from every message this module raises, logs or shows, and from the log lines of the SDK
and its HTTP library. Importing this module imports no ``openai``/``httpx``.
"""

from __future__ import annotations

import email.utils
import functools
import hashlib
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import parse_qsl, unquote_plus, urlsplit, urlunsplit

from .errors import UserError, reason
from .journal import Journal

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

# --------------------------------------------------------------------------------------------
# Keys: from the environment, never shown.
# --------------------------------------------------------------------------------------------
KEY_LIKE = re.compile(r"\b(?:sk|pa)-[A-Za-z0-9_*.\-]{3,}")
_AUTH_VALUE = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9_*.\-+/=~]{8,}")

HARMLESS_QUERY_PARAMS = frozenset({"api-version", "api_version", "model", "deployment"})
"""Query parameters whose values are shown as they are: Azure OpenAI's ``api-version`` (a date),
a ``model`` or ``deployment`` name (which the run names anyway). Every other parameter's value is
masked, whatever its name (``pwd``, ``pass``, ``credential``, ``sig``, ``X-Amz-Signature``, a name
never seen before), as the openai SDK treats ``api_key``: a name cannot tell a secret apart."""

# A URL's userinfo (user, password, or a token in the user's place): up to the last "@" before the
# path; "[^/\s]" rather than the RFC's set so a password holding "?", "#" or "@" is masked whole.
# A scheme starts where a run of scheme characters starts (not at every "\b": "a.a.a..." would
# make the search quadratic).
_SCHEME = r"(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*://"
_URL_USERINFO = re.compile(rf"({_SCHEME})[^/\s]*@", re.I)
# A URL (to mask its query items, bare ones included).
_URL = re.compile(rf"{_SCHEME}[^\s\"'<>]*", re.I)
# A "?name=value" / "&name=value" / ";name=value" anywhere (a URL without a scheme, a spec's fragment).
_QUERY_ITEM = re.compile(r"([?&;])([^=&;?#\s\"'<>]*)=([^&#\s\"'<>]*)")
_SHORTEST_ECHOED = 4  # secrets shorter than this are masked where a URL holds them, not everywhere


def _harmless(name: str) -> bool:
    return unquote_plus(name).strip().lower() in HARMLESS_QUERY_PARAMS


def _mask_query_item(m: re.Match) -> str:
    sep, name, value = m.groups()
    return m.group(0) if not value or value == "***" or _harmless(name) else f"{sep}{name}=***"


def _mask_url(m: re.Match) -> str:
    """One URL with its bare query items (``?TOKEN``) masked; ``name=value`` items and the userinfo
    are left to ``mask_urls``' other rules."""
    url = m.group(0)
    head, sep, rest = url.partition("?")
    if not sep:
        return url
    query, hash_, fragment = rest.partition("#")
    items = [item if item in ("&", ";", "", "***") or "=" in item or _harmless(item) else "***"
             for item in re.split(r"([&;])", query)]
    return head + sep + "".join(items) + hash_ + fragment


def mask_urls(text: str) -> str:
    """THE rule for what of a URL may be shown, applied to every URL (and every ``?name=value``)
    in ``text``: its userinfo (user and password, or a token alone) becomes ``***@``, and the value
    of every query parameter becomes ``***`` unless the parameter is in ``HARMLESS_QUERY_PARAMS``
    (a bare item, ``?TOKEN``, counts as a value). Host, port, path and fragment are kept."""
    text = _URL_USERINFO.sub(r"\1***@", text)
    text = _URL.sub(_mask_url, text)
    return _QUERY_ITEM.sub(_mask_query_item, text)


def scrub(text: str, key: str | Sequence[str] | None = None, limit: int | None = 300) -> str:
    """One line without ``key`` (or any of several) nor anything shaped like a secret: ``sk-``/``pa-``
    keys (OpenAI echoes a masked one on 401), a URL's userinfo and query values (``mask_urls``), a
    ``Bearer``/``Basic`` token. Cut to ``limit`` characters (None: no cut)."""
    text = " ".join(redact(text, key).split())
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


def redact(text: str, key: str | Sequence[str] | None = None) -> str:
    """``text`` with ``key`` (or each of several) and anything shaped like a secret as ``***``."""
    keys = [key] if isinstance(key, str) else list(key or ())
    for k in sorted((k for k in keys if k), key=len, reverse=True):  # a longer secret before its parts
        text = text.replace(k, "***")
    text = _AUTH_VALUE.sub(r"\1 ***", text)
    text = mask_urls(text)
    return KEY_LIKE.sub("***", text)


def url_secrets(url: str) -> list[str]:
    """What ``mask_urls`` hides in ``url`` (user, password, every query value not harmless), as
    written and decoded, for replacing wherever else it shows up (a server echoing it back).
    Values shorter than 4 characters are left out: replaced everywhere they would garble messages
    (inside the URL itself ``mask_urls`` still masks them)."""
    found: list[str] = []
    m = re.match(r"[a-z][a-z0-9+.\-]*://([^/\s]*)@", url, re.I)
    if m:
        user, _, password = m.group(1).partition(":")
        found += [user, password]
    query = url.partition("?")[2].partition("#")[0]
    for item in re.split(r"[&;]", query):
        name, eq, value = item.partition("=")
        if not _harmless(name):
            found.append(value if eq else name)
    found += [unquote_plus(s) for s in found]
    return sorted({s for s in found if len(s) >= _SHORTEST_ECHOED and s != "***"}, key=len, reverse=True)


def api_key(env: str, *, required: bool, who: str) -> str | None:
    """The stripped value of ``$env``; ``None`` when unset or blank, unless ``required`` (UserError)."""
    key = os.environ.get(env, "").strip()
    if key:
        return key
    if required:
        raise UserError(f"{who} needs an API key: set the environment variable {env} (it is read from there only)")
    return None


class _ScrubLogs(logging.Filter):
    """Rewrites a log record's text through ``scrub`` (no cut): the SDK and its HTTP library log
    full URLs, which may hold a key (``http://user:KEY@host``, ``?api-key=KEY``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a broken record is the logging module's to report
            return True
        clean = redact(text)
        if clean != text:
            record.msg, record.args = clean, ()
        return True


_SCRUBBED_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "openai._base_client")
_scrub_installed = False


def _install_log_scrubbing() -> None:
    """Once per process: a ``_ScrubLogs`` filter on the loggers that may print a URL or a header."""
    global _scrub_installed
    if not _scrub_installed:
        for name in _SCRUBBED_LOGGERS:
            logging.getLogger(name).addFilter(_ScrubLogs())
        _scrub_installed = True


# --------------------------------------------------------------------------------------------
# The OpenAI SDK, built in one place.
# --------------------------------------------------------------------------------------------
_NO_KEY = "no-key"  # the SDK insists on a key; this placeholder is never sent (see ``no_auth_header``)


def check_base_url(base_url: str | None, who: str, example: str) -> str:
    """``base_url`` without a trailing ``/``; a ``UserError`` unless it is an http(s) URL with a host."""
    url = (base_url or "").strip().rstrip("/")
    if not url.lower().startswith(("http://", "https://")) or not urlsplit(url).hostname:
        raise UserError(f"{who}: base_url must be an http(s) URL such as {example}, got {scrub(str(base_url))!r}")
    return url


def endpoint_url(base_url: str, path: str) -> str:
    """``path`` under ``base_url``, before its query string (where the SDK sends it)."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{path}"))


def show_url(url: str) -> str:
    """``url`` as it may appear in a message or a repr (``mask_urls``; its secrets echoed elsewhere too)."""
    return scrub(url, url_secrets(url), limit=None)


def openai_client(base_url: str, *, key: str | None, timeout: float):
    """An ``openai.OpenAI`` for ``base_url`` that leaves retrying to ``APICaller``.

    - ``max_retries=0``: the SDK's own retries (0.5 s doubling to 8 s, ``Retry-After`` up to 120 s
      and never retried beyond) cannot be aborted, recorded or shortened by tests; ``APICaller``
      does the same job with those knobs;
    - the HTTP client does not follow redirects (httpx would follow one to another origin, with
      the key's header): a 3xx comes back as an error naming where it points; it holds no key and
      is shared by every client with the same timeout (building one costs ~0.1 s of TLS setup),
      so do not ``close()`` what this returns;
    - ``key`` None sends no ``Authorization`` header at all (pass ``no_auth_header`` as each
      request's ``extra_headers``): the SDK needs some key, so it gets a placeholder;
    - a query string in ``base_url`` (``?api-key=...``) goes to ``default_query``, so it is kept on
      every request instead of being glued to the path.
    """
    import openai  # heavy: imported on first use only

    _install_log_scrubbing()
    parts = urlsplit(base_url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    root = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return openai.OpenAI(api_key=key or _NO_KEY, base_url=root, timeout=timeout, max_retries=0,
                         default_query=query or None, http_client=_http_client(timeout))


_http_clients: dict[float, Any] = {}
_http_lock = threading.Lock()


def _http_client(timeout: float):
    """The process's redirect-refusing HTTP client for ``timeout`` (the SDK's httpx flavour)."""
    import openai

    with _http_lock:
        if timeout not in _http_clients:
            _http_clients[timeout] = openai.DefaultHttpxClient(follow_redirects=False, timeout=timeout)
        return _http_clients[timeout]


def no_auth_header(key: str | None) -> dict | None:
    """``extra_headers`` for a request: removes the ``Authorization`` header when there is no key."""
    if key:
        return None
    import openai

    return {"Authorization": openai.Omit()}


# --------------------------------------------------------------------------------------------
# Retrying.
# --------------------------------------------------------------------------------------------
class BadResponse(Exception):
    """Raised by a ``parse`` callback: the reply is unusable, so the request is retried.

    ``advice`` (optional) replaces the caller's ``malformed_advice`` in the final error.
    """

    def __init__(self, detail: str, advice: str | None = None) -> None:
        super().__init__(detail)
        self.advice = advice


class Aborted(Exception):
    """A request gave up because ``abort`` was set (another request of the same call failed)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How ``APICaller`` retries: at most ``max_retries`` retries; retry ``n`` waits
    ``min(backoff_max, backoff * 2**(n-1))`` seconds times a random 0.5..1 (jitter), or the
    server's ``Retry-After``/``retry-after-ms`` capped at ``retry_after_max``. ``sleep`` (tests)
    is called with each wait instead of waiting; tests may also set tiny ``backoff`` values."""

    max_retries: int = 6
    backoff: float = 1.0
    backoff_max: float = 30.0
    retry_after_max: float = 60.0
    sleep: Callable[[float], None] | None = field(default=None, compare=False)

    def check(self, who: str) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise UserError(f"{who}: max_retries must be an integer >= 0, got {self.max_retries!r}")
        for name in ("backoff", "backoff_max", "retry_after_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise UserError(f"{who}: {name} must be positive seconds, got {value!r}")

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt ``attempt`` (1-based) when the server names none."""
        return min(self.backoff_max, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)


DEFAULT_RETRY = RetryPolicy()
"""What clients use for the retry options they are not given (read when a client is built; tests
swap in tiny delays with ``monkeypatch.setattr("r2med_tasks.llm.DEFAULT_RETRY", RetryPolicy(...))``)."""


def retry_policy(retry: RetryPolicy | None = None, **options: Any) -> RetryPolicy:
    """``retry`` (default ``DEFAULT_RETRY``) with each of ``options`` (``RetryPolicy`` fields) not None."""
    base = retry if retry is not None else DEFAULT_RETRY
    return replace(base, **{name: value for name, value in options.items() if value is not None})


class RetryLine:
    """The API requests waiting to retry, as one status line that each change replaces:
    ``show(line)`` with the latest retry (``retry 2 of 6 in 2.0 s: <failure> (<url>)``, and how many
    other requests wait), ``show(None)`` once none waits. A run has one (``Context.retries``, a row
    of the runner's progress display); ``RetryLine()`` shows nothing, and a retry is then only a
    DEBUG log record: never a printed line per retry, only the final error once retries are spent."""

    def __init__(self, show: Callable[[str | None], None] | None = None) -> None:
        self.show = show
        self.waiting: dict[int, str] = {}  # thread of a waiting call -> its latest retry line
        self.lock = threading.Lock()

    def update(self, call: int, line: str | None) -> None:
        """``line``: what ``call`` waits for; None: it no longer waits (answered, or gave up)."""
        with self.lock:
            if line is None and self.waiting.pop(call, None) is None:
                return
            if line is not None:
                self.waiting[call] = line
            if self.show is not None:
                others = len(self.waiting) - 1
                text = line or (list(self.waiting.values())[-1] if self.waiting else None)
                self.show(f"{text} (and {others} other request(s) waiting to retry)" if text and others > 0
                          else text)


@runtime_checkable
class ShowsRetries(Protocol):
    """A client (or a model holding one) whose API retries can be shown on a run's ``RetryLine``:
    ``Context.llm`` hands a chat client its context's line, and the dense retriever its model."""

    def show_retries(self, line: RetryLine) -> None: ...


def server_message(payload: bytes) -> str:
    """The human part of an error body: ``error.message``/``detail``, else the start of the body."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return payload[:500].decode("utf-8", "replace")
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            for name in ("message", "detail"):
                if isinstance(err.get(name), str):
                    return err[name]
        if isinstance(err, str):
            return err
        if isinstance(obj.get("detail"), str):
            return obj["detail"]
    return json.dumps(obj)[:500]


def retry_after(headers, cap: float) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), capped."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return min(cap, max(0.0, float(value) / 1000))
        except ValueError:
            pass
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return min(cap, max(0.0, seconds))


def default_fix(status: int, *, api_key_env: str, model: str, base_url: str, key_sent: bool,
                location: str | None = None) -> str:
    """What to tell the user about a refused request (a 3xx or a 4xx other than 408/429)."""
    if status == 401:
        return f"check {api_key_env}" if key_sent else f"the server wants a key: set {api_key_env}"
    if status == 403:
        return f"check that the key in {api_key_env} may use {model}"
    if status == 404:
        return f"check base_url ({base_url}) and the model name {model!r}"
    if 300 <= status < 400:
        where = f" to {location}" if location else ""
        return f"the server redirects{where}; set base_url to where it points (redirects are not followed)"
    return "the request was refused; see the message"


class APICaller:
    """Calls ``send()`` (one SDK request, returning the reply's body bytes) until ``parse`` accepts
    a reply, following a ``RetryPolicy``; holds no key (it is passed to each ``call``, for scrubbing).

    - retried: HTTP 408/429/5xx (waiting the server's ``Retry-After`` when it names one), timeouts,
      connection errors, and replies ``parse`` rejects with ``BadResponse``; once retries are
      spent, ``UserError("<url> failed <n> time(s) for <model>, the last with <failure>; <advice>")``;
    - not retried: a 3xx (redirects are not followed) or another 4xx: ``client_error(status,
      message)`` (optional, given the scrubbed server message) may raise its own exception or
      return the advice, else ``default_fix``; then ``UserError("<url> refused the request
      (HTTP <status> ...); <advice>")``;
    - every text shown is scrubbed of the key, of the secrets in ``url`` and of anything key-like;
      the exceptions leave with no chained SDK exception (whose text would be unscrubbed);
    - a wait ends early, raising ``Aborted``, when ``abort`` is set (another request failed);
    - each retry is a DEBUG record on ``logger`` and an update of ``retries`` (a ``RetryLine``),
      never a printed line (eight concurrent requests to a dead server would print 48).
    """

    def __init__(self, url: str, *, model: str, api_key_env: str, base_url: str | None = None,
                 timeout: float = 60.0, retry: RetryPolicy = RetryPolicy(),
                 malformed_advice: str = "check that base_url serves an OpenAI-compatible API",
                 client_error: Callable[[int, str], str | None] | None = None,
                 logger: logging.Logger | None = None, retries: RetryLine | None = None) -> None:
        self._secrets = url_secrets(url)
        self.url = show_url(url)
        self.model = redact(model)  # shown only: a spec's "#m?pwd=..." must not show
        self.api_key_env = api_key_env
        self.base_url = show_url(base_url if base_url is not None else url.rsplit("/", 1)[0])
        self.timeout = timeout
        self.retry = retry
        self.malformed_advice = malformed_advice
        self._client_error = client_error
        self._log = logger or log
        self._retries = retries if retries is not None else RetryLine()

    def __repr__(self) -> str:
        return f"APICaller({self.url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def scrub(self, text: str, key: str | None, limit: int = 200) -> str:
        return scrub(text, [key or "", *self._secrets], limit)

    def call(self, send: Callable[[], bytes], parse: Callable[[bytes], T], *, key: str | None,
             abort: threading.Event | None = None) -> T:
        """``parse(send())`` for the first reply ``parse`` accepts; see the class for the rest. Its
        retries show on the ``retries`` line until it returns."""
        try:
            return self._call(send, parse, key=key, abort=abort if abort is not None else threading.Event())
        finally:
            self._retries.update(threading.get_ident(), None)

    def _call(self, send: Callable[[], bytes], parse: Callable[[bytes], T], *, key: str | None,
              abort: threading.Event) -> T:
        import openai

        attempts = self.retry.max_retries + 1
        failure, advice = "", ""
        for attempt in range(1, attempts + 1):
            if abort.is_set():
                raise Aborted()
            wait_s = None
            try:
                payload = send()
            except openai.APITimeoutError:
                failure, advice = f"no answer within {self.timeout:g} s", "check the network, or raise timeout"
            except openai.APIConnectionError as e:
                cause = e.__cause__ or e.__context__
                detail = self.scrub(str(cause), key, 120) if cause is not None and str(cause) else type(e).__name__
                failure, advice = f"connection failed ({detail})", "check the network and base_url"
            except openai.APIStatusError as e:
                status, headers = e.status_code, e.response.headers
                message = self.scrub(server_message(e.response.content), key)
                if status in (408, 429) or status >= 500:
                    wait_s = retry_after(headers, self.retry.retry_after_max)
                    failure = f"HTTP {status} {_reason(e.response)}".rstrip() + (f": {message}" if message else "")
                    advice = ("the API is rate-limiting: wait and rerun, lower concurrency, or raise max_retries"
                              if status == 429 else "the service is failing: try again later")
                else:
                    raise self._refused(status, _reason(e.response), message, key, headers) from None
            else:
                try:
                    return parse(payload)
                except BadResponse as e:
                    failure = f"a malformed response ({self.scrub(str(e), key)})"
                    advice = e.advice or self.malformed_advice
            if attempt == attempts:
                break
            delay = wait_s if wait_s is not None else self.retry.delay(attempt)
            line = f"retry {attempt} of {self.retry.max_retries} in {delay:.1f} s: {failure} ({self.url})"
            self._log.debug("%s", line)
            self._retries.update(threading.get_ident(), line)
            if self.retry.sleep is not None:
                self.retry.sleep(delay)
            elif abort.wait(delay):
                raise Aborted()
        raise UserError(f"{self.url} failed {attempts} time(s) for {self.model}, the last with {failure}; {advice}")

    def _refused(self, status: int, reason: str, message: str, key: str | None, headers) -> UserError:
        fix = self._client_error(status, message) if self._client_error is not None else None
        if fix is None:
            location = headers.get("Location") if headers is not None and 300 <= status < 400 else None
            fix = default_fix(status, api_key_env=self.api_key_env, model=self.model, base_url=self.base_url,
                              key_sent=key is not None, location=self.scrub(location, key) if location else None)
        detail = f"HTTP {status} {reason}".rstrip() + (f": {message}" if message else "")
        return UserError(f"{self.url} refused the request ({detail}); {fix}")


def _reason(response) -> str:
    return getattr(response, "reason_phrase", "") or ""


def map_concurrently(fn: Callable[[T, threading.Event], R], items: Sequence[T], concurrency: int,
                     name: str = "r2med-api", *, finish_running: bool = False) -> list[R]:
    """``[fn(item, abort) for item in items]`` from ``concurrency`` threads, in input order.

    The first exception is re-raised once it happens: ``abort`` is set (so ``APICaller.call`` in
    the other calls stops at its next attempt or wait) and queued items never start. With
    ``finish_running``, calls already running are waited for first (a request in flight finishes,
    so what it returns is not lost and nothing runs on after the raise); never on
    ``KeyboardInterrupt``.
    """
    abort = threading.Event()
    if len(items) <= 1 or concurrency == 1:
        return [fn(item, abort) for item in items]
    pool = ThreadPoolExecutor(max_workers=min(concurrency, len(items)), thread_name_prefix=name)
    try:
        futures = [pool.submit(fn, item, abort) for item in items]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in futures:
            if f in done and f.exception() is not None:
                raise f.exception()
        results = [f.result() for f in futures]
    except BaseException as e:
        abort.set()
        pool.shutdown(wait=finish_running and isinstance(e, Exception), cancel_futures=True)
        raise
    pool.shutdown()
    return results


# --------------------------------------------------------------------------------------------
# Generations, usage, prices.
# --------------------------------------------------------------------------------------------
OPENAI_BASE_URL = "https://api.openai.com/v1"
OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"
VLLM_BASE_URL = "http://127.0.0.1:8000/v1"

SAMPLING_PARAMS = ("temperature", "top_p", "max_tokens", "seed", "top_k", "repetition_penalty")
EXTRA_BODY_PARAMS = frozenset({"top_k", "repetition_penalty", "continue_final_message", "add_generation_prompt"})
"""Body keys the openai SDK has no argument for (vLLM's sampling and chat-template extras): sent
through its ``extra_body``, in the same JSON body."""

# OpenAI's reasoning models (o1, o3-mini, o4-mini, gpt-5...) reject "max_tokens" and take
# "max_completion_tokens" (which counts their hidden reasoning tokens too).
_COMPLETION_TOKENS_MODELS = re.compile(r"^(?:openai/)?(?:o\d|gpt-5)", re.I)
_CONTEXT_ERROR = re.compile(r"maximum (?:context|input) length|context_length_exceeded|context window", re.I)


@dataclass(frozen=True)
class Generation:
    """One completion: the first choice's text, the tokens billed, why it ended and the model that answered.

    ``finish_reason``: the server's (``"stop"``: a stop string or the end of the turn, ``"length"``:
    ``max_tokens`` spent). ``stop``: for a continued turn (``ChatClient.continue_turns``), the stop
    string that ended it, as the server reports it (vLLM's ``stop_reason``); the text never
    includes it. None when no stop string ended it (the model ended its turn, ``max_tokens``) or when
    the server does not say which (OpenAI and Ollama report only ``finish_reason: "stop"``).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    model: str
    stop: str | None = None
    reasoning_tokens: int = 0  # of completion_tokens, where the server says (usage.completion_tokens_details)


@dataclass
class Usage:
    """A tally: ``sent`` requests answered by the API (tokens are theirs: what was billed) and
    ``cached`` answers taken from the cache instead (which cost nothing).

    Each answer is priced as it arrives (:meth:`add`): at ``price`` (dollars per million input and
    output tokens: a component's ``-o price=IN,OUT``) when set, else at the table's price of the
    model that answered, else of ``model`` (the one asked for); ``usd`` is None once an answer had
    no known price. Safe to share between threads. ``tally()`` copies the counts; ``a - b`` and
    ``a + b`` subtract and add them (what a call added: the runner's per-task usage)."""

    sent: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    # the dollars of the answers whose price is known, and how many had none (``usd``); equality
    # compares the counts, the model and the price, not these
    priced_usd: float = field(default=0.0, compare=False)
    unpriced: int = field(default=0, compare=False)
    model: str = ""
    price: tuple[float, float] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    COUNTS = ("sent", "cached", "prompt_tokens", "completion_tokens", "reasoning_tokens", "priced_usd", "unpriced")

    @property
    def usd(self) -> float | None:
        """Dollars of the answers sent; None when one had no known price (cache hits cost nothing)."""
        return None if self.unpriced else self.priced_usd

    def describe(self, model: str) -> str:
        """One line for the end of a run: requests, cache hits, tokens and, when known, the cost."""
        dollars = self.usd if self.sent else None
        price = f", about {usd_text(dollars)}" if dollars is not None else ""
        reasoning = f" ({self.reasoning_tokens:,} reasoning)" if self.reasoning_tokens else ""
        return (f"{redact(model)}: {self.sent} requests sent, {self.cached} answered from the cache, "
                f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens{reasoning}{price}")

    def add(self, generation: Generation) -> None:
        """Count an answer the API sent, priced (see the class)."""
        price = self.price or price_of(generation.model) or price_of(self.model)
        with self._lock:
            self.sent += 1
            self.prompt_tokens += generation.prompt_tokens
            self.completion_tokens += generation.completion_tokens
            self.reasoning_tokens += generation.reasoning_tokens
            if price is None:
                self.unpriced += 1
            else:
                self.priced_usd += dollars(price, generation.prompt_tokens, generation.completion_tokens)

    def add_cached(self, n: int) -> None:
        """Count ``n`` answers taken from the cache."""
        with self._lock:
            self.cached += n

    def tally(self) -> Usage:
        """The counts, copied (without ``model`` and ``price``)."""
        with self._lock:
            return Usage(**{name: getattr(self, name) for name in self.COUNTS})

    def __add__(self, other: Usage) -> Usage:
        mine, theirs = self.tally(), other.tally()
        return Usage(**{name: getattr(mine, name) + getattr(theirs, name) for name in self.COUNTS})

    def __sub__(self, other: Usage) -> Usage:
        mine, theirs = self.tally(), other.tally()
        return Usage(**{name: getattr(mine, name) - getattr(theirs, name) for name in self.COUNTS})

    def to_json(self) -> dict[str, Any]:
        """As a task's cost file and ``--json`` show it."""
        t = self.tally()
        return {"requests": t.sent, "cached": t.cached, "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens, "reasoning_tokens": t.reasoning_tokens,
                "usd": None if t.usd is None else round(t.usd, 10)}


def usd_text(amount: float) -> str:
    """Dollars as a summary shows them: cents, or four decimals under a dollar ("$0.0012")."""
    return f"${amount:.2f}" if amount >= 1 or amount == 0 else f"${amount:.4f}"


def dollars(price: tuple[float, float], prompt_tokens: int, completion_tokens: int) -> float:
    """What tokens cost at ``price`` (dollars per million input and output tokens)."""
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


PRICE_HELP = ("dollars per million input and output tokens, IN,OUT (e.g. 2.5,10), for the reported cost "
              "(default: the price table shipped with r2med, r2med_tasks/data/prices/prices.json; a model it lacks "
              "has no cost)")


def price_field() -> tuple[Any, Any]:
    """The ``-o price=IN,OUT`` option of every component that calls an LLM (a runtime option: never
    in a run's identity), as ``options_model`` takes it."""
    from typing import Annotated

    from pydantic import Field

    amount = Annotated[float, Field(ge=0)]
    return tuple[amount, amount] | None, Field(None, description=PRICE_HELP)


@functools.cache
def price_table() -> dict[str, tuple[float, float]]:
    """The shipped price table (``r2med_tasks/data/prices/prices.json``: each model's input and output
    price, its source and when it was checked): model -> (input, output), dollars per million tokens."""
    from importlib.resources import files

    table = json.loads(files("r2med_tasks").joinpath("data", "prices", "prices.json").read_text(encoding="utf-8"))
    return {model: (float(entry["input"]), float(entry["output"])) for model, entry in table["models"].items()}


def price_of(model: str | None) -> tuple[float, float] | None:
    """A model's price in the shipped table (``price_table()``), None when it has none."""
    return price_table().get(model) if model else None


def cost(model: str, usage: Usage, prices: dict[str, tuple[float, float]] | None = None) -> float | None:
    """Dollars for ``usage``'s tokens at ``model``'s price (the shipped table unless given); None if unknown."""
    price = (price_table() if prices is None else prices).get(model)
    if price is None:
        return None
    return dollars(price, usage.prompt_tokens, usage.completion_tokens)


# --------------------------------------------------------------------------------------------
# Specs.
# --------------------------------------------------------------------------------------------
SPEC_FORMS = ("openai:MODEL ($OPENAI_BASE_URL, else api.openai.com; key in OPENAI_API_KEY)",
              "vllm:MODEL (http://127.0.0.1:8000/v1)",
              "ollama:MODEL (http://127.0.0.1:11434/v1)",
              "http(s)://HOST[:PORT]/PATH#MODEL (any OpenAI-compatible server)")


def openai_base_url() -> str:
    """``$OPENAI_BASE_URL`` (read as the openai SDK reads it, when no URL is given; blank counts as
    unset), else the OpenAI API: so a user who points the SDK at a local server points ``openai:``
    there too."""
    url = os.environ.get("OPENAI_BASE_URL", "").strip()
    return check_base_url(url, "$OPENAI_BASE_URL", VLLM_BASE_URL) if url else OPENAI_BASE_URL


def llm_model_name(spec: str) -> str:
    """The model an LLM spec names, for display: after the last ``#`` of a URL spec, else after
    ``backend:`` ("openai:gpt-4o" -> "gpt-4o"); anything shaped like a secret masked (``redact``)."""
    return redact(spec.rpartition("#")[2] if "#" in spec else spec.partition(":")[2] or spec)


def llm_identity(spec: str) -> str:
    """What an ``-o llm=`` spec stands for in a run's identity: the model, and whether OpenAI serves
    it (whose sampling defaults differ), never the server's address: ``openai:gpt-4o`` stays,
    ``vllm:Qwen2.5-7B-Instruct`` and ``http://10.0.0.5:8000/v1#Qwen2.5-7B-Instruct`` are both
    ``Qwen2.5-7B-Instruct``. Empty stays empty. Anything shaped like a secret (``#m?pwd=...``) is masked."""
    if not isinstance(spec, str) or not spec.strip():
        return spec
    spec = spec.strip()
    model = llm_model_name(spec).strip()
    return f"openai:{model}" if spec.lower().startswith("openai:") else model


def parse_llm_spec(spec: str) -> dict:
    """``{"model", "base_url", "api_key_env"}`` for ``ChatClient(**...)``.

    - ``openai:gpt-4o``: the OpenAI API (or ``$OPENAI_BASE_URL``, see ``openai_base_url``);
      ``OPENAI_API_KEY`` is required there (elsewhere it is sent when set).
    - ``vllm:NAME``: ``http://127.0.0.1:8000/v1``; a key is sent only if ``VLLM_API_KEY`` is set
      (vLLM's ``--api-key``).
    - ``ollama:NAME``: ``http://127.0.0.1:11434/v1``; a key only if ``OLLAMA_API_KEY`` is set.
    - ``http://127.0.0.1:8000/v1#Qwen2.5-72B-Instruct``: that base URL (everything before the last
      ``#``) and model; a key only if ``OPENAI_API_KEY`` is set (as the OpenAI SDK does).
    """
    forms = "; ".join(SPEC_FORMS)
    if not isinstance(spec, str) or not spec.strip():
        raise UserError(f"an LLM spec is needed; use one of: {forms}")
    spec = spec.strip()
    if spec.lower().startswith(("http://", "https://")):
        base_url, sep, model = spec.rpartition("#")
        base_url = base_url.rstrip("/")
        if not sep or not model.strip() or not urlsplit(base_url).hostname:
            raise UserError(f"bad LLM spec {show_url(spec)!r}: a URL spec is BASE_URL#MODEL, e.g. "
                            f"http://127.0.0.1:8000/v1#Qwen2.5-72B-Instruct; forms: {forms}")
        return {"model": model.strip(), "base_url": base_url, "api_key_env": "OPENAI_API_KEY"}
    provider, sep, model = spec.partition(":")
    endpoints = {"openai": (None, "OPENAI_API_KEY"), "vllm": (VLLM_BASE_URL, "VLLM_API_KEY"),
                 "ollama": (OLLAMA_BASE_URL, "OLLAMA_API_KEY")}
    provider = provider.strip().lower()
    if not sep or provider not in endpoints or not model.strip():
        raise UserError(f"bad LLM spec {show_url(spec)!r}; use one of: {forms}")
    base_url, env = endpoints[provider]
    return {"model": model.strip(), "base_url": base_url or openai_base_url(), "api_key_env": env}


# --------------------------------------------------------------------------------------------
# The client.
# --------------------------------------------------------------------------------------------
def _normalize_params(params: dict[str, Any]) -> dict[str, Any]:
    """Sampling params without the ``None`` ones; temperature/top_p as floats, so 0 and 0.0 agree."""
    out = {}
    for name, value in params.items():
        if value is None:
            continue
        if (name in ("temperature", "top_p", "repetition_penalty") and isinstance(value, (int, float))
                and not isinstance(value, bool)):
            value = float(value)
        out[name] = value
    return out


def _check_messages(requests: Sequence, who: str) -> list[list[dict]]:
    if isinstance(requests, (str, bytes, dict)) or not isinstance(requests, Sequence):
        raise UserError(f"{who}: requests must be a list of message lists, got {type(requests).__name__}")
    for i, messages in enumerate(requests):
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence) or not messages:
            raise UserError(f"{who}: request {i} must be a non-empty list of messages "
                            '({"role": ..., "content": ...}), got ' + type(messages).__name__)
        for j, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise UserError(f"{who}: request {i}, message {j} must be a dict with a 'role' string")
        try:
            json.dumps(messages)
        except (TypeError, ValueError) as e:
            raise UserError(f"{who}: request {i} is not JSON-serializable ({e})") from None
    return [list(m) for m in requests]


def _check_turns(turns: Sequence, who: str) -> list[Turn]:
    if isinstance(turns, (str, bytes, dict, Turn)) or not isinstance(turns, Sequence):
        raise UserError(f"{who}: turns must be a list of Turn, got {type(turns).__name__}")
    for i, turn in enumerate(turns):
        if not isinstance(turn, Turn):
            raise UserError(f"{who}: turn {i} must be a Turn, got {type(turn).__name__}")
    return list(turns)


def _text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _first_choice(payload: bytes) -> tuple[dict, dict]:
    """The answer object and its first choice; ``BadResponse`` if there is none."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadResponse("the body is not JSON") from None
    if not isinstance(obj, dict):
        raise BadResponse("the body is not a JSON object")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        error = f"; error: {server_message(payload)}" if "error" in obj else ""
        raise BadResponse(f"no choices{error}")
    if not isinstance(choices[0], dict):
        raise BadResponse("the first choice is not an object")
    return obj, choices[0]


def _no_text(text: str | None, finish: str | None) -> BadResponse:
    advice = None
    if finish == "length":
        advice = ("the model used all max_tokens before answering (reasoning models count their hidden "
                  "reasoning): raise max_tokens")
    elif finish == "content_filter":
        advice = "the provider's content filter withheld the answer: change the prompt or the model"
    return BadResponse(f"{'empty' if text is not None else 'no'} content (finish_reason {finish!r})", advice)


def _generation(obj: dict, text: str, finish: str | None, requested_model: str, stop: str | None = None) -> Generation:
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
    model = obj.get("model") if isinstance(obj.get("model"), str) and obj.get("model") else requested_model
    model = redact(model)  # stored and shown: never a secret a spec or a server put there
    details = usage.get("completion_tokens_details")  # OpenAI's, and vLLM's with a reasoning parser
    reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
    return Generation(text=text, prompt_tokens=_count(usage.get("prompt_tokens")),
                      completion_tokens=_count(usage.get("completion_tokens")), finish_reason=finish, model=model,
                      stop=stop, reasoning_tokens=reasoning)


def parse_chat_completion(payload: bytes, requested_model: str) -> Generation:
    """The first choice of a ``/chat/completions`` answer; ``BadResponse`` (retried) if unusable."""
    obj, choice = _first_choice(payload)
    if not isinstance(choice.get("message"), dict):
        raise BadResponse("the first choice has no message")
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    text = _text(choice["message"].get("content"))
    if text is None or not text.strip():
        raise _no_text(text, finish)
    return _generation(obj, text, finish, requested_model)


def parse_continuation(payload: bytes, requested_model: str, mode: str) -> Generation:
    """The first choice of a continued turn's answer (``mode`` "chat": ``/chat/completions``'s
    ``message.content``; "completions": ``/completions``' ``text``), with the stop string that ended
    it (vLLM's ``stop_reason`` when a string; an int there is a stop token, not a string). Empty text
    is an answer when the turn stopped (the model wrote a stop string or ended the turn at once);
    ``BadResponse`` (retried) otherwise."""
    obj, choice = _first_choice(payload)
    if mode == "chat":
        if not isinstance(choice.get("message"), dict):
            raise BadResponse("the first choice has no message")
        text = _text(choice["message"].get("content"))
    else:
        text = choice.get("text") if isinstance(choice.get("text"), str) else None
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    stop = (choice.get("stop_reason") or None) if isinstance(choice.get("stop_reason"), str) else None
    if text is None or (not text.strip() and finish != "stop"):
        raise _no_text(text, finish)
    return _generation(obj, text, finish, requested_model, stop)


class _NoModelList(Exception):
    """``GET /models`` is not there (HTTP 404/405) or answers something else than a model list."""


def _model_cards(payload: bytes) -> list[dict]:
    """The model cards of a ``GET /models`` answer (``{"data": [{"id": ...}, ...]}``)."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _NoModelList("the answer is not JSON") from None
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list):
        raise _NoModelList("the answer has no 'data' list")
    return [c for c in data if isinstance(c, dict) and isinstance(c.get("id"), str)]


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class ServedModel:
    """What a server says it serves under the requested model name (``ChatClient.served_model``):
    ``id`` (None when not known), vLLM's ``root`` (the weights' path or hub id) and ``parent`` (a
    LoRA's base model); ``reason``: why the identity is not known (None when it is), ``unlisted``:
    the server lists models, not this one."""

    requested: str
    id: str | None = None
    root: str | None = None
    parent: str | None = None
    unlisted: bool = False
    reason: str | None = None

    def key(self) -> dict[str, Any] | None:
        """The part of a cache key that stands for the server's model: None when unknown (the
        model name alone, as before identities were asked for)."""
        if self.id is not None:
            return {"id": self.id, "root": self.root, "parent": self.parent}
        return {"unlisted": True} if self.unlisted else None


@dataclass(frozen=True)
class Turn:
    """One request to extend an assistant turn (``ChatClient.continue_turns``), as search agents
    do: generate until a stop string, append search results to the text, generate again from there.

    - ``messages``: the conversation before the turn (system and user messages, and earlier
      complete turns if any), not ending with the turn being extended;
    - ``partial``: the assistant's text so far in that turn ("": start it);
    - ``stop``: stop strings; the answer ends before the first one the model writes, which the
      ``Generation`` names (``stop``) and its text leaves out;
    - ``max_tokens``: this request's limit (None: the client's).

    Lists are accepted and kept as tuples; a malformed turn is a ``UserError``.
    """

    messages: tuple[dict, ...]
    partial: str = ""
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        messages, stop = self.messages, self.stop
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence) or not messages:
            raise UserError("Turn: messages must be a non-empty list of messages ({\"role\": ..., \"content\": ...}), "
                            f"got {type(messages).__name__}")
        for j, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise UserError(f"Turn: message {j} must be a dict with a 'role' string")
        try:
            json.dumps(list(messages))
        except (TypeError, ValueError) as e:
            raise UserError(f"Turn: messages are not JSON-serializable ({e})") from None
        if not isinstance(self.partial, str):
            raise UserError(f"Turn: partial must be a string, got {type(self.partial).__name__}")
        if isinstance(stop, str):
            stop = (stop,)
        if not isinstance(stop, Sequence) or not all(isinstance(x, str) and x for x in stop):
            raise UserError(f"Turn: stop must be a list of non-empty strings, got {stop!r}"[:300])
        m = self.max_tokens
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise UserError(f"Turn: max_tokens must be an integer >= 1 or None, got {m!r}")
        object.__setattr__(self, "messages", tuple(messages))
        object.__setattr__(self, "stop", tuple(stop))


@dataclass(frozen=True)
class PreparedTurn:
    """A turn as it is sent: the JSON body, and what of it keys the cache (``turn_key``)."""

    body: dict
    request: Any  # the rendered prompt (completions) or {"messages", "partial"} (chat)
    params: dict


class ChatClient:
    """Chat completions from an OpenAI-compatible API (OpenAI, vLLM, Ollama, any ``base_url``),
    through the ``openai`` SDK (``chat.completions.create``; built by ``openai_client``).

    The request is ``model`` and ``messages`` plus each of ``temperature``, ``top_p``,
    ``max_tokens``, ``seed`` that is not None (OpenAI's o-series and gpt-5 get ``max_tokens`` as
    ``max_completion_tokens``, the only name they accept). ``base_url`` defaults to
    ``openai_base_url()``. ``Authorization: Bearer $api_key_env`` is sent when that variable is
    set, no header otherwise; on the OpenAI API (``api.openai.com``) it must be set.

    Retries (``APICaller`` with ``retry``: a ``RetryPolicy``, default ``DEFAULT_RETRY``, with each
    of ``max_retries``, ``backoff``, ``backoff_max``, ``retry_after_max``, ``sleep`` that is given): HTTP
    408/429/5xx, timeouts, connection errors and unusable answers (not JSON, no choices, empty or
    null content) are retried up to ``max_retries`` times, waiting ``min(backoff_max, backoff *
    2**(n-1))`` s times 0.5..1, or the server's ``Retry-After`` (at most ``retry_after_max``); then
    a one-line ``UserError`` naming the endpoint, the model, the last failure and what to do.
    Other 4xx and 3xx fail at once (401: "check $api_key_env"; redirects are never followed).

    ``top_k`` and ``repetition_penalty`` are vLLM's (sent as extra body keys when set; OpenAI refuses them).

    Continued turns (``continue_turns``, ``Turn``; search agents) go one of two ways:

    - chat mode (``template`` None): ``POST {base_url}/chat/completions`` with the partial text as
      a final assistant message and vLLM's ``continue_final_message: true, add_generation_prompt:
      false`` (a turn not yet started is an ordinary request). Needs a server that continues a
      final message (vLLM; OpenAI refuses it, Ollama ignores it). The server renders the partial:
      transformers' chat templating strips its trailing whitespace;
    - completions mode (``template``: a tokenizer folder or hub id, already downloaded): the chat
      template is rendered here (``AutoTokenizer.from_pretrained(template, local_files_only=True)``,
      loaded on first use; ``apply_chat_template(messages, add_generation_prompt=True)`` + the
      partial, exactly) and ``POST {base_url}/completions`` sends that prompt. ``max_tokens`` must
      be set (vLLM's ``/completions`` stops after 16 tokens otherwise).
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float | None = None, top_p: float | None = None, max_tokens: int | None = None,
                 seed: int | None = None, concurrency: int = 8, max_retries: int | None = None,
                 timeout: float = 600.0, sleep: Callable[[float], None] | None = None, backoff: float | None = None,
                 backoff_max: float | None = None, retry_after_max: float | None = None,
                 retry: RetryPolicy | None = None, top_k: int | None = None,
                 repetition_penalty: float | None = None, template: str | os.PathLike | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise UserError(f"ChatClient: model must be a non-empty string, got {model!r}")
        self.model = model.strip()
        self.base_url = check_base_url(base_url or openai_base_url(), "ChatClient", VLLM_BASE_URL)
        self.url = endpoint_url(self.base_url, "chat/completions")
        self.api_key_env = api_key_env
        self.temperature, self.top_p, self.max_tokens, self.seed = temperature, top_p, max_tokens, seed
        self.top_k, self.repetition_penalty = top_k, repetition_penalty
        if template is not None and not isinstance(template, (str, os.PathLike)):
            raise UserError(f"ChatClient: template must be a tokenizer folder or hub id, got {type(template).__name__}")
        self.template = os.fspath(template).strip() if template is not None else None
        if self.template == "":
            raise UserError("ChatClient: template must be a tokenizer folder or hub id, got an empty string")
        self._tokenizer: Any = None
        self._tokenizer_lock = threading.Lock()
        self.concurrency, self.timeout = concurrency, timeout
        self.retry = retry_policy(retry, max_retries=max_retries, backoff=backoff, backoff_max=backoff_max,
                                  retry_after_max=retry_after_max, sleep=sleep)
        self.retries = RetryLine()
        self._served: ServedModel | None = None
        self._served_lock = threading.Lock()
        self._check_options()

    def show_retries(self, line: RetryLine) -> None:
        """Show this client's retries on ``line`` (``ShowsRetries``; by default they are only logged)."""
        self.retries = line

    def __repr__(self) -> str:
        params = "".join(f", {k}={v!r}" for k, v in self.params.items())
        template = f", template={redact(self.template)!r}" if self.template is not None else ""
        return (f"ChatClient({self.shown_model!r}, base_url={show_url(self.base_url)!r}, "
                f"api_key_env={self.api_key_env!r}{params}{template})")

    @property
    def mode(self) -> str:
        """How turns are continued: "completions" with a ``template``, else "chat"."""
        return "completions" if self.template is not None else "chat"

    @property
    def shown_model(self) -> str:
        """``model`` as messages show it (``redact``: a spec's ``#m?pwd=...`` is masked)."""
        return redact(self.model)

    @property
    def max_retries(self) -> int:
        return self.retry.max_retries

    def _check_options(self) -> None:
        def number(name: str, low: float, high: float) -> None:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not low <= value <= high):
                raise UserError(f"ChatClient: {name} must be a number in [{low:g}, {high:g}] or None, got {value!r}")

        number("temperature", 0, 2)
        number("top_p", 0, 1)
        for name, low in (("max_tokens", 1), ("seed", None), ("top_k", -1), ("concurrency", 1)):
            value = getattr(self, name)
            if name in ("max_tokens", "seed", "top_k") and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
                what = "an integer" if low is None else f"an integer >= {low}"
                raise UserError(f"ChatClient: {name} must be {what}, got {value!r}")
        penalty = self.repetition_penalty
        if penalty is not None and (isinstance(penalty, bool) or not isinstance(penalty, (int, float))
                                    or not 0 < penalty < float("inf")):
            raise UserError(f"ChatClient: repetition_penalty must be a number > 0 or None, got {penalty!r}")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or self.timeout <= 0:
            raise UserError(f"ChatClient: timeout must be positive seconds, got {self.timeout!r}")
        self.retry.check("ChatClient")

    @property
    def params(self) -> dict[str, Any]:
        """The sampling parameters that are set (None ones left out), as sent and as cache-keyed."""
        return _normalize_params({name: getattr(self, name) for name in SAMPLING_PARAMS})

    @property
    def needs_key(self) -> bool:
        """True on the OpenAI API itself: there a missing key is an error rather than no header."""
        return (urlsplit(self.base_url).hostname or "").lower() == "api.openai.com"

    def body(self, messages: list[dict], params: dict[str, Any] | None = None) -> dict:
        """The JSON body sent for one chat request (``params``: instead of the client's)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        for name, value in (self.params if params is None else params).items():
            if name == "max_tokens" and _COMPLETION_TOKENS_MODELS.match(self.model):
                name = "max_completion_tokens"
            body[name] = value
        return body

    def generate(self, requests: list[list[dict]], *, on_result: Callable[[int, Generation], None] | None = None,
                 usage: Usage | None = None) -> list[Generation]:
        """One completion per messages list, ``concurrency`` at a time; results in input order.

        ``on_result(i, generation)`` is called (from a worker thread, one call at a time) as each
        answer arrives; ``usage`` (if given) is tallied the same way. The first request that fails
        for good raises its ``UserError`` once the requests in flight have ended (the others stop
        at their next attempt; answers that arrive meanwhile still reach ``on_result``).
        """
        requests = _check_messages(requests, "ChatClient.generate")
        if not requests:
            return []
        return self._send_all([self.body(messages) for messages in requests], "chat",
                              lambda payload: parse_chat_completion(payload, self.model),
                              lambda body, status, message: self._client_error(status, message),
                              on_result=on_result, usage=usage)

    # -- continued turns ---------------------------------------------------------------------------
    def continue_turns(self, turns: Sequence[Turn], *, on_result: Callable[[int, Generation], None] | None = None,
                       usage: Usage | None = None) -> list[Generation]:
        """Extend each ``Turn``'s assistant text until one of its stop strings (or the end of the
        turn, or ``max_tokens``); the answers (``Generation``: the new text only, without the stop
        string; ``stop``: which stop string ended it; ``finish_reason``), in input order. Sent as
        ``generate`` sends (``concurrency`` at a time, the same retries and errors, ``on_result`` and
        ``usage`` the same way), by this client's ``mode`` (see the class). A server refusing to
        continue a final assistant message (chat mode) is a ``UserError`` saying to give
        ``template=`` or use vLLM."""
        prepared = [self.prepare_turn(turn) for turn in _check_turns(turns, "ChatClient.continue_turns")]
        return self._continue_prepared(prepared, on_result=on_result, usage=usage)

    def prepare_turn(self, turn: Turn) -> PreparedTurn:
        """``turn`` as this client sends it: its JSON body (the chat template rendered here in
        completions mode), and the request and params that key it in the cache."""
        params = self.params
        if turn.max_tokens is not None:
            params["max_tokens"] = turn.max_tokens
        if self.mode == "completions":
            if "max_tokens" not in params:
                raise UserError(f"ChatClient for {self.shown_model} renders turns with template= and sends them to "
                                "/completions, which stops after 16 tokens unless told: set max_tokens (on the "
                                "client or the Turn)")
            prompt = self.render(turn)
            body: dict[str, Any] = {"model": self.model, "prompt": prompt, **params}
            request: Any = prompt
        else:
            messages = [dict(m) for m in turn.messages]
            if turn.partial:
                messages.append({"role": "assistant", "content": turn.partial})
            body = self.body(messages, params)
            if turn.partial:
                body.update(continue_final_message=True, add_generation_prompt=False)
            request = {"messages": [dict(m) for m in turn.messages], "partial": turn.partial}
        if turn.stop:
            body["stop"] = list(turn.stop)
        return PreparedTurn(body, request, params)

    def render(self, turn: Turn) -> str:
        """The completions-mode prompt of ``turn``: the ``template`` tokenizer's chat template applied
        to its messages with the generation prompt, then its partial text, verbatim."""
        tokenizer = self._load_tokenizer()
        shown = redact(self.template or "")
        try:
            prompt = tokenizer.apply_chat_template([dict(m) for m in turn.messages], tokenize=False,
                                                   add_generation_prompt=True)
        except Exception as e:  # jinja errors, a tokenizer without a template: the user's to fix
            if getattr(tokenizer, "chat_template", None) is None:
                raise UserError(f"ChatClient: the tokenizer at template={shown!r} has no chat template; give the "
                                "model's own tokenizer (its tokenizer_config.json or chat_template.jinja holds "
                                "one)") from None
            raise UserError(f"ChatClient: the chat template of template={shown!r} failed on a turn's messages "
                            f"({scrub(reason(e), limit=200)})") from None
        if not isinstance(prompt, str):
            raise UserError(f"ChatClient: the chat template of template={shown!r} did not render text "
                            f"(got {type(prompt).__name__})")
        return prompt + turn.partial

    def tokenizer(self):
        """The ``template`` tokenizer (loaded once, offline), or None without one: for an agent that
        counts or cuts tokens as its reference does."""
        return self._load_tokenizer() if self.template is not None else None

    def _load_tokenizer(self):
        with self._tokenizer_lock:
            if self._tokenizer is None:
                if self.template is None:
                    raise UserError("ChatClient: rendering a chat template needs template= (a tokenizer folder "
                                    "or hub id)")
                try:
                    from transformers import AutoTokenizer

                    self._tokenizer = AutoTokenizer.from_pretrained(self.template, local_files_only=True)
                except Exception as e:
                    raise UserError(f"ChatClient: cannot load the tokenizer template={redact(self.template)!r} "
                                    f"({scrub(reason(e), limit=160)}); give a local tokenizer folder or a hub id "
                                    "already downloaded (it is loaded offline)") from None
            return self._tokenizer

    def _continue_prepared(self, prepared: list[PreparedTurn], *,
                           on_result: Callable[[int, Generation], None] | None = None,
                           usage: Usage | None = None) -> list[Generation]:
        if not prepared:
            return []
        mode = self.mode
        return self._send_all([p.body for p in prepared], mode,
                              lambda payload: parse_continuation(payload, self.model, mode),
                              self._turn_client_error, on_result=on_result, usage=usage)

    def _turn_client_error(self, body: dict, status: int, message: str) -> str | None:
        """Advice for a refused turn: a chat request continuing a final message (``body``) that the
        server refuses, for no reason ``_client_error`` knows, is taken for a server without
        ``continue_final_message``."""
        fix = self._client_error(status, message)
        if fix is None and status in (400, 422) and body.get("continue_final_message"):
            return ("if it does not continue a partial assistant message (vLLM's continue_final_message), serve "
                    "the model with vLLM or give ChatClient template= (the model's tokenizer folder or hub id) to "
                    "render the chat template here and use /completions")
        return fix

    def _send_all(self, bodies: list[dict], endpoint: str, parse: Callable[[bytes], Generation],
                  client_error: Callable[[dict, int, str], str | None], *,
                  on_result: Callable[[int, Generation], None] | None, usage: Usage | None) -> list[Generation]:
        """``bodies`` to ``{base_url}/chat/completions`` (``endpoint`` "chat") or ``/completions``,
        ``concurrency`` at a time, each retried by an ``APICaller`` (``client_error(body, status,
        message)``: the advice for its refusal); answers in input order."""
        url = self.url if endpoint == "chat" else endpoint_url(self.base_url, "completions")
        key = api_key(self.api_key_env, required=self.needs_key,
                      who=f"ChatClient for {self.shown_model} at {show_url(url)}")
        what = "chat completions" if endpoint == "chat" else "completions"

        def caller(body: dict) -> APICaller:
            return APICaller(url, model=self.model, api_key_env=self.api_key_env, base_url=self.base_url,
                             timeout=self.timeout, retry=self.retry,
                             malformed_advice=f"check that base_url serves an OpenAI-compatible {what} API",
                             client_error=lambda status, message: client_error(body, status, message),
                             logger=log, retries=self.retries)

        client = openai_client(self.base_url, key=key, timeout=self.timeout)
        headers = no_auth_header(key)
        create = (client.chat.completions if endpoint == "chat" else client.completions).with_raw_response.create
        lock = threading.Lock()

        def send(body: dict) -> bytes:
            plain = {k: v for k, v in body.items() if k not in EXTRA_BODY_PARAMS}
            extra = {k: v for k, v in body.items() if k in EXTRA_BODY_PARAMS}
            raw = create(**plain, extra_body=extra or None, extra_headers=headers)
            return raw.http_response.content

        def run(i: int, abort: threading.Event) -> Generation:
            generation = caller(bodies[i]).call(lambda: send(bodies[i]), parse, key=key, abort=abort)
            with lock:
                if usage is not None:
                    usage.add(generation)
                if on_result is not None:
                    on_result(i, generation)
            return generation

        return map_concurrently(run, range(len(bodies)), self.concurrency, name="ChatClient", finish_running=True)

    def served_model(self) -> ServedModel:
        """The model the server says it serves under ``model`` (``GET {base_url}/models``), asked once
        per client (so once per run's stage) and remembered; what keys this client's cached answers.

        - the entry whose ``id`` is ``model`` (Ollama's ``NAME:latest`` for a bare ``NAME``): its
          ``id``, and vLLM's ``root`` (the weights it loaded) and ``parent`` (a LoRA's base model);
        - HTTP 401/403: a one-line ``UserError`` naming the endpoint and the key variable (nothing
          is sent or reused); other failures are retried as chat requests are, then a ``UserError``;
        - no such route (HTTP 404/405) or an answer that is not a model list: the model name alone,
          as before, with the reason in ``ServedModel.reason`` (and an INFO log record);
        - a list without ``model``: the model name, marked unlisted (so never the answers of a
          server that did report it), with the reason likewise.
        """
        with self._served_lock:
            if self._served is None:
                self._served = self._ask_served_model()
                if self._served.reason:
                    log.info("%s: %s", self.shown_model, self._served.reason)
            return self._served

    def _ask_served_model(self) -> ServedModel:
        url = endpoint_url(self.base_url, "models")
        key = api_key(self.api_key_env, required=self.needs_key,
                      who=f"ChatClient for {self.shown_model} at {show_url(self.base_url)}")

        def refused(status: int, message: str) -> str | None:
            if status in (404, 405):
                raise _NoModelList(f"HTTP {status}")
            return None

        caller = APICaller(url, model=self.model, api_key_env=self.api_key_env, base_url=self.base_url,
                           timeout=self.timeout, retry=self.retry,
                           malformed_advice="check that base_url serves an OpenAI-compatible API",
                           client_error=refused, logger=log, retries=self.retries)
        client = openai_client(self.base_url, key=key, timeout=self.timeout)
        headers = no_auth_header(key)

        def send() -> bytes:
            return client.models.with_raw_response.list(extra_headers=headers).http_response.content

        shown = show_url(url)
        try:
            cards = caller.call(send, _model_cards, key=key)
        except _NoModelList as e:
            return ServedModel(self.model, reason=f"{shown} gave no model list ({e}); cached answers are "
                                                  "matched by the model name alone")
        names = [self.model] + ([f"{self.model}:latest"] if ":" not in self.model else [])
        for name in names:
            card = next((c for c in cards if c.get("id") == name), None)
            if card is not None:
                return ServedModel(self.model, id=name, root=_str_or_none(card.get("root")),
                                   parent=_str_or_none(card.get("parent")))
        listed = ", ".join(sorted(str(c.get("id")) for c in cards)[:5]) or "none"
        return ServedModel(self.model, unlisted=True,
                           reason=f"{shown} does not list {self.shown_model} (it lists: {scrub(listed, key, 200)}); "
                                  "cached answers are matched by the model name (never those of a server that "
                                  "lists it)")

    def _client_error(self, status: int, message: str) -> str | None:
        """Advice for a refused request (not retried); None leaves it to ``default_fix``."""
        if status in (400, 413, 422) and _CONTEXT_ERROR.search(message):
            return (f"the prompt plus max_tokens exceed {self.shown_model}'s context: shorten the prompt or "
                    "lower max_tokens")
        if status in (400, 422):
            for name in (*SAMPLING_PARAMS, "max_completion_tokens"):
                if name in message and re.search(r"unsupported|not support|unrecognized", message, re.I):
                    return f"{self.shown_model} does not take {name} as set: change it or leave it unset"
        return None


# --------------------------------------------------------------------------------------------
# The cache.
# --------------------------------------------------------------------------------------------
CACHE_VERSION = 2  # 2: keyed by the model the server reports serving (``ServedModel.key``)


def key_for(model: str, messages: list[dict], params: dict[str, Any], served: dict[str, Any] | None = None) -> str:
    """sha256 hex of the canonical JSON of ``{"v", "model", "served", "messages", "params"}``.

    ``served`` is what the server reported serving under ``model`` (``ServedModel.key()``: its
    ``id``, vLLM's ``root`` and ``parent``), None when it could not say: answers of another served
    model (another checkpoint under the same name, at another endpoint) are never reused, and the
    base URL itself is not part of the key (the same served model elsewhere reuses the answers).
    ``params`` are the sampling parameters, None ones dropped (``temperature=0`` and ``0.0`` agree);
    dict key order does not matter. JSON is one unambiguous encoding of the whole (no separator a
    text could hold), ASCII-escaped so even a lone surrogate has its own bytes.
    """
    blob = json.dumps({"v": CACHE_VERSION, "model": model, "served": served, "messages": messages,
                       "params": _normalize_params(dict(params))},
                      sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def turn_key(model: str, mode: str, request: Any, stop: Sequence[str], params: dict[str, Any],
             served: dict[str, Any] | None = None) -> str:
    """The cache key of a continued turn (``continue_cached``): sha256 hex of the canonical JSON of
    ``{"v", "turn": mode, "model", "served", "request", "stop", "params"}``, as ``key_for`` encodes
    (its own field set, so never a ``key_for`` key). ``mode`` "chat" or "completions";
    ``request``: the rendered prompt (completions) or ``{"messages", "partial"}`` (chat);
    ``stop``: the stop strings, in order; ``params``: the sampling parameters with the turn's
    ``max_tokens``; ``served`` as for ``key_for``."""
    blob = json.dumps({"v": CACHE_VERSION, "turn": mode, "model": model, "served": served, "request": request,
                       "stop": list(stop), "params": _normalize_params(dict(params))},
                      sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


_FIELDS = {"text": str, "prompt_tokens": int, "completion_tokens": int, "model": str}


def _entry(obj: dict) -> tuple[str, Generation] | None:
    """A journal record as (key, Generation), None when a field is missing or mistyped."""
    if not isinstance(obj.get("key"), str):
        return None
    for name, kind in _FIELDS.items():
        if not isinstance(obj.get(name), kind) or isinstance(obj.get(name), bool):
            return None
    finish, stop = obj.get("finish_reason"), obj.get("stop")
    if (finish is not None and not isinstance(finish, str)) or (stop is not None and not isinstance(stop, str)):
        return None
    return obj["key"], Generation(text=obj["text"], prompt_tokens=obj["prompt_tokens"],
                                  completion_tokens=obj["completion_tokens"], finish_reason=finish,
                                  model=obj["model"], stop=stop, reasoning_tokens=_count(obj.get("reasoning_tokens")))


class GenerationCache:
    """Answers by request key, in an append-only journal (:class:`r2med_tasks.journal.Journal`).

    Each line is ``{"key": <key_for(...) or turn_key(...)>, "text", "prompt_tokens",
    "completion_tokens", "finish_reason", "model"}`` and ``"stop"`` when set (the ``Generation``
    fields; ``model`` is the model that answered) and nothing else: no key, no prompt. ``put``
    appends and fsyncs one line, so a killed run loses only the answer being written; a line that does not parse (the last one, cut by a kill; or garbage)
    is skipped with one warning and dropped from the file, and its request is sent again.
    When a key appears twice, the last line wins. The file is read once, at construction: lines
    another process appends later are not seen by this object.
    """

    key_for = staticmethod(key_for)

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._journal = Journal(self.path, "the generation cache")
        self._entries: dict[str, Generation] = {}
        records, self.skipped, _ = self._journal.read()  # skipped: lines that did not parse (the journal warns)
        for record in records:
            entry = _entry(record)
            if entry is None:
                self.skipped += 1
            else:
                self._entries[entry[0]] = entry[1]

    def __repr__(self) -> str:
        return f"GenerationCache({str(self.path)!r}, {len(self._entries)} entries)"

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: str) -> Generation | None:
        return self._entries.get(key)

    def put(self, key: str, generation: Generation) -> None:
        """Append ``generation`` under ``key`` and fsync it before returning."""
        record = {"key": key, **asdict(generation)}
        if record["stop"] is None:
            del record["stop"]  # the lines of answers that are not continued turns stay as they were
        if not record["reasoning_tokens"]:
            del record["reasoning_tokens"]  # likewise for answers without reasoning tokens reported
        self._journal.append([record])
        self._entries[key] = generation


def generate_cached(client: ChatClient, cache: GenerationCache, requests: list[list[dict]], *,
                    usage: Usage | None = None) -> list[Generation]:
    """``client.generate(requests)`` for what ``cache`` lacks, each answer stored as it arrives.

    First (before anything is reused or sent) the client is asked which model its server serves
    (``client.served_model()``, once per client; a 401 is the error, nothing is reused): requests
    are keyed by ``key_for(client.model, messages, client.params, served)``, so answers of another
    served model are not reused. A client without ``served_model`` (a plugin's own) is keyed by its
    model name alone. Identical requests in one call are sent once. ``usage`` (if given) counts the requests sent (and their tokens) and the
    cache hits. If the run fails, every answer received so far is already in the cache, so a rerun
    sends only the rest.
    """
    requests = _check_messages(requests, "generate_cached")
    if not requests:
        return []
    params = client.params
    served = client.served_model().key() if callable(getattr(client, "served_model", None)) else None
    keys = [cache.key_for(client.model, messages, params, served) for messages in requests]
    return _through_cache(cache, keys, lambda indices, store: client.generate(
        [requests[i] for i in indices], on_result=store, usage=usage), usage=usage,
        log_line=lambda hits, sent: log.info("%s: %d answer(s) cached, %d request(s) to send to %s",
                                             redact(client.model), hits, sent,
                                             show_url(getattr(client, "url", "its endpoint"))))


def _through_cache(cache: GenerationCache, keys: list[str], send: Callable[[list[int], Callable], Any], *,
                   usage: Usage | None, log_line: Callable[[int, int], None]) -> list[Generation]:
    """The answer of each key: from ``cache``, else from ``send(indices, store)`` (each request
    ``keys`` lacks, once per distinct key; ``store(j, generation)`` keeps the j-th answer as it
    arrives); ``usage`` counts the cache hits."""
    out: list[Generation | None] = [cache.get(k) for k in keys]
    to_send: list[int] = []
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if out[i] is None and key not in first:
            first[key] = i
            to_send.append(i)
    hits = len(keys) - len(to_send)
    if usage is not None:
        usage.add_cached(hits)
    if to_send:
        log_line(hits, len(to_send))

    def store(j: int, generation: Generation) -> None:
        i = to_send[j]
        cache.put(keys[i], generation)
        out[i] = generation

    send(to_send, store)
    for i, key in enumerate(keys):
        if out[i] is None:
            out[i] = out[first[key]]
    return out  # type: ignore[return-value]


def continue_cached(client: ChatClient, cache: GenerationCache, turns: Sequence[Turn], *,
                    usage: Usage | None = None) -> list[Generation]:
    """``client.continue_turns(turns)`` for what ``cache`` lacks, each answer stored as it arrives,
    as ``generate_cached`` does: the served model is asked first (``client.served_model()``), each
    turn is keyed by ``turn_key(client.model, client.mode, request, turn.stop, params, served)``
    (the prompt rendered here in completions mode, the messages and partial text in chat mode; the
    sampling params with the turn's ``max_tokens``), identical turns in one call are sent once, and
    ``usage`` counts requests sent, their tokens and cache hits. A rerun sends nothing."""
    turns = _check_turns(turns, "continue_cached")
    if not turns:
        return []
    prepared = [client.prepare_turn(turn) for turn in turns]
    served = client.served_model().key()
    keys = [turn_key(client.model, client.mode, p.request, turn.stop, p.params, served)
            for p, turn in zip(prepared, turns)]
    return _through_cache(cache, keys, lambda indices, store: client._continue_prepared(
        [prepared[i] for i in indices], on_result=store, usage=usage), usage=usage,
        log_line=lambda hits, sent: log.info("%s: %d continuation(s) cached, %d request(s) to send to %s",
                                             client.shown_model, hits, sent, show_url(client.base_url)))
