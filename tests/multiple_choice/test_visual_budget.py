"""The visual budget (spacewalk/multiple_choice/budget.py): its rule on its own, then through the tiny
transformers backends (spacewalk/multiple_choice/tiny_models.py: what each item's record says it saw, the frames
and sizes the processor really got, the replies unchanged at the default settings, an item over the budget shown
fewer or smaller frames) and the OpenAI-compatible one against the stub server (the images it sends), with the
run's settings in run.json."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from omegaconf import OmegaConf
from PIL import Image
from test_multiple_choice_openai import Task

from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
from spacewalk.benchmarks.spacewalk18.questions.question_answering import QuestionAnswering
from spacewalk.core.errors import ConfigError
from spacewalk.core.io import load_json
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend
from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend, conversation
from spacewalk.multiple_choice.budget import Planned, VisualBudget, area_within, fit, shown
from spacewalk.multiple_choice.frames import sample_frames
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.records import frames_seen
from spacewalk.multiple_choice.tiny_models import tiny_llava_onevision, tiny_qwen2_5_vl

from conftest import REPO
from openai_stub import stub_fixture

SMALL = dict(n_train=1, n_val=1, n_test=1, minutes=[4, 5], steps_per_video=[3, 5], samples_per_video=20,
             retrieval_samples_per_video=4, questions_per_video=4)
BUILD = {"qwen2_5_vl": tiny_qwen2_5_vl, "llava_onevision": tiny_llava_onevision}


# ---- the rule ----


def test_area_within_keeps_the_aspect_and_rounds_away_from_the_bound():
    assert area_within(480, 640, None, None) == (480, 640)
    assert area_within(480, 640, 100, 10**6) == (480, 640)
    h, w = area_within(480, 640, None, 100_000)  # shrinking: each side rounded down
    assert (h, w) == (math.floor(480 * math.sqrt(100_000 / 307_200)), math.floor(640 * math.sqrt(100_000 / 307_200)))
    assert h * w <= 100_000 and abs(w / h - 4 / 3) < 0.01
    h, w = area_within(30, 40, 5000, None)  # enlarging: rounded up
    assert h * w >= 5000 and (h, w) == (math.ceil(30 * math.sqrt(5000 / 1200)), math.ceil(40 * math.sqrt(5000 / 1200)))
    assert area_within(1, 1000, None, 10) == (1, 10)  # a side never below 1


def test_budget_settings_are_checked():
    with pytest.raises(ConfigError, match="min_pixels=200 is above max_pixels=100"):
        VisualBudget(max_pixels=100, min_pixels=200)
    with pytest.raises(ConfigError, match="max_total_pixels=0"):
        VisualBudget(max_total_pixels=0)
    with pytest.raises(ConfigError, match="max_pixels='big'"):
        VisualBudget(max_pixels="big")
    assert not VisualBudget().active and VisualBudget(max_total_pixels=10).active


def test_an_item_within_the_budget_only_gets_the_per_frame_bounds():
    visuals = [("clip", 8, 100, 100), ("image", 1, 50, 200)]
    assert fit(visuals, VisualBudget()) == [Planned("clip", 8, 100, 100), Planned("image", 1, 50, 200)]
    assert fit(visuals, VisualBudget(max_pixels=2500)) == [Planned("clip", 8, 50, 50), Planned("image", 1, 25, 100)]
    assert fit(visuals, VisualBudget(max_total_pixels=90_000)) == fit(visuals, VisualBudget())


def test_an_item_over_the_budget_gets_smaller_frames_first():
    visuals = [("clip", 8, 100, 100), ("image", 1, 100, 100)]  # 90,000 pixels
    plan = fit(visuals, VisualBudget(min_pixels=400, max_total_pixels=45_000))
    assert [p.frames for p in plan] == [8, 1]  # no frame dropped
    assert sum(p.pixels for p in plan) <= 45_000
    cap = max(p.height * p.width for p in plan)  # one common cap: the largest that fits
    assert cap <= 5000 and all(p.height == p.width for p in plan)
    bigger = [Planned(p.kind, p.frames, *area_within(100, 100, 400, cap + 200)) for p in plan]
    assert sum(p.pixels for p in bigger) > 45_000


def test_then_fewer_frames_from_the_longest_clip_and_never_a_still():
    visuals = [("clip", 6, 20, 20), ("image", 1, 20, 20), ("clip", 3, 20, 20)]
    # every frame already at min_pixels (400): only dropping helps; 7 frames fit
    plan = fit(visuals, VisualBudget(min_pixels=400, max_total_pixels=7 * 400), item="q1")
    assert [p.frames for p in plan] == [3, 1, 3]
    plan = fit(visuals, VisualBudget(min_pixels=400, max_total_pixels=5 * 400))
    assert [p.frames for p in plan] == [2, 1, 2]
    # min_pixels null: no floor to shrink to, frames are dropped at their size
    plan = fit(visuals, VisualBudget(max_total_pixels=8 * 400))
    assert [(p.frames, p.height) for p in plan] == [(4, 20), (1, 20), (3, 20)]
    with pytest.raises(ConfigError, match="too small for item 'q1'"):
        fit(visuals, VisualBudget(min_pixels=400, max_total_pixels=2 * 400), item="q1")


def test_shown_thins_uniformly_and_resizes():
    frames = np.stack([np.full((40, 60, 3), i, np.uint8) for i in range(8)])
    out = shown(frames, Planned("clip", 4, 20, 30))
    assert out.shape == (4, 20, 30, 3) and [int(f[0, 0, 0]) for f in out] == [1, 3, 5, 7]
    assert shown(frames, Planned("clip", 8, 40, 60)) is frames


# ---- through the tiny transformers backends ----


@pytest.fixture(scope="module")
def qa(tmp_path_factory):
    dataset = open_spacewalk18(synthetic_root=tmp_path_factory.mktemp("budget") / "synthetic", synthetic=SMALL)
    return QuestionAnswering(dataset, limit=2)


def spied(backend):
    """Remember what the backend's processor is handed and gives back."""
    calls = []
    processor = backend.processor

    class Spy:
        def __getattr__(self, name):
            return getattr(processor, name)

        def __call__(self, **kwargs):
            out = processor(**kwargs)
            calls.append((kwargs, out))
            return out

    backend.processor = Spy()
    return calls


