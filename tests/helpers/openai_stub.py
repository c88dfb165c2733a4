"""A stub OpenAI-compatible chat-completions server on 127.0.0.1 (no other network): serves queued replies (or
replies derived from each request: `respond`, with the toy task below) and
records each request. Shared by the OpenAI client tests and the EgoCross judge tests. A queued `Raw` reply
misbehaves as a broken server does: any bytes (not JSON, too many), sent a byte at a time, or with a
Content-Length it does not keep; `refused_url()` is an address where nothing listens."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from spacewalk.multiple_choice.generation import AnswerLimits
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.parsing import parse_letter
from spacewalk.multiple_choice.task import Prompt


@dataclass(frozen=True)
class Raw:
    """A reply as bytes: `body` after `delay` seconds, `seconds_per_byte` between its bytes (a trickle), with a
    Content-Length of `length` (None: the body's own; a larger one: the connection closes before it is kept), or
    none (`send_length` false: the body ends when the connection closes)."""

    body: bytes
    status: int = 200
    delay: float = 0.0
    seconds_per_byte: float = 0.0
    length: int | None = None
    send_length: bool = True


def chat_reply(text: str) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()


def refused_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (a port just freed): connections to it are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class Stub:
    """Serves the queued (status, reply text, delay) or `Raw` replies in order, then `respond(body)`'s (status,
    reply text, delay) when set, else 200 with `default`; records each request and the most requests it held at
    once (`max_in_flight`). A delay or trickle ends early when the stub closes. With `gather` set, no request is
    answered until that many have been in flight together (or GATHER_SECONDS have passed), so that whether a client
    keeps that many open does not hang on how fast its threads start on a loaded machine."""

    GATHER_SECONDS = 30.0

    def __init__(self):
        self.queue, self.requests, self.default = [], [], "Answer: B"
        self.respond = None
        self.in_flight = self.max_in_flight = self.gather = 0
        self.closing = threading.Event()
        lock = self._changed = threading.Condition()
        stub = self

        def send_raw(handler, raw: Raw) -> None:
            if stub.closing.wait(raw.delay):
                return
            handler.send_response(raw.status)
            handler.send_header("Content-Type", "application/json")
            if raw.send_length:
                handler.send_header("Content-Length", str(len(raw.body) if raw.length is None else raw.length))
            handler.end_headers()
            if not raw.seconds_per_byte:
                handler.wfile.write(raw.body)
                return
            for k in range(len(raw.body)):
                handler.wfile.write(raw.body[k:k + 1])
                handler.wfile.flush()
                if stub.closing.wait(raw.seconds_per_byte):
                    return

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    stub.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body,
                                          "time": time.monotonic()})
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                    lock.notify_all()
                    lock.wait_for(lambda: stub.max_in_flight >= stub.gather or stub.closing.is_set(),
                                  timeout=stub.GATHER_SECONDS)
                    reply = (stub.queue.pop(0) if stub.queue else stub.respond(body) if stub.respond
                             else (200, stub.default, 0))
                if isinstance(reply, Raw):
                    try:
                        send_raw(self, reply)
                    except (BrokenPipeError, ConnectionResetError):  # the client gave up and left
                        pass
                    with lock:
                        stub.in_flight -= 1
                    self.close_connection = True
                    return
                status, text, delay = reply
                stub.closing.wait(delay)
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
        self.closing.set()
        with self._changed:  # a request gathering with others stops waiting
            self._changed.notify_all()
        self.server.shutdown()
        self.server.server_close()


# ---- a toy task whose replies the stub derives from the question (tests with requests in flight) ----


def question_of(body: dict) -> str:
    return next(p["text"] for p in body["messages"][-1]["content"] if p["type"] == "text").split("\n")[0]


def by_question(body: dict) -> tuple[int, str, float]:
    """A reply that depends on the question (so a record given to the wrong item would show), after a delay
    that does too, so replies come back out of order."""
    digest = hashlib.sha256(question_of(body).encode()).digest()
    return 200, f"Answer: {'ABC'[digest[0] % 3]}", 0.1 + digest[1] / 255 * 0.15


class Task:
    """A toy task of three-option letter questions, its official file a list in item order; `system`: the prompts'
    system message (none by default)."""

    name = "toy"
    answer_limits = AnswerLimits(local=16, api=16, source="toy letters")

    def __init__(self, items, system: str | None = None):
        self._items = items
        self._system = system

    def items(self):
        return self._items

    def prompt(self, item):
        return Prompt((Prompt.VISUAL, item.question, "(A) x\n(B) y\n(C) z"), system=self._system)

    def parse(self, item, reply):
        return parse_letter(reply, item.options)

    def metrics(self, items, records):
        return {"Accuracy": 100 * float(np.mean([r.correct for r in records])), "count": len(records)}

    def write_outputs(self, items, records, out_dir):
        from spacewalk.core.io import write_json

        write_json(out_dir / "answers.json", [r.choice for r in records])  # a list: its order is the items'


def toy_items(folder: Path, n: int) -> list[MultipleChoiceItem]:
    """`n` items "question <i>?" (answer i % 3), each a clip of three solid frames (red, blue, green) as files."""
    from PIL import Image

    paths = []
    for i, colour in enumerate([(255, 0, 0), (0, 0, 255), (0, 255, 0)]):
        paths.append(folder / f"frame{i}.png")
        Image.new("RGB", (32, 24), colour).save(paths[-1])
    return [MultipleChoiceItem(id=f"q{i:02d}", question=f"question {i}?", options=("x", "y", "z"), answer=i % 3,
                               visual=Visual(frames=tuple(paths), frame_times=(0.0, 1.0, 2.0)))
            for i in range(n)]


def stub_fixture(base_url_variable: str = "TEST_BASE_URL", **variables: str):
    """A pytest fixture serving a fresh Stub per test, its URL in `base_url_variable` and each of `variables` set in
    the environment for the test's duration (e.g. an API key): `stub = stub_fixture(TEST_API_KEY="sk-test")`."""

    @pytest.fixture
    def stub(monkeypatch):
        server = Stub()
        monkeypatch.setenv(base_url_variable, server.url)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        yield server
        server.close()

    return stub
