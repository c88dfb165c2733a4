"""The threshold tau for Irrelevant (docs/spacewalk18.md, The paper's models): predict the best step if its score is >=
tau, else 0.

Trained models never see Irrelevant as a class, so tau is chosen on the validation split as the value
with the best F1. The authors do not define "best F1"; two objectives are offered:
- "macro_f1" (default): per video, the mean F1 over that video's classes 0..K that occur in its ground
  truth or its predictions (label spaces differ between recordings, so classes are never pooled
  across videos); then the unweighted mean over videos, like every official metric.
- "binary_f1": Irrelevant (positive) against any step, pooled over all samples. With no Irrelevant
  in ground truth or prediction, F1 counts as 1 (nothing to find, nothing falsely found).
Candidates are +inf (always Irrelevant), every distinct max score (tau = s makes the samples scoring
s steps) and -inf (never Irrelevant; the same outcome as the smallest score). Ties in F1 go to the
largest tau. The sweep is vectorised: sorting the samples by score, lowering tau flips them one by one
from 0 to their best step, and each flip changes only two (video, class) cells of the confusion counts.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from spacewalk.core.errors import ConfigError

Objective = Literal["macro_f1", "binary_f1"]
OBJECTIVES = ("macro_f1", "binary_f1")


def apply_threshold(step_prediction: np.ndarray, max_score: np.ndarray, tau: float) -> np.ndarray:
    return np.where(np.asarray(max_score) >= tau, np.asarray(step_prediction), 0).astype(np.int64)


def _grouped_before(group: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """For events in time order: the sum of the earlier events' deltas in the same group."""
    order = np.argsort(group, kind="stable")
    d = delta[order]
    csum = np.cumsum(d)
    g = group[order]
    start = np.r_[True, g[1:] != g[:-1]]
    # cumulative sum restarted at each group's first event, minus the event itself
    base = np.repeat(csum[start] - d[start], np.diff(np.r_[np.flatnonzero(start), len(g)]))
    out = np.empty_like(d)
    out[order] = csum - base - d
    return out


def _f1(n_gt: np.ndarray, n_pred: np.ndarray, tp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    present = n_gt + n_pred > 0
    return np.where(present, 2 * tp / np.maximum(n_gt + n_pred, 1), 0.0), present.astype(np.float64)


def _macro_f1_after_flips(video: np.ndarray, label: np.ndarray, step: np.ndarray,
                          num_classes: np.ndarray) -> np.ndarray:
    """Mean over videos of the per-video macro-F1 after flipping the first j samples, j = 0..N."""
    n, num_videos = len(video), len(num_classes)
    offset = np.r_[0, np.cumsum(num_classes)[:-1]]
    n_gt = np.bincount(offset[video] + label, minlength=int(num_classes.sum())).astype(np.float64)
    per_video_n = np.bincount(video, minlength=num_videos).astype(np.float64)
    # tau = +inf: every sample predicted 0
    n_pred0 = np.zeros_like(n_gt)
    n_pred0[offset] = per_video_n
    tp0 = np.zeros_like(n_gt)
    tp0[offset] = n_gt[offset]
    f1, present = _f1(n_gt, n_pred0, tp0)
    s0 = np.bincount(np.repeat(np.arange(num_videos), num_classes), weights=f1, minlength=num_videos)
    c0 = np.bincount(np.repeat(np.arange(num_videos), num_classes), weights=present, minlength=num_videos)

    # flip j: class 0 of its video loses a prediction, its best step gains one
    group = np.concatenate([offset[video], offset[video] + step])
    d_pred = np.r_[-np.ones(n), np.ones(n)]
    d_tp = np.r_[-(label == 0).astype(np.float64), (label == step).astype(np.float64)]
    pred_before = n_pred0[group] + _grouped_before(group, d_pred)
    tp_before = tp0[group] + _grouped_before(group, d_tp)
    f_before, p_before = _f1(n_gt[group], pred_before, tp_before)
    f_after, p_after = _f1(n_gt[group], pred_before + d_pred, tp_before + d_tp)
    d_sum = (f_after - f_before)[:n] + (f_after - f_before)[n:]
    d_count = (p_after - p_before)[:n] + (p_after - p_before)[n:]

    # the flipped video's sum of F1 and count of classes, before and after each flip
    sum_before = s0[video] + _grouped_before(video, d_sum)
    count_before = c0[video] + _grouped_before(video, d_count)
    change = (sum_before + d_sum) / (count_before + d_count) - sum_before / count_before
    start = np.mean(s0 / np.maximum(c0, 1))
    return start + np.r_[0.0, np.cumsum(change)] / num_videos


def _binary_f1_after_flips(label: np.ndarray) -> np.ndarray:
    n = len(label)
    irrelevant = (label == 0).astype(np.float64)
    n_irrelevant = irrelevant.sum()
    tp = n_irrelevant - np.r_[0.0, np.cumsum(irrelevant)]
    n_pred = n - np.arange(n + 1, dtype=np.float64)
    denominator = n_irrelevant + n_pred
    return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 1.0)


def threshold_curve(video: np.ndarray, label: np.ndarray, step_prediction: np.ndarray, max_score: np.ndarray,
                    num_classes: np.ndarray, objective: Objective = "macro_f1") -> tuple[np.ndarray, np.ndarray]:
    """Candidate thresholds in descending order (+inf, distinct scores, -inf) and the F1 of each.

    video: [N] indices into num_classes (K + 1 per video); label: [N] in 0..K; step_prediction: [N]
    the best step in 1..K; max_score: [N] its score.
    """
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    video, label, step = (np.asarray(a, dtype=np.int64) for a in (video, label, step_prediction))
    score = np.asarray(max_score, dtype=np.float64)
    num_classes = np.asarray(num_classes, dtype=np.int64)
    if not (len(video) == len(label) == len(step) == len(score)) or len(score) == 0:
        raise ValueError("video, label, step_prediction and max_score must be non-empty and equally long")
    if np.isnan(score).any():
        raise ValueError("max_score has NaN")
    classes = num_classes[video]
    if (label < 0).any() or (label >= classes).any() or (step < 1).any() or (step >= classes).any():
        raise ValueError("labels must lie in 0..K and step predictions in 1..K of their video")

    # only the videos that have samples take part in the mean over videos
    seen, video = np.unique(video, return_inverse=True)
    num_classes = num_classes[seen]
    order = np.argsort(-score, kind="stable")
    video, label, step, score = video[order], label[order], step[order], score[order]
    if objective == "macro_f1":
        after = _macro_f1_after_flips(video, label, step, num_classes)
    else:
        after = _binary_f1_after_flips(label)
    # tau = score s flips every sample scoring >= s: evaluate after the last of each run of ties
    last_of_tie = np.r_[score[1:] != score[:-1], True]
    candidates = np.r_[np.inf, score[last_of_tie], -np.inf]
    f1 = np.r_[after[0], after[1:][last_of_tie], after[-1]]
    return candidates, f1


def fit_threshold(video: np.ndarray, label: np.ndarray, step_prediction: np.ndarray, max_score: np.ndarray,
                  num_classes: np.ndarray, objective: Objective = "macro_f1") -> tuple[float, float]:
    """(tau, its F1): the largest candidate whose F1 is the best (up to float rounding)."""
    candidates, f1 = threshold_curve(video, label, step_prediction, max_score, num_classes, objective)
    best = int(np.flatnonzero(f1 >= f1.max() - 1e-12)[0])
    return float(candidates[best]), float(f1[best])