def backend_of(family, **budget):
    model, processor = BUILD[family]()
    return TransformersVLMBackend(family, model_object=model, processor=processor, num_frames=4, dtype="float32",
                                  device="cpu", max_new_tokens=3, **budget)


@pytest.mark.parametrize("family", ["qwen2_5_vl", "llava_onevision"])
def test_default_settings_give_the_replies_of_the_plain_processor_path(family, qa):
    """No budget: the frames reach the processor as decoded, with no size keywords, and each reply is the one
    the processor and model give on their own (the path before the budget), batched or not."""
    backend = backend_of(family)
    calls = spied(backend)
    items = qa.items()
    prompts = [qa.prompt(i) for i in items]
    replies = backend.answer(items, prompts)
    kwargs = calls[-1][0]
    assert not {"videos_kwargs", "images_kwargs", "size"} & set(kwargs)
    for item, prompt, reply in zip(items, prompts, replies):
        frames = sample_frames(item.visual, backend.rule)[0]
        model, processor = BUILD[family]()  # the same seed: the same weights
        processor.tokenizer.padding_side = "left"
        text = processor.apply_chat_template(conversation(prompt, item), add_generation_prompt=True, tokenize=False)
        inputs = processor(text=[text], videos=[frames], do_sample_frames=False, return_tensors="pt")
        out = model.eval().generate(**inputs, do_sample=False, max_new_tokens=3)
        plain = processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)[0].strip()
        # batched against alone: logits about 1e-7 apart, each chosen token 1e-4 or more ahead of the next (both
        # measured): rounding cannot change a greedy reply
        assert reply.text == plain


