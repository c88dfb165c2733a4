"""The synthetic HiREST's options: sizes, lengths, annotation quirks and editing (the package docstring,
"Editing"); the defaults give the version-1 videos byte for byte."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spacewalk.benchmarks.hirest.synthetic.vocabulary import RECIPE_LENGTH, TASKS
from spacewalk.core.errors import ConfigError
from spacewalk.core.settings import from_mapping

MIN_SHOT_SECONDS = 1.5  # shortest shot inside a step; also keeps cuts clear of a continuous step's fade


@dataclass(frozen=True)
class HiRESTOptions:
    seed: int = 0
    n_train: int = 30  # queries per split; every query has its own task
    n_val: int = 10
    n_test: int = 10
    videos_per_query: tuple[int, int] = (1, 3)  # inclusive range
    n_distractors: int = 20  # test-time video retrieval distractors (all_data_test_negative_samples.json)
    seconds: tuple[float, float] = (20.0, 90.0)  # video length
    steps_per_moment: tuple[int, int] = (2, 6)  # shown steps, fewer where the moment is short
    p_whole: float = 0.25  # clip == false: the whole video is relevant
    p_clip_without_steps: float = 0.15  # clip == true, moment annotated, steps not
    p_zero_length_step: float = 0.1  # per video with steps: one extra step [b, b] (the release has a few)
    p_capitalised: float = 0.4  # headings are written by annotators: some capitalised,
    p_trailing_space: float = 0.15  # some with a trailing space
    video_fps: float = 2.0  # decoders sample at 1 fps; a low rate keeps generation fast
    frame_size: int = 64
    # editing as in real how-to videos (module docstring, "Editing"); the defaults give the version-1 look
    shot_seconds: tuple[float, float] | None = None  # shots inside a step last lo..hi s (None: <= 1 close-up)
    p_continuous_step: float = 0.0  # a step starts in the same take: no cut, the objects cross-fade
    camera_motion: float = 0.0  # pan speed (frame widths / s) of a hand-held camera, drawn per shot

    def __post_init__(self):
        for name in ("videos_per_query", "seconds", "steps_per_moment", "shot_seconds"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if min(self.n_train, self.n_val, self.n_test, self.n_distractors) < 0:
            raise ConfigError("split sizes and n_distractors must not be negative")
        if min(self.n_val, self.n_test) < 1 or self.n_train < 1:
            raise ConfigError("every split needs at least one query")
        if self.n_train + self.n_val + self.n_test > len(TASKS):
            raise ConfigError(f"at most {len(TASKS)} queries in all (one task each), got "
                              f"{self.n_train + self.n_val + self.n_test}")
        lo, hi = self.videos_per_query
        if not 1 <= lo <= hi:
            raise ConfigError(f"bad videos_per_query {self.videos_per_query}")
        lo, hi = self.seconds
        if not 20.0 <= lo <= hi:  # an intro, a moment of >= 2 steps and an outro must fit
            raise ConfigError(f"seconds must satisfy 20 <= lo <= hi, got {self.seconds}")
        lo, hi = self.steps_per_moment
        if not 1 <= lo <= hi <= RECIPE_LENGTH:
            raise ConfigError(f"steps_per_moment must lie within 1..{RECIPE_LENGTH}, got {self.steps_per_moment}")
        probs = (self.p_whole, self.p_clip_without_steps, self.p_zero_length_step, self.p_capitalised,
                 self.p_trailing_space)
        if any(not 0 <= p <= 1 for p in probs) or self.p_whole + self.p_clip_without_steps > 1:
            raise ConfigError("probabilities must lie in [0, 1] (and p_whole + p_clip_without_steps <= 1)")
        if self.video_fps <= 0 or self.frame_size < 16 or self.frame_size % 4:
            raise ConfigError("video_fps must be > 0 and frame_size a multiple of 4, >= 16")
        shots = self.shot_seconds
        if shots is not None and not (len(shots) == 2 and MIN_SHOT_SECONDS <= shots[0] <= shots[1]):
            raise ConfigError(f"shot_seconds must be (lo, hi) with {MIN_SHOT_SECONDS} <= lo <= hi, got {shots}")
        if not 0 <= self.p_continuous_step <= 1 or not 0 <= self.camera_motion <= 0.1:
            raise ConfigError("p_continuous_step must lie in [0, 1] and camera_motion in [0, 0.1]")


def as_options(options: HiRESTOptions | Mapping[str, Any] | None, **fields: Any) -> HiRESTOptions:
    """HiRESTOptions from a HiRESTOptions, a mapping of its fields or nothing; keyword `fields` win."""
    if options is None:
        return from_mapping(HiRESTOptions, fields, "data.synthetic")
    if isinstance(options, HiRESTOptions):
        return dataclasses.replace(options, **fields) if fields else options
    return from_mapping(HiRESTOptions, {**dict(options), **fields}, "data.synthetic")
