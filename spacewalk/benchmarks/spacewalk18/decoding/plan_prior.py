"""The plan prior: where in a recording each class happens, from the training split's annotations alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import NOT_ANNOTATED, Recording, Spacewalk18, StepSample, frame_of
from spacewalk.core.errors import DataError


class PlanPriorBaseline:
    """Where in a recording each class happens, learned from the training split's annotations.

    Label spaces differ per recording, but a recording's steps are listed in the order they were
    planned, and plans are mostly followed. So the training annotations give P(relative time | class)
    for Irrelevant and for each relative step-list position (i - 0.5) / K, binned. The official samples
    are balanced over classes by construction (about 2000 / (K + 1) each), so with a uniform class prior
    the Bayes decision is the class whose time distribution is highest at the sample's relative time
    t / duration. It reads no test label: only the recording's duration and step count. Each training
    recording counts equally (its frames are normalised), with add-`smoothing` pseudo-counts.
    """

    def __init__(self, time_bins: int = 40, position_bins: int = 40, smoothing: float = 1e-3):
        self.time_bins, self.position_bins, self.smoothing = time_bins, position_bins, smoothing
        self.irrelevant_time: np.ndarray | None = None  # P(time bin | Irrelevant), [time_bins]
        self.step_time: np.ndarray | None = None  # P(time bin | position bin), [position_bins, time_bins]

    def _position_bin(self, label: np.ndarray, num_steps: int) -> np.ndarray:
        return np.minimum(((label - 0.5) / num_steps * self.position_bins).astype(int), self.position_bins - 1)

    def _time_bin(self, seconds: np.ndarray, duration: float) -> np.ndarray:
        return np.clip((seconds / duration * self.time_bins).astype(int), 0, self.time_bins - 1)

    def fit(self, dataset: Spacewalk18, split: str = "train") -> PlanPriorBaseline:
        irrelevant = np.zeros(self.time_bins)
        steps = np.zeros((self.position_bins, self.time_bins))
        for rec in dataset.split(split):
            # the label of every second of the recording, from its segments
            seconds = np.arange(0.5, rec.duration, 1.0)
            labels = np.array([rec.label_at_frame(min(frame_of(s), rec.num_frames - 1)) for s in seconds])
            annotated = labels != NOT_ANNOTATED
            tbin, lab = self._time_bin(seconds[annotated], rec.duration), labels[annotated]
            weight = 1.0 / max(1, annotated.sum())
            np.add.at(irrelevant, tbin[lab == 0], weight)
            is_step = lab > 0
            np.add.at(steps, (self._position_bin(lab[is_step], rec.num_classes - 1), tbin[is_step]), weight)
        if not irrelevant.any() and not steps.any():
            raise DataError(f"the {split} split has no annotated frames to fit the prior on")
        s = self.smoothing
        self.irrelevant_time = (irrelevant + s) / (irrelevant.sum() + s * self.time_bins)
        self.step_time = (steps + s) / (steps.sum(axis=1, keepdims=True) + s * self.time_bins)
        return self

    def score(self, recording: Recording, samples: Sequence[StepSample]) -> np.ndarray:
        if self.irrelevant_time is None:
            raise RuntimeError("PlanPriorBaseline.score called before fit")
        num_steps = recording.num_classes - 1
        tbin = self._time_bin(np.array([s.timestamp for s in samples]), recording.duration)
        pbin = self._position_bin(np.arange(1, num_steps + 1), num_steps)
        scores = np.empty((len(samples), recording.num_classes))
        scores[:, 0] = self.irrelevant_time[tbin]
        scores[:, 1:] = self.step_time[pbin][:, tbin].T
        return scores
