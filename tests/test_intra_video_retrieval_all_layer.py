"""Intra-video retrieval, all-layer fine-tuning: the three windows' encoder inputs, the towers starting from
zero-shot, and train.py end to end (the tiny random video backbone learns; two DDP processes give one's
numbers, for this recipe and for the frozen-feature ones)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import REPO
from datamodules.intra_video_retrieval import IntraVideoRetrievalDataModule
from datamodules.intra_video_retrieval_encoder_inputs import EncoderRetrievalDataModule
from models.all_layer import TrainableTowers
from models.intra_video_retrieval import IntraVideoRetrievalModule, SimilarityHead
from models.intra_video_retrieval_all_layer import AllLayerRetrievalModule
from spacewalk import encoders
from spacewalk.io import load_json
from spacewalk.spacewalk18.dataset import Spacewalk18
from spacewalk.spacewalk18.retrieval_sampler import RetrievalSamplerConfig
from spacewalk.spacewalk18.synthetic import ensure_dataset
from spacewalk.video import open_video, sparse_timestamps

SMALL = dict(n_train=1, n_val=1, n_test=1, minutes=(12, 14), steps_per_video=(3, 4), samples_per_video=20,
             retrieval_samples_per_video=10, questions_per_video=2, video_fps=0.5, frame_size=16, progress=False)
BANK = dict(segment_seconds=12.0, fps=1.0, frame_size=32, video_backend="pyav")
TINY_CLIP = dict(embed_dim=16, vision_cfg=dict(image_size=32, layers=2, width=32, head_width=16, patch_size=16),
                 text_cfg=dict(context_length=16, vocab_size=49408, width=16, heads=2, layers=1))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return ensure_dataset(tmp_path_factory.mktemp("synthetic") / "sw18", seed=0, **SMALL)


@pytest.fixture(scope="module")
def minilm():
    return encoders.minilm_text_encoder(device="cpu")


def make(cls, root, bank_dir, modalities, text, video=None, **kw):
    dm = cls(Spacewalk18(root), bank_dir, text_encoder=text, video_encoder=video, bank_config=BANK,
             context_seconds=30.0, modalities=modalities, sampler=RetrievalSamplerConfig(samples_per_video=12), **kw)
    dm.setup()
    return dm


def test_the_text_tower_starts_as_zero_shot_on_the_same_windows(root, tmp_path, minilm):
    dm = make(EncoderRetrievalDataModule, root, tmp_path / "bank", "text", minilm, eval_batch_size=12)
    zero = make(IntraVideoRetrievalDataModule, root, tmp_path / "bank", "text", minilm)  # text_pool=mean, zero
    assert not (tmp_path / "bank").exists() or zero.bank  # the all-layer DataModule itself builds no bank
    for name in ("video_index", "sample_id", "label"):
        assert np.array_equal(getattr(dm.splits["test"], name), getattr(zero.splits["test"], name))
    batch = next(iter(dm.loader("test")))
    assert batch["text_weight"].shape[0] == 3 * len(batch["label"]) == 36
    module = AllLayerRetrievalModule(TrainableTowers(dm.feature_dim, "text", text_encoder=minilm, text_blocks=1),
                                     temperature=0.05).eval()
    with torch.no_grad():
        scores = module.scores(*module.features(batch)).numpy()
    frozen = zero.collate("test", np.arange(12))
    expected = IntraVideoRetrievalModule(SimilarityHead()).scores(frozen["query"], frozen["candidates"]).numpy()
    np.testing.assert_allclose(scores * 0.05, expected, atol=2e-3)  # the bank stores float16
    clear = np.abs(expected[:, 0] - expected[:, 1]) > 5e-3
    assert clear.sum() >= 6 and (scores.argmax(1) == expected.argmax(1))[clear].all()


def test_three_windows_of_frames_and_shares_of_a_global_batch(root, tmp_path, minilm):
    video = encoders.open_clip_video_encoder("ViT-B-32", random_init=True, init_seed=0, model_cfg=TINY_CLIP,
                                             num_frames=3)
    dm = make(EncoderRetrievalDataModule, root, tmp_path / "bank", "video+text", minilm, video, batch_size=6,
              max_sentences=2, video_backend="pyav")
    dm.trainer = None
    one = next(iter(dm._loader("train", shuffle=True)))
    assert one["frames"].shape == (6, 3, 3, 3, 32, 32) and (one["text_weight"].sum(1) <= 2).all()
    loader = dm._loader("train", shuffle=True)
    parts = []
    for rank in (0, 1):
        loader.batch_sampler.rank, loader.batch_sampler.world_size = rank, 2
        parts.append(next(iter(loader)))
    assert torch.equal(torch.cat([p["sample_id"] for p in parts]), one["sample_id"])
    assert torch.equal(torch.cat([p["frames"] for p in parts]), one["frames"])  # (seed, epoch, sample) draws
    assert parts[0]["labelled_total"] == parts[1]["labelled_total"] == 6  # every retrieval sample has a loss
    # evaluation frames are the window's k frames through the encoder's inference path: window 1 = candidate 0
    batch = next(iter(dm.loader("val")))
    start, end, _ = dm.windows["val"]
    rec = dm.dataset.recordings[dm.video_ids["val"][0]]
    with open_video(rec.video_path, "pyav") as reader:
        clip = reader.frames_at(sparse_timestamps(start[0, 1], end[0, 1], 3))
    head = TrainableTowers(video.dim, "video", video_encoder=video, text_blocks=1).eval()
    with torch.no_grad():
        got = head.video_feature(batch["frames"][:1, 1]).numpy()
    np.testing.assert_allclose(got, video.encode([clip]), atol=1e-5)


def test_recipe_errors():
    with pytest.raises(ValueError, match="text_blocks=1"):
        AllLayerRetrievalModule(SimilarityHead())  # no text_blocks: not the towers' retrieval layout
    with pytest.raises(ValueError, match="text_blocks"):
        TrainableTowers(8, "text", text_blocks=3)
