"""The OpenAI-compatible client against a server that misbehaves (tests/openai_stub.py on 127.0.0.1): a reply
trickled a byte at a time, one never sent, one too large (declared or not), one that is not JSON or holds no
answer, HTTP 500 until the retries run out, a connection refused or cut short. Each either succeeds on a retry or
ends in one ServerError naming the URL, the item and what came back, within the attempt's deadline
(`timeout_seconds`, from connecting to the last byte); nothing of a refused reply reaches records.jsonl; settings
that cannot work are refused when the backend is built. Timeouts are fractions of a second."""

from __future__ import annotations

import json
import time

import pytest

from spacewalk.core.errors import ConfigError, UserInputError
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend, ServerError

from conftest import run_command
from openai_stub import Raw, Task, chat_reply, refused_url, stub_fixture, toy_items

stub = stub_fixture()


def client(**settings) -> OpenAIChatBackend:
    return OpenAIChatBackend(**({"model": "stub-model", "base_url_env": "TEST_BASE_URL", "num_frames": 2,
                                 "backoff_seconds": 0.01, "requests_per_minute": None, "concurrency": 1,
                                 "timeout_seconds": 0.4, "max_retries": 0} | settings))


@pytest.fixture
def items(tmp_path):
    return toy_items(tmp_path, 3)


def ask(backend, items):
    task = Task(items)
    return backend.answer(items, [task.prompt(item) for item in items])


def refusal(backend, items) -> tuple[str, float]:
    """The ServerError's message and how long the call took."""
    start = time.monotonic()
    with pytest.raises(ServerError) as error:
        ask(backend, items)
    assert isinstance(error.value, UserInputError) and isinstance(error.value, RuntimeError)
    return str(error.value), time.monotonic() - start


def test_a_trickled_reply_is_cut_off_at_the_deadline_and_retried(stub, items):
    # 80 bytes a byte every 0.1 s would take 8 s; each attempt has 0.4 s in all
    stub.queue = [Raw(chat_reply("Answer: A"), seconds_per_byte=0.1)]
    message, took = refusal(client(), items[:1])
    assert message == (f"{stub.url}/chat/completions: item q00: gave up after 1 attempts; last: no complete reply "
                       "within timeout_seconds=0.4")
    assert took < 4.0, took  # the deadline bounds the whole reply, not each byte's wait (a loaded machine's margin)
    # the headers trickled too (a server that stalls before its status line): the same deadline
    stub.queue = [Raw(chat_reply("Answer: A"), delay=5.0)]
    assert "no complete reply within timeout_seconds=0.4" in refusal(client(), items[:1])[0]
    # a retry gets the next, prompt, reply
    stub.queue = [Raw(chat_reply("Answer: A"), seconds_per_byte=0.1), (200, "Answer: C", 0)]
    assert [r.text for r in ask(client(max_retries=1), items[:1])] == ["Answer: C"]


def test_a_request_never_answered_ends_after_every_attempt_has_had_its_time(stub, items):
    stub.queue = [(200, "Answer: A", 30.0)] * 2
    message, took = refusal(client(timeout_seconds=0.2, max_retries=1), items[:1])
    assert "item q00: gave up after 2 attempts; last: no complete reply within timeout_seconds=0.2" in message
    assert took < 4.0, took  # not the 30 s the server would take


def test_a_reply_over_the_size_limit_is_refused_and_never_recorded(stub, items, tmp_path):
    big = chat_reply("A" * 5000)
    stub.queue = [Raw(big)]  # Content-Length says it: refused before the body is read
    message, _ = refusal(client(max_reply_bytes=1000), items[:1])
    assert message == (f"{stub.url}/chat/completions: item q00: the reply is {len(big)} bytes, over "
                       "max_reply_bytes=1000")
    stub.queue = [Raw(big, send_length=False)]  # no length: read up to the limit, then refused
    assert "the reply is over max_reply_bytes=1000 (refused after 1001 bytes)" in refusal(
        client(max_reply_bytes=1000), items[:1])[0]
    assert len(stub.requests) == 2  # not retried: the same request would get the same reply
    # through the runner: the items before it are recorded, the oversized reply nowhere
    stub.queue = [(200, "Answer: A", 0), Raw(big)]
    with pytest.raises(ServerError, match="item q01: the reply is"):
        runner.run(Task(items), client(max_reply_bytes=1000), tmp_path / "run", progress=False)
    records = (tmp_path / "run" / runner.RECORDS).read_text()
    assert [json.loads(line)["item_id"] for line in records.splitlines()] == ["q00"] and "AAAA" not in records


