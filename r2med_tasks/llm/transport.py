"""Requests to a plain-HTTP server that no proxy stands before (vLLM, Ollama or llama.cpp on this
machine or the local network): ``http.client`` on kept-alive connections. The SDK's request
building and httpx take two thirds of a request's client time, which bound a reranker at
concurrency 32; HTTPS and proxied hosts keep the SDK's transport (its TLS and proxy settings).
``APICaller`` reads its failures as it reads the SDK's.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import select
import threading
import urllib.request
import zlib
from contextlib import suppress
from http import HTTPStatus
from importlib.metadata import PackageNotFoundError, version
from urllib.parse import unquote, urlsplit

import orjson


def goes_direct(base_url: str) -> bool:
    """True for an ``http://`` URL whose host no proxy setting of the environment applies to (as
    httpx reads them: ``http_proxy``, ``all_proxy``, ``no_proxy``, either case)."""
    parts = urlsplit(base_url)
    if parts.scheme.lower() != "http" or not parts.hostname:
        return False
    if not (_env("http_proxy") or _env("all_proxy")):
        return True
    return bool(urllib.request.proxy_bypass_environment(parts.hostname, {"no": _env("no_proxy") or ""}))


def _env(name: str) -> str | None:
    return os.environ.get(name) or os.environ.get(name.upper())


def user_agent() -> str:
    try:
        return f"r2med/{version('r2med')}"
    except PackageNotFoundError:
        return "r2med"


class DirectHTTP:
    """``post(path, body)`` and ``get(path)``, the answer's bytes, under ``base_url`` (its query
    string kept), thread-safe: each request takes an idle connection or opens one, and gives it
    back once its answer is read."""

    def __init__(self, base_url: str, *, timeout: float) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.query = f"?{parts.query}" if parts.query else ""
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Accept": "application/json",
                        "Accept-Encoding": "identity", "User-Agent": user_agent()}
        self.basic = None  # user info in the URL is sent as basic auth, as httpx sends it (over a key)
        if parts.username is not None or parts.password is not None:
            pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
            self.basic = "Basic " + base64.b64encode(pair.encode()).decode()
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def post(self, path: str, body: dict, key: str | None) -> bytes:
        """The answer's bytes for a 2xx; ``Refused`` otherwise, ``NoAnswer`` or ``ConnectionFailed``
        when none comes."""
        return self._request("POST", path, _json_bytes(body), key)

    def get(self, path: str, key: str | None) -> bytes:
        """As :meth:`post`, for a GET (``/models``)."""
        return self._request("GET", path, None, key)

    def _request(self, method: str, path: str, data: bytes | None, key: str | None) -> bytes:
        auth = self.basic or (f"Bearer {key}" if key else None)
        headers = self.headers if data is not None else {k: v for k, v in self.headers.items() if k != "Content-Type"}
        headers = headers if auth is None else {**headers, "Authorization": auth}
        target = f"{self.prefix}{path}{self.query}"
        conn = self._connection()
        while True:
            fresh = conn is None
            if conn is None:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                conn.request(method, target, data, headers)
                response = conn.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                conn.close()
                if not fresh:  # the server closed a kept-alive connection: once more on a new one
                    conn = None
                    continue
                raise ConnectionFailed() from e
            except TimeoutError as e:
                conn.close()
                raise NoAnswer() from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise ConnectionFailed() from e
            break
        if response.will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        if (response.getheader("Content-Encoding") or "identity").lower() in ("gzip", "deflate"):
            with suppress(zlib.error):  # asked for none, got one anyway; a broken one is read as malformed
                payload = zlib.decompress(payload, 47)  # 47: a gzip or a zlib header, whichever it is
        if 200 <= response.status < 300:
            return payload
        raise Refused(response.status, response.msg, payload)

    def _connection(self) -> http.client.HTTPConnection | None:
        """An idle connection the server has not closed, or None."""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if conn.sock is not None and not _readable(conn.sock):
                return conn  # nothing to read on an idle connection: still open
            conn.close()  # readable while idle: closed by the server (or garbage)


def _readable(sock) -> bool:
    """Whether ``sock`` has something to read now (poll: select() cannot take a descriptor past 1023)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


def _json_bytes(body: dict) -> bytes:
    """The body as the SDK encodes it (compact, UTF-8), by orjson: a listwise window's 12 KB in 3 µs
    where ``json`` takes 58 µs here. Whatever orjson refuses (an integer beyond 64 bits) goes through
    ``json``; the numbers are the same, a few written otherwise (``0.00001`` for ``1e-05``)."""
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class NoAnswer(Exception):
    """No answer within the timeout."""


class ConnectionFailed(Exception):
    """The connection failed; its cause is the ``OSError``."""


class Refused(Exception):
    """An answer other than 2xx: its status, reason phrase (the standard one, as httpx gives it),
    headers and body."""

    def __init__(self, status: int, headers, content: bytes) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.headers, self.content = status, headers, content
        self.reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""


_pools: dict[tuple[str, float], DirectHTTP] = {}
_pools_lock = threading.Lock()


def direct_http(base_url: str, timeout: float) -> DirectHTTP:
    """The process's ``DirectHTTP`` for ``base_url`` and ``timeout``: its connections are shared."""
    with _pools_lock:
        pool = _pools.get((base_url, timeout))
        if pool is None:
            pool = _pools[(base_url, timeout)] = DirectHTTP(base_url, timeout=timeout)
        return pool
