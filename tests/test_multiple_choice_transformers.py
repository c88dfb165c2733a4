"""The transformers video-LLM backend with tiny randomly initialised models of both families (Qwen2.5-VL,
LLaVA-OneVision; spacewalk/multiple_choice/tiny_models.py: no download, no network), answering
Spacewalk-18 QA items of the synthetic data (frames decoded from its mp4 clips) through the runner."""

from __future__ import annotations

import numpy as np
import pytest

from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.caption_enhanced import CAPTIONS_INTRO, CaptionEnhancedBackend
from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend, conversation
from spacewalk.multiple_choice.task import Prompt
from spacewalk.multiple_choice.tiny_models import tiny_llava_onevision, tiny_qwen2_5_vl
from spacewalk.spacewalk18.question_answering import QuestionAnswering, open_dataset

SMALL = dict(n_train=1, n_val=1, n_test=1, minutes=[4, 5], steps_per_video=[3, 5], samples_per_video=20,
             retrieval_samples_per_video=4, questions_per_video=4)


@pytest.fixture(scope="module")
def qa(tmp_path_factory):
    dataset = open_dataset(None, tmp_path_factory.mktemp("vlm") / "synthetic", 0, SMALL)
    return QuestionAnswering(dataset, max_items=3)


def test_conversation_places_the_video_at_the_marker():
    prompt = Prompt(("Intro.", Prompt.VISUAL, "Question?"), system="Be brief.")
    assert conversation(prompt, True) == [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Intro."}, {"type": "video"},
                                     {"type": "text", "text": "Question?"}]}]
    assert {"type": "video"} not in conversation(prompt, False)[1]["content"]


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
    text = processor.apply_chat_template(conversation(prompts[0], True), add_generation_prompt=True, tokenize=False)
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


class RecordingLLM:
    """A text LLM stand-in: remembers the prompts, answers "B"."""

    name = "fake-llm"

    def __init__(self):
        self.prompts = []

    def generate(self, prompts):
        self.prompts += list(prompts)
        return ["B"] * len(prompts)


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
    assert len(lines) == 6 and lines[0].startswith("[00:") and prompt.parts[1:] == qa.prompt(item).parts[1:]
    assert lines[-1].startswith(f"[{int(round(clip * 11 / 12)) // 60:02d}:")  # the last of 6 bin centres
    records = runner.read_records(tmp_path / runner.RECORDS)
    assert len(records[0].meta["captions"]) == 6
