"""The OpenAI-compatible client against a stub chat-completions server on 127.0.0.1 (started here; no other
network): the request it sends (model, temperature 0, key, frames as base64 JPEG where the prompt's visual
marker is), retries with backoff on 429, 5xx and a timeout, the request-rate limit, errors that are not
retried, and answers through the runner."""

from __future__ import annotations

import base64
import io
import time

import numpy as np
import pytest
from PIL import Image

from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt

from helpers.encoded_videos import tiny_video
from helpers.openai_stub import Task, stub_fixture

stub = stub_fixture(TEST_API_KEY="sk-test")


def client(**settings) -> OpenAIChatBackend:
    """One request at a time unless `concurrency` is given: the stub's queued replies then go to the items in
    order (tests/multiple_choice/test_openai_concurrency.py has the requests in flight)."""
    return OpenAIChatBackend(**({"model": "stub-model", "base_url_env": "TEST_BASE_URL", "api_key_env": "TEST_API_KEY",
                                 "num_frames": 2, "backoff_seconds": 0.01, "requests_per_minute": None,
                                 "concurrency": 1} | settings))


def toy_task(items) -> Task:
    return Task(items, system="Be brief.")


@pytest.fixture
def items(tmp_path):
    paths = []
    for i, colour in enumerate([(255, 0, 0), (0, 0, 255), (0, 255, 0)]):
        paths.append(tmp_path / f"frame{i}.png")
        Image.new("RGB", (32, 24), colour).save(paths[-1])
    return [MultipleChoiceItem(id=str(i), question=f"question {i}?", options=("x", "y", "z"), answer=1,
                               visual=Visual(frames=tuple(paths), frame_times=(0.0, 1.0, 2.0)))
            for i in range(2)]


def test_requests_retries_and_answers_through_the_runner(stub, items, tmp_path):
    stub.queue = [(429, "slow down", 0), (503, "overloaded", 0), (200, "(B)", 0.5)]
    stub.default = "Answer: B"
    # the 429 and the 503 are retried; the third attempt times out (0.5 s > 0.25 s) and is retried too
    metrics = runner.run(toy_task(items), client(timeout_seconds=0.25), tmp_path, progress=False)
    assert metrics == {"Accuracy": 100.0, "count": 2}
    assert len(stub.requests) == 5  # 4 attempts for the first item, 1 for the second
    first = stub.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    body = first["body"]
    assert body["model"] == "stub-model" and body["temperature"] == 0.0
    system, user = body["messages"]
    assert system == {"role": "system", "content": "Be brief."}
    kinds = [part["type"] for part in user["content"]]
    assert kinds == ["image_url", "image_url", "text"]  # the frames where the visual marker is, then the texts
    url = user["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert image.size == (32, 24) and image.getpixel((16, 12))[0] > 200  # the first of 2 uniform picks: red
    # adjacent texts as one, joined by newlines (as the prompt's text has them)
    assert user["content"][2] == {"type": "text", "text": "question 0?\n(A) x\n(B) y\n(C) z"}
    records = runner.read_records(tmp_path / runner.RECORDS)
    assert [r.reply for r in records] == ["Answer: B", "Answer: B"]
    # what the model was shown: the clip's 2 frames at their size as sent
    assert records[0].meta == {"usage": {"total_tokens": 7},
                               "visuals": [{"kind": "clip as images", "frames": 2, "size": [32, 24]}]}


def test_gives_up_after_max_retries_and_does_not_retry_client_errors(stub, items):
    stub.queue = [(500, "down", 0)] * 3
    with pytest.raises(RuntimeError, match="gave up after 3 attempts; last: HTTP 500"):
        client(max_retries=2).answer(items[:1], [toy_task(items).prompt(items[0])])
    stub.queue = [(400, "bad image", 0)]
    n = len(stub.requests)
    with pytest.raises(RuntimeError, match="HTTP 400.*bad image"):
        client().answer(items[:1], [toy_task(items).prompt(items[0])])
    assert len(stub.requests) == n + 1


def test_request_rate_limit_and_text_only(stub, items):
    backend = client(requests_per_minute=600, text_only=True)  # at most one request per 0.1 s
    sent = []  # (the slot the limiter gave a request, when it went)
    wait = backend._wait_for_rate_limit

    def waited():
        slot = wait()
        sent.append((slot, time.monotonic()))
        return slot

    backend._wait_for_rate_limit = waited
    backend.answer(items, [toy_task(items).prompt(i) for i in items])
    assert backend.generate([Prompt(("Say hi.",))]) == ["Answer: B"]
    # slots 0.1 s apart, none sent early (a late wake-up on a loaded machine only sends it later)
    assert len(stub.requests) == 3 and len(sent) == 3 and min(np.diff([s for s, _ in sent])) >= 0.1 - 1e-9
    assert all(went >= slot for slot, went in sent)
    assert all(p["type"] == "text" for r in stub.requests for p in r["body"]["messages"][-1]["content"])


def test_caption_images_sends_one_image_per_request(stub, items):
    frames = [np.full((8, 8, 3), 200, np.uint8), np.zeros((8, 8, 3), np.uint8)]
    assert client().caption_images(frames, "Describe the image in 30 words") == ["Answer: B", "Answer: B"]
    for request in stub.requests:
        content = request["body"]["messages"][-1]["content"]
        assert [p["type"] for p in content] == ["image_url", "text"]
        assert content[1]["text"] == "Describe the image in 30 words"


def colour_of(part):
    url = part["image_url"]["url"]
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")).mean((0, 1))


def test_several_visuals_are_sent_in_prompt_order(stub, items, tmp_path):
    """The clip's frames at the marker, a context clip (the preview) and stills (middle frames) where the
    prompt puts them, each as its own images, in order."""
    video = tiny_video(tmp_path / "mission.mp4", [(0, 0, 0), (255, 255, 255), (0, 0, 0)])
    preview = Visual(video=video, start=1.0, end=2.0)  # the white second: 2 frames by the rule
    bright, dark = Visual(video=video, time=1.5), Visual(video=video, time=0.25)
    prompt = Prompt(("Intro.", Prompt.VISUAL, "The preview:", preview, "Step one:", bright, "Step two:", dark,
                     "Answer."))
    reply = client(num_frames=2).answer(items[:1], [prompt])[0]
    assert reply.text == "Answer: B"
    content = stub.requests[-1]["body"]["messages"][-1]["content"]
    layout = [p["text"] if p["type"] == "text" else "image" for p in content]
    assert layout == ["Intro.", "image", "image", "The preview:", "image", "image", "Step one:", "image",
                      "Step two:", "image", "Answer."]
    means = [colour_of(p) for p in content if p["type"] == "image_url"]
    assert means[0][0] > 200 and means[1][1] > 200 and means[1][0] < 60  # the clip: frames 0 and 2 of 3, red, green
    assert all(m.min() > 200 for m in means[2:5]) and means[5].max() < 60  # preview white, bright, dark
    text_only = client(text_only=True)
    text_only.answer(items[:1], [prompt])
    assert all(p["type"] == "text" for p in stub.requests[-1]["body"]["messages"][-1]["content"])
