"""The intervals of Spacewalk-18's headline numbers in metrics.json (spacewalk/results/statistics.py and
spacewalk/results/bootstrap.py do the arithmetic; headlines.py declares the numbers and their units).

- Step recognition (Accuracy, mAP, IoU): each is a metric per recording, then the unweighted mean over recordings
  (the release's evaluation rules), so the unit is the recording, and the interval is Student's t over the
  per-recording values (G - 1 degrees of freedom; statistics.py says why not the bootstrap at 6 recordings). The
  values are the official per-recording numbers metrics.json holds under "per_video", which each interval names
  (`"values": "per_video"`), so the tables can combine the seeds of a setting from them.
- Intra-video retrieval (Accuracy): the unit is the sample (many per recording), and the number is per
  recording, then the mean, so the samples are resampled within each recording and every recording kept once (a
  bootstrap stratified by recording: this claim is about these recordings).

Each interval's estimate is the official number itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import RetrievalSample
from spacewalk.benchmarks.spacewalk18.headlines import INTRA_VIDEO_RETRIEVAL, STEP_RECOGNITION
from spacewalk.benchmarks.spacewalk18.scoring.official import resampled_accuracies
from spacewalk.results.bootstrap import BootstrapOptions, grouped_interval
from spacewalk.results.statistics import recording_interval


def step_recognition_intervals(metrics: Mapping[str, Any], options: BootstrapOptions) -> dict[str, dict[str, Any]]:
    """{"Accuracy": interval, "mAP": ..., "IoU": ...} (Interval.as_dict, in percent) of `metrics`, the official
    result of `step_recognition_metrics` (its per_video values and means); a number that is None has none."""
    per_video = metrics["per_video"]
    return {h.name: recording_interval([values.get(h.name) for values in per_video.values()], options.level,
                                       h.unit, estimate=metrics[h.name], bounds=h.bounds).as_dict()
            for h in STEP_RECOGNITION if metrics.get(h.name) is not None}


def retrieval_intervals(predictions: Mapping[str, Sequence[int] | np.ndarray],
                        samples: Mapping[str, Sequence[RetrievalSample]], metrics: Mapping[str, Any],
                        options: BootstrapOptions) -> dict[str, dict[str, Any]]:
    """{"Accuracy": interval} of intra-video retrieval beside `metrics` (`retrieval_accuracy`'s, the estimate):
    the samples resampled within each recording, every recording kept (module docstring)."""
    [headline] = INTRA_VIDEO_RETRIEVAL
    videos = list(predictions)
    labels = {v: np.array([s.label for s in samples[v]], dtype=np.int64) for v in videos}

    def accuracy(v: str, counts: np.ndarray) -> np.ndarray:
        return resampled_accuracies(np.asarray(predictions[v]), labels[v], counts)

    return {headline.name: grouped_interval(videos, [len(labels[v]) for v in videos], accuracy, options,
                                            headline.unit, scale=100, estimate=metrics[headline.name],
                                            between=False).as_dict()}
