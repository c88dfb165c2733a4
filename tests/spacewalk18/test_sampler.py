"""The official step-recognition sampler, against the release files and a literal round-robin."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import Segment, Spacewalk18, samples_to_json
from spacewalk.benchmarks.spacewalk18.data.step_sampler import allocate, recording_step_samples, step_samples


def test_reproduces_every_official_file(real_spacewalk18_root):
    ds = Spacewalk18(real_spacewalk18_root)
    for split in ("train", "val", "test"):
        official = json.loads((real_spacewalk18_root / f"tasks/step_recognition/{split}.json").read_text())
        ours = samples_to_json({r.video_id: recording_step_samples(r) for r in ds.split(split)})
        assert list(ours) == list(official)
        for video_id in official:  # per video, so a failure names the video
            assert ours[video_id] == official[video_id], video_id


def _deal_one_at_a_time(counts, n):
    alloc = [0] * len(counts)
    while n > 0:
        for i in range(len(counts)):
            if n > 0 and alloc[i] < counts[i]:
                alloc[i] += 1
                n -= 1
    return alloc


@pytest.mark.parametrize("seed", range(20))
def test_allocation_equals_literal_round_robin(seed):
    rng = np.random.default_rng(seed)
    counts = [int(c) for c in rng.integers(1, 300, size=rng.integers(2, 40))]
    counts[int(rng.integers(len(counts)))] = int(rng.integers(1, 4))  # a nearly empty class
    n = int(rng.integers(1, sum(counts) + 1))
    assert allocate(counts, n) == _deal_one_at_a_time(counts, n)


def test_small_video_by_hand():
    # label 1 has frames 10..19 and 30..34 (15 frames), label 0 has 20..29, label 2 has 40..41
    segs = [Segment(0, 1, 0, 10, -1), Segment(1, 2, 10, 20, 1), Segment(2, 3, 20, 30, 0),
            Segment(3, 4, 30, 35, 1), Segment(4, 5, 35, 40, -1), Segment(5, 6, 40, 42, 2),
            Segment(6, 7, 42, 50, -1)]
    samples = step_samples(segs, num_classes=3, n_samples=7)
    # allocation: 0 -> 3, 1 -> 2, 2 -> 2; label 0: N=10, M=3 -> positions 2, 4, 6 -> frames 22, 24, 26
    # label 1: N=15, M=2 -> positions 4, 9 -> frames 14, 19; label 2: N=2, M=2 -> positions 0, 0 -> 40, 40
    assert [(s.frame_index, s.label) for s in samples] == [(14, 1), (19, 1), (22, 0), (24, 0), (26, 0),
                                                          (40, 2), (40, 2)]
    assert [s.id for s in samples] == list(range(7))


def test_too_few_frames():
    segs = [Segment(0, 1, 0, 10, -1), Segment(1, 2, 10, 13, 1), Segment(2, 3, 13, 20, -1)]
    with pytest.raises(ValueError, match="only 3 annotated frames for 5 samples"):
        step_samples(segs, num_classes=2, n_samples=5)
