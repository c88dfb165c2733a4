"""Global batches split across DDP processes (datamodules/global_batches.py) and the loss that makes N
processes take the steps of one (models/step_recognition.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from datamodules.global_batches import global_batch_sampler, share
from models.step_recognition import StepRecognitionModule


def test_an_epoch_visits_every_sample_once_in_an_order_drawn_from_seed_and_epoch():
    sampler = global_batch_sampler(10, batch_size=4, shuffle=True, seed=3)
    first = list(sampler)
    assert len(sampler) == len(first) == 3 and [len(b) for b in first] == [4, 4, 2]
    assert sorted(i for b in first for i in b) == list(range(10))
    assert list(global_batch_sampler(10, 4, True, seed=3)) == first  # what another process builds
    # where Lightning looks for set_epoch (tests/training/test_train_e2e.py and test_train_ddp_e2e.py check that it
    # does, through fit)
    sampler.sampler.set_epoch(1)
    assert list(sampler) != first
    sampler.sampler.set_epoch(0)
    assert list(sampler) == first  # a resumed run sees the same epoch again
    assert list(global_batch_sampler(10, 4, True, seed=4)) != first
    assert list(global_batch_sampler(5, 2, shuffle=False)) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="batch_size"):
        global_batch_sampler(5, 0, True)


def test_shares_partition_the_global_batch_and_pad_an_empty_share():
    batch = np.arange(7)
    parts = [share(batch, r, 3) for r in range(3)]
    assert np.concatenate([p for p, _ in parts]).tolist() == batch.tolist()
    assert not any(padding for _, padding in parts)
    assert share(batch, 0, 1)[0].tolist() == batch.tolist()
    # a last batch of 1 sample over 2 processes: the second repeats it, flagged as padding
    (a, pad_a), (b, pad_b) = share(np.array([5]), 0, 2), share(np.array([5]), 1, 2)
    assert (a.tolist(), pad_a, b.tolist(), pad_b) == ([5], False, [5], True)
    with pytest.raises(ValueError, match="rank"):
        share(batch, 2, 2)


def test_weighted_shares_average_to_the_gradient_of_the_global_mean(tmp_path):
    # real shares (the DataModule's collate_share), the real forward, loss and weighting of training_step:
    # DDP's average of two processes' gradients equals one process's gradient on the global batch
    from datamodules.step_recognition import StepRecognitionDataModule
    from models.heads import LinearHead
    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
    from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset

    from helpers.fakes import FakeText

    dataset = Spacewalk18(ensure_dataset(tmp_path / "sw18", seed=0, n_train=2, n_val=1, n_test=1, minutes=(3, 4),
                                         steps_per_video=(3, 4), samples_per_video=40, progress=False))
    dm = StepRecognitionDataModule(dataset, tmp_path / "bank", text_encoder=FakeText(), context_seconds=60.0,
                                   cells=False)
    dm.setup()
    torch.manual_seed(0)
    module = StepRecognitionModule(LinearHead(dm.feature_dim, identity_init=False))
    # a global batch of both recordings, its labelled samples unevenly shared between the two processes
    global_batch = list(range(0, 80, 3))

    def gradient(batch, world):
        logits = module(batch)
        loss, n = module.step_loss(logits, batch["label"])
        weighted = module.share_of_global_loss(loss, n, batch["labelled_total"], world)
        return torch.autograd.grad(weighted, list(module.parameters()))

    expected = gradient(dm.collate_share("train", 0, 1, global_batch), world=1)
    shares = [gradient(dm.collate_share("train", rank, 2, global_batch), world=2) for rank in range(2)]
    labelled = [int((dm.collate_share("train", r, 2, global_batch)["label"] > 0).sum()) for r in range(2)]
    assert labelled[0] != labelled[1]  # unequal shares: an unweighted average would be wrong
    for whole, *parts in zip(expected, *shares):
        torch.testing.assert_close(sum(parts) / 2, whole)  # DDP's average


def test_split_loss_is_the_mean_cross_entropy_over_labelled_samples():
    rng = np.random.default_rng(0)

    class S:
        def __init__(self, label):
            self.label = label

    scores = {"a": rng.normal(size=(4, 4)), "b": rng.normal(size=(3, 6))}
    samples = {"a": [S(1), S(0), S(3), S(2)], "b": [S(0), S(5), S(0)]}
    expected = torch.cat([
        F.cross_entropy(torch.tensor(scores["a"][[0, 2, 3], 1:]), torch.tensor([0, 2, 1]), reduction="none"),
        F.cross_entropy(torch.tensor(scores["b"][[1], 1:]), torch.tensor([4]), reduction="none")]).mean()
    assert StepRecognitionModule.split_loss(scores, samples) == pytest.approx(float(expected), rel=1e-12)
    assert StepRecognitionModule.split_loss({"b": scores["b"][[0]]}, {"b": [S(0)]}) is None
