"""The VideoMAE baseline: a tiny random VideoMAE's bank features, an MLP onto the caption embeddings, nearest step."""

from __future__ import annotations

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from datamodules.step_recognition import StepRecognitionDataModule
from models.videomae_mlp import CaptionRegressionModule, VideoToCaptionMLP
from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset

from conftest import tiny_videomae
from fakes import FakeText

SYNTHETIC = dict(n_train=2, n_val=1, n_test=1, minutes=(3, 4), steps_per_video=(3, 4), samples_per_video=60,
                 retrieval_samples_per_video=10, questions_per_video=2, progress=False)


def test_the_mlp_regresses_onto_captions_and_predicts_the_nearest(tmp_path):
    root = ensure_dataset(tmp_path / "sw18", seed=0, **SYNTHETIC)
    dm = StepRecognitionDataModule(Spacewalk18(root), tmp_path / "bank", text_encoder=FakeText(dim=8),
                                   video_encoder=tiny_videomae(hidden_size=32),
                                   bank_config=dict(segment_seconds=12.0, fps=1.0, frame_size=32, video_backend="pyav"),
                                   context_seconds=60.0, modalities="video+text", batch_size=32, cells=False)
    dm.setup()
    assert dm.feature_dim == 32 + 2 * 8
    torch.manual_seed(0)
    head = VideoToCaptionMLP(dm.feature_dim, text_dim=8, hidden=32)
    module = CaptionRegressionModule(head, optimizer=lambda params: torch.optim.Adam(params, lr=1e-2))
    batch = next(iter(dm.train_dataloader()))
    module.eval()  # no dropout
    with torch.no_grad():
        logits = module(batch)
        predicted = F.normalize(head(batch), dim=-1)
    # the scores are cosines with the caption block (the steps' last 8 columns), over the recording's classes
    captions = F.normalize(batch["steps"][batch["step_row"]][..., -8:], dim=-1)
    expected = torch.einsum("bd,bsd->bs", predicted, captions) / module.hparams.temperature
    finite = batch["step_mask"][batch["step_row"]]
    torch.testing.assert_close(logits[finite], expected[finite])
    with pytest.raises(ValueError, match="video\\+text"):
        VideoToCaptionMLP(16, text_dim=8)

    module.train()
    before = module.regression_loss(batch)[0].item()
    trainer = pl.Trainer(max_epochs=15, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         use_distributed_sampler=False)
    trainer.fit(module, datamodule=dm)
    module.train()
    assert module.regression_loss(batch)[0].item() < before - 0.05  # the regression loss went down
    trainer.test(module, datamodule=dm)
    assert np.isfinite(float(module.tau)) and module.test_results["Accuracy"] is not None


def test_the_recipe_composes():
    import hydra
    from omegaconf import open_dict

    from spacewalk.training.tasks import take_served_tasks

    from conftest import compose_train

    cfg = compose_train("model=videomae_mlp", "encoder=videomae", "modalities=video+text")
    assert cfg.datamodule.frame_sampling == "dense" and cfg.model.irrelevant == "threshold"
    take_served_tasks(cfg)
    with open_dict(cfg.model):
        cfg.model.head.dim = 768 + 2 * 384
    module = hydra.utils.instantiate(cfg.model)
    assert isinstance(module, CaptionRegressionModule) and module.head.video_dim == 768
