"""The picture of one recording's intra-video retrieval test: where the missed samples are.

Top band: the GT segments (colour by label, grey = -1 not annotated, white = Irrelevant). Below, one dot
per sample at the query's time, its height the query-candidate distance; missed samples in red with a
line from the query to the candidate that was wrongly chosen, correct ones small and grey.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, NOT_ANNOTATED, Recording, RetrievalSample
from spacewalk.core.io import atomic_path


def plot_missed_pairs(recording: Recording, samples: Sequence[RetrievalSample], predictions: Sequence[int],
                      path: str | Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    predictions = np.asarray(predictions)
    labels = np.array([s.label for s in samples])
    q = np.array([s.query_frame_index for s in samples]) / FPS / 3600
    chosen = np.array([s.candidate_frame_indices[p] for s, p in zip(samples, predictions)]) / FPS / 3600
    distance = np.abs(chosen - q) * 60  # minutes
    missed = predictions != labels
    fig, (band, ax) = plt.subplots(2, 1, figsize=(14, 5), sharex=True, gridspec_kw={"height_ratios": [1, 6]})
    cmap = plt.get_cmap("tab20")
    for seg in recording.segments:
        color = "0.8" if seg.label == NOT_ANNOTATED else "white" if seg.label == 0 else cmap(seg.label % 20)
        band.axvspan(seg.start / 3600, seg.end / 3600, color=color, lw=0)
    band.set_yticks([])
    band.set_ylabel("GT")
    ax.scatter(q[~missed], distance[~missed], s=2, color="0.6", label=f"correct ({int((~missed).sum())})")
    ax.hlines(distance[missed], q[missed], chosen[missed], color="tab:red", lw=0.5, alpha=0.5)  # one call: fast
    ax.scatter(q[missed], distance[missed], s=6, color="tab:red", label=f"missed ({int(missed.sum())})")
    ax.set_xlabel("query time (h)")
    ax.set_ylabel("query-candidate distance (min)")
    ax.legend(loc="upper right")
    accuracy = 100 * (1 - missed.mean()) if len(missed) else float("nan")
    fig.suptitle(f"{recording.video_id}: accuracy {accuracy:.2f} %" + (f" ({title})" if title else ""))
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path
