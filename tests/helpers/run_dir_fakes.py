"""Small fake run directories, as train.py and evaluate.py leave them (.hydra/, metrics.json, provenance.json), for
the tests of the tables (spacewalk.results.runs, seed_groups, report, the sweep summary) without running a job."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

STEP_DATA = "spacewalk.benchmarks.spacewalk18.open.open_spacewalk18"  # a run's data config's _target_
DEFAULT_CHOICES = {"model": "lfb_cat", "data": "synthetic", "task": "step_recognition", "decoding": "none",
                   "experiment": None, "encoder": "text_only"}


def interval(estimate: float, half: float, unit: str = "questions") -> dict:
    """A bootstrap interval dict of metrics.json (a number over flat units)."""
    return {"estimate": estimate, "low": estimate - half, "high": estimate + half, "level": 0.95, "unit": unit,
            "n": 6, "n_resamples": 1000, "seed": 0, "method": "percentile"}


RECORDINGS = ("v1", "v2", "v3")


def step_metrics(acc: float, mAP: float, iou: float, spread: float = 1.0, **extra) -> dict:
    """A step-recognition metrics.json as train.py writes it (version 2): the official numbers, three recordings'
    values (each number minus `spread`, the number, plus `spread`) and the intervals over them."""
    from spacewalk.results.layout import METRICS_VERSION
    from spacewalk.results.statistics import recording_interval

    numbers = {"Accuracy": acc, "mAP": mAP, "IoU": iou}
    per_video = {v: {name: x + (i - 1) * spread for name, x in numbers.items()} for i, v in enumerate(RECORDINGS)}
    units = {"Accuracy": "recordings, then samples within them", "mAP": "recordings, then samples within them",
             "IoU": "recordings"}
    return {"version": METRICS_VERSION, "split": "test", **numbers, "per_video": per_video, "tau": 0.5,
            "best_val_loss": 2.5, **extra,
            "intervals": {name: recording_interval([per_video[v][name] for v in RECORDINGS], 0.95, units[name],
                                                   estimate=x).as_dict() for name, x in numbers.items()}}


def cell(values, digits: int = 2) -> str:
    """`mean [low, high]` of one run, or `mean ± std [low, high]` of its seeds, from each seed's per-recording
    values (rows): the text a table prints, from spacewalk.results.statistics."""
    import statistics as stats

    import numpy as np

    from spacewalk.results.statistics import seeds_estimate

    values = np.atleast_2d(np.asarray(values, dtype=float))
    made = seeds_estimate(values, 0.95, bounds=(0.0, 100.0))
    means = values.mean(axis=1)
    std = f" ± {stats.stdev(means):.{digits}f}" if len(means) > 1 else ""
    return f"{means.mean():.{digits}f}{std} [{made.low:.{digits}f}, {made.high:.{digits}f}]"


def write_run(path: Path, overrides: list[str], metrics: dict | None, entry: str = "train",
              provenance: dict | None = None, config: dict | None = None, **choices) -> Path:
    """A run directory: `.hydra/` (overrides, hydra.yaml's job name and choices, config.yaml with context and
    seed from the overrides, Spacewalk-18's data and the task chosen, and `config`'s keys), metrics.json (None: a
    failed job), provenance.json when given."""
    values = dict(o.lstrip("+").split("=", 1) for o in overrides)
    chosen = {**DEFAULT_CHOICES, **{k: v for k, v in values.items() if k in DEFAULT_CHOICES}, **choices}
    config = {"seed": int(values.get("seed", 0)), "context": values.get("context", "5min"),
              "ckpt_path": values.get("ckpt_path"), "model": {"_target_": "models.Fake"},
              "data": {"_target_": STEP_DATA}, "task": {"name": chosen["task"]}, **(config or {})}
    hydra = {"hydra": {"job": {"name": entry}, "runtime": {"cwd": str(path.parent), "choices": chosen}}}
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (path / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(hydra))
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    if metrics is not None:
        (path / "metrics.json").write_text(json.dumps(metrics))
    if provenance is not None:
        (path / "provenance.json").write_text(json.dumps(provenance))
    return path


class Noisy:
    """A step-recognition baseline (fit/score) for real runs on synthetic data: the label's column raised by
    `skill`, plus seeded noise."""

    def __init__(self, skill: float, seed: int):
        self.skill, self.seed = skill, seed

    def fit(self, dataset, split):
        pass

    def score(self, recording, samples):
        import numpy as np

        rng = np.random.default_rng([self.seed, int(recording.video_id)])
        scores = rng.normal(size=(len(samples), recording.num_classes))
        scores[np.arange(len(samples)), [s.label for s in samples]] += self.skill
        return scores
