"""What the HiREST joint model is trained on, one loss per task (docs/hirest.md, The paper's models):
- moment retrieval: BCE of the start and end heads against one-hot frames, over the video's frames;
- moment segmentation: cross-entropy for the next boundary, teacher forced (the region and the boundaries
  so far are in the batch);
- step captioning: cross-entropy of the next token; padding tokens are ignored (where the original
  differs: CLIP4Caption's `ignore_index=-1` also trains every [PAD] after [SEP])."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from models.hirest_joint_network import HiRESTJointModel
from spacewalk.benchmarks.hirest.joint_model_io import TASKS


def moment_retrieval_loss(model: HiRESTJointModel, batch: Mapping[str, Any]) -> torch.Tensor:
    start, end = model.moment_logits(batch["frames"], batch["query"], batch["asr"], batch["frame_mask"])
    mask = batch["frame_mask"]
    losses = []
    for logits, target in ((start, batch["start_target"]), (end, batch["end_target"])):
        one_hot = F.one_hot(target, logits.shape[1]).to(logits.dtype)
        bce = F.binary_cross_entropy_with_logits(logits, one_hot, reduction="none")
        losses.append((bce * mask).sum() / mask.sum().clamp(min=1))
    return (losses[0] + losses[1]) / 2


def moment_segmentation_loss(model: HiRESTJointModel, batch: Mapping[str, Any]) -> torch.Tensor:
    logits = model.boundary_logits(batch["frames"], batch["query"], batch["asr"], batch["frame_mask"],
                                   batch["region_mask"], batch["boundary_mask"])
    return F.cross_entropy(logits, batch["target"])


def step_captioning_loss(model: HiRESTJointModel, batch: Mapping[str, Any]) -> torch.Tensor:
    memory = model.caption_memory(batch["frames"], batch["query"], batch["asr"])
    logits = model.decoder(batch["input_ids"], memory)
    mask = batch["token_mask"]
    return F.cross_entropy(logits[mask], batch["target_ids"][mask])


LOSSES = {"moment_retrieval": moment_retrieval_loss, "moment_segmentation": moment_segmentation_loss,
          "step_captioning": step_captioning_loss}


def task_loss(model: HiRESTJointModel, batch: Mapping[str, Any]) -> torch.Tensor:
    """The loss of the batch's task (each batch holds one)."""
    task = batch["task"]
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; one of {TASKS}")
    return LOSSES[task](model, batch)
