"""POST a JSON body to an HTTP API and retry what is worth retrying; standard library only.

Shared by the API clients (``r2med_plugins.dense.api`` embeddings, ``r2med_plugins.llm`` chat):

- ``JSONPoster(url, ...).post(body, parse, key=...)``: one JSON request, sent with ``Authorization:
  Bearer <key>`` when a key is given (none otherwise), answered through ``parse(payload_bytes)``.
  Retried, with exponential backoff and jitter, on HTTP 408/429/5xx, timeouts, connection errors
  and replies ``parse`` rejects by raising ``BadResponse``; a ``Retry-After``/``retry-after-ms``
  header sets the wait instead (capped). Other 4xx (and 3xx: redirects are not followed, so a key
  never travels to another host) fail at once. Every failure that leaves is a one-line
  ``UserError`` naming the URL and what to do.
- ``api_key(env, ...)``: the key from an environment variable, read when needed and never stored.
- ``map_concurrently(fn, items, concurrency)``: ``fn`` over ``items`` from a thread pool, results
  in input order; the first failure stops the rest.
- ``scrub``, ``server_message``, ``retry_after``: the pieces, for callers with their own needs.

Keys never reach messages, logs or reprs: ``JSONPoster`` does not hold one (it is passed to each
``post``), and every server text shown is scrubbed of the key and of anything shaped like one.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import os
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from .errors import UserError

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

KEY_LIKE = re.compile(r"\b(?:sk|pa)-[A-Za-z0-9_*.\-]{3,}")


class BadResponse(Exception):
    """Raised by a ``parse`` callback: the reply is unusable, so the request is retried.

    ``advice`` (optional) replaces the poster's ``malformed_advice`` in the final error.
    """

    def __init__(self, detail: str, advice: str | None = None) -> None:
        super().__init__(detail)
        self.advice = advice


class Aborted(Exception):
    """A request gave up because ``abort`` was set (another request of the same call failed)."""


def scrub(text: str, key: str | None, limit: int = 300) -> str:
    """One line, no key (nor anything shaped like one: OpenAI echoes a masked key on 401)."""
    if key:
        text = text.replace(key, "***")
    text = KEY_LIKE.sub("***", text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def server_message(payload: bytes) -> str:
    """The human part of an error body: ``error.message``/``detail``, else the start of the body."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return payload[:500].decode("utf-8", "replace")
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            for field in ("message", "detail"):
                if isinstance(err.get(field), str):
                    return err[field]
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


def api_key(env: str, *, required: bool, who: str) -> str | None:
    """The stripped value of ``$env``; ``None`` when unset or blank, unless ``required`` (UserError)."""
    key = os.environ.get(env, "").strip()
    if key:
        return key
    if required:
        raise UserError(f"{who} needs an API key: set the environment variable {env} (it is read from there only)")
    return None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects come back as their 3xx answer: urllib would resend the Authorization header to
    wherever the Location points, and turn the POST into a GET."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


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


