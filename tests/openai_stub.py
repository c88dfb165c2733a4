"""A stub OpenAI-compatible chat-completions server on 127.0.0.1 (no other network): serves queued replies and
records each request. Shared by the OpenAI client tests and the EgoCross judge tests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Stub:
    """Serves the queued (status, reply text, delay) in order, then `respond(body)`'s (status, reply text, delay)
    when set, else 200 with `default`; records each request and the most requests it held at once
    (`max_in_flight`)."""

    def __init__(self):
        self.queue, self.requests, self.default = [], [], "Answer: B"
        self.respond = None
        self.in_flight = self.max_in_flight = 0
        lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    stub.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body,
                                          "time": time.monotonic()})
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                    status, text, delay = (stub.queue.pop(0) if stub.queue else stub.respond(body) if stub.respond
                                           else (200, stub.default, 0))
                time.sleep(delay)
                with lock:
                    stub.in_flight -= 1
                payload = (json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}],
                                       "usage": {"total_tokens": 7}}) if status == 200
                           else json.dumps({"error": {"message": text}}))
                try:
                    self.send_response(status)
                    if status == 429:
                        self.send_header("Retry-After", "0")
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(payload.encode())
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
