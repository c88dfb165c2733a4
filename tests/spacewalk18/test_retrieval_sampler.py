"""The intra-video retrieval sampler (docs/spacewalk18.md, Intra-video retrieval): every rule checked on every sample,
on hand-made segments, on a synthetic root and on the real annotations; and the samples command line."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, NOT_ANNOTATED, RETRIEVAL_DIR, Segment, Spacewalk18
from spacewalk.benchmarks.spacewalk18.data.retrieval_sampler import (
    RetrievalSamplerConfig,
    recording_retrieval_samples,
    retrieval_samples,
    video_rng,
)
from spacewalk.benchmarks.spacewalk18.data.samples import main
from spacewalk.core.io import load_json

MARGIN = 15 * FPS  # frames, written out here rather than taken from the sampler
DISTANCE = 30 * FPS


def segments_of(spec: list[tuple[float, int]]) -> tuple[Segment, ...]:
    """Contiguous segments from (seconds, label) pieces, frames by the official rule."""
    out, t = [], 0.0
    for length, label in spec:
        out.append(Segment(t, t + length, round(t * FPS), round((t + length) * FPS), label))
        t += length
    return tuple(out)


def segment_index(segments, frame: int) -> int:
    return next(i for i, s in enumerate(segments) if s.frame_start <= frame < s.frame_end)


def assert_rules(segments, samples, n: int) -> Counter:
    """Every rule of 1.7 on every sample; returns the count of samples per (query segment, other segment)."""
    assert len(samples) == n
    assert [s.id for s in samples] == list(range(n))
    sides = Counter()
    for s in samples:
        q = s.query_frame_index
        assert s.label in (0, 1)
        same, other = s.candidate_frame_indices[s.label], s.candidate_frame_indices[1 - s.label]
        iq, isame, iother = (segment_index(segments, f) for f in (q, same, other))
        assert isame == iq, f"sample {s.id}: the labelled candidate is not in the query's segment"
        assert abs(iother - iq) == 1, f"sample {s.id}: the other candidate is not in an adjacent segment"
        assert segments[iq].label != NOT_ANNOTATED and segments[iother].label != NOT_ANNOTATED
        assert segments[iq].label != segments[iother].label
        for f, i in ((q, iq), (same, isame), (other, iother)):
            assert f - segments[i].frame_start >= MARGIN - 1e-9, f"sample {s.id}: frame {f} within 15 s of its start"
            assert segments[i].frame_end - 1 - f >= MARGIN - 1e-9, f"sample {s.id}: frame {f} within 15 s of its end"
        assert abs(q - same) == abs(q - other), f"sample {s.id}: candidates not equidistant"
        assert abs(q - same) >= DISTANCE - 1e-9, f"sample {s.id}: candidates closer than 30 s"
        sides[(iq, iother)] += 1
    return sides


def test_hand_made_segments_follow_every_rule_and_spread_evenly():
    # -1 | step 1 (10 min) | step 2 (8 min) | Irrelevant (5 min) | step 3 (20 s: too short) | step 1 (6 min) | -1
    segs = segments_of([(60, -1), (600, 1), (480, 2), (300, 0), (20, 3), (360, 1), (60, -1)])
    cfg = RetrievalSamplerConfig(samples_per_video=400)
    samples = retrieval_samples(segs, video_rng(43, "x"), cfg)
    sides = assert_rules(segs, samples, 400)
    # only the step-step pair (1, 2) is usable without Irrelevant; the pair with Irrelevant gets ~1/100
    step_step = sides[(1, 2)] + sides[(2, 1)]
    # half the queries in the earlier segment
    assert step_step >= 390 and abs(sides[(1, 2)] + sides[(2, 3)] - sides[(2, 1)] - sides[(3, 2)]) <= 1
    assert set(sides) <= {(1, 2), (2, 1), (2, 3), (3, 2)}  # the 20 s segment is never used
    # samples grouped by pair and side, in time order


    firsts = [segment_index(segs, s.query_frame_index) for s in samples[:sides[(1, 2)]]]
    assert set(firsts) == {1}


def test_only_irrelevant_pairs_still_give_the_samples_and_nothing_usable_is_an_error():
    segs = segments_of([(60, -1), (300, 1), (300, 0), (60, -1)])
    samples = retrieval_samples(segs, video_rng(43, "y"), RetrievalSamplerConfig(samples_per_video=50))
    assert_rules(segs, samples, 50)
    with pytest.raises(ValueError, match="long enough"):
        retrieval_samples(segments_of([(60, -1), (50, 1), (50, 2), (60, -1)]), video_rng(43, "z"))


def test_seeded_and_configurable():
    segs = segments_of([(60, -1), (600, 1), (480, 2), (400, 3), (60, -1)])
    cfg = RetrievalSamplerConfig(samples_per_video=200)
    a = retrieval_samples(segs, video_rng(43, "v"), cfg)
    assert a == retrieval_samples(segs, video_rng(43, "v"), cfg)
    assert a != retrieval_samples(segs, video_rng(44, "v"), cfg)
    assert a != retrieval_samples(segs, video_rng(43, "w"), cfg)
    assert_rules(segs, retrieval_samples(segs, video_rng(43, "v"), RetrievalSamplerConfig(200, draw="uniform_pair")),
                 200)
    labels = np.array([s.label for s in retrieval_samples(segs, video_rng(1, "v"), RetrievalSamplerConfig(2000))])
    assert 0.45 < labels.mean() < 0.55
    with pytest.raises(ValueError):
        RetrievalSamplerConfig(draw="nearest")


@pytest.fixture
def synthetic_root(synthetic_spacewalk18):
    return synthetic_spacewalk18(n_train=2, n_val=1, n_test=1, minutes=(15, 20), steps_per_video=(4, 6),
                                 samples_per_video=50, retrieval_samples_per_video=10, questions_per_video=2,
                                 video_fps=0.5, frame_size=16)


def test_every_rule_on_a_synthetic_root(synthetic_root):
    dataset = Spacewalk18(synthetic_root)
    cfg = RetrievalSamplerConfig(samples_per_video=300)
    for rec in dataset.recordings.values():
        assert_rules(rec.segments, recording_retrieval_samples(rec, cfg), 300)


def test_every_rule_on_the_real_annotations(real_spacewalk18_root):
    dataset = Spacewalk18(real_spacewalk18_root)
    for rec in dataset.recordings.values():  # all 18 recordings, 2000 samples each
        sides = assert_rules(rec.segments, recording_retrieval_samples(rec), 2000)
        earlier = sum(c for (q, o), c in sides.items() if q < o)
        assert abs(earlier / 2000 - 0.5) < 0.01, rec.video_id


def test_command_line_writes_a_train_file_the_reader_accepts(real_spacewalk18_root, tmp_path, capsys):
    out = tmp_path / "train.json"
    assert main(["--root", str(real_spacewalk18_root), "--split", "train", "--out", str(out),
                 "--task", "intra_video_retrieval", "--per-video", "100", "--stats"]) == 0
    raw = load_json(out)
    dataset = Spacewalk18(real_spacewalk18_root)
    assert list(raw) == dataset.splits["train"] and all(len(v) == 100 for v in raw.values())
    # the written file is read back by the release's own reader (validation included) and is the sampler's
    (tmp_path / RETRIEVAL_DIR).mkdir(parents=True)
    for name in ("data", "tasks"):
        for p in (real_spacewalk18_root / name).rglob("*"):
            if p.is_file():
                target = tmp_path / "root" / p.relative_to(real_spacewalk18_root)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(p.read_bytes())
    (tmp_path / "root" / RETRIEVAL_DIR / "train.json").write_bytes(out.read_bytes())
    read = Spacewalk18(tmp_path / "root").retrieval_samples("train")
    rec = dataset.recordings["01152020"]
    assert read["01152020"] == recording_retrieval_samples(rec, RetrievalSamplerConfig(samples_per_video=100))
    # the step-recognition command line is unchanged
    assert main(["--root", str(real_spacewalk18_root), "--split", "val", "--out", str(tmp_path / "s.json")]) == 0
    assert load_json(tmp_path / "s.json") == load_json(real_spacewalk18_root / "tasks/step_recognition/val.json")
