"""All-layer fine-tuning (docs/spacewalk18.md, The paper's models): the encoders themselves learn, against frozen step
features.

`TrainableTowers` is a head (models/heads.py's contract: batch -> [B, D] in step-feature space) that owns
trainable copies of the run's encoders and reads the encoders' inputs the DataModule decodes and tokenises
(datamodules/all_layer.py) instead of bank features:
  video  frames [B, k, 3, S, S] -> the clip feature, exactly as the frozen video encoder computes it: the
         encoder hands over its own trainable copy (`trainable_tower()`, a spacewalk.encoders.VideoTower):
         open_clip image towers embed each frame and average the unit rows; X-CLIP and VideoMAE read the k
         frames as one clip
  text   the window's sentences through the text tower (MiniLM: mean pooling over tokens, unit rows), their
         mean over the window, unit row (the frozen recipes' text_pool=mean)
in the bank's layout [v], [t, t] or [v, t, t], so the step features of the animations and step texts (frozen,
from the feature bank: the encoders' own initial weights) are compared as in every recipe, and the model
starts from exactly the frozen encoders' window features. Loss and Irrelevant are the last-layer recipe's
(models/step_recognition.py: cross-entropy over steps 1..K, tau fitted on val).

`AllLayerModule` adds the paper's optimiser: AdamW (weight decay on matrices only, not on biases and norms,
as CLIP fine-tuning does), an lr per tower, linear warm-up over the first `warmup_fraction` of the optimiser
steps then cosine decay (transformers' get_cosine_schedule_with_warmup), stepped every optimiser step.
Under an LFB head (`lfb=avg|cat`), the tower encodes every k-second cell of the window (text: the cell's joined
sentences; video, with the DataModule's frames="cells": the cell's frames at the bank's fps, as the bank
encodes a cell) and the head aggregates them as models/heads.py's LFB Avg / Cat do; G is trained with its own
lr (`lfb_lr`). Without an LFB head, video cells give the window feature as the bank's dense one: the
normalised mean of the window's cell features.
Memory options: freeze the first N blocks of a tower (and everything before them), activation checkpointing;
trainer.precision=bf16-mixed and trainer.accumulate_grad_batches come from Lightning.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from models.step_recognition import StepRecognitionModule
from spacewalk.core.errors import ConfigError
from spacewalk.core.modalities import Modalities
from spacewalk.encoders import VideoTower

Batch = dict[str, Any]


def _blocks_and_stem(tower: nn.Module) -> tuple[nn.ModuleList, list[nn.Parameter]]:
    """The transformer blocks of a tower and the parameters that run before them: a video tower names its own
    (spacewalk.encoders.VideoTower); the text tower is a BERT-like model (encoder.layer, embeddings.*)."""
    if isinstance(tower, VideoTower):
        return tower.blocks(), tower.stem()
    blocks = getattr(getattr(tower, "encoder", None), "layer", None)
    if blocks is None:
        raise ValueError(f"cannot find the transformer blocks of {type(tower).__name__} to freeze")
    return blocks, [p for name, p in tower.named_parameters() if name.split(".")[0] == "embeddings"]


def freeze_first_blocks(tower: nn.Module, n: int) -> None:
    """Freeze the first n blocks and every parameter that runs before them (patch/token embeddings)."""
    if n <= 0:
        return
    blocks, before = _blocks_and_stem(tower)
    if n > len(blocks):
        raise ConfigError(f"cannot freeze {n} blocks (video_freeze_blocks / text_freeze_blocks) of a tower with "
                          f"{len(blocks)}")
    later = {id(p) for block in blocks[n:] for p in block.parameters()}
    for p in [p for block in blocks[:n] for p in block.parameters()] + before:
        if id(p) not in later:
            p.requires_grad_(False)


class TrainableTowers(nn.Module):
    reads_cells = False
    takes_encoders = True  # spacewalk/training/spacewalk18_modules.py passes the run's encoders

    def __init__(self, dim: int, modalities: str | Modalities, video_encoder=None, text_encoder=None,
                 video_freeze_blocks: int = 0, text_freeze_blocks: int = 0, activation_checkpointing: bool = False,
                 lfb: str | None = None, lfb_options: dict | None = None, text_blocks: int = 2):
        """`lfb`: None (the window feature) or "avg" / "cat": the tower encodes each k-second cell of the window
        (as the bank does) and that LFB head (models/heads.py, `lfb_options` its arguments) aggregates them;
        modalities=text (the DataModule's text_cells: each cell's joined sentences, as the bank does) or video
        (its frames="cells"). `text_blocks`: copies of the text feature in the output, as the features it is
        compared with lay them out: 2 in step recognition's bank layout [t, t] / [v, t, t], 1 in retrieval's
        window feature [t] / [v, t]."""
        super().__init__()
        if text_blocks not in (1, 2):
            raise ConfigError(f"text_blocks must be 1 or 2, got {text_blocks}")
        modalities = Modalities.parse(modalities)
        self.modalities, self.text_blocks = modalities, text_blocks
        self.video = self.text = self.lfb = None
        if lfb is not None:
            from models.heads import LFBAvg, LFBCat

            heads = {"avg": LFBAvg, "cat": LFBCat}
            if lfb not in heads or (modalities.video and modalities.text):
                raise ConfigError(f"lfb must be one of {tuple(heads)} with modalities=text or video, got {lfb!r} "
                                  f"with {modalities}")
            self.lfb = heads[lfb](dim, **(lfb_options or {}))
        if modalities.video:
            if not hasattr(video_encoder, "trainable_tower"):
                raise ConfigError("modalities with video need a video encoder with weights to train (open_clip, "
                                  f"X-CLIP, VideoMAE), got {getattr(video_encoder, 'identity', video_encoder)}")
            self.video = video_encoder.trainable_tower()
            freeze_first_blocks(self.video, video_freeze_blocks)
            if activation_checkpointing:
                self.video.set_activation_checkpointing(True)
        if modalities.text:
            if text_encoder is None or not hasattr(text_encoder, "model"):
                raise ConfigError("modalities with text need a sentence-transformers text encoder (MiniLM)")
            self.text = copy.deepcopy(text_encoder.model[0].auto_model).train().requires_grad_(True)
            if getattr(self.text, "pooler", None) is not None:
                # mean pooling never reads BERT's pooler: frozen, so DDP does not wait for its gradients
                self.text.pooler.requires_grad_(False)
            freeze_first_blocks(self.text, text_freeze_blocks)
            if activation_checkpointing:
                self.text.gradient_checkpointing_enable()
        width = (self.video.dim if self.video is not None else 0) + \
            (text_blocks * self.text.config.hidden_size if self.text is not None else 0)
        if width != dim:
            raise ConfigError(f"the towers give {width}-d features but the step features are {dim}-d")

    def encode_texts(self, ids: list[torch.Tensor], masks: list[torch.Tensor]) -> torch.Tensor:
        """[U, Dt] unit rows: mean pooling over tokens, as sentence-transformers does for MiniLM."""
        rows = []
        for chunk_ids, mask in zip(ids, masks):
            hidden = self.text(input_ids=chunk_ids, attention_mask=mask).last_hidden_state
            m = mask[..., None].to(hidden.dtype)
            rows.append(F.normalize((hidden * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1))
        if not rows:
            return torch.zeros(0, self.text.config.hidden_size, device=self.text.device)
        return torch.cat(rows).float()

    def text_feature(self, ids: list[torch.Tensor], masks: list[torch.Tensor], weight: torch.Tensor) -> torch.Tensor:
        sentences = self.encode_texts(ids, masks)
        if not len(sentences):  # no speech in any window of the batch: zero features (the paper's empty transcript)
            return weight.new_zeros(weight.shape[0], self.text.config.hidden_size)
        return F.normalize(weight.to(sentences.dtype) @ sentences, dim=-1)

    def text_cells(self, batch: Batch) -> torch.Tensor:
        """[B, M, 2 Dt]: the window's cells in the bank's text layout [t, t]; a silent cell is zero."""
        rows = self.encode_texts(batch["cell_text_ids"], batch["cell_text_mask"])
        rows = torch.cat([rows.new_zeros(1, self.text.config.hidden_size), rows])
        cells = rows[batch["cell_index"] + 1]
        return torch.cat([cells, cells], dim=-1)

    def video_cells(self, batch: Batch) -> torch.Tensor:
        """[B, M, Dv]: each window cell's clip feature (the DataModule's frames="cells"); padding is zero."""
        if "cell_frames" not in batch:
            raise ConfigError("video cells need the DataModule's frames='cells' (datamodule.frames=cells)")
        mask = batch.get("cell_frame_mask")
        rows = self.video(batch["cell_frames"]) if mask is None else self.video(batch["cell_frames"], mask)
        cell_mask = batch["cell_mask"]
        cells = rows.new_zeros(*cell_mask.shape, rows.shape[-1])
        cells[cell_mask] = rows  # cell_frames holds the cells sample by sample, in order
        return cells

    def forward(self, batch: Batch) -> torch.Tensor:
        if self.lfb is not None:
            cells = self.text_cells(batch) if self.video is None else self.video_cells(batch)
            return self.lfb({"cells": cells, "cell_mask": batch["cell_mask"], "query_pos": batch["query_pos"]})
        blocks = []
        if self.video is not None and "cell_frames" in batch:  # the bank's dense window feature
            blocks.append(F.normalize(self.video_cells(batch).sum(1), dim=-1))
        elif self.video is not None:
            blocks.append(self.video(batch["frames"]))
        if self.text is not None:
            t = self.text_feature(batch["text_ids"], batch["text_mask"], batch["text_weight"])
            blocks += [t] * self.text_blocks
        return torch.cat([b.float() for b in blocks], dim=-1)


class AllLayerModule(StepRecognitionModule):
    def __init__(self, head: TrainableTowers, optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 video_lr: float | None = None, text_lr: float | None = None, lfb_lr: float | None = None,
                 warmup_fraction: float = 0.1, **kwargs):
        """`optimizer`: a partial (conf/optimizer/adamw.yaml); `video_lr` / `text_lr` / `lfb_lr` override its lr
        for each tower and for an LFB head's G."""
        kwargs.pop("scheduler", None)
        super().__init__(head, optimizer=optimizer, **kwargs)
        check_warmup_fraction(warmup_fraction)

    def configure_optimizers(self) -> Any:
        return tower_optimizer(self, {"video": self.hparams.video_lr, "text": self.hparams.text_lr,
                                      "lfb": self.hparams.lfb_lr}, self.hparams.warmup_fraction)


