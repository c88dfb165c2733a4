"""Non-learned step-recognition baselines: what any trained model has to beat.

Both score each sample over the K + 1 classes of its recording; the prediction is the argmax. The plan prior
lives in the library (spacewalk/benchmarks/spacewalk18/decoding/plan_prior.py), where the plan decoder uses it too.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording, Spacewalk18, StepSample
from spacewalk.benchmarks.spacewalk18.decoding.plan_prior import PlanPriorBaseline  # noqa: F401  (model=plan_prior; also the decoders' prior)


class RandomBaseline:
    """Uniform random scores, seeded per recording so any subset of videos gives the same numbers.

    The expected accuracy is the mean over videos of 1 / (K + 1) (4.22 on the test split).
    """

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fit(self, dataset: Spacewalk18, split: str = "train") -> RandomBaseline:
        return self

    def score(self, recording: Recording, samples: Sequence[StepSample]) -> np.ndarray:
        rng = np.random.default_rng([self.seed, zlib.crc32(recording.video_id.encode())])
        return rng.random((len(samples), recording.num_classes))
