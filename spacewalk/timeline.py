"""Per-recording timeline pictures: true steps vs predicted steps over time."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from spacewalk.io import atomic_path
from spacewalk.spacewalk18 import FPS, NOT_ANNOTATED, Recording, StepSample


def predicted_intervals(recording: Recording, frames: np.ndarray) -> np.ndarray:
    """[n, 2] frame intervals of the samples, as the official IoU builds them (midpoints between
    neighbouring samples, the first from the spacewalk's start, the last to its end)."""
    mids = (frames[:-1] + frames[1:]) / 2
    starts = np.concatenate([[recording.segments[1].frame_start], mids])
    ends = np.concatenate([mids, [recording.segments[-2].frame_end]])
    return np.stack([starts, ends], axis=1)


def plot_timeline(recording: Recording, samples: Sequence[StepSample], predictions: Sequence[int],
                  path: str | Path, title: str | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    cmap = matplotlib.colormaps["tab20"]

    def color(label: int):
        return (0.85, 0.85, 0.85) if label == 0 else cmap((label - 1) % 20)

    frames = np.array([s.frame_index for s in samples], dtype=float)
    hours = 1 / FPS / 3600
    fig, ax = plt.subplots(figsize=(14, 2.6), dpi=100)
    for seg in recording.segments:
        if seg.label != NOT_ANNOTATED:
            ax.broken_barh([(seg.frame_start * hours, (seg.frame_end - seg.frame_start) * hours)], (1.1, 0.8),
                           facecolors=color(seg.label))
    for (start, end), label in zip(predicted_intervals(recording, frames), predictions):
        ax.broken_barh([(start * hours, (end - start) * hours)], (0.1, 0.8), facecolors=color(int(label)))
    ax.set_yticks([0.5, 1.5], ["predicted", "true"])
    ax.set_xlabel("time (h)")
    ax.set_xlim(0, recording.num_frames * hours)
    accuracy = np.mean([int(p) == s.label for p, s in zip(predictions, samples)]) * 100
    ax.set_title(title or f"{recording.video_id}: {recording.num_classes - 1} steps (grey = Irrelevant), "
                          f"sample accuracy {accuracy:.1f}%", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path
