"""The HiREST joint model (BENCHMARKS 2.3): one encoder for moment retrieval, segmentation and captioning.

Architecture (the authors' j-min/HiREST `modeling.py` + CLIP4Caption, re-written; every size is a
constructor argument with the paper's default):
- input per frame (1 fps): LayerNorm(Linear(frame -> 512)) * unit(Linear(query -> 512))
  + Linear(LayerNorm(ASR 384)) (the subtitle embedding on each second it covers, zeros in silence)
  + MLP(time scaled to [-1, 1]) + mask embedding (1 inside the region of interest)
  + boundary embedding (segmentation only: 1 on the boundaries found so far);
- shared encoder: Linear(512 -> 768) + learned positions (2048) + LayerNorm, 2 post-LN transformer layers
  (768, 12 heads, GELU); random init (BERT-style N(0, 0.02) on the CLIP4Caption parts, PyTorch's defaults
  on the input layers, as the original before it loads CLIP4Caption's weights);
- moment retrieval: Linear(768, 1) start and end heads, BCE against one-hot frames over the video's
  frames, independent argmax;
- moment segmentation: Linear(768, 1) over frames, cross-entropy for the next boundary; frames outside
  [current step start, moment end] are masked and the boundaries so far are marked (teacher forcing);
- step captioning: the step's input frames cut to the first 20 or stretched to 20 by repetition, encoded,
  and a 2-layer post-LN transformer decoder (BERT-base uncased WordPiece, 48 tokens, embeddings tied to
  the output layer) with cross-attention; beam search (3).

Time <-> frames: frame t is second t. A time s maps to frame min(ceil(s), T - 1) (the original's
`np.digitize(s, arange(T), right=True)`), a frame f back to f seconds.

Segmentation inference (the original's `test_moment_segmentation`): start with the moment [s, e] as the
region and s marked; up to 20 times: softmax the masked logits, take the peak, grow [l, r] around it while
p / p_peak > 0.5, skip it if l == 0, else take l and r as boundaries, remove [l, r] from the region and
mark both. Then keep, from s, the boundaries at least 5 s after the last kept one, and close the last
step at e. Chosen here, where the original differs: boundaries are clamped into the moment (the original
can put one a frame before s or after e), and the last step [last boundary, e] is listed (the original
drops it; the official scoring's gap filling puts it back, so scores are equal, and end-to-end captioning
then captions the whole moment).

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

Test and predict write the official formats (BENCHMARKS 2.2), atomically, into `output_dir`:
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
from functools import partial
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric

from spacewalk.hirest.joint_model_io import (BERT_CLS_ID, BERT_PAD_ID, BERT_SEP_ID, BERT_VOCAB_SIZE, INFERENCE_MODES,
                                           PREDICTION_FILES, TASKS, caption_tokenizer, decode_caption,
                                           step_frame_indices)
from spacewalk.io import write_json

log = logging.getLogger(__name__)

# the paper's optimiser (AdamW, lr 1e-5, weight decay 0.01 = torch's default, which the original used)
PAPER_OPTIMIZER = partial(torch.optim.AdamW, lr=1e-5, weight_decay=0.01)


# --------------------------------------------------------------------------------------------------
# decoding: peaks, boundaries, steps


def peak_span(probs: np.ndarray, ratio: float, floor: float = 1e-5) -> tuple[int, int] | None:
    """[l, r] around the peak of `probs`, grown while p / p_peak > ratio (each side stops on the first frame
    at or under it, or at the ends); None for a negligible peak or one that reaches frame 0."""
    k = int(np.argmax(probs))
    peak = float(probs[k])
    if not peak >= floor:
        return None
    left = k
    while left > 0 and probs[left] / peak > ratio:
        left -= 1
    right = k
    while right < len(probs) - 1 and probs[right] / peak > ratio:
        right += 1
    if left == 0 or right == 0:
        return None
    return left, right


def boundaries_to_steps(start: int, end: int, found: Sequence[int], min_gap: int) -> list[tuple[int, int]]:
    """Steps tiling [start, end] from the boundaries found: clamped into the moment, kept when at least
    `min_gap` after the last kept one (from `start`), the last step closed at `end`."""
    inside = sorted({start, end} | {min(max(int(b), start), end) for b in found})
    kept = [inside[0]]
    for b in inside[1:-1]:
        if b - kept[-1] >= min_gap:
            kept.append(b)
    if end > kept[-1]:
        kept.append(end)
    if len(kept) == 1:
        return [(start, end)]
    return list(zip(kept[:-1], kept[1:]))


# --------------------------------------------------------------------------------------------------
# networks


def _bert_init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        module.weight.data.normal_(0.0, 0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        module.bias.data.zero_()
    if isinstance(module, nn.LayerNorm):
        module.weight.data.fill_(1.0)
        module.bias.data.zero_()


class JointEncoder(nn.Module):
    """Input embedding per frame + the shared transformer encoder: [B, T, *] -> [B, T, hidden_dim]."""

    def __init__(self, video_dim: int, query_dim: int, asr_dim: int = 384, use_asr: bool = True,
                 embed_dim: int = 512, hidden_dim: int = 768, num_layers: int = 2, num_heads: int = 12,
                 ffn_dim: int = 3072, max_frames: int = 2048, dropout: float = 0.1):
        super().__init__()
        self.max_frames = max_frames
        self.video_proj = nn.Linear(video_dim, embed_dim)
        self.video_norm = nn.LayerNorm(embed_dim)
        self.query_proj = nn.Linear(query_dim, embed_dim)
        self.asr = nn.Sequential(nn.LayerNorm(asr_dim), nn.Linear(asr_dim, embed_dim)) if use_asr else None
        self.temporal = nn.Sequential(nn.Linear(1, embed_dim), nn.Tanh(), nn.Linear(embed_dim, embed_dim))
        self.mask_embed = nn.Embedding(2, embed_dim)
        self.boundary_embed = nn.Embedding(2, embed_dim)
        # CLIP4Caption's visual encoder
        self.proj = nn.Linear(embed_dim, hidden_dim)
        self.positions = nn.Embedding(max_frames, hidden_dim)
        self.norm = nn.LayerNorm(hidden_dim, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(hidden_dim, num_heads, ffn_dim, dropout, activation="gelu",
                                           batch_first=True, norm_first=False)
        self.layers = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        for part in (self.proj, self.positions, self.norm, self.layers):
            part.apply(_bert_init)

    @staticmethod
    def scaled_time(frame_mask: torch.Tensor) -> torch.Tensor:
        """[B, T]: frame t of n valid frames at -1 + 2t / (n - 1) (-1 for n = 1), 0 on padding."""
        n = frame_mask.sum(1, keepdim=True).to(torch.float32)
        t = torch.arange(frame_mask.shape[1], device=frame_mask.device, dtype=torch.float32)[None]
        return torch.where(frame_mask, -1.0 + 2.0 * t / (n - 1).clamp(min=1.0), torch.zeros_like(t))

    def forward(self, frames: torch.Tensor, query: torch.Tensor, asr: torch.Tensor | None,
                frame_mask: torch.Tensor, region_mask: torch.Tensor,
                boundary_mask: torch.Tensor | None = None) -> torch.Tensor:
        b, t, _ = frames.shape
        if t > self.max_frames:
            raise ValueError(f"{t} frames, but the encoder has positions for {self.max_frames} "
                             "(the data module cuts videos to max_frames)")
        x = self.video_norm(self.video_proj(frames)) * F.normalize(self.query_proj(query), dim=-1)[:, None]
        if self.asr is not None:
            x = x + self.asr(asr)
        if boundary_mask is not None:
            x = x + self.boundary_embed(boundary_mask.long())
        x = x + self.temporal(self.scaled_time(frame_mask).to(x.dtype)[..., None])
        x = x + self.mask_embed(region_mask.long())
        h = self.proj(x) + self.positions(torch.arange(t, device=frames.device))[None]
        h = self.dropout(self.norm(h))
        return self.layers(h, src_key_padding_mask=~frame_mask)


class CaptionDecoder(nn.Module):
    """CLIP4Caption's decoder: token + position embeddings, post-LN layers (self-attention, cross-attention,
    feed-forward), a dense-GELU-LayerNorm transform and an output layer tied to the token embeddings."""

    def __init__(self, vocab_size: int = BERT_VOCAB_SIZE, hidden_dim: int = 768, num_layers: int = 2,
                 num_heads: int = 12, ffn_dim: int = 3072, max_words: int = 48, dropout: float = 0.1):
        super().__init__()
        self.max_words = max_words
        self.tokens = nn.Embedding(vocab_size, hidden_dim)
        self.positions = nn.Embedding(max_words, hidden_dim)
        self.norm = nn.LayerNorm(hidden_dim, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerDecoderLayer(hidden_dim, num_heads, ffn_dim, dropout, activation="gelu",
                                           batch_first=True, norm_first=False)
        self.layers = nn.TransformerDecoder(layer, num_layers)
        self.transform = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.GELU(),
                                       nn.LayerNorm(hidden_dim, eps=1e-12))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.apply(_bert_init)

    def forward(self, tokens: torch.Tensor, memory: torch.Tensor,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, L, V] for the next token at every position (causal; right padding needs no mask)."""
        length = tokens.shape[1]
        if length > self.max_words:
            raise ValueError(f"{length} tokens, but the decoder has positions for {self.max_words}")
        h = self.tokens(tokens) + self.positions(torch.arange(length, device=tokens.device))[None]
        h = self.dropout(self.norm(h))
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device, dtype=h.dtype)
        h = self.layers(h, memory, tgt_mask=causal, tgt_is_causal=True,
                        memory_key_padding_mask=None if memory_mask is None else ~memory_mask)
        return self.transform(h) @ self.tokens.weight.t() + self.bias


