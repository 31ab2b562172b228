"""What the tests' fake API servers share: a threaded HTTP server on 127.0.0.1 (random free port),
recorded requests, scripted faults, and start/stop as a context manager."""

from __future__ import annotations

import json
import selectors
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


class LocalServer:
    """Subclasses set their own attributes, call ``super().__init__(api_key)`` and define ``_handler()``."""

    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key  # when set, requests without this key get 401
        self.requests: list[Recorded] = []
        self.delay = 0.0
        self.hang_s = 5.0
        self.in_flight = 0
        self.max_in_flight = 0
        self.overlap = 0  # no answer before this many requests have been in flight at once (see wait_for_overlap)
        self._faults: deque[tuple[str, dict]] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._released = threading.Event()  # set by release() and stop(): ``delay`` is over
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._wake_r, self._wake_w = socket.socketpair()  # stop() wakes the loop at once: no polling
        self._thread: threading.Thread | None = None

    def _handler(self):
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self):
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        """``serve_forever`` without its poll: a suite stops a server hundreds of times, and each
        stop waited for the poll's next tick."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._httpd, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping.is_set():
                if any(key.fileobj is self._httpd for key, _ in selector.select()):
                    self._httpd.handle_request()

    def wait_for_overlap(self) -> None:
        """In a handler, before answering: wait until ``overlap`` requests have been in flight at
        once (for at most 30 s), so a test of a concurrent client sees them overlap however late
        the machine starts its threads; a client that sends one at a time is only slowed."""
        deadline = time.monotonic() + 30
        while self.max_in_flight < self.overlap and time.monotonic() < deadline and not self._stopping.is_set():
            time.sleep(0.002)

    def release(self) -> None:
        """Answer at once every request waiting out ``delay``, and every later one: a test holds
        answers with a long ``delay`` and lets them go when what it checks has happened."""
        self._released.set()

    def stop(self) -> None:
        self._stopping.set()
        self._released.set()
        self._wake_w.send(b"\0")
        if self._thread is not None:
            self._thread.join(5)
        self._httpd.server_close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def fail(self, mode: str, times: int = 1, **options: Any) -> None:
        """Script the next ``times`` requests to answer with ``mode`` (queued after earlier ones)."""
        with self._lock:
            self._faults.extend([(mode, options)] * times)


class JSONHandler(BaseHTTPRequestHandler):
    """Request handler pieces both fakes share; subclasses set ``fake`` to their server."""

    fake: LocalServer
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall

    def log_message(self, *args) -> None:  # quiet
        pass

    def _leave(self) -> None:
        """Stop counting this request as in flight: before its answer goes out, so a client
        cannot start its next request while this one still counts."""
        if getattr(self, "_in_flight", False):
            self._in_flight = False
            with self.fake._lock:
                self.fake.in_flight -= 1

    def _send(self, status: int, payload: bytes, headers: dict | None = None) -> None:
        self._leave()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)

    def _error(self, status: int, message: str, headers: dict | None = None) -> None:
        self._send(status, json.dumps({"error": {"message": message, "type": "error"}}).encode(), headers)
