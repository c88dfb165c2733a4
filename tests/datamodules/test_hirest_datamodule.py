"""HiRESTDataModule: samples, batches and masks, and the round-robin multi-task loader (CPU, tiny data)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from datamodules.hirest import HiRESTDataModule, RoundRobinBatchSampler, step_boundaries
from spacewalk.benchmarks.hirest.dataset import HiREST
from spacewalk.benchmarks.hirest.joint_model_io import TASKS, caption_tokenizer, step_frame_indices

from helpers.hirest_fakes import ASR_DIM, QUERY_DIM, VIDEO_DIM, FakeFeatures, write_hirest_root


@pytest.fixture(scope="session")
def tokenizer():
    return caption_tokenizer()


@pytest.fixture
def hirest(tmp_path) -> HiREST:
    return HiREST(write_hirest_root(tmp_path / "hirest"))


@pytest.fixture
def datamodule(hirest, tokenizer) -> HiRESTDataModule:
    dm = HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer, batch_size=2, seed=3)
    dm.setup("fit")
    return dm


# --------------------------------------------------------------------------------------------------
# samples


def test_samples_follow_the_original(datamodule, hirest):
    train = datamodule.task_samples("train", "loss")
    clip_pairs = [(a.query, a.video) for a in hirest.annotations("train") if a.clip]
    assert [(s.query, s.video) for s in train["moment_retrieval"]] == clip_pairs
    assert all(s.moment is not None for s in train["moment_retrieval"])
    steps = hirest.step_annotations("train")
    expected = sum(len(step_boundaries(a)) - 1 for a in steps if len(step_boundaries(a)) > 2)
    assert len(train["moment_segmentation"]) == expected
    assert len(train["step_captioning"]) == sum(len(a.steps) for a in steps)
    # headings are stripped before tokenising
    first = next(s for s in train["step_captioning"] if s.position == 0)
    heading = steps[[a.video for a in steps].index(first.video)].steps[0].heading
    assert heading.endswith(" ")
    assert datamodule.tokenizer.decode(list(first.caption_ids)) == heading.strip()


def test_test_split_uses_the_formatted_gt(hirest, tokenizer):
    dm = HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer)
    test = dm.task_samples("test", "inference")
    assert all(s.moment is None for s in test["moment_retrieval"])  # masked split: no targets
    gt = hirest.moment_gt("test")
    assert sorted(s.video for s in test["moment_segmentation"]) == sorted(gt)
    assert len(test["step_captioning"]) == sum(len(g.captions) for g in gt.values())
    item = dm.load(test["moment_retrieval"][0])
    assert "start_target" not in item
    with pytest.raises(ValueError, match="hides"):
        dm.task_samples("test", "loss")


# --------------------------------------------------------------------------------------------------
# batches


def test_moment_retrieval_batch(datamodule, hirest):
    samples = datamodule.task_samples("train", "loss")["moment_retrieval"][:2]
    batch = datamodule._collate([datamodule.load(s) for s in samples])
    assert batch["task"] == "moment_retrieval"
    assert batch["frames"].shape == (2, 24, VIDEO_DIM) and batch["frames"].dtype == torch.float32
    assert batch["asr"].shape == (2, 24, ASR_DIM) and batch["query"].shape == (2, QUERY_DIM)
    assert batch["frame_mask"].dtype == torch.bool and bool(batch["frame_mask"].all())
    # frame of time s = ceil(s), as the original's digitize
    assert batch["start_target"].tolist() == [int(np.ceil(s.moment[0])) for s in samples]
    assert batch["end_target"].tolist() == [int(np.ceil(s.moment[1])) for s in samples]


def test_padding_per_batch(hirest, tokenizer):
    features = FakeFeatures(hirest)
    short = next(iter(features._frames))
    features._frames[short] = features._frames[short][:15]
    dm = HiRESTDataModule(hirest, features, tokenizer=tokenizer)
    samples = dm.task_samples("train", "loss")["moment_retrieval"]
    i = [s.video for s in samples].index(short)
    batch = dm._collate([dm.load(samples[i]), dm.load(samples[(i + 1) % len(samples)])])
    assert batch["frames"].shape[1] == 24
    assert batch["frame_mask"].sum(1).tolist() == [15, 24]
    assert float(batch["frames"][0, 15:].abs().sum()) == 0.0
    # targets beyond a short video clip to its last frame
    assert int(batch["end_target"][0]) <= 14


def test_segmentation_teacher_forcing(datamodule, hirest):
    samples = datamodule.task_samples("train", "loss")["moment_segmentation"]
    video = samples[0].video
    mine = [s for s in samples if s.video == video]
    bounds = [int(b) for b in mine[0].boundaries]
    assert [s.position for s in mine] == list(range(len(bounds) - 1))
    batch = datamodule._collate([datamodule.load(s) for s in mine])
    for i in range(len(mine)):
        region = np.flatnonzero(batch["region_mask"][i].numpy())
        assert region.tolist() == list(range(bounds[i], bounds[-1] + 1))  # [current step start, moment end]
        assert np.flatnonzero(batch["boundary_mask"][i].numpy()).tolist() == bounds[:i + 1]  # earlier ones
        assert int(batch["target"][i]) == bounds[i + 1]


def test_segmentation_inference_batch(hirest, tokenizer):
    dm = HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer)
    samples = dm.task_samples("val", "inference")["moment_segmentation"]
    batch = dm._collate([dm.load(s) for s in samples])
    assert "target" not in batch and "region_mask" not in batch
    assert batch["moment"].tolist() == [[int(s.moment[0]), int(s.moment[1])] for s in samples]


def test_captioning_batch(datamodule, tokenizer):
    samples = datamodule.task_samples("train", "loss")["step_captioning"][:3]
    batch = datamodule._collate([datamodule.load(s) for s in samples])
    assert batch["frames"].shape == (3, 20, VIDEO_DIM) and batch["asr"].shape == (3, 20, ASR_DIM)
    assert bool(batch["frame_mask"].all())
    features = datamodule.features
    for i, s in enumerate(samples):
        first, last = int(np.ceil(s.span[0])), int(np.ceil(s.span[1]))
        full = features._frames[s.video]
        assert np.allclose(batch["frames"][i].numpy(), full[step_frame_indices(first, last, 20)])
        n = len(s.caption_ids)
        ids, targets, mask = batch["input_ids"][i], batch["target_ids"][i], batch["token_mask"][i]
        assert ids[:n + 1].tolist() == [tokenizer.cls_token_id, *s.caption_ids]
        assert targets[:n + 1].tolist() == [*s.caption_ids, tokenizer.sep_token_id]
        assert mask.tolist() == [True] * (n + 1) + [False] * (len(mask) - n - 1)
        assert (ids[n + 1:] == tokenizer.pad_token_id).all() and (targets[n + 1:] == tokenizer.pad_token_id).all()
        assert batch["step_index"][i] == s.position and batch["step_bounds"][i].tolist() == list(s.span)


def test_step_frames_cut_or_stretched():
    assert step_frame_indices(3, 40, 20).tolist() == list(range(3, 23))  # the first 20
    assert step_frame_indices(5, 24, 20).tolist() == list(range(5, 25))
    stretched = step_frame_indices(10, 12, 20)  # 3 frames -> 6, 7, 7 copies, in order
    assert stretched.tolist() == [10] * 6 + [11] * 7 + [12] * 7
    assert step_frame_indices(7, 7, 4).tolist() == [7, 7, 7, 7]


def test_max_frames_cuts_videos(hirest, tokenizer):
    dm = HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer, max_frames=10)
    s = dm.task_samples("train", "loss")["moment_retrieval"][0]
    item = dm.load(s)
    assert item["frames"].shape[0] == 10 and item["asr"].shape[0] == 10
    assert item["end_target"] == min(int(np.ceil(s.moment[1])), 9)


# --------------------------------------------------------------------------------------------------
# the round-robin loader


def _epoch(sampler: RoundRobinBatchSampler, epoch: int) -> list[list[int]]:
    sampler.set_epoch(epoch)
    return list(sampler)


def _task_of(sampler: RoundRobinBatchSampler, index: int) -> str:
    return max((t for t in sampler.offsets if sampler.offsets[t] <= index), key=sampler.offsets.get)


def test_round_robin_visits_every_batch_once():
    sizes = {"moment_retrieval": 11, "moment_segmentation": 23, "step_captioning": 17}
    sampler = RoundRobinBatchSampler(sizes, batch_size=5, seed=1)
    batches = _epoch(sampler, 0)
    assert len(batches) == len(sampler) == 3 + 5 + 4
    tasks = [{_task_of(sampler, i) for i in b} for b in batches]
    assert all(len(t) == 1 for t in tasks)  # one task per batch
    assert Counter(t.pop() for t in tasks) == {"moment_retrieval": 3, "moment_segmentation": 5, "step_captioning": 4}
    assert sorted(i for b in batches for i in b) == list(range(51))  # every sample once
    # the task order is shuffled, differs between epochs, and is reproducible
    order = [_task_of(sampler, b[0]) for b in batches]
    assert order != sorted(order, key=list(sizes).index)
    assert [_task_of(sampler, b[0]) for b in _epoch(sampler, 1)] != order
    assert _epoch(sampler, 0) == batches
    assert _epoch(RoundRobinBatchSampler(sizes, batch_size=5, seed=2), 0) != batches


@pytest.mark.parametrize("world", [2, 3])
def test_round_robin_ddp_shards(world):
    sizes = {"moment_retrieval": 7, "moment_segmentation": 20, "step_captioning": 13}
    shards = [_epoch(RoundRobinBatchSampler(sizes, 2, seed=4, rank=r, world_size=world), 5) for r in range(world)]
    assert len({len(s) for s in shards}) == 1  # equal lengths
    # the same task at every step on every rank
    probe = RoundRobinBatchSampler(sizes, 2)
    for step in zip(*shards):
        assert len({_task_of(probe, b[0]) for b in step}) == 1
    # disjoint shares (up to the padding of a task whose size world does not divide), covering every sample
    seen = [set(i for b in s for i in b) for s in shards]
    assert set().union(*seen) == set(range(40))
    padding = sum(-n % world for n in sizes.values())
    assert sum(len(s) for s in seen) - 40 <= padding
    per_rank = [Counter(_task_of(probe, i) for b in s for i in b) for s in shards]
    assert all(c == per_rank[0] for c in per_rank)


def test_lightning_sets_the_epoch(datamodule):
    from lightning_fabric.utilities.data import _set_sampler_epoch

    loader = datamodule.train_dataloader()
    _set_sampler_epoch(loader, 7)
    assert loader.batch_sampler.epoch == 7
    first = [b["task"] for b in loader]
    _set_sampler_epoch(loader, 8)
    second = [b["task"] for b in loader]
    assert Counter(first) == Counter(second) and len(first) == len(loader)


def test_train_loader_batches(datamodule):
    loader = datamodule.train_dataloader()
    samples = datamodule.task_samples("train", "loss")
    counts = Counter()
    for batch in loader:
        assert batch["task"] in TASKS
        counts[batch["task"]] += len(batch["video"])
    assert counts == {t: len(samples[t]) for t in TASKS}


def test_train_tasks_subset(hirest, tokenizer):
    dm = HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer, train_tasks=["step_captioning"])
    assert {b["task"] for b in dm.train_dataloader()} == {"step_captioning"}


def test_eval_loaders(hirest, tokenizer):
    dm = HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer, batch_size=2, eval_batch_size=4)
    assert [next(iter(loader))["task"] for loader in dm.val_dataloader()] == list(TASKS)
    val_seg = next(iter(dm.val_dataloader()[1]))
    assert "target" in val_seg  # the val loss is teacher forced
    test = dm.test_dataloader()
    assert [next(iter(loader))["task"] for loader in test] == list(TASKS)
    assert "moment" in next(iter(test[1]))
    e2e = HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer, inference="end_to_end")
    assert [next(iter(loader))["task"] for loader in e2e.test_dataloader()] == ["moment_retrieval"]
    val_predict = HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer, predict_split="val")
    videos = {v for loader in val_predict.predict_dataloader() for b in loader for v in b["video"]}
    assert videos == {a.video for a in hirest.annotations("val") if a.clip}


def test_bad_arguments(hirest, tokenizer):
    with pytest.raises(ValueError, match="inference"):
        HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer, inference="chain")
    with pytest.raises(ValueError, match="train_tasks"):
        HiRESTDataModule(hirest, FakeFeatures(hirest), tokenizer=tokenizer, train_tasks=["video_retrieval"])
