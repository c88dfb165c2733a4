"""Adaptation via summarisation (Table 4) on the synthetic Spacewalk-18: the mission's animated preview and
the step oracle's middle frames as context visuals in the QA and step-question prompts (where they go,
what they show), the prompt contract's reading of several visuals, the caption-enhanced LLM captioning
each visual in order, and the contrastive backends refusing context they cannot use."""

from __future__ import annotations

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
from spacewalk.benchmarks.spacewalk18.questions import summaries
from spacewalk.benchmarks.spacewalk18.questions.question_answering import QA_INSTRUCTION, QuestionAnswering
from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import (
    INSTRUCTION,
    MISSION,
    StepRecognitionQuestions,
)
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.caption_enhanced import CAPTIONS_INTRO, IMAGE_INTRO, CaptionEnhancedBackend
from spacewalk.multiple_choice.backends.contrastive import ContrastiveTextBackend
from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt

from fakes import FakeText, RecordingLLM

SMALL = dict(n_train=1, n_val=1, n_test=1, minutes=[4, 5], steps_per_video=[3, 5], samples_per_video=20,
             retrieval_samples_per_video=4, questions_per_video=4)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return open_spacewalk18(synthetic_root=tmp_path_factory.mktemp("summaries") / "synthetic", synthetic=SMALL)


def test_prompt_resolves_the_clip_and_context_visuals_in_order(tmp_path):
    clip, preview, still = (Visual(video=tmp_path / "a.mp4", start=10.0, end=20.0),
                            Visual(video=tmp_path / "a.mp4", start=1.0, end=5.0),
                            Visual(video=tmp_path / "a.mp4", time=3.0))
    item = MultipleChoiceItem(id="x", question="q?", options=("a", "b"), visual=clip)
    prompt = Prompt((Prompt.VISUAL, "one", preview, "two", still, Prompt.VISUAL, "three"))
    assert prompt.visual_parts(item) == [clip, "one", preview, "two", still, "three"]  # the clip once
    assert prompt.visual_parts(None) == ["one", preview, "two", still, "three"]
    assert prompt.visual_parts(item, with_visuals=False) == ["one\ntwo\nthree"]  # texts meet: one text
    assert prompt.text == "one\ntwo\nthree" and prompt.context_visuals == (preview, still)
    assert prompt.audit_parts() == ["<visual>", "one", "<video: a.mp4 [1.0, 5.0) s>", "two",
                                    "<image: a.mp4 at 3.0 s>", "<visual>", "three"]
    with pytest.raises(ValueError, match="still"):
        Visual(video=tmp_path / "a.mp4", start=1.0, end=2.0, time=1.5)


def test_the_preview_is_the_span_of_the_step_animations(synthetic):
    for recording in synthetic.recordings.values():
        preview = summaries.preview_visual(recording)
        clips = [(s.animation_start, s.animation_end) for s in recording.steps[1:]]
        assert (preview.start, preview.end) == (min(a for a, _ in clips), max(b for _, b in clips))
        assert preview.video == recording.video_path and not preview.is_still
        # the synthetic video plays its preview there: frames of the flat light-background animation
        frames, _ = sample_frames(preview, FrameRule(num_frames=4))
        assert frames.shape[0] == 4 and frames.mean() > 100


def test_step_questions_with_the_animation(synthetic):
    task = StepRecognitionQuestions(synthetic, "test", "1min", samples_per_video=3, summary="animation")
    item = task.items()[0]
    parts = task.prompt(item).parts
    k = len(item.options) - 1
    recording = synthetic.recordings[item.meta["video_id"]]
    assert parts[:5] == (Prompt.VISUAL, MISSION.format(K=k, transcript=item.transcript), summaries.ANIMATION,
                         summaries.preview_visual(recording), INSTRUCTION.format(K=k))
    plain = StepRecognitionQuestions(synthetic, "test", "1min", samples_per_video=3).prompt(item)
    assert not plain.context_visuals and plain.text == task.prompt(item).text.replace(summaries.ANIMATION + "\n", "")


