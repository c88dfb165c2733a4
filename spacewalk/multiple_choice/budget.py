"""The visual budget of a video-LLM backend: per-frame pixel bounds and a total per item, and the written rule by
which an item over the total gets smaller frames, then fewer, instead of running out of memory.

Settings (the model config's `max_pixels`, `min_pixels`, `max_total_pixels`; null: no bound):
- `max_pixels` / `min_pixels`: each frame (a clip's frame or a still) is resized so that its area (width x height)
  lies within [min_pixels, max_pixels], aspect ratio kept. The rounding depends on the backend's `resize_to`:
  `area_within` (the OpenAI-compatible backend, any model that takes any size) scales both sides by one factor
  and rounds each side down when shrinking, up when enlarging (so the area never crosses the bound), sides at
  least 1; Qwen2.5-VL uses its processor's own `smart_resize` (sides multiples of 28, the area within the
  bounds, as Qwen-VL's processors take `min_pixels` / `max_pixels`).
- `max_total_pixels`: frames x pixels over every visual of an item (its clip, context clips, stills).

The rule (`fit`), for an item whose frames after the per-frame bounds cost more than `max_total_pixels`:
1. shrink: every frame's upper bound is lowered to one common cap P (never below `min_pixels`), the largest P
   for which the item fits; with `min_pixels` null there is no floor to shrink to, and this step is skipped;
2. drop: if the item does not fit even with every frame at `min_pixels`, clip frames are dropped one at a time
   from the clip that has the most (the later one on a tie: the item's own clip, first in the prompt, keeps
   more than its context clips) until it fits; a clip keeps at least one
   frame, its kept frames spread uniformly over the ones sampled (`uniform_frame_indices`); stills are never
   dropped;
3. an item that does not fit even then (one frame per clip, every frame at its smallest) is refused with a
   ConfigError naming it: `max_total_pixels` is too small for it.
What each visual got (`Shown`: kind, frames, size) goes to the item's record (`meta["visuals"]`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from spacewalk.core.errors import ConfigError
from spacewalk.encoders import uniform_frame_indices

# (height, width, min_pixels, max_pixels) -> (height, width); a bound of None: none on that side
ResizeTo = Callable[[int, int, "int | None", "int | None"], tuple[int, int]]


def _check(name: str, value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}={value!r}: a whole number of pixels, at least 1, or null (no bound)")
    return value


@dataclass(frozen=True)
class VisualBudget:
    max_pixels: int | None = None
    min_pixels: int | None = None
    max_total_pixels: int | None = None

    def __post_init__(self):
        for name in ("max_pixels", "min_pixels", "max_total_pixels"):
            _check(name, getattr(self, name))
        if self.max_pixels is not None and self.min_pixels is not None and self.min_pixels > self.max_pixels:
            raise ConfigError(f"min_pixels={self.min_pixels} is above max_pixels={self.max_pixels}")

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.max_pixels, self.min_pixels, self.max_total_pixels))

    def as_json(self) -> dict[str, int | None]:
        return {"max_pixels": self.max_pixels, "min_pixels": self.min_pixels,
                "max_total_pixels": self.max_total_pixels}


def area_within(height: int, width: int, min_pixels: int | None, max_pixels: int | None) -> tuple[int, int]:
    """The size whose area lies within [min_pixels, max_pixels], aspect kept: one scale factor for both sides,
    each side rounded down when shrinking and up when enlarging (at least 1)."""
    area = height * width
    if max_pixels is not None and area > max_pixels:
        scale = math.sqrt(max_pixels / area)
        h, w = max(1, math.floor(height * scale)), max(1, math.floor(width * scale))
        while h * w > max_pixels and (h > 1 or w > 1):  # floating-point slack: step the longer side down
            h, w = (h - 1, w) if h >= w else (h, w - 1)
        return h, w
    if min_pixels is not None and area < min_pixels:
        scale = math.sqrt(min_pixels / area)
        return math.ceil(height * scale), math.ceil(width * scale)
    return height, width


@dataclass(frozen=True)
class Planned:
    """One visual as it is to be shown: `kind` "clip" or "image", its frame count and (height, width)."""

    kind: str
    frames: int
    height: int
    width: int

    @property
    def pixels(self) -> int:
        return self.frames * self.height * self.width


def fit(visuals: Sequence[tuple[str, int, int, int]], budget: VisualBudget,
        resize_to: ResizeTo | Mapping[str, ResizeTo] = area_within, item: str | None = None) -> list[Planned]:
    """The module's rule: `visuals` as (kind, frames, height, width) in prompt order -> what each shows.
    `resize_to`: one resize rule, or one per kind ("clip", "image")."""

    def rule(kind: str) -> ResizeTo:
        return resize_to[kind] if isinstance(resize_to, Mapping) else resize_to

    def sized(cap: int | None) -> list[Planned]:
        top = budget.max_pixels if cap is None else (cap if budget.max_pixels is None else min(cap, budget.max_pixels))
        return [Planned(kind, n, *rule(kind)(h, w, budget.min_pixels, top)) for kind, n, h, w in visuals]

    plan = sized(None)
    limit = budget.max_total_pixels
    total = sum(p.pixels for p in plan)
    if limit is None or total <= limit:
        return plan
    if budget.min_pixels is not None:  # 1. shrink: the largest common cap that fits (binary search)
        lo, hi = budget.min_pixels, max(p.height * p.width for p in plan)
        if sum(p.pixels for p in sized(lo)) <= limit:
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if sum(p.pixels for p in sized(mid)) <= limit else (lo, mid - 1)
            return sized(lo)
        plan = sized(budget.min_pixels)
    counts = [p.frames for p in plan]  # 2. drop clip frames, one at a time from the clip with the most
    total = sum(p.pixels for p in plan)
    clips = [i for i, p in enumerate(plan) if p.kind == "clip"]
    while total > limit:
        droppable = [i for i in clips if counts[i] > 1]
        if not droppable:
            raise ConfigError(f"max_total_pixels={limit} is too small for item {item!r}: one frame per clip and "
                              f"every frame at its smallest make {total} pixels")
        i = max(droppable, key=lambda k: (counts[k], k))  # a tie: the later clip
        counts[i] -= 1
        total -= plan[i].height * plan[i].width
    return [Planned(p.kind, n, p.height, p.width) for p, n in zip(plan, counts)]


def kept(available: int, frames: int) -> np.ndarray:
    """The indices of the `frames` kept of `available`: all of them, or the centres of `frames` equal bins."""
    return np.arange(available) if frames == available else uniform_frame_indices(available, frames)


def shown(frames: np.ndarray, planned: Planned) -> np.ndarray:
    """A visual's frames [n, H, W, 3] as planned: uniformly thinned to `planned.frames` (`kept`), resized
    (bicubic) to its size; frames already as planned are returned as they are (the same array)."""
    from PIL import Image

    if len(frames) != planned.frames:
        frames = frames[kept(len(frames), planned.frames)]
    if frames.shape[1:3] == (planned.height, planned.width):
        return frames
    return np.stack([np.asarray(Image.fromarray(f).resize((planned.width, planned.height), Image.BICUBIC))
                     for f in frames])
