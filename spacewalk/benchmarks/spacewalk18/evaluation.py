"""Score a step-recognition model on one split and write the run's artefacts.

The model is anything with `fit(dataset, split)` and `score(recording, samples) -> [n, K+1]`; the
prediction is the argmax of the scores. Writes into `out_dir`: predictions.json (official format),
metrics.json (official metrics in percent, overall and per video) and timelines/<video>.png.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from tqdm import tqdm

from spacewalk.benchmarks.spacewalk18.dataset import Spacewalk18
from spacewalk.benchmarks.spacewalk18.intervals import step_recognition_intervals
from spacewalk.benchmarks.spacewalk18.predictions import write_step_predictions
from spacewalk.benchmarks.spacewalk18.scoring import step_recognition_metrics
from spacewalk.benchmarks.spacewalk18.timeline import plot_timeline
from spacewalk.core.errors import ConfigError
from spacewalk.core.io import write_json
from spacewalk.results.bootstrap import BootstrapOptions

log = logging.getLogger(__name__)


def format_table(metrics: dict) -> str:
    def cell(value):
        return "-" if value is None else f"{value:.2f}"

    rows = [f"{'video':<10} {'Accuracy':>9} {'mAP':>7} {'IoU':>7}"]
    for video_id, m in metrics["per_video"].items():
        rows.append(f"{video_id:<10} {cell(m['Accuracy']):>9} {cell(m['mAP']):>7} {cell(m['IoU']):>7}")
    rows.append(f"{'mean':<10} {cell(metrics['Accuracy']):>9} {cell(metrics['mAP']):>7} {cell(metrics['IoU']):>7}")
    intervals = metrics.get("intervals")
    if intervals:
        def bounds(name):
            i = intervals.get(name)
            return "-" if i is None or i["low"] is None else f"{i['low']:.2f}-{i['high']:.2f}"

        level = next(iter(intervals.values()))["level"]
        rows.append(f"{f'{level:.0%} CI':<10} {bounds('Accuracy'):>9} {bounds('mAP'):>7} {bounds('IoU'):>7}"
                    "   (bootstrap over recordings, then samples; IoU over recordings: metrics.json \"intervals\")")
    return "\n".join(rows)


def evaluate_step_recognition(dataset: Spacewalk18, model, split: str, out_dir: str | Path,
                              fit_split: str = "train", plots: bool = True,
                              bootstrap: BootstrapOptions | None = None) -> dict:
    """`bootstrap`: the intervals beside the metrics (spacewalk/benchmarks/spacewalk18/intervals.py), None for none."""
    if fit_split == split:
        raise ConfigError(f"fit_split and split are both {split!r}: a model never takes statistics from the "
                          "split it is scored on")
    out_dir = Path(out_dir)
    model.fit(dataset, fit_split)
    samples = dataset.step_samples(split)
    recordings = {v: dataset.recordings[v] for v in samples}
    scores = {v: np.asarray(model.score(recordings[v], samples[v]), dtype=np.float64) for v in samples}
    predictions = {v: s.argmax(axis=1) for v, s in scores.items()}

    write_step_predictions(out_dir / "predictions.json", predictions, scores)
    metrics = step_recognition_metrics(recordings, samples, predictions, scores)
    if bootstrap is not None:
        metrics["intervals"] = step_recognition_intervals(recordings, samples, predictions, scores, metrics,
                                                          bootstrap)
    write_json(out_dir / "metrics.json", {"split": split, "model": type(model).__name__, **metrics})
    if plots:
        for v in tqdm(samples, desc="timelines", unit="video", leave=False):
            plot_timeline(recordings[v], samples[v], predictions[v], out_dir / "timelines" / f"{v}.png")
    table = format_table(metrics)
    log.info("%s on %s (%s):\n%s\noutputs: %s", type(model).__name__, split, dataset.root, table, out_dir)
    return metrics
