"""The multiple-choice item: what every benchmark reader produces and every model backend consumes.

A reader (one per benchmark task) turns its official files into `MultipleChoiceItem`s; a prompt builder of
that benchmark turns an item into the official prompt; a backend answers; the benchmark's parser and scorer
read the reply. The item carries no prompt text of its own, so one item can be asked in several ways (the
paper's prompt, lmms-eval's, a contrastive "Question: ...? Is it ...").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping


@dataclass(frozen=True)
class Visual:
    """What to show. Exactly one of:
    - `video` (a file), optionally the slice [`start`, `end`) in seconds (None: from the start / to the end);
    - `frames`: image files already extracted (EgoCross), in temporal order, with their times in seconds
      when known (`frame_times`, same length)."""

    video: Path | None = None
    start: float | None = None
    end: float | None = None
    frames: tuple[Path, ...] = ()
    frame_times: tuple[float, ...] = ()

    def __post_init__(self):
        if (self.video is None) == (not self.frames):
            raise ValueError("a Visual is either a video (with an optional slice) or a list of frames, not both")
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
            raise ValueError(f"item {self.id}: a multiple-choice question needs at least 2 options")
        if self.answer is not None and not 0 <= self.answer < len(self.options):
            raise ValueError(f"item {self.id}: answer {self.answer} outside options 0..{len(self.options) - 1}")
