"""Batches of the whole run, the same on every process, each process taking its share.

With DDP, Lightning's default is a DistributedSampler: every process draws its own `batch_size` samples, so
a step of two processes sees 2 x batch_size samples in an order a single process never sees, and a trained
head ends up elsewhere. Here `batch_size` is the global batch: every process builds the same sequence of
global batches and keeps a contiguous share of each (`share`), and the loss is weighted so that DDP's
average of the processes' gradients is the gradient of the global batch's mean loss (see
StepRecognitionModule.training_step). One process and N processes then take the same optimisation steps
up to floating-point summation order; dropout masks are the exception (each process draws its own).

The shuffled order of an epoch is a permutation drawn from (seed, epoch) alone, as DistributedSampler
does, not from torch's global generator: Lightning re-seeds that generator when DDP starts (after the
head was initialised), so a draw from it differs between one process and several. It also makes an
epoch's order independent of the head (its initialisation draws) and the same after resuming.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from torch.utils.data import BatchSampler, Sampler

from spacewalk.core.errors import ConfigError


class EpochPermutation(Sampler[int]):
    """0..n-1 in the order of epoch e: a permutation drawn from (seed, e), or in order without shuffling."""

    def __init__(self, n: int, shuffle: bool, seed: int = 0):
        self.n, self.shuffle, self.seed = int(n), shuffle, int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(range(self.n))
        return iter(np.random.default_rng([self.seed, self.epoch]).permutation(self.n).tolist())


def global_batch_sampler(n: int, batch_size: int, shuffle: bool, seed: int = 0) -> BatchSampler:
    """The run's global batches of `batch_size` (the last one smaller), in the order of the epoch.

    The permutation sits in the BatchSampler's `sampler` on purpose: at the start of every epoch (and of
    the epoch a resumed run restarts) Lightning calls `set_epoch` on `dataloader.sampler` and on
    `dataloader.batch_sampler.sampler` (lightning_fabric's `_set_sampler_epoch`), never on the batch
    sampler itself."""
    if batch_size < 1:
        raise ConfigError(f"batch_size must be positive, got {batch_size}")
    return BatchSampler(EpochPermutation(n, shuffle, seed), int(batch_size), drop_last=False)


def share(global_batch: np.ndarray, rank: int, world_size: int) -> tuple[np.ndarray, bool]:
    """This process's contiguous part of a global batch, and whether it is padding.

    A last batch smaller than the number of processes leaves some processes nothing; they get the batch's
    first sample again, flagged as padding, so that every process still runs a forward and backward pass
    (DDP's gradient hooks wait for all of them). Padding must add nothing to the loss, and the metrics drop
    it as a duplicate of a sample they already hold."""
    global_batch = np.asarray(global_batch)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world size {world_size}")
    if world_size == 1:
        return global_batch, False
    part = np.array_split(global_batch, world_size)[rank]
    if len(part) == 0:
        return global_batch[:1], True
    return part, False
