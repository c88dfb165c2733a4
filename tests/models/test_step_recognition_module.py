"""StepRecognitionModule: the loss, tau, and short Lightning runs on a separable toy problem (CPU)."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from models.heads import LFBAvg, LFBCat, LFBNonLocal, LFBTransformer, LinearHead, ZeroShot
from models.irrelevant_threshold import apply_threshold, fit_threshold, threshold_curve
from models.step_recognition import StepRecognitionModule
from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, Recording, Segment, Step
from spacewalk.benchmarks.spacewalk18.data.step_sampler import step_samples
from spacewalk.benchmarks.spacewalk18.scoring.official import step_recognition_metrics
from spacewalk.benchmarks.spacewalk18.scoring.predictions import read_step_predictions

from helpers.ddp_processes import ddp_strategy

D = 16


def adam(lr=1e-2):
    return partial(torch.optim.Adam, lr=lr)  # what Hydra's _partial_: true builds


# --------------------------------------------------------------------------------------------------
# a toy split: clip = R f_y^a + noise for steps, noise for Irrelevant; R a fixed rotation G must undo


def make_recording(video_id: str, num_steps: int, rng: np.random.Generator) -> Recording:
    labels = [-1] + [x for i in range(1, num_steps + 1) for x in ((i, 0) if i % 2 else (i,))] + [-1]
    lengths = rng.integers(100, 300, len(labels))
    edges = np.r_[0, np.cumsum(lengths)]
    segments = tuple(Segment(s / FPS, e / FPS, int(s), int(e), label)
                     for s, e, label in zip(edges[:-1], edges[1:], labels))
    steps = (Step(0, "Irrelevant", "", None, None),) + tuple(
        Step(i, f"step {i}", "", 0.0, 1.0) for i in range(1, num_steps + 1))
    return Recording(video_id, segments, steps, Path(f"/nonexistent/{video_id}.csv"),
                     Path(f"/nonexistent/{video_id}.mp4"))


class ToyData(pl.LightningDataModule):
    """Exposes video_ids / samples / dataset.recordings like the real DataModule, so the module's
    setup finds the metrics' videos by itself."""

    def __init__(self, samples_per_video: int = 60, batch_size: int = 64, cells: int = 5, seed: int = 0,
                 val_videos: int = 2):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.batch_size, self.m = batch_size, cells
        rotation = np.linalg.qr(rng.normal(size=(D, D)))[0]
        self.video_ids, self.samples, self.items, recordings = {}, {}, {}, {}
        for split, n_videos in (("train", 3), ("val", val_videos), ("test", 2)):
            self.video_ids[split], self.samples[split], self.items[split] = [], {}, []
            for v in range(n_videos):
                video_id = f"{split}{v}"
                rec = make_recording(video_id, int(rng.integers(3, 7)), rng)
                recordings[video_id] = rec
                samples = step_samples(rec.segments, rec.num_classes, samples_per_video)
                steps = rng.normal(size=(rec.num_classes, D))
                steps /= np.linalg.norm(steps, axis=1, keepdims=True)
                for s in samples:
                    clip = (rotation @ steps[s.label] if s.label else np.zeros(D)) + 0.3 * rng.normal(size=D)
                    n = int(rng.integers(1, cells + 1))
                    q = int(rng.integers(0, n))
                    cells_ = 0.3 * rng.normal(size=(n, D))
                    cells_[q] = clip
                    self.items[split].append((v, s.id, s.label, clip, cells_, q, steps))
                self.video_ids[split].append(video_id)
                self.samples[split][video_id] = samples
        self.dataset = SimpleNamespace(recordings=recordings)

    @staticmethod
    def collate(items):
        """The DataModule's layout: step features once per recording of the batch, a row index per sample."""
        b, m = len(items), max(len(it[4]) for it in items)
        videos, step_row = np.unique([it[0] for it in items], return_inverse=True)
        steps_of = {it[0]: it[6] for it in items}
        s = max(len(steps_of[v]) for v in videos)
        batch = {"cells": torch.zeros(b, m, D), "cell_mask": torch.zeros(b, m, dtype=torch.bool),
                 "steps": torch.zeros(len(videos), s, D), "step_mask": torch.zeros(len(videos), s, dtype=torch.bool),
                 "step_row": torch.from_numpy(step_row.reshape(-1)).long()}
        for i, (_, _, _, _, cells, _, _) in enumerate(items):
            batch["cells"][i, :len(cells)] = torch.from_numpy(cells).float()
            batch["cell_mask"][i, :len(cells)] = True
        for row, v in enumerate(videos):
            batch["steps"][row, :len(steps_of[v])] = torch.from_numpy(steps_of[v]).float()
            batch["step_mask"][row, :len(steps_of[v])] = True
        for key, j in (("video_index", 0), ("sample_id", 1), ("label", 2), ("query_pos", 5)):
            batch[key] = torch.tensor([it[j] for it in items], dtype=torch.long)
        batch["clip"] = torch.from_numpy(np.stack([it[3] for it in items])).float()
        return batch

    def _loader(self, split, shuffle=False):
        return DataLoader(self.items[split], batch_size=self.batch_size, shuffle=shuffle, collate_fn=self.collate)

    def train_dataloader(self):
        return self._loader("train", shuffle=True)

    def val_dataloader(self):
        return self._loader("val")

    def test_dataloader(self):
        return self._loader("test")