@torch.no_grad()
def beam_search(decoder: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor],
                memory: torch.Tensor, memory_mask: torch.Tensor | None, beam_size: int, bos_id: int,
                eos_id: int, pad_id: int, max_len: int) -> list[list[int]]:
    """Token ids per memory row (no [CLS], cut before [SEP]), best by summed log-probability.

    A hypothesis that emits [SEP] is finished and carried unchanged; decoding stops when every row's best
    hypothesis is finished (no live one can overtake it: log-probabilities only lower a score) or after
    `max_len` tokens. beam_size 1 is greedy decoding."""
    n, k = memory.shape[0], beam_size
    memory = memory.repeat_interleave(k, dim=0)
    memory_mask = None if memory_mask is None else memory_mask.repeat_interleave(k, dim=0)
    tokens = torch.full((n * k, 1), bos_id, dtype=torch.long, device=memory.device)
    scores = torch.zeros(n, k, device=memory.device)
    scores[:, 1:] = -math.inf  # all beams start identical: expand the first only
    finished = torch.zeros(n, k, dtype=torch.bool, device=memory.device)
    rows = torch.arange(n, device=memory.device)[:, None] * k
    for _ in range(max_len):
        logp = decoder(tokens, memory, memory_mask)[:, -1].float().log_softmax(-1)
        vocab = logp.shape[-1]
        logp = logp.view(n, k, vocab)
        carried = torch.full_like(logp, -math.inf)
        carried[..., pad_id] = 0.0
        logp = torch.where(finished[..., None], carried, logp)
        scores, flat = (scores[..., None] + logp).view(n, k * vocab).topk(k, dim=1)
        origin, token = flat // vocab, flat % vocab
        tokens = torch.cat([tokens[(rows + origin).view(-1)], token.view(-1, 1)], dim=1)
        finished = finished.gather(1, origin) | (token == eos_id)
        if bool(finished[:, 0].all()):
            break
    out = []
    for ids in tokens.view(n, k, -1)[:, 0, 1:].tolist():
        for stop in (eos_id, pad_id):
            if stop in ids:
                ids = ids[:ids.index(stop)]
        out.append(ids)
    return out


