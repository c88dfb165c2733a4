"""Intra-video retrieval batches (docs/spacewalk18.md, Intra-video retrieval): a window of length w around the query and
around each candidate, read from the same per-recording feature banks as step recognition
(spacewalk/benchmarks/spacewalk18/features/bank.py). Changing w re-slices the bank; nothing is re-encoded.

Samples per split (`samples`): "official" reads tasks/intra-video_retrieval/<split>.json; "generated" runs
our sampler (spacewalk/benchmarks/spacewalk18/data/retrieval_sampler.py, settings in `sampler`, seed 43); "auto" (the
default) takes the official file where the root has one and is not a synthetic root, and generates
otherwise. So on the real release train is generated (the release has no train file) and val/test are the
official files, and on the synthetic default (recognised by its synthetic.json record) every split comes
from our sampler. The source of each split is logged and kept in `sources`.

A window around frame f is [t - w/2, t + w/2] clipped to the recording, t = f / 29.97 (the rule of 1.3).
Its feature, by `modalities`:
  video       [v]      v: the normalised mean of the bank's 12 s cells overlapping the window ("dense"), or
                       k frames spread over it from the per-frame features ("sparse", frame-averaging
                       encoders only), as in step recognition
  text        [t]      t: the window transcript feature of step recognition (sentence embeddings pooled by
                       `text_pool`; a silent window is `empty_text`: zero by default, so both candidates of
                       a silent query score alike and the model breaks the tie at random)
  video+text  [v, t]   each block unit-norm, so a dot product is the sum of the two cosines
The paper's zero-shot uses video only; the banks on these machines hold text only, so the framework
default (`modalities: text`) is what runs there, and `modalities=video` fails with a clear error on a
bank without video.

A batch: query [B, D], candidates [B, 2, D], label [B], video_index [B] (into `video_ids[split]`),
sample_id [B], and for DDP labelled_total (the global batch's size) and padding (a duplicate share).

DDP (trainer=ddp): `batch_size` is the global batch. Every process draws the same batches (the train order
comes from a generator seeded with `seed`, as in one process) and keeps its contiguous share of each
(datamodules/global_batches.share); the module weights the loss and gathers the evaluation scores, so two
processes compute what one does. The bank is built once, its recordings shared across the processes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from datamodules.bank_windows import BankWindowsDataModule, Indices
from datamodules.global_batches import share
from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, RETRIEVAL_DIR, SPLITS, RetrievalSample, Spacewalk18
from spacewalk.benchmarks.spacewalk18.data.retrieval_sampler import RetrievalSamplerConfig, recording_retrieval_samples
from spacewalk.benchmarks.spacewalk18.data.windows import context_windows
from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
from spacewalk.benchmarks.spacewalk18.features.load import RecordingBank
from spacewalk.core.errors import ConfigError
from spacewalk.core.modalities import Modalities
from spacewalk.core.settings import from_mapping

log = logging.getLogger(__name__)

SOURCES = ("auto", "official", "generated")
CHUNK = 2048  # windows per slice of the bank
SYNTHETIC_RECORD = "synthetic.json"  # spacewalk/benchmarks/spacewalk18/synthetic/'s record of a generated root


@dataclass
class RetrievalSplit:
    video_index: np.ndarray  # int [N]
    sample_id: np.ndarray  # int [N]
    label: np.ndarray  # int [N]
    features: np.ndarray | None  # float32 [N, 3, D]: query, candidate 0, candidate 1 (None: made by the model)


class IntraVideoRetrievalDataModule(BankWindowsDataModule):
    def __init__(self, dataset: Spacewalk18, bank_dir: str | Path, text_encoder=None, video_encoder=None,
                 bank_config: BankConfig | dict | None = None, context_seconds: float = 30.0,
                 modalities: str | Modalities = "text", batch_size: int = 2048, eval_batch_size: int | None = None,
                 num_workers: int = 0, text_pool: str = "mean", empty_text: str = "zero",
                 frame_sampling: str = "dense", num_frames: int | None = None,
                 samples: dict[str, str] | None = None, sampler: RetrievalSamplerConfig | dict | None = None,
                 seed: int = 0):
        """`samples` and `sampler`: where each split's samples come from (module docstring); the others:
        datamodules/bank_windows.py."""
        super().__init__(dataset, bank_dir, text_encoder, video_encoder, bank_config, context_seconds, modalities,
                         batch_size, eval_batch_size, num_workers, text_pool, empty_text, frame_sampling, num_frames,
                         seed)
        self.sample_sources = {s: "auto" for s in SPLITS} | dict(samples or {})
        for split, source in self.sample_sources.items():
            if split not in SPLITS or source not in SOURCES:
                raise ConfigError(f"samples: expected {{split: one of {SOURCES}}} for splits {SPLITS}, got "
                                  f"{split!r}: {source!r}")
        self.sampler = (sampler if isinstance(sampler, RetrievalSamplerConfig)
                        else from_mapping(RetrievalSamplerConfig, sampler, "datamodule.sampler"))
        self.splits: dict[str, RetrievalSplit] = {}
        self.samples: dict[str, dict[str, list[RetrievalSample]]] = {}
        self.video_ids: dict[str, list[str]] = {}
        self.sources: dict[str, str] = {}

    # ---------------------------------------------------------------------------------------------

    def source_of(self, split: str) -> str:
        """"official" or "generated": what `samples[split]` resolves to on this root (module docstring)."""
        source = self.sample_sources[split]
        if source != "auto":
            return source
        root = self.dataset.root
        official = (root / RETRIEVAL_DIR / f"{split}.json").is_file() and not (root / SYNTHETIC_RECORD).is_file()
        return "official" if official else "generated"

    def split_samples(self, split: str) -> dict[str, list[RetrievalSample]]:
        source = self.sources[split] = self.source_of(split)
        if source == "official":
            return self.dataset.retrieval_samples(split)
        out = {}
        for rec in self.dataset.split(split):
            try:
                out[rec.video_id] = recording_retrieval_samples(rec, self.sampler)
            except ValueError as e:
                # a short recording (the synthetic ones) may have no usable pair: it has no samples
                log.warning("intra-video retrieval: %s (%s split) has no samples: %s", rec.video_id, split, e)
        if not out:
            raise ConfigError(f"no video of the {split} split has a usable pair of segments for retrieval samples with "
                              f"datamodule.sampler.margin_seconds={self.sampler.margin_seconds} and "
                              f"min_distance_seconds={self.sampler.min_distance_seconds}")
        return out

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        self.build_bank()
        for split in SPLITS:
            samples = self.split_samples(split)
            self.samples[split], self.video_ids[split] = samples, list(samples)
            self.splits[split] = self._index(samples)
            log.info("intra-video retrieval: %s split, %d samples of %d videos (%s), w = %g s", split,
                     len(self.splits[split].label), len(samples), self.sources[split], self.context_seconds)

    def window_features(self, bank: RecordingBank, duration: float, t: np.ndarray,
                        context_seconds: float | None = None) -> np.ndarray:
        """The window feature [N, D] around each time in `t` (module docstring); the window is w, or
        `context_seconds` (TW-FINCH's 12 s windows). In chunks: the sentence overlap is [N, sentences]."""
        w = self.context_seconds if context_seconds is None else float(context_seconds)
        t = np.asarray(t, dtype=np.float64)
        if len(t) > CHUNK:
            return np.concatenate([self.window_features(bank, duration, t[i:i + CHUNK], w)
                                   for i in range(0, len(t), CHUNK)])
        start, end = context_windows(t, w, duration)
        blocks = []
        if self.modalities.video:
            blocks.append(self.window_video(bank, start, end))
        if self.modalities.text:
            blocks.append(self.window_text(bank, duration, t, w))
        return np.concatenate(blocks, axis=1).astype(np.float32)

    def _index(self, samples: dict[str, list[RetrievalSample]]) -> RetrievalSplit:
        cols = {"video_index": [], "sample_id": [], "label": [], "features": []}
        for r, (video_id, ss) in enumerate(samples.items()):
            rec = self.dataset.recordings[video_id]
            bank = self.bank.load(video_id)
            frames = np.array([[s.query_frame_index, *s.candidate_frame_indices] for s in ss], dtype=np.float64)
            t = np.minimum(frames.reshape(-1) / FPS, rec.duration)
            cols["features"].append(self.window_features(bank, rec.duration, t).reshape(len(ss), 3, -1))
            cols["video_index"].append(np.full(len(ss), r))
            cols["sample_id"].append(np.array([s.id for s in ss]))
            cols["label"].append(np.array([s.label for s in ss]))
        return RetrievalSplit(**{k: np.concatenate(v) for k, v in cols.items()})

    # ---------------------------------------------------------------------------------------------

    def collate(self, split: str, indices) -> dict[str, torch.Tensor]:
        ix, idx = self.splits[split], np.asarray(indices)
        features = torch.from_numpy(ix.features[idx])
        return {"query": features[:, 0], "candidates": features[:, 1:], "label": torch.from_numpy(ix.label[idx]).long(),
                "video_index": torch.from_numpy(ix.video_index[idx]).long(),
                "sample_id": torch.from_numpy(ix.sample_id[idx]).long()}

    def collate_share(self, split: str, rank: int, world_size: int, global_batch) -> dict[str, torch.Tensor]:
        """This process's share of a global batch (module docstring)."""
        indices, padding = share(np.asarray(global_batch), rank, world_size)
        return self.collate(split, indices) | {"labelled_total": torch.tensor(len(global_batch)), "padding": padding}

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        if world > 1 and trainer._accelerator_connector.use_distributed_sampler:
            raise ConfigError("the intra-video retrieval loader splits global batches across processes itself: "
                              "set trainer.use_distributed_sampler=false (conf/trainer/default.yaml does)")
        generator = torch.Generator().manual_seed(self.seed) if shuffle else None
        return DataLoader(Indices(len(self.splits[split].label)),
                          batch_size=self.batch_size if split == "train" else self.eval_batch_size, shuffle=shuffle,
                          generator=generator, num_workers=self.num_workers,
                          collate_fn=partial(self.collate_share, split, rank, world))

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
