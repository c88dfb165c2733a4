"""Bootstrap intervals of the step-recognition metrics (the shared two-stage bootstrap: spacewalk/results/bootstrap.py).

The official numbers are per video, then the unweighted mean over videos (BENCHMARKS.md 1.4), so the unit is
two-level: recordings, then the samples within them. Accuracy and mAP resample both levels; IoU resamples the
recordings only, because a recording's samples tile its timeline (each covers the span up to its neighbours'
midpoints), so a sample drawn twice adds no time and one left out hands its span to its neighbours: they are not
exchangeable units of IoU. The estimate of each interval is the official number (`step_recognition_metrics`);
the resampled values use the same rules (`resampled_accuracies`, `resampled_mean_average_precisions`, and
`video_step_metrics` itself for IoU, computed once per recording). Every metric draws from the same seed, so
the recordings drawn are the same for all three.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from spacewalk.benchmarks.spacewalk18.dataset import Recording, RetrievalSample, StepSample
from spacewalk.benchmarks.spacewalk18.scoring import resampled_accuracies, resampled_mean_average_precisions
from spacewalk.results.bootstrap import BootstrapOptions, grouped_interval

RECORDINGS_THEN_SAMPLES = "recordings, then samples within them"
RECORDINGS = "recordings (IoU: a recording's samples tile its timeline, so they are not resampled)"


def step_recognition_intervals(recordings: Mapping[str, Recording], samples: Mapping[str, Sequence[StepSample]],
                               predictions: Mapping[str, Sequence[int] | np.ndarray],
                               scores: Mapping[str, np.ndarray] | None, metrics: Mapping[str, Any],
                               options: BootstrapOptions) -> dict[str, dict[str, Any]]:
    """{"Accuracy": interval, "mAP": ..., "IoU": ...} (Interval.as_dict, in percent) beside `metrics`, the
    official result of `step_recognition_metrics` on the same predictions (its per_video values and means are
    the estimates). Videos are the keys of `predictions`; a metric that is None has no interval."""
    videos = list(predictions)
    labels = {v: np.array([s.label for s in samples[v]], dtype=np.int64) for v in videos}
    sizes = [len(labels[v]) for v in videos]
    out: dict[str, dict[str, Any]] = {}

    def accuracy(v: str, counts: np.ndarray) -> np.ndarray:
        return resampled_accuracies(np.asarray(predictions[v]), labels[v], counts)

    out["Accuracy"] = grouped_interval(videos, sizes, accuracy, options, RECORDINGS_THEN_SAMPLES, scale=100,
                                       estimate=metrics["Accuracy"]).as_dict()
    if scores is not None and metrics.get("mAP") is not None:
        def mean_ap(v: str, counts: np.ndarray) -> np.ndarray:
            return resampled_mean_average_precisions(scores[v], labels[v], range(1, recordings[v].num_classes),
                                                     counts)

        out["mAP"] = grouped_interval(videos, sizes, mean_ap, options, RECORDINGS_THEN_SAMPLES, scale=100,
                                      estimate=metrics["mAP"]).as_dict()
    if metrics.get("IoU") is not None:
        per_video = {v: metrics["per_video"][v]["IoU"] for v in videos}

        def iou(v: str, counts: np.ndarray) -> np.ndarray:  # the official per-video IoU (percent), every draw
            value = per_video[v]
            return np.full(len(counts), np.nan if value is None else value / 100)

        out["IoU"] = grouped_interval(videos, sizes, iou, options, RECORDINGS, within=False, scale=100,
                                      estimate=metrics["IoU"]).as_dict()
    return out


SAMPLES_WITHIN_RECORDINGS = "samples (resampled within each recording, every recording kept once)"


def retrieval_intervals(predictions: Mapping[str, Sequence[int] | np.ndarray],
                        samples: Mapping[str, Sequence[RetrievalSample]], metrics: Mapping[str, Any],
                        options: BootstrapOptions) -> dict[str, dict[str, Any]]:
    """{"Accuracy": interval} of intra-video retrieval beside `metrics` (`retrieval_accuracy`'s, the estimate).
    The unit is the sample; the official number is per video, then the mean, so the samples are resampled within
    each recording and the recordings kept (a bootstrap stratified by recording)."""
    videos = list(predictions)
    labels = {v: np.array([s.label for s in samples[v]], dtype=np.int64) for v in videos}

    def accuracy(v: str, counts: np.ndarray) -> np.ndarray:
        return resampled_accuracies(np.asarray(predictions[v]), labels[v], counts)

    return {"Accuracy": grouped_interval(videos, [len(labels[v]) for v in videos], accuracy, options,
                                         SAMPLES_WITHIN_RECORDINGS, scale=100, estimate=metrics["Accuracy"],
                                         between=False).as_dict()}
