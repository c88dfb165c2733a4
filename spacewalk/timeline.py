"""Per-recording timeline pictures: true steps vs predicted steps over time."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from spacewalk.io import atomic_path
from spacewalk.spacewalk18.dataset import FPS, NOT_ANNOTATED, Recording, StepSample


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
    # x axis in hours for real recordings, in minutes for short (synthetic) ones
    unit, per_unit = ("h", 3600) if recording.duration >= 2 * 3600 else ("min", 60)
    hours = 1 / FPS / per_unit
    fig, ax = plt.subplots(figsize=(14, 2.6), dpi=100)
    # one collection per row: thousands of separate bars make matplotlib slow
    annotated = [seg for seg in recording.segments if seg.label != NOT_ANNOTATED]
    ax.broken_barh([(seg.frame_start * hours, (seg.frame_end - seg.frame_start) * hours) for seg in annotated],
                   (1.1, 0.8), facecolors=[color(seg.label) for seg in annotated])
    bounds = predicted_intervals(recording, frames) * hours
    ax.broken_barh([(start, end - start) for start, end in bounds], (0.1, 0.8),
                   facecolors=[color(int(label)) for label in predictions])
    ax.set_yticks([0.5, 1.5], ["predicted", "true"])
    ax.set_xlabel(f"time ({unit})")
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
