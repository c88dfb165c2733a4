"""The official step-recognition metrics as a torchmetrics Metric, correct under DDP.

Kept apart from `official` so the scoring core (and `python -m spacewalk.score`) stays numpy-only and starts fast;
this module is for training loops.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording, StepSample
from spacewalk.benchmarks.spacewalk18.scoring.official import (
    Undefined,
    check_undefined_policy,
    step_recognition_metrics,
)


class VideoOutputs(NamedTuple):
    predictions: dict[str, np.ndarray]  # int64 [n] per video
    scores: dict[str, np.ndarray] | None  # float64 [n, K+1] per video; None when update got no scores
    incomplete: list[str]  # videos left out because samples were missing (only with incomplete="drop")
    # the rows seen of each incomplete video: (sample ids, float64 [n, K+1] scores), when update got scores; a
    # limited run's loss needs no whole video (models/step_recognition.py)
    partial: dict[str, tuple[np.ndarray, np.ndarray]]


class StepRecognitionMetric(Metric):
    """Collects (video, sample id, prediction, scores) across processes; `compute` scores whole videos.

    Per-video metrics need every sample of a video, so states are concatenated across ranks, the
    DistributedSampler's padding (repeated samples) is dropped by (video, sample id), keeping the first
    occurrence in rank order, and each video that was seen must be complete. Videos never seen are left
    out (unless `require_all_videos`). `compute` returns the dict of `step_recognition_metrics` with the
    scalars as float64 tensors (mAP None without scores) and `per_video` as plain floats; log it with
    `log_dict({k: v for k, v in result.items() if k != "per_video" and v is not None})`.
    `forward` only accumulates: a batch holds part of a video, so it has no value of its own.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(self, video_ids: Sequence[str], recordings: Mapping[str, Recording],
                 samples: Mapping[str, Sequence[StepSample]], undefined: Undefined = "exclude",
                 require_all_videos: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        check_undefined_policy(undefined)
        self.video_ids = list(video_ids)
        missing = [v for v in self.video_ids if v not in recordings or v not in samples]
        if missing:
            raise ValueError(f"videos without a recording or samples: {missing}")
        self.recordings = {v: recordings[v] for v in self.video_ids}
        self.samples = {v: list(samples[v]) for v in self.video_ids}
        self.undefined = undefined
        self.require_all_videos = require_all_videos
        self.max_classes = max(r.num_classes for r in self.recordings.values())
        # 1-d states only: a rank that saw nothing contributes an empty 1-d tensor to the gather
        for name in ("video_index", "sample_id", "prediction", "has_scores", "scores"):
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, video_index: torch.Tensor, sample_id: torch.Tensor, prediction: torch.Tensor,
               scores: torch.Tensor | None = None) -> None:
        video_index = torch.as_tensor(video_index).reshape(-1).long()
        sample_id = torch.as_tensor(sample_id, device=video_index.device).reshape(-1).long()
        prediction = torch.as_tensor(prediction, device=video_index.device).reshape(-1).long()
        b = len(video_index)
        if len(sample_id) != b or len(prediction) != b:
            raise ValueError(f"video_index, sample_id and prediction differ in length: "
                             f"{b}, {len(sample_id)}, {len(prediction)}")
        # padded to the widest label space so batches mixing videos concatenate; -inf marks padding
        padded = torch.full((b, self.max_classes), -math.inf, dtype=torch.float64, device=video_index.device)
        if scores is not None:
            scores = torch.as_tensor(scores).detach()
            if scores.ndim != 2 or scores.shape[0] != b or scores.shape[1] > self.max_classes:
                raise ValueError(f"scores must have shape [{b}, <= {self.max_classes}], got {tuple(scores.shape)}")
            padded[:, :scores.shape[1]] = scores.to(device=padded.device, dtype=torch.float64)
        self.video_index.append(video_index.detach())
        self.sample_id.append(sample_id.detach())
        self.prediction.append(prediction.detach())
        self.has_scores.append(torch.full((b,), scores is not None, dtype=torch.long, device=video_index.device))
        self.scores.append(padded.reshape(-1))

    def forward(self, *args: Any, **kwargs: Any) -> None:
        self.update(*args, **kwargs)

    def compute(self) -> dict[str, Any]:
        predictions, scores, _, _ = self._per_video("error")
        result = step_recognition_metrics(self.recordings, self.samples, predictions, scores, self.undefined)
        return {name: (None if value is None else torch.tensor(value, dtype=torch.float64))
                if name != "per_video" else value for name, value in result.items()}

    def per_video(self, incomplete: Literal["error", "drop"] = "error") -> VideoOutputs:
        """The gathered, de-duplicated outputs per video, in sample order (row i = sample id i).

        For callers that decide predictions after seeing a whole split (the Irrelevant threshold) or
        write prediction files. Synchronises across processes like `compute`, so every rank gets the
        same result. `incomplete="drop"` leaves out videos with missing samples (a run with
        `limit_val_batches`) instead of raising, and lists them.
        """
        with self.sync_context(dist_sync_fn=self.dist_sync_fn, should_sync=self._to_sync,
                               should_unsync=self._should_unsync):
            return VideoOutputs(*self._per_video(incomplete))

    def _per_video(self, incomplete: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None, list[str],
                                                   dict[str, tuple[np.ndarray, np.ndarray]]]:
        video_index = dim_zero_cat(self.video_index).long().cpu().numpy()
        if len(video_index) == 0:
            raise ValueError("StepRecognitionMetric: no samples were seen")
        sample_id = dim_zero_cat(self.sample_id).long().cpu().numpy()
        prediction = dim_zero_cat(self.prediction).long().cpu().numpy()
        has_scores = dim_zero_cat(self.has_scores).long().cpu().numpy()
        scores = dim_zero_cat(self.scores).double().cpu().numpy().reshape(len(video_index), self.max_classes)

        if video_index.min() < 0 or video_index.max() >= len(self.video_ids):
            raise ValueError(f"video_index outside 0..{len(self.video_ids) - 1}")
        if has_scores.min() != has_scores.max():
            raise ValueError("scores were given for some samples but not for others")
        with_scores = bool(has_scores[0])

        # np.unique returns the first occurrence of each key, sorted by (video, sample id)
        big = max(len(s) for s in self.samples.values()) + 1
        if sample_id.min() < 0 or sample_id.max() >= big:
            raise ValueError(f"sample_id outside 0..{big - 2}")
        _, first = np.unique(video_index * big + sample_id, return_index=True)
        video_index, sample_id, prediction, scores = (a[first] for a in (video_index, sample_id, prediction, scores))

        predictions, video_scores, dropped, partial = {}, {}, [], {}
        seen = set(video_index.tolist())
        for vi, video_id in enumerate(self.video_ids):
            if vi not in seen:
                if self.require_all_videos:
                    raise ValueError(f"StepRecognitionMetric: video {video_id} was never seen")
                continue
            rows = np.flatnonzero(video_index == vi)
            n = len(self.samples[video_id])
            ids = sample_id[rows]
            if len(ids) != n or ids[-1] != n - 1:
                if incomplete == "drop":
                    dropped.append(video_id)
                    if with_scores:
                        known = ids < n
                        partial[video_id] = (ids[known], scores[rows[known], :self.recordings[video_id].num_classes])
                    continue
                missing = sorted(set(range(n)) - set(ids.tolist()))
                extra = sorted(i for i in set(ids.tolist()) if i >= n)
                raise ValueError(f"StepRecognitionMetric: video {video_id} has {n} samples; "
                                 f"missing ids {missing[:10]}{'...' if len(missing) > 10 else ''}"
                                 + (f", unknown ids {extra[:10]}" if extra else ""))
            predictions[video_id] = prediction[rows]
            if with_scores:
                k1 = self.recordings[video_id].num_classes
                video_scores[video_id] = scores[rows, :k1]
        return predictions, (video_scores if with_scores else None), dropped, partial
