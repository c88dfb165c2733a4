"""Official Spacewalk-18 prediction files (docs/spacewalk18.md: Official scoring, Video question answering, Intra-video
retrieval): read with validation, write atomically.

- step recognition: `{video_id: [{"prediction": int, "score": [K+1 floats]}, ...]}`, aligned by position
  with the samples of that video; `score` is optional but then absent everywhere;
- video QA: `[int, ...]`, one option index per question, in the order of the question file;
- intra-video retrieval: `{video_id: [0 | 1, ...]}`, aligned by position with the samples.

The authors' scripts index with these values directly, so a float, a bool or an out-of-range value
would crash them or, for negative indices, silently count elsewhere: everything is rejected here with
the file, video id, entry index and field named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import Question, Recording, RetrievalSample, StepSample
from spacewalk.core.errors import DataError
from spacewalk.core.io import load_json, write_json


@dataclass(frozen=True)
class StepPredictions:
    predictions: dict[str, np.ndarray]  # int64 [n] per video
    scores: dict[str, np.ndarray] | None  # float64 [n, K+1] per video; None when the file has no scores


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    # JSON gives int, float, bool, str, None, list, dict: exact types keep bool out
    return type(value) is float or type(value) is int


def _check_videos(raw: Any, expected: Sequence[str], file: Path) -> dict:
    if not isinstance(raw, dict):
        raise DataError(f"expected an object mapping video ids to lists, got {type(raw).__name__}", file=file)
    missing = [v for v in expected if v not in raw]
    if missing:
        raise DataError(f"no predictions for video(s) {missing} of this split", file=file, item=missing[0])
    extra = [v for v in raw if v not in expected]
    if extra:
        raise DataError(f"video(s) {extra} are not in this split", file=file, item=extra[0])
    return raw


def _check_list(raw: Any, n: int, file: Path, video_id: str, what: str) -> list:
    if not isinstance(raw, list):
        raise DataError(f"expected a list of {what}, got {type(raw).__name__}", file=file, item=video_id)
    if len(raw) != n:
        raise DataError(f"{len(raw)} {what} for {n} samples (entries are aligned by position with the samples)",
                        file=file, item=video_id)
    return raw


# --------------------------------------------------------------------------------------------------
# step recognition


def read_step_predictions(path: str | Path, recordings: Mapping[str, Recording],
                          samples: Mapping[str, Sequence[StepSample]]) -> StepPredictions:
    """Read and validate a step-recognition prediction file against the samples of a split."""
    file = Path(path)
    raw = _check_videos(load_json(file), list(samples), file)
    predictions, scores = {}, {}
    with_scores: bool | None = None  # decided by the first entry of the file
    for video_id, entries in raw.items():
        k1 = recordings[video_id].num_classes
        entries = _check_list(entries, len(samples[video_id]), file, video_id, "entries")
        pred = np.empty(len(entries), dtype=np.int64)
        score = np.empty((len(entries), k1), dtype=np.float64)
        for i, entry in enumerate(entries):
            where = f"{video_id} entry {i}"
            if not isinstance(entry, dict):
                raise DataError(f"expected an object, got {type(entry).__name__}", file=file, item=where)
            if "prediction" not in entry:
                raise DataError("missing key", file=file, item=where, field="prediction")
            p = entry["prediction"]
            if not _is_int(p):
                raise DataError(f"expected an integer class index, got {p!r}", file=file, item=where,
                                field="prediction")
            if not 0 <= p < k1:
                raise DataError(f"{p} outside 0..{k1 - 1} (this video has {k1} classes)", file=file, item=where,
                                field="prediction")
            pred[i] = p
            has_score = "score" in entry
            if with_scores is None:
                with_scores = has_score
            elif has_score != with_scores:
                raise DataError("score is present for some entries but not for others"
                                f" ({'missing here' if with_scores else 'present here, absent earlier'})",
                                file=file, item=where, field="score")
            if has_score:
                s = entry["score"]
                if not isinstance(s, list) or len(s) != k1:
                    got = f"{len(s)} values" if isinstance(s, list) else type(s).__name__
                    raise DataError(f"expected a list of {k1} numbers (K+1 for this video), got {got}", file=file,
                                    item=where, field="score")
                for c, x in enumerate(s):
                    if not _is_number(x):
                        raise DataError(f"value {c} is {x!r}, not a number", file=file, item=where, field="score")
                    if not math.isfinite(x):
                        raise DataError(f"value {c} is not finite: {x!r}", file=file, item=where, field="score")
                score[i] = s
        predictions[video_id] = pred
        scores[video_id] = score
    # the official sample order, not the file's
    predictions = {v: predictions[v] for v in samples}
    return StepPredictions(predictions, {v: scores[v] for v in samples} if with_scores else None)


def write_step_predictions(path: str | Path, predictions: Mapping[str, Sequence[int] | np.ndarray],
                           scores: Mapping[str, np.ndarray] | None = None) -> Path:
    """Write the official step-recognition file atomically (scores [n, K+1] per video, optional)."""
    if scores is not None and set(scores) != set(predictions):
        raise ValueError(f"scores and predictions cover different videos: {sorted(set(scores) ^ set(predictions))}")
    out = {}
    for video_id, pred in predictions.items():
        pred = np.asarray(pred)
        if pred.ndim != 1 or not np.issubdtype(pred.dtype, np.integer):
            raise ValueError(f"video {video_id}: predictions must be a 1-d integer array, got {pred.dtype} "
                             f"{pred.shape}")
        if scores is None:
            out[video_id] = [{"prediction": int(p)} for p in pred]
            continue
        score = np.asarray(scores[video_id], dtype=np.float64)
        if score.ndim != 2 or len(score) != len(pred):
            raise ValueError(f"video {video_id}: scores must have shape [{len(pred)}, K+1], got {score.shape}")
        if not np.isfinite(score).all():
            raise ValueError(f"video {video_id}: scores must be finite")
        out[video_id] = [{"prediction": int(p), "score": s} for p, s in zip(pred, score.tolist())]
    return write_json(path, out, indent=None)


# --------------------------------------------------------------------------------------------------
# video QA


def read_qa_predictions(path: str | Path, questions: Sequence[Question]) -> np.ndarray:
    """A list of option indices, one per question in file order."""
    file = Path(path)
    raw = load_json(file)
    if not isinstance(raw, list):
        raise DataError(f"expected a list of option indices, got {type(raw).__name__}", file=file)
    if len(raw) != len(questions):
        raise DataError(f"{len(raw)} predictions for {len(questions)} questions (aligned with the question file)",
                        file=file)
    for i, (p, q) in enumerate(zip(raw, questions)):
        where = f"{i} (question {q.question_id})"
        if not _is_int(p):
            raise DataError(f"expected an integer option index, got {p!r}", file=file, item=where)
        if not 0 <= p < len(q.options):
            raise DataError(f"{p} outside 0..{len(q.options) - 1}", file=file, item=where)
    return np.array(raw, dtype=np.int64)


def write_qa_predictions(path: str | Path, predictions: Sequence[int] | np.ndarray) -> Path:
    predictions = np.asarray(predictions)
    if predictions.ndim != 1 or not np.issubdtype(predictions.dtype, np.integer):
        raise ValueError(f"predictions must be a 1-d integer array, got {predictions.dtype} {predictions.shape}")
    return write_json(path, predictions.tolist(), indent=None)


# --------------------------------------------------------------------------------------------------
# intra-video retrieval


def read_retrieval_predictions(path: str | Path,
                               samples: Mapping[str, Sequence[RetrievalSample]]) -> dict[str, np.ndarray]:
    """`{video_id: [0 | 1, ...]}`: which candidate comes from the query's step, per sample."""
    file = Path(path)
    raw = _check_videos(load_json(file), list(samples), file)
    out = {}
    for video_id in samples:
        entries = _check_list(raw[video_id], len(samples[video_id]), file, video_id, "predictions")
        for i, p in enumerate(entries):
            if not _is_int(p) or p not in (0, 1):
                raise DataError(f"expected 0 or 1 (the candidate's index), got {p!r}", file=file,
                                item=f"{video_id} entry {i}")
        out[video_id] = np.array(entries, dtype=np.int64)
    return out


def write_retrieval_predictions(path: str | Path, predictions: Mapping[str, Sequence[int] | np.ndarray]) -> Path:
    out = {}
    for video_id, pred in predictions.items():
        pred = np.asarray(pred)
        if pred.ndim != 1 or not np.issubdtype(pred.dtype, np.integer) or not np.isin(pred, (0, 1)).all():
            raise ValueError(f"video {video_id}: predictions must be a 1-d array of 0/1")
        out[video_id] = pred.tolist()
    return write_json(path, out, indent=None)
