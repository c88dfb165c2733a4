"""Context windows around a sample (docs/spacewalk18.md, Context windows).

A sample at time t with window length w sees [t - w/2, t + w/2] clipped to [0, video_length]: clipped,
not shifted, so windows are asymmetric at the ends of a recording. A transcript sentence belongs to a
window iff sentence.start < window.end and sentence.end > window.start (strict), and the window's text
is its sentences joined by single spaces in file order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import Sentence


@dataclass(frozen=True)
class Window:
    start: float
    end: float

    @property
    def length(self) -> float:
        return self.end - self.start


def context_window(t: float, w: float, duration: float) -> Window:
    if w <= 0:
        raise ValueError(f"window length must be positive, got {w}")
    if not 0 <= t <= duration:
        raise ValueError(f"time {t} outside the video [0, {duration}]")
    return Window(max(0.0, t - w / 2), min(duration, t + w / 2))


def context_windows(t: np.ndarray, w: float, duration: float) -> tuple[np.ndarray, np.ndarray]:
    """`context_window` for an array of times (any shape) of one recording: (start, end), the same rule."""
    t = np.asarray(t, dtype=np.float64)
    return np.maximum(t - w / 2, 0.0), np.minimum(t + w / 2, duration)


class TranscriptIndex:
    """The sentences of one recording as arrays, so thousands of windows are answered quickly."""

    def __init__(self, sentences: Sequence[Sentence]):
        self.sentences = tuple(sentences)
        self.starts = np.array([s.start for s in self.sentences], dtype=np.float64)
        self.ends = np.array([s.end for s in self.sentences], dtype=np.float64)

    def indices_in(self, window: Window) -> np.ndarray:
        """Indices (file order) of the sentences that overlap the window, with strict inequalities."""
        return np.flatnonzero((self.starts < window.end) & (self.ends > window.start))

    def text_in(self, window: Window) -> str:
        return " ".join(self.sentences[i].text for i in self.indices_in(window))
