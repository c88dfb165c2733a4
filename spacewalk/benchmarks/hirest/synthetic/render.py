"""The synthetic HiREST's pictures: every shot is a vectorised function of time; the mp4 writer."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.hirest.synthetic.options import HiRESTOptions
from spacewalk.benchmarks.hirest.synthetic.video_plan import Shot, VideoPlan
from spacewalk.benchmarks.hirest.synthetic.vocabulary import ACTIONS, SURFACES
from spacewalk.media.h264 import h264_writer

NOISE = 0.008  # pixel noise (std, 4 x 4 blocks): frames of one step 1 s apart are alike, never equal


def _box(x, y, cx, cy, hw, hh):
    return np.maximum(np.abs(x - cx) - hw, np.abs(y - cy) - hh)


def _ellipse(x, y, cx, cy, rx, ry):
    return (np.sqrt(((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2) - 1) * np.minimum(rx, ry)


def _shape_distance(shape: str, x, y):
    """Signed distance (< 0 inside) to the object's outline, in frame units."""
    if shape == "square":
        return _box(x, y, 0.5, 0.5, 0.28, 0.28)
    if shape == "band":
        return _box(x, y, 0.5, 0.5, 0.42, 0.13)
    if shape == "ellipse":
        return _ellipse(x, y, 0.5, 0.52, 0.34, 0.24)
    if shape == "tall":
        return _box(x, y, 0.5, 0.5, 0.17, 0.36)
    if shape == "circles":
        return np.minimum(np.minimum(_ellipse(x, y, 0.3, 0.38, 0.14, 0.14), _ellipse(x, y, 0.7, 0.38, 0.14, 0.14)),
                          _ellipse(x, y, 0.5, 0.68, 0.14, 0.14))
    if shape == "bowl":
        return np.maximum(_ellipse(x, y, 0.5, 0.4, 0.36, 0.36), 0.4 - y)
    if shape == "frame":
        return _box(x, y, 0.5, 0.5, 0.44, 0.44)
    if shape == "bars":
        return np.minimum(_box(x, y, 0.5, 0.32, 0.36, 0.07), _box(x, y, 0.5, 0.66, 0.36, 0.07))
    if shape == "grid":
        return np.minimum(np.minimum(_box(x, y, 0.33, 0.33, 0.13, 0.13), _box(x, y, 0.67, 0.33, 0.13, 0.13)),
                          np.minimum(_box(x, y, 0.33, 0.67, 0.13, 0.13), _box(x, y, 0.67, 0.67, 0.13, 0.13)))
    if shape == "triangle":
        return np.maximum(np.maximum(0.22 - y, y - 0.8), np.abs(x - 0.5) - (y - 0.22) * 0.6)
    raise ValueError(shape)


def _texture(action: str, x, y, t, phase: float):
    """How the action shades the object, in [0, 1]."""
    kind = ACTIONS[action][0]
    if kind == "stripes":  # cut: wide diagonal bands, slowly sweeping
        return 0.5 + 0.5 * np.sin(2 * np.pi * (1.3 * (x + y) - 0.03 * t) + phase)
    if kind == "fold":  # folded over: one half in shadow
        return 0.5 + 0.5 * np.tanh(10 * (x - 0.5 - 0.04 * np.sin(0.3 * t + phase)))
    if kind == "gradient":  # paint: fresh paint from the top down
        return np.clip(1.2 - 1.5 * (y - 0.15 + 0.03 * np.sin(0.25 * t + phase)), 0, 1)
    if kind == "radial":  # mix: a dark swirl in the middle
        return np.clip(2.2 * np.sqrt((x - 0.5) ** 2 + (y - 0.5) ** 2) + 0.1 * np.sin(0.4 * t + phase), 0, 1)
    if kind == "bands":  # roll: horizontal bands rolling down
        return 0.5 + 0.5 * np.sin(2 * np.pi * (1.6 * y - 0.03 * t) + phase)
    return np.ones_like(x + y + t)  # "spot", "stream", "shadow": the object is plain, something is added


def _surface(index: int, x, y) -> np.ndarray:
    colour, grain = SURFACES[index]
    colour = np.asarray(colour, np.float32)
    if grain == "grain":
        level = 1 + 0.07 * np.sin(2 * np.pi * (9 * y + 0.6 * np.sin(2 * np.pi * 2 * x)))
    elif grain == "grid":
        level = 1 + 0.12 * ((np.abs(np.sin(np.pi * 8 * x)) < 0.12) | (np.abs(np.sin(np.pi * 8 * y)) < 0.12))
    elif grain == "veins":
        level = 1 - 0.08 * (np.abs(np.sin(2 * np.pi * (2 * x + 1.5 * y + 0.3 * np.sin(5 * y)))) < 0.1)
    else:
        level = 1 + 0 * x + 0 * y
    return colour * level[..., None]


