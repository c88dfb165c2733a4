"""train.py on two CPU processes (trainer=ddp) against one process, on test_train_e2e's tiny synthetic set with the
real MiniLM text encoder (offline): the same decisions, per-recording numbers, tau and predictions. (A module of its
own, beside test_train_e2e.py, so that the two run in parallel under `make test`.)"""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers.end_to_end import metrics, run
from helpers.synthetic_presets import TRAIN

pytestmark = pytest.mark.slow


@pytest.fixture
def data(spacewalk18_run_data) -> list[str]:
    """train.py's data overrides: the TRAIN set, with the banks its runs share."""
    return spacewalk18_run_data(TRAIN)


@pytest.mark.parametrize("recipe", [["model=zero_shot"], ["model=lfb_cat", "context=1min", "trainer.max_epochs=3",
                                                            "datamodule.batch_size=64"]], ids=["zero_shot", "lfb_cat"])
def test_two_process_ddp_equals_one_process(tmp_path, recipe, data):
    # lfb_cat trains 3 epochs of 7 global batches of 64, split 32 + 32 across the two processes: the same
    # steps as one process (datamodules/global_batches.py), so the same checkpoint, tau and test predictions
    one, two = tmp_path / "one", tmp_path / "two"
    run("train.py", data, *recipe, "logger=csv", "plots=false", f"hydra.run.dir={one}")
    run("train.py", data, *recipe, "logger=csv", "plots=false", "trainer=ddp",
        "trainer.accelerator=cpu", "trainer.devices=2", f"hydra.run.dir={two}")
    a, b = metrics(one), metrics(two)
    # Accuracy, mAP and IoU are decisions on the scores: exact, though two processes sum the gradients in another
    # order, because that moves the scores by about 1e-6 (lfb_cat; zero_shot trains nothing: 0) and no decision
    # of lfb_cat lies that close to its edge (measured: 7e-4 between a class's closest distinct scores, 0.14
    # between a sample's two best steps, 1.7 between its best and tau)
    for name in ("Accuracy", "mAP", "IoU"):
        assert a[name] == b[name]
    assert a["per_video"] == b["per_video"]
    # gradients summed in another order: float32 rounding apart, the same numbers
    assert b["best_val_loss"] == pytest.approx(a["best_val_loss"], rel=1e-5)
    assert (b["tau"] is None) == (a["tau"] is None)
    assert a["tau"] is None or b["tau"] == pytest.approx(a["tau"], rel=1e-5)
    pa, pb = (json.loads((d / "predictions.json").read_text()) for d in (one, two))
    assert {v: [x["prediction"] for x in pa[v]] for v in pa} == {v: [x["prediction"] for x in pb[v]] for v in pb}
    for v in pa:
        np.testing.assert_allclose([x["score"] for x in pb[v]], [x["score"] for x in pa[v]], atol=1e-4)
