"""What both bank DataModules (step recognition, intra-video retrieval) share: the checks of their settings,
the feature bank they read (built once, shared across processes, re-checked after building), the width of
external video features, and the window features cut from a recording's bank.

A window [start, end) (docs/spacewalk18.md, Context windows: [t - w/2, t + w/2] clipped to the recording) has, by
`modalities`:
  v  its video feature (`frame_sampling`): "dense", the normalised mean of the bank cells it covers
     (spacewalk.media.grid.cell_span); "sparse", k frames spread over it from the bank's per-frame features
     (encoders that average frame embeddings only: open_clip, the thumbnail)
  t  its transcript feature (`window_text_features`: `text_pool`, `empty_text`)
How the blocks are laid out, and how many times t appears, is each DataModule's own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytorch_lightning as pl
from torch.utils.data import Dataset

from spacewalk.benchmarks.spacewalk18.data.dataset import SPLITS, Spacewalk18
from spacewalk.benchmarks.spacewalk18.features.bank import FeatureBank
from spacewalk.benchmarks.spacewalk18.features.build import unit_rows
from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
from spacewalk.benchmarks.spacewalk18.features.load import RecordingBank
from spacewalk.core.errors import ConfigError
from spacewalk.core.modalities import Modalities
from spacewalk.core.settings import from_mapping
from spacewalk.media.grid import cell_span

FRAME_SAMPLINGS = ("dense", "sparse")
TEXT_POOLS = ("mean", "duration")
EMPTY_TEXTS = ("zero", "nearest", "widen")


def window_text_features(sentences: np.ndarray, starts: np.ndarray, ends: np.ndarray, t: np.ndarray,
                         context_seconds: float, duration: float, pool: str = "mean",
                         empty: str = "zero") -> np.ndarray:
    """The window transcript feature t [N, Dt] of samples at times `t` (datamodules/step_recognition.py's
    docstring has the rules of `pool` and `empty`).

    sentences [S, Dt] are the sentence embeddings, starts/ends [S] their times in seconds.
    """
    if pool not in TEXT_POOLS:
        raise ConfigError(f"text_pool must be one of {TEXT_POOLS}, got {pool!r}")
    if not context_seconds > 0:  # an empty window has no sentence, and empty="widen" would double 0 s forever
        raise ConfigError(f"context_seconds must be positive, got {context_seconds}")
    if empty not in EMPTY_TEXTS:
        raise ConfigError(f"empty_text must be one of {EMPTY_TEXTS}, got {empty!r}")
    sentences = np.asarray(sentences, dtype=np.float32)
    starts, ends, t = (np.asarray(x, dtype=np.float64) for x in (starts, ends, t))

    def pooled(rows: np.ndarray, w: float) -> tuple[np.ndarray, np.ndarray]:
        start = np.maximum(t[rows] - w / 2, 0.0)[:, None]
        end = np.minimum(t[rows] + w / 2, duration)[:, None]
        overlap = (starts[None, :] < end) & (ends[None, :] > start)
        weight = overlap.astype(np.float32)
        if pool == "duration":
            seconds = np.clip(np.minimum(ends[None, :], end) - np.maximum(starts[None, :], start), 0.0, None)
            seconds = (seconds * overlap).astype(np.float32)
            # only zero-length sentences inside: count each once rather than lose the window's speech
            weight = np.where(seconds.sum(axis=1, keepdims=True) > 0, seconds, weight)
        return weight @ sentences, overlap.any(axis=1)

    out, has_speech = pooled(np.arange(len(t)), context_seconds)
    if len(starts) and not has_speech.all():
        if empty == "nearest":
            rows = np.flatnonzero(~has_speech)
            distance = np.maximum(np.maximum(starts[None, :] - t[rows, None], t[rows, None] - ends[None, :]), 0.0)
            out[rows] = sentences[distance.argmin(axis=1)]
        elif empty == "widen":
            w = context_seconds
            while not has_speech.all() and w < 2 * duration:
                w *= 2
                rows = np.flatnonzero(~has_speech)
                features, found = pooled(rows, w)
                out[rows[found]] = features[found]
                has_speech[rows[found]] = True
    return unit_rows(out)


def sparse_window_video(frames: np.ndarray, frame_time: np.ndarray, start: np.ndarray, end: np.ndarray,
                        k: int) -> np.ndarray:
    """Sparse frame sampling from per-frame features: for each window [start, end), the k timestamps at
    the centres of k equal slices (video.sparse_timestamps), each the nearest frame in `frame_time`, and
    the normalised mean of those frames' unit features (how a frame-averaging encoder pools a clip)."""
    frame_time = np.asarray(frame_time, dtype=np.float64)
    start, end = np.asarray(start, np.float64), np.asarray(end, np.float64)
    out = np.zeros((len(start), frames.shape[1]), np.float32)
    for i in range(k):  # one timestamp per sample at a time: never [N, k, D] in memory
        t = start + (i + 0.5) * (end - start) / k
        if len(frame_time) == 1:
            nearest = np.zeros(len(t), np.int64)
        else:
            right = np.clip(np.searchsorted(frame_time, t), 1, len(frame_time) - 1)
            nearest = np.where(t - frame_time[right - 1] <= frame_time[right] - t, right - 1, right)
        out += np.asarray(frames[nearest], dtype=np.float32)
    return unit_rows(out)


