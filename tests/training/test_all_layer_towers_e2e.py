"""train.py model=all_layer end to end with the other towers, on a tiny set (TOWERS: 2 x 60 training samples): the
trainable text tower (MiniLM) under no LFB head and under LFB Cat, a clip-model video tower
(VideoMAE) and the 1 fps cells under LFB Avg; each run's numbers are the official scorer's. Each run trains on two
batches (LIMIT): what these tests check is that the towers train, predict and score end to end, not what they
learn (test_all_layer_e2e.py has a backbone that learns). (A module of its own, beside test_all_layer_e2e.py, so
that the two run in parallel under `make test`.)"""

from __future__ import annotations

import pytest

from helpers.end_to_end import metrics, official_scores, run
from helpers.synthetic_presets import TOWERS

pytestmark = pytest.mark.slow

LIMIT = "+trainer.limit_train_batches=2"


@pytest.fixture
def train_data(spacewalk18_run_data) -> list[str]:
    """TOWERS as data overrides, one root and data folder (its banks) for the module's runs."""
    return spacewalk18_run_data(TOWERS)


@pytest.mark.parametrize("lfb", ["null", "cat"])
def test_the_trainable_text_tower_runs_end_to_end(tmp_path, lfb, train_data, synthetic_spacewalk18):
    run_dir = tmp_path / "text"
    run("train.py", train_data, "model=all_layer", "modalities=text", "context=1min", f"model.head.lfb={lfb}",
        "logger=csv", "plots=false", LIMIT, f"hydra.run.dir={run_dir}")
    m = metrics(run_dir)
    assert m["model"] == "TrainableTowers" and m["best_val_loss"] is not None
    config = (run_dir / "config.resolved.yaml").read_text()
    assert f"text_cells: {lfb}" in config
    official = official_scores(synthetic_spacewalk18(**TOWERS), "test", run_dir / "predictions.json")
    assert {k: m[k] for k in ("Accuracy", "mAP", "IoU")} == {k: official[k] for k in ("Accuracy", "mAP", "IoU")}


@pytest.mark.parametrize("overrides", [("encoder=tiny_videomae",),
                                       ("encoder=tiny_clip", "datamodule.frames=cells", "model.head.lfb=avg")],
                         ids=["videomae", "cells_lfb_avg"])
def test_the_other_video_towers_run_end_to_end(tmp_path, overrides, train_data, synthetic_spacewalk18):
    # a clip-model tower (VideoMAE: against the animations' VideoMAE features) and the 1 fps cells under LFB Avg,
    # through train.py on the tiny set
    run_dir = tmp_path / "run"
    run("train.py", train_data, "model=all_layer", "modalities=video", "context=1min", *overrides, "logger=csv",
        "plots=false", LIMIT, f"hydra.run.dir={run_dir}")
    m = metrics(run_dir)
    assert m["model"] == "TrainableTowers" and m["best_val_loss"] is not None
    official = official_scores(synthetic_spacewalk18(**TOWERS), "test", run_dir / "predictions.json")
    assert {k: m[k] for k in ("Accuracy", "mAP", "IoU")} == {k: official[k] for k in ("Accuracy", "mAP", "IoU")}
