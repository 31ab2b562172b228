"""An OpenAI-compatible server for the benchmarks, in a process of its own (so its work is not the
client's): ``GET /v1/models`` lists one model, ``POST /v1/chat/completions`` answers after a fixed
latency, however many requests are in flight, with ``answer(body)`` (a module-level function, so
it can cross to the server's process). Connections are kept open (HTTP/1.1), as vLLM's are.
``span()`` gives the seconds from the first request to the last answer since the previous call:
how long the server was kept at work.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(answer: Callable[[dict], tuple[str, str | None]], model: str, latency: float, port) -> None:
    """Serve until terminated; ``port`` (a queue) gets the port. ``answer(body)`` gives the text and the
    stop string that ended it (None: none)."""
    span: list[float | None] = [None, None]  # the first request's arrival, the last answer's departure
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.endswith("/span"):  # the benchmark's own: the span since the last call, and a new one
                with lock:
                    done = span[1] - span[0] if span[0] is not None else 0.0
                    span[:] = [None, None]
                return self.reply({"seconds": done})
            self.reply({"object": "list", "data": [{"id": model, "object": "model", "root": model}]})

        def do_POST(self):
            with lock:
                if span[0] is None:
                    span[0] = time.monotonic()
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency)
            text, stop = answer(body)
            self.reply({"id": "x", "object": "chat.completion", "model": model, "created": 0,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop", "stop_reason": stop}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}})
            with lock:
                span[1] = time.monotonic()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256  # the listen backlog: set before the socket listens (5 by default, so
        # 32 clients connecting at once had SYNs dropped and resent a second later)

    httpd = Server(("127.0.0.1", 0), Handler)
    port.put(httpd.server_address[1])
    httpd.serve_forever()


class LatencyServer:
    """``with LatencyServer(answer, model, latency) as base_url:`` (``http://127.0.0.1:PORT/v1``)."""

    def __init__(self, answer: Callable[[dict], tuple[str, str | None]], model: str, latency: float) -> None:
        self.args = (answer, model, latency)

    def __enter__(self) -> str:
        port = multiprocessing.Queue()
        self.process = multiprocessing.Process(target=serve, args=(*self.args, port), daemon=True)
        self.process.start()
        self.base_url = f"http://127.0.0.1:{port.get(timeout=30)}/v1"
        return self.base_url

    def span(self) -> float:
        """Seconds from the first request to the last answer since the last call (0: none)."""
        with urllib.request.urlopen(f"{self.base_url}/span", timeout=30) as reply:
            return json.loads(reply.read())["seconds"]

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.join()
