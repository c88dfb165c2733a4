"""One synthetic HiREST video, planned: its timeline (the annotation) and its shots (the picture)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from spacewalk.benchmarks.hirest.synthetic.options import MIN_SHOT_SECONDS, HiRESTOptions
from spacewalk.benchmarks.hirest.synthetic.vocabulary import COLOURS, OBJECTS, RECIPE_LENGTH, StepKind, Task, pick

MIN_STEP_SECONDS = 3  # shown steps; zero-length steps exist only in the annotation
FADE_SECONDS = (1.0, 3.0)  # a continuous step change: the objects cross-fade over this long


@dataclass
class Shown:  # one step as it happens on screen
    kind: StepKind
    start: int
    end: int


@dataclass
class Shot:
    start: float
    kind: str  # "head" or "step"
    action: str = ""
    shape: str = ""
    colour: tuple[float, float, float] = (0.0, 0.0, 0.0)
    zoom: float = 1.0
    shift: tuple[float, float] = (0.0, 0.0)
    seed: int = 0
    pan: tuple[float, float] = (0.0, 0.0)  # camera motion, frame widths per second since `origin`
    origin: float = 0.0  # when the take began (a continued take keeps its predecessor's)
    fade_from: Shot | None = None  # a continuous step change: the shot this one cross-fades from
    fade: float = 0.0  # seconds of that cross-fade, from `start`


@dataclass
class VideoPlan:
    video: str  # "<id>.mp4"
    task: Task
    clip: bool
    annotated: bool  # clip with steps in the annotation
    duration: float  # v_duration
    n_frames: int
    bounds: list[int]  # [0, 0] for whole videos
    shown: list[Shown]
    steps: list[dict] = field(default_factory=list)  # the annotation's steps (official schema)
    shots: list[Shot] = field(default_factory=list)
    person: dict = field(default_factory=dict)
    sentences: list[tuple[float, float, str]] = field(default_factory=list)

    @property
    def annotation(self) -> dict:
        return {"relevant": True, "clip": self.clip, "v_duration": self.duration,
                "bounds": list(self.bounds), "steps": self.steps}


def _partition(total: int, k: int, rng: np.random.Generator) -> list[int]:
    """k whole-second lengths >= MIN_STEP_SECONDS summing to total (total >= k * MIN_STEP_SECONDS)."""
    extra = total - k * MIN_STEP_SECONDS
    weights = rng.dirichlet(np.full(k, 1.5)) * extra
    lengths = np.floor(weights).astype(int)
    for i in np.argsort(-(weights - lengths))[: extra - lengths.sum()]:
        lengths[i] += 1
    return [int(x) + MIN_STEP_SECONDS for x in lengths]


def plan_video(video: str, task: Task, kind: str, rng: np.random.Generator, opts: HiRESTOptions) -> VideoPlan:
    rate = float(Fraction(opts.video_fps).limit_denominator(1001))
    n_frames = max(2, round(rng.uniform(*opts.seconds) * rate))
    duration = round(n_frames / rate, 2)
    whole = int(math.floor(duration))
    clip = kind != "whole"
    if clip:
        length = int(round(rng.uniform(0.3, 0.72) * duration))  # clippable: the moment is < 75 % of the video
        length = max(2 * MIN_STEP_SECONDS, min(length, whole - 6))
        m0 = int(rng.integers(2, whole - length - 2 + 1))
        moment = (m0, m0 + length)
    else:
        moment = (0, whole)
    length = moment[1] - moment[0]
    k_lo, k_hi = opts.steps_per_moment
    k = max(1, min(int(rng.integers(k_lo, k_hi + 1)), length // MIN_STEP_SECONDS))
    first = int(rng.integers(0, RECIPE_LENGTH - k + 1))
    shown, t = [], moment[0]
    for kind_, seconds in zip(task.recipe[first:first + k], _partition(length, k, rng)):
        shown.append(Shown(kind_, t, t + seconds))
        t += seconds
    plan = VideoPlan(video, task, clip, kind == "steps", duration, n_frames,
                     list(moment) if clip else [0, 0], shown)
    if plan.annotated:
        rows = [(s.kind.heading, s.start, s.end) for s in shown]
        if rng.random() < opts.p_zero_length_step:
            if rng.random() < 0.5 or k == 1:  # "the cake is ready": a last step of no length
                rows.append((pick(rng, ("the {t} is ready", "finished {t}", "this is the final {t}")).format(
                    t=task.thing), moment[1], moment[1]))
            else:  # a step the annotator marked but that takes no time
                at = int(rng.integers(1, k))
                extra = task.recipe[(first + k) % RECIPE_LENGTH].heading
                rows.insert(at, (extra, shown[at].start, shown[at].start))
        for i, (heading, start, end) in enumerate(rows):
            if rng.random() < opts.p_capitalised:
                heading = heading[0].upper() + heading[1:]
            if rng.random() < opts.p_trailing_space:
                heading += " "
            plan.steps.append({"index": i, "heading": heading, "absolute_bounds": [start, end]})
    return plan


def plan_shots(plan: VideoPlan, rng: np.random.Generator, opts: HiRESTOptions | None = None,
                edit: np.random.Generator | None = None) -> None:
    """Shots of the video. `rng` draws the version-1 shots; `edit`, a stream of its own, draws the realistic
    editing options, so that with those off the shots are exactly version 1's."""
    opts = opts or HiRESTOptions()
    edit = edit or np.random.default_rng(0)
    tone = rng.uniform(0.4, 0.62)
    shirt = np.clip(0.5 * np.array(COLOURS[pick(rng, list(COLOURS))]) + 0.5 * tone, 0, 1)
    skin = ((0.87, 0.70, 0.58), (0.76, 0.57, 0.42), (0.55, 0.38, 0.26), (0.93, 0.78, 0.68))[int(rng.integers(4))]
    plan.person = {"wall": tuple(float(tone + d) for d in rng.uniform(-0.04, 0.04, 3)),
                   "shirt": tuple(float(c) for c in shirt), "skin": skin, "x": float(rng.uniform(0.38, 0.62)),
                   "size": float(rng.uniform(0.85, 1.1)), "phase": float(rng.uniform(0, 6.3))}

    def head(start: float):
        plan.shots.append(Shot(start, "head", zoom=float(rng.uniform(0.95, 1.1)),
                               shift=tuple(float(x) for x in rng.uniform(-0.03, 0.03, 2)),
                               seed=int(rng.integers(2**31))))

    if plan.shown[0].start > 0:
        head(0.0)
        if plan.shown[0].start > 12 and rng.random() < 0.5:  # a cut to a closer shot while talking
            head(float(rng.integers(4, plan.shown[0].start - 3)))

    def pan() -> tuple[float, float]:
        return tuple(float(x) for x in edit.uniform(-opts.camera_motion, opts.camera_motion, 2))

    for i, s in enumerate(plan.shown):
        colour = tuple(float(c) for c in COLOURS[s.kind.colour])
        zoom = float(rng.uniform(0.9, 1.15))
        shift, seed = tuple(float(x) for x in rng.uniform(-0.06, 0.06, 2)), int(rng.integers(2**31))
        shape = OBJECTS[s.kind.obj][0]
        take_on = i > 0 and edit.random() < opts.p_continuous_step
        if take_on:  # the same take goes on: its framing, motion and hand; the objects cross-fade
            before = plan.shots[-1]
            fade = float(edit.uniform(*FADE_SECONDS))
            plan.shots.append(Shot(s.start - fade / 2, "step", s.kind.action, shape, colour, before.zoom,
                                   before.shift, before.seed, before.pan, before.origin, before, fade))
        else:
            plan.shots.append(Shot(float(s.start), "step", s.kind.action, shape, colour, zoom, shift, seed,
                                   pan(), float(s.start)))
        if opts.shot_seconds is None:
            if s.end - s.start >= 7 and rng.random() < 0.4:  # a camera cut inside the step: a close-up
                cut = float(rng.integers(s.start + 3, s.end - 2))
                plan.shots.append(Shot(cut, "step", s.kind.action, shape, colour, zoom * float(rng.uniform(1.3, 1.6)),
                                       tuple(float(x) for x in rng.uniform(-0.12, 0.12, 2)), int(rng.integers(2**31)),
                                       pan(), cut))
            continue
        # edited into shots: jump cuts and re-framings of the same scene (closer, wider, elsewhere)
        cut = s.start + (FADE_SECONDS[1] / 2 if take_on else 0.0)
        while True:
            cut += float(edit.uniform(*opts.shot_seconds))
            if cut > s.end - MIN_SHOT_SECONDS:
                break
            plan.shots.append(Shot(cut, "step", s.kind.action, shape, colour, zoom * float(edit.uniform(0.85, 1.6)),
                                   tuple(float(x) for x in edit.uniform(-0.12, 0.12, 2)), int(edit.integers(2**31)),
                                   pan(), cut))
    if plan.shown[-1].end < math.floor(plan.duration):
        head(float(plan.shown[-1].end))

