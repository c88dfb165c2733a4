"""Step-recognition batches: official samples + context windows, read from the feature bank.

Each sample at time t with window length w sees the bank cells overlapping [t - w/2, t + w/2] (clipped
to the recording). Everything per sample that does not depend on the batch (its window's cells, the
query cell, the clip feature) is computed once in `setup` with array operations per recording; a batch
is then one gather from the recording's in-memory cell matrix. Changing w re-slices the bank; it never
re-encodes anything.

A batch of B samples from R recordings:
  video_index [B], sample_id [B], label [B]   the sample (video_index indexes the split's video ids)
  clip [B, D]                                 the window's clip feature
  steps [R, S, D], step_mask [R, S]           the step features of the batch's recordings, once each
                                              (S = the most classes among them; padding rows False)
  step_row [B]                                each sample's row of steps / step_mask
  cells [B, M, D], cell_mask [B, M],          the window's cells, left-aligned, and the sample's cell;
  query_pos [B]                               only with `cells=True` (heads that read them)

Feature layout (the same for the clip, the cells and the steps, so zero-shot is a dot product):
  modalities video       clip [v]        steps [F_v(V^a)]
  modalities text        clip [t, t]     steps [F_t(T^a), F_t(C^a)]
  modalities video+text  clip [v, t, t]  steps [F_v(V^a), F_t(T^a), F_t(C^a)]
v is the window's video feature (`frame_sampling`): "dense" is the normalised mean of the window's cell
features (1 fps over the whole window, the paper's Dense Frame Sampling); "sparse" (the paper's default
for zero-shot) is k frames spread uniformly over the window, k = `num_frames` or the encoder's
pre-training count: the centres of k equal slices of the window, each taking the nearest of the bank's
1 fps frames (within 0.5 s), pooled as the encoder pools a clip. The bank keeps per-frame features only
for encoders that average frame embeddings (open_clip models, the thumbnail; `averages_frames`); for clip
models (X-CLIP, VideoMAE) and external features, sparse v would be one encoder call on k freshly decoded
frames per sample and context length, which no bank can precompute, so it is refused with an error. The
LFB heads read the cells, not v, so neither option changes them. t is the window transcript feature:
the normalised weighted mean of the embeddings of the window's sentences (strict-overlap rule of
docs/spacewalk18.md, Context windows). The paper encodes the joined window text instead; a sentence encoder truncates
long input (MiniLM: 256 word pieces, about 1.5 min of speech), so the mean keeps every sentence of a 20-minute window.
Within a cell the text block is the embedding of that cell's joined sentences.

How t pools the sentences (`text_pool`, the paper is silent since it encodes the joined text):
- "mean": every sentence of the window counts once;
- "duration": each sentence weighted by its seconds inside the window, so a one-word "Copy." weighs
  less than a long instruction, and a sentence that only grazes the window weighs little. A window
  whose sentences all have zero seconds inside falls back to counting each once.
A window without speech (`empty_text`):
- "zero": t = 0 (the paper's empty transcript; every text score is then 0);
- "nearest": t = the embedding of the sentence nearest in time to the sample;
- "widen": the window is doubled around the sample (clipped to the recording) until it holds speech.
The LFB cells always keep their own text (a silent cell is zero), whatever these say.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from datamodules.bank_windows import BankWindowsDataModule, Indices
from datamodules.global_batches import global_batch_sampler, share
from spacewalk.benchmarks.spacewalk18.data.dataset import SPLITS, Recording, Spacewalk18, StepSample
from spacewalk.benchmarks.spacewalk18.data.windows import context_windows
from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.modalities import Modalities
from spacewalk.media.grid import cell_of, cell_span

log = logging.getLogger(__name__)


@dataclass
class _SplitIndex:
    """Per-sample arrays of one split (all samples of all its recordings, recording-major)."""

    recording: np.ndarray  # int [N] index into the split's video ids
    sample_id: np.ndarray  # int [N]
    label: np.ndarray  # int [N]
    first_cell: np.ndarray  # int [N] first window cell (a bank row of the recording)
    num_cells: np.ndarray  # int [N]
    query_pos: np.ndarray  # int [N] the sample's cell, relative to first_cell
    clip: np.ndarray  # float32 [N, D]


class StepRecognitionDataModule(BankWindowsDataModule):
    text_blocks = 2  # the clip repeats t: [t, t] against the steps' [narration, caption]

    def __init__(self, dataset: Spacewalk18, bank_dir: str | Path, text_encoder=None, video_encoder=None,
                 bank_config: BankConfig | dict | None = None, context_seconds: float = 300.0,
                 modalities: str | Modalities = "text", batch_size: int = 2048, eval_batch_size: int | None = None,
                 num_workers: int = 0, text_pool: str = "mean", empty_text: str = "zero", seed: int = 0,
                 cells: bool | None = True, frame_sampling: str = "dense", num_frames: int | None = None):
        """`cells`: build the window cells (cells, cell_mask, query_pos) into every batch; only heads with
        `reads_cells` need them (models/heads.py), and train.py decides it from the configured head. None
        (the config's "let train.py decide", met outside it) builds them. `frame_sampling` and `num_frames`:
        the window's video feature v (module docstring); without video they change nothing. The others:
        datamodules/bank_windows.py."""
        super().__init__(dataset, bank_dir, text_encoder, video_encoder, bank_config, context_seconds, modalities,
                         batch_size, eval_batch_size, num_workers, text_pool, empty_text, frame_sampling, num_frames,
                         seed)
        self.cells = True if cells is None else bool(cells)
        if self.external_video_dim is not None and not self.modalities.text:
            self.check_external_step_video()
        self._warned_zero_step_video = False
        self.splits: dict[str, _SplitIndex] = {}
        self.cell_features: dict[str, list[np.ndarray]] = {}  # per split: [num_cells, D] per recording (if cells)
        self.step_features: dict[str, list[np.ndarray]] = {}  # per split: [K+1, D] per recording
        self.video_ids: dict[str, list[str]] = {}
        self.samples: dict[str, dict[str, list[StepSample]]] = {}

    # ---------------------------------------------------------------------------------------------

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        self.build_bank()
        for split in SPLITS:
            self._index_split(split)

    def layout(self, video: np.ndarray | None, text: np.ndarray | None, second_text: np.ndarray | None) -> np.ndarray:
        """[v], [t, t2] or [v, t, t2] by modality: one layout for clip, cells and steps alike."""
        blocks = ([video] if self.modalities.video else []) + ([text, second_text] if self.modalities.text else [])
        return np.concatenate([np.asarray(x, dtype=np.float32) for x in blocks], axis=1)

    def layout_blocks(self) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
        """The blocks of the layout as (modality, start, stop): of the clip and cells ([v], [t, t2] or [v, t, t2])
        and of the step features ([V], [narration, caption] or [V, narration, caption]); for block fusion
        (spacewalk/benchmarks/spacewalk18/decoding/emissions.py)."""
        widths = ([("video", self.feature_dim - (2 * self.bank.text_encoder.dim if self.modalities.text else 0))]
                  if self.modalities.video else [])
        if self.modalities.text:
            widths += [("text", self.bank.text_encoder.dim)] * 2
        starts = np.cumsum([0] + [w for _, w in widths])
        blocks = [(kind, int(a), int(a + w)) for (kind, w), a in zip(widths, starts)]
        return blocks, blocks

    def index_samples(self, name: str, samples: dict[str, list[StepSample]]) -> None:
        """Index samples other than a split's official ones under `name` (e.g. a regular time grid for a decoder,
        labels unknown), so that `loader(name)` batches them like a split's."""
        if name in ("train", "val", "test"):
            raise ValueError(f"{name!r} is an official split; index other samples under another name")
        self._index_split(name, samples)

    def _index_split(self, split: str, samples: dict[str, list[StepSample]] | None = None) -> None:
        samples = self.dataset.step_samples(split) if samples is None else samples
        video_ids = list(samples)
        cols = {k: [] for k in ("recording", "sample_id", "label", "first_cell", "num_cells", "query_pos", "clip")}
        cells, steps = [], []
        for r, video_id in enumerate(video_ids):
            rec: Recording = self.dataset.recordings[video_id]
            bank = self.bank.load(video_id)
            ss = samples[video_id]
            t = np.array([s.timestamp for s in ss])
            start, end = context_windows(t, self.context_seconds, rec.duration)
            # the cells overlapping each window and the sample's own cell (the grid's one rule)
            first, last = cell_span(start, end, bank.segment_seconds, bank.num_cells)
            query = cell_of(t, bank.segment_seconds, bank.num_cells)

            window_video = self.window_video(bank, start, end) if self.modalities.video else None
            window_text = (self.window_text(bank, rec.duration, t, self.context_seconds) if self.modalities.text
                           else None)
            cols["clip"].append(self.layout(window_video, window_text, window_text))
            cols["recording"].append(np.full(len(ss), r))
            cols["sample_id"].append(np.array([s.id for s in ss]))
            cols["label"].append(np.array([s.label for s in ss]))
            cols["first_cell"].append(first)
            cols["num_cells"].append(last - first + 1)
            cols["query_pos"].append(query - first)
            if self.cells:  # [num_cells, D] float32 per recording: 144 MB for the whole release at D = 768
                cells.append(self.layout(bank.video, bank.cell_text, bank.cell_text))
            steps.append(self.layout(self.steps_video(bank, rec), bank.step_narration, bank.step_caption))
        self.splits[split] = _SplitIndex(**{k: np.concatenate(v) for k, v in cols.items()})
        self.cell_features[split], self.step_features[split] = cells, steps
        self.video_ids[split], self.samples[split] = video_ids, samples

    def check_external_step_video(self) -> None:
        """modalities=video matches each window against the steps' video features alone, so external features
        must bring them (step_video.npy, optional beside text): refused before any bank is built, naming the
        first folder without it."""
        for video_id in self.bank_ids():
            file = self.bank.path(video_id) / "step_video.npy"
            if not file.is_file():
                raise DataError("modalities=video scores each window against the steps' video features, and this "
                                "external folder has none: add step_video.npy ([K+1, D], row 0 zero; "
                                "docs/feature_bank.md), or use modalities=video+text (the steps are then matched "
                                "by their text, the window by its video and text)", file=file, item=video_id,
                                field="step_video")

    def steps_video(self, bank, rec: Recording) -> np.ndarray | None:
        """The steps' video block: the bank's step_video, or zeros where external features come without it
        (step_video.npy is optional beside text: the steps are then matched by their narration and caption, as
        Irrelevant's zero row always is, and a trained head still reads the window's video through its map)."""
        if bank.step_video is not None or not self.modalities.video:
            return bank.step_video
        if not self._warned_zero_step_video:
            log.warning("feature bank: %s has no step_video.npy (external features): the steps' video block is zero "
                        "and they are matched by their text (docs/feature_bank.md)", bank.video_id)
            self._warned_zero_step_video = True
        return np.zeros((len(rec.steps), bank.video.shape[1]), np.float32)

    # ---------------------------------------------------------------------------------------------

    def collate(self, split: str, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        """One batch (the layout in the module docstring): the samples' clip features, their recordings'
        step features once per recording, and, when the head reads them (`cells`), their windows' cells."""
        ix = self.splits[split]
        idx = np.asarray(indices)
        # the batch's R recordings and each sample's row among them: the step features are per recording,
        # and copying them per sample would cost B x S x D (190 MB at B = 2048, S = 30, D = 768)
        recordings, step_row = np.unique(ix.recording[idx], return_inverse=True)
        features = [self.step_features[split][r] for r in recordings]
        s, d = max(len(f) for f in features), ix.clip.shape[1]
        steps = np.zeros((len(recordings), s, d), np.float32)
        step_mask = np.zeros((len(recordings), s), bool)
        for row, f in enumerate(features):
            steps[row, :len(f)] = f
            step_mask[row, :len(f)] = True
        batch = {
            "video_index": torch.from_numpy(ix.recording[idx]).long(),
            "sample_id": torch.from_numpy(ix.sample_id[idx]).long(),
            "label": torch.from_numpy(ix.label[idx]).long(),
            "clip": torch.from_numpy(ix.clip[idx]),
            "steps": torch.from_numpy(steps),
            "step_mask": torch.from_numpy(step_mask),
            "step_row": torch.from_numpy(step_row.reshape(-1)).long(),
        }
        if self.cells:
            batch |= self._window_cells(split, idx)
        return batch

    def _window_cells(self, split: str, idx: np.ndarray) -> dict[str, torch.Tensor]:
        """cells [B, M, D] (left-aligned, zero padding), cell_mask [B, M], query_pos [B]."""
        ix = self.splits[split]
        m = int(ix.num_cells[idx].max())
        cells = np.zeros((len(idx), m, ix.clip.shape[1]), np.float32)
        cell_mask = np.zeros((len(idx), m), bool)
        offsets = np.arange(m)
        for r in np.unique(ix.recording[idx]):
            rows = np.flatnonzero(ix.recording[idx] == r)
            cell_ids = ix.first_cell[idx[rows]][:, None] + offsets[None, :]
            valid = offsets[None, :] < ix.num_cells[idx[rows]][:, None]
            feats = self.cell_features[split][r]
            cells[rows] = np.where(valid[..., None], feats[np.minimum(cell_ids, len(feats) - 1)], 0.0)
            cell_mask[rows] = valid
        return {"cells": torch.from_numpy(cells), "cell_mask": torch.from_numpy(cell_mask),
                "query_pos": torch.from_numpy(ix.query_pos[idx]).long()}

    def collate_share(self, split: str, rank: int, world_size: int,
                      global_batch: Sequence[int]) -> dict[str, torch.Tensor]:
        """This process's share of a global batch (datamodules/global_batches.py), plus "labelled_total",
        the global batch's number of samples labelled 1..K, which weights the loss so that DDP's gradient
        average is the global batch's mean. A padding share gets label 0 (Irrelevant: no loss)."""
        global_batch = np.asarray(global_batch)
        indices, padding = share(global_batch, rank, world_size)
        batch = self.collate(split, indices)
        if padding:
            batch["label"] = torch.zeros_like(batch["label"])
        batch["labelled_total"] = torch.tensor(int((self.splits[split].label[global_batch] > 0).sum()))
        return batch

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        if world > 1 and trainer._accelerator_connector.use_distributed_sampler:
            raise ConfigError("the step-recognition loader splits global batches across processes itself: "
                              "set trainer.use_distributed_sampler=false (conf/trainer/default.yaml does)")
        n = len(self.splits[split].label)
        sampler = global_batch_sampler(n, self.batch_size if split == "train" else self.eval_batch_size, shuffle,
                                       self.seed)
        return DataLoader(Indices(n), batch_sampler=sampler, num_workers=self.num_workers,
                          collate_fn=partial(self.collate_share, split, rank, world),
                          persistent_workers=self.num_workers > 0)

    def loader(self, name: str) -> DataLoader:
        """All batches of split or indexed sample set `name`, in order, in this process (not shared across
        processes as the Trainer's loaders are)."""
        n = len(self.splits[name].label)
        return DataLoader(Indices(n), batch_sampler=global_batch_sampler(n, self.eval_batch_size, False),
                          collate_fn=partial(self.collate_share, name, 0, 1))

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
