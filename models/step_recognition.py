"""Step recognition as contrastive scoring against the recording's step features (docs/spacewalk18.md, The paper's
models).

score_i = scale * <head(batch), f_i^a> for the recording's classes i = 0..K (padding rows -inf). Trained
with cross-entropy over steps 1..K only, on samples labelled 1..K: Irrelevant is not a class during
training. Irrelevant is then predicted either by a threshold tau on the best step score, fitted on
the validation split after every validation epoch (`irrelevant="threshold"`, the trained models of the
paper), or by the argmax over 0..K with the DES feature as class 0 (`irrelevant="argmax"`, the
paper's zero-shot model).

Scale: by default both sides are L2-normalised and divided by `temperature` 0.05 (logit scale 20),
so a logit is a cosine and the loss is well conditioned whatever the encoders' norms; the paper
states neither normalisation nor a temperature (its zero-shot model is the raw dot product, which
zero_shot.yaml keeps with normalize=false, temperature=1).

Metrics need whole videos, so validation and test collect the raw scores [s_0..s_K] of every sample
in a StepRecognitionMetric (gathered and de-duplicated across processes) and decide predictions
when the split is complete. The scores written and scored for mAP are [tau, s_1..s_K] in threshold
mode (Irrelevant's column is not used by mAP) and [s_0..s_K] in argmax mode. Runs that see part of a
split (fast_dev_run, limit_*_batches) fit tau and score on the complete videos only, with a warning;
the sanity check's batches are discarded.

Which videos a split has: `setup_metrics("val" | "test", video_ids, recordings, samples)`, where batch
"video_index" indexes `video_ids`; if it was not called, `setup` takes them from the trainer's
datamodule (`video_ids[split]`, `samples[split]`, `dataset.recordings`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn

from models.heads import head_reads_cells
from models.irrelevant_threshold import OBJECTIVES, Objective, apply_threshold, fit_threshold
from spacewalk.benchmarks.spacewalk18.data.dataset import Recording, StepSample
from spacewalk.benchmarks.spacewalk18.headlines import STEP_RECOGNITION
from spacewalk.benchmarks.spacewalk18.scoring.official import step_recognition_metrics
from spacewalk.benchmarks.spacewalk18.scoring.predictions import write_step_predictions
from spacewalk.benchmarks.spacewalk18.scoring.step_recognition_metric import StepRecognitionMetric, VideoOutputs
from spacewalk.core.errors import ConfigError
from spacewalk.results.layout import PREDICTIONS

log = logging.getLogger(__name__)

STAGE_SPLIT = {"validate": "val", "val": "val", "test": "test"}
IRRELEVANT_MODES = ("threshold", "argmax")


class StepRecognitionModule(pl.LightningModule):
    def __init__(self, head: nn.Module, optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 scheduler: Callable[..., Any] | None = None, temperature: float = 0.05, normalize: bool = True,
                 irrelevant: Literal["threshold", "argmax"] = "threshold", tau_objective: Objective = "macro_f1",
                 output_dir: str | Path | None = None):
        super().__init__()
        if irrelevant not in IRRELEVANT_MODES:
            raise ConfigError(f"irrelevant must be one of {IRRELEVANT_MODES}, got {irrelevant!r}")
        if tau_objective not in OBJECTIVES:
            raise ConfigError(f"tau_objective must be one of {OBJECTIVES}, got {tau_objective!r}")
        if temperature <= 0:
            raise ConfigError(f"temperature must be positive, got {temperature}")
        # plain values only, so checkpoints load with torch.load(weights_only=True): the head's weights
        # are in the state dict (load_from_checkpoint(path, head=...)), the optimiser is the run config's
        self.save_hyperparameters(logger=False, ignore=["head", "optimizer", "scheduler", "output_dir"])
        self.head = head
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.output_dir = output_dir
        # NaN until fitted; a buffer so that checkpoints carry it
        self.register_buffer("tau", torch.tensor(math.nan, dtype=torch.float64))
        self.metrics = nn.ModuleDict()
        self.test_results: dict[str, Any] | None = None
        # per split, the scores of the last complete pass as reported ({video: [n, K+1]}): what a decoder reads,
        # and its official metrics
        self.split_scores: dict[str, dict[str, np.ndarray]] = {}
        self.split_results: dict[str, dict[str, Any]] = {}

    # ---------------------------------------------------------------------------------------------
    # which videos each split has

    def setup_metrics(self, stage: str, video_ids: Sequence[str], recordings: Mapping[str, Recording],
                      samples: Mapping[str, Sequence[StepSample]]) -> None:
        split = STAGE_SPLIT[stage]
        self.metrics[split] = StepRecognitionMetric(video_ids, recordings, samples).to(self.device)

    def setup(self, stage: str) -> None:
        splits = {"fit": ["val"], "validate": ["val"], "test": ["test"]}.get(stage, [])
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        for split in splits:
            if split in self.metrics:
                continue
            if datamodule is None or not hasattr(datamodule, "video_ids"):
                raise RuntimeError(f"no videos for the {split} metric: call setup_metrics({split!r}, ...) or "
                                   "pass a datamodule with video_ids, samples and dataset.recordings")
            self.setup_metrics(split, datamodule.video_ids[split], datamodule.dataset.recordings,
                               datamodule.samples[split])

    # ---------------------------------------------------------------------------------------------
    # scoring and loss

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits [B, S] over the recording's classes 0..K; padded step rows are -inf.

        The batch carries each recording's step features once (`steps` [R, S, D], `step_row` [B]:
        datamodules/step_recognition.py). They are normalised per recording, then gathered per sample
        into the same product as when batches carried [B, S, D], so the logits are bit for bit the
        same; a [B, D] x [D, R*S] product would skip the gather but rounds differently.

        The head may run under mixed precision (trainer.precision=bf16-mixed); the scores are computed
        in float32 regardless: bfloat16's 8-bit mantissa would tie many scores, and ties change the
        argmax, tau and mAP."""
        if "cells" not in batch and head_reads_cells(self.head):
            raise KeyError(f"{type(self.head).__name__} reads the window cells but the batch has none: build "
                           "the DataModule with cells=True (train.py decides it from the head's reads_cells)")
        embedding = self.head(batch)
        row = batch["step_row"]
        with torch.autocast(device_type=embedding.device.type, enabled=False):
            embedding, steps = embedding.float(), batch["steps"].float()
            if self.hparams.normalize:
                embedding, steps = F.normalize(embedding, dim=-1), F.normalize(steps, dim=-1)
            logits = torch.einsum("bd,bsd->bs", embedding, steps[row]) / self.hparams.temperature
        return logits.masked_fill(~batch["step_mask"][row], -math.inf)

    @staticmethod
    def step_loss(logits: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Cross-entropy over steps 1..K on the samples labelled 1..K (mean), and how many there were."""
        labelled = label > 0
        n = int(labelled.sum())
        if n == 0:
            # keeps the graph (and DDP's gradient hooks) intact for a batch of Irrelevant samples only
            return logits[:, 1:].nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).sum() * 0.0, 0
        return F.cross_entropy(logits[labelled, 1:], label[labelled] - 1), n

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, n = self.step_loss(self(batch), batch["label"])
        if n:
            self.log("train/loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=n)
        world = self.trainer.world_size if self._trainer is not None else 1
        return self.share_of_global_loss(loss, n, batch.get("labelled_total"), world)

    @staticmethod
    def share_of_global_loss(loss: torch.Tensor, n: int, total: torch.Tensor | int | None,
                             world_size: int) -> torch.Tensor:
        """This process holds n of the global batch's `total` labelled samples (datamodules/global_batches.py);
        DDP averages the processes' gradients, so weighting its mean by n * world / total makes that average
        the gradient of the global batch's mean, as one process computes it."""
        if world_size > 1 and total is not None and n:
            return loss * (n * world_size / int(total))
        return loss

    def _eval_step(self, split: str, batch: dict[str, torch.Tensor]) -> None:
        logits = self(batch)
        # raw scores; the loss and the decisions wait for the whole split (tau is fitted on all of val)
        self.metrics[split].update(batch["video_index"], batch["sample_id"], logits.argmax(dim=1), logits)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step("val", batch)

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step("test", batch)

    # ---------------------------------------------------------------------------------------------
    # decisions over whole splits

    def _limited(self) -> bool:
        t = self.trainer
        limit = t.limit_test_batches if t.testing else t.limit_val_batches
        # an int limit is a number of batches (1 included); a float a fraction
        return bool(t.fast_dev_run) or isinstance(limit, int) or limit < 1.0

    def _gather(self, split: str) -> VideoOutputs | None:
        metric = self.metrics[split]
        if not metric.update_called:
            return None
        # a debugging run (fast_dev_run, limit_*_batches) sees parts of videos: score the complete ones
        outputs = metric.per_video(incomplete="drop" if self._limited() else "error")
        metric.reset()
        if outputs.incomplete:
            log.warning("%s: %d videos incomplete (limited batches), left out of tau and metrics: %s",
                        split, len(outputs.incomplete), outputs.incomplete)
        return outputs

    def fit_tau(self, scores: Mapping[str, np.ndarray], samples: Mapping[str, Sequence[StepSample]]) -> float:
        """Fit tau on raw scores [n, K+1] per video against the samples' labels; stores and returns it."""
        video_ids = list(scores)
        video = np.concatenate([np.full(len(scores[v]), i) for i, v in enumerate(video_ids)])
        label = np.concatenate([[s.label for s in samples[v]] for v in video_ids])
        step = np.concatenate([scores[v][:, 1:].argmax(axis=1) + 1 for v in video_ids])
        best = np.concatenate([scores[v][:, 1:].max(axis=1) for v in video_ids])
        num_classes = np.array([scores[v].shape[1] for v in video_ids])
        tau, f1 = fit_threshold(video, label, step, best, num_classes, self.hparams.tau_objective)
        self.tau.fill_(tau)
        log.info("tau = %.6g (%s %.4f on %d videos)", tau, self.hparams.tau_objective, f1, len(video_ids))
        return tau

    def decide(self, scores: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Predictions and the scores to report, per video, from raw scores [n, K+1]."""
        if self.hparams.irrelevant == "argmax":
            return {v: s.argmax(axis=1) for v, s in scores.items()}, dict(scores)
        tau = float(self.tau)
        if math.isnan(tau):
            raise RuntimeError("tau was never fitted: validate before testing (or load a checkpoint that was)")
        # Irrelevant's column is tau (not used by mAP); finite because prediction files must be
        finite_tau = float(np.clip(tau, -np.finfo(np.float32).max, np.finfo(np.float32).max))
        predictions, reported = {}, {}
        for v, s in scores.items():
            predictions[v] = apply_threshold(s[:, 1:].argmax(axis=1) + 1, s[:, 1:].max(axis=1), tau)
            reported[v] = np.concatenate([np.full((len(s), 1), finite_tau), s[:, 1:]], axis=1)
        return predictions, reported

    @staticmethod
    def split_loss(scores: Mapping[str, np.ndarray], samples: Mapping[str, Sequence[StepSample]],
                   partial: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None) -> float | None:
        """The training loss (cross-entropy over steps 1..K, samples labelled 1..K) over a whole split, from
        the gathered raw scores: every sample once, whatever the number of processes and batches, so that
        checkpoint selection on val/loss is the same under DDP as in one process. `partial`: the rows seen of
        incomplete videos, (sample ids, scores) each, also counted (a limited run: the loss needs no whole video)."""
        rows = [(video_id, np.arange(len(s)), s) for video_id, s in scores.items()]
        rows += [(video_id, ids, s) for video_id, (ids, s) in (partial or {}).items()]
        # videos differ in K: one cross-entropy sum per video, float64 so the order of summation is moot
        total, count = 0.0, 0
        for video_id, ids, s in rows:
            label = np.array([samples[video_id][i].label for i in ids], dtype=np.int64)
            labelled = label > 0
            if labelled.any():
                steps = torch.from_numpy(np.asarray(s[labelled, 1:], dtype=np.float64))
                total += float(F.cross_entropy(steps, torch.from_numpy(label[labelled] - 1), reduction="sum"))
                count += int(labelled.sum())
        return total / count if count else None

    def _score_split(self, split: str) -> dict[str, Any] | None:
        outputs = self._gather(split)
        if outputs is None:
            return None
        scores, metric = outputs.scores or {}, self.metrics[split]
        # a limited run's loss counts every sample seen: ModelCheckpoint(monitor="val/loss") needs it even when
        # no video was seen whole (limit_val_batches below one video's samples)
        loss = self.split_loss(scores, metric.samples, outputs.partial)
        if loss is not None:
            # identical on every process (gathered scores); sync_dist spares Lightning's warning
            self.log(f"{split}/loss", loss, prog_bar=split == "val", sync_dist=True)
        if not scores:
            if self._limited():
                log.warning("%s: no video seen whole in this limited run: loss only, no tau or metrics", split)
            return None
        threshold = self.hparams.irrelevant == "threshold"
        if split == "val" and threshold:
            self.fit_tau(scores, metric.samples)
        if threshold and math.isnan(float(self.tau)) and self._limited():
            log.warning("%s: no tau (validation saw no complete video in this limited run): not scored", split)
            return None
        predictions, reported = self.decide(scores)
        self.split_scores[split] = reported
        result = step_recognition_metrics(metric.recordings, metric.samples, predictions, reported, metric.undefined)
        self.split_results[split] = result
        values = {f"{split}/{h.name}": result[h.name] for h in STEP_RECOGNITION if result[h.name] is not None}
        if self.hparams.irrelevant == "threshold":
            values[f"{split}/tau"] = float(self.tau)
        # identical on every rank (gathered states): the mean over ranks changes nothing, and
        # sync_dist spares Lightning's warning about unsynchronised epoch-level logging
        self.log_dict(values, sync_dist=True)
        return {"predictions": predictions, "scores": reported, "metrics": result}

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            # a couple of batches: parts of videos, and tau must not come from them
            self.metrics["val"].reset()
            return
        self._score_split("val")

    def on_test_epoch_end(self) -> None:
        out = self._score_split("test")
        if out is None:
            return
        self.test_results = out["metrics"]
        # the predictions are this module's to write (it holds them); metrics.json is the run's
        # (spacewalk/training/step_recognition.py adds the selection criterion and the decoded metrics to test_record)
        if self.output_dir is not None and self.trainer.is_global_zero:
            write_step_predictions(Path(self.output_dir) / PREDICTIONS, out["predictions"], out["scores"])
            log.info("test predictions written to %s", self.output_dir)

    def test_record(self) -> dict[str, Any]:
        """What the test established, as metrics.json begins: the head, the Irrelevant rule, tau, the metrics."""
        if self.test_results is None:
            raise RuntimeError("no test results: test a whole split first")
        tau = float(self.tau)
        return {"split": "test", "model": type(self.head).__name__, "irrelevant": self.hparams.irrelevant,
                "tau": None if math.isnan(tau) or math.isinf(tau) else tau, **self.test_results}

    # ---------------------------------------------------------------------------------------------

    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad]
        if self.optimizer_factory is None or not params:
            return None
        optimizer = self.optimizer_factory(params=params)
        if self.scheduler_factory is None:
            return optimizer
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": self.scheduler_factory(optimizer=optimizer), "monitor": "val/loss",
                                 "interval": "epoch", "frequency": 1}}
