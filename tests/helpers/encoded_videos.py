"""Small H.264 videos written with PyAV for the tests that hand a video to a model or a client: from given frames,
or one solid colour per second."""

from __future__ import annotations

import numpy as np


def write_video(path, frames: np.ndarray, rate: int):
    """An mp4 of `frames` (N x H x W x 3, uint8) at `rate` frames a second."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return path


def tiny_video(path, colours, fps=4):
    """An mp4 of one second per colour (solid 32 x 32 frames, `fps` frames a second)."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width = stream.height = 32
        stream.pix_fmt = "yuv420p"
        for k, colour in enumerate(c for c in colours for _ in range(fps)):
            frame = av.VideoFrame.from_ndarray(np.full((32, 32, 3), colour, np.uint8), format="rgb24")
            frame.pts = k
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path
