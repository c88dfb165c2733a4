"""The paper's task-specific HiREST baselines on one split (`python evaluate.py data=hirest
model=hirest_heuristics [split=val]`), official-format prediction files, official scoring.

Writes into the run directory, per task: `predictions_<task>.json` (the format the authors' evaluate.py
reads) and `metrics.json` ({task: metrics}). Each task is scored against the file the official scoring
reads for that split: the split file for video and moment retrieval, the formatted step GT for
segmentation (so moment retrieval has no test scores: the public test split hides its moments).
Segmentation is given the GT moment, as in the official per-task evaluation.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.hirest.dataset import CATEGORIES_FILE, MOMENT_GT_FILES, SPLIT_FILE, HiREST
from spacewalk.benchmarks.hirest.predictions import write_task_predictions
from spacewalk.core.errors import ConfigError
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.results.layout import write_metrics

log = logging.getLogger(__name__)

TASKS = ("video_retrieval", "moment_retrieval", "moment_segmentation")


def gt_file(dataset: HiREST, task: str, split: str) -> Path:
    """The ground-truth file the official scoring reads for `task` on `split`."""
    if task in ("moment_segmentation", "step_captioning"):
        return dataset.path(MOMENT_GT_FILES[split])
    return dataset.path(SPLIT_FILE.format(split=split))


def score(dataset: HiREST, task: str, split: str, predictions: Path,
          bootstrap: BootstrapOptions | None = None, caption_scorer=None) -> dict[str, Any]:
    """The official scores of one task's prediction file; `bootstrap`: with the intervals of the overall numbers
    over the task's queries (video and moment retrieval, segmentation; captioning's corpus metrics have none);
    `caption_scorer`: a captioning_metrics.CaptionScorer to reuse for step captioning (its METEOR process)."""
    from spacewalk.benchmarks.hirest import scoring

    scorer = getattr(scoring, f"score_{task}")
    extra = {"bootstrap": bootstrap} if bootstrap is not None and task in TASKS else {}
    if task == "step_captioning" and caption_scorer is not None:
        extra["scorer"] = caption_scorer
    return scorer(predictions, gt_file(dataset, task, split), dataset.path(CATEGORIES_FILE), **extra)


def baseline_predictions(dataset: HiREST, split: str, task: str, baseline, features, videos_dir: Path) -> dict:
    if task == "video_retrieval":
        return baseline.predict(features, list(dataset.split(split)), dataset.candidates(split))
    if task == "moment_retrieval":
        if split == "test":
            raise ConfigError("moment retrieval has no public test GT (the test split is masked): use split=val")
        pairs = [(a.query, a.video) for a in dataset.annotations(split) if a.clip]
        return baseline.predict(features, pairs)
    if task == "moment_segmentation":
        moments = {a.video: a.moment for a in dataset.step_annotations(split)}
        return baseline.predict(videos_dir, moments)
    raise ConfigError(f"unknown HiREST task {task!r}; choose from {', '.join(TASKS)}")


def evaluate_hirest_baselines(dataset: HiREST, baselines: dict[str, Any], split: str, out_dir: str | Path,
                              features=None, videos_dir: str | Path | None = None,
                              bootstrap: BootstrapOptions | None = None) -> dict[str, Any]:
    """baselines: task -> baseline object (models/hirest_baselines.py); a task set to None is left out."""
    out_dir = Path(out_dir)
    videos_dir = Path(videos_dir) if videos_dir else dataset.path("data/videos")
    results = {}
    for task, baseline in baselines.items():
        if baseline is None:
            continue
        log.info("%s on %s: %s", task, split, baseline)
        predictions = baseline_predictions(dataset, split, task, baseline, features, videos_dir)
        path = write_task_predictions(out_dir, task, predictions)
        results[task] = score(dataset, task, split, path, bootstrap)
        log.info("%s (%s, all categories): %s", task, split, overall_summary(results[task]))
    write_metrics(out_dir, {"split": split, **results})
    log.info("outputs: %s", out_dir)
    return results


def overall_summary(metrics: dict) -> str:
    """The overall numbers on one line: `recall@0.5 83.33, ...` (nested {metric: {threshold: value}})."""
    parts = []
    for name, value in metrics["all"].items():
        if isinstance(value, dict):
            parts += [f"{name}@{k} {v:.2f}" for k, v in value.items() if isinstance(v, (int, float))]
        elif isinstance(value, (int, float)) and name != "total":
            parts.append(f"{name} {value:.2f}")
    intervals = {k: i for k, i in (metrics.get("intervals") or {}).items() if i["low"] is not None}
    if intervals:
        level = next(iter(intervals.values()))["level"]
        parts.append(f"{level:.0%} CI over {next(iter(intervals.values()))['unit']}: " + ", ".join(
            f"{k} {i['low']:.2f}-{i['high']:.2f}" for k, i in intervals.items()))
    return ", ".join(parts)
