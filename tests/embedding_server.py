"""A local stand-in for the OpenAI and Voyage embeddings APIs, for offline tests.

``POST <url>/embeddings`` answers ``{"object": "list", "data": [{"object": "embedding", "index": i,
"embedding": [...]}], "model": ..., "usage": ...}`` with a vector derived from each input by a hash
(``fake_embedding``), so a test computes the expected rows on its own. Every request is recorded
(path, lower-cased headers, JSON body). ``fail(mode, times)`` scripts the next requests:

- ``"429"``: HTTP 429 with ``Retry-After`` (``retry_after=``, default "0")
- ``"500"``: HTTP 500 (with ``message=``)
- ``"401"``: HTTP 401 whose message echoes the key (as OpenAI echoes a masked one)
- ``"400"``: HTTP 400 with ``message=``
- ``"hang"``: no answer for ``hang_s`` seconds (or until ``stop()``), then a normal one
- ``"malformed"``: HTTP 200 with a body that is not JSON
- ``"no_data"``: HTTP 200 JSON without ``data``
- ``"wrong_count"``: HTTP 200 with one embedding fewer than inputs
- ``"shuffle"``: HTTP 200 with ``data`` in reversed order (``index`` still right; not a failure)

``encoding_format: "base64"`` in a request gets each embedding as base64 little-endian float32, as
both real APIs answer it. ``max_input_words``: inputs longer than that many space-separated words get OpenAI's 400
"maximum context length" answer. ``delay``: seconds every request takes (to see concurrency);
``overlap``: no answer before that many requests were in flight at once (``wait_for_overlap``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from typing import Any

from local_server import JSONHandler, LocalServer, Recorded

DIM = 8


def fake_embedding(text: str, model: str, input_type: str | None = None, dim: int = DIM) -> list[float]:
    """Deterministic float32-exact values in [-1, 1) from sha256 of the JSON list [model, input_type,
    text] (an unambiguous encoding: a NUL inside a text cannot make two inputs one)."""
    seed = json.dumps([model, input_type or "", text], ensure_ascii=True).encode("ascii")
    digest = b""
    counter = 0
    while len(digest) < 2 * dim:
        digest += hashlib.sha256(seed + struct.pack("<I", counter)).digest()
        counter += 1
    return [(int.from_bytes(digest[2 * i:2 * i + 2], "little") - 32768) / 32768 for i in range(dim)]


class EmbeddingServer(LocalServer):
    def __init__(self, *, dim: int = DIM, api_key: str | None = None) -> None:
        self.dim = dim
        self.max_input_words: int | None = None
        super().__init__(api_key)

    def inputs(self) -> list[list[str]]:
        """The ``input`` list of every recorded request, in arrival order."""
        return [r.body["input"] for r in self.requests]

    # -- the handler -----------------------------------------------------------------------------
    def expected(self, body: dict) -> list[list[float]]:
        return [fake_embedding(t, body.get("model"), body.get("input_type"), self.dim) for t in body["input"]]

    def _handler(self):
        server = self

        class Handler(JSONHandler):
            fake = server
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with server._lock:
                    server.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                    body))
                    fault = server._faults.popleft() if server._faults else (None, {})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    self._in_flight = True
                try:
                    server.wait_for_overlap()
                    if server.delay:
                        server._released.wait(server.delay)
                    self._answer(body, *fault)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a "hang")
                finally:
                    self._leave()

            def _answer(self, body: Any, mode: str | None, options: dict) -> None:
                auth = self.headers.get("Authorization", "")
                if not self.path.endswith("/embeddings"):
                    return self._error(404, f"no route {self.path}")
                if mode == "401" or (server.api_key is not None and auth != f"Bearer {server.api_key}"):
                    return self._error(401, f"Incorrect API key provided: {auth.removeprefix('Bearer ')}. "
                                            "You can find your API key at https://example.invalid.")
                if mode == "429":
                    return self._error(429, "Rate limit reached", {"Retry-After": str(options.get("retry_after", "0"))})
                if mode == "500":
                    return self._error(500, options.get("message", "The server had an error while processing "
                                                                   "your request."))
                if mode == "400":
                    return self._error(400, options.get("message", "bad request"))
                if mode == "hang":
                    server._stopping.wait(options.get("hang_s", server.hang_s))
                if mode == "malformed":
                    return self._send(200, b'{"object": "list", "data": [')
                if mode == "no_data":
                    return self._send(200, b'{"object": "list"}')
                if not isinstance(body, dict) or not isinstance(body.get("input"), list):
                    return self._error(400, "'input' must be a list")
                if server.max_input_words is not None:
                    for i, text in enumerate(body["input"]):
                        n = len(text.split(" "))
                        if n > server.max_input_words:
                            return self._error(400, f"This model's maximum context length is "
                                                    f"{server.max_input_words} tokens, however you requested "
                                                    f"{n} tokens (input {i}). Please reduce your prompt.")
                rows = server.expected(body)
                if body.get("encoding_format") == "base64":  # as both APIs do: little-endian float32
                    rows = [base64.b64encode(struct.pack(f"<{len(e)}f", *e)).decode() for e in rows]
                data = [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(rows)]
                if mode == "wrong_count":
                    data = data[:-1]
                if mode == "shuffle":
                    data = data[::-1]
                self._send(200, json.dumps({"object": "list", "data": data, "model": body.get("model"),
                                            "usage": {"prompt_tokens": 0, "total_tokens": 0}}).encode())

        return Handler
