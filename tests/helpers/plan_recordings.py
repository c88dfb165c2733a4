"""Spacewalk-18 recordings built from a list of labels and durations, and noisy scores for them whose truth is
known: what the plan decoder's and the emissions' tests decode."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, Recording, Segment, Step
from spacewalk.benchmarks.spacewalk18.decoding.plan_decoder import grid_samples


def recording(labels: list[int], seconds: list[float], num_steps: int, video_id: str = "01012020") -> Recording:
    edges = np.r_[0.0, np.cumsum(seconds)]
    segments = tuple(Segment(float(s), float(e), int(round(s * FPS)), int(round(e * FPS)), label)
                     for s, e, label in zip(edges[:-1], edges[1:], labels))
    steps = (Step(0, "Irrelevant", "", None, None),) + tuple(Step(i, f"s{i}", "", 0.0, 1.0)
                                                              for i in range(1, num_steps + 1))
    return Recording(video_id, segments, steps, Path("/nonexistent.csv"), Path("/nonexistent.mp4"))


def noisy_recording(rng, num_steps=5, seconds=120.0):
    labels = [-1] + [x for k in range(1, num_steps + 1) for x in (k, 0)] + [-1]
    rec = recording(labels, [30.0] + [seconds, 24.0] * num_steps + [30.0], num_steps)
    grid = grid_samples(rec, 12.0)
    truth = np.array([rec.label_at_frame(g.frame_index) for g in grid])
    scores = rng.normal(scale=1.0, size=(len(grid), num_steps + 1))
    scores[np.arange(len(grid)), np.maximum(truth, 0)] += 1.2  # weak evidence for the true class
    return rec, grid, truth, scores
