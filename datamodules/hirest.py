"""HiREST batches for the joint model (models/hirest_joint.py): three tasks, one task per batch.

Samples (as the authors' `hirest_dataset.py` builds them):
- moment retrieval: every (query, video) with clip == true (the official scoring's set); targets are the
  frames of the moment's ends; the test split hides moments, so its samples carry none;
- moment segmentation, teacher forced (train, and the val loss): per clip video with steps whose unique
  step boundaries b_0 < ... < b_n number more than 2, one sample per i < n: b_0..b_i marked, frames
  outside [b_i, moment end] masked, target b_{i+1};
- moment segmentation, inference (test / predict): one sample per video with steps: the GT moment;
- step captioning: one sample per step: the step's frames [frame(start), frame(end)] cut to the first
  `caption_frames` or stretched to them by repetition, and the heading (stripped, lower-cased WordPieces,
  at most max_words - 1, then [SEP]; the decoder reads [CLS] + the same).
Inference sets (test / predict) list each video's segmentation and captions once (the first query of a
video that two queries share). Steps and moments of the test split come from the formatted GT file
(`HiREST.step_annotations("test")`); its moment-retrieval samples have no targets.

Frames: a video's features are cut to its first `max_frames` seconds (the encoder's positions), times
beyond are clipped to the last frame (frame of time s: min(ceil(s), T - 1)).

Training: a round-robin loader (`RoundRobinBatchSampler`): every epoch, each task's samples are shuffled
(seed, epoch), split into batches, and the batches of all tasks are visited once each in a shuffled task
order, the same on every process; each process takes a disjoint, equal share of every task (padded by
repeating samples, as DistributedSampler does), so all processes run the same task at every step. This
loader shards itself: with DDP set `trainer.use_distributed_sampler: false`.
Validation: one loader per task (moment retrieval, teacher-forced segmentation, captioning), for the
losses. Test / predict: moment retrieval, segmentation, captioning (`inference="oracle"`), or moment
retrieval only (`inference="end_to_end"`, the model chains the rest). Evaluation loaders are sharded with a
DistributedSampler when there are several processes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from spacewalk.benchmarks.hirest.dataset import HiREST, VideoAnnotation
from spacewalk.benchmarks.hirest.joint_model_io import (
    INFERENCE_MODES,
    TASKS,
    caption_tokenizer,
    step_frame_indices,
    time_to_frame,
)
from spacewalk.core.errors import ConfigError, DataError

log = logging.getLogger(__name__)

Purpose = Literal["loss", "inference"]


@dataclass(frozen=True)
class HiRESTSample:
    task: str
    query: str
    video: str
    moment: tuple[float, float] | None = None  # seconds; None where the split hides it
    boundaries: tuple[float, ...] = ()  # segmentation: the moment's unique step boundaries, sorted
    position: int = -1  # teacher-forced segmentation: the current boundary i; captioning: the step index
    span: tuple[float, float] | None = None  # captioning: the step, seconds
    caption_ids: tuple[int, ...] = ()  # captioning: the heading's WordPiece ids (no [CLS] / [SEP])


# --------------------------------------------------------------------------------------------------
# samples


def moment_retrieval_samples(annotations: Sequence[VideoAnnotation], has_moments: bool) -> list[HiRESTSample]:
    return [HiRESTSample("moment_retrieval", a.query, a.video, a.bounds if has_moments else None)
            for a in annotations if a.clip]


def step_boundaries(annotation: VideoAnnotation) -> tuple[float, ...]:
    return tuple(sorted({t for s in annotation.steps for t in (s.start, s.end)}))


def segmentation_samples(annotations: Sequence[VideoAnnotation], purpose: Purpose) -> list[HiRESTSample]:
    out = []
    for a in annotations:
        bounds = step_boundaries(a)
        if purpose == "inference":
            out.append(HiRESTSample("moment_segmentation", a.query, a.video, a.moment, bounds))
        elif len(bounds) > 2:  # a single step teaches nothing about boundaries
            out += [HiRESTSample("moment_segmentation", a.query, a.video, a.moment, bounds, i)
                    for i in range(len(bounds) - 1)]
    return out


def captioning_samples(annotations: Sequence[VideoAnnotation], tokenizer, max_words: int) -> list[HiRESTSample]:
    out = []
    for a in annotations:
        for step in a.steps:
            ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(step.heading.strip())[:max_words - 1])
            out.append(HiRESTSample("step_captioning", a.query, a.video, a.moment, (), step.index,
                                    (step.start, step.end), tuple(ids)))
    return out


def _first_per_video(annotations: Sequence[VideoAnnotation]) -> list[VideoAnnotation]:
    seen: dict[str, VideoAnnotation] = {}
    for a in annotations:
        seen.setdefault(a.video, a)
    return list(seen.values())


# --------------------------------------------------------------------------------------------------
# the round-robin sampler


class _Epoch:
    """Lightning calls `set_epoch` on `batch_sampler.sampler`: this is that object."""

    def __init__(self):
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)


class RoundRobinBatchSampler(Sampler[list[int]]):
    """Batches of one task each over concatenated task datasets (task t's samples at offsets[t] + i).

    An epoch: each task's indices permuted (seed, epoch); padded by repeating them up to a multiple of
    `world_size` and dealt rank::world_size (DistributedSampler's rule; drop_last trims instead); cut into
    batches; the batches of all tasks visited once in a permuted task order. Both permutations are the same
    on every process, so processes get disjoint, equal shares and run the same task at each step."""

    def __init__(self, task_sizes: Mapping[str, int], batch_size: int, seed: int = 0, shuffle: bool = True,
                 rank: int = 0, world_size: int = 1, drop_last: bool = False):
        if batch_size < 1:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world size {world_size}")
        self.task_sizes = {t: int(n) for t, n in task_sizes.items()}
        self.offsets = dict(zip(self.task_sizes, np.cumsum([0] + list(self.task_sizes.values()))[:-1].tolist()))
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
        self.rank, self.world_size, self.drop_last = rank, world_size, drop_last
        self.sampler = _Epoch()

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    def _per_rank(self, n: int) -> int:
        return n // self.world_size if self.drop_last else math.ceil(n / self.world_size)

    def batches_per_task(self) -> dict[str, int]:
        return {t: math.ceil(self._per_rank(n) / self.batch_size) for t, n in self.task_sizes.items()}

    def __len__(self) -> int:
        return sum(self.batches_per_task().values())

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        queues: dict[str, list[list[int]]] = {}
        for task, n in self.task_sizes.items():
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            per_rank = self._per_rank(n)
            total = per_rank * self.world_size
            order = np.resize(order, total) if n else order[:0]  # np.resize repeats from the start
            mine = (order[self.rank:total:self.world_size] + self.offsets[task]).tolist()
            queues[task] = [mine[i:i + self.batch_size] for i in range(0, per_rank, self.batch_size)]
        schedule = [t for t, q in queues.items() for _ in q]
        if self.shuffle:
            schedule = [schedule[i] for i in rng.permutation(len(schedule))]
        taken = dict.fromkeys(queues, 0)
        for task in schedule:
            yield queues[task][taken[task]]
            taken[task] += 1


# --------------------------------------------------------------------------------------------------
# datasets and batches


class _SampleDataset(Dataset):
    def __init__(self, samples: Sequence[HiRESTSample], load):
        self.samples, self.load = list(samples), load

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.load(self.samples[i])


def _pad(arrays: Sequence[np.ndarray], length: int, value=0) -> np.ndarray:
    out = np.full((len(arrays), length) + arrays[0].shape[1:], value, dtype=arrays[0].dtype)
    for i, a in enumerate(arrays):
        out[i, :len(a)] = a
    return out


def collate(items: Sequence[dict[str, Any]], pad_id: int = 0, bos_id: int = 101, eos_id: int = 102) -> dict[str, Any]:
    """One task's items -> the batch of the model's contract (per-batch padding, bool masks)."""
    tasks = {it["task"] for it in items}
    if len(tasks) != 1:
        raise ValueError(f"a batch holds one task, got {sorted(tasks)}")
    task = tasks.pop()
    t = max(len(it["frames"]) for it in items)
    batch: dict[str, Any] = {
        "task": task,
        "video": [it["video"] for it in items],
        "query_text": [it["query_text"] for it in items],
        "frames": torch.from_numpy(_pad([it["frames"] for it in items], t)),
        "asr": torch.from_numpy(_pad([it["asr"] for it in items], t)),
        "query": torch.from_numpy(np.stack([it["query"] for it in items])),
        "frame_mask": torch.from_numpy(_pad([np.ones(len(it["frames"]), bool) for it in items], t, False)),
    }
    for key in ("start_target", "end_target", "target", "step_index"):
        if key in items[0]:
            batch[key] = torch.tensor([it[key] for it in items], dtype=torch.long)
    for key in ("region_mask", "boundary_mask"):
        if key in items[0]:
            batch[key] = torch.from_numpy(_pad([it[key] for it in items], t, False))
    if "moment" in items[0]:
        batch["moment"] = torch.tensor([it["moment"] for it in items], dtype=torch.long)
    if "step_bounds" in items[0]:
        batch["step_bounds"] = torch.tensor([it["step_bounds"] for it in items], dtype=torch.float32)
    if "caption_ids" in items[0]:
        w = max(len(it["caption_ids"]) for it in items) + 1
        inputs = [np.array([bos_id, *it["caption_ids"]], np.int64) for it in items]
        targets = [np.array([*it["caption_ids"], eos_id], np.int64) for it in items]
        batch["input_ids"] = torch.from_numpy(_pad(inputs, w, pad_id))
        batch["target_ids"] = torch.from_numpy(_pad(targets, w, pad_id))
        batch["token_mask"] = torch.from_numpy(_pad([np.ones(len(x), bool) for x in inputs], w, False))
    return batch


class HiRESTDataModule(pl.LightningDataModule):
    def __init__(self, hirest: HiREST | str | Path, features, tokenizer=None, batch_size: int = 5,
                 eval_batch_size: int | None = None, num_workers: int = 0, seed: int = 0, max_frames: int = 2048,
                 max_words: int = 48, caption_frames: int = 20,
                 inference: Literal["oracle", "end_to_end"] = "oracle", predict_split: str = "test",
                 train_tasks: Sequence[str] = TASKS):
        """features: a `spacewalk.benchmarks.hirest.features.HiRESTFeatures` (frames / asr_per_second / query).
        tokenizer: the captions' WordPiece tokenizer (default `caption_tokenizer()`: BERT-base uncased from
        the offline MiniLM package). max_words / caption_frames must match the model's. inference: which
        test / predict loaders to serve (the model's mode). predict_split: the split `trainer.predict` runs
        on ("val" gives predictions to score against the val GT)."""
        super().__init__()
        if inference not in INFERENCE_MODES:
            raise ConfigError(f"inference must be one of {INFERENCE_MODES}, got {inference!r}")
        unknown = set(train_tasks) - set(TASKS)
        if unknown or not train_tasks:
            raise ConfigError(f"train_tasks must be a non-empty subset of {TASKS}, got {list(train_tasks)}")
        if predict_split not in ("train", "val", "test"):
            raise ConfigError(f"predict_split must be train, val or test, got {predict_split!r}")
        self.hirest = hirest if isinstance(hirest, HiREST) else HiREST(hirest)
        self.features = features
        self._tokenizer = tokenizer
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.num_workers, self.seed = num_workers, seed
        self.max_frames, self.max_words, self.caption_frames = max_frames, max_words, caption_frames
        self.inference, self.predict_split = inference, predict_split
        self.train_tasks = tuple(t for t in TASKS if t in train_tasks)
        self._samples: dict[tuple[str, str], dict[str, list[HiRESTSample]]] = {}
        self._queries: dict[str, np.ndarray] = {}
        self._truncated: set[str] = set()

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = caption_tokenizer()
        return self._tokenizer

    # ---------------------------------------------------------------------------------------------
    # samples

    def task_samples(self, split: str, purpose: Purpose) -> dict[str, list[HiRESTSample]]:
        """task -> samples of a split: "loss" (teacher forcing; train and val) or "inference"."""
        key = (split, purpose)
        if key not in self._samples:
            if purpose == "loss" and split == "test":
                raise DataError("the public test split hides moments and steps: no losses on it", item="test")
            steps = self.hirest.step_annotations(split)
            if purpose == "inference":
                steps = _first_per_video(steps)
            samples = {
                "moment_retrieval": moment_retrieval_samples(self.hirest.annotations(split), split != "test"),
                "moment_segmentation": segmentation_samples(steps, purpose),
                "step_captioning": captioning_samples(steps, self.tokenizer, self.max_words),
            }
            self._samples[key] = samples
            log.info("HiREST %s (%s): %s", split, purpose, ", ".join(f"{t} {len(s)}" for t, s in samples.items()))
        return self._samples[key]

    def _splits_for(self, stage: str | None) -> list[tuple[str, Purpose]]:
        return {"fit": [("train", "loss"), ("val", "loss")], "validate": [("val", "loss")],
                "test": [("test", "inference")], "predict": [(self.predict_split, "inference")]}.get(
            stage, [("train", "loss"), ("val", "loss"), ("test", "inference")])

    def setup(self, stage: str | None = None) -> None:
        queries = set()
        for split, purpose in self._splits_for(stage):
            for samples in self.task_samples(split, purpose).values():
                queries.update(s.query for s in samples)
        # embedded once here, in the main process (a query encoder may be a GPU model)
        for q in sorted(queries - set(self._queries)):
            self._queries[q] = np.asarray(self.features.query(q), dtype=np.float32)

    # ---------------------------------------------------------------------------------------------
    # items

    def _video(self, video: str) -> tuple[np.ndarray, np.ndarray]:
        frames = np.asarray(self.features.frames(video), dtype=np.float32)
        if len(frames) > self.max_frames:
            if video not in self._truncated:
                self._truncated.add(video)
                log.warning("%s: %d frames, cut to the first max_frames=%d", video, len(frames), self.max_frames)
            frames = frames[:self.max_frames]
        asr = np.asarray(self.features.asr_per_second(video, len(frames)), dtype=np.float32)
        if asr.shape[0] != len(frames):
            raise DataError(f"ASR features for {asr.shape[0]} seconds, frames for {len(frames)}", item=video,
                            field="asr")
        return frames, asr

    def load(self, sample: HiRESTSample) -> dict[str, Any]:
        frames, asr = self._video(sample.video)
        t = len(frames)
        item: dict[str, Any] = {"task": sample.task, "video": sample.video, "query_text": sample.query,
                                "query": self._query(sample.query)}
        frame = partial(time_to_frame, num_frames=t)
        if sample.task == "moment_retrieval":
            if sample.moment is not None:
                item["start_target"], item["end_target"] = frame(sample.moment[0]), frame(sample.moment[1])
        elif sample.task == "moment_segmentation":
            last = frame(sample.moment[1])
            if sample.position >= 0:
                i, bounds = sample.position, sample.boundaries
                region = np.zeros(t, bool)
                region[frame(bounds[i]):last + 1] = True
                marks = np.zeros(t, bool)
                marks[[frame(b) for b in bounds[:i + 1]]] = True
                item.update(region_mask=region, boundary_mask=marks, target=frame(bounds[i + 1]))
            else:
                item["moment"] = (frame(sample.moment[0]), last)
        elif sample.task == "step_captioning":
            index = step_frame_indices(frame(sample.span[0]), frame(sample.span[1]), self.caption_frames)
            frames, asr = frames[index], asr[index]
            item.update(step_index=sample.position, step_bounds=sample.span, caption_ids=sample.caption_ids)
        item["frames"], item["asr"] = frames, asr
        return item

    def _query(self, text: str) -> np.ndarray:
        if text not in self._queries:
            self._queries[text] = np.asarray(self.features.query(text), dtype=np.float32)
        return self._queries[text]

    def _collate(self, items):
        tok = self.tokenizer
        return collate(items, pad_id=tok.pad_token_id, bos_id=tok.cls_token_id, eos_id=tok.sep_token_id)

    # ---------------------------------------------------------------------------------------------
    # loaders

    def _rank_world(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _loader(self, samples: Sequence[HiRESTSample], batch_size: int, **kwargs) -> DataLoader:
        return DataLoader(_SampleDataset(samples, self.load), batch_size=batch_size, num_workers=self.num_workers,
                          collate_fn=self._collate, persistent_workers=self.num_workers > 0, **kwargs)

    def train_sampler(self, rank: int | None = None, world_size: int | None = None) -> RoundRobinBatchSampler:
        if rank is None or world_size is None:
            rank, world_size = self._rank_world()
        samples = self.task_samples("train", "loss")
        return RoundRobinBatchSampler({t: len(samples[t]) for t in self.train_tasks}, self.batch_size,
                                      seed=self.seed, rank=rank, world_size=world_size)

    def train_dataloader(self) -> DataLoader:
        rank, world = self._rank_world()
        trainer = self.trainer
        if world > 1 and trainer is not None and trainer._accelerator_connector.use_distributed_sampler:
            raise ConfigError("the HiREST round-robin loader shards itself: set trainer.use_distributed_sampler=false")
        samples = self.task_samples("train", "loss")
        flat = [s for t in self.train_tasks for s in samples[t]]
        return DataLoader(_SampleDataset(flat, self.load), batch_sampler=self.train_sampler(rank, world),
                          num_workers=self.num_workers, collate_fn=self._collate,
                          persistent_workers=self.num_workers > 0)

    def _eval_loaders(self, split: str, purpose: Purpose, tasks: Sequence[str]) -> list[DataLoader]:
        rank, world = self._rank_world()
        samples = self.task_samples(split, purpose)
        loaders = []
        for task in tasks:
            if not samples[task]:
                log.warning("HiREST %s: no %s samples", split, task)
                continue
            dataset_len = len(samples[task])
            sampler = DistributedSampler(range(dataset_len), num_replicas=world, rank=rank, shuffle=False) \
                if world > 1 else None
            loaders.append(self._loader(samples[task], self.eval_batch_size, sampler=sampler, shuffle=False))
        return loaders

    def val_dataloader(self) -> list[DataLoader]:
        return self._eval_loaders("val", "loss", TASKS)

    def _inference_tasks(self) -> tuple[str, ...]:
        return ("moment_retrieval",) if self.inference == "end_to_end" else TASKS

    def test_dataloader(self) -> list[DataLoader]:
        return self._eval_loaders("test", "inference", self._inference_tasks())

    def predict_dataloader(self) -> list[DataLoader]:
        return self._eval_loaders(self.predict_split, "inference", self._inference_tasks())
