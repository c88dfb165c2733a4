"""Lossless test videos (libx264rgb, qp 0): every frame read back equals the frame written, so decoding is
checked exactly. Shared by the video, HiREST feature and HiREST baseline tests."""

from __future__ import annotations

import av


def write_video(path, frames, rate, options=None, container_options=None):
    with av.open(str(path), "w", options=container_options or {}) as container:
        stream = container.add_stream("libx264rgb", rate=rate)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "rgb24"
        stream.options = {"qp": "0", "preset": "ultrafast", **(options or {})}
        container.start_encoding()  # so that a video of zero frames is still written
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return path
