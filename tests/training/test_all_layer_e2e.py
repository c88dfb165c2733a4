"""train.py model=all_layer end to end on a small synthetic set: a tiny random video backbone learns, two DDP
processes give one process's numbers, a run resumed mid-epoch ends where the straight run ends, and a smoke run
with limited batches ends cleanly (the other towers: test_all_layer_towers_e2e.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers.commands import run_command
from helpers.end_to_end import metrics, official_scores
from helpers.synthetic_presets import ALL_LAYER

pytestmark = pytest.mark.slow

VIDEO = ["model=all_layer", "modalities=video", "encoder=tiny_clip", "context=1min", "trainer.max_epochs=2",
         "model.video_lr=3e-3", "datamodule.num_frames=4", "logger=csv", "plots=false",
         # every optimiser step's checkpoint kept, to resume from one mid-epoch
         "callbacks.step_checkpoint.every_n_train_steps=5", "callbacks.step_checkpoint.save_top_k=-1"]


@pytest.fixture
def all_layer_data(spacewalk18_run_data) -> list[str]:
    """The ALL_LAYER set (three training recordings of 100 samples: 19 global batches of 16 an epoch, steps enough
    that chance is low) as data overrides, for train.py and evaluate.py alike."""
    return spacewalk18_run_data(ALL_LAYER)


def run_data(data: list[str], script: str, *overrides: str):
    """`script` with `data` on the command line, evaluate.py included (model=random has no checkpoint to read)."""
    return run_command(script, *data, *overrides)


@pytest.fixture(scope="module")
def straight(tmp_path_factory, spacewalk18_run_data):
    tmp = tmp_path_factory.mktemp("all_layer")
    run_dir = tmp / "straight"
    run_data(spacewalk18_run_data(ALL_LAYER), "train.py", *VIDEO, f"hydra.run.dir={run_dir}")
    return tmp, run_dir


def test_a_tiny_random_video_backbone_learns(straight, all_layer_data, synthetic_spacewalk18):
    tmp, run_dir = straight
    m = metrics(run_dir)
    assert m["model"] == "TrainableTowers" and (run_dir / "predictions.json").is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file() and (run_dir / "config.resolved.yaml").is_file()
    official = official_scores(synthetic_spacewalk18(**ALL_LAYER), "test", run_dir / "predictions.json")
    assert {k: m[k] for k in ("Accuracy", "mAP", "IoU")} == {k: official[k] for k in ("Accuracy", "mAP", "IoU")}
    random_dir = tmp / "random"
    run_data(all_layer_data, "evaluate.py", "model=random", "plots=false", f"hydra.run.dir={random_dir}")
    chance = metrics(random_dir)
    assert m["Accuracy"] > chance["Accuracy"] + 10 and m["mAP"] > chance["mAP"] + 10, (m, chance)


def test_resumed_mid_epoch_ends_where_the_straight_run_ends(straight, all_layer_data):
    tmp, run_dir = straight
    mid = run_dir / "checkpoints" / "epoch=0-step=10.ckpt"  # the middle of epoch 0 (19 steps)
    assert mid.is_file(), sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    copy = tmp / "mid.ckpt"  # a path Hydra parses, outside the run Lightning may tidy
    shutil.copy(mid, copy)
    resumed_dir = tmp / "resumed"
    out = run_data(all_layer_data, "train.py", *VIDEO, f"ckpt_path={copy}", f"hydra.run.dir={resumed_dir}")
    assert "checkpoint from epoch 0 after 10 batches" in out.stdout + out.stderr
    a, b = metrics(run_dir), metrics(resumed_dir)
    assert b["best_val_loss"] == pytest.approx(a["best_val_loss"], rel=1e-5)
    for name in ("Accuracy", "mAP", "IoU"):
        assert b[name] == pytest.approx(a[name], abs=1e-6)


def test_two_process_ddp_equals_one_process(straight, all_layer_data):
    tmp, run_dir = straight
    two = tmp / "two"
    # no loader workers in the two processes: a worker forked by a CPU DDP process can hang at start
    # (docs/all_layer.md, known limits); the one-process run keeps its two, so the numbers also show that the
    # workers decode what the process itself decodes
    run_data(all_layer_data, "train.py", *VIDEO, "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
             "datamodule.num_workers=0", f"hydra.run.dir={two}")
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


def test_a_smoke_run_with_limited_batches_ends_cleanly(straight, all_layer_data):
    # the README's smoke test: 2 validation batches of 64 see no recording of 100 samples whole. The checkpoint
    # callback still finds val/loss (over every sample seen); the test, with no video whole, is not scored.
    tmp, _ = straight
    run_dir = tmp / "limited"
    result = run_data(all_layer_data, "train.py", "model=all_layer", "context=1min", "datamodule.num_frames=4",
                      "logger=csv", "plots=false", "+trainer.limit_train_batches=3", "+trainer.limit_val_batches=1",
                      "+trainer.limit_test_batches=1", f"hydra.run.dir={run_dir}")
    assert "the test was not scored" in result.stderr + result.stdout
    assert not (run_dir / "metrics.json").exists()
    log = (run_dir / "train.log").read_text()
    assert "best checkpoint (val/loss" in log and "val/loss None" not in log
    assert list((run_dir / "checkpoints").glob("epoch*.ckpt"))
