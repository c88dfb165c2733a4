"""The transformers video-LLM backend with tiny randomly initialised models of both families (Qwen2.5-VL,
LLaVA-OneVision; spacewalk/multiple_choice/tiny_models.py: no download, no network), answering
Spacewalk-18 QA items of the synthetic data (frames decoded from its mp4 clips) through the runner."""

from __future__ import annotations

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
from spacewalk.benchmarks.spacewalk18.questions.question_answering import QuestionAnswering
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.caption_enhanced import CAPTIONS_INTRO, CaptionEnhancedBackend
from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend, conversation
from spacewalk.multiple_choice.frames import sample_frames
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt
from spacewalk.multiple_choice.tiny_models import tiny_llava_onevision, tiny_qwen2_5_vl

from fakes import RecordingLLM

SMALL = dict(n_train=1, n_val=1, n_test=1, minutes=[4, 5], steps_per_video=[3, 5], samples_per_video=20,
             retrieval_samples_per_video=4, questions_per_video=4)


@pytest.fixture(scope="module")
def qa(tmp_path_factory):
    dataset = open_spacewalk18(synthetic_root=tmp_path_factory.mktemp("vlm") / "synthetic", synthetic=SMALL)
    return QuestionAnswering(dataset, limit=3)


def test_conversation_places_the_video_at_the_marker(tmp_path):
    prompt = Prompt(("Intro.", Prompt.VISUAL, "Question?"), system="Be brief.")
    item = MultipleChoiceItem(id="x", question="q?", options=("a", "b"), visual=Visual(video=tmp_path / "a.mp4"))
    assert conversation(prompt, item) == [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Intro."}, {"type": "video"},
                                     {"type": "text", "text": "Question?"}]}]
    assert {"type": "video"} not in conversation(prompt, item, with_visuals=False)[1]["content"]
    assert {"type": "video"} not in conversation(prompt, None)[1]["content"]


@pytest.mark.parametrize("family, build", [("qwen2_5_vl", tiny_qwen2_5_vl), ("llava_onevision", tiny_llava_onevision)])
def test_tiny_models_answer_through_the_runner(family, build, qa, tmp_path):
    model, processor = build()
    backend = TransformersVLMBackend(family, model_object=model, processor=processor, num_frames=4, dtype="float32",
                                     device="cpu", max_new_tokens=3)
    metrics = runner.run(qa, backend, tmp_path, chunk_size=2, progress=False)  # batches of 2 and 1
    records = runner.read_records(tmp_path / runner.RECORDS)
    assert len(records) == 3 and metrics["count"] == 3
    assert all(isinstance(r.reply, str) for r in records)
    assert metrics["unparsable"] == sum(r.choice is None for r in records)
    # greedy: the same replies again, and a batch of one row gives the row's reply (left padding)
    items = qa.items()
    prompts = [qa.prompt(i) for i in items]
    again = backend.answer(items[:2], prompts[:2])
    assert [r.text for r in again] == [r.reply for r in records[:2]]
    assert backend.answer(items[1:2], prompts[1:2])[0].text == records[1].reply
    # the processor saw the family's video tokens where the prompt's marker is, then the question
    text = processor.apply_chat_template(conversation(prompts[0], items[0]), add_generation_prompt=True,
                                         tokenize=False)
    video = "<|video_pad|>" if family == "qwen2_5_vl" else "<video>"
    assert text.index(video) < text.index("Here is the question:")
    assert backend.generate([Prompt(("Say a letter.",))])[0] is not None


def test_frames_follow_the_family_default_or_the_config():
    model, processor = tiny_llava_onevision()
    assert TransformersVLMBackend("llava_onevision", model_object=model, processor=processor).rule.num_frames == 32
    model, processor = tiny_qwen2_5_vl()
    rule = TransformersVLMBackend("qwen2_5_vl", model_object=model, processor=processor).rule
    assert (rule.num_frames, rule.fps, rule.max_frames) == (None, 2.0, 768)
    assert len(rule.timestamps(0.0, 3600.0)) == 768 and np.allclose(np.diff(rule.timestamps(0, 10)), 0.5)
    with pytest.raises(ValueError, match="model_object"):
        TransformersVLMBackend("qwen2_5_vl")


