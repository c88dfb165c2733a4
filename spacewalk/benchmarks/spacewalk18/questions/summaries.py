"""Adaptation via summarisation (docs/spacewalk18.md, The paper's models, the paper's Table 4): context a Spacewalk-18
question gives a model beyond the clip, as prompt parts (spacewalk/multiple_choice/task.py: texts and context `Visual`s)
for the QA task and for step recognition as a question.

- `animation`: the mission's animated preview. The release keeps no separate animation file: each step's
  animation clip is the slice [animation_start, animation_end) of the recording itself (§1.1), and the
  steps' clips follow one another in the preview near the start of the recording. The preview is the slice
  from the first step's animation_start to the last step's animation_end (the short gaps between clips
  included: the narrator's links); the synthetic generator renders its preview the same way.
- `step_oracle`: the steps whose ground truth overlaps the clip, by first occurrence, each as its caption
  followed by its middle frame: the frame at the middle of the step's longest ground-truth stretch inside
  the clip (a still of the recording; our reading of "middle frame": the paper gives no more).
- `step_oracle_captions`: the same steps as captions only (text: what a text-only model can use).
- `none`: nothing (the full step list is already in the step-recognition prompt, Table 4's first row).

Both oracles read the ground truth, and the preview is more than the protocol's clip: numbers with any
summary go in rows of their own. The sentences introducing the context are ours (the paper's wording is not
in our copy of it; docs/multiple_choice.md).
"""

from __future__ import annotations

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.multiple_choice.items import Visual

SUMMARIES = ("none", "animation", "step_oracle", "step_oracle_captions")

ANIMATION = ("Here is the animation shown before the spacewalk, which previews the planned steps of the whole "
             "mission:")
ORACLE_FRAMES = ("The steps that occur in this video are listed below, each followed by the frame from the middle "
                 "of its part of the video:")
ORACLE = "The steps that occur in this video are: {steps}."
ORACLE_NONE = "None of the planned steps occurs in this video."


def check_summary(summary: str) -> str:
    if summary not in SUMMARIES:
        raise ConfigError(f"summary must be one of {SUMMARIES}, got {summary!r}")
    return summary


def preview_visual(recording: Recording) -> Visual:
    """The mission's animated preview: the recording from the first step animation's start to the last one's
    end."""
    clips = [(s.animation_start, s.animation_end) for s in recording.steps[1:] if s.animation_start is not None]
    if not clips:
        raise DataError(f"recording {recording.video_id} has no step animation to preview")
    return Visual(video=recording.video_path, start=min(a for a, _ in clips), end=max(b for _, b in clips))


def steps_in_window(recording: Recording, start: float, end: float) -> list[int]:
    """The steps (1..K) with a ground-truth segment overlapping [start, end], by first occurrence."""
    return list(oracle_middle_times(recording, start, end))


def oracle_middle_times(recording: Recording, start: float, end: float) -> dict[int, float]:
    """Step (1..K, by first occurrence in the window) -> the middle of its longest ground-truth stretch
    clipped to [start, end] (ties: the earliest)."""
    longest: dict[int, tuple[float, float]] = {}
    for segment in recording.segments:
        if segment.label > 0 and segment.start < end and segment.end > start:
            a, b = max(segment.start, start), min(segment.end, end)
            if segment.label not in longest or b - a > longest[segment.label][1] - longest[segment.label][0]:
                longest[segment.label] = (a, b)
    return {step: (a + b) / 2 for step, (a, b) in longest.items()}


def summary_parts(summary: str, recording: Recording, start: float, end: float) -> list[str | Visual]:
    """The prompt parts of `summary` for a clip [start, end] of `recording`."""
    check_summary(summary)
    if summary == "none":
        return []
    if summary == "animation":
        return [ANIMATION, preview_visual(recording)]
    middles = oracle_middle_times(recording, start, end)
    if not middles:
        return [ORACLE_NONE]
    if summary == "step_oracle_captions":
        return [ORACLE.format(steps="; ".join(recording.steps[i].caption for i in middles))]
    parts: list[str | Visual] = [ORACLE_FRAMES]
    for step, middle in middles.items():
        parts += [f"- {recording.steps[step].caption}", Visual(video=recording.video_path, time=middle)]
    return parts
