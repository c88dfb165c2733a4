"""The caption-enhanced LLM (BENCHMARKS.md §1.5): an image captioner describes frames sampled uniformly over
the clip (60 by default, "Describe the image in 30 words"), and a text LLM answers the task's own prompt
with the captions where the frames would be.

`captioner` is any backend with `caption_images(images, prompt)` (the transformers and OpenAI backends);
`llm` any backend's `generate(prompts)` (text only). Each caption line carries its frame's time in the clip
(mm:ss from the clip's start). The captions go into the record's meta, so a run can be audited.
"""

from __future__ import annotations

import math
from typing import Sequence

from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.items import MultipleChoiceItem
from spacewalk.multiple_choice.task import Prompt, Reply

CAPTION_PROMPT = "Describe the image in 30 words"
CAPTIONS_INTRO = "Captions of frames sampled uniformly from the video, with their times:"


def _clock(seconds: float) -> str:
    if math.isnan(seconds):
        return "--:--"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes:02d}:{secs:02d}"


def with_captions(prompt: Prompt, captions: Sequence[str], times: Sequence[float]) -> Prompt:
    """The prompt with its first visual marker replaced by the caption block (later markers dropped)."""
    block = "\n".join([CAPTIONS_INTRO] + [f"[{_clock(t)}] {c.strip()}" for t, c in zip(times, captions)])
    parts, placed = [], False
    for part in prompt.parts:
        if part == Prompt.VISUAL:
            if not placed:
                parts.append(block)
            placed = True
        else:
            parts.append(part)
    return Prompt(tuple(parts), prompt.system)


class CaptionEnhancedBackend:
    def __init__(self, captioner, llm, num_frames: int = 60, caption_prompt: str = CAPTION_PROMPT,
                 video_backend: str = "decord"):
        self.captioner, self.llm = captioner, llm
        self.rule = FrameRule(num_frames, None, None, video_backend)
        self.caption_prompt = caption_prompt
        self.name = f"caption_enhanced:{captioner.name}+{llm.name}"

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        enhanced, captions_of = [], []
        for item, prompt in zip(items, prompts):
            if item.visual is None:
                raise ValueError(f"item {item.id} has no visual to caption")
            frames, times = sample_frames(item.visual, self.rule)
            captions = self.captioner.caption_images(list(frames), self.caption_prompt)
            start = item.visual.start or 0.0  # caption times count from the clip's start
            enhanced.append(with_captions(prompt, captions, [t - start for t in times]))
            captions_of.append(captions)
        texts = self.llm.generate(enhanced)
        return [Reply(text=t, meta={"captions": c}) for t, c in zip(texts, captions_of)]

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        return self.llm.generate(prompts)
