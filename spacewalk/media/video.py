"""Video decoding: one reader interface over decord and PyAV, plus the timestamp samplers that feed it.

Everything upstream speaks seconds; a reader turns seconds into frame indices (round(t * fps), the
benchmark's own rule) and decodes each needed frame once, in time order.

Open readers where they are used (inside `Dataset.__getitem__`, or once per worker), never before a
DataLoader forks: a decoder's file offset and codec threads would be shared by every worker. Opening
is cheap for PyAV (it reads the header); decord indexes every packet when it opens, which on an
8-hour recording reads the whole file, so prefer PyAV where each item opens a fresh reader.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.media.grid import EPS, cell_span

# PyAV decodes forward through gaps up to this long instead of seeking: a seek lands on the keyframe
# before the target and decodes from there anyway, so over short gaps it only adds work.
SEEK_GAP_SECONDS = 3.0


class VideoReader:
    """Shared by the backends: timestamp checks, time -> frame, sort/unique/scatter."""

    backend = ""

    def __init__(self, path: Path, fps: float, num_frames: int, timestamp_fps: float | None):
        self.path = path
        self.fps = float(fps)
        self.num_frames = int(num_frames)
        self.duration = self.num_frames / self.fps
        # Spacewalk-18 counts frames at exactly 29.97 while its streams run at 30000/1001: the two clocks
        # drift a whole frame apart after ~4.6 h, so benchmark timestamps need the benchmark's clock.
        self.timestamp_fps = float(timestamp_fps or fps)
        self._pid = os.getpid()
        if self.num_frames <= 0:
            self.close()
            raise DataError("video has no frames", file=path)

    def frame_indices(self, timestamps: Sequence[float] | np.ndarray) -> np.ndarray:
        t = np.asarray(timestamps, dtype=np.float64)
        if t.ndim != 1:
            raise ValueError(f"timestamps must be 1-D, got shape {t.shape}")
        bad = ~((t >= 0) & (t <= self.duration + 1 / self.fps))  # also catches NaN
        if bad.any():
            raise DataError(f"timestamp {float(t[bad][0])!r} s is outside the video (0 to {self.duration:.3f} s)",
                            file=self.path)
        return np.clip(np.rint(t * self.timestamp_fps).astype(np.int64), 0, self.num_frames - 1)

    def frames_at(self, timestamps: Sequence[float] | np.ndarray) -> np.ndarray:
        """[n, H, W, 3] uint8 RGB frames, in the order of `timestamps`."""
        return self.frames(self.frame_indices(timestamps))

    def frames(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        if os.getpid() != self._pid:
            raise RuntimeError(f"{self.path}: reader opened in process {self._pid} used in {os.getpid()}; "
                               "open it inside the DataLoader worker")
        if ((indices < 0) | (indices >= self.num_frames)).any():
            raise IndexError(f"{self.path}: frame indices must lie in [0, {self.num_frames})")
        # Serve in time order so a recording is read front to back once, whatever order was asked.
        unique, inverse = np.unique(indices, return_inverse=True)
        if len(unique) == 0:
            return np.empty((0, *self._frame_shape()), dtype=np.uint8)
        try:
            decoded = self._decode_sorted(unique)
        except DataError:
            raise
        except Exception as e:  # the backend's own error types; wrapped so the message names the file
            raise DataError(f"cannot decode frames {unique[0]}..{unique[-1]} with {self.backend} "
                            f"({_clean(e)})", file=self.path) from e
        return decoded[inverse]

    def _decode_sorted(self, indices: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _frame_shape(self) -> tuple[int, int, int]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __reduce__(self):
        # Spawned DataLoader workers pickle the dataset: a reader inside it must be opened there instead.
        raise TypeError(f"{self.path}: a VideoReader cannot be pickled; open it inside the worker")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({str(self.path)!r}, fps={self.fps:.5g}, "
                f"num_frames={self.num_frames})")


class _DecordReader(VideoReader):
    backend = "decord"

    def __init__(self, path: Path, size: tuple[int, int] | None, timestamp_fps: float | None, device: str = "cpu"):
        decord = _import("decord")
        height, width = size or (-1, -1)
        gpu = gpu_index(device)
        try:
            # On a GPU, NVDEC decodes and the frames are copied back to the host (asnumpy): the same interface.
            # Untested here (the PyPI wheel has no CUDA; no GPU on the development machine).
            ctx = decord.cpu(0) if gpu is None else decord.gpu(gpu)
            self._reader = decord.VideoReader(str(path), ctx=ctx, width=width, height=height)
        except Exception as e:  # decord raises RuntimeError, DECORDError, or asserts on zero frames
            if gpu is not None and "CUDA not enabled" in str(e):
                raise ConfigError(f"decode_device={device!r}: this decord was built without CUDA (the PyPI wheel "
                                  "is CPU-only); build decord with -DUSE_CUDA=ON, or decode on the cpu") from e
            if "Invalid frame count" in str(e):
                raise DataError("video has no frames", file=path) from e
            reason = _diagnose(path)
            message = f"{reason} (decord: {_clean(e)})" if reason else f"cannot open video with decord ({_clean(e)})"
            raise DataError(message, file=path) from e
        self._shape: tuple[int, int, int] | None = (height, width, 3) if size else None
        super().__init__(path, self._reader.get_avg_fps(), len(self._reader), timestamp_fps)

    def _decode_sorted(self, indices: np.ndarray) -> np.ndarray:
        # get_batch decodes forward within a keyframe interval and seeks only across them, given sorted input.
        return self._reader.get_batch(indices.tolist()).asnumpy()

    def _frame_shape(self) -> tuple[int, int, int]:
        if self._shape is None:  # decord exposes no frame size without decoding one
            self._shape = tuple(self._decode_sorted(np.zeros(1, np.int64)).shape[1:])
        return self._shape

    def close(self) -> None:
        self._reader = None  # decord frees its handle when the object goes


class _PyAVReader(VideoReader):
    backend = "pyav"

    def __init__(self, path: Path, size: tuple[int, int] | None, timestamp_fps: float | None, device: str = "cpu"):
        if gpu_index(device) is not None:
            raise ConfigError(f"decode_device={device!r}: the PyAV reader decodes on the cpu only; GPU decoding is "
                              "decord's (video_backend=decord)")
        av = _import("av")
        try:
            self._container = av.open(str(path))
        except Exception as e:
            raise DataError(f"cannot open as a video ({_clean(e)})", file=path) from e
        if not self._container.streams.video:
            self.close()
            raise DataError("no video stream", file=path)
        stream = self._stream = self._container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        if not rate:
            self.close()
            raise DataError("video stream has no frame rate", file=path)
        self._start = stream.start_time or 0
        self._pts_per_frame = float(1 / (stream.time_base * rate))
        num_frames = stream.frames or _estimate_frames(self._container, stream, rate)
        self._size = size
        # The decode iterator outlives a call, so that calls in time order (a feature bank walking a
        # recording chunk by chunk) continue decoding where the last one stopped instead of seeking.
        self._frames, self._last, self._held = None, -1, None  # iterator, index and newest decoded frame
        super().__init__(path, float(rate), num_frames, timestamp_fps)

    def _index_of(self, frame) -> int:
        if frame.pts is None:
            raise DataError("decoded a frame without a timestamp; cannot locate frames", file=self.path)
        return round((frame.pts - self._start) / self._pts_per_frame)

    def _to_array(self, frame) -> np.ndarray:
        height, width = self._size or (None, None)
        return frame.to_ndarray(format="rgb24", width=width, height=height)  # bilinear, as decord

    def _decode_sorted(self, indices: np.ndarray) -> np.ndarray:
        out = np.empty((len(indices), *self._frame_shape()), dtype=np.uint8)
        gap = SEEK_GAP_SECONDS * self.fps
        try:
            for k, want in enumerate(indices.tolist()):
                if self._frames is None or want < self._last or want - self._last > gap:
                    self._container.seek(self._start + int(want * self._pts_per_frame), stream=self._stream)
                    self._frames, self._last = self._container.decode(self._stream), -1
                while self._last < want:
                    self._held = next(self._frames, None)
                    if self._held is None:
                        raise DataError(f"stream ends before frame {want} of {self.num_frames} "
                                        "(truncated or corrupt?)", file=self.path)
                    self._last = self._index_of(self._held)
                out[k] = self._to_array(self._held)  # past `want` only where the stream skips frames
        except BaseException:
            self._frames = None  # the decoder's position is unknown now: seek next time
            raise
        return out

    def _frame_shape(self) -> tuple[int, int, int]:
        context = self._stream.codec_context
        height, width = self._size or (context.height, context.width)
        return height, width, 3

    def close(self) -> None:
        if getattr(self, "_container", None) is not None:
            self._container.close()
            self._container = None


BACKENDS = {"decord": _DecordReader, "pyav": _PyAVReader}


def open_video(path: str | Path, backend: str = "decord", size: tuple[int, int] | None = None,
               timestamp_fps: float | None = None, device: str = "cpu") -> VideoReader:
    """A reader for `path`; `size=(height, width)` resizes at decode; `timestamp_fps` is the clock that
    timestamps are counted at when it is not the stream's own (Spacewalk-18: 29.97); `device` "cuda[:i]"
    decodes on that GPU (decord built with CUDA only; untested here), frames still come back as numpy."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown video backend {backend!r}; choose from {sorted(BACKENDS)}")
    path = Path(path)
    if not path.is_file():
        raise DataError("no such video file", file=path)
    return BACKENDS[backend](path, size, timestamp_fps, device)


