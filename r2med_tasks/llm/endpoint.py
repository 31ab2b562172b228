"""An OpenAI-compatible API as every client of one holds it (chat, embeddings): the one place an
``openai.OpenAI`` is built, and the retry loop that ends in a one-line ``UserError``. Importing
this module imports no ``openai``/``httpx``."""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..errors import UserError
from .secrets import api_key, install_log_scrubbing, redact, scrub, show_url, url_secrets

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

OPENAI_BASE_URL = "https://api.openai.com/v1"
OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"
VLLM_BASE_URL = "http://127.0.0.1:8000/v1"


def openai_base_url() -> str:
    """``$OPENAI_BASE_URL``, else the OpenAI API: a user who points the SDK at a local server points
    ``openai:`` there too."""
    url = os.environ.get("OPENAI_BASE_URL", "").strip()
    return check_base_url(url, "$OPENAI_BASE_URL", VLLM_BASE_URL) if url else OPENAI_BASE_URL


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


def openai_client(base_url: str, *, key: str | None, timeout: float):
    """An ``openai.OpenAI`` that leaves retrying to ``APICaller`` (the SDK's retries cannot be
    aborted, shown or shortened by tests) and follows no redirect (httpx would follow one to another
    origin, with the key). Shared where it can be, building one costs as much as a request: never
    ``close()`` it."""
    if key is None:
        with _http_lock:
            shared = _keyless_clients.get((base_url, timeout))
        if shared is not None:
            return shared
    import openai  # heavy: imported on first use only

    install_log_scrubbing()
    parts = urlsplit(base_url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    root = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    client = openai.OpenAI(api_key=key or _NO_KEY, base_url=root, timeout=timeout, max_retries=0,
                           default_query=query or None, http_client=_http_client(timeout))
    if key is None:
        with _http_lock:
            client = _keyless_clients.setdefault((base_url, timeout), client)
    return client


_keyless_clients: dict[tuple[str, float], Any] = {}


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
def _sdk_errors(name: str) -> tuple[type[BaseException], ...]:
    """The SDK's exception class ``name`` where the SDK is loaded; none where it is not (a run over
    the direct transport never loads it, and nothing it has not loaded can raise)."""
    openai = sys.modules.get("openai")
    return (getattr(openai, name),) if openai is not None else ()


class BadResponse(Exception):
    """Raised by a ``parse`` callback: the reply is unusable, so the request is retried."""

    def __init__(self, detail: str, advice: str | None = None) -> None:
        super().__init__(detail)
        self.advice = advice


class Aborted(Exception):
    """A request gave up because ``abort`` was set (another request of the same call failed)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How ``APICaller`` retries: exponential backoff with jitter, or the server's ``Retry-After``
    capped at ``retry_after_max``. ``sleep`` lets tests skip the waits. Two retries, as openai-python:
    a server that never answers costs three timeouts, not seven."""

    max_retries: int = 2
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
"""Read when a client is built, so tests can swap in tiny delays."""


def retry_policy(retry: RetryPolicy | None = None, **options: Any) -> RetryPolicy:
    """``retry`` (default ``DEFAULT_RETRY``) with each of ``options`` (``RetryPolicy`` fields) not None."""
    base = retry if retry is not None else DEFAULT_RETRY
    return replace(base, **{name: value for name, value in options.items() if value is not None})


WAITING_LINE_S = 30.0
"""How often ``RetryLine`` says what it waits for; read when one is made, so tests can shorten it."""


class RetryLine:
    """The API requests of a run as the user sees them. Those waiting to retry: one status line that
    each change replaces (eight requests to a dead server must not print 48 lines). With ``say``
    (output that is no terminal, a CI log, where that line is not seen): a line every ``every``
    seconds while requests are in flight or wait to retry, so a server that never answers is not a
    silent run. ``RetryLine()`` shows nothing."""

    def __init__(self, show: Callable[[str | None], None] | None = None, *,
                 say: Callable[[str], None] | None = None, every: float | None = None) -> None:
        self.show, self.say = show, say
        self.every = WAITING_LINE_S if every is None else every
        self.waiting: dict[int, str] = {}  # thread -> its latest retry line
        self.in_flight: dict[int, tuple[str, float]] = {}  # request -> (its server, when it was sent)
        self.lock = threading.Lock()
        self._woken = threading.Condition(self.lock)
        self._saying = False  # the thread saying what is waited for runs

    def update(self, call: int, line: str | None) -> None:
        """``line``: what ``call`` waits for; None: it no longer waits (answered, or gave up)."""
        with self.lock:
            if line is None and self.waiting.pop(call, None) is None:
                return
            if line is not None:
                self.waiting[call] = line
                self._start_saying()
            if self.show is not None:
                others = len(self.waiting) - 1
                text = line or (list(self.waiting.values())[-1] if self.waiting else None)
                self.show(f"{text} (and {others} other request(s) waiting to retry)" if text and others > 0
                          else text)

    @contextmanager
    def sending(self, server: str) -> Iterator[None]:
        """Around one request to ``server`` (as it may be shown): counted as in flight until it ends."""
        token = object()
        with self.lock:
            self.in_flight[id(token)] = (server, time.monotonic())
            self._start_saying()
        try:
            yield
        finally:
            with self.lock:
                del self.in_flight[id(token)]
                if not self.in_flight and not self.waiting:
                    self._woken.notify_all()

    def _start_saying(self) -> None:
        """(Under the lock.) The saying thread, unless it runs or nobody reads it; it ends once
        nothing is waited for, so an idle run holds no thread."""
        if self.say is not None and not self._saying:
            self._saying = True
            threading.Thread(target=self._say_while_waiting, daemon=True, name="r2med-waiting").start()

    def _say_while_waiting(self) -> None:
        with self.lock:
            while True:
                due = time.monotonic() + self.every
                while (self.in_flight or self.waiting) and (left := due - time.monotonic()) > 0:
                    self._woken.wait(left)
                if not self.in_flight and not self.waiting:
                    self._saying = False
                    return
                lines = self._lines(time.monotonic())
                self.lock.release()
                try:
                    for line in lines:
                        self.say(line)
                finally:
                    self.lock.acquire()

    def _lines(self, now: float) -> list[str]:
        """(Under the lock.) What is waited for: each server's requests in flight, and the latest retry."""
        servers: dict[str, list[float]] = {}
        for server, sent in self.in_flight.values():
            servers.setdefault(server, []).append(sent)
        lines = [f"waiting for {server} ({len(sent)} request(s) in flight, the oldest for {now - min(sent):.0f} s)"
                 for server, sent in servers.items()]
        if self.waiting:
            lines.append(list(self.waiting.values())[-1])
        return lines


@runtime_checkable
class ShowsRetries(Protocol):
    """A client (or a model holding one) whose API retries can be shown on a run's ``RetryLine``."""

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
    """Calls ``send()`` until ``parse`` accepts a reply. HTTP 408, 429 and 5xx but 501, timeouts,
    connection errors and ``BadResponse`` are retried; a 3xx or another 4xx fails at once, with
    ``client_error``'s advice or ``default_fix``. Every text shown is scrubbed of secrets, and no
    SDK exception is chained (its text would not be). Advice names ``timeout`` and ``max_retries``
    as the user sets them: ``-o {option_prefix}timeout=`` (None: a client made in Python, its
    keyword arguments).
    """

    def __init__(self, url: str, *, model: str, api_key_env: str, base_url: str | None = None,
                 timeout: float = 60.0, retry: RetryPolicy = RetryPolicy(),
                 malformed_advice: str = "check that base_url serves an OpenAI-compatible API",
                 client_error: Callable[[int, str], str | None] | None = None,
                 logger: logging.Logger | None = None, retries: RetryLine | None = None,
                 option_prefix: str | None = None) -> None:
        self._secrets = url_secrets(url)
        self.url = show_url(url)
        self.model = redact(model)  # shown only
        self.api_key_env = api_key_env
        self.base_url = show_url(base_url if base_url is not None else url.rsplit("/", 1)[0])
        self.timeout = timeout
        self.retry = retry
        self.malformed_advice = malformed_advice
        self._client_error = client_error
        self._log = logger or log
        self._retries = retries if retries is not None else RetryLine()
        self.option_prefix = option_prefix

    def option(self, name: str) -> str:
        """How the user sets option ``name`` of this client: ``-o hyde.max_retries=N``, or ``max_retries=``."""
        return f"{name}=" if self.option_prefix is None else f"-o {self.option_prefix}{name}="

    def __repr__(self) -> str:
        return f"APICaller({self.url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def scrub(self, text: str, key: str | None, limit: int = 200) -> str:
        return scrub(text, [key or "", *self._secrets], limit)

    def call(self, send: Callable[[], bytes], parse: Callable[[bytes], T], *, key: str | None,
             abort: threading.Event | None = None) -> T:
        """``parse(send())`` for the first reply ``parse`` accepts."""
        try:
            return self._call(send, parse, key=key, abort=abort if abort is not None else threading.Event())
        finally:
            self._retries.update(threading.get_ident(), None)

    def _call(self, send: Callable[[], bytes], parse: Callable[[bytes], T], *, key: str | None,
              abort: threading.Event) -> T:
        from .transport import ConnectionFailed, NoAnswer, Refused

        attempts = self.retry.max_retries + 1
        more = f"{self.option('max_retries')}N (now {self.retry.max_retries})"
        failure, advice = "", ""
        for attempt in range(1, attempts + 1):
            if abort.is_set():
                raise Aborted()
            wait_s = None
            try:
                with self._retries.sending(self.base_url):
                    payload = send()
            except (NoAnswer, *_sdk_errors("APITimeoutError")):
                failure = f"no answer within {self.timeout:g} s"
                advice = f"check that the server answers, or raise {self.option('timeout')}SECONDS"
            except (ConnectionFailed, *_sdk_errors("APIConnectionError")) as e:
                cause = e.__cause__ or e.__context__
                detail = self.scrub(str(cause), key, 120) if cause is not None and str(cause) else type(e).__name__
                failure, advice = f"connection failed ({detail})", "check the network and base_url"
            except (Refused, *_sdk_errors("APIStatusError")) as e:
                if isinstance(e, Refused):
                    status, reason, headers, content = e.status, e.reason, e.headers, e.content
                else:
                    status, reason, headers, content = e.status_code, _reason(e.response), e.response.headers, \
                        e.response.content
                message = self.scrub(server_message(content), key)
                if status in (408, 429) or (status >= 500 and status != 501):  # 501: never there, never retried
                    wait_s = retry_after(headers, self.retry.retry_after_max)
                    failure = f"HTTP {status} {reason}".rstrip() + (f": {message}" if message else "")
                    advice = (f"the API is rate-limiting: wait and rerun, lower concurrency, or raise {more}"
                              if status == 429 else f"the service is failing: try again later, or raise {more}")
                else:
                    raise self._refused(status, reason, message, key, headers) from None
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
    """``[fn(item, abort) for item in items]`` from ``concurrency`` threads, in input order. The
    first exception sets ``abort`` and is re-raised; with ``finish_running``, calls in flight end
    first, so what they return is not lost (never on ``KeyboardInterrupt``).
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
# The endpoint.
# --------------------------------------------------------------------------------------------
class Endpoint:
    """An OpenAI-compatible API as a client holds it. The key is read from ``api_key_env`` on every
    request and never kept."""

    def __init__(self, base_url: str, *, api_key_env: str, timeout: float, retry: RetryPolicy | None = None,
                 max_retries: int | None = None, backoff: float | None = None, backoff_max: float | None = None,
                 retry_after_max: float | None = None, sleep: Callable[[float], None] | None = None) -> None:
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.retry = retry_policy(retry, max_retries=max_retries, backoff=backoff, backoff_max=backoff_max,
                                  retry_after_max=retry_after_max, sleep=sleep)
        self.retries = RetryLine()
        self.option_prefix: str | None = None

    def name_options(self, component: str) -> None:
        """Name ``timeout`` and ``max_retries`` in advice as options of ``component`` (``-o
        hyde.timeout=``); by default, as this client's keyword arguments."""
        self.option_prefix = f"{component}."

    def show_retries(self, line: RetryLine) -> None:
        """Show this client's retries on ``line`` (by default they are only logged)."""
        self.retries = line

    @property
    def max_retries(self) -> int:
        return self.retry.max_retries

    def check_endpoint(self, who: str) -> None:
        """A ``UserError`` naming ``who`` unless ``timeout`` is positive seconds and ``retry`` holds."""
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or self.timeout <= 0:
            raise UserError(f"{who}: timeout must be positive seconds, got {self.timeout!r}")
        self.retry.check(who)

    def key(self, *, required: bool, who: str) -> str | None:
        """The key, read now from ``$api_key_env``."""
        return api_key(self.api_key_env, required=required, who=who)

    def sdk(self, key: str | None):
        return openai_client(self.base_url, key=key, timeout=self.timeout)

    def poster(self, key: str | None) -> Callable[[str, dict], bytes]:
        """``post(path, body)``: the answer's bytes for a JSON POST under ``base_url``, over
        :meth:`_transport`'s choice. ``APICaller`` reads the failures of both."""
        direct, client, options = self._transport(key)
        if direct is not None:
            return lambda path, body: direct.post(path, body, key)
        # what the SDK's create() sends, without its per-request walk of the typed parameters
        return lambda path, body: client.post(path, cast_to=bytes, body=body, options=options)

    def getter(self, key: str | None) -> Callable[[str], bytes]:
        """``get(path)``: as :meth:`poster`, for a GET (``/models``)."""
        direct, client, options = self._transport(key)
        if direct is not None:
            return lambda path: direct.get(path, key)
        return lambda path: client.get(path, cast_to=bytes, options=options)

    def _transport(self, key: str | None):
        """Straight over ``http.client`` to a plain-HTTP server no proxy stands before
        (``transport``: such a run never imports the SDK), else the SDK's client and its requests'
        options: ``(direct, None, {})`` or ``(None, client, options)``."""
        from .transport import direct_http, goes_direct

        if goes_direct(self.base_url):
            return direct_http(self.base_url, self.timeout), None, {}
        headers = no_auth_header(key)
        return None, self.sdk(key), ({"headers": headers} if headers else {})

    def caller(self, url: str, *, model: str, malformed_advice: str,
               client_error: Callable[[int, str], str | None] | None, logger: logging.Logger) -> APICaller:
        """The retry loop for requests to ``url`` (under ``base_url``) for ``model``."""
        return APICaller(url, model=model, api_key_env=self.api_key_env, base_url=self.base_url, timeout=self.timeout,
                         retry=self.retry, malformed_advice=malformed_advice, client_error=client_error,
                         logger=logger, retries=self.retries, option_prefix=self.option_prefix)
