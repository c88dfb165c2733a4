"""Intra-video retrieval batches for all-layer fine-tuning: the encoders' inputs of the three windows of each
sample (the query's and both candidates'), instead of bank features.

The samples, their sources (official file or our sampler) and the windows are the feature DataModule's
(datamodules/intra_video_retrieval.py: [t - w/2, t + w/2] clipped to the recording, t = frame / 29.97); what a
trainable encoder reads of a window (its sentences, k decoded frames, the tokenising) is step recognition's
(datamodules/all_layer.py: WindowInputs), and so are the loaders: global batches of which each process
decodes its share, everything random drawn from (seed, epoch, sample), mid-epoch resuming (ShareLoaders).
No feature bank is read or built: the towers make every feature.

The text window feature the tower starts from is the feature DataModule's text_pool=mean, empty_text=zero (a
silent window is zero): the only setting it supports.

A batch: label [B], video_index [B], sample_id [B], labelled_total, padding, and by modality
  video  frames [B, 3, k, 3, S, S] (window 0 the query's, 1 and 2 the candidates')
  text   text_ids / text_mask (chunks of the batch's distinct sentences), text_weight [3 B, U]: row 3 b + j is
         window j of sample b
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from datamodules.all_layer import Item, ShareBatchSampler, ShareLoaders, WindowInputs, sample_rng
from datamodules.intra_video_retrieval import IntraVideoRetrievalDataModule, RetrievalSplit
from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, SPLITS, RetrievalSample
from spacewalk.benchmarks.spacewalk18.data.windows import context_windows
from spacewalk.core.errors import ConfigError


class _RetrievalInputs(Dataset):
    """Item -> the three windows' sentence ids and frames; runs in the DataLoader worker (readers opened there)."""

    def __init__(self, owner: AllLayerRetrievalDataModule, split: str):
        self.owner, self.split = owner, split
        self.readers: dict[str, Any] = {}  # per worker process: opened on first use, after the fork

    def __len__(self) -> int:
        return len(self.owner.splits[self.split].label)

    def __getitem__(self, item: Item) -> dict[str, Any]:
        owner, split, i = self.owner, self.split, item.index
        ix, inputs = owner.splits[split], owner.inputs
        start, end, sentences = owner.windows[split]
        rng = sample_rng(owner.seed, item.epoch, i, split)
        video_id = owner.video_ids[split][ix.video_index[i]]
        train = split == "train"
        out: dict[str, Any] = {"item": item}
        if owner.modalities.text:
            out["sentences"] = [[(video_id, int(s)) for s in inputs.draw_sentences(sentences[3 * i + j], train, rng)]
                                for j in range(3)]
        if owner.modalities.video:
            out["frames"] = torch.stack([
                inputs.frames(self.readers, video_id, start[i, j], end[i, j], train, rng,
                              f"sample {int(ix.sample_id[i])}, {split}, {('query', 'candidate 0', 'candidate 1')[j]}")
                for j in range(3)])
        return out


class AllLayerRetrievalDataModule(ShareLoaders, IntraVideoRetrievalDataModule):
    def __init__(self, *args, max_sentences: int | None = None, num_frames: int | None = None,
                 video_backend: str = "decord", text_chunk: int = 64, augment: bool = True, **kwargs):
        """The feature DataModule's arguments (its bank is not read), plus WindowInputs': `max_sentences` per
        training window (None: all), `num_frames` k (None: the video encoder's count), `video_backend`,
        `text_chunk`, `augment` (datamodules/all_layer.py)."""
        kwargs.pop("frame_sampling", None)  # k frames decoded per window: the towers' own sampling
        text_pool, empty_text = kwargs.pop("text_pool", "mean"), kwargs.pop("empty_text", "zero")
        if (text_pool, empty_text) != ("mean", "zero"):
            raise ConfigError("the all-layer retrieval recipe's text tower pools a window as text_pool=mean, "
                              f"empty_text=zero; got text_pool={text_pool!r}, empty_text={empty_text!r}")
        super().__init__(*args, **kwargs)
        self.inputs = WindowInputs(self.dataset, self.modalities, self.bank.text_encoder, self.bank.video_encoder,
                                   max_sentences=max_sentences, num_frames=num_frames, video_backend=video_backend,
                                   text_chunk=text_chunk, augment=augment)
        self.text_encoder, self.video_encoder = self.inputs.text_encoder, self.inputs.video_encoder
        self.windows: dict[str, tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = {}
        self.resume_skip: tuple[int, int] | None = None
        self.train_sampler: ShareBatchSampler | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        for split in SPLITS:
            samples = self.split_samples(split)
            self.samples[split], self.video_ids[split] = samples, list(samples)
            self.splits[split], self.windows[split] = self._index_windows(samples)

    def _index_windows(self, samples: dict[str, list[RetrievalSample]]):
        """The split's rows (features None) and its windows: start, end [N, 3] and the 3 N windows' sentences."""
        cols = {"video_index": [], "sample_id": [], "label": []}
        starts, ends, sentences = [], [], []
        for r, (video_id, ss) in enumerate(samples.items()):
            rec = self.dataset.recordings[video_id]
            frames = np.array([[s.query_frame_index, *s.candidate_frame_indices] for s in ss], dtype=np.float64)
            t = np.minimum(frames / FPS, rec.duration)  # as the feature DataModule's windows
            start, end = context_windows(t, self.context_seconds, rec.duration)
            starts.append(start)
            ends.append(end)
            sentences += self.inputs.window_sentences(rec, start.reshape(-1), end.reshape(-1))
            cols["video_index"].append(np.full(len(ss), r))
            cols["sample_id"].append(np.array([s.id for s in ss]))
            cols["label"].append(np.array([s.label for s in ss]))
        split = RetrievalSplit(**{k: np.concatenate(v) for k, v in cols.items()}, features=None)
        return split, (np.concatenate(starts), np.concatenate(ends), sentences)

    def collate_items(self, split: str, parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
        items = [p["item"] for p in parts]
        ix, idx = self.splits[split], np.array([it.index for it in items])
        batch: dict[str, Any] = {"label": torch.from_numpy(ix.label[idx]).long(),
                                 "video_index": torch.from_numpy(ix.video_index[idx]).long(),
                                 "sample_id": torch.from_numpy(ix.sample_id[idx]).long(),
                                 "labelled_total": torch.tensor(items[0].labelled_total),
                                 "padding": items[0].padding}
        if self.modalities.video:
            batch["frames"] = torch.stack([p["frames"] for p in parts])
        if self.modalities.text:
            batch |= self.inputs.tokenize_windows([w for p in parts for w in p["sentences"]])
        return batch

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        labelled = np.ones(len(self.splits[split].label), dtype=bool)  # every retrieval sample has a loss
        return self.share_loader(split, shuffle, _RetrievalInputs(self, split), partial(self.collate_items, split),
                                 labelled, "intra-video retrieval")

    def loader(self, name: str) -> DataLoader:
        """All batches of a split, in order, in this process."""
        n = len(self.splits[name].label)
        sampler = ShareBatchSampler(n, self.eval_batch_size, False, self.seed, 0, 1, np.ones(n, dtype=bool))
        return DataLoader(_RetrievalInputs(self, name), batch_sampler=sampler,
                          collate_fn=partial(self.collate_items, name))
