"""Non-learned step-recognition baselines: what any trained model has to beat.

Both score each sample over the K + 1 classes of its recording; the prediction is the argmax.
"""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

from spacewalk.spacewalk18 import NOT_ANNOTATED, Recording, Spacewalk18, StepSample


class RandomBaseline:
    """Uniform random scores, seeded per recording so any subset of videos gives the same numbers.

    The expected accuracy is the mean over videos of 1 / (K + 1) (4.22 on the test split).
    """

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fit(self, dataset: Spacewalk18, split: str = "train") -> "RandomBaseline":
        return self

    def score(self, recording: Recording, samples: Sequence[StepSample]) -> np.ndarray:
        rng = np.random.default_rng([self.seed, zlib.crc32(recording.video_id.encode())])
        return rng.random((len(samples), recording.num_classes))


class PlanPriorBaseline:
    """Class frequencies of the training split, mapped by relative position in the step list and in time.

    Label spaces differ per recording, but a recording's steps are listed in the order they were
    planned, and plans are mostly followed. So the training annotations give, for each relative time
    t / duration (binned), the share of frames that are Irrelevant and the distribution of the relative
    position (i - 0.5) / K of the step being performed (binned). A test sample at relative time r then
    scores Irrelevant by P(Irrelevant | r) and step i by P(step | r) * P(position bin of i | r) shared
    among the steps of that bin. It reads no test label: only the recording's duration and step count.
    Each training recording counts equally (its frame counts are normalised), with add-`smoothing`
    pseudo-counts.
    """

    def __init__(self, time_bins: int = 10, position_bins: int = 10, smoothing: float = 1e-3):
        self.time_bins, self.position_bins, self.smoothing = time_bins, position_bins, smoothing
        self.irrelevant_share: np.ndarray | None = None  # [time_bins]
        self.position_dist: np.ndarray | None = None  # [time_bins, position_bins]

    def _position_bin(self, label: np.ndarray, num_steps: int) -> np.ndarray:
        return np.minimum(((label - 0.5) / num_steps * self.position_bins).astype(int), self.position_bins - 1)

    def _time_bin(self, seconds: np.ndarray, duration: float) -> np.ndarray:
        return np.clip((seconds / duration * self.time_bins).astype(int), 0, self.time_bins - 1)

    def fit(self, dataset: Spacewalk18, split: str = "train") -> "PlanPriorBaseline":
        irrelevant = np.zeros(self.time_bins)
        total = np.zeros(self.time_bins)
        positions = np.zeros((self.time_bins, self.position_bins))
        for rec in dataset.split(split):
            # frame counts per (time bin, label), from the segments, at 1 s resolution
            seconds = np.arange(0.5, rec.duration, 1.0)
            labels = np.array([rec.label_at_frame(min(int(round(s * 29.97)), rec.num_frames - 1)) for s in seconds])
            annotated = labels != NOT_ANNOTATED
            tbin = self._time_bin(seconds[annotated], rec.duration)
            lab = labels[annotated]
            weight = 1.0 / max(1, annotated.sum())
            np.add.at(total, tbin, weight)
            np.add.at(irrelevant, tbin[lab == 0], weight)
            steps = lab > 0
            np.add.at(positions, (tbin[steps], self._position_bin(lab[steps], rec.num_classes - 1)), weight)
        if not total.any():
            raise ValueError(f"the {split} split has no annotated frames to fit the prior on")
        s = self.smoothing
        self.irrelevant_share = (irrelevant + s) / (total + 2 * s)
        self.position_dist = (positions + s) / (positions.sum(1, keepdims=True) + s * self.position_bins)
        return self

    def score(self, recording: Recording, samples: Sequence[StepSample]) -> np.ndarray:
        if self.irrelevant_share is None:
            raise RuntimeError("PlanPriorBaseline.score called before fit")
        num_steps = recording.num_classes - 1
        tbin = self._time_bin(np.array([s.timestamp for s in samples]), recording.duration)
        pbin = self._position_bin(np.arange(1, num_steps + 1), num_steps)
        steps_per_bin = np.bincount(pbin, minlength=self.position_bins)
        scores = np.empty((len(samples), recording.num_classes))
        scores[:, 0] = self.irrelevant_share[tbin]
        scores[:, 1:] = ((1 - self.irrelevant_share[tbin])[:, None] * self.position_dist[tbin][:, pbin]
                         / steps_per_bin[pbin])
        return scores
