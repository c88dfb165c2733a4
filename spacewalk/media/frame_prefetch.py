"""Decoding ahead of the encoder: frames of the next batches are decoded in background threads while the
caller encodes the current one, so a feature-bank build runs at the speed of the slower of decoding and
encoding instead of their sum.

Threads, not processes: decord decodes a whole `get_batch` in one C call with the GIL released, and PyAV
releases it inside FFmpeg's decode and scale calls; the encoder (torch) releases it in its kernels too. A
thread also hands its frames over without a copy. (PyAV retakes the GIL a few times per decoded frame, so
beside a thread that runs pure Python it loses time waiting for it; decord does not: docs/speed.md.)

Memory is bounded: each decoder holds at most `ahead` decoded batches waiting plus the one it is decoding.
With `decoders` > 1 the batches (consecutive stretches of the recording) are dealt round-robin, so decoder d
reads batches d, d + N, d + 2N, ... front to back, seeking forward over the others' stretches: one long
recording is split across N decoders by time, and the batches still come out in order.

A decoder's error is raised in the caller's thread when its batch is reached (a reader's errors name the
file; anything else gets a note naming it). Leaving the `with` block early, by an error or Ctrl-C, stops
and joins every decoder; each stops within one piece of `piece` frames.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from spacewalk.core.errors import ConfigError
from spacewalk.media.video import VideoReader

_POLL_SECONDS = 0.1  # how often a decoder blocked on a full queue looks whether it should stop


class DecodeAhead:
    """`with DecodeAhead(requests, open_reader, ...) as batches: for frames in batches: ...` gives
    `reader.frames_at(requests[i])` for each i in order, decoded ahead.

    `open_reader()` opens a new reader of the recording (one per decoder: a reader is not thread-safe);
    `reader`, if given, is an open one the first decoder uses instead (the caller's, so that a recording is
    not opened once more; the caller keeps it and must not use it inside the block). `ahead` = 0 decodes
    each batch in the caller's thread when it is asked for, with `reader`: the serial builder."""

    def __init__(self, requests: Sequence[np.ndarray], open_reader: Callable[[], VideoReader], *,
                 path: str | Path, decoders: int = 1, ahead: int = 2, reader: VideoReader | None = None,
                 piece: int = 64):
        check_settings(decoders, ahead)
        if ahead == 0 and reader is None:
            raise ValueError("ahead=0 decodes with the caller's reader: pass reader=")
        self.requests = list(requests)
        self.open_reader, self.reader, self.path = open_reader, reader, Path(path)
        self.decoders = min(decoders, max(1, len(self.requests)))
        self.ahead, self.piece = ahead, max(1, int(piece))
        self._stop = threading.Event()
        self._queues: list[queue.Queue] = []
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> DecodeAhead:
        if self.ahead > 0:
            for d in range(self.decoders):
                self._queues.append(queue.Queue(maxsize=self.ahead))
                thread = threading.Thread(target=self._decode, args=(d,), name=f"decoder-{d}:{self.path.name}",
                                          daemon=True)  # daemon only as a last resort: close() joins them
                self._threads.append(thread)
                thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self) -> Iterator[np.ndarray]:
        if self.ahead == 0:
            for request in self.requests:
                yield self.reader.frames_at(request)
            return
        for i in range(len(self.requests)):
            kind, value = self._queues[i % self.decoders].get()
            if kind == "error":
                raise value
            yield value

    def close(self) -> None:
        """Stop every decoder and wait for it; idempotent."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    # ---- in each decoder thread ----

    def _decode(self, d: int) -> None:
        out = self._queues[d]
        own = None
        try:
            reader = self.reader if d == 0 and self.reader is not None else None
            if reader is None:
                reader = own = self.open_reader()
            for i in range(d, len(self.requests), self.decoders):
                frames = self._frames(reader, self.requests[i])
                if frames is None or not self._put(out, ("frames", frames)):
                    return
        except BaseException as e:  # KeyboardInterrupt too: whatever ends a decoder reaches the caller
            if str(self.path) not in str(e):
                e.add_note(f"while decoding {self.path}")
            self._put(out, ("error", e))
        finally:
            if own is not None:
                own.close()

    def _frames(self, reader: VideoReader, timestamps: np.ndarray) -> np.ndarray | None:
        """The frames of one request, decoded `piece` at a time so that a stop is seen soon; None if stopped."""
        parts = []
        for start in range(0, max(1, len(timestamps)), self.piece):
            if self._stop.is_set():
                return None
            parts.append(reader.frames_at(timestamps[start:start + self.piece]))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _put(self, out: queue.Queue, item) -> bool:
        while not self._stop.is_set():
            try:
                out.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False


def check_settings(decoders: int, ahead: int) -> None:
    """The bank config's `decoders` and `prefetch` (= ahead), checked where they are read."""
    for name, value, low in (("decoders", decoders, 1), ("prefetch", ahead, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
    if decoders > 1 and ahead == 0:
        raise ConfigError(f"decoders={decoders} decode ahead of the encoder, which prefetch=0 turns off: "
                          "set prefetch >= 1 or decoders=1")
