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

from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
from spacewalk.benchmarks.spacewalk18.headlines import STEP_RECOGNITION
from spacewalk.benchmarks.spacewalk18.intervals import step_recognition_intervals
from spacewalk.benchmarks.spacewalk18.pictures.timeline import plot_timeline
from spacewalk.benchmarks.spacewalk18.scoring.official import step_recognition_metrics
from spacewalk.benchmarks.spacewalk18.scoring.predictions import write_step_predictions
from spacewalk.core.errors import ConfigError
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.results.layout import PREDICTIONS, write_metrics

log = logging.getLogger(__name__)


def format_table(metrics: dict) -> str:
    """The end-of-run table: each headline number (headlines.STEP_RECOGNITION) per recording, their mean, and the
    interval of metrics.json's "intervals"."""
    names = [h.name for h in STEP_RECOGNITION]

    def cell(value):
        return "-" if value is None else f"{value:.2f}"

    def row(label: str, cells: list[str]) -> str:
        return f"{label:<10} " + " ".join(f"{c:>{max(9, len(n) + 2)}}" for c, n in zip(cells, names, strict=True))

    rows = [row("video", names)]
    for video_id, m in metrics["per_video"].items():
        rows.append(row(video_id, [cell(m.get(n)) for n in names]))
    rows.append(row("mean", [cell(metrics.get(n)) for n in names]))
    intervals = metrics.get("intervals")
    if intervals:
        def bounds(name):
            i = intervals.get(name)
            return "-" if i is None or i["low"] is None else f"{i['low']:.2f}-{i['high']:.2f}"

        first = next(iter(intervals.values()))
        rows.append(row(f"{first['level']:.0%} CI", [bounds(n) for n in names])
                    + f"   (Student's t over the {first['n']} recordings: metrics.json \"intervals\")")
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

    write_step_predictions(out_dir / PREDICTIONS, predictions, scores)
    metrics = step_recognition_metrics(recordings, samples, predictions, scores)
    if bootstrap is not None:
        metrics["intervals"] = step_recognition_intervals(metrics, bootstrap)
    write_metrics(out_dir, {"split": split, "model": type(model).__name__, **metrics})
    if plots:
        for v in tqdm(samples, desc="timelines", unit="video", leave=False):
            plot_timeline(recordings[v], samples[v], predictions[v], out_dir / "timelines" / f"{v}.png")
    table = format_table(metrics)
    log.info("%s on %s (%s):\n%s\noutputs: %s", type(model).__name__, split, dataset.root, table, out_dir)
    return metrics
