"""The frames a model sees of an item's visual: `num_frames` spread uniformly over the clip (the model's
default count; the centres of equal bins, the paper's sparse sampling), or an fps rule (one frame every
1/fps seconds from the clip's start) capped at `max_frames` (uniformly thinned beyond it), as a backend's
config value. Extracted frame files (EgoCross) are thinned the same way by position, never repeated: a
list shorter than the rule's count is shown whole (an EgoCross folder is the authors' 0.5 fps sampling of
the clip; showing a frame twice adds nothing)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spacewalk.core.errors import ConfigError
from spacewalk.encoders import uniform_frame_indices
from spacewalk.media.video import dense_timestamps, open_video, sparse_timestamps
from spacewalk.multiple_choice.items import Visual


@dataclass(frozen=True)
class FrameRule:
    """Either `num_frames` (uniform) or `fps` (capped at `max_frames`)."""

    num_frames: int | None = 8
    fps: float | None = None
    max_frames: int | None = None
    backend: str = "decord"

    def __post_init__(self):
        if (self.num_frames is None) == (self.fps is None):
            raise ConfigError("give exactly one of num_frames (uniform sampling) or fps (an fps rule)")
        if self.num_frames is not None and self.num_frames < 1:
            raise ConfigError(f"num_frames must be at least 1, got {self.num_frames}")
        if self.fps is not None and not self.fps > 0:  # a negative rate would step backwards from the start
            raise ConfigError(f"fps must be above 0, got {self.fps}")
        if self.max_frames is not None and self.max_frames < 1:
            raise ConfigError(f"max_frames must be at least 1 (or null: no cap), got {self.max_frames}")

    def timestamps(self, start: float, end: float) -> np.ndarray:
        if self.num_frames is not None:
            return sparse_timestamps(start, end, self.num_frames)
        t = dense_timestamps(start, end, self.fps)
        if len(t) == 0:
            t = np.array([start])
        if self.max_frames is not None and len(t) > self.max_frames:
            t = t[uniform_frame_indices(len(t), self.max_frames)]
        return t

    def count(self, available: int) -> int:
        """How many of `available` extracted frames to show: the rule's count, at most all of them."""
        limit = self.num_frames if self.num_frames is not None else self.max_frames
        return available if limit is None else min(available, limit)


def sample_frames(visual: Visual, rule: FrameRule) -> tuple[np.ndarray, np.ndarray]:
    """uint8 RGB frames [n, H, W, 3] and their times in seconds (NaN when a frame list has none). A still
    (`visual.time`) is its one frame whatever the rule."""
    if visual.video is not None:
        with open_video(visual.video, rule.backend) as reader:
            if visual.time is not None:
                times = np.array([min(visual.time, reader.duration)])
                return reader.frames_at(times), times
            start = 0.0 if visual.start is None else visual.start
            end = reader.duration if visual.end is None else min(visual.end, reader.duration)
            times = rule.timestamps(start, end)
            return reader.frames_at(times), times
    from PIL import Image

    n = rule.count(len(visual.frames))
    picks = uniform_frame_indices(len(visual.frames), n)
    frames = np.stack([np.asarray(Image.open(visual.frames[i]).convert("RGB")) for i in picks])
    times = (np.array([visual.frame_times[i] for i in picks], dtype=np.float64) if visual.frame_times
             else np.full(len(picks), np.nan))
    return frames, times
