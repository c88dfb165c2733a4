"""Writing RGB frames as H.264 (PyAV's libx264, yuv420p), the one writer of the synthetic generators, of the clips
sent to an OpenAI-compatible server and of the measurement videos: each frame's timestamp is its index in
the time base 1/rate, so the file's frame k is the k-th frame written."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import IO

import numpy as np


@contextmanager
def h264_writer(target: str | Path | IO[bytes], rate: Fraction | int, width: int, height: int, *,
                options: dict[str, str] | None = None, keyframe_every: int | None = None,
                container_format: str | None = None) -> Iterator[Callable[[Iterable[np.ndarray]], None]]:
    """Yield `write(frames)`, which encodes H x W x 3 uint8 RGB frames in order (any number of calls); the
    encoder is flushed when the block ends. `options`: x264's (preset, crf); `keyframe_every`: the largest
    keyframe interval in frames (None: x264's default); `container_format`: needed when `target` is a buffer."""
    import av  # imported here: reading a dataset never needs an encoder

    with av.open(target if not isinstance(target, Path) else str(target), "w",
                 format=container_format) as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        if keyframe_every:
            stream.codec_context.gop_size = int(keyframe_every)
        if options:
            stream.options = dict(options)
        written = 0

        def write(frames: Iterable[np.ndarray]) -> None:
            nonlocal written
            for image in frames:
                frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
                frame.pts = written  # time base 1/rate: one tick per frame
                container.mux(stream.encode(frame))
                written += 1

        yield write
        container.mux(stream.encode())
