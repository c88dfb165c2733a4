"""python -m spacewalk.training.cell_log_probs end to end: a tiny trained run's cells of the val and test
recordings, calibrated on val, read by mc_plan's recording mode in place of its zero-shot recipe."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import logsumexp

from helpers.commands import run_command
from helpers.end_to_end import run
from helpers.synthetic_presets import TRAIN

pytestmark = pytest.mark.slow


def test_a_trained_run_cells_are_calibrated_on_val_and_read_by_mc_plan(tmp_path, synthetic_spacewalk18,
                                                                       spacewalk18_run_data):
    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
    from spacewalk.benchmarks.spacewalk18.questions.plan_reading import PlanReading
    from spacewalk.benchmarks.spacewalk18.questions.question_answering import QuestionAnswering
    from spacewalk.encoders.sentence import minilm_text_encoder

    root = synthetic_spacewalk18(**TRAIN)
    run_dir = tmp_path / "run"
    run("train.py", spacewalk18_run_data(TRAIN), "model=lfb_avg", "context=1min", "trainer.max_epochs=1",
        "logger=csv", "plots=false", f"hydra.run.dir={run_dir}")
    ckpt = next((run_dir / "checkpoints").glob("epoch*.ckpt"))
    out = tmp_path / "cells" / "lfb_avg.npz"
    for ckpts in ([ckpt], [ckpt, ckpt]):  # one run, and the same run twice: the ensemble's mean is the run
        run_command("-m", "spacewalk.training.cell_log_probs", *[a for c in ckpts for a in ("--ckpt", c)],
                    "--out", out)
        meta = json.loads(out.with_suffix(".json").read_text())
        assert [r["ckpt"] for r in meta["runs"]] == [str(c) for c in ckpts]
        assert all(r["calibration"]["temperature"] > 0 and r["segment_seconds"] == 12.0 for r in meta["runs"])
        with np.load(out) as data:
            cells = {v: data[v] for v in data.files}
        if len(ckpts) == 1:
            single = cells
        else:
            assert all(np.allclose(cells[v], single[v]) for v in single)

    dataset = Spacewalk18(root)
    held_out = {r.video_id: r for split in ("val", "test") for r in dataset.split(split)}
    assert set(cells) == set(held_out)  # train is not scored
    for v, x in cells.items():
        assert x.shape[1] == held_out[v].num_classes
        np.testing.assert_allclose(logsumexp(x, axis=1), 0.0, atol=1e-9)  # log-probabilities of each cell
    bank = root.parent / "data" / "feature_banks" / "synthetic" / "minilm"
    reader = PlanReading(minilm_text_encoder(device="cpu"), root=root, bank_dir=bank,
                         steps="recording", emission_scores=[out])
    items = QuestionAnswering(reader.dataset).items()
    assert items and all(len(reader.scores(item)[0]) == len(item.options) for item in items)  # shapes agree

    bad = run_command("-m", "spacewalk.training.cell_log_probs", "--ckpt", tmp_path / "nothing.ckpt", "--out", out,
                      check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "nothing.ckpt" in bad.stderr
