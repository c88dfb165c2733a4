"""Decode speed per backend: the same random timestamps asked in random order or sorted, in one call or one
call per frame, on a synthetic 2-minute 29.97 fps 320x180 H.264 video (x264 defaults: a keyframe every
250 frames at most, B-frames, yuv420p). Timestamps are spread over the whole video, or drawn inside one
random window (as a sample's context window is): order matters most where requests are close together.

    python measurements/decode_speed.py [--frames 32] [--window 16] [--runs 5]

Each run opens a fresh reader (its open time is reported apart) and draws new timestamps; the table gives
the median over runs of the time per requested frame.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from spacewalk.media.h264 import h264_writer
from spacewalk.media.video import BACKENDS, open_video

FPS = Fraction(30000, 1001)
SECONDS, HEIGHT, WIDTH = 120, 180, 320


def write_synthetic(path: Path, width: int = WIDTH, height: int = HEIGHT, seconds: float = SECONDS,
                    keyframe_every: int | None = None) -> Path:
    """Moving gradients, a moving square and a little noise: compressible like footage, never static.
    `keyframe_every`: the largest keyframe interval in frames (None: x264's default, 250)."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:height, 0:width]
    with h264_writer(path, FPS, width, height, options={"preset": "veryfast"}, keyframe_every=keyframe_every) as write:
        for i in range(round(seconds * FPS)):
            frame = np.stack([(x + 2 * i) % 256, (y + i) % 256, (x + y + 3 * i) % 256], axis=-1)
            sx, sy = (5 * i) % (width - 40), (3 * i) % (height - 40)
            frame[sy:sy + 40, sx:sx + 40] = 255
            write([(frame + rng.integers(0, 8, frame.shape)).clip(0, 255).astype(np.uint8)])
    return path


def write_720p(path: Path, seconds: float, width: int = 1280, height: int = 720, piece_seconds: float = 300.0) -> Path:
    """decode_speed.write_synthetic's picture (moving gradients, a moving square, a little noise), made
    cheaply: the gradients are shifted copies of one image and the noise comes from a pool of 16 frames,
    so the run's time goes to x264 (veryfast, a keyframe every 250 frames at most), not to numpy. A video
    longer than `piece_seconds` is that piece encoded once and its packets copied end to end (decoding
    costs the same; writing an hour takes the time of five minutes)."""
    pieces = math.ceil(seconds / piece_seconds)
    if pieces > 1:
        piece = path.with_name(f".piece-{path.name}")
        _encode_720p(piece, seconds / pieces, width, height)
        _repeat(piece, path, pieces)
        piece.unlink()
        return path
    return _encode_720p(path, seconds, width, height)


def _encode_720p(path: Path, seconds: float, width: int, height: int) -> Path:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:2 * height, 0:2 * width]
    base = np.stack([x % 256, y % 256, (x + y) % 256], axis=-1).astype(np.uint8)
    noise = rng.integers(0, 4, (16, height, width, 3), dtype=np.uint8)
    with h264_writer(path, FPS, width, height, options={"preset": "veryfast"}) as write:
        for i in range(round(seconds * FPS)):
            dx, dy = (2 * i) % width, i % height
            frame = base[dy:dy + height, dx:dx + width] + noise[i % 16]  # uint8 wraps: still a moving pattern
            sx, sy = (5 * i) % (width - 40), (3 * i) % (height - 40)
            frame[sy:sy + 40, sx:sx + 40] = 255
            write([frame])
    return path


def _repeat(piece: Path, path: Path, times: int) -> None:
    """`piece`'s packets `times` times in a row, each copy's timestamps shifted by the piece's length (the
    piece starts with a keyframe, so every copy decodes on its own)."""
    with av.open(str(piece)) as source:
        packets = [p for p in source.demux(source.streams.video[0]) if p.dts is not None]
        template = source.streams.video[0]
        ticks = round(1 / (template.time_base * FPS))  # timestamp ticks a frame
        length = len(packets) * ticks
        with av.open(str(path), "w") as out:
            stream = out.add_stream_from_template(template)
            for k in range(times):
                for packet in packets:
                    copy = av.Packet(bytes(packet))
                    copy.pts, copy.dts = packet.pts + k * length, packet.dts + k * length
                    copy.is_keyframe, copy.time_base, copy.stream = packet.is_keyframe, packet.time_base, stream
                    out.mux(copy)


def frame_size(path: Path) -> str:
    """"WxH" of a video's stream, from its header."""
    with av.open(str(path)) as container:
        context = container.streams.video[0].codec_context
        return f"{context.width}x{context.height}"


def time_per_frame(path: Path, backend: str, timestamps: np.ndarray, one_call: bool) -> float:
    with open_video(path, backend) as reader:
        start = time.perf_counter()
        if one_call:
            reader.frames_at(timestamps)
        else:
            for t in timestamps:
                reader.frames_at([t])
        return (time.perf_counter() - start) / len(timestamps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=32, help="timestamps requested per run")
    parser.add_argument("--window", type=float, default=16.0, help="seconds spanned by the 'window' pattern")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = write_synthetic(Path(tmp) / "synthetic.mp4")
        print(f"{path.stat().st_size / 1e6:.1f} MB, {SECONDS} s at {float(FPS):.2f} fps, {WIDTH}x{HEIGHT}; "
              f"{args.frames} random timestamps per run, median of {args.runs} runs, ms per frame\n")
        print(f"{'backend':8} {'open ms':>8} {'pattern':>8} {'calls':>10} {'random':>8} {'sorted':>8} "
              f"{'random/sorted':>14}")
        rng = np.random.default_rng(1)
        for backend in BACKENDS:
            opens = []
            for _ in range(args.runs):
                start = time.perf_counter()
                open_video(path, backend).close()
                opens.append(time.perf_counter() - start)
            print(f"{backend:8} {statistics.median(opens) * 1e3:8.1f}")
            for pattern, span in (("spread", SECONDS), ("window", args.window)):
                for one_call in (True, False):
                    random, ordered = [], []
                    for _ in range(args.runs):
                        start = rng.uniform(0, SECONDS - span)
                        t = rng.uniform(start, start + span, args.frames)
                        random.append(time_per_frame(path, backend, t, one_call))
                        ordered.append(time_per_frame(path, backend, np.sort(t), one_call))
                    r, s = statistics.median(random) * 1e3, statistics.median(ordered) * 1e3
                    calls = "one" if one_call else "per frame"
                    print(f"{'':8} {'':8} {pattern:>8} {calls:>10} {r:8.2f} {s:8.2f} {r / s:14.2f}")


if __name__ == "__main__":
    main()