def gpu_index(device: str) -> int | None:
    """None for "cpu", i for "cuda" (0) or "cuda:i"; anything else is a ConfigError."""
    match = re.fullmatch(r"cpu|cuda(?::(\d+))?", str(device))
    if match is None:
        raise ConfigError(f"decode_device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return None if device == "cpu" else int(match.group(1) or 0)


def _import(name: str):
    # Imported on first use so that the package, and the other backend, work without this one installed.
    try:
        return __import__(name)
    except ImportError as e:
        other = "pyav" if name == "decord" else "decord"
        raise ImportError(f"video backend {name!r} is not installed; install it or use backend={other!r}") from e


def _estimate_frames(container, stream, rate) -> int:
    # Containers such as Matroska store no frame count: derive it from the duration.
    if stream.duration:
        seconds = float(stream.duration * stream.time_base)
    elif container.duration:
        seconds = container.duration / 1_000_000  # AV_TIME_BASE
    else:
        return 0
    return round(seconds * float(rate))


def _diagnose(path: Path) -> str:
    # decord logs the cause to stderr and raises "Error reading <path>...": ask PyAV what is wrong instead.
    try:
        _PyAVReader(path, None, None).close()
    except DataError as e:
        return str(e).removeprefix(f"{path}: ")
    except Exception:  # PyAV missing, or failing in its own way: decord's message is all there is
        pass
    return ""


def _clean(error: Exception) -> str:
    # decord prefixes messages with "[hh:mm:ss] /its/source.cc:123: "; keep only the message.
    return re.sub(r"\[[\d:]+\] \S+:\d+: ", "", str(error)).strip()


# ---- sampling: which timestamps to decode for a window [start, end) ----



class GridSegment(NamedTuple):
    index: int  # cell j of the grid anchored at t = 0: [j * seconds, (j + 1) * seconds)
    start: float
    end: float
    timestamps: np.ndarray


def _check_window(start: float, end: float) -> None:
    if not (0 <= start <= end):
        raise ValueError(f"window must satisfy 0 <= start <= end, got [{start}, {end}]")


def sparse_timestamps(start: float, end: float, k: int) -> np.ndarray:
    """k frames spread over the window: the centres of k equal bins."""
    _check_window(start, end)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return start + (np.arange(k) + 0.5) * ((end - start) / k)


def dense_timestamps(start: float, end: float, fps: float = 1.0) -> np.ndarray:
    """Every 1/fps seconds from the window's start, up to (not including) its end."""
    _check_window(start, end)
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    n = max(0, math.ceil((end - start) * fps - EPS))  # 12.000000000000002 frames are 12, not 13
    return start + np.arange(n) / fps


def segment_timestamps(start: float, end: float, seconds: float = 12.0, fps: float = 1.0,
                       duration: float | None = None) -> list[GridSegment]:
    """The grid cells overlapping the window, each sampled at `fps` from its own start. Cells are whole
    (the same cell gives the same frames whatever the window), except that timestamps at or past
    `duration` are dropped: a recording's last cell is partial."""
    _check_window(start, end)
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    first, last = cell_span(start, end, seconds)
    segments = []
    for j in range(first, last + 1):
        t = dense_timestamps(j * seconds, (j + 1) * seconds, fps)
        if duration is not None:
            t = t[t < duration]
            if len(t) == 0:
                break
        segments.append(GridSegment(j, j * seconds, (j + 1) * seconds, t))
    return segments
