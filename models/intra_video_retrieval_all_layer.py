"""Intra-video retrieval, all-layer fine-tuning (docs/spacewalk18.md, Intra-video retrieval; the paper: EgoVLP, AdamW lr
1e-6, 1 epoch, batch 32): the encoders themselves learn.

The towers are step recognition's (models/all_layer.py: TrainableTowers, trainable copies of the run's video
encoder's tower, `trainable_tower()`: open_clip, X-CLIP or VideoMAE, and the MiniLM text tower) in retrieval's
window layout [v], [t] or [v, t] (text_blocks=1); they make
the feature of each of a sample's three windows from the frames and sentences the DataModule decodes and
tokenises (datamodules/intra_video_retrieval_all_layer.py). Scores, loss (cross-entropy over the two
candidates), ties, evaluation and outputs are the last-layer recipe's (models/intra_video_retrieval.py). At
initialisation the towers are the frozen encoders, so the scores are zero-shot's (text: the bank's
text_pool=mean window feature) divided by the temperature, and the predictions are zero-shot's.

The optimiser is the step-recognition all-layer one (models/all_layer.py: tower_optimizer): AdamW, weight decay
on matrices only, an lr per tower, linear warm-up then cosine, stepped every optimiser step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from models.all_layer import TrainableTowers, check_warmup_fraction, tower_optimizer
from models.intra_video_retrieval import IntraVideoRetrievalModule
from spacewalk.core.errors import ConfigError


class AllLayerRetrievalModule(IntraVideoRetrievalModule):
    def __init__(self, head: TrainableTowers, optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 video_lr: float | None = None, text_lr: float | None = None, warmup_fraction: float = 0.1,
                 temperature: float = 0.05, normalize: bool = True, tie_seed: int = 43, output_dir=None):
        """`optimizer`: a partial (conf/optimizer/adamw.yaml); `video_lr` / `text_lr` override its lr per tower."""
        if not isinstance(head, TrainableTowers) or head.text_blocks != 1:
            raise ConfigError("the all-layer retrieval recipe trains TrainableTowers in retrieval's window layout, "
                              f"which holds the text once: TrainableTowers(text_blocks=1), got {type(head).__name__}")
        super().__init__(head, optimizer=optimizer, temperature=temperature, normalize=normalize, tie_seed=tie_seed,
                         output_dir=output_dir)
        check_warmup_fraction(warmup_fraction)

    def features(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        windows = {k: batch[k] for k in ("text_ids", "text_mask", "text_weight") if k in batch}
        if "frames" in batch:
            windows["frames"] = batch["frames"].flatten(0, 1)  # [3 B, k, 3, S, S], window j of sample b at 3 b + j
        f = self.head(windows).view(len(batch["label"]), 3, -1)
        return f[:, 0], f[:, 1:]

    def project(self, query: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return query, candidates  # the towers are the maps: no G^q, G^c on top

    def configure_optimizers(self) -> Any:
        return tower_optimizer(self, {"video": self.hparams.video_lr, "text": self.hparams.text_lr},
                               self.hparams.warmup_fraction)