def test_caption_enhanced_llm_with_a_tiny_captioner(qa, tmp_path):
    model, processor = tiny_qwen2_5_vl()
    captioner = TransformersVLMBackend("qwen2_5_vl", model_object=model, processor=processor, dtype="float32",
                                       device="cpu", max_new_tokens=2, text_only=True)
    llm = RecordingLLM()
    backend = CaptionEnhancedBackend(captioner, llm, num_frames=6)
    metrics = runner.run(qa, backend, tmp_path, chunk_size=2, progress=False)
    assert metrics["count"] == 3 and metrics["unparsable"] == 0
    prompt = llm.prompts[0]
    assert Prompt.VISUAL not in prompt.parts and prompt.parts[0].startswith(CAPTIONS_INTRO)
    lines = prompt.parts[0].splitlines()[1:]
    item = qa.items()[0]
    clip = item.visual.end - item.visual.start
    assert len(lines) == 6 and lines[0].startswith("[00:") and "\n".join(prompt.parts[1:]) == qa.prompt(item).text
    assert lines[-1].startswith(f"[{int(round(clip * 11 / 12)) // 60:02d}:")  # the last of 6 bin centres
    records = runner.read_records(tmp_path / runner.RECORDS)
    assert len(records[0].meta["captions"]) == 6


def solid_frames(tmp_path, name, colour, n):
    from PIL import Image

    paths = []
    for i in range(n):
        paths.append(tmp_path / f"{name}{i}.png")
        Image.new("RGB", (56, 56), colour).save(paths[-1])
    return Visual(frames=tuple(paths))


@pytest.mark.parametrize("family, build", [("qwen2_5_vl", tiny_qwen2_5_vl), ("llava_onevision", tiny_llava_onevision)])
def test_several_visuals_reach_the_model_in_prompt_order(family, build, qa, tmp_path):
    """A batch of two items whose prompts hold the clip, a context clip (the preview) and stills (middle
    frames): the processor gets every row's videos and images in prompt order, the template has each video
    and image token where its part is, and the model answers (its visual features fill those tokens)."""
    model, processor = build()
    backend = TransformersVLMBackend(family, model_object=model, processor=processor, num_frames=2, dtype="float32",
                                     device="cpu", max_new_tokens=2)
    calls = []
    original = backend.processor.__call__

    class Spy:  # the processor, remembering what it was handed
        def __getattr__(self, name):
            return getattr(processor, name)

        def __call__(self, **kwargs):
            calls.append(kwargs)
            return original(**kwargs)

    backend.processor = Spy()
    clip_a, clip_b = solid_frames(tmp_path, "a", (250, 0, 0), 2), solid_frames(tmp_path, "b", (0, 0, 250), 2)
    preview = solid_frames(tmp_path, "p", (0, 250, 0), 2)
    video = qa.items()[0].visual.video
    still_1, still_2 = Visual(video=video, time=1.0), Visual(video=video, time=30.0)
    items = [MultipleChoiceItem(id="a", question="q?", options=("x", "y"), visual=clip_a),
             MultipleChoiceItem(id="b", question="q?", options=("x", "y"), visual=clip_b)]
    prompts = [Prompt((Prompt.VISUAL, "The preview:", preview, "Step one:", still_1, "Step two:", still_2, "Answer.")),
               Prompt(("The still:", still_2, Prompt.VISUAL, "Answer."))]
    replies = backend.answer(items, prompts)
    assert len(replies) == 2 and all(isinstance(r.text, str) for r in replies)
    call = calls[-1]
    colours = [tuple(int(c) for c in v[0, 0, 0]) for v in call["videos"]]
    assert colours == [(250, 0, 0), (0, 250, 0), (0, 0, 250)]  # row 1: clip, preview; row 2: clip
    expected_stills = [sample_frames(v, backend.rule)[0][0] for v in (still_1, still_2, still_2)]
    assert len(call["images"]) == 3 and all(np.array_equal(a, b) for a, b in zip(call["images"], expected_stills))
    video_token, image_token = (("<|video_pad|>", "<|image_pad|>") if family == "qwen2_5_vl"
                                else ("<video>", "<image>"))
    first = call["text"][0]
    preview = first.index("The preview:")
    order = [first.index(video_token), preview, first.index(video_token, preview),
             first.index("Step one:"), first.index(image_token), first.index("Step two:"),
             first.index(image_token, first.index("Step two:")), first.index("Answer.")]
    assert order == sorted(order)
    second = call["text"][1]
    assert second.index("The still:") < second.index(image_token) < second.index(video_token) < second.index("Answer.")