def test_step_oracle_shows_each_step_caption_then_its_middle_frame(synthetic):
    task = StepRecognitionQuestions(synthetic, "test", "5min", samples_per_video=6, summary="step_oracle")
    seen_steps = 0
    for item in task.items():
        recording = synthetic.recordings[item.meta["video_id"]]
        parts = task.prompt(item).parts
        start = parts.index(summaries.ORACLE_FRAMES) if summaries.ORACLE_FRAMES in parts else None
        if not item.meta["oracle_steps"]:
            assert summaries.ORACLE_NONE in parts and not task.prompt(item).context_visuals
            continue
        oracle = parts[start + 1:start + 1 + 2 * len(item.meta["oracle_steps"])]
        assert parts[start + 1 + len(oracle)] == INSTRUCTION.format(K=len(item.options) - 1)
        for n, step in enumerate(item.meta["oracle_steps"]):
            caption, frame = oracle[2 * n], oracle[2 * n + 1]
            assert caption == f"- {recording.steps[step].caption}"
            assert frame.is_still and frame.video == recording.video_path
            assert item.visual.start <= frame.time <= item.visual.end
            assert recording.label_at_frame(round(frame.time * 29.97)) == step  # inside the step's own stretch
            seen_steps += 1
        assert len(sample_frames(oracle[1], FrameRule(num_frames=8))[0]) == 1  # a still is one frame
    assert seen_steps > 0


def test_qa_summaries_go_after_the_clip(synthetic):
    qa = QuestionAnswering(synthetic, summary="animation", limit=2)
    item = qa.items()[0]
    parts = qa.prompt(item).parts
    assert parts[:3] == (Prompt.VISUAL, summaries.ANIMATION,
                         summaries.preview_visual(synthetic.recordings[item.meta["video_id"]]))
    assert parts[3] == QA_INSTRUCTION.format(last="D")
    oracle = QuestionAnswering(synthetic, summary="step_oracle", limit=2)
    assert summaries.ORACLE_FRAMES in oracle.prompt(item).parts and oracle.prompt(item).context_visuals
    captions = QuestionAnswering(synthetic, summary="step_oracle_captions", limit=2).prompt(item)
    assert "The steps that occur in this video are: " in captions.text and not captions.context_visuals
    with pytest.raises(ValueError, match="summary must be one of"):
        QuestionAnswering(synthetic, summary="oracle")


def test_contrastive_backends_refuse_visual_context(synthetic, tmp_path):
    backend = ContrastiveTextBackend(FakeText(dim=16))
    with pytest.raises(ValueError, match="cannot use"):
        runner.run(StepRecognitionQuestions(synthetic, "test", "1min", samples_per_video=2, summary="step_oracle"),
                   backend, tmp_path / "oracle", progress=False)
    metrics = runner.run(StepRecognitionQuestions(synthetic, "test", "1min", samples_per_video=2,
                                                  summary="step_oracle_captions"), backend, tmp_path / "captions",
                         progress=False)
    assert metrics["count"] == 2


class FakeCaptioner:
    """Captions an image by its mean brightness (so a caption can be traced back to its frame)."""

    name = "fake-captioner"

    def __init__(self):
        self.calls = []

    def caption_images(self, images, prompt):
        self.calls.append(len(images))
        return [f"brightness {np.asarray(image).mean():.1f}" for image in images]


def test_caption_enhanced_captions_every_visual_in_order(synthetic, tmp_path):
    task = StepRecognitionQuestions(synthetic, "test", "5min", samples_per_video=3, summary="step_oracle")
    item = next(i for i in task.items() if len(i.meta["oracle_steps"]) >= 2)
    captioner, llm = FakeCaptioner(), RecordingLLM(reply="3")
    reply = CaptionEnhancedBackend(captioner, llm, num_frames=5).answer([item], [task.prompt(item)])[0]
    n = len(item.meta["oracle_steps"])
    assert captioner.calls == [5] + [1] * n  # the clip's 5 frames, then one per middle frame
    parts = llm.prompts[0].parts
    assert parts[0].startswith(CAPTIONS_INTRO) and len(parts[0].splitlines()) == 6
    stills = [p for p in parts if p.startswith(IMAGE_INTRO)]
    assert len(stills) == n and not any(isinstance(p, Visual) for p in parts)
    recording = synthetic.recordings[item.meta["video_id"]]
    middles = summaries.oracle_middle_times(recording, item.visual.start, item.visual.end)
    for step, text in zip(item.meta["oracle_steps"], stills):
        frame = sample_frames(Visual(video=recording.video_path, time=middles[step]), FrameRule())[0][0]
        assert text == f"{IMAGE_INTRO} brightness {frame.mean():.1f}"
        assert parts[parts.index(text) - 1].splitlines()[-1] == f"- {recording.steps[step].caption}"
    assert len(reply.meta["captions"]) == 5 and len(reply.meta["context_captions"]) == n