def dense_window_video(cells: np.ndarray, start: np.ndarray, end: np.ndarray, segment_seconds: float) -> np.ndarray:
    """The normalised mean of the cells [j k, (j+1) k) overlapping each window [start, end)
    (spacewalk.media.grid.cell_span), from cumulative sums: one pass over the recording's cells for every window."""
    cells = np.asarray(cells, dtype=np.float32)
    first, last = cell_span(start, end, segment_seconds, len(cells))
    csum = np.concatenate([np.zeros((1, cells.shape[1]), np.float64), np.cumsum(cells, axis=0)])
    return unit_rows(((csum[last + 1] - csum[first]) / (last - first + 1)[:, None]).astype(np.float32))


class Indices(Dataset):
    """Sample i is its index: the batch is assembled in the collate from the DataModule's arrays."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class BankWindowsDataModule(pl.LightningDataModule):
    """The shared part of the bank DataModules: settings checked, the bank, its build, the window video
    feature. A subclass says how many text blocks its layout has (`text_blocks`) and what it names in its
    errors (`task`)."""

    text_blocks = 1
    task = "bank"

    def __init__(self, dataset: Spacewalk18, bank_dir: str | Path, text_encoder=None, video_encoder=None,
                 bank_config: BankConfig | dict | None = None, context_seconds: float = 300.0,
                 modalities: str | Modalities = "text", batch_size: int = 2048, eval_batch_size: int | None = None,
                 num_workers: int = 0, text_pool: str = "mean", empty_text: str = "zero",
                 frame_sampling: str = "dense", num_frames: int | None = None, seed: int = 0):
        super().__init__()
        modalities = Modalities.parse(modalities)
        for name, value, allowed in (("text_pool", text_pool, TEXT_POOLS), ("empty_text", empty_text, EMPTY_TEXTS),
                                     ("frame_sampling", frame_sampling, FRAME_SAMPLINGS)):
            if value not in allowed:
                raise ConfigError(f"{name} must be one of {allowed}, got {value!r}")
        if num_frames is not None and (isinstance(num_frames, bool) or not isinstance(num_frames, int)
                                       or num_frames < 1):
            raise ConfigError(f"num_frames must be a positive int or None (the encoder's count), got {num_frames!r}")
        if modalities.text and text_encoder is None:
            raise ConfigError(f"modalities={modalities} needs a text encoder")
        if not context_seconds > 0:
            raise ConfigError(f"context_seconds must be positive, got {context_seconds}")
        self.dataset = dataset
        self.context_seconds = float(context_seconds)
        self.modalities = modalities
        self.text_pool, self.empty_text = text_pool, empty_text
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.num_workers = num_workers
        self.seed = seed  # the training order of epoch e is a permutation drawn from (seed, e)
        config = (bank_config if isinstance(bank_config, BankConfig)
                  else from_mapping(BankConfig, bank_config, "datamodule.bank_config"))
        self.bank = FeatureBank(bank_dir, dataset, text_encoder=text_encoder,
                                video_encoder=video_encoder if modalities.video else None, config=config)
        # Video without an encoder object: features extracted elsewhere, in external bank folders
        # (docs/feature_bank.md); their width is read now, as the model is built before any bank.
        self.external_video_dim: int | None = None
        if modalities.video and video_encoder is None:
            self.external_video_dim = self.bank.external_video_dim(self.bank_ids())  # a DataError if not
        self.frame_sampling = frame_sampling
        self.num_frames = None  # k of sparse sampling, where it applies
        if modalities.video and frame_sampling == "sparse":
            if not getattr(video_encoder, "averages_frames", False):
                what = ("external video features" if video_encoder is None
                        else f"{video_encoder.identity}, which encodes a clip as a whole,")
                raise ConfigError(
                    f"frame_sampling='sparse' pools k frames spread over each window from the bank's per-frame "
                    f"features, which only encoders that average frame embeddings have (open_clip, thumbnail); "
                    f"{what} would need one encoder call on k decoded frames per sample and context length, "
                    "which the bank cannot precompute: use datamodule.frame_sampling=dense")
            self.num_frames = num_frames or int(video_encoder.num_frames)

    def bank_ids(self) -> list[str]:
        """The recordings of every split: the bank holds them all, whatever a run reads."""
        return [v for split in SPLITS for v in self.dataset.splits[split]]

    def build_bank(self) -> None:
        """Every process builds its share of the recordings, then all wait, so extraction is split across
        processes; then every recording must be fresh (a build that left one stale is a bug, not data)."""
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        ids = self.bank_ids()
        self.bank.build(ids, rank=rank, world_size=world)
        if trainer is not None and world > 1:
            trainer.strategy.barrier("feature_bank")
        stale = [v for v in ids if not self.bank.is_fresh(v)]
        if stale:
            raise RuntimeError(f"feature bank {self.bank.directory} still stale after building: {stale}")

    @property
    def feature_dim(self) -> int:
        """D of the window feature, [v] then `text_blocks` copies of [t], known from the encoders (or the
        external video features' meta) before any bank is built (the model is built first, so under DDP the
        bank can be built inside fit, shared across ranks)."""
        dim = 0
        if self.modalities.video:
            encoder = self.bank.video_encoder
            dim += encoder.dim if encoder is not None else self.external_video_dim
        if self.modalities.text:
            dim += self.text_blocks * self.bank.text_encoder.dim
        return dim

    def window_video(self, bank: RecordingBank, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """v [N, Dv] of the windows [start, end) of one recording's bank (module docstring)."""
        if bank.video is None:
            raise ConfigError(f"{bank.video_id}: the feature bank holds no video features (a text-only bank, or "
                              f"no video file), but modalities={self.modalities}: use modalities=text")
        if self.frame_sampling == "sparse":
            return sparse_window_video(bank.frame_video, bank.frame_time, start, end, self.num_frames)
        return dense_window_video(bank.video, start, end, bank.segment_seconds)

    def window_text(self, bank: RecordingBank, duration: float, t: np.ndarray, context_seconds: float) -> np.ndarray:
        """t [N, Dt] of the windows of length `context_seconds` around times `t` (module docstring)."""
        return window_text_features(bank.sentence_text, bank.sentence_start, bank.sentence_end, t, context_seconds,
                                    duration, self.text_pool, self.empty_text)
