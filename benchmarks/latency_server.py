"""An OpenAI-compatible server for the benchmarks, in a process of its own (so its work is not the
client's): ``GET /v1/models`` lists one model, ``POST /v1/chat/completions`` answers after a fixed
latency, however many requests are in flight, with ``answer(body)`` (a module-level function, so
it can cross to the server's process). Connections are kept open (HTTP/1.1), as vLLM's are.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(answer: Callable[[dict], tuple[str, str | None]], model: str, latency: float, port) -> None:
    """Serve until terminated; ``port`` (a queue) gets the port. ``answer(body)`` gives the text and the
    stop string that ended it (None: none)."""
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
            self.reply({"object": "list", "data": [{"id": model, "object": "model", "root": model}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency)
            text, stop = answer(body)
            self.reply({"id": "x", "object": "chat.completion", "model": model, "created": 0,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop", "stop_reason": stop}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}})

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
        return f"http://127.0.0.1:{port.get(timeout=30)}/v1"

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.join()
