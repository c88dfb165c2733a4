"""Spacewalk-18's headline numbers, declared once per task (spacewalk.benchmarks.registry.Headline): the end-of-run
table (evaluation.format_table), the intervals in metrics.json (intervals.py), the re-scoring and the paired
comparison (run_scores.py), the logged keys (models/step_recognition.py) and the report's default columns read
these tuples, so a new number is one entry here and its official scoring in scoring.py.

The official step-recognition numbers are a metric per recording, then the unweighted mean over recordings
(the release's evaluation rules): Accuracy and mAP are computed from a recording's samples, so a recording's
value can be recomputed on a draw of its samples (`per_recording`); IoU is computed over a recording's
timeline, which its samples tile (each covers the span up to its neighbours' midpoints), so a sample drawn twice
adds no time and one left out hands its span to its neighbours: its samples are not redrawn.

Light on purpose (the registration imports it): numpy and the scoring are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spacewalk.benchmarks.registry import (
    QUESTIONS,
    RECORDINGS,
    RECORDINGS_THEN_SAMPLES,
    SAMPLES_WITHIN_RECORDINGS,
    Headline,
)


@dataclass(frozen=True)
class RecordingRows:
    """One recording's predictions as the per-recording functions read them: the predicted labels, the labels
    and the scores (None: the run recorded none) of its samples in order, the number of classes (K + 1), and the
    official per-recording numbers (percent; None where undefined)."""

    predictions: Any  # [n] ints
    labels: Any  # [n] ints
    scores: Any | None  # [n, K + 1]
    num_classes: int
    official: Mapping[str, float | None]


def accuracy(rows: RecordingRows, counts):
    """The recording's Accuracy (percent) on each draw of its samples."""
    import numpy as np

    from spacewalk.benchmarks.spacewalk18.scoring.official import resampled_accuracies

    return resampled_accuracies(np.asarray(rows.predictions), np.asarray(rows.labels), counts) * 100


def mean_average_precision(rows: RecordingRows, counts):
    """The recording's mAP over the steps (class 0, Irrelevant, left out; percent) on each draw of its samples."""
    import numpy as np

    from spacewalk.benchmarks.spacewalk18.scoring.official import resampled_mean_average_precisions

    if rows.scores is None:
        return np.full(len(counts), np.nan)
    return resampled_mean_average_precisions(rows.scores, np.asarray(rows.labels), range(1, rows.num_classes),
                                             counts) * 100


def iou(rows: RecordingRows, counts):
    """The recording's official IoU on every draw: its samples tile its timeline and are not redrawn."""
    import numpy as np

    value = rows.official.get("IoU")
    return np.full(len(counts), np.nan if value is None else float(value))


STEP_RECOGNITION = (
    Headline("Accuracy", RECORDINGS_THEN_SAMPLES, "per recording, the share of its samples whose predicted step is "
             "the label; then the mean over recordings", per_recording=accuracy),
    Headline("mAP", RECORDINGS_THEN_SAMPLES, "per recording, the mean over its steps (Irrelevant left out) of the "
             "average precision of the step's scores; then the mean over recordings",
             per_recording=mean_average_precision),
    Headline("IoU", RECORDINGS, "per recording, the mean over classes of the intersection over union of the time "
             "predicted and labelled as the class (each sample covering the span to its neighbours' midpoints); "
             "then the mean over recordings", per_recording=iou, samples_redrawn=False),
)
INTRA_VIDEO_RETRIEVAL = (
    Headline("Accuracy", SAMPLES_WITHIN_RECORDINGS, "per recording, the share of its queries whose chosen "
             "candidate is the one of the same step; then the mean over recordings", per_recording=accuracy),
)
QUESTION_ANSWERING = (
    Headline("Accuracy", QUESTIONS, "the share of questions whose chosen option is the answer"),
    Headline("per_type/*", QUESTIONS, "the same over each question type's questions"),
)
HEADLINES = {"step_recognition": STEP_RECOGNITION, "intra_video_retrieval": INTRA_VIDEO_RETRIEVAL,
             "question_answering": QUESTION_ANSWERING}


def task_of(config: Mapping[str, Any]) -> str | None:
    """Which of the tasks a run is, from its config: video QA and step recognition as questions by their data
    config's `_target_` (both are multiple-choice runs), the others by `task.name`."""
    target = str((config.get("data") or {}).get("_target_", ""))
    if target.endswith(".question_answering_task"):
        return "question_answering"
    if target.endswith(".step_recognition_questions_task"):
        return "step_recognition"
    task = config.get("task")
    name = task.get("name") if isinstance(task, Mapping) else None
    return name if name in ("step_recognition", "intra_video_retrieval") else None
