"""The HiREST joint model (docs/hirest.md, The paper's models): one encoder for moment retrieval, segmentation and
captioning.

The parts, one idea each: the network (models/hirest_joint_network.py), what it is trained on
(models/hirest_joint_losses.py), the segmentation decoding (models/hirest_segmentation.py), the captions'
beam search (models/beam_search.py) and the official prediction files (spacewalk/benchmarks/hirest/predictions.py);
this module trains them and runs inference, as below.

Time <-> frames: frame t is second t. A time s maps to frame min(ceil(s), T - 1) (the original's
`np.digitize(s, arange(T), right=True)`), a frame f back to f seconds.

Segmentation inference: models/hirest_segmentation.py (the original's `test_moment_segmentation`).

Losses and training. Each training batch holds ONE task (batch["task"]); AdamW (lr 1e-5, weight decay
0.01 = torch's default, which the original used) with a per-step schedule: linear warm-up over the first
10 % of the steps, then linear decay to 0 (`transformers.get_linear_schedule_with_warmup` in the
original). Gradient clipping at 5 and the 50 epochs are the TRAINER's settings
(`gradient_clip_val: 5`, `max_epochs: 50`); batch 5 is the data module's
(`datamodule.batch_size`, which conf/model/hirest_joint.yaml sets). Under DDP the tasks use different parameters: use
`strategy: ddp_find_unused_parameters_true` (the original ran DDP with find_unused_parameters=True).

Validation logs `val/moment_retrieval_loss`, `val/step_captioning_loss`, the teacher-forced
`val/moment_segmentation_loss` (for information) and `val/loss` = moment retrieval + captioning (the
original's checkpoint criterion: run.py sums the two val losses), for ModelCheckpoint(monitor="val/loss",
mode="min"). Each is a sample-weighted mean over the split (the original: a mean of batch means). Where
the original differs: the captioning loss ignores padding tokens (CLIP4Caption's `ignore_index=-1` also
trains every [PAD] after [SEP]), and padded frames are masked in attention (the original's encoder gets an
all-zero mask, which masks nothing).

Test and predict write the official formats (docs/hirest.md, Official scoring rules), atomically, into `output_dir`:
  predictions_moment_retrieval.json    {query: {video: {"bounds": [s, e]}}}
  predictions_moment_segmentation.json {video: {"bounds": [[s, e], ...]}}
  predictions_step_captioning.json     {video: {"captions": [{"sentence": ...}, ...], "bounds": [[s, e], ...]}}
`inference="oracle"`: each task from its own batches (segmentation of the GT moment, captions of the GT
steps: the official per-task evaluation). `inference="end_to_end"`: from the moment-retrieval batches
only: retrieval -> segmentation of the predicted moment -> captions of the predicted steps (the data
module then serves only those). Moment retrieval writes [min, max] of the two argmaxes (the original
writes them as they come, so a reversed pair scores 0 there).

Batch contract (datamodules/hirest.py builds it; padding is per batch, masks are bool):
  every task: task (str), video (list[str]), query_text (list[str]), frames [B, T, Dv], asr [B, T, Da],
    query [B, Dq], frame_mask [B, T]
  moment_retrieval: start_target, end_target [B] (absent on the masked test split)
  moment_segmentation, teacher forced: region_mask, boundary_mask [B, T], target [B]
  moment_segmentation, inference: moment [B, 2] (first, last frame, inclusive)
  step_captioning: frames / asr are the step's L frames; input_ids, target_ids [B, W], token_mask [B, W],
    step_index [B], step_bounds [B, 2] (seconds)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytorch_lightning as pl
import torch
from torch import nn
from torchmetrics import MeanMetric

from models.beam_search import beam_search
from models.hirest_joint_losses import task_loss
from models.hirest_joint_network import HiRESTJointModel
from models.hirest_segmentation import boundaries_to_steps, peak_span
from spacewalk.benchmarks.hirest import predictions as hirest_predictions
from spacewalk.benchmarks.hirest.joint_model_io import (
    BERT_CLS_ID,
    BERT_PAD_ID,
    BERT_SEP_ID,
    BERT_VOCAB_SIZE,
    INFERENCE_MODES,
    TASKS,
    caption_tokenizer,
    decode_caption,
    step_frame_indices,
)
from spacewalk.core.errors import ConfigError

log = logging.getLogger(__name__)

# the paper's optimiser (AdamW, lr 1e-5, weight decay 0.01 = torch's default, which the original used)
PAPER_OPTIMIZER = partial(torch.optim.AdamW, lr=1e-5, weight_decay=0.01)


class HiRESTJointModule(pl.LightningModule):
    def __init__(self, video_dim: int = 1024, query_dim: int = 1024, asr_dim: int = 384, use_asr: bool = True,
                 embed_dim: int = 512, hidden_dim: int = 768, num_layers: int = 2, num_heads: int = 12,
                 ffn_dim: int = 3072, max_frames: int = 2048, dropout: float = 0.1,
                 vocab_size: int = BERT_VOCAB_SIZE, decoder_layers: int = 2, max_words: int = 48,
                 caption_frames: int = 20, bos_id: int = BERT_CLS_ID, eos_id: int = BERT_SEP_ID,
                 pad_id: int = BERT_PAD_ID, beam_size: int = 3, segmentation_max_iterations: int = 20,
                 segmentation_peak_ratio: float = 0.5, min_step_seconds: int = 5,
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None, warmup_fraction: float = 0.1,
                 schedule: Literal["linear", "constant"] = "linear",
                 inference: Literal["oracle", "end_to_end"] = "oracle", caption_batch_size: int = 64,
                 output_dir: str | Path | None = None, tokenizer=None):
        """Dimensions of the features: video_dim / query_dim / asr_dim (the data's `features.video_dim`, ...).
        use_asr false: the no-audio ablation. `optimizer`: a factory of the optimiser given the parameters (Hydra's
        `_partial_`), by default the paper's AdamW with lr 1e-5 and weight decay 0.01 (`PAPER_OPTIMIZER`).
        `tokenizer`: decodes captions (default: `caption_tokenizer()`, loaded when first needed). The
        optimiser, the tokenizer and `output_dir` are kept out of the hyper-parameters (the run config has them)."""
        super().__init__()
        if inference not in INFERENCE_MODES:
            raise ConfigError(f"inference must be one of {INFERENCE_MODES}, got {inference!r}")
        if schedule not in ("linear", "constant"):
            raise ConfigError(f"schedule must be 'linear' or 'constant', got {schedule!r}")
        if not 0 <= warmup_fraction < 1:
            raise ConfigError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
        # plain values only: checkpoints load with load_from_checkpoint(path) and weights_only=True
        self.save_hyperparameters(logger=False, ignore=["optimizer", "output_dir", "tokenizer"])
        self.optimizer_factory = optimizer or PAPER_OPTIMIZER
        self.model = HiRESTJointModel(video_dim, query_dim, asr_dim, use_asr, embed_dim, hidden_dim, num_layers,
                                      num_heads, ffn_dim, max_frames, dropout, vocab_size, decoder_layers,
                                      max_words)
        self.output_dir = output_dir
        self._tokenizer = tokenizer
        self.val_losses = nn.ModuleDict({task: MeanMetric() for task in TASKS})
        self._outputs = hirest_predictions.empty()
        self.predictions: dict[str, dict] | None = None
        self._warned: set[str] = set()

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = caption_tokenizer()
        tok, hp = self._tokenizer, self.hparams
        ids = (tok.cls_token_id, tok.sep_token_id, tok.pad_token_id)
        if ids != (hp.bos_id, hp.eos_id, hp.pad_id) or len(tok) > hp.vocab_size:
            raise ConfigError(f"the tokenizer ([CLS], [SEP], [PAD] = {ids}, {len(tok)} tokens) does not match the "
                              f"model (bos/eos/pad = {(hp.bos_id, hp.eos_id, hp.pad_id)}, vocab {hp.vocab_size})")
        return tok

    # ---------------------------------------------------------------------------------------------
    # training and validation

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss = task_loss(self.model, batch)
        n = len(batch["video"])
        # every process runs the same task at each step (the round-robin loader), so syncing never waits
        # on a key that another process does not log
        self.log(f"train/{batch['task']}_loss", loss, on_step=True, on_epoch=True, batch_size=n, sync_dist=True)
        self.log("train/loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=n, sync_dist=True)
        return loss

    def validation_step(self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0) -> None:
        if batch["task"] == "moment_segmentation" and "target" not in batch:
            return  # an inference batch (no teacher forcing): no loss
        self.val_losses[batch["task"]].update(task_loss(self.model, batch).detach(), len(batch["video"]))

    def on_validation_epoch_end(self) -> None:
        values = {}
        for task, meter in self.val_losses.items():
            if meter.update_called:
                values[f"val/{task}_loss"] = meter.compute()
            meter.reset()
        parts = [values[f"val/{t}_loss"] for t in ("moment_retrieval", "step_captioning") if f"val/{t}_loss" in values]
        # already reduced over processes by the metrics; sync_dist spares Lightning's warning
        self.log_dict(values, sync_dist=True)
        if parts:
            self.log("val/loss", torch.stack(parts).sum(), prog_bar=True, sync_dist=True)
        elif not self.trainer.sanity_checking:
            log.warning("validation saw no moment retrieval or captioning batch: no val/loss")

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(params=self.parameters())
        if self.hparams.schedule == "constant":
            return optimizer
        total = self.trainer.estimated_stepping_batches
        if not math.isfinite(total) or total <= 0:
            log.warning("unknown number of training steps (max_epochs/max_steps unset): constant learning rate")
            return optimizer
        from transformers import get_linear_schedule_with_warmup  # what the original trains with

        total = int(total)
        scheduler = get_linear_schedule_with_warmup(optimizer, int(total * self.hparams.warmup_fraction), total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1}}

    # ---------------------------------------------------------------------------------------------
    # inference

    @torch.no_grad()
    def retrieve_moments(self, frames, query, asr, frame_mask) -> list[tuple[int, int]]:
        """(first, last) frame per row: independent argmaxes over the video's frames, in order."""
        start, end = self.model.moment_logits(frames, query, asr, frame_mask)
        start = start.masked_fill(~frame_mask, -math.inf).argmax(1).tolist()
        end = end.masked_fill(~frame_mask, -math.inf).argmax(1).tolist()
        return [(min(s, e), max(s, e)) for s, e in zip(start, end)]

    @torch.no_grad()
    def segment_moments(self, frames, query, asr, frame_mask, moment: torch.Tensor) -> list[list[tuple[int, int]]]:
        """Steps (first, last frame) tiling each row's moment [first, last] (see the module docstring)."""
        hp = self.hparams
        b, t = frame_mask.shape
        frame = torch.arange(t, device=frame_mask.device)[None]
        first, last = moment[:, 0], moment[:, 1]
        region = (frame >= first[:, None]) & (frame <= last[:, None]) & frame_mask
        marks = torch.zeros_like(region)
        marks[torch.arange(b, device=marks.device), first] = True
        found: list[list[int]] = [[] for _ in range(b)]
        for _ in range(hp.segmentation_max_iterations):
            active = region.any(1)
            if not bool(active.any()):
                break
            logits = self.model.boundary_logits(frames, query, asr, frame_mask, region, marks)
            probs = torch.where(active[:, None], logits.float().softmax(-1).nan_to_num(0.0), 0.0).cpu().numpy()
            for i in np.flatnonzero(active.cpu().numpy()):
                span = peak_span(probs[i], hp.segmentation_peak_ratio)
                if span is None:
                    continue
                left, right = span
                region[i, left:right + 1] = False
                marks[i, left] = marks[i, right] = True
                found[i] += [left, right]
        return [boundaries_to_steps(int(first[i]), int(last[i]), found[i], hp.min_step_seconds) for i in range(b)]

    @torch.no_grad()
    def caption(self, frames, query, asr) -> list[str]:
        """A caption per row of steps' frames [N, L, *], by beam search."""
        hp = self.hparams
        out = []
        for s in range(0, frames.shape[0], hp.caption_batch_size):
            rows = slice(s, s + hp.caption_batch_size)
            memory = self.model.caption_memory(frames[rows], query[rows], asr[rows])
            ids = beam_search(self.model.decoder, memory, None, hp.beam_size, hp.bos_id, hp.eos_id, hp.pad_id,
                              hp.max_words)
            out += [decode_caption(self.tokenizer, x) for x in ids]
        return out

    def caption_inputs(self, frames, query, asr, steps: Sequence[tuple[int, int, int]]):
        """Steps' input frames cut/stretched to `caption_frames`: (row, first, last) per step -> batch tensors."""
        index = torch.as_tensor(np.stack([step_frame_indices(a, b, self.hparams.caption_frames) for _, a, b in steps]),
                                device=frames.device)
        rows = torch.as_tensor([r for r, _, _ in steps], device=frames.device)
        return frames[rows[:, None], index], query[rows], asr[rows[:, None], index]

    def _warn_once(self, key: str, message: str, *args) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    def infer(self, batch: dict[str, Any]) -> dict[str, dict]:
        """Predictions of one batch ({task: {...}}, captions as {video: {step index: (sentence, bounds)}}),
        also added to the outputs of this epoch. A video segmented twice (under two queries) keeps its first
        segmentation and captions."""
        task, mode = batch["task"], self.hparams.inference
        frames, query, asr, mask = batch["frames"], batch["query"], batch["asr"], batch["frame_mask"]
        out = hirest_predictions.empty()
        if mode == "end_to_end" and task != "moment_retrieval":
            self._warn_once(f"skip:{task}", "end-to-end inference ignores %s batches (it chains from moment "
                            "retrieval; give the data module inference='end_to_end')", task)
            return out
        if task == "moment_retrieval":
            moments = self.retrieve_moments(frames, query, asr, mask)
            hirest_predictions.record_moments(out, batch["query_text"], batch["video"], moments)
            if mode == "end_to_end":
                self._chain(out, batch, moments)
        elif task == "moment_segmentation":
            steps = self.segment_moments(frames, query, asr, mask, batch["moment"])
            hirest_predictions.record_steps(out, batch["video"], steps)
        elif task == "step_captioning":
            sentences = self.caption(frames, query, asr)
            hirest_predictions.record_captions(out, batch["video"], batch["step_index"].tolist(),
                                               batch["step_bounds"].tolist(), sentences)
        else:
            raise ValueError(f"unknown task {task!r}; one of {TASKS}")
        seen = self._outputs["moment_segmentation"]
        for video in set(out["moment_segmentation"]) & set(seen):
            self._warn_once(f"dup:{video}", "%s is segmented twice (two queries?): keeping the first", video)
            del out["moment_segmentation"][video]
            if mode == "end_to_end":
                out["step_captioning"].pop(video, None)
        for t in TASKS:
            hirest_predictions.merge(self._outputs[t], out[t])
        return out

    def _chain(self, out: dict, batch, moments: Sequence[tuple[int, int]]) -> None:
        """End to end: segment the predicted moments, caption the predicted steps."""
        frames, query, asr, mask = batch["frames"], batch["query"], batch["asr"], batch["frame_mask"]
        steps = self.segment_moments(frames, query, asr, mask, torch.as_tensor(moments, device=mask.device))
        first: dict[str, int] = {}  # one video twice in this batch: its first row
        for i, video in enumerate(batch["video"]):
            first.setdefault(video, i)
        rows = list(first.values())
        hirest_predictions.record_steps(out, [batch["video"][i] for i in rows], [steps[i] for i in rows])
        flat = [(i, a, b) for i in rows for a, b in steps[i]]
        if not flat:
            return
        sentences = iter(self.caption(*self.caption_inputs(frames, query, asr, flat)))
        for i in rows:
            hirest_predictions.record_captions(out, [batch["video"][i]] * len(steps[i]), range(len(steps[i])),
                                               steps[i], [next(sentences) for _ in steps[i]])

    def test_step(self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0) -> None:
        self.infer(batch)

    def predict_step(self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0) -> dict[str, dict]:
        return self.infer(batch)

    def on_test_epoch_start(self) -> None:
        self._outputs = hirest_predictions.empty()

    def on_predict_epoch_start(self) -> None:
        self._outputs = hirest_predictions.empty()

    def on_test_epoch_end(self) -> None:
        self._finish()

    def on_predict_epoch_end(self) -> None:
        self._finish()

    def _gathered(self) -> dict[str, dict]:
        outputs = self._outputs
        if torch.distributed.is_available() and torch.distributed.is_initialized() \
                and torch.distributed.get_world_size() > 1:
            parts: list[Any] = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(parts, outputs)
            outputs = hirest_predictions.empty()
            for part in parts:  # padded duplicates (DistributedSampler) are identical
                for task in TASKS:
                    hirest_predictions.merge(outputs[task], part[task])
        return outputs

    def _finish(self) -> None:
        outputs = self._gathered()
        self.predictions = hirest_predictions.official(outputs)
        self._outputs = hirest_predictions.empty()
        if self.output_dir is not None and self.trainer.is_global_zero:
            written = self.write_predictions(self.output_dir)
            log.info("HiREST predictions written: %s", ", ".join(str(p) for p in written.values()))

    def write_predictions(self, out_dir: str | Path, predictions: Mapping[str, dict] | None = None) -> dict[str, Path]:
        """The official prediction files of the tasks that have predictions, written atomically."""
        predictions = self.predictions if predictions is None else predictions
        if predictions is None:
            raise RuntimeError("no predictions yet: run trainer.test or trainer.predict first")
        return hirest_predictions.write_predictions(out_dir, predictions)
