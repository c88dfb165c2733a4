"""Small fake run directories, as train.py and evaluate.py leave them (.hydra/, metrics.json, provenance.json), for
the tests of the tables (spacewalk.results.runs, seed_groups, report, the sweep summary) without running a job."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

DEFAULT_CHOICES = {"model": "lfb_cat", "data": "synthetic", "task": "step_recognition", "decoding": "none",
                   "experiment": None, "encoder": "text_only"}


def interval(estimate: float, half: float, unit: str = "recordings, then samples within them") -> dict:
    return {"estimate": estimate, "low": estimate - half, "high": estimate + half, "level": 0.95, "unit": unit,
            "n": 6, "n_resamples": 1000, "seed": 0, "method": "percentile"}


def step_metrics(acc: float, mAP: float, iou: float, half: float = 2.0, **extra) -> dict:
    """A step-recognition metrics.json: the official numbers, the intervals beside them."""
    return {"split": "test", "Accuracy": acc, "mAP": mAP, "IoU": iou, "per_video": {"v1": {"Accuracy": acc}},
            "tau": 0.5, "best_val_loss": 2.5, **extra,
            "intervals": {"Accuracy": interval(acc, half), "mAP": interval(mAP, half),
                          "IoU": interval(iou, half / 2, "recordings")}}


def write_run(path: Path, overrides: list[str], metrics: dict | None, entry: str = "train",
              provenance: dict | None = None, config: dict | None = None, **choices) -> Path:
    """A run directory: `.hydra/` (overrides, hydra.yaml's job name and choices, config.yaml with context and
    seed from the overrides, and `config`'s keys), metrics.json (None: a failed job), provenance.json when given."""
    values = dict(o.lstrip("+").split("=", 1) for o in overrides)
    chosen = {**DEFAULT_CHOICES, **{k: v for k, v in values.items() if k in DEFAULT_CHOICES}, **choices}
    config = {"seed": int(values.get("seed", 0)), "context": values.get("context", "5min"),
              "ckpt_path": values.get("ckpt_path"), "model": {"_target_": "models.Fake"}, **(config or {})}
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
