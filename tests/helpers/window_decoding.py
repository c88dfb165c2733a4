"""Decoding a whole window in one call: the samplers of spacewalk.media.video and one reader pass. The library decodes
per sample or per recording (the feature bank, the DataModules); the tests use this to check what those decode."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from spacewalk.media.video import dense_timestamps, open_video, segment_timestamps, sparse_timestamps


class Clip(NamedTuple):
    frames: np.ndarray  # [n, H, W, 3] uint8 RGB
    timestamps: np.ndarray
    index: int = 0  # the grid cell for "segments" sampling


def decode_window(path: str | Path, start: float, end: float, sampling: str = "sparse", *, k: int = 8,
                  fps: float = 1.0, seconds: float = 12.0, backend: str = "decord",
                  size: tuple[int, int] | None = None, timestamp_fps: float | None = None) -> list[Clip]:
    """Decode a window: one Clip for "sparse" (k frames) or "dense" (fps), one per grid cell for
    "segments". All frames come from one time-ordered pass over the file."""
    if sampling not in ("sparse", "dense", "segments"):
        raise ValueError(f"unknown sampling {sampling!r}; choose from 'sparse', 'dense', 'segments'")
    with open_video(path, backend, size, timestamp_fps) as reader:
        reader.frame_indices([start])  # a window starting past the video is an error in every mode
        if sampling == "sparse":
            groups = [(0, sparse_timestamps(start, end, k))]
        elif sampling == "dense":
            groups = [(0, dense_timestamps(start, end, fps))]
        else:  # whole cells, cut at the video's end rather than the window's
            groups = [(s.index, s.timestamps)
                      for s in segment_timestamps(start, end, seconds, fps, duration=reader.duration)]
        frames = reader.frames_at(np.concatenate([t for _, t in groups]) if groups else [])
    splits = np.cumsum([len(t) for _, t in groups])[:-1]
    return [Clip(f, t, j) for (j, t), f in zip(groups, np.split(frames, splits))]
