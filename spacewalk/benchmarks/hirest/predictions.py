"""HiREST predictions in the official formats (docs/hirest.md, Official scoring rules), collected batch by batch and
written:

    predictions_moment_retrieval.json    {query: {video: {"bounds": [s, e]}}}
    predictions_moment_segmentation.json {video: {"bounds": [[s, e], ...]}}
    predictions_step_captioning.json     {video: {"captions": [{"sentence": ...}, ...], "bounds": [[s, e], ...]}}

While collecting, `outputs` is {task: {...}} with captions as {video: {step index: (sentence, [s, e])}}, so
that parts from several batches or processes merge (`merge`) before `official` orders them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from spacewalk.benchmarks.hirest.joint_model_io import PREDICTION_FILES, TASKS
from spacewalk.core.io import write_json


def empty() -> dict[str, dict]:
    return {task: {} for task in TASKS}


def merge(into: dict, other: Mapping) -> dict:
    """`other` added to `into`, nested dicts merged; a key `into` has keeps its value (the first one wins)."""
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into.setdefault(key, value)
    return into


def record_moments(out: dict, queries: Sequence[str], videos: Sequence[str],
                   moments: Sequence[tuple[float, float]]) -> None:
    for query, video, (s, e) in zip(queries, videos, moments):
        out["moment_retrieval"].setdefault(query, {})[video] = {"bounds": [float(s), float(e)]}


def record_steps(out: dict, videos: Sequence[str], steps: Sequence[Sequence[tuple[float, float]]]) -> None:
    for video, segs in zip(videos, steps):
        out["moment_segmentation"][video] = {"bounds": [[float(s), float(e)] for s, e in segs]}


def record_captions(out: dict, videos, indices, bounds, sentences) -> None:
    for video, index, (s, e), sentence in zip(videos, indices, bounds, sentences):
        out["step_captioning"].setdefault(video, {})[int(index)] = (sentence, [float(s), float(e)])


def official(outputs: Mapping[str, dict]) -> dict[str, dict]:
    """The collected outputs in the official formats, sorted (queries, videos; captions in step order)."""
    captions = {video: {"captions": [{"sentence": steps[i][0]} for i in sorted(steps)],
                        "bounds": [steps[i][1] for i in sorted(steps)]}
                for video, steps in sorted(outputs["step_captioning"].items())}
    return {
        "moment_retrieval": {q: dict(sorted(v.items())) for q, v in sorted(outputs["moment_retrieval"].items())},
        "moment_segmentation": dict(sorted(outputs["moment_segmentation"].items())),
        "step_captioning": captions,
    }


def write_task_predictions(out_dir: str | Path, task: str, predictions: Mapping) -> Path:
    """One task's official prediction file (`PREDICTION_FILES`), written atomically: the one writer of these
    files, for the joint model and the task-specific baselines."""
    if task not in PREDICTION_FILES:
        raise ValueError(f"unknown HiREST task {task!r}; one of {TASKS}")
    return write_json(Path(out_dir) / PREDICTION_FILES[task], predictions)


def write_predictions(out_dir: str | Path, predictions: Mapping[str, dict]) -> dict[str, Path]:
    """The official prediction files of the tasks that have predictions, written atomically."""
    return {task: write_task_predictions(out_dir, task, predictions[task]) for task in TASKS if predictions.get(task)}
