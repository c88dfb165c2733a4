"""Building one recording's bank: its transcript and steps through the text encoder, its video through the video
encoder, into float16 arrays on the grid of k-second cells.

Text: each cell's transcript (the sentences overlapping it), every sentence, and each step's narration and
caption (row 0, Irrelevant, the benchmark's DES text); each distinct text is encoded once. Video: each cell's
frames at `fps` (the last cell clipped to the video's own end) and each step's animation, decoded ahead of the
encoder by `DecodeAhead` (spacewalk/media/frame_prefetch.py) and encoded in batches of at most
`frames_per_batch` frames; for an encoder that averages its frames' embeddings the frames are encoded one by one
and kept (`frame_video.npy`, what sparse frame sampling reads), each cell their normalised sum. An 8-hour
recording is written chunk by chunk into memory-mapped files, never held in memory. The recording is built in a
hidden sibling folder and renamed into place with its meta.json written last (spacewalk/core/io.py), so a reader
never sees half a bank.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, IRRELEVANT_DESCRIPTION, Recording
from spacewalk.benchmarks.spacewalk18.data.windows import TranscriptIndex, Window
from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
from spacewalk.benchmarks.spacewalk18.features.freshness import META_FILE
from spacewalk.benchmarks.spacewalk18.features.load import transcript_sentences
from spacewalk.core.errors import DataError
from spacewalk.core.io import atomic_dir, write_json
from spacewalk.media.frame_prefetch import DecodeAhead
from spacewalk.media.grid import num_cells
from spacewalk.media.video import dense_timestamps, open_video, segment_timestamps

if TYPE_CHECKING:  # the interface lives with the encoders; importing it at run time would pull in torch
    from spacewalk.encoders import TextEncoder, VideoEncoder

# A downloaded video may end a little before the annotation does; its last frame stands in up to this.
VIDEO_SHORTFALL_SECONDS = 2.0


class RecordingBuilder:
    """Writes one recording's arrays and meta.json. `frames_per_batch` bounds decoded frames held at once (and so
    the encoder's batch of clips); `texts_per_batch` bounds one text-encoder call. Neither changes the features.
    `frame_features`: keep per-frame features (an encoder that averages its frames)."""

    def __init__(self, config: BankConfig, text_encoder: TextEncoder, video_encoder: VideoEncoder | None,
                 frames_per_batch: int, texts_per_batch: int, frame_features: bool):
        self.config = config
        self.text_encoder = text_encoder
        self.video_encoder = video_encoder
        self.frames_per_batch = frames_per_batch
        self.texts_per_batch = texts_per_batch
        self.frame_features = frame_features

    def build(self, rec: Recording, final: Path, meta: dict[str, Any], with_video: bool, progress: bool) -> None:
        """The bank of `rec` at `final`; `meta`: what it is made from (freshness.expected_meta), read before
        encoding, so a source edited mid-build leaves the bank stale."""
        with atomic_dir(final) as work:  # a stale bank is replaced only once the new one is complete
            arrays = self.text_arrays(rec, progress)
            for name, array in arrays.items():
                np.save(work / f"{name}.npy", array)
            dims = {"text": self.text_encoder.dim, "video": None}
            if with_video:
                self.video_arrays(rec, work, progress)
                dims["video"] = self.video_encoder.dim
            meta = meta | {"num_cells": num_cells(rec.duration, self.config.segment_seconds),
                           "num_sentences": len(arrays["sentence_start"]), "num_steps": len(rec.steps), "dims": dims}
            write_json(work / META_FILE, meta)  # last: a folder with meta.json is complete

    def text_arrays(self, rec: Recording, progress: bool) -> dict[str, np.ndarray]:
        k, duration = self.config.segment_seconds, rec.duration
        sentences = transcript_sentences(rec)
        index = TranscriptIndex(sentences)
        cells = [index.text_in(Window(j * k, min((j + 1) * k, duration))) for j in range(num_cells(duration, k))]
        narration = [IRRELEVANT_DESCRIPTION] + [s.transcript for s in rec.steps[1:]]
        caption = [IRRELEVANT_DESCRIPTION] + [s.caption for s in rec.steps[1:]]
        groups = {"cell_text": cells, "sentence_text": [s.text for s in sentences],
                  "step_narration": narration, "step_caption": caption}
        encoded = self.encode_texts([t for texts in groups.values() for t in texts], rec.video_id, progress)
        out, i = {}, 0
        for name, texts in groups.items():
            out[name] = encoded[i:i + len(texts)]
            i += len(texts)
        out["sentence_start"], out["sentence_end"] = index.starts, index.ends
        return out

    def encode_texts(self, texts: list[str], video_id: str, progress: bool) -> np.ndarray:
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
                table[i:i + len(batch)] = checked(encoder.encode(batch), len(batch), encoder, video_id)
                bar.update(len(batch))
        row = {t: i for i, t in enumerate(unique)}
        return table[[row.get(t, len(unique)) for t in texts]]

    def video_arrays(self, rec: Recording, work: Path, progress: bool) -> None:
        from tqdm import tqdm

        cfg, encoder = self.config, self.video_encoder
        cells = segment_timestamps(0.0, rec.duration, cfg.segment_seconds, cfg.fps, duration=rec.duration)
        n = num_cells(rec.duration, cfg.segment_seconds)
        assert len(cells) == n, (len(cells), n)
        steps = [dense_timestamps(s.animation_start, s.animation_end, cfg.fps) for s in rec.steps[1:]]
        steps = [t if len(t) else np.array([s.animation_start]) for t, s in zip(steps, rec.steps[1:])]
        height, width, stream_fps = probe_video(rec.video_path, rec.video_id)
        # The release counts frames at exactly 29.97 while its streams run at 30000/1001; a stream at
        # another rate (the synthetic mp4s) is addressed on its own clock.
        timestamp_fps = FPS if abs(stream_fps - FPS) < 1e-3 * FPS else None
        size = resized(height, width, cfg.frame_size)

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
            step_groups = list(frame_batches([len(t) for t in steps], self.frames_per_batch))
            cell_groups = list(frame_batches([len(t) for t in times], self.frames_per_batch))
            requests = [np.minimum(np.concatenate(ts[start:stop]), reader.duration)
                        for ts, groups in ((steps, step_groups), (times, cell_groups)) for start, stop in groups]
            with DecodeAhead(requests, open_reader, path=rec.video_path, decoders=cfg.decoders,
                             ahead=cfg.prefetch, reader=reader) as decoded:
                batches = iter(decoded)
                step_video = np.zeros((len(rec.steps), encoder.dim), dtype=np.float16)
                # zip takes the group first: it stops at the last step batch without taking a cell batch
                self.encode_clips(zip(step_groups, batches), steps, step_video[1:], rec.video_id, bar)
                np.save(work / "step_video.npy", step_video)
                # Written in place, chunk by chunk: an 8-hour recording never sits in memory.
                video = np.lib.format.open_memmap(work / "video.npy", mode="w+", dtype=np.float16,
                                                  shape=(n, encoder.dim))
                if self.frame_features:
                    np.save(work / "frame_time.npy", np.concatenate(times).astype(np.float64))
                    frames = np.lib.format.open_memmap(work / "frame_video.npy", mode="w+", dtype=np.float16,
                                                       shape=(sum(len(t) for t in times), encoder.dim))
                    self.encode_frames(zip(cell_groups, batches), times, video, frames, rec.video_id, bar)
                    frames.flush()
                    del frames
                else:
                    self.encode_clips(zip(cell_groups, batches), times, video, rec.video_id, bar)
                video.flush()
                del video

    def encode_frames(self, decoded: Iterable[tuple[tuple[int, int], np.ndarray]], timestamps: list[np.ndarray],
                      out: np.ndarray, frames_out: np.ndarray, video_id: str, bar) -> None:
        """For an encoder that averages frames: each frame encoded alone (a one-frame clip gives its unit
        embedding) into `frames_out`, and each cell the normalised sum of its frames' embeddings, which is
        what encoding the cell as one clip gives, up to float rounding. `decoded`: ((start, stop), the
        frames of cells start..stop-1)."""
        frame = 0
        for (start, stop), frames in decoded:
            group = timestamps[start:stop]
            unit = np.asarray(self.video_encoder.encode([f[None] for f in frames]), dtype=np.float32)
            frames_out[frame:frame + len(frames)] = checked(unit, len(frames), self.video_encoder, video_id)
            sums = np.add.reduceat(unit, np.r_[0, np.cumsum([len(t) for t in group])[:-1]], axis=0)
            out[start:stop] = checked(unit_rows(sums), len(group), self.video_encoder, video_id)
            frame += len(frames)
            bar.update(len(group))

    def encode_clips(self, decoded: Iterable[tuple[tuple[int, int], np.ndarray]], timestamps: list[np.ndarray],
                     out: np.ndarray, video_id: str, bar) -> None:
        for (start, stop), frames in decoded:
            group = timestamps[start:stop]
            clips = np.split(frames, np.cumsum([len(t) for t in group])[:-1])
            out[start:stop] = checked(self.video_encoder.encode(clips), len(clips), self.video_encoder, video_id)
            bar.update(len(clips))


def checked(features: Any, n: int, encoder, video_id: str) -> np.ndarray:
    """An encoder's output as float16, refused (naming the encoder and the recording) when its shape is not
    (n, dim) or a value is not finite in float16."""
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


def frame_batches(lengths: Sequence[int], budget: int) -> Iterator[tuple[int, int]]:
    """Contiguous [start, stop) groups of clips with at most `budget` frames (at least one clip each)."""
    start, total = 0, 0
    for i, n in enumerate(lengths):
        if i > start and total + n > budget:
            yield start, i
            start, total = i, 0
        total += n
    if start < len(lengths):
        yield start, len(lengths)


def probe_video(path: Path, video_id: str) -> tuple[int, int, float]:
    """(height, width, frame rate) from the video's header."""
    # PyAV reads only the header; decord would index the whole file just to tell the frame size.
    import av

    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate
            return stream.codec_context.height, stream.codec_context.width, float(rate)
    except Exception as e:
        raise DataError(f"cannot read the video header ({e})", file=path, item=video_id) from e


def resized(height: int, width: int, short_side: int | None) -> tuple[int, int] | None:
    """The (height, width) a decode-time resize to `short_side` gives, aspect kept; None: no resize."""
    if short_side is None or min(height, width) == short_side:
        return None
    scale = short_side / min(height, width)
    return max(1, round(height * scale)), max(1, round(width * scale))