class HiRESTJointModel(nn.Module):
    """Encoder + the three task heads. Inputs follow the batch contract of the module docstring."""

    def __init__(self, video_dim: int, query_dim: int, asr_dim: int = 384, use_asr: bool = True,
                 embed_dim: int = 512, hidden_dim: int = 768, num_layers: int = 2, num_heads: int = 12,
                 ffn_dim: int = 3072, max_frames: int = 2048, dropout: float = 0.1,
                 vocab_size: int = BERT_VOCAB_SIZE, decoder_layers: int = 2, max_words: int = 48):
        super().__init__()
        self.encoder = JointEncoder(video_dim, query_dim, asr_dim, use_asr, embed_dim, hidden_dim, num_layers,
                                    num_heads, ffn_dim, max_frames, dropout)
        self.start_head = nn.Linear(hidden_dim, 1)
        self.end_head = nn.Linear(hidden_dim, 1)
        self.boundary_head = nn.Linear(hidden_dim, 1)
        self.decoder = CaptionDecoder(vocab_size, hidden_dim, decoder_layers, num_heads, ffn_dim, max_words,
                                      dropout)

    def moment_logits(self, frames, query, asr, frame_mask) -> tuple[torch.Tensor, torch.Tensor]:
        """Start and end logits [B, T]; the region is the whole video."""
        h = self.encoder(frames, query, asr, frame_mask, frame_mask)
        return self.start_head(h).squeeze(-1), self.end_head(h).squeeze(-1)

    def boundary_logits(self, frames, query, asr, frame_mask, region_mask, boundary_mask) -> torch.Tensor:
        """Next-boundary logits [B, T], -inf outside the region."""
        h = self.encoder(frames, query, asr, frame_mask, region_mask, boundary_mask)
        return self.boundary_head(h).squeeze(-1).masked_fill(~(region_mask & frame_mask), -math.inf)

    def caption_memory(self, frames, query, asr) -> torch.Tensor:
        """Encoder output [B, L, H] of steps' L frames (all valid, all inside the region)."""
        mask = torch.ones(frames.shape[:2], dtype=torch.bool, device=frames.device)
        return self.encoder(frames, query, asr, mask, mask)

    # losses -------------------------------------------------------------------------------------

    def moment_retrieval_loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        start, end = self.moment_logits(batch["frames"], batch["query"], batch["asr"], batch["frame_mask"])
        mask = batch["frame_mask"]
        losses = []
        for logits, target in ((start, batch["start_target"]), (end, batch["end_target"])):
            one_hot = F.one_hot(target, logits.shape[1]).to(logits.dtype)
            bce = F.binary_cross_entropy_with_logits(logits, one_hot, reduction="none")
            losses.append((bce * mask).sum() / mask.sum().clamp(min=1))
        return (losses[0] + losses[1]) / 2

    def moment_segmentation_loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        logits = self.boundary_logits(batch["frames"], batch["query"], batch["asr"], batch["frame_mask"],
                                      batch["region_mask"], batch["boundary_mask"])
        return F.cross_entropy(logits, batch["target"])

    def step_captioning_loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        memory = self.caption_memory(batch["frames"], batch["query"], batch["asr"])
        logits = self.decoder(batch["input_ids"], memory)
        mask = batch["token_mask"]
        return F.cross_entropy(logits[mask], batch["target_ids"][mask])

    def loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        task = batch["task"]
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; one of {TASKS}")
        return getattr(self, f"{task}_loss")(batch)


