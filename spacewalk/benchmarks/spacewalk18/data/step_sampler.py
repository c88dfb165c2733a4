"""The official step-recognition sampler (docs/spacewalk18.md, Step-recognition samples).

Deterministic: per label, gather the frames of all its segments (in order); deal the samples
round-robin over labels 0..K, skipping a label once it has as many samples as frames; take the
candidates at floor((N - 1) * j / (M + 1)) for j = 1..M; sort by frame; ids 0..n-1. It reproduces
tasks/step_recognition/*.json of the release sample for sample. Frames are counted per segment
instead of materialised (the real videos have ~10^6 frames per label).
"""

from __future__ import annotations

from collections.abc import Sequence

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, NOT_ANNOTATED, Recording, Segment, StepSample

SAMPLES_PER_VIDEO = 2000


def allocate(counts: Sequence[int], n_samples: int) -> list[int]:
    """Round-robin allocation of n_samples over labels with `counts` candidate frames each.

    Equivalent to dealing one at a time (lower labels get the remainder), computed in closed form
    per full round so it stays fast when one label has few frames.
    """
    if sum(counts) < n_samples:
        raise ValueError(f"only {sum(counts)} annotated frames for {n_samples} samples")
    alloc = [0] * len(counts)
    left = n_samples
    while left > 0:
        open_labels = [i for i, c in enumerate(counts) if alloc[i] < c]
        rounds = min(left // len(open_labels), min(counts[i] - alloc[i] for i in open_labels))
        if rounds == 0:  # a partial round: one more each, lowest labels first
            for i in open_labels[:left]:
                alloc[i] += 1
            left -= min(left, len(open_labels))
            continue
        for i in open_labels:
            alloc[i] += rounds
        left -= rounds * len(open_labels)
    return alloc


def _frame_at(segments: Sequence[Segment], offsets: Sequence[int], position: int) -> int:
    """The position-th frame of the concatenation of `segments` (offsets = cumulative lengths)."""
    lo, hi = 0, len(segments) - 1
    while lo < hi:  # last segment whose offset <= position
        mid = (lo + hi + 1) // 2
        if offsets[mid] <= position:
            lo = mid
        else:
            hi = mid - 1
    return segments[lo].frame_start + position - offsets[lo]


def step_samples(segments: Sequence[Segment], num_classes: int,
                 n_samples: int = SAMPLES_PER_VIDEO) -> list[StepSample]:
    """Official samples of one video, from its segments and its number of classes K + 1."""
    by_label: list[list[Segment]] = [[] for _ in range(num_classes)]
    for seg in segments:
        if seg.label != NOT_ANNOTATED:
            by_label[seg.label].append(seg)
    offsets, counts = [], []
    for segs in by_label:
        acc, offs = 0, []
        for seg in segs:
            offs.append(acc)
            acc += seg.frame_end - seg.frame_start
        offsets.append(offs)
        counts.append(acc)
    alloc = allocate(counts, n_samples)
    picked = []
    for label, (segs, offs, n, m) in enumerate(zip(by_label, offsets, counts, alloc)):
        for j in range(1, m + 1):
            # int() of a float quotient, exactly as the authors compute it
            frame = _frame_at(segs, offs, int((n - 1) * j / (m + 1)))
            picked.append((frame, label))
    picked.sort(key=lambda x: x[0])
    return [StepSample(i, frame / FPS, frame, label) for i, (frame, label) in enumerate(picked)]


def recording_step_samples(recording: Recording, n_samples: int = SAMPLES_PER_VIDEO) -> list[StepSample]:
    return step_samples(recording.segments, recording.num_classes, n_samples)
