"""The training order of every epoch is drawn from (seed, epoch) and Lightning's own hook advances it:
checked through `Trainer.fit`, not by calling set_epoch by hand (datamodules/global_batches.py)."""

from __future__ import annotations

import json
import tempfile
from functools import partial
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from datamodules.step_recognition import StepRecognitionDataModule
from models.heads import LFBAvg
from models.step_recognition import StepRecognitionModule
from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18

from helpers.ddp_processes import ddp_strategy
from helpers.fakes import FakeText
from helpers.synthetic_presets import SHORT


class RecordOrder(pl.Callback):
    """The (recording, sample id) pairs of every training batch this process sees, per epoch and step; with
    `out_dir`, written to <out_dir>/rank<r>.json at the end (started processes return nothing else)."""

    def __init__(self, out_dir: Path | None = None):
        self.out_dir = out_dir
        self.steps: dict[int, list[list[list[int]]]] = {}

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        ids = torch.stack([batch["video_index"], batch["sample_id"]], 1).tolist()
        self.steps.setdefault(trainer.current_epoch, []).append(ids)

    @property
    def orders(self) -> dict[int, list[list[int]]]:
        return {epoch: [x for step in steps for x in step] for epoch, steps in self.steps.items()}

    def on_train_end(self, trainer, module):
        if self.out_dir is not None:
            (self.out_dir / f"rank{trainer.global_rank}.json").write_text(json.dumps(self.steps))


@pytest.fixture(scope="module")
def root(synthetic_spacewalk18) -> Path:
    return synthetic_spacewalk18(**SHORT)


def fit(tmp_path, root: Path, epochs: int, ckpt_path=None, seed: int = 0, devices: int = 1) -> RecordOrder:
    dataset = Spacewalk18(root)
    datamodule = StepRecognitionDataModule(dataset, tmp_path / "bank", text_encoder=FakeText(), batch_size=16,
                                           context_seconds=60.0, seed=seed)
    module = StepRecognitionModule(LFBAvg(dim=16), optimizer=partial(torch.optim.Adam, lr=1e-3))
    order = RecordOrder(tmp_path if devices > 1 else None)
    checkpoint = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    trainer = pl.Trainer(max_epochs=epochs, accelerator="cpu", devices=devices, logger=False, num_sanity_val_steps=0,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[order, checkpoint],
                         use_distributed_sampler=False, strategy=ddp_strategy() if devices > 1 else "auto")
    trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    return order


def test_fit_draws_a_new_order_every_epoch_and_a_resumed_run_continues_it(tmp_path, root):
    straight = fit(tmp_path / "straight", root, epochs=3).orders
    assert sorted(straight) == [0, 1, 2]
    assert all(sorted(o) == sorted(straight[0]) for o in straight.values())  # every sample once per epoch
    assert straight[0] != straight[1] != straight[2] != straight[0]
    assert fit(tmp_path / "again", root, epochs=3).orders == straight  # drawn from the seed alone
    assert fit(tmp_path / "other", root, epochs=1, seed=1).orders[0] != straight[0]

    # two epochs, then resume from last.ckpt for the third: the third epoch's order is the straight run's
    fit(tmp_path / "resumed", root, epochs=2)
    resumed = fit(tmp_path / "resumed", root, epochs=3,
                  ckpt_path=str(tmp_path / "resumed" / "ckpt" / "last.ckpt")).orders
    assert resumed == {2: straight[2]}


@pytest.mark.slow  # two more processes (helpers/ddp_processes.py)
def test_two_processes_take_the_global_batches_of_one(tmp_path, root, monkeypatch):
    one = fit(tmp_path / "one", root, epochs=2).steps
    # the rank 0 of ddp_spawn or ddp_fork hands its weights back through a file in a tempfile.mkdtemp() folder, and
    # Lightning removes the file but not the folder: the started processes make it under this test's folder instead
    # of /tmp (a spawned one reads TMPDIR, a forked one the tempfile module's folder it inherits)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fit(tmp_path / "two", root, epochs=2, devices=2)
    ranks = [json.loads((tmp_path / "two" / f"rank{r}.json").read_text()) for r in range(2)]
    for epoch, steps in one.items():
        shares = [rank[str(epoch)] for rank in ranks]
        assert len(shares[0]) == len(shares[1]) == len(steps)
        # at every step, rank 0's share then rank 1's is the one process's batch (60 samples in batches of 16:
        # the last batch of 12 splits 6 + 6, so no share is padding)
        assert [a + b for a, b in zip(*shares)] == steps
    assert one[0] != one[1]
