"""Intra-video retrieval (docs/spacewalk18.md, Intra-video retrieval): which of two candidate windows comes from the
query window's step.

score_c = <G^q(f_q), G^c(f_c)> / temperature for the two candidates c (features unit-normalised after
the maps when `normalize`), prediction = argmax. Heads:
- `SimilarityHead` (zero-shot): G^q = G^c = identity, no parameters (the paper's zero-shot similarity);
- `TwoTowerHead` (last-layer): two linear maps G^q and G^c of the frozen features, trained with
  cross-entropy over the two candidates; identity-initialised, so training starts from zero-shot.
A tie (e.g. both candidates scoring the same against a silent query window) is broken by a fair coin
drawn from a generator seeded with `tie_seed` and the sample's place in its split, so a run is
reproducible.

Validation and test collect the scores of every sample and score whole videos at the end of the epoch (accuracy per
video, then the mean, spacewalk.benchmarks.spacewalk18.scoring.official.retrieval_accuracy); under DDP each process
scores its share of every batch and the scores are gathered first, so the loss (the mean cross-entropy over the split)
and the accuracy are one process's. Training batches are global batches of which each process holds a share
(`labelled_total` is the global batch's size): the loss is weighted so that DDP's gradient average is the global
batch's mean (StepRecognitionModule.share_of_global_loss); a padding share (a last batch smaller than the number of
processes) adds nothing. The test epoch writes predictions.json in the official format ({video_id: [0 | 1, ...]}) into
`output_dir`.

Subclasses make the features themselves (`features(batch)`): the all-layer recipe
(models/intra_video_retrieval_all_layer.py) runs trainable encoders on the windows' frames and sentences.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn

from models.step_recognition import StepRecognitionModule
from spacewalk.benchmarks.spacewalk18.scoring.official import retrieval_accuracy
from spacewalk.benchmarks.spacewalk18.scoring.predictions import write_retrieval_predictions
from spacewalk.core.errors import ConfigError
from spacewalk.results.layout import PREDICTIONS

log = logging.getLogger(__name__)

STAGE_SPLIT = {"validate": "val", "val": "val", "test": "test"}


class SimilarityHead(nn.Module):
    """Zero-shot: the query and candidate features as they are."""

    def __init__(self, dim: int | None = None):
        super().__init__()

    def forward(self, query: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return query, candidates


class TwoTowerHead(nn.Module):
    """Last-layer fine-tuning: G^q for the query, G^c for the candidates (linear, dim -> dim)."""

    def __init__(self, dim: int, identity_init: bool = True):
        super().__init__()
        self.query_map, self.candidate_map = nn.Linear(dim, dim), nn.Linear(dim, dim)
        if identity_init:
            for layer in (self.query_map, self.candidate_map):
                nn.init.eye_(layer.weight)
                nn.init.zeros_(layer.bias)

    def forward(self, query: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.query_map(query), self.candidate_map(candidates)


def break_ties(scores: np.ndarray, seed: int) -> np.ndarray:
    """argmax over the two candidates of scores [N, 2], a seeded coin where they are equal."""
    coin = np.random.default_rng(seed).integers(0, 2, len(scores))
    return np.where(scores[:, 0] == scores[:, 1], coin, np.argmax(scores, axis=1)).astype(np.int64)


class IntraVideoRetrievalModule(pl.LightningModule):
    def __init__(self, head: nn.Module, optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 temperature: float = 1.0, normalize: bool = False, tie_seed: int = 43,
                 output_dir: str | Path | None = None):
        super().__init__()
        if temperature <= 0:
            raise ConfigError(f"temperature must be positive, got {temperature}")
        self.save_hyperparameters(logger=False, ignore=["head", "optimizer", "output_dir"])
        self.head = head
        self.optimizer_factory = optimizer
        self.output_dir = output_dir
        self._scores: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.split_results: dict[str, dict[str, Any]] = {}
        self.split_predictions: dict[str, dict[str, np.ndarray]] = {}
        self.test_results: dict[str, Any] | None = None

    def project(self, query: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's maps G^q, G^c (identity for zero-shot)."""
        return self.head(query, candidates)

    def scores(self, query: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        q, c = self.project(query, candidates)
        if self.hparams.normalize:
            q, c = F.normalize(q, dim=-1), F.normalize(c, dim=-1)
        return torch.einsum("bd,bkd->bk", q, c) / self.hparams.temperature

    def features(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """query [B, D] and candidates [B, 2, D] of a batch: the DataModule's window features."""
        return batch["query"], batch["candidates"]

    def _loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        scores = self.scores(*self.features(batch))
        if batch.get("padding", False):
            # keeps the graph (and DDP's gradient hooks) intact; a duplicate sample adds nothing
            return scores.sum() * 0.0, scores
        return F.cross_entropy(scores, batch["label"]), scores

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss, _ = self._loss(batch)
        n = 0 if batch.get("padding", False) else len(batch["label"])
        if n:
            self.log("train/loss", loss, prog_bar=True, batch_size=n)
        world = self.trainer.world_size if self._trainer is not None else 1
        return StepRecognitionModule.share_of_global_loss(loss, n, batch.get("labelled_total"), world)

    # ---- evaluation: whole splits ------------------------------------------------------------------

    def _eval_step(self, split: str, batch: dict[str, Any]) -> None:
        if batch.get("padding", False):
            return  # a duplicate of a sample another process holds
        scores = self.scores(*self.features(batch))
        self._scores.setdefault(split, []).append(
            (batch["video_index"].cpu().numpy(), batch["sample_id"].cpu().numpy(),
             scores.detach().float().cpu().numpy(), batch["label"].cpu().numpy()))

    def validation_step(self, batch, batch_idx):
        self._eval_step("val", batch)

    def test_step(self, batch, batch_idx):
        self._eval_step("test", batch)

    def on_validation_epoch_start(self):
        self._scores["val"] = []

    def on_test_epoch_start(self):
        self._scores["test"] = []

    def _finish(self, split: str) -> dict[str, Any] | None:
        parts = self._scores.pop(split, [])
        if self.trainer.world_size > 1:  # every process's share, in rank order, on every process
            gathered: list = [None] * self.trainer.world_size
            torch.distributed.all_gather_object(gathered, parts)
            parts = [p for rank_parts in gathered for p in rank_parts]
        if not parts or self.trainer.sanity_checking:
            return None
        datamodule = self.trainer.datamodule
        video_ids, samples = datamodule.video_ids[split], datamodule.samples[split]
        video_index = np.concatenate([p[0] for p in parts])
        sample_id = np.concatenate([p[1] for p in parts])
        scores = np.concatenate([p[2] for p in parts])
        label = np.concatenate([p[3] for p in parts])
        # the mean cross-entropy over the split's samples (what training minimises; ModelCheckpoint's monitor)
        loss = F.cross_entropy(torch.from_numpy(scores).double(), torch.from_numpy(label).long())
        self.log(f"{split}/loss", float(loss))
        predictions = {}
        for r, video_id in enumerate(video_ids):
            rows = np.flatnonzero(video_index == r)
            if len(rows) != len(samples[video_id]):
                log.warning("%s split: %s has %d of its %d samples scored (a partial run): left out", split,
                            video_id, len(rows), len(samples[video_id]))
                continue
            position = {s.id: i for i, s in enumerate(samples[video_id])}
            ordered = np.empty((len(rows), 2), np.float32)
            ordered[[position[int(i)] for i in sample_id[rows]]] = scores[rows]
            predictions[video_id] = break_ties(ordered, self.hparams.tie_seed + r)
        if not predictions:
            return None
        results = retrieval_accuracy(predictions, {v: samples[v] for v in predictions})
        self.split_results[split], self.split_predictions[split] = results, predictions
        self.log(f"{split}/accuracy", results["Accuracy"])
        return results

    def on_validation_epoch_end(self):
        self._finish("val")

    def on_test_epoch_end(self):
        results = self._finish("test")
        if results is None:
            return
        self.test_results = results
        if self.output_dir is not None and self.trainer.is_global_zero:
            out = Path(self.output_dir)
            # the predictions are this module's to write (it holds them); metrics.json is the run's
            # (spacewalk/training/intra_video_retrieval.py: the val numbers, the window, the sample sources beside)
            write_retrieval_predictions(out / PREDICTIONS, self.split_predictions["test"])

    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        if self.optimizer_factory is None or not params:
            return None
        return self.optimizer_factory(params=params)
