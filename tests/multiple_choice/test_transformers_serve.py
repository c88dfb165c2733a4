"""The OpenAI-compatible backend against a real server: `transformers serve` (the installed transformers, its
`serving` extra in the dev dependencies) on 127.0.0.1, serving the tiny randomly initialised Qwen2.5-VL that
spacewalk/multiple_choice/tiny_models.py builds (no download). One server for the session. `python evaluate.py
data=spacewalk18_qa model=mc_openai` against it, with requests in flight, gives the files of a serial run, the
clip's frames reach the model as images, and the run is logged to W&B offline.

Clips go as images here (`clip_as: images`, the default): transformers serve 5.24 cannot take a clip as a
`video_url` data URL (its load_video reads an http(s) URL or a path on the server's disk only, and for a model
it classes multimodal, Qwen2.5-VL among them, it first loads the clip's audio, which needs torchcodec with
FFmpeg); docs/serving.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spacewalk.multiple_choice import tiny_models
from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend

from helpers.openai_stub import Task, toy_items
from helpers.serving import transformers_serve
from helpers.synthetic_presets import QA_TWO_TESTS, overrides
from helpers.wandb_offline import offline_run

SMALL = [*overrides(QA_TWO_TESTS), "multiple_choice.progress=false"]
FILES = ("records.jsonl", "prompt_parts.jsonl", "metrics.json", "answers.json", "run.json")


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """(base URL, model name) of `transformers serve` running the tiny Qwen2.5-VL on CPU."""
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
        pytest.fail("transformers' serving extra is not installed: `pip install -e .[dev]` (pyproject.toml's dev "
                    "extra pins transformers[serving])", pytrace=False)
    folder = tiny_models.write(tmp_path_factory.mktemp("served"), ["qwen2_5_vl"])["qwen2_5_vl"]
    with transformers_serve(folder) as url:
        yield f"{url}/v1", str(folder)


def run_evaluate(log_dir: Path, served, synthetic_root: Path, *overrides: str) -> Path:
    base_url, model = served
    from helpers.commands import run_command

    run_command("evaluate.py", "data=spacewalk18_qa", f"data.synthetic_root={synthetic_root}", *SMALL,
                "model=mc_openai", f"model.model={model}", "model.requests_per_minute=null", "model.max_tokens=8",
                *overrides, env={"SPACEWALK_LOG_DIR": str(log_dir), "OPENAI_BASE_URL": base_url,
                                 "OMP_NUM_THREADS": "1", "WANDB_SILENT": "true"})
    runs = list(log_dir.glob("evaluate/runs/multiple_choice/spacewalk18_qa/mc_openai/*/run.json"))
    assert len(runs) == 1, runs
    return runs[0].parent


@pytest.mark.slow
def test_evaluate_against_transformers_serve_with_requests_in_flight_equals_a_serial_run(served, tmp_path,
                                                                                         synthetic_spacewalk18):
    root = synthetic_spacewalk18(**QA_TWO_TESTS)
    concurrent = run_evaluate(tmp_path / "concurrent", served, root, "model.concurrency=4")
    serial = run_evaluate(tmp_path / "serial", served, root, "model.concurrency=1")
    for name in FILES:
        assert (concurrent / name).read_bytes() == (serial / name).read_bytes(), name
    metrics = json.loads((concurrent / "metrics.json").read_text())
    records = [json.loads(line) for line in (concurrent / "records.jsonl").read_text().splitlines()]
    assert len(records) == metrics["count"] >= 8
    for record in records:
        # the server's own token count: the clip's 8 frames went as images and were read as such
        assert record["meta"]["visuals"] == [{"kind": "clip as images", "frames": 8, "size": [64, 64]}]
        assert record["meta"]["usage"]["completion_tokens"] == 8 and record["meta"]["usage"]["prompt_tokens"] > 0
    # logged to W&B offline, grouped by benchmark and model, every item in the table
    run = offline_run(concurrent)
    assert (run["group"], run["job_type"]) == ("spacewalk18_qa", "mc_openai")
    assert run["logged"]["items/nrows"] == len(records) and run["logged"]["test/Accuracy"] == metrics["Accuracy"]


@pytest.mark.slow
def test_the_frames_reach_the_served_model(served, tmp_path, monkeypatch):
    """The same prompt with and without the clip: the server's prompt-token count grows by what the model's own
    processor makes of the two frames (their visual tokens after the 2 x 2 merge, each between a vision start and
    end token), so the images were read, not dropped."""
    import numpy as np
    from PIL import Image
    from transformers import AutoProcessor

    base_url, model = served
    monkeypatch.setenv("SPACEWALK_TEST_SERVE_URL", base_url)
    items = toy_items(tmp_path, 1)
    prompts = [Task(items).prompt(items[0])]
    usage = {}
    for text_only in (False, True):
        backend = OpenAIChatBackend(model, base_url_env="SPACEWALK_TEST_SERVE_URL", num_frames=2,
                                    requests_per_minute=None, max_tokens=2, text_only=text_only)
        usage[text_only] = backend.answer(items, prompts)[0].meta["usage"]["prompt_tokens"]
    frames = [np.array(Image.open(items[0].visual.frames[i]).convert("RGB")) for i in (0, 2)]  # the 2 of 3 shown
    grids = AutoProcessor.from_pretrained(model).image_processor(images=frames, return_tensors="np")["image_grid_thw"]
    assert usage[False] - usage[True] == sum(int(np.prod(g)) // 4 + 2 for g in grids)