def trainer(**kwargs) -> pl.Trainer:
    defaults = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    return pl.Trainer(**(defaults | kwargs))


# --------------------------------------------------------------------------------------------------
# logits and loss


def hand_batch():
    g = torch.Generator().manual_seed(0)
    steps = torch.randn(4, 5, D, generator=g)
    step_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 0, 0]], dtype=torch.bool)
    # one recording per sample: step row i is sample i's
    return {"clip": torch.randn(4, D, generator=g), "steps": steps, "step_mask": step_mask,
            "step_row": torch.arange(4), "label": torch.tensor([3, 0, 1, 2]), "cells": torch.zeros(4, 1, D),
            "cell_mask": torch.ones(4, 1, dtype=torch.bool), "query_pos": torch.zeros(4, dtype=torch.long)}


def test_logits_are_scaled_cosines_with_padding_at_minus_infinity():
    module = StepRecognitionModule(ZeroShot(), temperature=0.5)
    batch = hand_batch()
    logits = module(batch)
    expected = F.cosine_similarity(batch["clip"][:, None], batch["steps"], dim=-1) / 0.5
    torch.testing.assert_close(logits[batch["step_mask"]], expected[batch["step_mask"]])
    assert torch.isneginf(logits[~batch["step_mask"]]).all()
    raw = StepRecognitionModule(ZeroShot(), normalize=False, temperature=1.0)(batch)
    torch.testing.assert_close(raw[0], batch["steps"][0] @ batch["clip"][0])


@pytest.mark.parametrize("normalize", [True, False])
def test_steps_once_per_recording_give_the_logits_of_steps_per_sample(normalize):
    # 5 samples of 2 recordings (3 and 5 classes). Batches used to carry the step features per sample
    # ([B, S, D], step_row = arange(B)); forward on that layout is the reference, and the per-recording
    # layout must give its logits bit for bit (published numbers must not move)
    g = torch.Generator().manual_seed(1)
    steps = torch.randn(2, 5, D, generator=g)
    step_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    steps[~step_mask] = 0.0
    row = torch.tensor([1, 0, 1, 1, 0])
    clip = torch.randn(5, D, generator=g)
    once = {"clip": clip, "steps": steps, "step_mask": step_mask, "step_row": row}
    per_sample = {"clip": clip, "steps": steps[row], "step_mask": step_mask[row], "step_row": torch.arange(5)}
    module = StepRecognitionModule(LinearHead(D), normalize=normalize, temperature=0.05)
    with torch.no_grad():
        assert torch.equal(module(once), module(per_sample))
        assert torch.isneginf(module(once)[1, 3:]).all() and torch.isfinite(module(once)[0]).all()


def test_a_head_that_reads_cells_refuses_a_batch_without_them():
    batch = hand_batch()
    for key in ("cells", "cell_mask", "query_pos"):
        del batch[key]
    StepRecognitionModule(LinearHead(D))(batch)  # reads the clip only
    with pytest.raises(KeyError, match="LFBAvg reads the window cells"):
        StepRecognitionModule(LFBAvg(D))(batch)


def test_loss_is_cross_entropy_over_steps_only_and_skips_irrelevant_samples():
    module = StepRecognitionModule(LinearHead(D))
    batch = hand_batch()
    loss, n = module.step_loss(module(batch), batch["label"])
    logits = module(batch)
    expected = torch.stack([F.cross_entropy(logits[i, 1:int(batch["step_mask"][i].sum())], batch["label"][i] - 1)
                            for i in (0, 2, 3)]).mean()
    assert n == 3
    torch.testing.assert_close(loss, expected)

    changed = dict(batch)
    changed["steps"] = batch["steps"].clone()
    changed["steps"][~batch["step_mask"]] = 100.0  # padded step rows
    changed["steps"][:, 0] = 100.0  # Irrelevant's row is not a class in training
    changed["clip"] = batch["clip"].clone()
    changed["clip"][1] = 100.0  # the Irrelevant sample
    torch.testing.assert_close(module.step_loss(module(changed), batch["label"])[0], loss)


