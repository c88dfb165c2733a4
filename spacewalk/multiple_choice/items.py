"""The multiple-choice item: what every benchmark reader produces and every model backend consumes.

A reader (one per benchmark task) turns its official files into `MultipleChoiceItem`s; a prompt builder of
that benchmark turns an item into the official prompt; a backend answers; the benchmark's parser and scorer
read the reply. The item carries no prompt text of its own, so one item can be asked in several ways (the
paper's prompt, lmms-eval's, a contrastive "Question: ...? Is it ...").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spacewalk.core.errors import ConfigError, DataError


@dataclass(frozen=True)
class Visual:
    """What to show. Exactly one of:
    - `video` (a file), optionally the slice [`start`, `end`) in seconds (None: from the start / to the end);
    - `video` and `time`: the one frame of the video at `time` seconds, shown as an image (a still: e.g. a
      step's middle frame in the step oracle of Spacewalk-18's Table 4);
    - `frames`: image files already extracted (EgoCross), in temporal order, with their times in seconds
      when known (`frame_times`, same length)."""

    video: Path | None = None
    start: float | None = None
    end: float | None = None
    frames: tuple[Path, ...] = ()
    frame_times: tuple[float, ...] = ()
    time: float | None = None

    @property
    def is_still(self) -> bool:
        """One frame (an image to a model), not a clip."""
        return self.time is not None

    def describe(self) -> str:
        """A short account for records and logs: the file and the slice, time or frame count."""
        if self.frames:
            return f"{len(self.frames)} frames from {self.frames[0].parent.name or self.frames[0]}"
        name = Path(self.video).name
        if self.time is not None:
            return f"{name} at {self.time:.1f} s"
        span = ("" if self.start is None and self.end is None else
                f" [{'start' if self.start is None else f'{self.start:.1f}'}, "
                f"{'end' if self.end is None else f'{self.end:.1f}'}) s")
        return name + span

    def __post_init__(self):
        if (self.video is None) == (not self.frames):
            raise ValueError("a Visual is either a video (with an optional slice) or a list of frames, not both")
        if self.time is not None and (self.video is None or self.start is not None or self.end is not None):
            raise ValueError("a still (time) is one frame of a video, without a slice")
        if self.frame_times and len(self.frame_times) != len(self.frames):
            raise ValueError(f"{len(self.frames)} frames but {len(self.frame_times)} frame times")
        if self.start is not None and self.end is not None and not self.end > self.start:
            raise ValueError(f"empty slice [{self.start}, {self.end})")


@dataclass(frozen=True)
class MultipleChoiceItem:
    """One question. `id` is unique within its benchmark task and keys every per-item output (the JSONL of a
    run, submission files); `answer` is the index into `options` when known (None for hidden test sets);
    `meta` holds what scoring groups by or prompts need (question type, domain, category, video id, K, ...)."""

    id: str
    question: str
    options: tuple[str, ...]
    answer: int | None = None
    visual: Visual | None = None
    transcript: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if len(self.options) < 2:
            raise DataError(f"item {self.id}: a multiple-choice question needs at least 2 options")
        if self.answer is not None and not 0 <= self.answer < len(self.options):
            raise DataError(f"item {self.id}: answer {self.answer} outside options 0..{len(self.options) - 1}")


def check_limit(value: Any, setting: str) -> int | None:
    """A setting that keeps the first N questions (or videos, samples per video) for cost: None keeps all. Under 1
    leaves no item, and the run would score nothing yet report 0 % and succeed (a negative one would slice off
    the last items instead), so either is refused, naming the setting."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{setting}={value!r}: must be a whole number of at least 1, or null for all")
    if value < 1:
        raise ConfigError(f"{setting}={value} leaves no item to score; set at least 1, or null for all")
    return value
