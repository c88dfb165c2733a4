"""Step-recognition batches for all-layer fine-tuning: the encoders' inputs instead of bank features.

The bank DataModule (datamodules/step_recognition.py) gives the samples, their windows, the labels and the
frozen step features of each recording (the animations and step texts, encoded once into the feature bank).
This one adds, per official sample, what a trainable encoder reads of its window [t - w/2, t + w/2] (clipped
to the recording, docs/spacewalk18.md, Context windows):

  video  k frames spread over the window (`video.sparse_timestamps`: the centres of k equal slices; k = the
         encoder's pre-training count: X-CLIP 8, VideoMAE 16, an image model its `num_frames`, which
         `num_frames` may change for image models only), decoded inside the DataLoader worker that builds the
         sample (each worker opens its own reader per recording on first use, never before the fork), in time
         order, then the encoder's own preprocessing (`clip_transform`): its training transform
         (augmentations) for train, its inference transform otherwise. -> frames [B, k, 3, S, S]
         With `frames="cells"` instead (step recognition only): each of the window's cells (the bank's
         k-second grid) at the bank's fps (1 fps by default), every cell a clip of its own, as the bank encodes
         cells (an image model reads all of a cell's frames, a clip model its frames resampled to its count)
         -> cell_frames [C, F, 3, S, S] (the batch's cells in order, sample by sample), cell_frame_mask [C, F]
         (image models: a recording's last cell may be short), cell_mask [B, M], query_pos [B]
  text   the window's transcript sentences (strict overlap), each encoded by the text tower and averaged
         (the frozen recipes' `text_pool=mean`, so the tower starts from exactly their window feature). A
         training window keeps at most `max_sentences` of them, drawn at random in time order (sparse
         sampling of speech, as frames are sparse; None keeps all); evaluation keeps all. The collate
         tokenises the batch's distinct sentences once, in chunks of similar length.
         -> text_ids / text_mask: lists of [n_c, L_c] chunks, text_weight [B, U] (1 where sentence u is in
         sample b's window; the tower normalises the sum)

What reads one window (WindowInputs: its sentences, its decoded frames, the tokenising) and the loaders of
global-batch shares with mid-epoch resuming (ShareLoaders) are shared with the retrieval DataModule
(datamodules/intra_video_retrieval_all_layer.py), which reads three windows per sample.

Everything random (the sentences kept, the augmentation's draws) comes from (seed, epoch, sample) alone, so a
run is the same with any number of workers or processes and after resuming. Global batches are the bank
DataModule's (datamodules/global_batches.py), but each process decodes only its own share: the batch sampler
yields the share, each item carrying the global batch's labelled count (the loss weight) and the epoch.

Resuming mid-epoch: the DataModule's `state_dict` (in every checkpoint) holds the epoch and the number of train
batches the trainer finished; on load, the train sampler skips that epoch's first batches (once). The loader
carries the same state, so Lightning counts it as resumable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset

from datamodules.global_batches import EpochPermutation, share
from datamodules.step_recognition import StepRecognitionDataModule
from spacewalk.benchmarks.spacewalk18.data.windows import TranscriptIndex, Window, context_windows
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.modalities import Modalities
from spacewalk.encoders import uniform_frame_indices
from spacewalk.media.video import open_video, segment_timestamps, sparse_timestamps

log = logging.getLogger(__name__)


class Item(NamedTuple):
    """What the batch sampler hands the dataset for one sample."""

    index: int  # the sample's row in the split's index
    epoch: int
    labelled_total: int  # samples labelled 1..K in the whole global batch
    padding: bool  # a padding share (datamodules/global_batches.share): no loss


def sample_rng(seed: int, epoch: int, index: int, split: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(epoch), int(index), {"train": 0, "val": 1, "test": 2}.get(split, 3)])


class ShareBatchSampler(BatchSampler):
    """The run's global batches (EpochPermutation of (seed, epoch), as `global_batch_sampler`), of which this
    process yields its share, as Items. `sampler` is the permutation, where Lightning calls set_epoch."""

    def __init__(self, n: int, batch_size: int, shuffle: bool, seed: int, rank: int, world_size: int,
                 labelled: np.ndarray):
        """`labelled` [n] bool: the samples with a loss (step recognition: labels 1..K; retrieval: all)."""
        super().__init__(EpochPermutation(n, shuffle, seed), int(batch_size), drop_last=False)
        self.rank, self.world_size, self.labelled = rank, world_size, np.asarray(labelled, dtype=bool)
        self.skip: tuple[int, int] | None = None  # (epoch, batches) to skip when resuming mid-epoch

    def __iter__(self) -> Iterator[list[Item]]:
        epoch = self.sampler.epoch
        skip = self.skip[1] if self.skip and self.skip[0] == epoch else 0
        self.skip = None
        for b, global_batch in enumerate(super().__iter__()):
            if b < skip:
                continue
            global_batch = np.asarray(global_batch)
            part, padding = share(global_batch, self.rank, self.world_size)
            total = int(self.labelled[global_batch].sum())
            yield [Item(int(i), epoch, total, padding) for i in part]


class ResumableLoader(DataLoader):
    """A DataLoader Lightning treats as stateful: its state is the epoch and the batches the trainer finished,
    read from `progress()` at checkpoint time (the loader itself has prefetched further)."""

    def __init__(self, *args, progress: Callable[[], tuple[int, int]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.progress = progress

    def state_dict(self) -> dict[str, int]:
        epoch, done = self.progress() if self.progress else (self.batch_sampler.sampler.epoch, 0)
        return {"epoch": int(epoch), "batches_done": int(done)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        # the same (not a further) skip as the DataModule's load_state_dict: Lightning calls this one only when it
        # builds the train loader after restoring, which estimated_stepping_batches (the lr schedule) pre-empts
        if state.get("batches_done"):
            self.batch_sampler.skip = (int(state["epoch"]), int(state["batches_done"]))


class WindowInputs:
    """What a trainable encoder reads of one window [start, end] of a recording (the module docstring): the
    window's sentences and k decoded, preprocessed frames, and the tokenising of a batch's windows. Shared by
    the step-recognition DataModule below and the retrieval one (datamodules/intra_video_retrieval_all_layer.py,
    three windows per sample)."""

    def __init__(self, dataset, modalities: str | Modalities, text_encoder=None, video_encoder=None,
                 max_sentences: int | None = None, num_frames: int | None = None, video_backend: str = "decord",
                 text_chunk: int = 64, augment: bool = True):
        if max_sentences is not None and max_sentences < 1:
            raise ConfigError(f"max_sentences must be positive or None, got {max_sentences}")
        modalities = Modalities.parse(modalities)
        self.dataset, self.modalities = dataset, modalities
        self.max_sentences = max_sentences
        self.video_backend = video_backend
        self.text_chunk = int(text_chunk)
        self.augment = augment
        self.text_encoder = text_encoder if modalities.text else None
        self.video_encoder = video_encoder if modalities.video else None
        self.num_frames = None
        if modalities.video:
            video = video_encoder
            if not hasattr(video, "trainable_tower"):
                raise ConfigError("all-layer video needs a video encoder with weights to train (encoder=clip_vit_b32, "
                                  f"eva02_clip, tiny_clip, xclip, videomae); got "
                                  f"{getattr(video, 'identity', 'external features')}")
            self.num_frames = int(num_frames or video.num_frames)
            if not getattr(video, "averages_frames", False) and self.num_frames != video.num_frames:
                raise ConfigError(f"{video.identity} is a clip model trained on {video.num_frames} frames per clip; "
                                  f"its tower takes exactly that many, not datamodule.num_frames={self.num_frames}")
            self.transforms = {True: video.clip_transform(train=augment), False: video.clip_transform(train=False)}
        if modalities.text and text_encoder is None:
            raise ConfigError(f"modalities={modalities} needs a text encoder")
        self.tokenizer = self.text_encoder.model.tokenizer if self.text_encoder is not None else None

    def window_sentences(self, rec, start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
        """Per window [start_i, end_i] of recording `rec`: its non-blank sentences (strict overlap, the bank
        recipes' rule), as indices into the transcript; empty lists without the text modality."""
        if not self.modalities.text:
            return [np.zeros(0, np.int64)] * len(start)
        index = TranscriptIndex(rec.transcript)
        nonblank = np.array([bool(s.text.strip()) for s in rec.transcript], dtype=bool)
        out = []
        for a, b in zip(start, end):
            ids = index.indices_in(Window(float(a), float(b)))
            out.append(ids[nonblank[ids]])  # blank sentences encode to nothing (zero rows)
        return out

    def draw_sentences(self, ids: np.ndarray, train: bool, rng: np.random.Generator) -> np.ndarray:
        """A training window keeps at most max_sentences, drawn in time order; evaluation keeps all."""
        if train and self.max_sentences is not None and len(ids) > self.max_sentences:
            return np.sort(rng.choice(ids, self.max_sentences, replace=False))
        return ids

    def frames(self, readers: dict[str, Any], video_id: str, start: float, end: float, train: bool,
               rng: np.random.Generator, what: str) -> torch.Tensor:
        """k frames of the window, decoded with this worker's `readers` (opened on first use) and preprocessed:
        [k, 3, S, S]. `what` names the sample in a decoding error."""
        t = sparse_timestamps(float(start), float(end), self.num_frames)
        frames = self.decode(readers, video_id, t, what)
        return self.preprocess_frames(frames, train=train, seed=int(rng.integers(2**31)))

    def cell_frames(self, readers: dict[str, Any], video_id: str, cells: Sequence[np.ndarray], train: bool,
                    rng: np.random.Generator, what: str) -> list[torch.Tensor]:
        """The window's cells (each its bank frame timestamps), each a preprocessed clip [f, 3, S, S] as the bank
        encodes a cell: an image model all of its frames, a clip model its frames resampled to its count."""
        frames = self.decode(readers, video_id, np.concatenate(cells), what, clamp=True)
        seed = int(rng.integers(2**31))
        clips = np.split(frames, np.cumsum([len(c) for c in cells])[:-1])
        if not self.video_encoder.averages_frames:  # a clip model: as the bank encodes a cell
            clips = [c[uniform_frame_indices(len(c), self.num_frames)] for c in clips]
        return [self.preprocess_frames(c, train=train, seed=seed + j) for j, c in enumerate(clips)]

    def decode(self, readers: dict[str, Any], video_id: str, t: np.ndarray, what: str,
               clamp: bool = False) -> np.ndarray:
        """uint8 [len(t), H, W, 3] at times `t`, with this worker's `readers` (opened on first use); `clamp`: times
        past the reader's duration are clamped to it (the bank's cell grid runs to the annotated duration)."""
        rec = self.dataset.recordings[video_id]
        if not rec.has_video:
            raise DataError("no video file for the video modality", file=rec.video_path, item=video_id)
        try:
            if video_id not in readers:  # opening fails on the first sample of a bad file
                readers[video_id] = open_video(rec.video_path, self.video_backend)
            reader = readers[video_id]
            return reader.frames_at(np.minimum(t, reader.duration) if clamp else t)
        except DataError as e:
            raise DataError(f"cannot decode the frames at {np.round(t, 3).tolist()} s ({what}): {e}",
                            item=video_id) from e

    def preprocess_frames(self, frames: np.ndarray, train: bool, seed: int) -> torch.Tensor:
        """uint8 [k, H, W, 3] -> float [k, 3, S, S] by the encoder's transform; the training transform's random
        draws come from `seed` (per sample and epoch), not from the worker's generator."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self.transforms[train](frames)

    def collate_cells(self, windows: Sequence[Sequence[torch.Tensor]]) -> dict[str, torch.Tensor]:
        """Every window's cells [f, 3, S, S] -> cell_frames [C, F, 3, S, S] padded to the longest cell,
        cell_frame_mask [C, F] (image models only: a clip model's cells all have its frame count), and
        cell_mask [B, M] (sample b's cells are the next cell_mask[b].sum() rows of cell_frames)."""
        cells = [c for w in windows for c in w]
        f = max(len(c) for c in cells)
        frames = cells[0].new_zeros(len(cells), f, *cells[0].shape[1:])
        frame_mask = torch.zeros(len(cells), f, dtype=torch.bool)
        for j, c in enumerate(cells):
            frames[j, :len(c)] = c
            frame_mask[j, :len(c)] = True
        m = max(len(w) for w in windows)
        cell_mask = torch.arange(m)[None, :] < torch.tensor([len(w) for w in windows])[:, None]
        out = {"cell_frames": frames, "cell_mask": cell_mask}
        if self.video_encoder.averages_frames:
            out["cell_frame_mask"] = frame_mask
        return out

    def tokenize(self, texts: list[str], order: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """texts in `order`, tokenised in chunks of `text_chunk`."""
        ids, masks = [], []
        for c in range(0, len(order), self.text_chunk):
            chunk = [texts[u] for u in order[c:c + self.text_chunk]]
            tokens = self.tokenizer(chunk, padding=True, truncation=True, max_length=self.text_encoder.max_length,
                                    return_tensors="pt")
            ids.append(tokens["input_ids"])
            masks.append(tokens["attention_mask"])
        return ids, masks

    def tokenize_windows(self, windows: Sequence[Sequence[tuple[str, int]]]) -> dict[str, Any]:
        """The distinct sentences (video_id, index) of the batch's windows, tokenised in chunks sorted by length
        (little padding), and text_weight [B, U] over them (U in chunk order)."""
        distinct = sorted({s for w in windows for s in w})
        texts = [self.dataset.recordings[v].transcript[j].text for v, j in distinct]
        order = sorted(range(len(texts)), key=lambda u: len(texts[u]))
        position = {distinct[u]: p for p, u in enumerate(order)}
        weight = torch.zeros(len(windows), len(distinct))
        for b, w in enumerate(windows):
            for s in w:
                weight[b, position[s]] = 1.0
        ids, masks = self.tokenize(texts, order)
        return {"text_ids": ids, "text_mask": masks, "text_weight": weight}


class ShareLoaders:
    """Train/val/test loaders of global batches of which this process decodes its share (ShareBatchSampler), and
    mid-epoch resuming (the DataModule's state_dict in every checkpoint). Mixed into a LightningDataModule that
    has `batch_size`, `eval_batch_size`, `num_workers`, `seed` and sets `resume_skip = None`,
    `train_sampler = None`."""

    def share_loader(self, split: str, shuffle: bool, dataset: Dataset, collate: Callable, labelled: np.ndarray,
                     name: str) -> DataLoader:
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        if world > 1 and trainer._accelerator_connector.use_distributed_sampler:
            raise ConfigError(f"the {name} loader splits global batches across processes itself: "
                              "set trainer.use_distributed_sampler=false (conf/trainer/default.yaml does)")
        sampler = ShareBatchSampler(len(labelled), self.batch_size if split == "train" else self.eval_batch_size,
                                    shuffle, self.seed, rank, world, labelled)
        if split == "train":
            self.train_sampler = sampler
            sampler.skip = self.resume_skip
        return ResumableLoader(dataset, batch_sampler=sampler, num_workers=self.num_workers, collate_fn=collate,
                               persistent_workers=self.num_workers > 0,
                               progress=self._progress if split == "train" and trainer is not None else None)

    def state_dict(self) -> dict[str, int]:
        """Saved in every checkpoint: the epoch and the train batches the trainer has finished in it."""
        if self.trainer is None:
            return {}
        epoch, done = self._progress()
        return {"epoch": int(epoch), "batches_done": int(done)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("batches_done"):
            self.resume_skip = (int(state["epoch"]), int(state["batches_done"]))
            log.info("checkpoint from epoch %d after %d batches: a fit resumed from it skips them", *self.resume_skip)
            if self.train_sampler is not None:
                self.train_sampler.skip = self.resume_skip

    def _progress(self) -> tuple[int, int]:
        trainer = self.trainer
        return trainer.current_epoch, trainer.fit_loop.epoch_loop.batch_progress.current.processed


@dataclass
class _Windows:
    """Per-sample window inputs of one split (rows as in the bank DataModule's split index)."""

    start: np.ndarray  # float [N] window start, seconds
    end: np.ndarray  # float [N]
    sentences: list[np.ndarray]  # per sample: indices into its recording's transcript


class _SampleInputs(Dataset):
    """Item -> the sample's frames and sentence ids; runs in the DataLoader worker (readers opened there)."""

    def __init__(self, owner: AllLayerDataModule, split: str):
        self.owner, self.split = owner, split
        self.readers: dict[str, Any] = {}  # per worker process: opened on first use, after the fork

    def __len__(self) -> int:
        return len(self.owner.splits[self.split].label)

    def __getitem__(self, item: Item) -> dict[str, Any]:
        owner, split = self.owner, self.split
        ix, windows, inputs = owner.splits[split], owner.windows[split], owner.inputs
        i = item.index
        rng = sample_rng(owner.seed, item.epoch, i, split)
        out: dict[str, Any] = {"item": item}
        video_id = owner.video_ids[split][ix.recording[i]]
        if owner.text_cells:  # an LFB head reads the cells, not the window feature
            first, n = int(ix.first_cell[i]), int(ix.num_cells[i])
            out["cells"] = [(video_id, j) for j in range(first, first + n)]
            out["query_pos"] = int(ix.query_pos[i])
        elif owner.modalities.text:
            ids = inputs.draw_sentences(windows.sentences[i], split == "train", rng)
            out["sentences"] = [(video_id, int(s)) for s in ids]
        what = f"sample {int(ix.sample_id[i])}, {split}"
        if owner.modalities.video and owner.frames == "cells":
            first, n = int(ix.first_cell[i]), int(ix.num_cells[i])
            out["cell_frames"] = inputs.cell_frames(self.readers, video_id, owner.cell_times[video_id][first:first + n],
                                                    split == "train", rng, what)
            out["query_pos"] = int(ix.query_pos[i])
        elif owner.modalities.video:
            out["frames"] = inputs.frames(self.readers, video_id, windows.start[i], windows.end[i], split == "train",
                                          rng, what)
        return out


class AllLayerDataModule(ShareLoaders, StepRecognitionDataModule):
    def __init__(self, *args, max_sentences: int | None = None, num_frames: int | None = None,
                 video_backend: str = "decord", text_chunk: int = 64, augment: bool = True,
                 text_cells: bool | str | None = False, frames: str = "sparse", **kwargs):
        """The bank DataModule's arguments (its clip features are not used: the towers make their own), plus:
        `max_sentences` per training window (None: all), `num_frames` k (None: the video encoder's count),
        `video_backend` decord | pyav, `text_chunk` sentences per tokenised chunk, `augment` the encoder's
        training transform on train frames (else its inference transform everywhere). `text_cells` (any true
        value, e.g. the LFB head's name): the window's k-second cells as texts for the text tower under an LFB
        head (text only). `frames`: "sparse" (k frames spread over the window) or "cells" (the window's cells
        at the bank's fps, each a clip: for the window feature as the bank's dense one, or an LFB head; video
        only)."""
        kwargs.pop("frame_sampling", None)
        kwargs.pop("cells", None)
        # dense: the bank's clip feature needs no per-frame features; no cells: no LFB head reads them here
        super().__init__(*args, frame_sampling="dense", cells=False, **kwargs)
        if frames not in ("sparse", "cells"):
            raise ConfigError(f"frames must be 'sparse' or 'cells', got {frames!r}")
        if frames == "cells" and not self.modalities.only_video:
            raise ConfigError(f"frames='cells' reads the video cells of modalities=video, got {self.modalities}")
        # text_cells is the config's "an LFB head reads the window's cells": texts for the text tower; the video
        # tower's cells are frames="cells"
        if text_cells and self.modalities.only_video and frames != "cells":
            raise ConfigError("an LFB head over the video tower reads the window's cells: set datamodule.frames=cells")
        if text_cells and self.modalities.video and self.modalities.text:
            raise ConfigError("text_cells (a trainable tower under an LFB head) needs modalities=text or video, got "
                              f"{self.modalities}")
        self.text_cells = bool(text_cells) and self.modalities.only_text
        self.cell_texts: dict[str, list[str]] = {}  # per recording: the joined text of each bank cell
        self.frames = frames
        self.cell_times: dict[str, list[np.ndarray]] = {}  # per recording: each bank cell's frame timestamps
        self.windows: dict[str, _Windows] = {}
        self.resume_skip: tuple[int, int] | None = None  # (epoch, batches) from a mid-epoch checkpoint
        self.train_sampler: ShareBatchSampler | None = None
        self.inputs = WindowInputs(self.dataset, self.modalities, self.bank.text_encoder, self.bank.video_encoder,
                                   max_sentences=max_sentences, num_frames=num_frames, video_backend=video_backend,
                                   text_chunk=text_chunk, augment=augment)
        self.text_encoder, self.video_encoder = self.inputs.text_encoder, self.inputs.video_encoder
        self.num_frames = self.inputs.num_frames

    # ---------------------------------------------------------------------------------------------

    def _index_split(self, split: str, samples=None) -> None:
        super()._index_split(split, samples)
        ix = self.splits[split]
        starts, ends, sentences = [], [], []
        for video_id in self.video_ids[split]:
            rec = self.dataset.recordings[video_id]
            t = np.array([s.timestamp for s in self.samples[split][video_id]], dtype=np.float64)
            start, end = context_windows(t, self.context_seconds, rec.duration)
            starts.append(start)
            ends.append(end)
            if self.frames == "cells" and video_id not in self.cell_times:
                # the bank's own cell frames (spacewalk/benchmarks/spacewalk18/features/build.py:
                # RecordingBuilder.video_arrays)
                cfg = self.bank.config
                self.cell_times[video_id] = [c.timestamps for c in segment_timestamps(
                    0.0, rec.duration, cfg.segment_seconds, cfg.fps, duration=rec.duration)]
            if self.text_cells and video_id not in self.cell_texts:
                # the bank's own cell rule (spacewalk/benchmarks/spacewalk18/features/build.py: cell_text)
                index = TranscriptIndex(rec.transcript)
                k, n = self.bank.config.segment_seconds, self.bank.load(video_id).num_cells
                self.cell_texts[video_id] = [index.text_in(Window(j * k, min((j + 1) * k, rec.duration)))
                                             for j in range(n)]
            sentences += self.inputs.window_sentences(rec, start, end)
        assert sum(len(s) for s in starts) == len(ix.label)
        self.windows[split] = _Windows(np.concatenate(starts), np.concatenate(ends), sentences)

    # ---------------------------------------------------------------------------------------------

    def collate_items(self, split: str, parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
        items = [p["item"] for p in parts]
        batch = self.collate(split, [it.index for it in items])
        batch.pop("clip")  # the towers make the clip feature from the inputs below
        if items[0].padding:
            batch["label"] = torch.zeros_like(batch["label"])
        batch["labelled_total"] = torch.tensor(items[0].labelled_total)
        if self.modalities.video and self.frames == "cells":
            batch |= self.inputs.collate_cells([p["cell_frames"] for p in parts])
            batch["query_pos"] = torch.tensor([p["query_pos"] for p in parts])
        elif self.modalities.video:
            batch["frames"] = torch.stack([p["frames"] for p in parts])
        if self.modalities.text and not self.text_cells:
            batch |= self.inputs.tokenize_windows([p["sentences"] for p in parts])
        if self.text_cells:
            batch |= self.tokenize_cells([p["cells"] for p in parts])
            batch["query_pos"] = torch.tensor([p["query_pos"] for p in parts])
        return batch

    def tokenize_cells(self, windows: Sequence[Sequence[tuple[str, int]]]) -> dict[str, Any]:
        """The batch's distinct non-silent cells, tokenised in chunks sorted by length; cell_index [B, M] is
        each window cell's row among them (-1: a silent cell, zero as in the bank; padding is cell_mask False)."""
        distinct = sorted({c for w in windows for c in w if self.cell_texts[c[0]][c[1]].strip()})
        texts = [self.cell_texts[v][j] for v, j in distinct]
        order = sorted(range(len(texts)), key=lambda u: len(texts[u]))
        position = {distinct[u]: p for p, u in enumerate(order)}
        m = max(len(w) for w in windows)
        index = torch.full((len(windows), m), -1, dtype=torch.long)
        mask = torch.zeros(len(windows), m, dtype=torch.bool)
        for b, w in enumerate(windows):
            mask[b, :len(w)] = True
            for j, c in enumerate(w):
                index[b, j] = position.get(c, -1)
        ids, masks = self.inputs.tokenize(texts, order)
        return {"cell_text_ids": ids, "cell_text_mask": masks, "cell_index": index, "cell_mask": mask}

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        from functools import partial

        return self.share_loader(split, shuffle, _SampleInputs(self, split), partial(self.collate_items, split),
                                 self.splits[split].label > 0, "step-recognition")

    def loader(self, name: str) -> DataLoader:
        ix = self.splits[name]
        sampler = ShareBatchSampler(len(ix.label), self.eval_batch_size, False, self.seed, 0, 1, ix.label > 0)
        from functools import partial

        return DataLoader(_SampleInputs(self, name), batch_sampler=sampler,
                          collate_fn=partial(self.collate_items, name))
