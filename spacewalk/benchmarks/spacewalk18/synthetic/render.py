"""The recordings' pictures: every shot a vectorised function of time (the concept's colour and pattern, two
camera views, generic shots), rendered in chunks per shot into an H.264 mp4."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.spacewalk18.synthetic.options import Options
from spacewalk.benchmarks.spacewalk18.synthetic.plan import Piece
from spacewalk.benchmarks.spacewalk18.synthetic.vocabulary import PALETTE, PATTERNS
from spacewalk.media.h264 import h264_writer


@dataclass
class Shot:
    start: float
    kind: str  # "view0", "view1", "suit", "preview", "blue", "control", "noise", "earth", "lost"
    concept: int = -1
    gain: float = 1.0
    tint: tuple[float, float, float] = (0.0, 0.0, 0.0)
    shift: tuple[float, float] = (0.0, 0.0)
    seed: int = 0


def shots_of(rng: np.random.Generator, pieces: Sequence[Piece]) -> list[Shot]:
    shots = []

    def add(start, kind, concept=-1):
        shots.append(Shot(start, kind, concept, float(rng.uniform(0.8, 1.15)),
                          tuple(float(x) for x in rng.uniform(-0.06, 0.06, 3)),
                          tuple(float(x) for x in rng.uniform(-0.2, 0.2, 2)), int(rng.integers(2**31))))

    for p in pieces:
        if p.kind == "preview":
            add(p.start, "preview", p.concept)
            continue
        t = p.start
        while t < p.end - 1e-6:  # camera cuts every 6-25 s
            if p.kind == "step" or (p.kind == "irrelevant" and p.concept >= 0):
                # the generic helmet/suit view is the same for every step: video alone cannot be perfect
                kind = str(rng.choice(["view0", "view1", "suit"], p=[0.45, 0.35, 0.2]))
            elif p.kind == "irrelevant":
                kind = str(rng.choice(["blue", "control", "noise", "earth"], p=[0.25, 0.4, 0.1, 0.25]))
            elif p.kind == "gap":
                kind = str(rng.choice(["lost", "earth"]))
            else:
                kind = str(rng.choice(["control", "earth", "suit"], p=[0.5, 0.3, 0.2]))
            add(t, kind, p.concept)
            t += rng.uniform(6, 25)
    return shots


def _signature(concept: int, t: np.ndarray, x: np.ndarray, y: np.ndarray, speed_scale: float = 1.0) -> np.ndarray:
    """The concept's moving pattern in [0, 1], shape [n, H, W]."""
    kind = PATTERNS[concept % len(PATTERNS)]
    freq = 2.0 + (concept * 7 % 5) * 0.6
    speed = (0.05 + 0.04 * (concept % 4)) * speed_scale  # cycles per second: slow enough for a 2 fps video
    angle = math.radians(concept * 37 % 180)
    t = t[:, None, None]
    if kind == "stripes":
        return 0.5 + 0.5 * np.sin(2 * np.pi * (freq * (x * math.cos(angle) + y * math.sin(angle)) - speed * t))
    if kind == "checker":
        return (np.sin(2 * np.pi * freq * (x - speed * t)) * np.sin(2 * np.pi * freq * y) > 0).astype(np.float32)
    if kind == "rings":
        r = np.sqrt((x - 0.5) ** 2 + (y - 0.5) ** 2)
        return 0.5 + 0.5 * np.sin(2 * np.pi * (1.5 * freq * r - speed * t))
    if kind == "disc":
        cx = 0.5 + 0.28 * np.cos(2 * np.pi * speed * t)
        cy = 0.5 + 0.28 * np.sin(2 * np.pi * speed * t)
        return np.clip((0.22 - np.sqrt((x - cx) ** 2 + (y - cy) ** 2)) * 25, 0, 1)
    if kind == "dots":
        return (np.sin(2 * np.pi * freq * (x - speed * t)) * np.sin(2 * np.pi * freq * (y - speed * t)) > 0.4
                ).astype(np.float32)
    return 0.5 + 0.5 * np.sin(2 * np.pi * (freq * x + 0.15 * np.sin(2 * np.pi * (2 * y - speed * t))))