def test_a_batch_of_irrelevant_samples_has_zero_loss_and_still_backpropagates():
    module = StepRecognitionModule(LinearHead(D))
    batch = hand_batch()
    loss, n = module.step_loss(module(batch), torch.zeros(4, dtype=torch.long))
    assert n == 0 and loss.item() == 0.0
    loss.backward()
    assert all(p.grad is not None and not p.grad.any() for p in module.parameters())


# --------------------------------------------------------------------------------------------------
# tau


def test_tau_by_hand_macro_and_binary_differ():
    # one video, K = 2. The threshold's predictions and macro-F1 (classes 0, 1, 2):
    #   tau = 0.8 -> [0, 1, 2, 0]: (2/3 + 2/3 + 1) / 3 = 7/9;  tau = 0.5 -> [0, 1, 2, 2]: (1 + 2/3 + 2/3) / 3 = 7/9
    # a tie, so the larger tau; binary F1 (Irrelevant positive) is 2/3 at 0.8 but 1 at 0.5.
    video, label = [0, 0, 0, 0], [0, 1, 2, 1]
    step, score = [1, 1, 2, 2], [0.3, 0.9, 0.8, 0.5]
    assert fit_threshold(video, label, step, score, [3], "macro_f1") == pytest.approx((0.8, 7 / 9))
    assert fit_threshold(video, label, step, score, [3], "binary_f1") == pytest.approx((0.5, 1.0))
    candidates, _ = threshold_curve(video, label, step, score, [3])
    assert candidates.tolist() == [math.inf, 0.9, 0.8, 0.5, 0.3, -math.inf]


def test_tau_macro_f1_is_a_mean_over_videos_not_pooled():
    # video 0 (K = 1) has only step samples, video 1 (K = 1) only Irrelevant ones: separable at 0.5
    video, label = [0, 0, 1, 1], [1, 1, 0, 0]
    tau, f1 = fit_threshold(video, label, [1, 1, 1, 1], [0.9, 0.7, 0.2, 0.1], [2, 2], "macro_f1")
    assert tau == 0.7 and f1 == 1.0
    assert apply_threshold([1, 1, 1, 1], [0.9, 0.7, 0.2, 0.1], tau).tolist() == [1, 1, 0, 0]


def test_tau_without_irrelevant_samples_never_predicts_irrelevant():
    tau, f1 = fit_threshold([0, 0], [1, 2], [1, 2], [0.4, 0.6], [3], "binary_f1")
    assert tau == 0.4 and f1 == 1.0


def _macro_f1_reference(video, label, pred, num_classes):
    per_video = []
    for v in np.unique(video):
        f1s = []
        for c in range(num_classes[v]):
            gt, p = label[video == v] == c, pred[video == v] == c
            if gt.sum() + p.sum():
                f1s.append(2 * (gt & p).sum() / (gt.sum() + p.sum()))
        per_video.append(np.mean(f1s))
    return np.mean(per_video)


def _binary_f1_reference(label, pred):
    gt, p = label == 0, pred == 0
    return 1.0 if gt.sum() + p.sum() == 0 else 2 * (gt & p).sum() / (gt.sum() + p.sum())


def test_tau_sweep_equals_a_loop_over_candidates():
    rng = np.random.default_rng(0)
    for _ in range(100):
        num_classes = rng.integers(2, 6, rng.integers(1, 5))
        n = int(rng.integers(1, 40))
        video = rng.integers(0, len(num_classes), n)
        label = rng.integers(0, num_classes[video])
        step = rng.integers(1, num_classes[video])
        score = np.round(rng.random(n), 1)  # ties
        for objective in ("macro_f1", "binary_f1"):
            candidates, f1 = threshold_curve(video, label, step, score, num_classes, objective)
            for tau, value in zip(candidates, f1):
                pred = apply_threshold(step, score, tau)
                expected = (_macro_f1_reference(video, label, pred, num_classes) if objective == "macro_f1"
                            else _binary_f1_reference(label, pred))
                assert value == pytest.approx(expected, abs=1e-9)


def test_threshold_mode_refuses_to_test_without_tau():
    module = StepRecognitionModule(LinearHead(D))
    with pytest.raises(RuntimeError, match="tau was never fitted"):
        module.decide({"a": np.zeros((3, 4))})


# --------------------------------------------------------------------------------------------------
# Lightning runs


