"""train.py model=all_layer end to end on a small synthetic set: a tiny random video backbone learns, two DDP
processes give one process's numbers, a run resumed mid-epoch ends where the straight run ends, and the
trainable text tower (MiniLM) runs."""

from __future__ import annotations

import json
import shutil

import pytest
from test_train_e2e import metrics, official_scores, run

from conftest import run_command

pytestmark = pytest.mark.slow

# three train recordings of 100 samples (19 global batches of 16 per epoch), steps enough that chance is low
DATA = ["+data.synthetic.n_train=3", "+data.synthetic.n_val=1", "+data.synthetic.n_test=1",
        "+data.synthetic.minutes=[6,8]", "+data.synthetic.steps_per_video=[6,8]",
        "+data.synthetic.samples_per_video=100", "+data.synthetic.retrieval_samples_per_video=20",
        "+data.synthetic.questions_per_video=2"]
VIDEO = ["model=all_layer", "modalities=video", "encoder=tiny_clip", "context=1min", "trainer.max_epochs=2",
         "model.video_lr=3e-3", "datamodule.num_frames=4", "logger=csv", "plots=false",
         # every optimiser step's checkpoint kept, to resume from one mid-epoch
         "callbacks.step_checkpoint.every_n_train_steps=5", "callbacks.step_checkpoint.save_top_k=-1"]


def run_data(tmp_path, script, *overrides):
    """test_train_e2e.run with this file's data (larger than its tiny set) on train.py and evaluate.py."""
    data = [f"data.synthetic_root={tmp_path / 'synthetic'}", f"paths.data_dir={tmp_path / 'data'}", *DATA]
    return run_command(script, *data, *overrides)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("all_layer")
    run_dir = tmp / "straight"
    run_data(tmp, "train.py", *VIDEO, f"hydra.run.dir={run_dir}")
    return tmp, run_dir


def test_a_tiny_random_video_backbone_learns(straight):
    tmp, run_dir = straight
    m = metrics(run_dir)
    assert m["model"] == "TrainableTowers" and (run_dir / "predictions.json").is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file() and (run_dir / "config.resolved.yaml").is_file()
    official = official_scores(tmp / "synthetic", "test", run_dir / "predictions.json")
    assert {k: m[k] for k in ("Accuracy", "mAP", "IoU")} == {k: official[k] for k in ("Accuracy", "mAP", "IoU")}
    random_dir = tmp / "random"
    run_data(tmp, "evaluate.py", "model=random", "plots=false", f"hydra.run.dir={random_dir}")
    chance = metrics(random_dir)
    assert m["Accuracy"] > chance["Accuracy"] + 10 and m["mAP"] > chance["mAP"] + 10, (m, chance)


def test_resumed_mid_epoch_ends_where_the_straight_run_ends(straight):
    tmp, run_dir = straight
    mid = run_dir / "checkpoints" / "epoch=0-step=10.ckpt"  # the middle of epoch 0 (19 steps)
    assert mid.is_file(), sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    copy = tmp / "mid.ckpt"  # a path Hydra parses, outside the run Lightning may tidy
    shutil.copy(mid, copy)
    resumed_dir = tmp / "resumed"
    out = run_data(tmp, "train.py", *VIDEO, f"ckpt_path={copy}", f"hydra.run.dir={resumed_dir}")
    assert "checkpoint from epoch 0 after 10 batches" in out.stdout + out.stderr
    a, b = metrics(run_dir), metrics(resumed_dir)
    assert b["best_val_loss"] == pytest.approx(a["best_val_loss"], rel=1e-5)
    for name in ("Accuracy", "mAP", "IoU"):
        assert b[name] == pytest.approx(a[name], abs=1e-6)


