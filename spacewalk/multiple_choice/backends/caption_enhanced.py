"""The caption-enhanced LLM (docs/spacewalk18.md, The paper's models): an image captioner describes frames sampled
uniformly over the clip (60 by default, "Describe the image in 30 words"), and a text LLM answers the task's own prompt
with the captions where the frames would be (every visual of the prompt: the clip and any context visual, such as the
mission's animated preview or a step oracle's middle frames).

`captioner` is any backend with `caption_images(images, prompt)` (the transformers and OpenAI backends);
`llm` any backend's `generate(prompts)` (text only). Each caption line carries its frame's time in the clip
(mm:ss from the clip's start). The captions go into the record's meta, so a run can be audited.

Generation limits (spacewalk/multiple_choice/generation.py): the LLM answers the task's prompt, so it gets the
task's answer limit (unless its config gives a number); the captioner answers the caption prompt, so it gets
`CAPTION_LIMITS` (unless its config gives a number), whatever the task.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

from spacewalk.core.errors import ConfigError
from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.generation import AnswerLimits, limited, settings
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt, Reply

CAPTION_PROMPT = "Describe the image in 30 words"
CAPTIONS_INTRO = "Captions of frames sampled uniformly from the video, with their times:"
IMAGE_INTRO = "Caption of the image:"
# The paper gives no limit for the captions. "30 words" is about 40 tokens of English; 128 lets a captioner
# that writes two or three times as much finish its sentence, so no caption is cut mid-word.
CAPTION_LIMITS = AnswerLimits(local=128, api=128, source="caption prompt (30 words; ours: 128 tokens)")


def _clock(seconds: float) -> str:
    if math.isnan(seconds):
        return "--:--"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes:02d}:{secs:02d}"


def caption_block(captions: Sequence[str], times: Sequence[float], still: bool = False) -> str:
    """The text that stands for a visual: a still's one caption, or a clip's time-stamped caption lines."""
    if still:
        return f"{IMAGE_INTRO} {captions[0].strip()}"
    return "\n".join([CAPTIONS_INTRO] + [f"[{_clock(t)}] {c.strip()}" for t, c in zip(times, captions)])


class CaptionEnhancedBackend:
    """Every visual of the prompt becomes text where it stands: the item's clip and each context slice (the
    mission's animated preview) by `num_frames` captions sampled uniformly over it (times from the slice's
    start), each still (a step's middle frame) by its one caption. The record's meta keeps `captions` (the
    clip's) and, when the prompt has context visuals, `context_captions` (one list per context visual, in
    prompt order)."""

    def __init__(self, captioner, llm, num_frames: int = 60, caption_prompt: str = CAPTION_PROMPT,
                 video_backend: str = "decord"):
        self.captioner, self.llm = limited(captioner, CAPTION_LIMITS), llm
        self.rule = FrameRule(num_frames, None, None, video_backend)
        self.caption_prompt = caption_prompt
        self.name = f"caption_enhanced:{captioner.name}+{llm.name}"

    def limited(self, limits: AnswerLimits, override: bool = False) -> CaptionEnhancedBackend:
        """A copy whose LLM has the task's limits (the captioner keeps the caption prompt's)."""
        out = copy.copy(self)
        out.llm = limited(self.llm, limits, override)
        return out

    def generation_settings(self) -> dict[str, Any]:
        return {"llm": settings(self.llm), "captioner": settings(self.captioner)}

    def _captioned(self, prompt: Prompt, item: MultipleChoiceItem | None) -> tuple[Prompt, dict]:
        parts, meta = [], {}
        for part in prompt.visual_parts(item):
            if not isinstance(part, Visual):
                parts.append(part)
                continue
            frames, times = sample_frames(part, self.rule)
            captions = self.captioner.caption_images(list(frames), self.caption_prompt)
            start = part.start or 0.0  # caption times count from the slice's start
            parts.append(caption_block(captions, [t - start for t in times], part.is_still))
            if item is not None and part is item.visual:
                meta["captions"] = captions
            else:
                meta.setdefault("context_captions", []).append(captions)
        return Prompt(tuple(parts), prompt.system, prompt.labels), meta

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        enhanced, metas = [], []
        for item, prompt in zip(items, prompts):
            if item.visual is None:
                raise ConfigError(f"item {item.id} has no visual to caption")
            captioned, meta = self._captioned(prompt, item)
            enhanced.append(captioned)
            metas.append(meta)
        texts = self.llm.generate(enhanced)
        return [Reply(text=t, meta=m) for t, m in zip(texts, metas)]

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        return self.llm.generate([self._captioned(p, None)[0] for p in prompts])