class EpochLosses(pl.Callback):
    def __init__(self):
        self.losses = []

    def on_train_epoch_end(self, trainer, module):
        self.losses.append(float(trainer.callback_metrics["train/loss_epoch"]))


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A last-layer model trained a few epochs on the toy split, checkpoint saved."""
    pl.seed_everything(0, verbose=False)
    data = ToyData()
    module = StepRecognitionModule(LinearHead(D, identity_init=False), optimizer=adam(3e-2))
    losses = EpochLosses()
    t = trainer(max_epochs=6, callbacks=[losses])
    t.fit(module, datamodule=data)
    path = tmp_path_factory.mktemp("ckpt") / "last.ckpt"
    t.save_checkpoint(path)
    return SimpleNamespace(data=data, module=module, losses=losses.losses, metrics=dict(t.callback_metrics),
                           path=path)


def test_fit_lowers_the_loss_and_beats_chance(fitted):
    assert fitted.losses[-1] < 0.5 * fitted.losses[0]
    chance = 100 * np.mean([1 / fitted.data.dataset.recordings[v].num_classes for v in fitted.data.video_ids["val"]])
    assert float(fitted.metrics["val/Accuracy"]) > 2 * chance
    assert float(fitted.metrics["val/mAP"]) > 50
    assert math.isfinite(float(fitted.module.tau))
    assert float(fitted.metrics["val/tau"]) == pytest.approx(float(fitted.module.tau))


def test_checkpoint_keeps_tau_and_test_writes_official_files(fitted, tmp_path):
    loaded = StepRecognitionModule.load_from_checkpoint(fitted.path, head=LinearHead(D))
    assert float(loaded.tau) == float(fitted.module.tau)
    assert loaded.hparams.tau_objective == "macro_f1"
    loaded.output_dir = tmp_path
    trainer().test(loaded, datamodule=fitted.data)

    data = fitted.data
    recordings = {v: data.dataset.recordings[v] for v in data.video_ids["test"]}
    read = read_step_predictions(tmp_path / "predictions.json", recordings, data.samples["test"])
    assert read.scores is not None
    for v, scores in read.scores.items():
        assert (scores[:, 0] == float(loaded.tau)).all()
        best = scores[:, 1:].max(axis=1)
        np.testing.assert_array_equal(read.predictions[v], np.where(best >= float(loaded.tau),
                                                                    scores[:, 1:].argmax(axis=1) + 1, 0))
    expected = step_recognition_metrics(recordings, data.samples["test"], read.predictions, read.scores)
    record = loaded.test_record()  # how the run's metrics.json begins (spacewalk/training/step_recognition.py)
    for name in ("Accuracy", "mAP", "IoU"):
        assert record[name] == pytest.approx(expected[name])
        assert loaded.test_results[name] == pytest.approx(expected[name])
    assert record["tau"] == float(loaded.tau) and record["model"] == "LinearHead"
    assert not (tmp_path / "metrics.json").exists()  # the run writes it, once


def test_zero_shot_predicts_the_argmax_over_all_classes(tmp_path):
    data = ToyData(samples_per_video=30)
    module = StepRecognitionModule(ZeroShot(), irrelevant="argmax", normalize=False, temperature=1.0,
                                   output_dir=tmp_path)
    assert module.configure_optimizers() is None
    trainer().validate(module, datamodule=data)
    assert math.isnan(float(module.tau))
    trainer().test(module, datamodule=data)
    recordings = {v: data.dataset.recordings[v] for v in data.video_ids["test"]}
    read = read_step_predictions(tmp_path / "predictions.json", recordings, data.samples["test"])
    for vi, v in enumerate(data.video_ids["test"]):
        items = [it for it in data.items["test"] if it[0] == vi]
        raw = np.stack([it[6] @ it[3] for it in items])
        np.testing.assert_allclose(read.scores[v], raw, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(read.predictions[v], raw.argmax(axis=1))


def test_explicit_setup_metrics_takes_precedence():
    data = ToyData(samples_per_video=20)
    module = StepRecognitionModule(ZeroShot(), irrelevant="argmax")
    only_first = data.video_ids["val"][:1]
    module.setup_metrics("val", only_first, data.dataset.recordings, data.samples["val"])
    data.items["val"] = [it for it in data.items["val"] if it[0] == 0]
    metrics = trainer().validate(module, datamodule=data)[0]
    assert "val/Accuracy" in metrics and list(module.metrics["val"].video_ids) == only_first


@pytest.mark.parametrize("make_head", [
    lambda: LinearHead(D), lambda: LFBAvg(D), lambda: LFBCat(D), lambda: LFBNonLocal(D, width=32),
    lambda: LFBTransformer(D, nhead=4, dim_feedforward=32)], ids=["linear", "avg", "cat", "nl", "tf"])
def test_every_head_runs_fast_dev_run(make_head):
    # fast_dev_run=1: one batch of 32 per stage, so validation and test see the first video of 20 samples
    # whole and 12 of the second: tau and the metrics come from the complete video only, without an error
    data = ToyData(samples_per_video=20, batch_size=32)
    module = StepRecognitionModule(make_head(), optimizer=adam())
    before = [p.detach().clone() for p in module.parameters()]
    t = trainer(fast_dev_run=1)
    t.fit(module, datamodule=data)
    assert any(not torch.equal(a, p) for a, p in zip(before, module.parameters()))  # one optimiser step
    assert math.isfinite(float(module.tau))  # fitted on val0, the complete validation video
    t.test(module, datamodule=data)
    assert list(module.test_results["per_video"]) == ["test0"]


@pytest.mark.parametrize("batch_size", [32, 8], ids=["one-video-whole", "no-video-whole"])
def test_a_limited_validation_logs_the_loss_over_every_sample_seen(batch_size):
    # limit_val_batches=1: a batch of 32 sees val0 (20 samples) whole and 12 of val1; a batch of 8 no video whole.
    # The loss needs no whole video (ModelCheckpoint monitors it), the metrics and tau do.
    data = ToyData(samples_per_video=20, batch_size=batch_size)
    torch.manual_seed(0)
    module = StepRecognitionModule(LinearHead(D, identity_init=False))
    metrics = trainer(limit_val_batches=1).validate(module, datamodule=data)[0]
    batch = data.collate(data.items["val"][:batch_size])
    with torch.no_grad():
        logits = module(batch).double()
    labelled = batch["label"] > 0
    expected = F.cross_entropy(logits[labelled, 1:], batch["label"][labelled] - 1)
    assert metrics["val/loss"] == pytest.approx(float(expected), rel=1e-5)
    assert ("val/Accuracy" in metrics) == (batch_size == 32)
    assert math.isfinite(float(module.tau)) == (batch_size == 32)


class RecordTau(pl.Callback):
    def __init__(self, out_dir):
        self.out_dir = out_dir

    def on_validation_end(self, trainer, module):
        Path(self.out_dir, f"rank{trainer.global_rank}.json").write_text(json.dumps(
            {"tau": float(module.tau), "Accuracy": float(trainer.callback_metrics["val/Accuracy"])}))


@pytest.mark.slow  # two more processes (helpers/ddp_processes.py)
def test_ddp_ranks_fit_the_same_tau_as_one_process(tmp_path):
    # 3 x 21 validation samples over 2 ranks: the DistributedSampler repeats one, the metric drops it
    data = ToyData(samples_per_video=21, batch_size=16, val_videos=3)
    torch.manual_seed(0)
    module = StepRecognitionModule(LinearHead(D, identity_init=False))
    (tmp_path / "single").mkdir()
    trainer(callbacks=[RecordTau(tmp_path / "single")]).validate(module, datamodule=data)
    trainer(callbacks=[RecordTau(tmp_path)], strategy=ddp_strategy(), devices=2).validate(module, datamodule=data)
    expected = json.loads((tmp_path / "single" / "rank0.json").read_text())
    assert math.isfinite(expected["tau"])
    for rank in range(2):
        assert json.loads((tmp_path / f"rank{rank}.json").read_text()) == pytest.approx(expected)


def test_zero_shot_with_a_threshold_fits_tau_on_val_without_training(tmp_path):
    # the default zero_shot recipe: nothing to train, tau on the best raw step score, fitted by validate
    data = ToyData(samples_per_video=30)
    module = StepRecognitionModule(ZeroShot(), irrelevant="threshold", normalize=False, temperature=1.0,
                                   output_dir=tmp_path)
    assert module.configure_optimizers() is None
    trainer().validate(module, datamodule=data)
    tau = float(module.tau)
    assert math.isfinite(tau)
    trainer().test(module, datamodule=data)
    recordings = {v: data.dataset.recordings[v] for v in data.video_ids["test"]}
    read = read_step_predictions(tmp_path / "predictions.json", recordings, data.samples["test"])
    for vi, v in enumerate(data.video_ids["test"]):
        raw = np.stack([it[6] @ it[3] for it in data.items["test"] if it[0] == vi])
        expected = np.where(raw[:, 1:].max(axis=1) >= tau, raw[:, 1:].argmax(axis=1) + 1, 0)
        np.testing.assert_array_equal(read.predictions[v], expected)
