"""The OpenAI-compatible client with several requests in flight, against the stub server on 127.0.0.1: the same
files as a serial run whatever order the replies come in, at most `concurrency` requests at once, a run that
fails mid-way resumes with only the missing items asked, the rate limit held over all threads, and clips sent
as one video part (vLLM's `video_url`, an mp4 or vLLM's JPEG frame list) instead of images."""

from __future__ import annotations

import base64
import io
import time

import numpy as np
import pytest
from PIL import Image

from spacewalk.core.errors import ConfigError
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt

from helpers.openai_stub import Task, by_question, question_of, stub_fixture, toy_items

FILES = ("records.jsonl", "prompt_parts.jsonl", "metrics.json", "answers.json", "run.json")


stub = stub_fixture()


def client(**settings) -> OpenAIChatBackend:
    return OpenAIChatBackend(**({"model": "stub-model", "base_url_env": "TEST_BASE_URL", "api_key_env": "NO_KEY",
                                 "num_frames": 2, "backoff_seconds": 0.01, "requests_per_minute": None} | settings))


@pytest.fixture
def items(tmp_path):
    return toy_items(tmp_path, 16)


def files(run_dir):
    return {name: (run_dir / name).read_bytes() for name in FILES}


def test_requests_in_flight_give_the_files_of_a_serial_run(stub, items, tmp_path):
    stub.respond = by_question
    serial = runner.run(Task(items), client(concurrency=1), tmp_path / "serial", progress=False)
    assert stub.max_in_flight == 1
    stub.max_in_flight = 0
    stub.gather = 8  # the first replies wait for the eighth request: the client must open that many at once
    start = len(stub.requests)
    concurrent = runner.run(Task(items), client(concurrency=8), tmp_path / "concurrent", progress=False)
    assert stub.max_in_flight == 8  # never more than asked, and as many
    arrived = [question_of(r["body"]) for r in stub.requests[start:]]
    assert sorted(arrived) == sorted(f"question {i}?" for i in range(16))  # each item asked once
    assert concurrent == serial and 0 < serial["Accuracy"] < 100
    # every file byte for byte, run.json included (concurrency is a speed setting, not part of the identity)
    assert files(tmp_path / "concurrent") == files(tmp_path / "serial")


def test_a_failed_request_stops_the_run_and_a_rerun_asks_only_the_missing_items(stub, items, tmp_path):
    def fails_on_question_5(body):
        if question_of(body) == "question 5?":
            return 400, "bad request", 0.0
        return by_question(body)

    stub.respond = fails_on_question_5
    with pytest.raises(RuntimeError, match="HTTP 400.*bad request"):
        runner.run(Task(items), client(concurrency=4), tmp_path / "run", progress=False)
    kept = runner.read_records(tmp_path / "run" / runner.RECORDS)  # the replies that were in when it stopped
    assert 0 < len(kept) < len(items) and "q05" not in {r.item_id for r in kept}
    assert not (tmp_path / "run" / runner.METRICS).exists()

    stub.respond = by_question
    start = len(stub.requests)
    runner.run(Task(items), client(concurrency=4), tmp_path / "run", progress=False)
    asked = sorted(question_of(r["body"]) for r in stub.requests[start:])
    assert asked == sorted(f"question {int(i.id[1:])}?" for i in items if i.id not in {r.item_id for r in kept})
    runner.run(Task(items), client(concurrency=1), tmp_path / "serial", progress=False)
    assert files(tmp_path / "run") == files(tmp_path / "serial")


def test_the_rate_limit_holds_over_all_requests_in_flight(stub, items):
    backend = client(requests_per_minute=600, concurrency=8, text_only=True)  # one request per 0.1 s in all
    sent = []  # (the slot a request was given, when it went)
    wait = backend._wait_for_rate_limit

    def waited():
        slot = wait()
        sent.append((slot, time.monotonic()))
        return slot

    backend._wait_for_rate_limit = waited
    backend.answer(items[:6], [Task(items).prompt(i) for i in items[:6]])
    slots = sorted(slot for slot, _ in sent)
    assert len(sent) == 6
    # the slots are 0.1 s apart whichever thread asked, and no request went before its slot (a thread that wakes
    # late on a loaded machine only goes later: no timing tolerance needed)
    assert min(np.diff(slots)) >= 0.1 - 1e-9 and slots[-1] - slots[0] >= 0.5 - 1e-9
    assert all(went >= slot for slot, went in sent)


def test_bad_settings_are_refused():
    for settings, field in (({"concurrency": 0}, "concurrency"), ({"clip_as": "gif"}, "clip_as"),
                            ({"video_format": "webm"}, "video_format")):
        with pytest.raises(ConfigError, match=field):
            client(**settings)


def decoded_mp4(url: str) -> tuple[list[np.ndarray], float]:
    import av

    assert url.startswith("data:video/mp4;base64,")
    with av.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as container:
        rate = float(container.streams.video[0].average_rate)
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)], rate


@pytest.mark.parametrize("video_format", ["mp4", "jpeg"])
def test_clips_go_as_one_video_part_stills_as_images(stub, items, tmp_path, video_format):
    from helpers.encoded_videos import tiny_video

    video = tiny_video(tmp_path / "mission.mp4", [(255, 0, 0), (0, 0, 255), (0, 255, 0)])
    clip = MultipleChoiceItem(id="c", question="question?", options=("x", "y", "z"), answer=0,
                              visual=Visual(video=video, start=0.0, end=3.0))
    prompt = Prompt((Prompt.VISUAL, "A still:", Visual(video=video, time=1.5), "Answer."))
    reply = client(num_frames=3, clip_as="video", video_format=video_format).answer([clip], [prompt])[0]
    content = stub.requests[-1]["body"]["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["video_url", "text", "image_url", "text"]
    url = content[0]["video_url"]["url"]
    if video_format == "mp4":
        frames, rate = decoded_mp4(url)
        assert rate == pytest.approx(1.0)  # 3 frames over the 3 s clip (bin centres 0.5, 1.5, 2.5 s)
    else:
        assert url.startswith("data:video/jpeg;base64,")
        frames = [np.asarray(Image.open(io.BytesIO(base64.b64decode(f)))) for f in url.split(",", 1)[1].split(",")]
    means = [f.reshape(-1, 3).mean(0) for f in frames]
    assert len(frames) == 3 and [int(np.argmax(m)) for m in means] == [0, 2, 1]  # red, blue, green, in order
    assert all(m.max() > 200 for m in means)
    assert reply.meta["visuals"] == [{"kind": "clip as video", "frames": 3, "size": [32, 32]},
                                     {"kind": "image", "frames": 1, "size": [32, 32]}]


def test_answer_and_generate_keep_the_prompts_order_with_requests_in_flight(stub, items):
    """The chunk interface (answer, the caption-enhanced backend's and a judge's generate) gives the replies in
    the order of its prompts whatever order they arrive in."""
    stub.respond = by_question
    prompts = [Task(items).prompt(i) for i in items]
    expected = [by_question({"messages": [{"content": [{"type": "text", "text": i.question}]}]})[1] for i in items]
    backend = client(concurrency=8)
    assert [r.text for r in backend.answer(items, prompts)] == expected
    assert backend.generate([Prompt((i.question,)) for i in items]) == expected
    assert stub.max_in_flight == 8
