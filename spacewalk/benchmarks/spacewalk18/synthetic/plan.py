"""One recording's plan: pieces of time (a label and what is on screen: preview, steps, Irrelevant shots,
repeats, interruptions, not-annotated gaps and margins), and the annotation segments they make."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import (
    NOT_ANNOTATED,
    Segment,
    frame_of,
)
from spacewalk.benchmarks.spacewalk18.synthetic.options import Options
from spacewalk.benchmarks.spacewalk18.synthetic.vocabulary import VOCABULARY
from spacewalk.core.errors import ConfigError


@dataclass
class Piece:
    kind: str  # "step", "irrelevant", "gap", "margin", "preview"
    label: int
    seconds: float
    concept: int = -1  # the concept on screen (steps, previews, unplanned-task shots)
    start: float = 0.0
    end: float = 0.0


@dataclass
class Plan:
    video_id: str
    concepts: list[int]  # the concept of step i + 1
    pieces: list[Piece]
    duration: float
    segments: list[Segment]
    sentences: list[tuple[str, float, float]]
    steps: list[dict]


def plan_pieces(rng: np.random.Generator, opts: Options) -> tuple[list[int], list[Piece], float]:
    k_lo, k_hi = opts.steps_per_video
    k = int(rng.integers(k_lo, k_hi + 1))
    concepts = [int(c) for c in rng.choice(len(VOCABULARY), size=k, replace=False)]
    # longer recordings for longer plans, so steps keep about the same length whatever K is
    where = (k - k_lo + rng.random()) / (k_hi - k_lo + 1)
    target = round((opts.minutes[0] + (opts.minutes[1] - opts.minutes[0]) * where) * 60, 3)

    body: list[Piece] = []
    for step in range(1, k + 1):
        if step > 1 and rng.random() < 0.5:
            body.append(Piece("irrelevant", 0, rng.uniform(10, 60)))
        length = rng.uniform(40, 150)
        if length > 60 and rng.random() < 0.25:  # interrupted: an Irrelevant shot or a return to the previous step
            first = length * rng.uniform(0.3, 0.7)
            body.append(Piece("step", step, first))
            if step > 1 and rng.random() < 0.5:
                body.append(Piece("step", step - 1, rng.uniform(10, 30)))
            else:
                body.append(Piece("irrelevant", 0, rng.uniform(5, 25)))
            body.append(Piece("step", step, length - first))
        else:
            body.append(Piece("step", step, length))
        if step > 2 and rng.random() < 0.12:  # going back to an earlier task, as real spacewalks do
            body.append(Piece("step", int(rng.integers(1, step - 1)), rng.uniform(15, 40)))
    if not any(p.label == 0 for p in body):  # every class must occur
        spot = int(rng.integers(1, len(body))) if len(body) > 1 else 1
        body.insert(spot, Piece("irrelevant", 0, rng.uniform(10, 60)))
    for _ in range(int(rng.integers(1, 3))):  # not-annotated gaps inside (e.g. lost video signal)
        spots = [i for i in range(1, len(body)) if NOT_ANNOTATED not in (body[i - 1].label, body[i].label)]
        if spots:
            body.insert(spots[int(rng.integers(len(spots)))], Piece("gap", NOT_ANNOTATED, rng.uniform(10, 40)))
    for p in body:
        if p.kind == "irrelevant" and rng.random() < 0.2:  # "tasks not planned for the spacewalk"
            p.concept = int(rng.choice([c for c in range(len(VOCABULARY)) if c not in concepts]))
        elif p.kind == "step":
            p.concept = concepts[p.label - 1]

    # The preview clips keep whole-second bounds (like the release); everything else is scaled to the target.
    clips = [Piece("preview", NOT_ANNOTATED, float(rng.integers(5, 11)), c) for c in concepts]
    pre, post, tail = (Piece("margin", NOT_ANNOTATED, rng.uniform(*r)) for r in ((30, 90), (15, 45), (40, 120)))
    flexible = [pre, post, tail, *body]
    room = target - sum(p.seconds for p in clips)
    scale = room / sum(p.seconds for p in flexible)
    for p in flexible:
        p.seconds *= scale
    pre.seconds = max(1.0, round(pre.seconds))
    if min(p.seconds for p in flexible) < 1.5:
        raise ConfigError(f"recordings of {opts.minutes} minutes are too short for {k} steps; "
                          "raise `minutes` or lower `steps_per_video`")
    pieces = [pre, *clips, post, *body, tail]
    t = 0.0
    for p in pieces:
        p.start, t = round(t, 3), t + p.seconds
        p.end = round(t, 3)
    pieces[-1].end = target
    return concepts, pieces, target


def segments_of(pieces: Sequence[Piece]) -> list[Segment]:
    merged: list[list] = []
    for p in pieces:
        if merged and merged[-1][2] == p.label:
            merged[-1][1] = p.end
        else:
            merged.append([p.start, p.end, p.label])
    return [Segment(s, e, frame_of(s), frame_of(e), label) for s, e, label in merged]
