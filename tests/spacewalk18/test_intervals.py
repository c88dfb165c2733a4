"""The intervals of Spacewalk-18's headline numbers (spacewalk/benchmarks/spacewalk18/intervals.py: Student's t over
recordings for step recognition, the stratified bootstrap for intra-video retrieval) and the resampled official
metrics the paired comparison draws (spacewalk/benchmarks/spacewalk18/scoring/official.py)."""

from __future__ import annotations

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import RetrievalSample, Spacewalk18
from spacewalk.benchmarks.spacewalk18.headlines import STEP_RECOGNITION
from spacewalk.benchmarks.spacewalk18.intervals import retrieval_intervals, step_recognition_intervals
from spacewalk.benchmarks.spacewalk18.scoring.official import (
    accuracy,
    class_average_precisions,
    resampled_accuracies,
    resampled_mean_average_precisions,
    retrieval_accuracy,
    step_recognition_metrics,
)
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.results.statistics import t_interval


@pytest.mark.parametrize("ties", [False, True])
def test_resampled_metrics_equal_the_official_ones_on_the_resampled_rows(ties):
    rng = np.random.default_rng(0)
    n, k1, m = 60, 5, 40
    labels = rng.integers(0, k1, n)
    labels[:k1] = np.arange(k1)
    scores = rng.random((n, k1))
    if ties:  # few distinct scores: ties between positives and negatives
        scores = np.round(scores * 3) / 3
    predictions = scores.argmax(axis=1)
    indices = rng.integers(0, n, (m, n))
    counts = np.stack([np.bincount(row, minlength=n) for row in indices])
    maps = resampled_mean_average_precisions(scores, labels, range(1, k1), counts)
    accs = resampled_accuracies(predictions, labels, counts)
    for i, row in enumerate(indices):
        aps = class_average_precisions(scores[row], labels[row], range(1, k1))
        assert maps[i] == pytest.approx(np.nanmean(aps), abs=1e-12)
        assert accs[i] == pytest.approx(accuracy(predictions[row], labels[row]), abs=1e-12)
    whole = resampled_mean_average_precisions(scores, labels, range(1, k1), np.ones((1, n)))
    assert whole[0] == pytest.approx(np.nanmean(class_average_precisions(scores, labels, range(1, k1))), abs=1e-12)


def test_intervals_are_students_t_over_the_official_per_recording_numbers(synthetic_spacewalk18):
    root = synthetic_spacewalk18(n_train=1, n_val=1, n_test=3, minutes=(4, 5), steps_per_video=(3, 5),
                                 samples_per_video=300, retrieval_samples_per_video=20, questions_per_video=2)
    dataset = Spacewalk18(root)
    samples = dataset.step_samples("test")
    rng = np.random.default_rng(0)
    scores = {v: rng.random((len(s), dataset.recordings[v].num_classes)) for v, s in samples.items()}
    for v, s in samples.items():  # better than chance: the true class gets a bonus
        scores[v][np.arange(len(s)), [x.label for x in s]] += 0.5
    predictions = {v: s.argmax(axis=1) for v, s in scores.items()}
    metrics = step_recognition_metrics(dataset.recordings, samples, predictions, scores)
    intervals = step_recognition_intervals(metrics, BootstrapOptions(n_resamples=200))
    assert set(intervals) == {h.name for h in STEP_RECOGNITION} == {"Accuracy", "mAP", "IoU"}
    for name, interval in intervals.items():
        values = [metrics["per_video"][v][name] for v in samples]
        made = t_interval(values, 0.95, bounds=(0.0, 100.0))
        assert interval["estimate"] == metrics[name]  # the official number, exactly
        assert (interval["low"], interval["high"]) == (made.low, made.high), name
        assert interval["low"] <= metrics[name] <= interval["high"], name
        assert interval["n"] == 3 and interval["values"] == "per_video" and interval["method"].startswith(
            "Student's t")
    assert intervals["Accuracy"]["unit"] == intervals["mAP"]["unit"] == "recordings, then samples within them"
    assert intervals["IoU"]["unit"] == "recordings"
    without_scores = step_recognition_intervals({**metrics, "mAP": None}, BootstrapOptions(n_resamples=200))
    assert set(without_scores) == {"Accuracy", "IoU"}
    # one recording: no interval over recordings
    one = next(iter(samples))
    single = step_recognition_metrics(dataset.recordings, {one: samples[one]}, {one: predictions[one]},
                                      {one: scores[one]})
    assert step_recognition_intervals(single, BootstrapOptions())["Accuracy"]["low"] is None


def test_retrieval_intervals_resample_the_samples_within_each_recording():
    rng = np.random.default_rng(0)
    samples = {v: [RetrievalSample(i, 10 * i, (10 * i + 5, 10 * i + 7), int(rng.integers(0, 2))) for i in range(n)]
               for v, n in (("a", 40), ("b", 60), ("c", 25))}
    predictions = {v: np.array([x.label if rng.random() < 0.7 else 1 - x.label for x in s]) for v, s in samples.items()}
    metrics = retrieval_accuracy(predictions, samples)
    interval = retrieval_intervals(predictions, samples, metrics, BootstrapOptions(n_resamples=300))["Accuracy"]
    assert interval["estimate"] == metrics["Accuracy"] and interval["low"] < metrics["Accuracy"] < interval["high"]
    assert interval["unit"].startswith("samples") and interval["n"] == 125
