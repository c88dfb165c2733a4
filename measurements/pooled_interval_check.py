"""Checks the sweep summary's pooled interval (spacewalk/results/seed_groups.py) against the exact bootstrap of the
seeds' mean, on step-recognition runs that differ only in their seed (no assertions: numbers to read).

    python measurements/pooled_interval_check.py --root R RUN_DIR RUN_DIR [RUN_DIR...]

The pooled interval is the mean of the seeds' bootstrap bounds. The exact one draws the same two-stage resamples
(recordings, then samples within them; metrics.bootstrap's defaults, as every run does), computes each seed's
Accuracy and mAP on every resample from its predictions.json, averages over the seeds per resample and takes the
percentiles. Printed: each seed's interval (recomputed, and as its metrics.json records it), the mean of the bounds,
the exact pooled interval, and the correlation of the seeds' resampled values (1: they move together, where the
two intervals are equal).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.spacewalk18.dataset import Spacewalk18
from spacewalk.benchmarks.spacewalk18.predictions import read_step_predictions
from spacewalk.benchmarks.spacewalk18.scoring import resampled_accuracies, resampled_mean_average_precisions
from spacewalk.results.bootstrap import BootstrapOptions, grouped_draws, grouped_replicates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="the Spacewalk-18 release the runs were scored on")
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (predictions.json, metrics.json)")
    args = parser.parse_args()
    dataset = Spacewalk18(args.root)
    samples = dataset.step_samples("test")
    options = BootstrapOptions()
    read = [read_step_predictions(run / "predictions.json", dataset.recordings, samples) for run in args.runs]
    videos = list(read[0].predictions)
    labels = {v: np.array([s.label for s in samples[v]], dtype=np.int64) for v in videos}
    draws = grouped_draws([len(labels[v]) for v in videos], options)
    alpha = (1 - options.level) / 2
    for name in ("Accuracy", "mAP"):
        replicates = []
        for run in read:
            def metric(v, counts, run=run, name=name):
                if name == "Accuracy":
                    return resampled_accuracies(np.asarray(run.predictions[v]), labels[v], counts)
                return resampled_mean_average_precisions(run.scores[v], labels[v],
                                                         range(1, dataset.recordings[v].num_classes), counts)

            replicates.append(grouped_replicates(videos, metric, draws) * 100)
        replicates = np.array(replicates)
        per_seed = np.array([np.quantile(r, [alpha, 1 - alpha]) for r in replicates])
        recorded = [json.loads((run / "metrics.json").read_text())["intervals"][name] for run in args.runs]
        recorded = [f"{i['low']:.2f}-{i['high']:.2f}" for i in recorded]
        exact = np.quantile(replicates.mean(axis=0), [alpha, 1 - alpha])
        print(f"{name}: per seed {[f'{lo:.2f}-{hi:.2f}' for lo, hi in per_seed]} (metrics.json: "
              f"{recorded}); mean of the bounds "
              f"{per_seed[:, 0].mean():.2f}-{per_seed[:, 1].mean():.2f}; exact pooled "
              f"{exact[0]:.2f}-{exact[1]:.2f}; "
              f"correlation of the seeds' resamples with the first "
              f"{[round(float(c), 3) for c in np.corrcoef(replicates)[0, 1:]]}")


if __name__ == "__main__":
    main()
