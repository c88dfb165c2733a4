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
    # where Lightning looks for set_epoch (tests/test_train_e2e.py checks that it does, through fit)
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


def test_weighted_shares_average_to_the_gradient_of_the_global_mean():
    # StepRecognitionModule.training_step's weighting, checked against one process: the shares hold
    # 3 and 1 labelled samples (plus Irrelevant ones that carry no loss)
    torch.manual_seed(0)
    logits = torch.randn(8, 5, requires_grad=True)
    label = torch.tensor([1, 0, 2, 4, 0, 0, 3, 0])
    full, _ = StepRecognitionModule.step_loss(logits, label)
    (expected,) = torch.autograd.grad(full, logits)
    world, total = 2, int((label > 0).sum())
    grads = []
    for part in (slice(0, 4), slice(4, 8)):
        loss, n = StepRecognitionModule.step_loss(logits[part], label[part])
        (g,) = torch.autograd.grad(loss * (n * world / total), logits)
        grads.append(g)
    torch.testing.assert_close((grads[0] + grads[1]) / world, expected)  # DDP's average


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
