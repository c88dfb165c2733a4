"""The feature bank (DESIGN.md, data flow step 2): frozen encoders run once per recording, not once per
sample, and every recipe and context length reads slices of the result.

Per recording, `<directory>/<video_id>/` holds float16 `.npy` arrays on a grid of k-second cells
anchored at t = 0 and a `meta.json` that says what they were made from. A recording is built in a
hidden sibling folder and renamed into place, so a reader never sees half a bank. A bank whose meta
differs from what a build would write now (transcript, steps, duration, video file, encoders, config)
is stale and rebuilt. Folders whose meta says `"external": true` hold features made elsewhere
(InternVideo, EgoVLP, ...): they are validated, never rebuilt. docs/feature_bank.md has the layout.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from filelock import FileLock

from spacewalk.benchmarks.spacewalk18.data.dataset import (
    FPS,
    IRRELEVANT_DESCRIPTION,
    Recording,
    Spacewalk18,
    load_transcript,
)
from spacewalk.benchmarks.spacewalk18.data.windows import TranscriptIndex, Window
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.io import atomic_dir, load_json, write_json
from spacewalk.media.frame_prefetch import DecodeAhead, check_settings
from spacewalk.media.grid import cell_of, cell_span, num_cells
from spacewalk.media.video import BACKENDS, dense_timestamps, gpu_index, open_video, segment_timestamps

if TYPE_CHECKING:  # the interface lives with the encoders; importing it at run time would pull in torch
    from spacewalk.encoders import TextEncoder, VideoEncoder

log = logging.getLogger(__name__)

BANK_VERSION = 1
META_FILE = "meta.json"
TEXT_PART = "text"  # subfolder of an external folder: the text arrays we build for it
LOCKS = ".locks"  # one lock file per recording: parallel builders of one bank take turns on each recording
TEXT_FIELDS = ("cell_text", "sentence_text", "step_narration", "step_caption")
TIME_FIELDS = ("sentence_start", "sentence_end")
# BankConfig fields that change how a bank is built, never its arrays: not part of meta.json
BUILD_SETTINGS = ("prefetch", "decoders")
# A downloaded video may end a little before the annotation does; its last frame stands in up to this.
VIDEO_SHORTFALL_SECONDS = 2.0


@dataclass(frozen=True)
class BankConfig:
    segment_seconds: float = 12.0  # k: grid cells [j*k, (j+1)*k) anchored at t = 0, clipped to the recording
    fps: float = 1.0  # frames per second decoded inside a cell (k * fps frames for a full cell)
    frame_size: int | None = 224  # short side after a decode-time resize (aspect kept); None = native
    video_backend: str = "decord"
    # How the build runs, not what it makes (so not in meta.json: changing them leaves a bank fresh).
    # prefetch: batches each decoder decodes ahead of the encoder (0: decode, then encode, in turn);
    # decoders: threads splitting a recording by time (spacewalk/media/frame_prefetch.py; docs/feature_bank.md).
    prefetch: int = 2
    decoders: int = 1
    # "cuda[:i]": decord decodes on that GPU (NVDEC; decord built with CUDA; untested here). In meta.json
    # only when not "cpu" (GPU decoding may round pixels differently; cpu banks built before it stay fresh).
    decode_device: str = "cpu"

    def __post_init__(self):
        if not self.segment_seconds > 0 or not self.fps > 0:
            raise ConfigError(f"segment_seconds and fps must be positive, got {self.segment_seconds}, {self.fps}")
        if self.frame_size is not None and self.frame_size < 1:
            raise ConfigError(f"frame_size must be a positive int or None, got {self.frame_size}")
        if self.video_backend not in BACKENDS:
            raise ConfigError(f"unknown video backend {self.video_backend!r}; choose from {sorted(BACKENDS)}")
        check_settings(self.decoders, self.prefetch)
        if gpu_index(self.decode_device) is not None and self.video_backend != "decord":
            raise ConfigError(f"decode_device={self.decode_device!r} needs video_backend='decord' (GPU decoding is "
                              f"decord's), got {self.video_backend!r}")


@dataclass
class RecordingBank:
    video_id: str
    segment_seconds: float
    num_cells: int
    duration: float
    video: np.ndarray | None  # [num_cells, Dv]
    cell_text: np.ndarray  # [num_cells, Dt]
    sentence_text: np.ndarray  # [n_sentences, Dt], file order
    sentence_start: np.ndarray  # float64 [n_sentences]
    sentence_end: np.ndarray
    step_video: np.ndarray | None  # [K+1, Dv], row 0 (Irrelevant) zero
    step_narration: np.ndarray  # [K+1, Dt], row 0 = F_t(IRRELEVANT_DESCRIPTION)
    step_caption: np.ndarray  # [K+1, Dt], row 0 = F_t(IRRELEVANT_DESCRIPTION)
    # per-frame video features, for encoders that average frame embeddings (averages_frames): every frame
    # the cells were made of, in time order; what sparse frame sampling reads. None otherwise.
    frame_video: np.ndarray | None = None  # [num_frames, Dv]
    frame_time: np.ndarray | None = None  # float64 [num_frames], seconds

    def _check_time(self, t: float, name: str) -> None:
        if not 0 <= t <= self.duration + 1e-6:
            raise ValueError(f"{self.video_id}: {name} {t} outside the recording [0, {self.duration}]")

    def cell_of(self, t: float) -> int:
        self._check_time(t, "time")
        return cell_of(t, self.segment_seconds, self.num_cells)

    def cells_in(self, start: float, end: float) -> np.ndarray:
        """Indices of the cells overlapping [start, end) (spacewalk.media.grid.cell_span, the rule every window
        reader shares); an empty window gives the cell holding it."""
        self._check_time(start, "window start")
        self._check_time(end, "window end")
        if end < start:
            raise ValueError(f"{self.video_id}: window [{start}, {end}] is reversed")
        first, last = cell_span(start, end, self.segment_seconds, self.num_cells)
        return np.arange(first, last + 1)


# --------------------------------------------------------------------------------------------------


class FeatureBank:
    """`build()` once (DataModule.prepare_data / setup), then `load(video_id)` anywhere.

    `frames_per_batch` bounds decoded frames held at once (and so the encoder's batch of clips);
    `texts_per_batch` bounds one text-encoder call. Neither changes the features.
    """

    def __init__(self, directory: str | Path, dataset: Spacewalk18, text_encoder: TextEncoder,
                 video_encoder: VideoEncoder | None = None, config: BankConfig = BankConfig(), *,
                 frames_per_batch: int = 384, texts_per_batch: int = 256):
        self.directory = Path(directory)
        self.dataset = dataset
        self.text_encoder = text_encoder
        self.video_encoder = video_encoder
        self.config = config
        self.frames_per_batch = max(1, int(frames_per_batch))
        self.texts_per_batch = max(1, int(texts_per_batch))
        self._warned_no_video = False
        self._external_width: tuple[int, str, str] | None = None  # (width, first video id, its encoder)

    def path(self, video_id: str) -> Path:
        return self.directory / video_id

    # ---- public API -------------------------------------------------------------------------------

    def build(self, video_ids: Sequence[str] | None = None, progress: bool = True, rank: int = 0,
              world_size: int = 1) -> list[str]:
        """Build the missing or stale recordings among ids[rank::world_size]; return those built."""
        from tqdm import tqdm

        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} outside 0..{world_size - 1}")
        ids = list(self.dataset.recordings) if video_ids is None else list(video_ids)
        unknown = [v for v in ids if v not in self.dataset.recordings]
        if unknown:
            raise ConfigError(f"unknown video ids {unknown}; the dataset has {sorted(self.dataset.recordings)}")
        # Shard before looking at freshness: ranks finishing at different times must not change the split.
        mine = ids[rank::world_size]
        built = []
        bar = tqdm(mine, desc="feature bank" + (f" [rank {rank}]" if world_size > 1 else ""), unit="recording",
                   disable=not progress)
        for video_id in bar:
            bar.set_postfix_str(video_id)
            rec = self.dataset.recordings[video_id]
            if self._external_meta(video_id) is not None:
                self._load_external(rec)  # validated now, not halfway through training
            part = self._own_part(rec)
            if part is None:
                continue
            folder, with_video = part
            if self._staleness(folder, rec, with_video) is None:
                continue
            # parallel jobs sharing a bank (hydra/launcher=local, an array of SLURM jobs): one builds a recording,
            # the others wait for it and then find it fresh, rather than each building it and replacing the others'
            locks = self.directory / LOCKS
            locks.mkdir(parents=True, exist_ok=True)
            with FileLock(locks / f"{video_id}.lock"):
                reason = self._staleness(folder, rec, with_video)
                if reason is None:
                    log.info("feature bank: %s was built by another process meanwhile", video_id)
                    continue
                log.info("feature bank: building %s (%s)", video_id, reason)
                self._build_recording(rec, folder, with_video, progress)
            built.append(video_id)
        return built

    def is_fresh(self, video_id: str) -> bool:
        rec = self._recording(video_id)
        part = self._own_part(rec)
        return part is None or self._staleness(part[0], rec, part[1]) is None

    def load(self, video_id: str) -> RecordingBank:
        rec = self._recording(video_id)
        video = step_video = None
        frames: dict[str, np.ndarray] = {}
        if self._external_meta(video_id) is not None:
            video, step_video = self._load_external(rec)
        part = self._own_part(rec)
        if part is None:  # an external folder with text arrays of its own
            text = self._load_text_arrays(self.path(video_id), rec, check_finite=True)
        else:
            folder, with_video = part
            reason = self._staleness(folder, rec, with_video)
            if reason is not None:
                raise DataError(f"feature bank is missing or stale ({reason}); run FeatureBank.build() first",
                                file=folder, item=video_id)
            if with_video:
                # checked on load like the text below: a bank damaged after its build must not train on NaN
                video, step_video = self._load_video_arrays(folder, rec, check_finite=True)
                if self._frame_features():
                    frames = self._load_frame_arrays(folder, rec, video.shape[1])
            # the text arrays too are checked on every load, not only when built (a NaN row edited in or
            # damaged since would otherwise reach training); a scan of the mapped file, in slices
            text = self._load_text_arrays(folder, rec, check_finite=True)
        return RecordingBank(video_id=video_id, segment_seconds=self.config.segment_seconds,
                             num_cells=num_cells(rec.duration, self.config.segment_seconds),
                             duration=rec.duration, video=video, step_video=step_video, **text, **frames)

    def external_video_dim(self, video_ids: Sequence[str]) -> int:
        """The width of the external video features of `video_ids`, which must all be external folders
        (docs/feature_bank.md) of one width: from meta.json's `dim` or video.npy's header, nothing else
        read. Without a video encoder this is where the width comes from, before any build."""
        widths: dict[int, str] = {}
        for video_id in video_ids:
            folder = self.path(self._recording(video_id).video_id)
            meta = self._external_meta(video_id)
            if meta is None:
                raise DataError("video features are wanted but there is no video encoder to build them, and no "
                                "external features here (a meta.json with \"external\": true): choose an "
                                "encoder= config with a video encoder, or put external features in this bank "
                                "(encoder=external, docs/feature_bank.md)", file=folder / META_FILE, item=video_id)
            dim = meta.get("dim")
            if dim is None:
                file = folder / "video.npy"
                if not file.is_file():
                    raise DataError("array missing", file=file, item=video_id, field="video")
                try:
                    shape = np.load(file, mmap_mode="r").shape
                except (ValueError, OSError) as e:
                    raise DataError(f"not a readable .npy array ({e})", file=file, item=video_id, field="video") from e
                if len(shape) != 2:
                    raise DataError(f"shape {list(shape)}, expected [num_cells, D]", file=file, item=video_id,
                                    field="video")
                dim = shape[1]
            if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
                raise DataError(f"expected a positive int, got {dim!r}", file=folder / META_FILE, item=video_id,
                                field="dim")
            widths.setdefault(dim, video_id)
            if len(widths) > 1:
                (w0, first), (w1, other) = widths.items()
                raise DataError(f"{w1} columns, but {first}'s external features have {w0}: one bank holds one "
                                "feature width", file=folder / "video.npy", item=other, field="video")
        if not widths:
            raise ValueError("external_video_dim needs at least one video id")
        return next(iter(widths))

    def _own_part(self, rec: Recording) -> tuple[Path, bool] | None:
        """Where this project builds arrays for `rec`, and whether they include video: the recording's
        folder, or for an external folder without text arrays its `text/` subfolder (text only, as the
        external features stand in for ours); None when an external folder has everything."""
        folder = self.path(rec.video_id)
        if self._external_meta(rec.video_id) is None:
            return folder, self._uses_video(rec)
        if self._external_has_text(folder, rec.video_id):
            return None
        return folder / TEXT_PART, False

    # ---- freshness --------------------------------------------------------------------------------

    def _recording(self, video_id: str) -> Recording:
        if video_id not in self.dataset.recordings:
            raise KeyError(f"unknown video id {video_id!r}")
        return self.dataset.recordings[video_id]

    def _uses_video(self, rec: Recording) -> bool:
        if self.video_encoder is None:
            return False
        if not rec.has_video:
            if not self._warned_no_video:
                log.warning("feature bank: %s has no video file (%s); its bank holds text only (video=None). "
                            "Other recordings without video are not reported.", rec.video_id, rec.video_path)
                self._warned_no_video = True
            return False
        return True

    def _frame_features(self) -> bool:
        """Whether video banks keep per-frame features: for encoders whose clip feature is the normalised
        mean of its frames' unit embeddings (`averages_frames`), the frames are encoded one by one and the
        cells derived from them, at no extra encoder cost."""
        return bool(getattr(self.video_encoder, "averages_frames", False))

    def _expected_meta(self, rec: Recording, with_video: bool) -> dict[str, Any]:
        """Everything that shaped the arrays, so that any change makes the bank stale. Video settings and
        the video file count only where video was encoded: a text-only bank does not depend on them."""
        config = {"segment_seconds": self.config.segment_seconds}
        if with_video:
            config |= {k: v for k, v in dataclasses.asdict(self.config).items()
                       if k not in ("segment_seconds", *BUILD_SETTINGS) and (k, v) != ("decode_device", "cpu")}
            if self._frame_features():
                # only where true: banks of clip encoders, built before this existed, stay fresh
                config["frame_features"] = True
        transcript = rec.transcript_path.read_bytes()
        steps = json.dumps([dataclasses.asdict(s) for s in rec.steps], sort_keys=True)
        video = None
        if with_video:
            stat = rec.video_path.stat()
            video = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        return {
            "version": BANK_VERSION,
            "video_id": rec.video_id,
            "encoders": {"text": self.text_encoder.identity,
                         "video": self.video_encoder.identity if with_video else None},
            "config": config,
            "sources": {
                "transcript": {"size": len(transcript), "sha1": hashlib.sha1(transcript).hexdigest()},
                "steps_sha1": hashlib.sha1(steps.encode()).hexdigest(),
                "duration": rec.duration,
                "video": video,
            },
        }

    def _read_meta(self, folder: Path, video_id: str) -> dict | None:
        meta_file = folder / META_FILE
        if not meta_file.is_file():
            if folder.exists():
                # Our builds are atomic, so a folder without meta is someone else's: never replace it.
                raise DataError(f"folder has no {META_FILE}: not a bank this project wrote; delete it, or add "
                                "an external meta.json (docs/feature_bank.md)", file=folder, item=video_id)
            return None
        meta = load_json(meta_file)
        if not isinstance(meta, dict):
            raise DataError("expected a JSON object", file=meta_file, item=video_id)
        return meta

    def _staleness(self, folder: Path, rec: Recording, with_video: bool) -> str | None:
        """Why the bank in `folder` must be (re)built, or None when it is fresh. A bank with video also
        serves a text-only request (its video is then not loaded) rather than being rebuilt without it."""
        meta = self._read_meta(folder, rec.video_id)
        if meta is None:
            return "not built"
        if meta.get("external") is True:
            raise DataError("an external folder where this project builds its own bank", file=folder,
                            item=rec.video_id)
        expected = self._expected_meta(rec, with_video)
        want, have = dict(_flatten(expected)), dict(_flatten({k: meta.get(k) for k in expected}))
        if not with_video:
            want = {k: v for k, v in want.items() if not k.startswith(("encoders.video", "sources.video"))}
        for key, value in want.items():
            if have.get(key) != value:
                return f"{key} changed: {have.get(key)!r} -> {value!r}"
        return None

    # ---- building ---------------------------------------------------------------------------------

    def _build_recording(self, rec: Recording, final: Path, with_video: bool, progress: bool) -> None:
        with atomic_dir(final) as work:  # a stale bank is replaced only once the new one is complete
            meta = self._expected_meta(rec, with_video)  # read before encoding: a source edited mid-build is stale
            arrays = self._text_arrays(rec, progress)
            for name, array in arrays.items():
                np.save(work / f"{name}.npy", array)
            dims = {"text": self.text_encoder.dim, "video": None}
            if with_video:
                self._video_arrays(rec, work, progress)
                dims["video"] = self.video_encoder.dim
            meta |= {"num_cells": num_cells(rec.duration, self.config.segment_seconds),
                     "num_sentences": len(arrays["sentence_start"]), "num_steps": len(rec.steps), "dims": dims}
            write_json(work / META_FILE, meta)  # last: a folder with meta.json is complete

    def _text_arrays(self, rec: Recording, progress: bool) -> dict[str, np.ndarray]:
        k, duration = self.config.segment_seconds, rec.duration
        sentences = _sentences(rec)
        index = TranscriptIndex(sentences)
        cells = [index.text_in(Window(j * k, min((j + 1) * k, duration))) for j in range(num_cells(duration, k))]
        narration = [IRRELEVANT_DESCRIPTION] + [s.transcript for s in rec.steps[1:]]
        caption = [IRRELEVANT_DESCRIPTION] + [s.caption for s in rec.steps[1:]]
        groups = {"cell_text": cells, "sentence_text": [s.text for s in sentences],
                  "step_narration": narration, "step_caption": caption}
        encoded = self._encode_texts([t for texts in groups.values() for t in texts], rec.video_id, progress)
        out, i = {}, 0
        for name, texts in groups.items():
            out[name] = encoded[i:i + len(texts)]
            i += len(texts)
        out["sentence_start"], out["sentence_end"] = index.starts, index.ends
        return out

    def _encode_texts(self, texts: list[str], video_id: str, progress: bool) -> np.ndarray:
        """float16 [len(texts), Dt]; each distinct non-empty text is encoded once (a long sentence
        spans several cells; many cells are silent), empty text is the encoder's zero row."""
        from tqdm import tqdm

        encoder = self.text_encoder
        unique = list(dict.fromkeys(t for t in texts if t))
        table = np.zeros((len(unique) + 1, encoder.dim), dtype=np.float16)  # last row: the empty text
        n = self.texts_per_batch
        with tqdm(total=len(unique), desc=f"{video_id} text", unit="text", leave=False,
                  disable=not progress or len(unique) <= n) as bar:
            for i in range(0, len(unique), n):
                batch = unique[i:i + n]
                table[i:i + len(batch)] = _checked(encoder.encode(batch), len(batch), encoder, video_id)
                bar.update(len(batch))
        row = {t: i for i, t in enumerate(unique)}
        return table[[row.get(t, len(unique)) for t in texts]]

    def _video_arrays(self, rec: Recording, work: Path, progress: bool) -> None:
        from tqdm import tqdm

        cfg, encoder = self.config, self.video_encoder
        cells = segment_timestamps(0.0, rec.duration, cfg.segment_seconds, cfg.fps, duration=rec.duration)
        n = num_cells(rec.duration, cfg.segment_seconds)
        assert len(cells) == n, (len(cells), n)
        steps = [dense_timestamps(s.animation_start, s.animation_end, cfg.fps) for s in rec.steps[1:]]
        steps = [t if len(t) else np.array([s.animation_start]) for t, s in zip(steps, rec.steps[1:])]
        height, width, stream_fps = _probe(rec.video_path, rec.video_id)
        # The release counts frames at exactly 29.97 while its streams run at 30000/1001; a stream at
        # another rate (the synthetic mp4s) is addressed on its own clock.
        timestamp_fps = FPS if abs(stream_fps - FPS) < 1e-3 * FPS else None
        size = _resize(height, width, cfg.frame_size)

        def open_reader():
            return open_video(rec.video_path, cfg.video_backend, size, timestamp_fps, cfg.decode_device)

        with open_reader() as reader, \
                tqdm(total=len(steps) + n, desc=f"{rec.video_id} video", unit="clip", leave=False,
                     disable=not progress) as bar:
            if rec.duration > reader.duration + VIDEO_SHORTFALL_SECONDS:
                raise DataError(f"the video is {reader.duration:.2f} s long but the annotation runs to "
                                f"{rec.duration} s", file=rec.video_path, item=rec.video_id, field="duration")
            times = [c.timestamps for c in cells]
            # Every batch of frames the build needs, in the order it encodes them: the steps' clips, then
            # the cells (the last cell's frames clipped to the video's own end).
            step_groups = list(_batches([len(t) for t in steps], self.frames_per_batch))
            cell_groups = list(_batches([len(t) for t in times], self.frames_per_batch))
            requests = [np.minimum(np.concatenate(ts[start:stop]), reader.duration)
                        for ts, groups in ((steps, step_groups), (times, cell_groups)) for start, stop in groups]
            with DecodeAhead(requests, open_reader, path=rec.video_path, decoders=cfg.decoders,
                             ahead=cfg.prefetch, reader=reader) as decoded:
                batches = iter(decoded)
                step_video = np.zeros((len(rec.steps), encoder.dim), dtype=np.float16)
                # zip takes the group first: it stops at the last step batch without taking a cell batch
                self._encode_clips(zip(step_groups, batches), steps, step_video[1:], rec.video_id, bar)
                np.save(work / "step_video.npy", step_video)
                # Written in place, chunk by chunk: an 8-hour recording never sits in memory.
                video = np.lib.format.open_memmap(work / "video.npy", mode="w+", dtype=np.float16,
                                                  shape=(n, encoder.dim))
                if self._frame_features():
                    np.save(work / "frame_time.npy", np.concatenate(times).astype(np.float64))
                    frames = np.lib.format.open_memmap(work / "frame_video.npy", mode="w+", dtype=np.float16,
                                                       shape=(sum(len(t) for t in times), encoder.dim))
                    self._encode_frames(zip(cell_groups, batches), times, video, frames, rec.video_id, bar)
                    frames.flush()
                    del frames
                else:
                    self._encode_clips(zip(cell_groups, batches), times, video, rec.video_id, bar)
                video.flush()
                del video

    def _encode_frames(self, decoded: Iterable[tuple[tuple[int, int], np.ndarray]], timestamps: list[np.ndarray],
                       out: np.ndarray, frames_out: np.ndarray, video_id: str, bar) -> None:
        """For an encoder that averages frames: each frame encoded alone (a one-frame clip gives its unit
        embedding) into `frames_out`, and each cell the normalised sum of its frames' embeddings, which is
        what encoding the cell as one clip gives, up to float rounding. `decoded`: ((start, stop), the
        frames of cells start..stop-1)."""
        frame = 0
        for (start, stop), frames in decoded:
            group = timestamps[start:stop]
            unit = np.asarray(self.video_encoder.encode([f[None] for f in frames]), dtype=np.float32)
            frames_out[frame:frame + len(frames)] = _checked(unit, len(frames), self.video_encoder, video_id)
            sums = np.add.reduceat(unit, np.r_[0, np.cumsum([len(t) for t in group])[:-1]], axis=0)
            out[start:stop] = _checked(unit_rows(sums), len(group), self.video_encoder, video_id)
            frame += len(frames)
            bar.update(len(group))

    def _encode_clips(self, decoded: Iterable[tuple[tuple[int, int], np.ndarray]], timestamps: list[np.ndarray],
                      out: np.ndarray, video_id: str, bar) -> None:
        for (start, stop), frames in decoded:
            group = timestamps[start:stop]
            clips = np.split(frames, np.cumsum([len(t) for t in group])[:-1])
            out[start:stop] = _checked(self.video_encoder.encode(clips), len(clips), self.video_encoder, video_id)
            bar.update(len(clips))

    # ---- loading and validation -------------------------------------------------------------------

    def _external_meta(self, video_id: str) -> dict | None:
        meta = self._read_meta(self.path(video_id), video_id)
        return meta if meta is not None and meta.get("external") is True else None

    def _load_external(self, rec: Recording) -> tuple[np.ndarray, np.ndarray | None]:
        """The external video arrays of `rec`, validated: meta, shapes on our grid, finite values, and one
        width across the recordings of this bank (a head has one input size)."""
        folder, video_id = self.path(rec.video_id), rec.video_id
        meta, file = self._external_meta(video_id), self.path(video_id) / META_FILE
        if not isinstance(meta.get("encoder"), str) or not meta["encoder"]:
            raise DataError("an external bank must name its encoder (a non-empty string)", file=file,
                            item=video_id, field="encoder")
        k = meta.get("segment_seconds")
        if isinstance(k, bool) or not isinstance(k, (int, float)):
            raise DataError(f"expected a number of seconds, got {k!r}", file=file, item=video_id,
                            field="segment_seconds")
        if abs(k - self.config.segment_seconds) > 1e-9:
            raise DataError(f"features on a {k} s grid, but this bank uses segment_seconds="
                            f"{self.config.segment_seconds}", file=file, item=video_id, field="segment_seconds")
        video, step_video = self._load_video_arrays(folder, rec, check_finite=True)
        dim = video.shape[1]
        if "dim" in meta and meta["dim"] != dim:
            raise DataError(f"meta.json says dim {meta['dim']!r} but video.npy has {dim} columns",
                            file=folder / "video.npy", item=video_id, field="video")
        if self._external_width is None:
            self._external_width = (dim, video_id, meta["encoder"])
        elif self._external_width[0] != dim:
            width, other, encoder = self._external_width
            raise DataError(f"{dim} columns ({meta['encoder']}), but {other}'s external features ({encoder}) "
                            f"have {width}: one bank holds one feature width", file=folder / "video.npy",
                            item=video_id, field="video")
        return video, step_video

    def _external_has_text(self, folder: Path, video_id: str) -> bool:
        names = TEXT_FIELDS + TIME_FIELDS
        present = [f for f in names if (folder / f"{f}.npy").is_file()]
        if present and len(present) < len(names):
            missing = next(f for f in names if f not in present)
            raise DataError(f"external text arrays come all together or not at all (found {present})",
                            file=folder / f"{missing}.npy", item=video_id, field=missing)
        return bool(present)

    def _load_video_arrays(self, folder: Path, rec: Recording, check_finite: bool):
        k = self.config.segment_seconds
        grid = f"num_cells = ceil(duration {rec.duration} s / segment_seconds {k} s)"
        video = _load_array(folder, "video", rec.video_id, (num_cells(rec.duration, k), None), check_finite, grid)
        step_video = None
        if (folder / "step_video.npy").is_file():
            step_video = _load_array(folder, "step_video", rec.video_id, (len(rec.steps), video.shape[1]),
                                     check_finite, "one row per step, Irrelevant included, as wide as video.npy")
        return video, step_video

    def _load_frame_arrays(self, folder: Path, rec: Recording, dim: int) -> dict[str, np.ndarray]:
        times = self._frame_times(rec)
        why = f"one row per 1/fps frame of the cells (fps {self.config.fps})"
        return {"frame_video": _load_array(folder, "frame_video", rec.video_id, (len(times), dim), False, why),
                "frame_time": _load_array(folder, "frame_time", rec.video_id, (len(times),), False, why)}

    def _frame_times(self, rec: Recording) -> np.ndarray:
        cfg = self.config
        cells = segment_timestamps(0.0, rec.duration, cfg.segment_seconds, cfg.fps, duration=rec.duration)
        return np.concatenate([c.timestamps for c in cells])

    def _load_text_arrays(self, folder: Path, rec: Recording, check_finite: bool) -> dict[str, np.ndarray]:
        k, v = self.config.segment_seconds, rec.video_id
        grid = f"num_cells = ceil(duration {rec.duration} s / segment_seconds {k} s)"
        out = {"cell_text": _load_array(folder, "cell_text", v, (num_cells(rec.duration, k), None), check_finite,
                                        grid)}
        dim, n_sentences = out["cell_text"].shape[1], len(_sentences(rec))
        for name, rows, why in (("sentence_text", n_sentences, "one row per transcript sentence"),
                                ("step_narration", len(rec.steps), "one row per step, Irrelevant included"),
                                ("step_caption", len(rec.steps), "one row per step, Irrelevant included")):
            out[name] = _load_array(folder, name, v, (rows, dim), check_finite, why)
        for name in TIME_FIELDS:
            out[name] = _load_array(folder, name, v, (n_sentences,), check_finite, "one per transcript sentence")
        return out


# --------------------------------------------------------------------------------------------------


def _load_array(folder: Path, name: str, video_id: str, shape: tuple[int | None, ...], check_finite: bool,
                why: str = "") -> np.ndarray:
    """Memory-map `<folder>/<name>.npy` and check it against `shape` (None: any size)."""
    file = folder / f"{name}.npy"
    if not file.is_file():
        raise DataError("array missing", file=file, item=video_id, field=name)
    try:
        array = np.load(file, mmap_mode="r")
    except (ValueError, OSError) as e:
        raise DataError(f"not a readable .npy array ({e})", file=file, item=video_id, field=name) from e
    if array.dtype not in (np.float16, np.float32, np.float64):
        raise DataError(f"expected float16 or float32 values, got {array.dtype}", file=file, item=video_id,
                        field=name)
    if array.ndim != len(shape) or any(h != w if w is not None else h == 0
                                       for h, w in zip(array.shape, shape)):
        shown = ", ".join("D" if w is None else str(w) for w in shape)
        raise DataError(f"shape {list(array.shape)}, expected [{shown}]" + (f" ({why})" if why else ""),
                        file=file, item=video_id, field=name)
    if check_finite:
        for i in range(0, len(array), 65536):  # in slices: the file is mapped, not read into memory
            finite = np.isfinite(array[i:i + 65536])
            if not finite.all():
                row = i + int(np.argwhere(~finite)[0][0])
                raise DataError(f"non-finite values (NaN or inf), first in row {row}; rebuild the bank (delete "
                                "the folder)", file=file, item=video_id, field=name)
    return array


def _sentences(rec: Recording):
    # From the file, not the Recording's cached copy: the fingerprint in meta.json is of the file now.
    return load_transcript(rec.transcript_path, rec.video_id)


def _checked(features: Any, n: int, encoder, video_id: str) -> np.ndarray:
    array = np.asarray(features, dtype=np.float32)
    if array.shape != (n, encoder.dim):
        raise ValueError(f"encoder {encoder.identity!r} returned shape {array.shape} for {n} inputs of "
                         f"{video_id}; expected ({n}, {encoder.dim})")
    half = array.astype(np.float16)
    if not np.isfinite(half).all():
        raise ValueError(f"encoder {encoder.identity!r} returned NaN, inf or values beyond float16 range "
                         f"for {video_id}")
    return half


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Each row divided by its L2 norm; zero rows stay zero."""
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def _batches(lengths: Sequence[int], budget: int) -> Iterator[tuple[int, int]]:
    """Contiguous [start, stop) groups of clips with at most `budget` frames (at least one clip each)."""
    start, total = 0, 0
    for i, n in enumerate(lengths):
        if i > start and total + n > budget:
            yield start, i
            start, total = i, 0
        total += n
    if start < len(lengths):
        yield start, len(lengths)


def _probe(path: Path, video_id: str) -> tuple[int, int, float]:
    # PyAV reads only the header; decord would index the whole file just to tell the frame size.
    import av

    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate
            return stream.codec_context.height, stream.codec_context.width, float(rate)
    except Exception as e:
        raise DataError(f"cannot read the video header ({e})", file=path, item=video_id) from e


def _resize(height: int, width: int, short_side: int | None) -> tuple[int, int] | None:
    if short_side is None or min(height, width) == short_side:
        return None
    scale = short_side / min(height, width)
    return max(1, round(height * scale)), max(1, round(width * scale))


def _flatten(obj: dict, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in obj.items():
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