def test_replies_that_are_not_an_answer_name_the_url_the_item_and_what_came(stub, items):
    cases = [(Raw(b"<html>proxy error</html>"), "item q00: the reply is not JSON (", "<html>proxy error"),
             (Raw(b'{"choices": []}'), "item q00: no answer in the reply (choices[0].message.content)",
              '{"choices": []}'),
             (Raw(b'{"choices": [{"message": {"content": 7}}]}'), "no answer in the reply", '"content": 7'),
             (Raw(b'{"error": "oops"}', status=400), "item q00: HTTP 400: ", '"oops"')]
    for reply, *expected in cases:
        stub.queue = [reply]
        n = len(stub.requests)
        message, _ = refusal(client(max_retries=3), items[:1])
        assert message.startswith(f"{stub.url}/chat/completions: ") and all(t in message for t in expected), message
        assert len(stub.requests) == n + 1  # none of these is retried


def test_server_errors_and_cut_connections_are_retried_then_named(stub, items):
    stub.queue = [(500, "down", 0)] * 3
    message, _ = refusal(client(max_retries=2), items[1:2])
    assert message == (f"{stub.url}/chat/completions: item q01: gave up after 3 attempts; last: HTTP 500: "
                       '{"error": {"message": "down"}}')
    # a reply that promises more bytes than it sends (the connection closes under it), then a good one
    stub.queue = [Raw(chat_reply("Answer: A"), length=500), (200, "Answer: B", 0)]
    assert [r.text for r in ask(client(max_retries=1), items[:1])] == ["Answer: B"]


def test_a_refused_connection_is_retried_then_named(monkeypatch, items):
    url = refused_url()
    monkeypatch.setenv("TEST_BASE_URL", url)
    message, _ = refusal(client(max_retries=2), items[:1])
    assert message.startswith(f"{url}/chat/completions: item q00: gave up after 3 attempts; last: "
                              "ConnectionRefusedError"), message


def test_settings_that_cannot_work_are_refused_when_the_backend_is_built():
    for settings, message in (({"timeout_seconds": -1}, "timeout_seconds=-1: a number above 0"),
                              ({"timeout_seconds": 0}, "timeout_seconds=0: a number above 0"),
                              ({"max_retries": -1}, "max_retries=-1: a whole number of at least 0"),
                              ({"max_retries": 1.5}, "max_retries=1.5: a whole number of at least 0"),
                              ({"requests_per_minute": -5}, "requests_per_minute=-5: a number above 0 (or null"),
                              ({"requests_per_minute": 0}, "requests_per_minute=0: a number above 0"),
                              ({"backoff_seconds": -1}, "backoff_seconds=-1: a number of at least 0"),
                              ({"max_backoff_seconds": "x"}, "max_backoff_seconds='x'"),
                              ({"max_reply_bytes": 0}, "max_reply_bytes=0: a whole number above 0"),
                              ({"image_max_side": -5}, "image_max_side=-5: a whole number above 0"),
                              ({"temperature": -1}, "temperature=-1: a number of at least 0"),
                              ({"num_frames": None, "fps": -1.0}, "fps must be above 0"),
                              ({"num_frames": None, "fps": 1.0, "max_frames": 0}, "max_frames must be at least 1")):
        with pytest.raises(ConfigError) as error:
            client(**settings)
        assert str(error.value).startswith(message), (settings, str(error.value))
    assert client(requests_per_minute=None, max_retries=0, backoff_seconds=0).min_interval == 0.0


@pytest.mark.slow
def test_the_command_ends_with_one_line_and_run_json_records_the_limits(stub, tmp_path):
    """evaluate.py with model=mc_openai against a server that answers the first question, then fails for good:
    exit 2, one `error:` line naming the URL and the item; the first record kept; run.json holds the deadline and
    the size limit."""
    stub.queue = [(200, "Answer: A", 0)] + [(503, "overloaded", 0)] * 2
    run_dir = tmp_path / "run"
    result = run_command("evaluate.py", "data=spacewalk18_qa", f"data.synthetic_root={tmp_path / 'synthetic'}",
                         "+data.synthetic.n_test=1", "+data.synthetic.questions_per_video=3", "data.limit=3",
                         "model=mc_openai", "model.model=stub-model", "model.text_only=true",
                         "model.requests_per_minute=null", "model.concurrency=1", "model.max_retries=1",
                         "model.backoff_seconds=0.01", "model.timeout_seconds=5", "model.max_reply_bytes=100000",
                         "multiple_choice.progress=false", f"hydra.run.dir={run_dir}",
                         env={"OPENAI_BASE_URL": stub.url, "OMP_NUM_THREADS": "1"}, check=False, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {stub.url}/chat/completions: item ") and "gave up after 2 attempts; last: " \
        "HTTP 503" in last, last
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 1
    model = json.loads((run_dir / "run.json").read_text())["model"]
    assert (model["timeout_seconds"], model["max_reply_bytes"]) == (5, 100000)


def test_https_to_a_server_that_does_not_speak_it_is_named_at_once(stub, monkeypatch, items):
    url = stub.url.replace("http://", "https://")  # the stub speaks plain HTTP: the TLS handshake fails
    monkeypatch.setenv("TEST_BASE_URL", url)
    message, _ = refusal(client(max_retries=3, backoff_seconds=5.0), items[:1])  # a retry would wait 5 s
    assert message.startswith(f"{url}/chat/completions: item q00: SSLError: ") and "gave up" not in message
