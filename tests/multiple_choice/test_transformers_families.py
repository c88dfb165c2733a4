"""Every family of the transformers backend (spacewalk/multiple_choice/backends/vlm_families.yaml: Qwen2.5-VL,
LLaVA-OneVision, Qwen3-VL, Gemma 3) on its tiny random checkpoint (spacewalk/multiple_choice/tiny_models.py, no
download): the inputs the backend hands the model are what the family's own processor builds from the same frames
and prompt through transformers' documented route (`processor.apply_chat_template(messages with the images and
videos in them, tokenize=True, return_dict=True)`), the family is found from the checkpoint's model_type, a
family the table lacks is refused or added by configuration, and `python evaluate.py data=egoschema
model=mc_transformers model.model=DIR` runs for each family with records saying what the model saw."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from PIL import Image

from spacewalk.core.errors import ConfigError
from spacewalk.multiple_choice import tiny_models
from spacewalk.multiple_choice.backends.transformers_vlm import FAMILIES, TransformersVLMBackend, video_metadata
from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt

from conftest import run_command

ALL = ("qwen2_5_vl", "llava_onevision", "qwen3_vl", "gemma3")


def write_video(path, frames, rate):
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return path


@pytest.fixture(scope="module")
def visuals(tmp_path_factory):
    """A 4 fps mp4 (the clip is a slice of it, the still one of its frames) and a context clip of
    extracted frames with their times."""
    folder = tmp_path_factory.mktemp("families")
    rng = np.random.default_rng(0)
    video = write_video(folder / "v.mp4", rng.integers(0, 256, (12, 48, 64, 3), dtype=np.uint8), 4)
    paths = []
    for i in range(4):  # as many as the clip shows: LLaVA-OneVision's processor stacks a row's videos
        paths.append(folder / f"p{i}.png")
        Image.fromarray(rng.integers(0, 256, (36, 60, 3), dtype=np.uint8)).save(paths[-1])
    clip = Visual(video=video, start=0.5, end=2.5)
    preview = Visual(frames=tuple(paths), frame_times=(0.0, 4.0, 8.0, 12.0))
    return clip, preview, Visual(video=video, time=1.0)


def spied(family: str, **settings):
    """The family's tiny backend; its model's generate() remembers what it is given."""
    model, processor = tiny_models.build(family)
    backend = TransformersVLMBackend(model_object=model, processor=processor, dtype="float32", device="cpu",
                                     max_new_tokens=3, **settings)
    calls = []
    generate = backend.model.generate

    def spy(**kwargs):
        calls.append(kwargs)
        return generate(**kwargs)

    backend.model.generate = spy
    return backend, calls


@pytest.mark.parametrize("family", ALL)
def test_the_model_gets_what_the_familys_processor_builds(family, visuals):
    clip, preview, still = visuals
    backend, calls = spied(family, num_frames=4)
    assert backend.family == family  # found from the model's config (model_type), not given
    item = MultipleChoiceItem(id="a", question="q?", options=("x", "y"), visual=clip)
    prompt = Prompt(("Watch.", Prompt.VISUAL, "The preview:", preview, "A still:", still, "Answer."), system="Brief.")
    reply = backend.answer([item], [prompt])[0]
    given = {k: v for k, v in calls[-1].items() if torch.is_tensor(v)}

    # the reference: the same frames (4 of the clip, the preview's 3, the still), put in the messages as a user
    # of the family's processor does, through its chat template; videos as lists of frames, already sampled
    rule = FrameRule(num_frames=4)
    (clip_frames, clip_times), (preview_frames, preview_times), (still_frames, _) = (
        sample_frames(v, rule) for v in (clip, preview, still))
    assert len(clip_frames) == len(preview_frames) == 4

    def video(frames):
        pictures = [Image.fromarray(f) for f in frames]
        if FAMILIES[family].clip_as == "images":  # no video input: the frames as images
            return [{"type": "image", "image": p} for p in pictures]
        return [{"type": "video", "video": pictures}]

    content = [{"type": "text", "text": "Watch."}, *video(clip_frames), {"type": "text", "text": "The preview:"},
               *video(preview_frames), {"type": "text", "text": "A still:"},
               {"type": "image", "image": Image.fromarray(still_frames[0])}, {"type": "text", "text": "Answer."}]
    messages = [{"role": "system", "content": [{"type": "text", "text": "Brief."}]},
                {"role": "user", "content": content}]
    kwargs = {} if FAMILIES[family].clip_as == "images" else {"do_sample_frames": False}
    if FAMILIES[family].video_metadata:  # the frames' times (Qwen3-VL writes them into the prompt; Qwen2.5-VL's
        # temporal position ids follow them)
        kwargs["video_metadata"] = [video_metadata(clip_times), video_metadata(preview_times)]
    expected = backend.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                     return_dict=True, return_tensors="pt", processor_kwargs=kwargs)
    expected = {k: v for k, v in expected.items() if torch.is_tensor(v)}
    assert sorted(given) == sorted(expected)
    for key, value in expected.items():  # floats too: the same processor, frames and machine give the same bits
        assert torch.equal(given[key], value), key
    text = backend.processor.batch_decode(given["input_ids"])[0]
    if family == "qwen3_vl":  # each frame pair's mean time: the clip's bin centres 0.75, 1.25 | 1.75, 2.25 s, the
        # preview's frame times 0, 4 | 8, 12 s
        assert re.findall(r"<[0-9.]+ seconds>", text) == ["<1.0 seconds>", "<2.0 seconds>", "<2.0 seconds>",
                                                          "<10.0 seconds>"]

    # the record: what each visual showed, at the size the vision tower got
    fixed = {"llava_onevision": [28, 28], "gemma3": [28, 28]}
    if family in fixed:
        sizes = [fixed[family]] * 3
    else:
        patch = backend.processor.image_processor.patch_size
        grids = [*expected["video_grid_thw"], *expected["image_grid_thw"]]
        sizes = [[int(w) * patch, int(h) * patch] for _, h, w in grids]
    assert reply.meta["visuals"] == [{"kind": "clip", "frames": 4, "size": sizes[0]},
                                     {"kind": "clip", "frames": 4, "size": sizes[1]},
                                     {"kind": "image", "frames": 1, "size": sizes[2]}]
    assert reply.meta["visual_tokens"] > 0


@pytest.mark.parametrize("family", ("qwen3_vl", "gemma3"))
def test_new_families_answer_a_batch_as_they_answer_each_row(family, visuals):
    """Left padding, rows of different lengths (a context clip in one only): greedy replies as alone."""
    clip, preview, still = visuals
    backend, _ = spied(family, num_frames=2)
    items = [MultipleChoiceItem(id=k, question="q?", options=("x", "y"), visual=v)
             for k, v in (("a", clip), ("b", preview))]
    prompts = [Prompt((Prompt.VISUAL, "The still:", still, "Answer.")), Prompt(("Answer.", Prompt.VISUAL))]
    together = [r.text for r in backend.answer(items, prompts)]
    # a row batched rounds unlike the row alone (logits about 1e-7 apart), but each chosen token leads the next by
    # 0.01 or more on these tiny models (both measured): rounding cannot change a greedy reply
    assert together == [backend.answer([i], [p])[0].text for i, p in zip(items, prompts)]


def test_qwen2_5_vl_temporal_scale_from_the_frames_times_or_as_before(visuals):
    """The frames' own rate (4 bins of 0.5 s: 2 fps, so 1 s per temporal patch of 2 frames), as qwen-vl-utils' fps
    gives it; with the family's video_metadata off (the presets before), the processor's default 24 fps for frames
    handed over already sampled: 2 / 24 s per temporal patch."""
    clip, _, _ = visuals
    item = MultipleChoiceItem(id="a", question="q?", options=("x", "y"), visual=clip)
    prompt = Prompt((Prompt.VISUAL, "Answer."))
    for families, seconds in ((None, 1.0), ({"qwen2_5_vl": {"video_metadata": False}}, 2 / 24)):
        backend, calls = spied("qwen2_5_vl", num_frames=4, families=families)
        backend.answer([item], [prompt])
        assert calls[-1]["second_per_grid_ts"].tolist() == pytest.approx([seconds])


def test_a_one_frame_clip_reaches_qwen3_vl_as_a_pair(visuals):
    """Its processor refuses a video of one frame (a frame list of one, a slice shorter than a frame period, a
    budget that drops to one): the frame goes twice, as its processor fills an odd count; the record says 1."""
    _, preview, _ = visuals
    one = Visual(frames=preview.frames[:1], frame_times=preview.frame_times[:1])
    item = MultipleChoiceItem(id="a", question="q?", options=("x", "y"), visual=one)
    backend, calls = spied("qwen3_vl")
    meta = backend.answer([item], [Prompt((Prompt.VISUAL, "Answer."))])[0].meta
    assert [v["frames"] for v in meta["visuals"]] == [1]
    assert int(calls[-1]["video_grid_thw"][0][0]) == 1  # one temporal patch: the frame and its copy


def test_budget_applies_to_the_new_families_or_is_refused(visuals):
    clip, _, _ = visuals
    item = MultipleChoiceItem(id="a", question="q?", options=("x", "y"), visual=clip)
    prompt = Prompt((Prompt.VISUAL, "Answer."))
    # Qwen3-VL: smart_resize to multiples of 32; 4 frames at 32x32 fit 4 x 32 x 32
    backend, calls = spied("qwen3_vl", num_frames=4, min_pixels=32 * 32, max_total_pixels=4 * 32 * 32)
    meta = backend.answer([item], [prompt])[0].meta
    assert meta["visuals"] == [{"kind": "clip", "frames": 4, "size": [32, 32]}]
    assert [int(v) for v in calls[-1]["video_grid_thw"][0]] == [2, 2, 2]  # what the processor made of them
    # Gemma 3: every image at its processor's one size; frames dropped to fit
    backend, calls = spied("gemma3", num_frames=4, max_total_pixels=2 * 28 * 28)
    meta = backend.answer([item], [prompt])[0].meta
    assert meta["visuals"] == [{"kind": "clip", "frames": 2, "size": [28, 28]}]
    assert calls[-1]["pixel_values"].shape[0] == 2
    with pytest.raises(ConfigError, match="gemma3: its processor resizes every frame to 28x28"):
        spied("gemma3", max_pixels=10_000)


def test_a_family_the_table_lacks_is_refused_or_added_by_configuration(tmp_path):
    model, processor = tiny_models.build("gemma3")
    model.config.model_type = "my_vlm"  # a family the table has no entry for
    with pytest.raises(ConfigError, match=r"model_type 'my_vlm' is not a family .* model\.families\.my_vlm"):
        TransformersVLMBackend(model_object=model, processor=processor, device="cpu")
    backend = TransformersVLMBackend(model_object=model, processor=processor, device="cpu",
                                     families={"my_vlm": {"resize": "fixed", "clip_as": "images",
                                                          "frames": {"num_frames": 6}, "images_per_row": True}})
    assert backend.family == "my_vlm" and backend.rule.num_frames == 6
    # `family` names a known family's settings for it; a family entry overrides single keys of a known one
    backend = TransformersVLMBackend("gemma3", model_object=model, processor=processor, device="cpu",
                                     families={"gemma3": {"frames": {"num_frames": 5}}})
    assert backend.rule.num_frames == 5 and backend.spec.clip_as == "images"
    with pytest.raises(ConfigError, match="family bad: clip_as='film'"):
        TransformersVLMBackend(model_object=model, processor=processor, families={"bad": {"resize": "fixed",
                                                                                         "clip_as": "film"}})
    with pytest.raises(ConfigError, match="family bad: give resize"):
        TransformersVLMBackend(model_object=model, processor=processor, families={"bad": {"clip_as": "images"}})
    with pytest.raises(ConfigError, match="families.bad.frame_rule: not a setting \\(did you mean frames\\?\\)"):
        TransformersVLMBackend(model_object=model, processor=processor,
                               families={"bad": {"resize": "fixed", "frame_rule": 3}})


ES_OPTIONS = dict(n_questions=4, n_answered=3, seconds=4, fps=2, frame_size=32)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    assert tiny_models.main(["--out", str(out)]) == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("family", ALL)
def test_evaluate_egoschema_with_mc_transformers(family, checkpoints, tmp_path_factory):
    data = tmp_path_factory.getbasetemp() / "egoschema"  # generated by the first run, read by the others
    out = tmp_path_factory.mktemp(f"run_{family}")
    run_command("evaluate.py", "data=egoschema", f"data.synthetic_root={data}", "data.split=full",
                *[f"+data.synthetic.{k}={v}" for k, v in ES_OPTIONS.items()], "model=mc_transformers",
                f"model.model={checkpoints / family}", "model.device=cpu", "model.max_new_tokens=4",
                "multiple_choice.progress=false", f"hydra.run.dir={out}", env={"OMP_NUM_THREADS": "1"})
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == ES_OPTIONS["n_questions"]
    run = json.loads((out / "run.json").read_text())
    # the family's default frame rule
    assert {k: v for k, v in run["visual"]["frames"].items() if v is not None} == FAMILIES[family].frames
    # what the model saw: the family's frames (8 at 2 fps of the 4 s clips; 32 uniformly), at its processor's size
    seen = {"qwen2_5_vl": (8, [56, 56]), "llava_onevision": (32, [28, 28]), "qwen3_vl": (8, [32, 32]),
            "gemma3": (32, [28, 28])}[family]
    assert all(r["meta"]["visuals"] == [{"kind": "clip", "frames": seen[0], "size": seen[1]}] for r in records)
    assert json.loads((out / "metrics.json").read_text())["total"] == ES_OPTIONS["n_answered"]
