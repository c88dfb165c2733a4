"""The feature bank: frozen encoders run once per recording, not once per sample, and every recipe and context
length reads slices of the result.

Per recording, `<directory>/<video_id>/` holds float16 `.npy` arrays on a grid of k-second cells anchored at
t = 0 and a `meta.json` that says what they were made from. `FeatureBank` is the one object the DataModules and
the QA reader hold: `build()` makes the missing or stale recordings (sharded across ranks, one builder per
recording at a time across processes), `load()` maps one recording's arrays. What each step does lives beside
it: `freshness` (what a build would write now, and why a bank is stale), `build` (encoding one recording),
`load` (reading and checking the arrays, and features made elsewhere: folders whose meta says
`"external": true`, validated and never rebuilt), `config` (the grid and decoding settings). docs/feature_bank.md
has the layout.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from filelock import FileLock

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording, Spacewalk18
from spacewalk.benchmarks.spacewalk18.features.build import RecordingBuilder
from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
from spacewalk.benchmarks.spacewalk18.features.freshness import expected_meta, staleness
from spacewalk.benchmarks.spacewalk18.features.load import (
    TEXT_PART,
    ExternalFeatures,
    RecordingBank,
    external_has_text,
    external_meta,
    external_video_dim,
    load_frame_arrays,
    load_text_arrays,
    load_video_arrays,
)
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.io import remove_leftover_work
from spacewalk.media.grid import num_cells

if TYPE_CHECKING:  # the interface lives with the encoders; importing it at run time would pull in torch
    from spacewalk.encoders import TextEncoder, VideoEncoder

log = logging.getLogger(__name__)

LOCKS = ".locks"  # one lock file per recording: parallel builders of one bank take turns on each recording


class FeatureBank:
    """`build()` once (DataModule.prepare_data / setup), then `load(video_id)` anywhere.

    `frames_per_batch` bounds decoded frames held at once (and so the encoder's batch of clips);
    `texts_per_batch` bounds one text-encoder call. Neither changes the features.
    """

    def __init__(self, directory: str | Path, dataset: Spacewalk18, text_encoder: TextEncoder,
                 video_encoder: VideoEncoder | None = None, config: BankConfig | None = None, *,
                 frames_per_batch: int = 384, texts_per_batch: int = 256):
        self.directory = Path(directory)
        self.dataset = dataset
        self.text_encoder = text_encoder
        self.video_encoder = video_encoder
        self.config = config = config or BankConfig()
        self.builder = RecordingBuilder(config, text_encoder, video_encoder, max(1, int(frames_per_batch)),
                                        max(1, int(texts_per_batch)), self._frame_features())
        self.external = ExternalFeatures(config.segment_seconds)
        self._warned_no_video = False

    def path(self, video_id: str) -> Path:
        return self.directory / video_id

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
            if external_meta(self.path(video_id), video_id) is not None:
                self.external.load(self.path(video_id), rec)  # validated now, not halfway through training
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
                for leftover in remove_leftover_work(folder):  # a killed build's work folder: the lock says none runs
                    log.info("feature bank: removed %s, left by an interrupted build", leftover.name)
                self.builder.build(rec, folder, self._expected_meta(rec, with_video), with_video, progress)
            built.append(video_id)
        return built

    def is_fresh(self, video_id: str) -> bool:
        rec = self._recording(video_id)
        part = self._own_part(rec)
        return part is None or self._staleness(part[0], rec, part[1]) is None

    def load(self, video_id: str) -> RecordingBank:
        rec = self._recording(video_id)
        k = self.config.segment_seconds
        video = step_video = None
        frames: dict[str, np.ndarray] = {}
        if external_meta(self.path(video_id), video_id) is not None:
            video, step_video = self.external.load(self.path(video_id), rec)
        part = self._own_part(rec)
        if part is None:  # an external folder with text arrays of its own
            text = load_text_arrays(self.path(video_id), rec, k, check_finite=True)
        else:
            folder, with_video = part
            reason = self._staleness(folder, rec, with_video)
            if reason is not None:
                raise DataError(f"feature bank is missing or stale ({reason}); run FeatureBank.build() first",
                                file=folder, item=video_id)
            if with_video:
                # checked on load like the text below: a bank damaged after its build must not train on NaN
                video, step_video = load_video_arrays(folder, rec, k, check_finite=True)
                if self._frame_features():
                    frames = load_frame_arrays(folder, rec, self.config, video.shape[1])
            # the text arrays too are checked on every load, not only when built (a NaN row edited in or
            # damaged since would otherwise reach training); a scan of the mapped file, in slices
            text = load_text_arrays(folder, rec, k, check_finite=True)
        return RecordingBank(video_id=video_id, segment_seconds=k, num_cells=num_cells(rec.duration, k),
                             duration=rec.duration, video=video, step_video=step_video, **text, **frames)

    def external_video_dim(self, video_ids: Sequence[str]) -> int:
        """The width of the external video features of `video_ids`, which must all be external folders
        (docs/feature_bank.md) of one width: from meta.json's `dim` or video.npy's header, nothing else
        read. Without a video encoder this is where the width comes from, before any build."""
        return external_video_dim({v: self.path(self._recording(v).video_id) for v in video_ids})

    # ---- which folder this project builds, and whether it is fresh ------------------------------------------

    def _own_part(self, rec: Recording) -> tuple[Path, bool] | None:
        """Where this project builds arrays for `rec`, and whether they include video: the recording's
        folder, or for an external folder without text arrays its `text/` subfolder (text only, as the
        external features stand in for ours); None when an external folder has everything."""
        folder = self.path(rec.video_id)
        if external_meta(folder, rec.video_id) is None:
            return folder, self._uses_video(rec)
        if external_has_text(folder, rec.video_id):
            return None
        return folder / TEXT_PART, False

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

    def _expected_meta(self, rec: Recording, with_video: bool) -> dict:
        return expected_meta(rec, self.config, self.text_encoder, self.video_encoder, with_video,
                             self._frame_features())

    def _staleness(self, folder: Path, rec: Recording, with_video: bool) -> str | None:
        return staleness(folder, rec, self._expected_meta(rec, with_video), with_video)
