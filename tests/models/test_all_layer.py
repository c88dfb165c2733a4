"""All-layer fine-tuning: the all-layer DataModule (decoding in the loop) and the trainable towers."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from datamodules.all_layer import AllLayerDataModule
from datamodules.step_recognition import StepRecognitionDataModule
from models.all_layer import AllLayerModule, TrainableTowers, freeze_first_blocks
from spacewalk import encoders
from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
from spacewalk.core.errors import DataError
from spacewalk.media.video import open_video, sparse_timestamps

from conftest import tiny_clip, tiny_videomae, tiny_xclip

SYNTHETIC = dict(n_train=1, n_val=1, n_test=1, minutes=(3, 4), steps_per_video=(3, 4), samples_per_video=60,
                 retrieval_samples_per_video=10, questions_per_video=2, progress=False)
BANK = dict(segment_seconds=12.0, fps=1.0, frame_size=32, video_backend="pyav")


@pytest.fixture
def root(synthetic_spacewalk18):
    return synthetic_spacewalk18(**SYNTHETIC)


@pytest.fixture(scope="module")
def minilm():
    return encoders.minilm_text_encoder(device="cpu")


VIDEO_TOWERS = {"open_clip": tiny_clip, "xclip": tiny_xclip, "videomae": tiny_videomae}


def make(root, bank_dir, modalities, text, video=None, **kw):
    dm = AllLayerDataModule(Spacewalk18(root), bank_dir, text_encoder=text, video_encoder=video,
                            bank_config=BANK, context_seconds=60.0, modalities=modalities, **kw)
    dm.setup()
    return dm


def test_text_tower_starts_from_the_frozen_window_feature(root, tmp_path, minilm):
    # eval windows read every sentence: at init the tower's feature is the bank recipes' text_pool=mean feature
    dm = make(root, tmp_path / "bank", "text", minilm, batch_size=4, eval_batch_size=25)
    frozen = StepRecognitionDataModule(Spacewalk18(root), tmp_path / "bank", text_encoder=minilm, bank_config=BANK,
                                       context_seconds=60.0, modalities="text", cells=False)
    frozen.setup()
    batch = next(iter(dm.loader("val")))
    assert "clip" not in batch and batch["text_weight"].shape[0] == 25
    head = TrainableTowers(dm.feature_dim, "text", text_encoder=minilm).eval()  # no dropout
    with torch.no_grad():
        out = head(batch).numpy()
    np.testing.assert_allclose(out, frozen.splits["val"].clip[:25], atol=2e-3)  # the bank stores float16


@pytest.mark.parametrize("family", list(VIDEO_TOWERS))
def test_video_tower_starts_from_the_frozen_encoder_and_frames_follow_the_window(root, tmp_path, minilm, family):
    video = VIDEO_TOWERS[family]()
    dm = make(root, tmp_path / "bank", "video", minilm, video, batch_size=3, eval_batch_size=5)
    assert dm.num_frames == video.num_frames == 4  # k defaults to the encoder's count
    batch = next(iter(dm.loader("test")))
    assert batch["frames"].shape == (5, 4, 3, 32, 32)
    head = TrainableTowers(dm.feature_dim, "video", video_encoder=video).eval()
    assert isinstance(head.video, encoders.VideoTower) and head.video.dim == dm.feature_dim
    with torch.no_grad():
        out = head(batch).numpy()
    # the same 4 frames, decoded here and encoded by the frozen encoder's own inference path
    ds, video_id = dm.dataset, dm.video_ids["test"][0]
    rec, w = ds.recordings[video_id], dm.windows["test"]
    with open_video(rec.video_path) as reader:
        clips = [reader.frames_at(sparse_timestamps(w.start[i], w.end[i], 4)) for i in range(5)]
    np.testing.assert_allclose(out, video.encode(clips), atol=1e-5)
    assert not np.allclose(out[0], out[1:], atol=1e-3)  # windows differ: not a constant feature
    # the copy trains, the frozen encoder stays frozen
    assert all(p.requires_grad for p in head.video.parameters())
    assert not any(p.requires_grad for p in video.model.parameters())


def test_clip_models_take_their_own_frame_count(root, tmp_path, minilm):
    with pytest.raises(ValueError, match="exactly that many"):
        make(root, tmp_path / "bank", "video", minilm, tiny_videomae(), num_frames=8)


@pytest.mark.parametrize("family", ["xclip", "videomae"])
def test_clip_model_towers_freeze_blocks_and_checkpoint_activations(family):
    video = VIDEO_TOWERS[family](layers=2)
    tower = video.trainable_tower()
    if family == "xclip":  # only the video side is copied
        assert tower.model.text_model is None and tower.model.logit_scale is None
    x = torch.randn(2, 4, 3, 32, 32)
    tower(x).sum().backward()
    plain = {n: p.grad.clone() for n, p in tower.named_parameters()}
    tower.zero_grad()
    tower.set_activation_checkpointing(True)
    assert all(block.gradient_checkpointing for block in tower.blocks())
    tower(x).sum().backward()  # recomputed in backward, the same gradients (no dropout in these configs)
    for n, p in tower.named_parameters():
        torch.testing.assert_close(p.grad, plain[n], msg=n)
    freeze_first_blocks(tower, 1)
    blocks = tower.blocks()
    assert not any(p.requires_grad for p in blocks[0].parameters()) and not any(p.requires_grad for p in tower.stem())
    assert all(p.requires_grad for p in blocks[1].parameters())
    embeddings = tower.model.vision_model.embeddings if family == "xclip" else tower.model.embeddings
    assert not any(p.requires_grad for p in embeddings.parameters())
    if family == "xclip":  # after the ViT: the projection and the multi-frame integration transformer train
        assert all(p.requires_grad for p in tower.model.mit.parameters())
        assert tower.model.visual_projection.weight.requires_grad


def test_clip_transform_trains_on_one_crop_for_the_whole_clip():
    video = tiny_videomae()
    frames = np.random.default_rng(0).integers(0, 256, (4, 40, 48, 3), dtype=np.uint8)
    frames[1:] = frames[0]  # a still clip stays a still clip under the training crop
    train, test = video.clip_transform(train=True), video.clip_transform(train=False)
    torch.manual_seed(1)
    a = train(frames)
    torch.manual_seed(1)
    assert a.shape == (4, 3, 32, 32) and torch.equal(a, train(frames))  # draws from torch's generator
    assert all(torch.equal(a[0], a[j]) for j in range(1, 4))
    assert not torch.equal(a, test(frames))


@pytest.mark.parametrize("family", ["xclip", "videomae"])
def test_a_clip_model_tower_trains_a_step(root, tmp_path, minilm, family):
    # VideoMAE has no text space: modalities=video compares the window's VideoMAE feature with the animations'
    from functools import partial

    import pytorch_lightning as pl

    video = VIDEO_TOWERS[family]()
    dm = make(root, tmp_path / "bank", "video", minilm, video, batch_size=8, eval_batch_size=32)
    head = TrainableTowers(dm.feature_dim, "video", video_encoder=video, activation_checkpointing=True)
    before = {n: p.detach().clone() for n, p in head.video.named_parameters()}
    module = AllLayerModule(head, optimizer=partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.2), warmup_fraction=0)
    trainer = pl.Trainer(max_steps=2, limit_val_batches=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         use_distributed_sampler=False)
    trainer.fit(module, datamodule=dm)
    assert trainer.global_step == 2 and np.isfinite(trainer.callback_metrics["train/loss"].item())
    stayed = {n for n, p in head.video.named_parameters() if torch.equal(p.detach(), before[n])}
    # every parameter of the tower took the steps, but those whose gradient is zero by construction, which only
    # float rounding moves (it does on some CPUs, not on others): a key bias adds the same to every logit of a
    # query, which the softmax ignores; X-CLIP's first message attention reads identical tokens (every frame's
    # class embedding before any layer), so its query bias shifts every logit alike too
    zero_by_construction = ("k_proj.bias", "layers.0.message_attn.q_proj.bias")
    assert {n for n in stayed if not n.endswith(zero_by_construction)} == set()


def test_samples_are_deterministic_and_two_processes_share_one_global_batch(root, tmp_path, minilm):
    dm = make(root, tmp_path / "bank", "video+text", minilm, tiny_clip(), batch_size=6, max_sentences=2)
    dm.trainer = None
    one = next(iter(dm._loader("train", shuffle=True)))
    again = next(iter(dm._loader("train", shuffle=True)))
    for key in ("sample_id", "frames", "text_weight"):
        assert torch.equal(one[key], again[key])  # augmentations and sentence draws from (seed, epoch, sample)
    assert (one["text_weight"].sum(1) <= 2).all()
    loader = dm._loader("train", shuffle=True)
    parts = []
    for rank in (0, 1):
        loader.batch_sampler.rank, loader.batch_sampler.world_size = rank, 2
        parts.append(next(iter(loader)))
    assert torch.equal(torch.cat([p["sample_id"] for p in parts]), one["sample_id"])
    assert torch.equal(torch.cat([p["frames"] for p in parts]), one["frames"])
    assert parts[0]["labelled_total"] == parts[1]["labelled_total"] == one["labelled_total"]
    # another epoch: another order and other augmentation draws
    loader.batch_sampler.rank, loader.batch_sampler.world_size = 0, 1
    loader.batch_sampler.sampler.set_epoch(1)
    assert not torch.equal(next(iter(loader))["sample_id"], one["sample_id"])


def test_workers_decode_the_same_batches(root, tmp_path, minilm):
    dm = make(root, tmp_path / "bank", "video", minilm, tiny_clip(), batch_size=8)
    dm.trainer = None
    serial = list(dm._loader("train", shuffle=True))
    dm.num_workers = 2
    parallel = list(dm._loader("train", shuffle=True))
    assert len(serial) == len(parallel)
    for a, b in zip(serial, parallel):
        assert torch.equal(a["frames"], b["frames"]) and torch.equal(a["label"], b["label"])


def test_both_backends_decode_the_same_batches(root, tmp_path, minilm):
    # model=all_layer decodes with PyAV (it seeks faster); decord, the bank's backend, gives the same pixels
    frames = {}
    for backend in ("decord", "pyav"):
        dm = make(root, tmp_path / "bank", "video", minilm, tiny_clip(), batch_size=8, video_backend=backend)
        dm.trainer = None
        frames[backend] = [b["frames"] for _, b in zip(range(3), dm._loader("train", shuffle=True))]
    assert len(frames["pyav"]) == 3
    for a, b in zip(frames["decord"], frames["pyav"]):
        assert torch.equal(a, b)


def test_resumed_loader_skips_the_finished_batches(root, tmp_path, minilm):
    dm = make(root, tmp_path / "bank", "text", minilm, batch_size=7)
    dm.trainer = None
    loader = dm._loader("train", shuffle=True)
    loader.batch_sampler.sampler.set_epoch(3)
    full = [b["sample_id"] for b in loader]
    dm.load_state_dict({"epoch": 3, "batches_done": 2})
    assert [b["sample_id"] for b in loader][0].equal(full[2])
    assert len(list(loader)) == len(full)  # the skip applies once, to that epoch


def test_a_frame_that_fails_to_decode_names_the_file_and_the_time(root, tmp_path, minilm):
    broken = tmp_path / "broken"
    shutil.copytree(root, broken)
    dm = make(broken, tmp_path / "bank", "video", minilm, tiny_clip(), batch_size=2)
    video_id = dm.video_ids["val"][0]
    path = dm.dataset.recordings[video_id].video_path
    path.write_bytes(path.read_bytes()[:2000])  # truncated after the bank was built
    with pytest.raises(DataError, match=rf"{video_id}.*frames at \[.*\] s .*{path.name}"):
        next(iter(dm.loader("val")))


def test_freezing_blocks_and_the_optimiser_groups(minilm):
    video = tiny_clip()
    head = TrainableTowers(16 + 2 * 384, "video+text", video_encoder=video, text_encoder=minilm,
                           video_freeze_blocks=1, text_freeze_blocks=5)
    visual = head.video.visual
    assert not any(p.requires_grad for p in visual.transformer.resblocks[0].parameters())
    assert all(p.requires_grad for p in visual.transformer.resblocks[1].parameters())
    assert not visual.conv1.weight.requires_grad and visual.proj.requires_grad
    assert not any(p.requires_grad for p in head.text.embeddings.parameters())
    assert not any(p.requires_grad for p in head.text.encoder.layer[4].parameters())
    assert all(p.requires_grad for p in head.text.encoder.layer[5].parameters())
    with pytest.raises(ValueError, match="freeze 9 blocks"):
        freeze_first_blocks(head.video, 9)
    # the frozen encoders are untouched by the copies
    assert not any(p.requires_grad for p in video.model.parameters())


def test_warm_up_then_cosine_per_step(minilm):
    from functools import partial

    module = AllLayerModule(TrainableTowers(768, "text", text_encoder=minilm),
                            optimizer=partial(torch.optim.AdamW, lr=4e-6, weight_decay=0.2), text_lr=1e-5)

    class Trainer:
        estimated_stepping_batches = 20

    module._trainer = Trainer()
    config = module.configure_optimizers()
    optimizer, scheduler = config["optimizer"], config["lr_scheduler"]["scheduler"]
    assert config["lr_scheduler"]["interval"] == "step"
    assert {g["weight_decay"] for g in optimizer.param_groups} == {0.2, 0.0}
    lrs = []
    for _ in range(20):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs[0] == 0.0 and lrs[2] == pytest.approx(1e-5) and lrs[-1] < 1e-6  # 2 warm-up steps (10 %)


def test_the_recipe_and_the_paper_settings_compose():
    from conftest import compose_train

    cfg = compose_train("model=all_layer", "modalities=text")
    assert cfg.model._target_ == "models.all_layer.AllLayerModule"
    assert cfg.datamodule._target_ == "datamodules.all_layer.AllLayerDataModule"
    assert (cfg.model.optimizer._target_, cfg.model.optimizer.lr, cfg.model.optimizer.weight_decay) == \
        ("torch.optim.AdamW", 4e-6, 0.2)
    assert (cfg.datamodule.batch_size, cfg.trainer.max_epochs, cfg.model.warmup_fraction) == (16, 1, 0.1)
    assert (cfg.model.video_lr, cfg.model.text_lr) == (1e-3, 5e-5)  # chosen on val (docs/all_layer.md)
    # bare, the recipe trains the tiny random video tower (the synthetic demo); the command line overrides both
    bare = compose_train("model=all_layer")
    assert bare.modalities == "video" and bare.encoder.video.random_init and bare.encoder.video.model_cfg
    assert compose_train("model=all_layer", "encoder=clip_vit_b32").encoder.video.pretrained
    paper = compose_train("experiment=paper_all_layer", "modalities=text")
    assert (paper.model.video_lr, paper.model.text_lr, paper.model.optimizer.lr) == (None, None, 4e-6)
    # the other recipes keep Adam
    assert compose_train("model=lfb_avg").model.optimizer._target_ == "torch.optim.Adam"


@pytest.mark.parametrize("lfb", ["avg", "cat"])
def test_text_tower_under_an_lfb_head_starts_from_the_frozen_lfb_head(root, tmp_path, minilm, lfb):
    # the tower's cells equal the bank's cell_text, so the composed head equals the frozen LFB head on the bank
    from models.heads import LFBAvg, LFBCat

    dm = make(root, tmp_path / "bank", "text", minilm, batch_size=4, eval_batch_size=20, text_cells=lfb)
    frozen = StepRecognitionDataModule(Spacewalk18(root), tmp_path / "bank", text_encoder=minilm, bank_config=BANK,
                                       context_seconds=60.0, modalities="text", cells=True, batch_size=20,
                                       eval_batch_size=20)
    frozen.setup()
    batch, bank_batch = next(iter(dm.loader("val"))), next(iter(frozen.loader("val")))
    assert "text_ids" not in batch and torch.equal(batch["cell_mask"], bank_batch["cell_mask"])
    assert torch.equal(batch["query_pos"], bank_batch["query_pos"])
    head = TrainableTowers(dm.feature_dim, "text", text_encoder=minilm, lfb=lfb).eval()
    reference = {"avg": LFBAvg, "cat": LFBCat}[lfb](dm.feature_dim)
    reference.load_state_dict(head.lfb.state_dict())
    with torch.no_grad():
        cells = head.text_cells(batch)
        torch.testing.assert_close(cells[batch["cell_mask"]], bank_batch["cells"][bank_batch["cell_mask"]],
                                   atol=2e-3, rtol=0)
        torch.testing.assert_close(head(batch), reference(bank_batch), atol=3e-3, rtol=0)
    with pytest.raises(ValueError, match="modalities=text"):
        make(root, tmp_path / "bank", "video+text", minilm, tiny_clip(), text_cells=True)


@pytest.mark.parametrize("family", ["open_clip", "videomae"])
def test_video_cells_at_the_bank_fps_start_from_the_bank(root, tmp_path, minilm, family):
    # frames="cells": each window cell's frames at the bank's fps through the tower give the bank's cell features
    # (frames decoded at their own size and by the bank's backend here, so the pixels are the bank's)
    from models.heads import LFBAvg

    video = VIDEO_TOWERS[family]()
    bank = {**BANK, "frame_size": 64}  # the synthetic videos' own size: the bank does not resize
    args = dict(text_encoder=minilm, video_encoder=video, bank_config=bank, context_seconds=60.0, modalities="video")
    dm = AllLayerDataModule(Spacewalk18(root), tmp_path / "bank", frames="cells", video_backend="pyav",
                            text_cells="avg", batch_size=3, eval_batch_size=4, **args)
    dm.setup()
    frozen = StepRecognitionDataModule(Spacewalk18(root), tmp_path / "bank", cells=True, batch_size=4,
                                       eval_batch_size=4, **args)
    frozen.setup()
    batch, bank_batch = next(iter(dm.loader("test"))), next(iter(frozen.loader("test")))
    assert torch.equal(batch["cell_mask"], bank_batch["cell_mask"])
    assert torch.equal(batch["query_pos"], bank_batch["query_pos"])
    frames_per_cell = 12 if family == "open_clip" else 4  # 12 s at 1 fps; a clip model's own count
    assert batch["cell_frames"].shape[:2] == (int(batch["cell_mask"].sum()), frames_per_cell)
    assert ("cell_frame_mask" in batch) == (family == "open_clip")
    head = TrainableTowers(dm.feature_dim, "video", video_encoder=video).eval()
    lfb = TrainableTowers(dm.feature_dim, "video", video_encoder=video, lfb="avg").eval()
    reference = LFBAvg(dm.feature_dim)
    reference.load_state_dict(lfb.lfb.state_dict())
    with torch.no_grad():
        cells = head.video_cells(batch)
        torch.testing.assert_close(cells, bank_batch["cells"], atol=2e-3, rtol=0)  # the bank stores float16
        # without an LFB head: the window feature is the bank's dense one, the normalised mean of its cells
        dense = torch.from_numpy(np.asarray(frozen.splits["test"].clip[:4], np.float32))
        torch.testing.assert_close(head(batch), dense, atol=2e-3, rtol=0)
        torch.testing.assert_close(lfb(batch), reference(bank_batch), atol=3e-3, rtol=0)
    # a training batch backpropagates through every cell into the tower
    dm.trainer = None
    train = next(iter(dm._loader("train", shuffle=True)))
    lfb.train()
    lfb(train).square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in lfb.video.parameters())
    with pytest.raises(ValueError, match="frames=cells"):
        AllLayerDataModule(Spacewalk18(root), tmp_path / "bank", text_cells="avg", **args)