@pytest.mark.parametrize("family, size, tokens", [("qwen2_5_vl", [56, 56], 2 * 4 * 4 // 4),
                                                  ("llava_onevision", [28, 28], None)])
def test_records_say_what_the_model_saw(family, size, tokens, qa, tmp_path):
    backend = backend_of(family)
    calls = spied(backend)
    runner.run(qa, backend, tmp_path, chunk_size=2, progress=False)
    records = runner.read_records(tmp_path / runner.RECORDS)
    inputs = calls[-1][1]
    for row, record in enumerate(records):
        assert record.meta["visuals"] == [{"kind": "clip", "frames": 4, "size": size}]
        assert frames_seen(record) == 4
        if family == "qwen2_5_vl":  # the size and tokens the processor made
            t, h, w = (int(v) for v in inputs["video_grid_thw"][row])
            assert [w * 14, h * 14] == size and record.meta["visual_tokens"] == t * h * w // 4 == tokens
        else:
            video = backend.model.config.video_token_index
            assert record.meta["visual_tokens"] == int((inputs["input_ids"][row] == video).sum()) > 0
    settings = load_json(tmp_path / runner.RUN_FILE)["visual"]
    assert settings == {"frames": {"num_frames": 4, "fps": None, "max_frames": None}, "max_pixels": None,
                        "min_pixels": None, "max_total_pixels": None, "rule": "spacewalk/multiple_choice/budget.py"}


def test_qwen_over_budget_gets_smaller_frames_then_fewer(qa, tmp_path):
    # 64x64 synthetic frames; per frame within [28x28, 112x112], four frames in 2 x 56x56 pixels: every frame is
    # shrunk (to 28x28, multiples of 28), none dropped
    backend = backend_of("qwen2_5_vl", min_pixels=28 * 28, max_pixels=112 * 112, max_total_pixels=2 * 56 * 56)
    calls = spied(backend)
    runner.run(qa, backend, tmp_path / "small", chunk_size=2, progress=False)
    kwargs, inputs = calls[-1]
    for row, record in enumerate(runner.read_records(tmp_path / "small" / runner.RECORDS)):
        assert record.meta["visuals"] == [{"kind": "clip", "frames": 4, "size": [28, 28]}]
        t, h, w = (int(v) for v in inputs["video_grid_thw"][row])
        assert (h * 14, w * 14) == (28, 28) and kwargs["videos"][row].shape == (4, 28, 28, 3)
        assert record.meta["visual_tokens"] == t * h * w // 4 == 2
    run = load_json(tmp_path / "small" / runner.RUN_FILE)["visual"]
    assert (run["min_pixels"], run["max_pixels"], run["max_total_pixels"]) == (28 * 28, 112 * 112, 2 * 56 * 56)
    # at least 56x56 a frame, 2 frames' worth: frames dropped, uniformly
    backend = backend_of("qwen2_5_vl", min_pixels=56 * 56, max_total_pixels=2 * 56 * 56)
    calls = spied(backend)
    runner.run(qa, backend, tmp_path / "fewer", chunk_size=2, progress=False)
    kwargs, inputs = calls[-1]
    item = qa.items()[0]
    decoded = sample_frames(item.visual, backend.rule)[0]
    record = runner.read_records(tmp_path / "fewer" / runner.RECORDS)[0]
    assert record.meta["visuals"] == [{"kind": "clip", "frames": 2, "size": [56, 56]}]
    assert kwargs["videos"][0].shape == (2, 56, 56, 3) and np.array_equal(
        kwargs["videos"][0], shown(decoded[[1, 3]], Planned("clip", 2, 56, 56)))  # the centres of 2 bins of 4


def test_llava_over_budget_gets_fewer_frames_and_refuses_pixel_bounds(qa, tmp_path):
    backend = backend_of("llava_onevision", max_total_pixels=2 * 28 * 28)
    calls = spied(backend)
    runner.run(qa, backend, tmp_path, chunk_size=2, progress=False)
    kwargs = calls[-1][0]
    assert all(len(v) == 2 for v in kwargs["videos"])
    assert all(r.meta["visuals"] == [{"kind": "clip", "frames": 2, "size": [28, 28]}]
               for r in runner.read_records(tmp_path / runner.RECORDS))
    with pytest.raises(ConfigError, match="resizes every frame to 28x28"):
        backend_of("llava_onevision", max_pixels=10_000)


@pytest.mark.parametrize("name, backend", [("mc_qwen2_5_vl", TransformersVLMBackend),
                                           ("mc_llava_onevision", TransformersVLMBackend),
                                           ("mc_openai", OpenAIChatBackend)])
def test_model_configs_hold_the_budget_at_its_defaults(name, backend):
    """Every backend's own default is no budget; mc_qwen2_5_vl's config sets qwen-vl-utils' video defaults (128 to 768
    tokens a frame, a clip within 0.9 x 128000 tokens' pixels per pair of frames), the others none."""
    config = OmegaConf.load(REPO / f"conf/model/{name}.yaml")
    parameters = inspect.signature(backend).parameters
    keys = ("max_total_pixels",) if name == "mc_llava_onevision" else ("max_pixels", "min_pixels", "max_total_pixels")
    qwen_vl_utils = {"max_pixels": 768 * 28 * 28, "min_pixels": 128 * 28 * 28,
                     "max_total_pixels": 2 * int(128000 * 28 * 28 * 0.9)}
    for key in keys:
        assert config[key] == (qwen_vl_utils[key] if name == "mc_qwen2_5_vl" else None)
        assert parameters[key].default is None


# ---- the OpenAI-compatible backend, against the stub server ----


stub = stub_fixture()


def chat_client(**settings):
    return OpenAIChatBackend(**({"model": "stub-model", "base_url_env": "TEST_BASE_URL", "num_frames": 3,
                                 "backoff_seconds": 0.01, "requests_per_minute": None, "concurrency": 1} | settings))


def sent_sizes(request) -> list[tuple[int, int]]:
    import base64
    import io

    from PIL import Image

    return [Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1]))).size
            for p in request["body"]["messages"][-1]["content"] if p["type"] == "image_url"]