def check_warmup_fraction(warmup_fraction: float) -> None:
    if not 0 <= warmup_fraction < 1:
        raise ConfigError(f"warmup_fraction must lie in [0, 1), got {warmup_fraction}")


def tower_optimizer(module, lrs: dict[str, float | None], warmup_fraction: float) -> dict[str, Any]:
    """The all-layer optimiser of `module` (a LightningModule with `head` and `optimizer_factory`): a parameter
    group per trainable part of the head named in `lrs` (its lr, or the factory's where None), weight decay on
    matrices only; linear warm-up over the first `warmup_fraction` of the optimiser steps, then cosine decay,
    stepped every optimiser step. Used by the step-recognition and the retrieval all-layer recipes."""
    from transformers import get_cosine_schedule_with_warmup

    groups = []
    for name, lr in lrs.items():
        tower = getattr(module.head, name, None)
        if tower is None:
            continue
        params = [p for p in tower.parameters() if p.requires_grad]
        extra = {} if lr is None else {"lr": lr}
        groups += [{"params": [p for p in params if p.ndim >= 2], **extra},
                   {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0, **extra}]
    groups = [g for g in groups if g["params"]]
    if not groups:
        raise ConfigError("all-layer: every parameter is frozen")
    optimizer = module.optimizer_factory(params=groups)
    total = int(module.trainer.estimated_stepping_batches)
    warmup = math.ceil(warmup_fraction * total)
    scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=warmup, num_training_steps=total)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1}}