def _render(shot: Shot, t: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Frames [n, size, size, 3] in [0, 1] (float32) of one shot at times t (seconds)."""
    grid = (np.arange(size, dtype=np.float32) + 0.5) / size
    x, y = grid[None, None, :], grid[None, :, None]
    n = len(t)
    local = np.random.default_rng(shot.seed)  # per-shot layout, independent of chunking
    noise = 0.05
    if shot.kind in ("view0", "view1", "preview"):
        colour = PALETTE[shot.concept % len(PALETTE)]
        if shot.kind == "view1":  # a second camera: zoomed, shifted, darker, a truss beam across it
            x, y = (x - 0.5) / 1.8 + 0.5 + shot.shift[0], (y - 0.5) / 1.8 + 0.5 + shot.shift[1]
        mask = _signature(shot.concept, t, x, y, 0.5 if shot.kind == "preview" else 1.0)[..., None]
        if shot.kind == "preview":  # the stylised animation: flat render on a light background, framed
            frames = 0.82 * (1 - mask) + colour * mask
            frames[:, :3], frames[:, -3:], frames[:, :, :3], frames[:, :, -3:] = 0.15, 0.15, 0.15, 0.15
            return np.broadcast_to(frames, (n, size, size, 3)).astype(np.float32)
        background = np.array((0.08, 0.08, 0.1) if shot.kind == "view0" else (0.02, 0.03, 0.1), np.float32)
        frames = background * (1 - mask) + colour * mask * (1.0 if shot.kind == "view0" else 0.65)
        if shot.kind == "view1":
            top = int(local.integers(size // 8, size // 2))
            frames[:, top:top + size // 6] = 0.5
    elif shot.kind == "suit":  # a white suit drifting in front of the Earth: the same for every step
        earth = np.broadcast_to(np.stack([0.1 + 0 * y, 0.25 + 0.3 * y, 0.45 + 0.4 * y], -1), (1, size, size, 3))
        cx = 0.5 + shot.shift[0] + 0.05 * np.sin(0.3 * t)[:, None, None]
        suit = np.clip((0.3 - np.sqrt((x - cx) ** 2 / 0.6 + (y - 0.45) ** 2)) * 20, 0, 1)[..., None]
        frames = earth * (1 - suit) + 0.9 * suit
    elif shot.kind == "blue":
        frames = np.empty((n, size, size, 3), np.float32)
        frames[:] = (0.05, 0.12, 0.7)
        for row in local.integers(size // 6, size - size // 6, 3):
            frames[:, row:row + 2, size // 6: size - size // 6] = 0.95
        noise = 0.03
    elif shot.kind == "control":  # mission control: a wall of monitors that flicker
        frames = np.full((n, size, size, 3), 0.15, np.float32)
        frames[:, -size // 5:] = (0.35, 0.25, 0.15)
        cell = size // 5
        for r in range(3):
            for c in range(4):
                level = 0.6 + 0.4 * np.sin(local.uniform(0.5, 2.0) * t + local.uniform(0, 6.3))
                frames[:, r * cell + 2: r * cell + cell, c * cell + 4: c * cell + cell + 2] = \
                    local.uniform(0.2, 1.0, 3).astype(np.float32) * level[:, None, None, None]
    elif shot.kind == "earth":
        clouds = 0.5 + 0.5 * np.sin(2 * np.pi * (3 * x + 2 * np.sin(2 * np.pi * y) - 0.02 * t[:, None, None]))
        frames = np.stack([0.1 + 0.7 * clouds ** 3, 0.3 + 0.6 * clouds ** 3, 0.6 + 0.35 * clouds ** 3], -1)
    elif shot.kind == "noise":
        frames = rng.random((n, size // 2, size // 2, 1), dtype=np.float32).repeat(2, 1).repeat(2, 2).repeat(3, -1)
        noise = 0.0
    elif shot.kind == "lost":
        frames = np.zeros((n, size, size, 3), np.float32)
        noise = 0.1
    else:
        raise ValueError(shot.kind)
    frames = frames * shot.gain + np.asarray(shot.tint, np.float32)
    if noise:
        # coarse (4 x 4 pixel) noise: x264 spends far fewer bytes on it than on per-pixel noise
        coarse = rng.standard_normal((n, size // 4, size // 4, 3), dtype=np.float32) * noise
        frames = frames + coarse.repeat(4, 1).repeat(4, 2)
    return frames


def write_video(path: Path, shots: Sequence[Shot], duration: float, opts: Options, rng: np.random.Generator):
    rate = Fraction(opts.video_fps).limit_denominator(1001)
    # floor(D * fps) + 1 frames: every timestamp in [0, D] has its nearest frame inside the file
    n_frames = math.floor(duration * rate) + 1
    times = np.arange(n_frames, dtype=np.float64) / float(rate)
    starts = np.array([s.start for s in shots])
    owner = np.searchsorted(starts, times, side="right") - 1
    # a keyframe every 10 s: cheap seeks
    with h264_writer(path, rate, opts.frame_size, opts.frame_size, options={"preset": "ultrafast", "crf": "23"},
                     keyframe_every=max(1, round(10 * float(rate)))) as write:
        i = 0
        while i < n_frames:
            j = i
            while j < n_frames and owner[j] == owner[i] and j - i < 256:
                j += 1
            frames = _render(shots[owner[i]], times[i:j].astype(np.float32), opts.frame_size, rng)
            write(np.clip(frames * 255 + 0.5, 0, 255).astype(np.uint8))
            i = j
