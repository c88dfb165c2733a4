"""The HiREST joint model's segmentation decoding: from boundary probabilities to steps.

Segmentation inference (the original's `test_moment_segmentation`): start with the moment [s, e] as the
region and s marked; up to 20 times: softmax the masked logits, take the peak, grow [l, r] around it while
p / p_peak > 0.5, skip it if l == 0, else take l and r as boundaries, remove [l, r] from the region and
mark both. Then keep, from s, the boundaries at least 5 s after the last kept one, and close the last
step at e. Chosen here, where the original differs: boundaries are clamped into the moment (the original
can put one a frame before s or after e), and the last step [last boundary, e] is listed (the original
drops it; the official scoring's gap filling puts it back, so scores are equal, and end-to-end captioning
then captions the whole moment).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def peak_span(probs: np.ndarray, ratio: float, floor: float = 1e-5) -> tuple[int, int] | None:
    """[l, r] around the peak of `probs`, grown while p / p_peak > ratio (each side stops on the first frame
    at or under it, or at the ends); None for a negligible peak or one that reaches frame 0."""
    k = int(np.argmax(probs))
    peak = float(probs[k])
    if not peak >= floor:
        return None
    left = k
    while left > 0 and probs[left] / peak > ratio:
        left -= 1
    right = k
    while right < len(probs) - 1 and probs[right] / peak > ratio:
        right += 1
    if left == 0 or right == 0:
        return None
    return left, right


def boundaries_to_steps(start: int, end: int, found: Sequence[int], min_gap: int) -> list[tuple[int, int]]:
    """Steps tiling [start, end] from the boundaries found: clamped into the moment, kept when at least
    `min_gap` after the last kept one (from `start`), the last step closed at `end`."""
    inside = sorted({start, end} | {min(max(int(b), start), end) for b in found})
    kept = [inside[0]]
    for b in inside[1:-1]:
        if b - kept[-1] >= min_gap:
            kept.append(b)
    if end > kept[-1]:
        kept.append(end)
    if len(kept) == 1:
        return [(start, end)]
    return list(zip(kept[:-1], kept[1:]))