def _render(plan: VideoPlan, shot: Shot, t: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Frames [n, size, size, 3] in [0, 1] of one shot at times t (seconds)."""
    grid = (np.arange(size, dtype=np.float32) + 0.5) / size
    local = np.random.default_rng(shot.seed)
    tt = t[:, None, None]
    # a slow camera drift, then the shot's zoom and framing
    dx = shot.shift[0] + 0.015 * np.sin(0.21 * tt + local.uniform(0, 6.3)) + shot.pan[0] * (tt - shot.origin)
    dy = shot.shift[1] + 0.015 * np.sin(0.17 * tt + local.uniform(0, 6.3)) + shot.pan[1] * (tt - shot.origin)
    x = (grid[None, None, :] - 0.5) / shot.zoom + 0.5 + dx
    y = (grid[None, :, None] - 0.5) / shot.zoom + 0.5 + dy
    if shot.kind == "head":
        p = plan.person
        wall = np.asarray(p["wall"], np.float32) * (1.05 - 0.1 * y)[..., None]
        frames = np.broadcast_to(wall, (len(t), size, size, 3)).copy()
        cx = p["x"] + 0.02 * np.sin(0.5 * tt + p["phase"])
        s = p["size"]
        body = np.clip(0.5 - _ellipse(x, y, cx, 1.0, 0.3 * s, 0.25 * s) * size, 0, 1)[..., None]
        face = np.clip(0.5 - _ellipse(x, y, cx, 0.48, 0.13 * s, 0.17 * s) * size, 0, 1)[..., None]
        hair = np.clip(0.5 - np.maximum(_ellipse(x, y, cx, 0.44, 0.15 * s, 0.17 * s), y - 0.42) * size, 0, 1)[..., None]
        frames = frames * (1 - body) + np.asarray(p["shirt"], np.float32) * body
        frames = frames * (1 - face) + np.asarray(p["skin"], np.float32) * face
        frames = frames * (1 - hair) + 0.18 * hair
        mouth_open = 0.008 + 0.02 * np.abs(np.sin(2 * np.pi * local.uniform(1.3, 2.1) * tt))
        mouth = np.clip(0.5 - _ellipse(x, y, cx, 0.56, 0.04 * s, mouth_open * s) * size, 0, 1)[..., None]
        eyes = np.clip(0.5 - np.minimum(_ellipse(x, y, cx - 0.05 * s, 0.46, 0.015, 0.015),
                                        _ellipse(x, y, cx + 0.05 * s, 0.46, 0.015, 0.015)) * size, 0, 1)[..., None]
        frames = frames * (1 - mouth) + 0.25 * mouth
        frames = frames * (1 - eyes) + 0.1 * eyes
    else:
        base = _surface(plan.task.surface, x, y)
        frames = np.broadcast_to(base, (len(t), size, size, 3)).copy()
        look, phase = ACTIONS[shot.action][0], float(local.uniform(0, 6.3))
        colour = np.asarray(shot.colour, np.float32)
        if look == "shadow":  # place: the object casts a shadow on the surface
            shadow = np.clip(0.5 - _shape_distance(shot.shape, x - 0.07, y - 0.08) * size, 0, 1)[..., None]
            frames = frames * (1 - 0.6 * shadow)
        if look == "stream":  # pour: a stream falls onto the object from the top
            sway = 0.03 * np.sin(0.3 * tt + phase)
            stream = np.clip(0.5 - (np.abs(x - 0.5 - sway) - 0.07) * size, 0, 1)[..., None]
            frames = frames * (1 - stream) + np.clip(colour * 0.6 + 0.4, 0, 1) * stream
        mask = np.clip(0.5 - _shape_distance(shot.shape, x, y) * size, 0, 1)[..., None]
        shade = 0.35 + 0.65 * _texture(shot.action, x, y, tt, phase)[..., None]
        frames = frames * (1 - mask) + colour * shade * mask
        if look == "spot":  # glue: a white blob of glue moving over the object
            gx, gy = 0.5 + 0.12 * np.cos(0.25 * tt + phase), 0.5 + 0.12 * np.sin(0.25 * tt + phase)
            spot = np.clip(0.5 - _ellipse(x, y, gx, gy, 0.11, 0.11) * size, 0, 1)[..., None]
            frames = frames * (1 - spot) + 0.97 * spot
        # a hand at work, circling the object
        w, a0, r = local.uniform(0.15, 0.35), local.uniform(0, 6.3), local.uniform(0.18, 0.3)
        hx, hy = 0.5 + r * np.cos(w * tt + a0), 0.5 + r * np.sin(w * tt + a0)
        hand = np.clip(0.5 - _ellipse(x, y, hx, hy, 0.08, 0.06) * size, 0, 1)[..., None]
        frames = frames * (1 - hand) + np.asarray((0.86, 0.68, 0.55), np.float32) * hand
    frames = frames * (1 + 0.01 * rng.standard_normal((len(t), 1, 1, 1), dtype=np.float32))
    # coarse (4 x 4 pixel) noise: x264 spends far fewer bytes on it than on per-pixel noise
    coarse = rng.standard_normal((len(t), size // 4, size // 4, 3), dtype=np.float32) * NOISE
    return frames + coarse.repeat(4, 1).repeat(4, 2)


def write_video(path: Path, plan: VideoPlan, opts: HiRESTOptions, rng: np.random.Generator) -> None:
    rate = Fraction(opts.video_fps).limit_denominator(1001)
    times = np.arange(plan.n_frames, dtype=np.float64) / float(rate)
    starts = np.array([s.start for s in plan.shots])
    owner = np.searchsorted(starts, times + 1e-9, side="right") - 1
    # a keyframe every 10 s: cheap seeks
    with h264_writer(path, rate, opts.frame_size, opts.frame_size, options={"preset": "ultrafast", "crf": "20"},
                     keyframe_every=max(1, round(10 * float(rate)))) as write:
        i = 0
        while i < plan.n_frames:
            j = i
            while j < plan.n_frames and owner[j] == owner[i]:
                j += 1
            shot, t = plan.shots[owner[i]], times[i:j].astype(np.float32)
            frames = _render(plan, shot, t, opts.frame_size, rng)
            if shot.fade_from is not None:  # one take across a step change: the old objects fade out
                w = np.clip((t - shot.start) / shot.fade, 0, 1)[:, None, None, None]
                frames = w * frames + (1 - w) * _render(plan, shot.fade_from, t, opts.frame_size, rng)
            write(np.clip(frames * 255 + 0.5, 0, 255).astype(np.uint8))
            i = j
