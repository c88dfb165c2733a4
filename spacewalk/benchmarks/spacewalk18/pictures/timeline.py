"""Per-recording pictures: true steps vs predicted steps over time (several prediction rows: raw, decoded),
and the confusion matrix over the recording's classes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, NOT_ANNOTATED, Recording, StepSample
from spacewalk.core.io import atomic_path


def predicted_intervals(recording: Recording, frames: np.ndarray) -> np.ndarray:
    """[n, 2] frame intervals of the samples, as the official IoU builds them (midpoints between
    neighbouring samples, the first from the spacewalk's start, the last to its end)."""
    mids = (frames[:-1] + frames[1:]) / 2
    starts = np.concatenate([[recording.segments[1].frame_start], mids])
    ends = np.concatenate([mids, [recording.segments[-2].frame_end]])
    return np.stack([starts, ends], axis=1)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    return matplotlib, plt


def _save(fig, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def plot_timeline(recording: Recording, samples: Sequence[StepSample],
                  predictions: Sequence[int] | Mapping[str, Sequence[int]], path: str | Path,
                  title: str | None = None) -> Path:
    """The true steps over time above one row per prediction (`predictions` as {row name: labels}, e.g. the raw
    and the decoded predictions, or one sequence for a row named "predicted")."""
    matplotlib, plt = _pyplot()
    cmap = matplotlib.colormaps["tab20"]

    def color(label: int):
        return (0.85, 0.85, 0.85) if label == 0 else cmap((label - 1) % 20)

    rows = dict(predictions) if isinstance(predictions, Mapping) else {"predicted": predictions}
    frames = np.array([s.frame_index for s in samples], dtype=float)
    # x axis in hours for real recordings, in minutes for short (synthetic) ones
    unit, per_unit = ("h", 3600) if recording.duration >= 2 * 3600 else ("min", 60)
    hours = 1 / FPS / per_unit
    fig, ax = plt.subplots(figsize=(14, 1.8 + 0.8 * len(rows)), dpi=100)
    # one collection per row: thousands of separate bars make matplotlib slow
    annotated = [seg for seg in recording.segments if seg.label != NOT_ANNOTATED]
    top = len(rows)
    ax.broken_barh([(seg.frame_start * hours, (seg.frame_end - seg.frame_start) * hours) for seg in annotated],
                   (top + 0.1, 0.8), facecolors=[color(seg.label) for seg in annotated])
    bounds = predicted_intervals(recording, frames) * hours
    accuracies = []
    for i, (name, labels) in enumerate(rows.items()):
        y = top - 1 - i
        ax.broken_barh([(start, end - start) for start, end in bounds], (y + 0.1, 0.8),
                       facecolors=[color(int(label)) for label in labels])
        accuracies.append(f"{name} {np.mean([int(p) == s.label for p, s in zip(labels, samples)]) * 100:.1f}%")
    ax.set_yticks([top - 0.5 - i for i in range(len(rows))] + [top + 0.5], list(rows) + ["true"])
    ax.set_xlabel(f"time ({unit})")
    ax.set_xlim(0, recording.num_frames * hours)
    ax.set_title(title or f"{recording.video_id}: {recording.num_classes - 1} steps (grey = Irrelevant), "
                          f"sample accuracy: {', '.join(accuracies)}", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def plot_confusion(recording: Recording, samples: Sequence[StepSample], predictions: Sequence[int],
                   path: str | Path, title: str | None = None) -> Path:
    """The recording's confusion matrix over its classes 0..K, each true class's row as shares of its samples
    (the official samples are balanced over classes, so rows are comparable)."""
    _, plt = _pyplot()
    k1 = recording.num_classes
    counts = np.zeros((k1, k1))
    np.add.at(counts, (np.array([s.label for s in samples]), np.asarray(predictions, dtype=np.int64)), 1)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    size = min(12, 3 + 0.22 * k1)
    fig, ax = plt.subplots(figsize=(size, size), dpi=100)
    image = ax.imshow(shares, cmap="viridis", vmin=0, vmax=1)
    ax.set_xlabel("predicted class (0 = Irrelevant)")
    ax.set_ylabel("true class")
    ticks = np.arange(0, k1, max(1, k1 // 15))
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    fig.colorbar(image, ax=ax, fraction=0.046, label="share of the true class's samples")
    accuracy = np.trace(counts) / max(counts.sum(), 1) * 100
    ax.set_title(title or f"{recording.video_id}: accuracy {accuracy:.1f}%", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)