# --------------------------------------------------------------------------------------------------
# tokenizer


# --------------------------------------------------------------------------------------------------
# the LightningModule


def _merge(into: dict, other: Mapping) -> dict:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into.setdefault(key, value)
    return into


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
            raise ValueError(f"inference must be one of {INFERENCE_MODES}, got {inference!r}")
        if schedule not in ("linear", "constant"):
            raise ValueError(f"schedule must be 'linear' or 'constant', got {schedule!r}")
        if not 0 <= warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
        # plain values only: checkpoints load with load_from_checkpoint(path) and weights_only=True
        self.save_hyperparameters(logger=False, ignore=["optimizer", "output_dir", "tokenizer"])
        self.optimizer_factory = optimizer or PAPER_OPTIMIZER
        self.model = HiRESTJointModel(video_dim, query_dim, asr_dim, use_asr, embed_dim, hidden_dim, num_layers,
                                      num_heads, ffn_dim, max_frames, dropout, vocab_size, decoder_layers,
                                      max_words)
        self.output_dir = output_dir
        self._tokenizer = tokenizer
        self.val_losses = nn.ModuleDict({task: MeanMetric() for task in TASKS})
        self._outputs = self._empty_outputs()
        self.predictions: dict[str, dict] | None = None
        self._warned: set[str] = set()

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = caption_tokenizer()
        tok, hp = self._tokenizer, self.hparams
        ids = (tok.cls_token_id, tok.sep_token_id, tok.pad_token_id)
        if ids != (hp.bos_id, hp.eos_id, hp.pad_id) or len(tok) > hp.vocab_size:
            raise ValueError(f"the tokenizer ([CLS], [SEP], [PAD] = {ids}, {len(tok)} tokens) does not match the "
                             f"model (bos/eos/pad = {(hp.bos_id, hp.eos_id, hp.pad_id)}, vocab {hp.vocab_size})")
        return tok

    # ---------------------------------------------------------------------------------------------
    # training and validation

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss = self.model.loss(batch)
        n = len(batch["video"])
        # every process runs the same task at each step (the round-robin loader), so syncing never waits
        # on a key that another process does not log
        self.log(f"train/{batch['task']}_loss", loss, on_step=True, on_epoch=True, batch_size=n, sync_dist=True)
        self.log("train/loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=n, sync_dist=True)
        return loss

    def validation_step(self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0) -> None:
        if batch["task"] == "moment_segmentation" and "target" not in batch:
            return  # an inference batch (no teacher forcing): no loss
        self.val_losses[batch["task"]].update(self.model.loss(batch).detach(), len(batch["video"]))

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
        index = torch.as_tensor(np.stack([step_frame_indices(f, l, self.hparams.caption_frames) for _, f, l in steps]),
                                device=frames.device)
        rows = torch.as_tensor([r for r, _, _ in steps], device=frames.device)
        return frames[rows[:, None], index], query[rows], asr[rows[:, None], index]

    @staticmethod
    def _empty_outputs() -> dict[str, dict]:
        return {task: {} for task in TASKS}

    def _warn_once(self, key: str, message: str, *args) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    @staticmethod
    def _record_moments(out: dict, batch, moments: Sequence[tuple[int, int]]) -> None:
        for query, video, (s, e) in zip(batch["query_text"], batch["video"], moments):
            out["moment_retrieval"].setdefault(query, {})[video] = {"bounds": [float(s), float(e)]}

    @staticmethod
    def _record_steps(out: dict, videos: Sequence[str], steps: Sequence[Sequence[tuple[float, float]]]) -> None:
        for video, segs in zip(videos, steps):
            out["moment_segmentation"][video] = {"bounds": [[float(s), float(e)] for s, e in segs]}

    @staticmethod
    def _record_captions(out: dict, videos, indices, bounds, sentences) -> None:
        for video, index, (s, e), sentence in zip(videos, indices, bounds, sentences):
            out["step_captioning"].setdefault(video, {})[int(index)] = (sentence, [float(s), float(e)])

    def infer(self, batch: dict[str, Any]) -> dict[str, dict]:
        """Predictions of one batch ({task: {...}}, captions as {video: {step index: (sentence, bounds)}}),
        also added to the outputs of this epoch. A video segmented twice (under two queries) keeps its first
        segmentation and captions."""
        task, mode = batch["task"], self.hparams.inference
        frames, query, asr, mask = batch["frames"], batch["query"], batch["asr"], batch["frame_mask"]
        out = self._empty_outputs()
        if mode == "end_to_end" and task != "moment_retrieval":
            self._warn_once(f"skip:{task}", "end-to-end inference ignores %s batches (it chains from moment "
                            "retrieval; give the data module inference='end_to_end')", task)
            return out
        if task == "moment_retrieval":
            moments = self.retrieve_moments(frames, query, asr, mask)
            self._record_moments(out, batch, moments)
            if mode == "end_to_end":
                self._chain(out, batch, moments)
        elif task == "moment_segmentation":
            steps = self.segment_moments(frames, query, asr, mask, batch["moment"])
            self._record_steps(out, batch["video"], steps)
        elif task == "step_captioning":
            sentences = self.caption(frames, query, asr)
            self._record_captions(out, batch["video"], batch["step_index"].tolist(), batch["step_bounds"].tolist(),
                                  sentences)
        else:
            raise ValueError(f"unknown task {task!r}; one of {TASKS}")
        seen = self._outputs["moment_segmentation"]
        for video in set(out["moment_segmentation"]) & set(seen):
            self._warn_once(f"dup:{video}", "%s is segmented twice (two queries?): keeping the first", video)
            del out["moment_segmentation"][video]
            if mode == "end_to_end":
                out["step_captioning"].pop(video, None)
        for t in TASKS:
            _merge(self._outputs[t], out[t])
        return out

    def _chain(self, out: dict, batch, moments: Sequence[tuple[int, int]]) -> None:
        """End to end: segment the predicted moments, caption the predicted steps."""
        frames, query, asr, mask = batch["frames"], batch["query"], batch["asr"], batch["frame_mask"]
        steps = self.segment_moments(frames, query, asr, mask, torch.as_tensor(moments, device=mask.device))
        first: dict[str, int] = {}  # one video twice in this batch: its first row
        for i, video in enumerate(batch["video"]):
            first.setdefault(video, i)
        rows = list(first.values())
        self._record_steps(out, [batch["video"][i] for i in rows], [steps[i] for i in rows])
        flat = [(i, f, l) for i in rows for f, l in steps[i]]
        if not flat:
            return
        sentences = iter(self.caption(*self.caption_inputs(frames, query, asr, flat)))
        for i in rows:
            self._record_captions(out, [batch["video"][i]] * len(steps[i]), range(len(steps[i])), steps[i],
                                  [next(sentences) for _ in steps[i]])

    def test_step(self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0) -> None:
        self.infer(batch)

    def predict_step(self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0) -> dict[str, dict]:
        return self.infer(batch)

    def on_test_epoch_start(self) -> None:
        self._outputs = self._empty_outputs()

    def on_predict_epoch_start(self) -> None:
        self._outputs = self._empty_outputs()

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
            outputs = self._empty_outputs()
            for part in parts:  # padded duplicates (DistributedSampler) are identical
                for task in TASKS:
                    _merge(outputs[task], part[task])
        return outputs

    def _finish(self) -> None:
        outputs = self._gathered()
        captions = {video: {"captions": [{"sentence": steps[i][0]} for i in sorted(steps)],
                            "bounds": [steps[i][1] for i in sorted(steps)]}
                    for video, steps in sorted(outputs["step_captioning"].items())}
        self.predictions = {
            "moment_retrieval": {q: dict(sorted(v.items())) for q, v in sorted(outputs["moment_retrieval"].items())},
            "moment_segmentation": dict(sorted(outputs["moment_segmentation"].items())),
            "step_captioning": captions,
        }
        self._outputs = self._empty_outputs()
        if self.output_dir is not None and self.trainer.is_global_zero:
            written = self.write_predictions(self.output_dir)
            log.info("HiREST predictions written: %s", ", ".join(str(p) for p in written.values()))

    def write_predictions(self, out_dir: str | Path, predictions: Mapping[str, dict] | None = None) -> dict[str, Path]:
        """The official prediction files of the tasks that have predictions, written atomically."""
        predictions = self.predictions if predictions is None else predictions
        if predictions is None:
            raise RuntimeError("no predictions yet: run trainer.test or trainer.predict first")
        return {task: write_json(Path(out_dir) / PREDICTION_FILES[task], predictions[task])
                for task in TASKS if predictions.get(task)}