class JSONPoster:
    """POSTs JSON to ``url`` (for ``model``), with the retry policy below; holds no key.

    - attempt ``n`` failing transiently waits ``min(backoff_max, backoff * 2**(n-1))`` seconds times a
      random 0.5..1 (jitter); a ``Retry-After``/``retry-after-ms`` header wins, capped at
      ``retry_after_max``; at most ``max_retries`` retries, then a ``UserError``:
      ``"<url> failed <n> time(s) for <model>, the last with <failure>; <advice>"``.
    - a 3xx or 4xx other than 408/429 is not retried: ``client_error(status, message)`` (optional,
      given the scrubbed server message) may raise its own exception or return the advice; else
      ``default_fix``; then ``UserError("<url> refused the request (HTTP <status> ...); <advice>")``.
    - ``sleep``: called with each wait instead of waiting (tests); by default the wait ends early,
      raising ``Aborted``, when ``abort`` (passed to ``post``) is set.
    """

    def __init__(self, url: str, *, model: str, api_key_env: str, base_url: str | None = None,
                 timeout: float = 60.0, max_retries: int = 6, backoff: float = 1.0, backoff_max: float = 30.0,
                 retry_after_max: float = 60.0, sleep: Callable[[float], None] | None = None,
                 malformed_advice: str = "check that base_url serves an OpenAI-compatible API",
                 client_error: Callable[[int, str], str | None] | None = None,
                 logger: logging.Logger | None = None, user_agent: str = "r2med-harness") -> None:
        self.url = url
        self.model = model
        self.api_key_env = api_key_env
        self.base_url = base_url if base_url is not None else url.rsplit("/", 1)[0]
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff, self.backoff_max, self.retry_after_max = backoff, backoff_max, retry_after_max
        self.malformed_advice = malformed_advice
        self._sleep = sleep
        self._client_error = client_error
        self._log = logger or log
        self._user_agent = user_agent
        self._opener = urllib.request.build_opener(_NoRedirect)

    def __repr__(self) -> str:
        return f"JSONPoster({self.url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def post(self, body: Any, parse: Callable[[bytes], T], *, key: str | None,
             abort: threading.Event | None = None) -> T:
        """``parse(payload)`` of the first 2xx answer ``parse`` accepts; see the class for the rest."""
        data = json.dumps(body).encode("utf-8")
        abort = abort if abort is not None else threading.Event()
        attempts = self.max_retries + 1
        failure, advice = "", ""
        for attempt in range(1, attempts + 1):
            if abort.is_set():
                raise Aborted()
            wait_s = None
            timeout_failure = (f"no answer within {self.timeout:g} s", "check the network, or raise timeout")
            try:
                status, reason, headers, payload = self._send(data, key)
            except (TimeoutError, socket.timeout):
                failure, advice = timeout_failure
            except urllib.error.URLError as e:
                if isinstance(e.reason, (TimeoutError, socket.timeout)):
                    failure, advice = timeout_failure
                else:
                    failure = f"connection failed ({scrub(str(e.reason), key, 120)})"
                    advice = "check the network and base_url"
            except (OSError, http.client.HTTPException) as e:
                failure = f"connection failed ({type(e).__name__})"
                advice = "check the network and base_url"
            else:
                if 200 <= status < 300:
                    try:
                        return parse(payload)
                    except BadResponse as e:
                        failure = f"a malformed response ({scrub(str(e), key, 200)})"
                        advice = e.advice or self.malformed_advice
                elif status in (408, 429) or status >= 500:
                    wait_s = retry_after(headers, self.retry_after_max)
                    message = scrub(server_message(payload), key, 200)
                    failure = f"HTTP {status} {reason}" + (f": {message}" if message else "")
                    advice = ("the API is rate-limiting: wait and rerun, lower concurrency, or raise max_retries"
                              if status == 429 else "the service is failing: try again later")
                else:
                    raise self._refused(status, reason, server_message(payload), key, headers)
            if attempt == attempts:
                break
            delay = wait_s if wait_s is not None else self.backoff_delay(attempt)
            self._log.warning("%s: %s; retry %d of %d in %.1f s", self.url, failure, attempt, self.max_retries,
                              delay)
            if self._sleep is not None:
                self._sleep(delay)
            elif abort.wait(delay):
                raise Aborted()
        raise UserError(f"{self.url} failed {attempts} time(s) for {self.model}, the last with {failure}; {advice}")

    def backoff_delay(self, attempt: int) -> float:
        """Exponential (backoff * 2**(attempt-1), capped at backoff_max) with jitter in [50%, 100%]."""
        return min(self.backoff_max, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def _refused(self, status: int, reason: str, message: str, key: str | None, headers) -> UserError:
        message = scrub(message, key, 200)
        fix = self._client_error(status, message) if self._client_error is not None else None
        if fix is None:
            location = headers.get("Location") if headers is not None and 300 <= status < 400 else None
            fix = default_fix(status, api_key_env=self.api_key_env, model=self.model, base_url=self.base_url,
                              key_sent=key is not None, location=scrub(location, key, 200) if location else None)
        detail = f"HTTP {status} {reason}" + (f": {message}" if message else "")
        return UserError(f"{self.url} refused the request ({detail}); {fix}")

    def _send(self, data: bytes, key: str | None):
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": self._user_agent}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=data, method="POST", headers=headers)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return response.status, response.reason, response.headers, response.read()
        except urllib.error.HTTPError as e:
            try:
                payload = e.read()
            except (OSError, http.client.HTTPException):
                payload = b""
            finally:
                e.close()
            return e.code, e.reason, e.headers, payload


def map_concurrently(fn: Callable[[T, threading.Event], R], items: Sequence[T], concurrency: int,
                     name: str = "r2med-http", *, finish_running: bool = False) -> list[R]:
    """``[fn(item, abort) for item in items]`` from ``concurrency`` threads, in input order.

    The first exception is re-raised once it happens: ``abort`` is set (so ``JSONPoster.post`` in
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
