"""The task files beyond step recognition (whose samples come from the official sampler): intra-video
retrieval samples (docs/spacewalk18.md, 'Intra-video retrieval') and QA questions ('Video question answering')."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import (
    FPS,
    NOT_ANNOTATED,
    Segment,
)
from spacewalk.benchmarks.spacewalk18.synthetic.plan import Plan
from spacewalk.benchmarks.spacewalk18.synthetic.vocabulary import VOCABULARY

RETRIEVAL_SEED = 43  # the authors' notebook seed, combined with the dataset seed
MARGIN_FRAMES = math.ceil(15 * FPS)  # query and candidates >= 15 s from their step's boundaries
DISTANCE_FRAMES = math.ceil(30 * FPS)  # candidates >= 30 s from the query


def _retrieval_choices(query: tuple[int, int], other: tuple[int, int], after: bool):
    """Feasible (q, d_lo, d_hi): q in `query`, the same-step candidate at q -/+ d inside it, the other at q +/- d."""
    q = np.arange(query[0], query[1] + 1)
    if after:  # the other segment follows: its candidate is q + d, the same-step one q - d
        lo = np.maximum(DISTANCE_FRAMES, other[0] - q)
        hi = np.minimum(other[1] - q, q - query[0])
    else:
        lo = np.maximum(DISTANCE_FRAMES, q - other[1])
        hi = np.minimum(q - other[0], query[1] - q)
    ok = lo <= hi
    return q[ok], lo[ok], hi[ok]


def retrieval_samples(segments: Sequence[Segment], n_samples: int, rng: np.random.Generator) -> list[dict]:
    """Intra-video retrieval samples of one video (docs/spacewalk18.md, Intra-video retrieval), grouped by segment
    pair in time order."""
    pairs, irrelevant = [], []
    for a, b in zip(segments, segments[1:]):
        if a.label == NOT_ANNOTATED or b.label == NOT_ANNOTATED:
            continue
        keep = 0 not in (a.label, b.label) or rng.random() < 0.01  # pairs with Irrelevant: kept with p = 1/100
        ranges = [(s.frame_start + MARGIN_FRAMES, s.frame_end - 1 - MARGIN_FRAMES) for s in (a, b)]
        if all(lo <= hi for lo, hi in ranges):
            options = [_retrieval_choices(ranges[0], ranges[1], True), _retrieval_choices(ranges[1], ranges[0], False)]
            if any(len(o[0]) for o in options):
                (pairs if keep else irrelevant).append(options)
    # Our recordings are short: where no step-step pair is long enough, the dropped Irrelevant pairs stand
    # in, so that a video has samples whenever any pair allows them.
    pairs = pairs or irrelevant
    if not pairs:
        return []
    counts = [n_samples // len(pairs) + (i < n_samples % len(pairs)) for i in range(len(pairs))]
    samples = []
    for options, count in zip(pairs, counts):
        for j in range(count):
            earlier = j % 2 == 0  # half the queries in the earlier segment
            if not len(options[0 if earlier else 1][0]):
                earlier = not earlier
            qs, los, his = options[0 if earlier else 1]
            k = int(rng.integers(len(qs)))
            q, d = int(qs[k]), int(rng.integers(los[k], his[k] + 1))
            same, other = (q - d, q + d) if earlier else (q + d, q - d)
            label = int(rng.integers(2))
            candidates = [same, other] if label == 0 else [other, same]
            samples.append({"query_frame_index": q, "candidate_frame_indices": candidates, "label": label})
    for i, s in enumerate(samples):
        s["id"] = i
    return samples


THIRDS = ("The first third of the video", "The middle third of the video", "The last third of the video",
          "The task does not happen in the video")


def questions(plan: Plan, count: int, window: float, rng: np.random.Generator) -> list[dict]:
    """"task before/after task" and "when task" questions (docs/spacewalk18.md, Video question answering) on
    windows of one video."""
    window = min(window, 0.6 * plan.duration)
    starts = [s.start for s in plan.segments if s.label > 0 and s.start + window <= plan.duration]
    captions = [VOCABULARY[c].caption for c in plan.concepts]
    out, seen = [], set()
    for _ in range(50 * count):
        if len(out) == count or not starts:
            break
        start = starts[int(rng.integers(len(starts)))]
        end = start + window
        spans: dict[int, list[tuple[float, float]]] = {}
        for s in plan.segments:
            if s.label > 0 and s.start < end and s.end > start:
                spans.setdefault(s.label, []).append((max(s.start, start), min(s.end, end)))
        inside = sorted(spans)
        outside = [i for i in range(1, len(captions) + 1) if i not in spans]
        if not inside:
            continue
        step = inside[int(rng.integers(len(inside)))]
        if rng.random() < 0.6:
            before = rng.random() < 0.5
            # before only if all its segments are before all of the other's (and likewise after)
            if before:
                right = [i for i in inside if i != step and spans[i][-1][1] <= spans[step][0][0]]
            else:
                right = [i for i in inside if i != step and spans[i][0][0] >= spans[step][-1][1]]
            wrong = [i for i in inside if i != step and i not in right]
            if not right:
                continue
            answer = right[int(rng.integers(len(right)))]
            distract = list(rng.permutation(wrong))[:3]
            distract += list(rng.permutation(outside))[:3 - len(distract)]
            if len(distract) < 3:
                continue
            options = [answer, *(int(i) for i in distract)]
            key = ("order", start, step, before)
            qtype, text = "task before/after task", \
                f"Which of the following tasks happens {'before' if before else 'after'} {captions[step - 1]}?"
            options_text = [captions[i - 1] for i in options]
            correct = captions[answer - 1]
        else:
            if outside and rng.random() < 0.25:
                step, part = outside[int(rng.integers(len(outside)))], 3
            else:
                thirds = {min(2, int((s - start) / window * 3)) for s, _ in spans[step]} | \
                         {min(2, int((e - 1e-6 - start) / window * 3)) for _, e in spans[step]}
                if len(thirds) != 1:  # spans two thirds: no single right answer
                    continue
                part = thirds.pop()
            key = ("when", start, step)
            qtype, text = "when task", f"In which part of the video does the task that {captions[step - 1]} happen?"
            options_text, correct = list(THIRDS), THIRDS[part]
        if key in seen:
            continue
        seen.add(key)
        options_text = [options_text[int(i)] for i in rng.permutation(len(options_text))]
        out.append({"video_id": plan.video_id, "question": text, "options": options_text,
                    "answer": options_text.index(correct), "video_start": start, "video_end": end, "type": qtype})
    return out
