"""Official Spacewalk-18 scoring (docs/spacewalk18.md: Official scoring, Video question answering, Intra-video
retrieval).

The numbers must equal the authors' evaluation.py on the same predictions, so AP and IoU are written
here from their semantics instead of taken from sklearn/torchmetrics (whose AP and IoU differ). The
low-level functions return fractions like the authors' code; `step_recognition_metrics`,
`qa_accuracy` and `retrieval_accuracy` report percent, as the paper does.

Where the authors' code crashes (a class with no positive sample has AP = x / 0; a class with neither
ground truth nor prediction has IoU = 0 / 0), `undefined` chooses: "exclude" (default) drops that
class from the video's mean (and a video with no defined class from the mean over videos), "error"
raises. Neither case occurs in the official splits: every class 1..K has samples and every class
0..max label has ground truth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import (
    NOT_ANNOTATED,
    Question,
    Recording,
    RetrievalSample,
    Segment,
    StepSample,
)
from spacewalk.core.errors import ConfigError

Undefined = Literal["exclude", "error"]
UNDEFINED_POLICIES = ("exclude", "error")


def check_undefined_policy(undefined: str) -> None:
    if undefined not in UNDEFINED_POLICIES:
        raise ConfigError(f"undefined must be one of {UNDEFINED_POLICIES}, got {undefined!r}")


# --------------------------------------------------------------------------------------------------
# per-video building blocks (fractions)


def accuracy(predictions: Sequence[int] | np.ndarray, labels: Sequence[int] | np.ndarray) -> float:
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if predictions.shape != labels.shape or predictions.ndim != 1 or len(labels) == 0:
        raise ValueError(f"need two equally long non-empty 1-d arrays, got {predictions.shape} and {labels.shape}")
    return float((predictions == labels).sum() / len(labels))


def _average_precisions(s: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The authors' AP of each column of scores `s` [n, C] against 0/1 `pos` [n, C], nan without positives."""
    n, c = s.shape
    # score descending; among equal scores negatives first (the authors' key (score, -label), reversed)
    order = np.lexsort((pos, -s), axis=0)
    tp = np.cumsum(np.take_along_axis(pos, order, axis=0), axis=0)
    n_pos = tp[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = tp / n_pos
    precision = tp / np.arange(1, n + 1)[:, None]
    # the two extra points (0, 0) and (1, 0), then all points sorted by (recall, precision) descending
    r = np.concatenate([np.zeros((1, c)), np.ones((1, c)), recall])
    p = np.concatenate([np.zeros((2, c)), precision])
    desc = np.lexsort((p, r), axis=0)[::-1]
    r, p = np.take_along_axis(r, desc, axis=0), np.take_along_axis(p, desc, axis=0)
    # step i uses the max precision of points 0..i-1; cumsum keeps the authors' summation order
    running_max = np.maximum.accumulate(p, axis=0)
    ap = np.cumsum((r[:-1] - r[1:]) * running_max[:-1], axis=0)[-1]
    ap[n_pos == 0] = np.nan
    return ap


def class_average_precisions(scores: np.ndarray, labels: np.ndarray, classes: Sequence[int]) -> np.ndarray:
    """The authors' AP of each class in `classes` (score column c against label == c), vectorised.

    A class without positive samples gets nan (the authors' code divides by zero there).
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels)
    classes = np.asarray(classes, dtype=np.int64)
    if scores.ndim != 2 or labels.shape != (len(scores),) or len(scores) == 0:
        raise ValueError(f"need scores [n, C] and labels [n], n > 0; got {scores.shape} and {labels.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite")
    return _average_precisions(scores[:, classes], (labels[:, None] == classes[None, :]).astype(np.int64))


def average_precision(scores: Sequence[float] | np.ndarray, positives: Sequence[bool | int] | np.ndarray) -> float:
    """The authors' AP of one class (nan without positives); see docs/spacewalk18.md, Official scoring."""
    scores = np.asarray(scores, dtype=np.float64)
    positives = np.asarray(positives).astype(bool)
    if scores.ndim != 1 or positives.shape != scores.shape or len(scores) == 0:
        raise ValueError(f"need two equally long non-empty 1-d arrays, got {scores.shape} and {positives.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite")
    return float(_average_precisions(scores[:, None], positives.astype(np.int64)[:, None])[0])


def prediction_bounds(segments: Sequence[Segment], frame_indices: Sequence[int] | np.ndarray) -> np.ndarray:
    """Edges of the intervals the samples cover: n + 1 values, sample i covers [b[i], b[i + 1]].

    Midpoints between neighbouring samples; the first starts where the leading -1 segment ends and the
    last ends where the trailing one begins (the official rule). A single sample covers the whole span
    (the authors' code fails on it).
    """
    frames = np.asarray(frame_indices, dtype=np.float64)
    if len(segments) < 3:
        raise ValueError("the annotation has no annotated segment between its leading and trailing -1")
    if frames.ndim != 1 or len(frames) == 0:
        raise ValueError("need a non-empty 1-d array of frame indices")
    bounds = np.empty(len(frames) + 1)
    bounds[0], bounds[-1] = segments[1].frame_start, segments[-2].frame_end
    bounds[1:-1] = (frames[:-1] + frames[1:]) / 2
    if (np.diff(frames) < 0).any() or (np.diff(bounds) < 0).any():
        raise ValueError("sample frames must be sorted and inside the annotated span "
                         f"[{segments[1].frame_start}, {segments[-2].frame_end})")
    return bounds


def class_ious(segments: Sequence[Segment], frame_indices: Sequence[int] | np.ndarray,
               predictions: Sequence[int] | np.ndarray) -> np.ndarray:
    """IoU of each class 0..max label of the annotation (nan where 0 / 0); docs/spacewalk18.md, Official scoring.

    Both partitions are cut at every edge of either, so each elementary piece has one GT label and
    one predicted label: the authors' sum of pairwise overlaps is the length of pieces where they
    agree. All edges are multiples of 0.5 frames, so every length and sum is exact in float64.
    """
    predictions = np.asarray(predictions, dtype=np.int64)
    bounds = prediction_bounds(segments, frame_indices)
    if predictions.shape != (len(bounds) - 1,):
        raise ValueError(f"{len(bounds) - 1} samples but predictions of shape {predictions.shape}")
    seg_start = np.array([s.frame_start for s in segments], dtype=np.float64)
    seg_end = np.array([s.frame_end for s in segments], dtype=np.float64)
    seg_label = np.array([s.label for s in segments], dtype=np.int64)
    n_classes = int(seg_label.max()) + 1
    if n_classes == 0:
        raise ValueError("the annotation has no labelled segment")

    edges = np.unique(np.concatenate([bounds, seg_start[2:-1]]))  # inner GT edges lie inside the span
    lengths = np.diff(edges)
    mids = (edges[:-1] + edges[1:]) / 2
    gt = seg_label[np.searchsorted(seg_start, mids, side="right") - 1]
    # side="right" skips zero-length intervals (samples that share a frame)
    pred = predictions[np.minimum(np.searchsorted(bounds, mids, side="right") - 1, len(predictions) - 1)]
    agree = (gt == pred) & (gt >= 0)
    inter = np.bincount(gt[agree], weights=lengths[agree], minlength=n_classes)[:n_classes]
    annotated = seg_label != NOT_ANNOTATED
    gt_len = np.bincount(seg_label[annotated], weights=(seg_end - seg_start)[annotated],
                         minlength=n_classes)[:n_classes]
    in_range = (predictions >= 0) & (predictions < n_classes)
    pred_len = np.bincount(predictions[in_range], weights=np.diff(bounds)[in_range], minlength=n_classes)[:n_classes]
    union = gt_len + pred_len - inter
    with np.errstate(invalid="ignore"):
        return inter / union


def _mean_defined(values: np.ndarray, what: str, video_id: str, undefined: Undefined,
                  first_class: int = 0) -> float:
    undefined_classes = np.flatnonzero(np.isnan(values)) + first_class
    if len(undefined_classes) and undefined == "error":
        raise ValueError(f"video {video_id}: {what} is undefined for classes {undefined_classes.tolist()}")
    defined = values[~np.isnan(values)]
    return float(np.mean(defined)) if len(defined) else math.nan


def video_step_metrics(recording: Recording, samples: Sequence[StepSample],
                       predictions: Sequence[int] | np.ndarray, scores: np.ndarray | None = None,
                       undefined: Undefined = "exclude") -> dict[str, float | None]:
    """Accuracy, mAP (None without scores) and IoU of one video, as fractions."""
    check_undefined_policy(undefined)
    video_id, k1 = recording.video_id, recording.num_classes
    predictions = np.asarray(predictions)
    if predictions.shape != (len(samples),):
        raise ValueError(f"video {video_id}: {len(samples)} samples but predictions of shape {predictions.shape}")
    if not np.issubdtype(predictions.dtype, np.integer):
        raise ValueError(f"video {video_id}: predictions must be integers, got {predictions.dtype}")
    if len(predictions) and not (0 <= predictions.min() and predictions.max() < k1):
        raise ValueError(f"video {video_id}: predictions must lie in 0..{k1 - 1}")
    labels = np.array([s.label for s in samples], dtype=np.int64)
    frames = np.array([s.frame_index for s in samples], dtype=np.int64)
    result: dict[str, float | None] = {"Accuracy": accuracy(predictions, labels), "mAP": None}
    if scores is not None:
        scores = np.asarray(scores, dtype=np.float64)
        if scores.shape != (len(samples), k1):
            raise ValueError(f"video {video_id}: scores must have shape {(len(samples), k1)}, got {scores.shape}")
        if not np.isfinite(scores).all():
            raise ValueError(f"video {video_id}: scores must be finite")
        # classes 1..K: Irrelevant is not scored by mAP
        aps = class_average_precisions(scores, labels, range(1, k1))
        result["mAP"] = _mean_defined(aps, "AP (no positive sample)", video_id, undefined, first_class=1)
    ious = class_ious(recording.segments, frames, predictions)
    result["IoU"] = _mean_defined(ious, "IoU (class neither annotated nor predicted)", video_id, undefined)
    return result


def _percent(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value * 100


def _mean_over_videos(values: list[float | None]) -> float | None:
    defined = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.mean(defined)) if defined else None


def step_recognition_metrics(recordings: Mapping[str, Recording], samples: Mapping[str, Sequence[StepSample]],
                             predictions: Mapping[str, Sequence[int] | np.ndarray],
                             scores: Mapping[str, np.ndarray] | None = None,
                             undefined: Undefined = "exclude") -> dict[str, Any]:
    """Official step-recognition metrics in percent: per video, then the unweighted mean over videos.

    Videos are the keys of `predictions`, in its order (the authors iterate over the prediction file).
    """
    if not predictions:
        raise ValueError("no predictions")
    if scores is not None and set(scores) != set(predictions):
        raise ValueError(f"scores and predictions cover different videos: {sorted(set(scores) ^ set(predictions))}")
    per_video = {}
    for video_id in predictions:
        if video_id not in samples or video_id not in recordings:
            raise ValueError(f"video {video_id} has predictions but no samples or recording")
        per_video[video_id] = video_step_metrics(recordings[video_id], samples[video_id], predictions[video_id],
                                                 None if scores is None else scores[video_id], undefined)
    # mean of fractions, then x100: the authors' number, scaled
    overall = {name: _percent(_mean_over_videos([m[name] for m in per_video.values()]))
               for name in ("Accuracy", "mAP", "IoU")}
    overall["per_video"] = {v: {name: _percent(x) for name, x in m.items()} for v, m in per_video.items()}
    return overall


# --------------------------------------------------------------------------------------------------
# video QA and intra-video retrieval


def qa_accuracy(predicted_options: Sequence[int] | np.ndarray, questions: Sequence[Question]) -> dict[str, Any]:
    """Accuracy over all questions and per question type, in percent; predictions in file order."""
    predicted = np.asarray(predicted_options)
    if predicted.shape != (len(questions),) or not questions:
        raise ValueError(f"{len(questions)} questions but predictions of shape {predicted.shape}")
    correct = predicted == np.array([q.answer for q in questions])
    types = np.array([q.type for q in questions])
    per_type, per_type_count = {}, {}
    for qtype in dict.fromkeys(types.tolist()):  # first-appearance order
        mask = types == qtype
        per_type[qtype] = float(correct[mask].mean()) * 100
        per_type_count[qtype] = int(mask.sum())
    return {"Accuracy": float(correct.mean()) * 100, "per_type": per_type, "count": len(questions),
            "per_type_count": per_type_count}


def retrieval_accuracy(predictions: Mapping[str, Sequence[int] | np.ndarray],
                       samples: Mapping[str, Sequence[RetrievalSample]]) -> dict[str, Any]:
    """Intra-video retrieval: accuracy per video, then the unweighted mean over videos, in percent."""
    if not predictions:
        raise ValueError("no predictions")
    per_video = {}
    for video_id, pred in predictions.items():
        if video_id not in samples:
            raise ValueError(f"video {video_id} has predictions but no samples")
        per_video[video_id] = accuracy(np.asarray(pred), [s.label for s in samples[video_id]])
    return {"Accuracy": float(np.mean(list(per_video.values()))) * 100,
            "per_video": {v: a * 100 for v, a in per_video.items()}}


# --------------------------------------------------------------------------------------------------
# resampled data (the bootstrap intervals: spacewalk/results/bootstrap.py,
# spacewalk/benchmarks/spacewalk18/intervals.py)


def resampled_accuracies(predictions: np.ndarray, labels: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """`accuracy` of m resamples of one video's samples at once: counts [m, n] multiplicities of each sample."""
    correct = (np.asarray(predictions) == np.asarray(labels)).astype(np.float64)
    return counts @ correct / counts.sum(axis=1)


def resampled_mean_average_precisions(scores: np.ndarray, labels: np.ndarray, classes: Sequence[int],
                                      counts: np.ndarray) -> np.ndarray:
    """The mean over `classes` (nan ones left out, the "exclude" policy) of the authors' AP, for m resamples of
    one video's samples at once: counts [m, n] multiplicities. Equal to `class_average_precisions` on the
    resampled rows (tests/spacewalk18/test_intervals.py checks it): a sample drawn c times is c tied copies,
    which add c steps of recall at precisions no higher than the last copy's, so the area is that of the sample
    weighted c; one sort per class serves every resample. nan for a resample with no defined class."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels)
    classes = np.asarray(classes, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.float64)
    total = np.zeros(len(counts))
    defined = np.zeros(len(counts))
    for c in classes:
        pos = (labels == c).astype(np.int64)
        if not pos.any():
            continue  # no positive in any resample: nan everywhere, left out
        order = np.lexsort((pos, -scores[:, c]))  # the authors' order: score descending, negatives first on ties
        at = np.flatnonzero(pos[order])  # the positives' ranks
        # Only the positives' ranks are needed: the interpolated precision (the best at this rank or any later) is
        # reached at a positive's rank, since precision only falls over a negative; the counts are integers, so
        # these sums equal the full-length ones exactly (a third of the work: this is the bootstrap's hot loop).
        seen = np.cumsum(counts[:, order], axis=1)[:, at]
        w = counts[:, order[at]]
        tp = np.cumsum(w, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(seen > 0, tp / seen, 0.0)
            best_after = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]
            n_pos = tp[:, -1]
            ap = (w * best_after).sum(axis=1) / n_pos
        has = n_pos > 0
        total[has] += ap[has]
        defined[has] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(defined > 0, total / np.maximum(defined, 1), np.nan)
