"""The VideoMAE baseline (docs/spacewalk18.md, The paper's models): a clip's VideoMAE embedding, an MLP trained to map
it to the SentenceBERT (MiniLM) embedding of the step caption, prediction by the nearest step caption.

The batch is the bank DataModule's with modalities=video+text (datamodules/step_recognition.py): the clip
layout is [v, t, t] and the step layout [F_v(V^a), F_t(T^a), F_t(C^a)]; this recipe reads only v of the clip
(the window's VideoMAE feature, dense: the mean of its cells) and only the caption block F_t(C^a) of the
steps, the last `text_dim` columns. The transcript of the window is not used.

Training: 1 - cos(MLP(v), caption of the sample's step) on samples labelled 1..K (the paper regresses onto
the caption embedding; it does not name the distance: cosine, since SentenceBERT embeddings are compared by
it). Scores: cos(MLP(v), caption_i) / temperature for i = 0..K; the nearest step among 1..K is predicted, and
Irrelevant by a threshold tau fitted on val as for every trained model (irrelevant=threshold), or as the
nearest caption among 0..K with the Irrelevant description as class 0 (irrelevant=argmax).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from models.step_recognition import StepRecognitionModule
from spacewalk.core.errors import ConfigError


class VideoToCaptionMLP(nn.Module):
    """v (the first dim - 2 text_dim columns of the clip) -> an embedding in the caption space [text_dim]."""

    reads_cells = False

    def __init__(self, dim: int, text_dim: int = 384, hidden: int = 1024, layers: int = 2, dropout: float = 0.1):
        super().__init__()
        self.video_dim, self.text_dim = dim - 2 * text_dim, text_dim
        if self.video_dim <= 0:
            raise ConfigError(f"the VideoMAE baseline needs modalities=video+text (clip [v, t, t]); got a {dim}-d "
                              f"clip with {text_dim}-d text")
        blocks, width = [], self.video_dim
        for _ in range(layers - 1):
            blocks += [nn.Linear(width, hidden), nn.GELU(), nn.Dropout(dropout)]
            width = hidden
        self.mlp = nn.Sequential(*blocks, nn.Linear(width, text_dim))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.mlp(batch["clip"][:, :self.video_dim])


class CaptionRegressionModule(StepRecognitionModule):
    def captions(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """[B, S, text_dim]: each sample's recording's step-caption embeddings, unit rows."""
        return F.normalize(batch["steps"][batch["step_row"]][..., -self.head.text_dim:].float(), dim=-1)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        predicted = F.normalize(self.head(batch).float(), dim=-1)
        logits = torch.einsum("bd,bsd->bs", predicted, self.captions(batch)) / self.hparams.temperature
        return logits.masked_fill(~batch["step_mask"][batch["step_row"]], -math.inf)

    def regression_loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
        """1 - cos(MLP(v), the caption of the sample's step), mean over samples labelled 1..K, and their count."""
        label = batch["label"]
        labelled = label > 0
        n = int(labelled.sum())
        predicted = F.normalize(self.head(batch).float(), dim=-1)
        if n == 0:
            return predicted.sum() * 0.0, 0  # keeps DDP's hooks and the graph intact
        target = self.captions(batch)[labelled, label[labelled]]
        return (1 - (predicted[labelled] * target).sum(-1)).mean(), n

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, n = self.regression_loss(batch)
        if n:
            self.log("train/loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=n)
        world = self.trainer.world_size if self._trainer is not None else 1
        return self.share_of_global_loss(loss, n, batch.get("labelled_total"), world)