def test_two_process_ddp_equals_one_process(straight):
    tmp, run_dir = straight
    two = tmp / "two"
    run_data(tmp, "train.py", *VIDEO, "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
             f"hydra.run.dir={two}")
    a, b = metrics(run_dir), metrics(two)
    assert b["best_val_loss"] == pytest.approx(a["best_val_loss"], rel=1e-4)
    # a sample's worth, as the 1 % below: one of the test recording's 100 samples predicted otherwise moves
    # Accuracy by 1 and IoU by 0.94 (measured; gradients summed in another order move the scores by 8e-6, and the
    # closest call is 3e-3 from its runner-up)
    for name in ("Accuracy", "mAP", "IoU"):
        assert b[name] == pytest.approx(a[name], abs=1.0)
    pa, pb = (json.loads((d / "predictions.json").read_text()) for d in (run_dir, two))
    same = sum(x["prediction"] == y["prediction"] for v in pa for x, y in zip(pa[v], pb[v]))
    assert same >= 0.99 * sum(len(pa[v]) for v in pa)


@pytest.mark.parametrize("lfb", ["null", "cat"])
def test_the_trainable_text_tower_runs_end_to_end(tmp_path, lfb):
    run_dir = tmp_path / "text"
    run("train.py", tmp_path, "model=all_layer", "modalities=text", "context=1min", f"model.head.lfb={lfb}",
        "logger=csv", "plots=false", f"hydra.run.dir={run_dir}")  # test_train_e2e's tiny data: 2 x 200 samples
    m = metrics(run_dir)
    assert m["model"] == "TrainableTowers" and m["best_val_loss"] is not None
    config = (run_dir / "config.resolved.yaml").read_text()
    assert f"text_cells: {lfb}" in config
    official = official_scores(tmp_path / "synthetic", "test", run_dir / "predictions.json")
    assert {k: m[k] for k in ("Accuracy", "mAP", "IoU")} == {k: official[k] for k in ("Accuracy", "mAP", "IoU")}


@pytest.mark.parametrize("overrides", [("encoder=tiny_videomae",),
                                       ("encoder=tiny_clip", "datamodule.frames=cells", "model.head.lfb=avg")],
                         ids=["videomae", "cells_lfb_avg"])
def test_the_other_video_towers_run_end_to_end(tmp_path, overrides):
    # a clip-model tower (VideoMAE: against the animations' VideoMAE features) and the 1 fps cells under LFB Avg,
    # through train.py on test_train_e2e's tiny data
    run_dir = tmp_path / "run"
    run("train.py", tmp_path, "model=all_layer", "modalities=video", "context=1min", *overrides, "logger=csv",
        "plots=false", f"hydra.run.dir={run_dir}")
    m = metrics(run_dir)
    assert m["model"] == "TrainableTowers" and m["best_val_loss"] is not None
    official = official_scores(tmp_path / "synthetic", "test", run_dir / "predictions.json")
    assert {k: m[k] for k in ("Accuracy", "mAP", "IoU")} == {k: official[k] for k in ("Accuracy", "mAP", "IoU")}


def test_a_smoke_run_with_limited_batches_ends_cleanly(straight):
    # the README's smoke test: 2 validation batches of 64 see no recording of 100 samples whole. The checkpoint
    # callback still finds val/loss (over every sample seen); the test, with no video whole, is not scored.
    tmp, _ = straight
    run_dir = tmp / "limited"
    result = run_data(tmp, "train.py", "model=all_layer", "context=1min", "datamodule.num_frames=4", "logger=csv",
                      "plots=false", "+trainer.limit_train_batches=3", "+trainer.limit_val_batches=1",
                      "+trainer.limit_test_batches=1", f"hydra.run.dir={run_dir}")
    assert "the test was not scored" in result.stderr + result.stdout
    assert not (run_dir / "metrics.json").exists()
    log = (run_dir / "train.log").read_text()
    assert "best checkpoint (val/loss" in log and "val/loss None" not in log
    assert list((run_dir / "checkpoints").glob("epoch*.ckpt"))