@pytest.mark.parametrize("budget, frames, size", [
    ({}, 3, [32, 24]),  # the default: as before
    ({"max_total_pixels": 2 * 32 * 24}, 2, [32, 24]),  # no min_pixels: frames dropped at their size
    ({"min_pixels": 100, "max_total_pixels": 3 * 300}, 3, [20, 15]),  # shrunk to a common cap, none dropped
    ({"min_pixels": 300, "max_total_pixels": 2 * 300}, 2, [20, 15]),  # at min_pixels, then dropped
])
def test_openai_records_and_sends_frames_within_the_budget(stub, budget, frames, size, tmp_path):
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"frame{i}.png")
        Image.new("RGB", (32, 24), (80 * i, 0, 0)).save(paths[-1])
    item = MultipleChoiceItem(id="0", question="q?", options=("x", "y", "z"), answer=1,
                              visual=Visual(frames=tuple(paths), frame_times=(0.0, 1.0, 2.0)))
    runner.run(Task([item]), chat_client(**budget), tmp_path / "run", progress=False)
    record = runner.read_records(tmp_path / "run" / runner.RECORDS)[0]
    assert record.meta["visuals"] == [{"kind": "clip as images", "frames": frames, "size": size}]
    assert sent_sizes(stub.requests[-1]) == [tuple(size)] * frames
    visual = load_json(tmp_path / "run" / runner.RUN_FILE)["visual"]
    assert visual["image_max_side"] == 768 and visual["frames"]["num_frames"] == 3
    assert {k: visual[k] for k in ("max_pixels", "min_pixels", "max_total_pixels")} == (
        {"max_pixels": None, "min_pixels": None, "max_total_pixels": None} | budget)


def test_qwen_budget_over_a_clip_a_context_clip_and_a_still(qa, tmp_path):
    """Every visual of the prompt counts, stills keep their one frame, and each visual's recorded size is the one
    the processor made (its video and image grids)."""
    from spacewalk.multiple_choice.task import Prompt

    frames = []
    for i in range(4):
        frames.append(tmp_path / f"f{i}.png")
        Image.new("RGB", (112, 84), (60 * i, 0, 0)).save(frames[-1])
    clip, preview = Visual(frames=tuple(frames)), Visual(frames=tuple(frames[:2]))
    still = Visual(video=qa.items()[0].visual.video, time=1.0)  # 64x64
    item = MultipleChoiceItem(id="a", question="q?", options=("x", "y"), visual=clip)
    prompt = Prompt((Prompt.VISUAL, "The preview:", preview, "A step:", still, "Answer."))
    backend = backend_of("qwen2_5_vl", min_pixels=28 * 28, max_total_pixels=4 * 28 * 28)
    calls = spied(backend)
    meta = backend.answer([item], [prompt])[0].meta
    kwargs, inputs = calls[-1]
    # at min_pixels (28x28) the 4 + 2 + 1 frames cost 7 frames' worth: the longest clip loses 2, then (a tie) the
    # preview 1
    assert [(v["kind"], v["frames"], v["size"]) for v in meta["visuals"]] == [
        ("clip", 2, [28, 28]), ("clip", 1, [28, 28]), ("image", 1, [28, 28])]
    grids = [[int(g) for g in row] for row in (*inputs["video_grid_thw"], inputs["image_grid_thw"][0])]
    assert [[w * 14, h * 14] for _, h, w in grids] == [v["size"] for v in meta["visuals"]]
    assert [len(v) for v in kwargs["videos"]] == [2, 1] and kwargs["images"][0].shape == (28, 28, 3)
    assert meta["visual_tokens"] == sum(t * h * w for t, h, w in grids) // 4
