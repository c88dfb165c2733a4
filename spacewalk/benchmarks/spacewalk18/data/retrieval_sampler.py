"""The intra-video retrieval sampler (docs/spacewalk18.md, Intra-video retrieval), for any dataset root.

A sample is a query frame q and two candidate frames at q - d and q + d: one in the query's step
segment, one in the adjacent segment. The rules of the paper:
- pairs of adjacent GT segments whose labels are both > -1;
- the query and both candidates at least `margin_seconds` (15 s) inside their segments;
- the candidates equidistant from the query, at least `min_distance_seconds` (30 s) from it;
- half the queries in the earlier segment of the pair, half in the later one;
- pairs involving Irrelevant (label 0) kept with probability `irrelevant_keep` (1/100);
- `samples_per_video` (2000) per video, seeded (43 in the authors' notebook).

What the authors' notebook leaves open, chosen here (each visible in `RetrievalSamplerConfig`):
- **Frames, not seconds.** The margins and the distance are counted in frames of the official rule
  (ceil(15 * 29.97) = 450 frames, ceil(30 * 29.97) = 900): a frame q is 450 frames or more from its
  segment's first frame and from its last one (frame_end - 1). The official val/test files come within
  2 frames of 15 s (14.95 s); ours never go under.
- **How the 2000 are spread over pairs.** Round-robin over the usable pairs in time order, one draw per
  visit, until the video has its samples: every step-step pair gets the same count (the first pairs one
  more), as the official files show (98 or 99 per pair and side in val video 03152022). A pair with
  Irrelevant is visited like the others, but its draw is kept with probability `irrelevant_keep`; a video
  with only such pairs still gets its samples, from more rounds. The side alternates per visit of a pair
  (earlier segment first), falling back to the other side where one side has no room.
- **How the positions are drawn** (`draw`): "query_then_distance" (the default) takes q uniformly among
  the query frames that admit some distance, then d uniformly among the distances valid for that q;
  "uniform_pair" takes (q, d) uniformly among all valid pairs (this favours queries near the boundary
  less). Compare both with the official files: `python -m spacewalk.benchmarks.spacewalk18.data.samples --task
  intra_video_retrieval
  --stats` (docs/intra_video_retrieval.md).
- **Which candidate is listed first**: a fair coin per sample (the label); the official files have
  47.6 % to 51.2 % label 1 per video.
- **Order and ids**: samples grouped by pair (time order), then side (query earlier first), then draw
  order; ids 0..n-1. The official files are grouped the same way.
- **Randomness**: one generator per video, seeded from (seed, CRC-32 of the video id), so a video's
  samples do not depend on the split or the other videos of the root.

A pair whose segments are too short for the margins and the distance is never used. A video with no
usable pair at all has no samples (ValueError).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, NOT_ANNOTATED, Recording, RetrievalSample, Segment
from spacewalk.core.errors import ConfigError

SEED = 43  # the authors' notebook
DRAWS = ("query_then_distance", "uniform_pair")


@dataclass(frozen=True)
class RetrievalSamplerConfig:
    samples_per_video: int = 2000
    seed: int = SEED
    margin_seconds: float = 15.0  # query and candidates at least this far inside their segments
    min_distance_seconds: float = 30.0  # |t_q - t_c| at least this
    irrelevant_keep: float = 0.01  # a draw of a pair with Irrelevant is kept with this probability
    draw: str = "query_then_distance"  # or "uniform_pair" (module docstring)

    def __post_init__(self):
        if self.samples_per_video < 1:
            raise ConfigError(f"samples_per_video must be positive, got {self.samples_per_video}")
        if self.margin_seconds < 0 or self.min_distance_seconds <= 0:
            raise ConfigError("margin_seconds must be >= 0 and min_distance_seconds > 0, got "
                              f"margin_seconds={self.margin_seconds}, min_distance_seconds={self.min_distance_seconds}")
        if not 0 < self.irrelevant_keep <= 1:
            raise ConfigError(f"irrelevant_keep must lie in (0, 1], got {self.irrelevant_keep}")
        if self.draw not in DRAWS:
            raise ConfigError(f"draw must be one of {DRAWS}, got {self.draw!r}")

    @property
    def margin_frames(self) -> int:
        return math.ceil(self.margin_seconds * FPS - 1e-9)

    @property
    def min_distance_frames(self) -> int:
        return math.ceil(self.min_distance_seconds * FPS - 1e-9)


@dataclass
class _Side:
    """The valid (q, d) of one pair with the query in one of its segments."""

    query: np.ndarray  # int64 [n] query frames that admit some distance
    d_lo: np.ndarray  # int64 [n] smallest valid distance for each
    d_hi: np.ndarray  # int64 [n] largest
    earlier: bool  # query in the earlier segment: the same-step candidate is q - d, the other q + d

    def __len__(self) -> int:
        return len(self.query)


def _side(query_seg: Segment, other_seg: Segment, earlier: bool, cfg: RetrievalSamplerConfig) -> _Side:
    m, dmin = cfg.margin_frames, cfg.min_distance_frames
    a0, a1 = query_seg.frame_start + m, query_seg.frame_end - 1 - m
    b0, b1 = other_seg.frame_start + m, other_seg.frame_end - 1 - m
    q = np.arange(a0, a1 + 1, dtype=np.int64) if a0 <= a1 and b0 <= b1 else np.zeros(0, np.int64)
    if earlier:  # the other segment follows: other candidate q + d in [b0, b1], same-step q - d >= a0
        lo, hi = np.maximum(dmin, b0 - q), np.minimum(b1 - q, q - a0)
    else:  # the other segment precedes: other candidate q - d in [b0, b1], same-step q + d <= a1
        lo, hi = np.maximum(dmin, q - b1), np.minimum(q - b0, a1 - q)
    ok = lo <= hi
    return _Side(q[ok], lo[ok], hi[ok], earlier)


def usable_pairs(segments: Sequence[Segment], cfg: RetrievalSamplerConfig) -> list[tuple[int, bool, list[_Side]]]:
    """(index of the earlier segment, involves Irrelevant, its non-empty sides) of every usable pair."""
    out = []
    for i, (a, b) in enumerate(zip(segments, segments[1:])):
        if a.label == NOT_ANNOTATED or b.label == NOT_ANNOTATED:
            continue
        sides = [s for s in (_side(a, b, True, cfg), _side(b, a, False, cfg)) if len(s)]
        if sides:
            out.append((i, 0 in (a.label, b.label), sides))
    return out


def _draw(side: _Side, rng: np.random.Generator, how: str) -> tuple[int, int]:
    if how == "query_then_distance":
        k = int(rng.integers(len(side)))
    else:  # each (q, d) equally likely: q weighted by its number of distances
        widths = np.cumsum(side.d_hi - side.d_lo + 1)
        k = int(np.searchsorted(widths, rng.integers(widths[-1]), side="right"))
    return int(side.query[k]), int(rng.integers(side.d_lo[k], side.d_hi[k] + 1))


def video_rng(seed: int, video_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(video_id.encode())])


def retrieval_samples(segments: Sequence[Segment], rng: np.random.Generator,
                      cfg: RetrievalSamplerConfig = RetrievalSamplerConfig()) -> list[RetrievalSample]:
    """Samples of one video from its segments (rules and choices: module docstring)."""
    pairs = usable_pairs(segments, cfg)
    if not pairs:
        raise ValueError("no pair of adjacent annotated segments is long enough for the margins "
                         f"({cfg.margin_seconds} s) and the query-candidate distance ({cfg.min_distance_seconds} s)")
    drawn: list[list[list[tuple[int, int, int]]]] = [[[] for _ in sides] for _, _, sides in pairs]
    per_side = [0, 0]  # samples so far with the query in the earlier / the later segment
    total = 0
    while total < cfg.samples_per_video:
        for p, (_, irrelevant, sides) in enumerate(pairs):
            if total == cfg.samples_per_video:
                break
            if irrelevant and rng.random() >= cfg.irrelevant_keep:
                continue
            # the side the video has fewer of (earlier on a tie); a pair with one usable side takes it
            s = 0 if len(sides) == 1 or per_side[0] <= per_side[1] else 1
            per_side[0 if sides[s].earlier else 1] += 1
            q, d = _draw(sides[s], rng, cfg.draw)
            drawn[p][s].append((q, d, int(rng.integers(2))))
            total += 1
    samples = []
    for (_, _, sides), side_draws in zip(pairs, drawn):
        for side, draws in zip(sides, side_draws):
            for q, d, label in draws:
                same, other = (q - d, q + d) if side.earlier else (q + d, q - d)
                candidates = (same, other) if label == 0 else (other, same)
                samples.append(RetrievalSample(len(samples), q, candidates, label))
    return samples


def recording_retrieval_samples(recording: Recording,
                                cfg: RetrievalSamplerConfig = RetrievalSamplerConfig()) -> list[RetrievalSample]:
    return retrieval_samples(recording.segments, video_rng(cfg.seed, recording.video_id), cfg)


def retrieval_samples_to_json(samples: Mapping[str, Sequence[RetrievalSample]]) -> dict[str, list[dict]]:
    """The official on-disk form (tasks/intra-video_retrieval/<split>.json)."""
    return {v: [{"query_frame_index": s.query_frame_index, "candidate_frame_indices": list(s.candidate_frame_indices),
                 "label": s.label, "id": s.id} for s in ss] for v, ss in samples.items()}


def retrieval_statistics(recordings: Mapping[str, Recording],
                         samples: Mapping[str, Sequence[RetrievalSample]]) -> dict[str, float]:
    """What to compare between sample files: query-candidate distance (seconds: mean and quantiles),
    label balance (share of label 1), Irrelevant share (samples whose pair involves label 0), share of
    queries in the earlier segment, mean number of pairs and sides used per video."""
    distance, label, irrelevant, earlier, used = [], [], [], [], []
    for video_id, ss in samples.items():
        rec = recordings[video_id]
        sides = set()
        for s in ss:
            same = s.candidate_frame_indices[s.label]
            other = s.candidate_frame_indices[1 - s.label]
            q_seg, o_seg = rec.segment_at_frame(s.query_frame_index), rec.segment_at_frame(other)
            distance.append(abs(same - s.query_frame_index) / FPS)
            label.append(s.label)
            irrelevant.append(0 in (q_seg.label, o_seg.label))
            earlier.append(q_seg.start < o_seg.start)
            sides.add((q_seg.start, o_seg.start))
        used.append(len(sides))
    d = np.array(distance)
    return {"videos": len(samples), "samples": len(d), "distance_mean_s": float(d.mean()),
            "distance_p10_s": float(np.quantile(d, 0.1)), "distance_median_s": float(np.median(d)),
            "distance_p90_s": float(np.quantile(d, 0.9)), "label1_share": float(np.mean(label)),
            "irrelevant_share": float(np.mean(irrelevant)), "earlier_share": float(np.mean(earlier)),
            "sides_per_video": float(np.mean(used))}
