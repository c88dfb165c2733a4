"""The generator's options: how many recordings per split, how long, how many steps, samples and questions;
the video's rate and size."""

from __future__ import annotations

from dataclasses import dataclass

from spacewalk.benchmarks.spacewalk18.synthetic.vocabulary import VOCABULARY
from spacewalk.core.errors import ConfigError


@dataclass(frozen=True)
class Options:
    n_train: int = 6
    n_val: int = 2
    n_test: int = 2
    steps_per_video: tuple[int, int] = (8, 14)  # K, inclusive range
    minutes: tuple[float, float] = (15.0, 25.0)  # recording length; plans with more steps get longer ones
    # Annotation frames always follow the official round(seconds * 29.97) rule, while decoders address
    # the mp4 by timestamp, so the mp4's own rate is free: a low one keeps generation fast.
    video_fps: float = 2.0
    frame_size: int = 64
    samples_per_video: int = 2000
    retrieval_samples_per_video: int = 2000
    questions_per_video: int = 20  # test videos only, like the release
    qa_window_seconds: float = 600.0  # the release uses one-hour windows on 8-hour recordings

    def __post_init__(self):
        for name in ("steps_per_video", "minutes"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if min(self.n_train, self.n_val, self.n_test) < 0 or self.n_train + self.n_val + self.n_test == 0:
            raise ConfigError("need at least one recording and no negative split size")
        lo, hi = self.steps_per_video
        if not 1 <= lo <= hi <= len(VOCABULARY) - 2:  # two concepts stay free for "unplanned task" shots
            raise ConfigError(f"steps_per_video must lie within 1..{len(VOCABULARY) - 2}, got {self.steps_per_video}")
        if not 0 < self.minutes[0] <= self.minutes[1]:
            raise ConfigError(f"bad minutes range {self.minutes}")
        if self.video_fps <= 0 or self.frame_size < 16 or self.frame_size % 2:
            raise ConfigError("video_fps must be > 0 and frame_size an even number >= 16")
