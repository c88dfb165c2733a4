"""The synthetic HiREST: a small dataset in the official layout, generated from a seed.

It is what `data=hirest` runs on by default, so every HiREST command works on a fresh machine before any
download. It is a miniature of the release (docs/BENCHMARKS.md section 2) in the authors' layout:

    data/splits/all_data_{train,val,test}.json          query -> {"<id>.mp4": annotation} (test masked)
    data/splits/all_data_test_negative_samples.json     video-retrieval distractors
    data/evaluation/categories.json                     prompt_to_cat, video_to_cat
    data/evaluation/formatted_moment_evaluation_gt.json test step GT (clippable test videos with steps)
    data/val_testing/all_data_test.json                 the val split again, as the official val scoring wants it
    data/val_testing/formated_moment_evaluation_gt.json val step GT (sic)
    data/videos/<id>.mp4                                where the authors' download script puts the videos
    data/ASR/<id>.srt                                   Whisper-style subtitles (the authors' ASR.zip layout),
                                                        for the split videos only, like the authors' extraction
    synthetic.json                                      how it was generated (it is synthetic data)

Each query is a "how to" task (e.g. "Make a Red Paper Lantern", 20 things x 8 colours, four categories);
no query is in two splits, so test queries are colour/thing combinations no training query has. A task
has its own look (work surface, colours) and a recipe of steps, shared by every task making the same
thing; a video shows a run of consecutive steps. A step is an action on an object ("cut the red paper"):
the object gives the shape, its colour the colour, the action a coarse slowly moving look (bands, a
shadowed half, a stream, a blob of glue, ...), all visible in an 8 x 8 thumbnail, so neighbouring steps
look different and a heading can be read off the picture. Outside the relevant moment a person talks to
the camera in front of a grey wall, the same for every task. The subtitles narrate the steps (announced
a little early, late or not at all, with filler words and asides) inside the moment and chat outside.
Both modalities are informative and both are noisy: camera cuts inside steps and a moving hand fool a
frame-difference (SSIM) segmenter, a thumbnail confuses some actions, and narration misses steps.

Editing (options, off by default: the defaults give the version-1 videos byte for byte). By default every
step starts with a hard cut and at most one close-up cut falls inside a step, which is a frame-difference
segmenter's best case. Real how-to videos are edited differently, and that is what makes SSIM weak on them:
- `shot_seconds=(lo, hi)`: YouTube tutorials are cut into shots of a few seconds (jump cuts that drop
  pauses, closer and wider framings of the same work); each step is filmed as consecutive shots of lo..hi s,
  every one a new zoom and framing of the same object and action (cuts that are not step boundaries);
- `p_continuous_step`: many step changes happen in one take, the hands putting one thing down and picking
  up the next while the camera keeps rolling; such a step starts without a cut: the framing, camera motion
  and hand continue and the old objects cross-fade into the new over 1-3 s centred on the annotated start
  (a boundary without a cut);
- `camera_motion`: a hand-held camera pans; each shot drifts at a speed drawn up to this many frame
  widths per second (frames of one shot keep changing a little).
These draw from a random stream of their own, so switching them on changes the pictures only: the
annotation, the steps shown and the subtitles stay the same. `data=hirest` (conf/data/hirest.yaml) uses
them (`shot_seconds=(2, 6), p_continuous_step=0.5, camera_motion=0.02`) with videos of 40-150 s
(`seconds=(40, 150)`: steps as long as the release's against the joint model's 5 s rule); docs/hirest.md
gives the reasons and both models' scores on that setting and on these defaults.

    python -m spacewalk.hirest.synthetic --root data/synthetic_hirest [--seed N] [--overwrite]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from spacewalk.hirest.dataset import (
    CATEGORIES_FILE, MOMENT_GT_FILES, NEGATIVES_FILE, SPLIT_FILE, SPLITS, HiREST, durations,
)
from spacewalk.io import atomic_dir, ensure_generated, write_text

log = logging.getLogger(__name__)

RECORD_FILE = "synthetic.json"
# the record name since version 1 (existing folders keep it), not this module's path
GENERATOR = "spacewalk.hirest_synthetic"
GENERATOR_VERSION = 1
VIDEO_DIR = "data/videos"  # extraction/video_features/download_videos.py --save_path ./data/videos/
ASR_DIR = "data/ASR"  # extraction/whisper_ASR/README.md --asr_dir ./data/ASR/
VAL_TESTING_SPLIT_FILE = "data/val_testing/all_data_test.json"
MASKED = [0, 1]
MIN_STEP_SECONDS = 3  # shown steps; zero-length steps exist only in the annotation
NOISE = 0.008  # pixel noise (std, 4 x 4 blocks): frames of one step 1 s apart are alike, never equal
MIN_SHOT_SECONDS = 1.5  # shortest shot inside a step; also keeps cuts clear of a continuous step's fade
FADE_SECONDS = (1.0, 3.0)  # a continuous step change: the objects cross-fade over this long


@dataclass(frozen=True)
class HiRESTOptions:
    seed: int = 0
    n_train: int = 30  # queries per split; every query has its own task
    n_val: int = 10
    n_test: int = 10
    videos_per_query: tuple[int, int] = (1, 3)  # inclusive range
    n_distractors: int = 20  # test-time video retrieval distractors (all_data_test_negative_samples.json)
    seconds: tuple[float, float] = (20.0, 90.0)  # video length
    steps_per_moment: tuple[int, int] = (2, 6)  # shown steps, fewer where the moment is short
    p_whole: float = 0.25  # clip == false: the whole video is relevant
    p_clip_without_steps: float = 0.15  # clip == true, moment annotated, steps not
    p_zero_length_step: float = 0.1  # per video with steps: one extra step [b, b] (the release has a few)
    p_capitalised: float = 0.4  # headings are written by annotators: some capitalised,
    p_trailing_space: float = 0.15  # some with a trailing space
    video_fps: float = 2.0  # decoders sample at 1 fps; a low rate keeps generation fast
    frame_size: int = 64
    # editing as in real how-to videos (module docstring, "Editing"); the defaults give the version-1 look
    shot_seconds: tuple[float, float] | None = None  # shots inside a step last lo..hi s (None: <= 1 close-up)
    p_continuous_step: float = 0.0  # a step starts in the same take: no cut, the objects cross-fade
    camera_motion: float = 0.0  # pan speed (frame widths / s) of a hand-held camera, drawn per shot

    def __post_init__(self):
        for name in ("videos_per_query", "seconds", "steps_per_moment", "shot_seconds"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if min(self.n_train, self.n_val, self.n_test, self.n_distractors) < 0:
            raise ValueError("split sizes and n_distractors must not be negative")
        if min(self.n_val, self.n_test) < 1 or self.n_train < 1:
            raise ValueError("every split needs at least one query")
        if self.n_train + self.n_val + self.n_test > len(TASKS):
            raise ValueError(f"at most {len(TASKS)} queries in all (one task each), got "
                             f"{self.n_train + self.n_val + self.n_test}")
        lo, hi = self.videos_per_query
        if not 1 <= lo <= hi:
            raise ValueError(f"bad videos_per_query {self.videos_per_query}")
        lo, hi = self.seconds
        if not 20.0 <= lo <= hi:  # an intro, a moment of >= 2 steps and an outro must fit
            raise ValueError(f"seconds must satisfy 20 <= lo <= hi, got {self.seconds}")
        lo, hi = self.steps_per_moment
        if not 1 <= lo <= hi <= RECIPE_LENGTH:
            raise ValueError(f"steps_per_moment must lie within 1..{RECIPE_LENGTH}, got {self.steps_per_moment}")
        probs = (self.p_whole, self.p_clip_without_steps, self.p_zero_length_step, self.p_capitalised,
                 self.p_trailing_space)
        if any(not 0 <= p <= 1 for p in probs) or self.p_whole + self.p_clip_without_steps > 1:
            raise ValueError("probabilities must lie in [0, 1] (and p_whole + p_clip_without_steps <= 1)")
        if self.video_fps <= 0 or self.frame_size < 16 or self.frame_size % 4:
            raise ValueError("video_fps must be > 0 and frame_size a multiple of 4, >= 16")
        shots = self.shot_seconds
        if shots is not None and not (len(shots) == 2 and MIN_SHOT_SECONDS <= shots[0] <= shots[1]):
            raise ValueError(f"shot_seconds must be (lo, hi) with {MIN_SHOT_SECONDS} <= lo <= hi, got {shots}")
        if not 0 <= self.p_continuous_step <= 1 or not 0 <= self.camera_motion <= 0.1:
            raise ValueError("p_continuous_step must lie in [0, 1] and camera_motion in [0, 0.1]")


# --------------------------------------------------------------------------------------------------
# the vocabulary: tasks, objects, actions; their looks and how people say them

COLOURS = {  # name -> RGB in [0, 1]
    "red": (0.85, 0.15, 0.15), "orange": (0.95, 0.55, 0.10), "yellow": (0.95, 0.85, 0.15),
    "green": (0.20, 0.70, 0.25), "blue": (0.20, 0.40, 0.90), "purple": (0.55, 0.25, 0.80),
    "pink": (0.95, 0.50, 0.70), "brown": (0.50, 0.30, 0.15), "white": (0.95, 0.95, 0.95),
    "black": (0.10, 0.10, 0.12),
}
TASK_COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown")

# object -> (its shape on screen, what one does with it)
OBJECTS = {
    "paper": ("square", ("cut", "fold", "glue", "paint", "place")),
    "ribbon": ("band", ("cut", "fold", "glue", "place")),
    "clay": ("ellipse", ("roll", "cut", "paint", "place")), "card": ("tall", ("cut", "fold", "glue", "paint")),
    "beads": ("circles", ("place", "glue", "paint", "pour")), "paint": ("bowl", ("pour", "mix")),
    "dough": ("ellipse", ("roll", "cut", "mix", "place")), "batter": ("bowl", ("mix", "pour")),
    "fruit": ("circles", ("cut", "place", "mix")), "icing": ("band", ("mix", "pour", "place")),
    "cake": ("tall", ("cut", "place")), "wall": ("frame", ("paint", "roll")),
    "shelf": ("bars", ("place", "paint", "glue")), "tiles": ("grid", ("cut", "glue", "place")),
    "fabric": ("square", ("cut", "fold", "glue", "place")), "board": ("band", ("cut", "paint", "glue", "place")),
    "pot": ("triangle", ("paint", "place", "pour")), "salt": ("circles", ("pour", "mix")),
    "oil": ("bowl", ("pour", "mix")), "soap": ("square", ("cut", "pour", "place")),
    "wax": ("ellipse", ("pour", "mix", "cut")), "jar": ("tall", ("place", "pour")),
}

# action -> (its look, heading templates); "{col}" is the object's colour. Looks are coarse (they survive an
# 8 x 8 thumbnail) and move slowly (frames 1 s apart look alike)
ACTIONS = {
    "cut": ("stripes", ("cut the {col} {obj}", "cut the {obj} into pieces", "cut the {obj}")),
    "fold": ("fold", ("fold the {col} {obj}", "fold the {obj} in half", "fold the {obj}")),
    "glue": ("spot", ("glue the {col} {obj}", "apply glue to the {obj}", "glue the {obj} together")),
    "paint": ("gradient", ("paint the {obj} {col}", "paint the {col} {obj}", "add {col} paint to the {obj}")),
    "mix": ("radial", ("mix the {col} {obj}", "stir the {obj}", "mix the {obj} well")),
    "pour": ("stream", ("pour the {col} {obj}", "add the {obj}", "pour in the {obj}")),
    "roll": ("bands", ("roll the {col} {obj}", "roll out the {obj}", "roll the {obj} flat")),
    "place": ("shadow", ("place the {col} {obj}", "put the {obj} on top", "place the {obj} in the middle")),
}
ACTION_SAY = {  # spoken forms: what the narrator says while doing it
    "cut": ("cut the {obj}", "cut the {col} {obj}", "cut this into pieces", "cut along the line"),
    "fold": ("fold the {obj}", "fold it in half", "fold the {col} {obj} over"),
    "glue": ("glue the {obj}", "put some glue on the {obj}", "stick the {obj} down"),
    "paint": ("paint the {obj}", "paint it {col}", "give the {obj} a coat of {col} paint"),
    "mix": ("mix the {obj}", "stir the {col} {obj}", "mix everything together"),
    "pour": ("pour the {obj}", "pour in the {col} {obj}", "add the {obj}"),
    "roll": ("roll the {obj}", "roll out the {col} {obj}", "roll it flat"),
    "place": ("place the {obj}", "put the {col} {obj} on top", "set the {obj} in place"),
}

CATEGORIES = {  # category (as the release names them) -> things made: query, thing, main object, others
    "Hobbies and Crafts": (
        ("Make a {C} Paper Lantern", "paper lantern", "paper", ("ribbon", "paint")),
        ("Make a {C} Ribbon Bow", "ribbon bow", "ribbon", ("card", "beads")),
        ("Make a {C} Clay Pot", "clay pot", "clay", ("paint", "beads")),
        ("Make a {C} Greeting Card", "greeting card", "card", ("paper", "ribbon")),
        ("Make a {C} Bead Bracelet", "bead bracelet", "beads", ("ribbon", "card")),
        ("Make a {C} Paper Flower", "paper flower", "paper", ("card", "paint")),
    ),
    "Food and Entertaining": (
        ("Make a {C} Velvet Cake", "cake", "batter", ("cake", "icing")),
        ("Make {C} Fruit Tarts", "fruit tarts", "fruit", ("dough", "icing")),
        ("Make a {C} Smoothie", "smoothie", "fruit", ("batter", "icing")),
        ("Make {C} Sugar Cookies", "cookies", "dough", ("icing", "fruit")),
        ("Make {C} Pancakes", "pancakes", "batter", ("fruit", "dough")),
    ),
    "Home and Garden": (
        ("Paint a {C} Accent Wall", "accent wall", "wall", ("board", "tiles")),
        ("Build a {C} Bookshelf", "bookshelf", "shelf", ("board", "pot")),
        ("Tile a {C} Backsplash", "backsplash", "tiles", ("board", "wall")),
        ("Sew a {C} Pillow Cover", "pillow cover", "fabric", ("board", "tiles")),
        ("Build a {C} Planter Box", "planter box", "pot", ("board", "shelf")),
    ),
    "Personal Care and Style": (
        ("Make a {C} Bath Bomb", "bath bomb", "salt", ("oil", "jar")),
        ("Make {C} Lip Balm", "lip balm", "wax", ("oil", "jar")),
        ("Make a {C} Soap Bar", "soap bar", "soap", ("oil", "salt")),
        ("Make a {C} Sugar Scrub", "sugar scrub", "salt", ("oil", "jar")),
    ),
}
SURFACES = (  # the work surface a task is filmed on: colour, grain
    ((0.62, 0.45, 0.30), "grain"), ((0.90, 0.89, 0.86), "plain"), ((0.26, 0.28, 0.31), "plain"),
    ((0.22, 0.45, 0.32), "grid"), ((0.80, 0.80, 0.83), "veins"), ((0.35, 0.45, 0.62), "grain"),
)
RECIPE_LENGTH = 8


@dataclass(frozen=True)
class StepKind:
    action: str
    obj: str
    colour: str
    heading: str  # the task's wording for it


@dataclass(frozen=True)
class Task:
    query: str
    category: str
    thing: str
    colour: str
    surface: int
    recipe: tuple[StepKind, ...]


def _all_tasks() -> tuple[tuple[str, str, str, str, tuple[str, ...], str], ...]:
    out = []
    for category, things in CATEGORIES.items():
        for query, thing, main, others in things:
            for colour in TASK_COLOURS:
                text = query.format(C=colour.capitalize())
                out.append((re.sub(r"\ba (?=[AEIOU])", "an ", text), category, thing, main, others, colour))
    return tuple(out)


TASKS = _all_tasks()


def _make_task(index: int, seed: int) -> Task:
    """A task's look and recipe. Tasks making the same thing share the recipe (RECIPE_LENGTH steps,
    neighbours always differ in action) and its wording; colours and work surface are the task's own."""
    query, category, thing, main, others, colour = TASKS[index]
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1, index]))
    free = [c for c in COLOURS if c != colour]
    colours = {main: colour, **{o: free[int(rng.integers(len(free)))] for o in others}}
    surface = int(rng.integers(len(SURFACES)))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1, len(TASKS) + index // len(TASK_COLOURS)]))
    objects = (main, *others)
    pairs = [(action, obj) for obj in objects for action in OBJECTS[obj][1]]
    recipe: list[StepKind] = []
    while len(recipe) < RECIPE_LENGTH:
        last = recipe[-1].action if recipe else ""
        options = [p for p in pairs if p[0] != last]
        fresh = [p for p in options if all((k.action, k.obj) != p for k in recipe)] or options
        main_first = [p for p in fresh if p[1] == main]
        action, obj = _pick(rng, main_first if main_first and rng.random() < 0.5 else fresh)
        template = _pick(rng, ACTIONS[action][1])
        recipe.append(StepKind(action, obj, colours[obj], template.format(col=colours[obj], obj=obj)))
    return Task(query, category, thing, colour, surface, tuple(recipe))


# narration
INTRO = (
    "Hi guys, welcome back to my channel.", "Hey everyone, welcome back.", "Hello and welcome to my kitchen.",
    "This is a really easy project.", "Before we start, make sure you subscribe.",
    "I got all of these supplies from the dollar store.", "Let's get started.",
    "So first let me show you what you'll need.", "This is one of my favourite projects.",
    "It only takes a few minutes.", "My kids absolutely love this one.", "Let me know in the comments what you think.",
)
OUTRO = (
    "And that's it.", "Here's the finished {thing}.", "Thanks so much for watching.",
    "Don't forget to like and subscribe.", "Let me know in the comments if you try this.",
    "See you in the next video.", "Bye.", "I hope you enjoyed this video.",
)
ANNOUNCE = ("Now we're going to {say}.", "Next, {say}.", "So the first thing is to {say}.",
            "Okay, now {say}.", "What you want to do now is {say}.", "Then you {say}.", "Now I'm going to {say}.")
DURING = ("Just like this.", "Make sure it's nice and even.", "Okay.", "There we go.", "You can see it here.",
          "Take your time with this part.", "This part is really easy.", "I'm using a {col} {obj} here.",
          "This is the {col} {obj}.", "Keep going until it looks like this.", "Be careful with the {obj}.")
ASIDE = ("I love this colour.", "My kids love doing this.", "Sorry, the camera moved a little.",
         "It's a bit messy but that's okay.", "You can find the link in the description.")
FILLER = ("Um,", "Uh,", "So,", "Basically,", "You know,", "Okay so,", "Alright,")


def _sentence(text: str, rng: np.random.Generator) -> str:
    if rng.random() < 0.2:  # filler words, as Whisper writes them
        text = f"{FILLER[int(rng.integers(len(FILLER)))]} {text[0].lower()}{text[1:]}"
    return text[0].upper() + text[1:]


def _pick(rng: np.random.Generator, items: Sequence[str]) -> str:
    return items[int(rng.integers(len(items)))]


# --------------------------------------------------------------------------------------------------
# one video: its timeline (annotation), shots (picture) and subtitles (sound)


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
    fade_from: "Shot | None" = None  # a continuous step change: the shot this one cross-fades from
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


def _plan_video(video: str, task: Task, kind: str, rng: np.random.Generator, opts: HiRESTOptions) -> VideoPlan:
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
                rows.append((_pick(rng, ("the {t} is ready", "finished {t}", "this is the final {t}")).format(
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


def _plan_shots(plan: VideoPlan, rng: np.random.Generator, opts: HiRESTOptions | None = None,
                edit: np.random.Generator | None = None) -> None:
    """Shots of the video. `rng` draws the version-1 shots; `edit`, a stream of its own, draws the realistic
    editing options, so that with those off the shots are exactly version 1's."""
    opts = opts or HiRESTOptions()
    edit = edit or np.random.default_rng(0)
    tone = rng.uniform(0.4, 0.62)
    shirt = np.clip(0.5 * np.array(COLOURS[_pick(rng, list(COLOURS))]) + 0.5 * tone, 0, 1)
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


def _quantise(t: float) -> float:
    return round(round(t * 50) / 50, 2)  # Whisper's timestamps are multiples of 20 ms


def _plan_sentences(plan: VideoPlan, rng: np.random.Generator) -> None:
    """Whisper-like segments: 1-9 s, 20 ms steps, often back to back, sometimes two sentences in one."""
    task, out = plan.task, []
    end_of_video = plan.duration - 0.3

    def speak(t: float, text: str, limit: float) -> float:
        seconds = len(text.split()) / rng.uniform(2.3, 3.2)
        seconds = min(max(seconds, 1.0), 9.0)
        if t + 0.8 > limit:
            return t
        end = min(t + seconds, limit)
        if out and rng.random() < 0.25 and end - out[-1][0] < 10 and abs(out[-1][1] - t) < 0.05:
            out[-1] = (out[-1][0], _quantise(end), f"{out[-1][2]} {text}")  # two sentences, one segment
        else:
            out.append((_quantise(t), _quantise(end), text))
        return end

    def pause(t: float) -> float:
        return t + (0.0 if rng.random() < 0.4 else rng.uniform(0.2, 1.8) if rng.random() < 0.85
                    else rng.uniform(2.5, 6.0))

    t = rng.uniform(0.0, 1.0)
    first = plan.shown[0].start
    if first > 0:  # intro: greeting, what we make today, chat
        lines = [_pick(rng, INTRO[:3]), f"Today I'm going to show you how to {task.query.lower()}."]
        lines += [INTRO[i] for i in rng.permutation(len(INTRO) - 3)[:4] + 3]
        for line in lines:
            t = speak(t, _sentence(line, rng), first - 0.5)
            t = pause(t)
    elif rng.random() < 0.7:  # a whole-video tutorial names its task up front
        t = speak(t, f"Today I'll show you how to {task.query.lower()}.", plan.shown[0].end)
    for i, s in enumerate(plan.shown):
        k, fill = s.kind, {"obj": s.kind.obj, "col": s.kind.colour}
        lead = rng.uniform(-1.5, 1.0) if i else rng.uniform(0.0, 1.0)
        t = max(t, s.start + lead)
        limit = s.end + (rng.uniform(0, 1.0) if i + 1 < len(plan.shown) else 0)
        if rng.random() < 0.85:  # some steps go unannounced
            say = _pick(rng, ACTION_SAY[k.action]).format(**fill)
            t = pause(speak(t, _sentence(_pick(rng, ANNOUNCE).format(say=say), rng), limit))
        while t < limit - 1.5:
            r = rng.random()
            if r < 0.55:
                text = _pick(rng, DURING).format(**fill)
            elif r < 0.8:
                text = "Now " + _pick(rng, ACTION_SAY[k.action]).format(**fill) + "."
            else:
                text = _pick(rng, ASIDE)
            t = pause(speak(t, _sentence(text, rng), limit))
    last = plan.shown[-1].end
    if last < math.floor(plan.duration):
        t = max(t, last + rng.uniform(0.0, 1.0))
        for line in [OUTRO[0], OUTRO[1], *(OUTRO[i] for i in rng.permutation(len(OUTRO) - 2)[:3] + 2)]:
            t = pause(speak(t, _sentence(line.format(thing=task.thing), rng), end_of_video))
    if not out:  # a very short video: one line at least
        out.append((0.0, _quantise(min(2.0, end_of_video)), "Okay."))
    plan.sentences = out


def srt_text(sentences: Sequence[tuple[float, float, str]]) -> str:
    """SRT exactly as whisper.utils.write_srt (the version the authors used) writes it."""

    def stamp(seconds: float) -> str:
        ms = round(seconds * 1000.0)
        h, ms = divmod(ms, 3_600_000)
        m, ms = divmod(ms, 60_000)
        s, ms = divmod(ms, 1_000)
        return f"{h:02d}:{m:02d}:{s:02d},{ms:03d}"

    return "".join(f"{i}\n{stamp(a)} --> {stamp(b)}\n{text.strip().replace('-->', '->')}\n\n"
                   for i, (a, b, text) in enumerate(sentences, start=1))


_SRT_BLOCK = re.compile(r"(\d+)\n(\d+):(\d\d):(\d\d),(\d{3}) --> (\d+):(\d\d):(\d\d),(\d{3})\n(.+?)\n(?:\n|$)", re.S)


def parse_srt(text: str) -> list[tuple[int, float, float, str]]:
    """(index, start, end, text) of each block of a Whisper SRT; raises ValueError on anything else."""
    out, pos = [], 0
    for m in _SRT_BLOCK.finditer(text):
        if m.start() != pos:
            raise ValueError(f"unparsable SRT text at character {pos}: {text[pos:pos + 40]!r}")
        g = m.groups()
        start = int(g[1]) * 3600 + int(g[2]) * 60 + int(g[3]) + int(g[4]) / 1000
        end = int(g[5]) * 3600 + int(g[6]) * 60 + int(g[7]) + int(g[8]) / 1000
        out.append((int(g[0]), start, end, g[9]))
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"unparsable SRT text at character {pos}: {text[pos:pos + 40]!r}")
    return out


# --------------------------------------------------------------------------------------------------
# pictures: every shot is a vectorised function of time


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


def _write_video(path: Path, plan: VideoPlan, opts: HiRESTOptions, rng: np.random.Generator) -> None:
    import av  # imported here: reading a dataset never needs an encoder

    rate = Fraction(opts.video_fps).limit_denominator(1001)
    times = np.arange(plan.n_frames, dtype=np.float64) / float(rate)
    starts = np.array([s.start for s in plan.shots])
    owner = np.searchsorted(starts, times + 1e-9, side="right") - 1
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width = stream.height = opts.frame_size
        stream.pix_fmt = "yuv420p"
        stream.codec_context.gop_size = max(1, round(10 * float(rate)))  # a keyframe every 10 s: cheap seeks
        stream.options = {"preset": "ultrafast", "crf": "20"}
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
            pixels = np.clip(frames * 255 + 0.5, 0, 255).astype(np.uint8)
            for k, image in enumerate(pixels, start=i):
                frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
                frame.pts = k  # time base 1/rate: one tick per frame
                container.mux(stream.encode(frame))
            i = j
        container.mux(stream.encode())


# --------------------------------------------------------------------------------------------------
# the whole dataset

_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _video_names(seed: int, n: int) -> list[str]:
    """n distinct YouTube-like ids (11 characters of [A-Za-z0-9_-]) as "<id>.mp4"."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x1D5]))
    names: dict[str, None] = {}
    while len(names) < n:
        names.setdefault("".join(_ID_ALPHABET[i] for i in rng.integers(0, 64, 11)) + ".mp4")
    return list(names)


@dataclass
class HiRESTPlan:
    splits: dict[str, dict[str, dict[str, VideoPlan]]]  # split -> query -> video -> plan, in file order
    distractors: list[VideoPlan]

    def videos(self) -> list[VideoPlan]:
        return [p for s in SPLITS for q in self.splits[s].values() for p in q.values()] + self.distractors


def _kinds(n: int, rng: np.random.Generator, opts: HiRESTOptions) -> list[str]:
    p = [opts.p_whole, opts.p_clip_without_steps, 1 - opts.p_whole - opts.p_clip_without_steps]
    kinds = [str(k) for k in rng.choice(["whole", "clip", "steps"], size=n, p=p)]
    # every split has videos with steps (its step GT), and shows every kind the options allow where it can
    for k in [k for k, pk in zip(["steps", "whole", "clip"], [p[2], p[0], p[1]]) if pk > 0 or k == "steps"]:
        if k not in kinds:
            spare = [j for j in range(n) if kinds.count(kinds[j]) > 1]
            if spare or k == "steps":
                kinds[spare[-1] if spare else 0] = k
    return kinds


def plan_hirest(options: HiRESTOptions | Mapping[str, Any] | None = None) -> HiRESTPlan:
    """Everything the dataset holds, decided from the options alone (no file is written)."""
    opts = _options(options)
    seed = opts.seed
    order = np.random.default_rng(np.random.SeedSequence([seed, 0])).permutation(len(TASKS))
    sizes = {"train": opts.n_train, "val": opts.n_val, "test": opts.n_test}
    n_queries = sum(sizes.values())
    # distractors show tasks that no query asks for (and, once those run out, training tasks)
    spare = [int(i) for i in order[n_queries:]] or [int(i) for i in order[:opts.n_train]]
    tasks = {int(i): _make_task(int(i), seed) for i in [*order[:n_queries], *spare]}

    count_rng = np.random.default_rng(np.random.SeedSequence([seed, 2]))
    lo, hi = opts.videos_per_query
    counts = {split: [int(count_rng.integers(lo, hi + 1)) for _ in range(sizes[split])] for split in SPLITS}
    kinds = {split: _kinds(sum(counts[split]), count_rng, opts) for split in SPLITS}
    names = iter(_video_names(seed, sum(sum(c) for c in counts.values()) + opts.n_distractors))

    index = 0

    def make(task: Task, kind: str) -> VideoPlan:
        nonlocal index
        # the 4th stream (editing options) leaves the first three, and so version-1 videos, unchanged
        plan_rng, shot_rng, text_rng, edit_rng = (np.random.default_rng(s)
                                                  for s in np.random.SeedSequence([seed, 3, index]).spawn(4))
        index += 1
        plan = _plan_video(next(names), task, kind, plan_rng, opts)
        _plan_shots(plan, shot_rng, opts, edit_rng)
        _plan_sentences(plan, text_rng)
        return plan

    splits: dict[str, dict[str, dict[str, VideoPlan]]] = {}
    start = 0
    for split in SPLITS:
        splits[split] = {}
        k = iter(kinds[split])
        for q, n in zip(order[start:start + sizes[split]], counts[split]):
            task = tasks[int(q)]
            videos = [make(task, next(k)) for _ in range(n)]
            splits[split][task.query] = {p.video: p for p in videos}
        start += sizes[split]
    distractor_kinds = count_rng.choice(["whole", "clip"], size=opts.n_distractors, p=[0.4, 0.6])
    distractors = [make(tasks[spare[i % len(spare)]], str(kind)) for i, kind in enumerate(distractor_kinds)]
    return HiRESTPlan(splits, distractors)


def _dumps(obj: Any, indent: int | None = None) -> str:
    return json.dumps(obj, indent=indent)  # the release's style: no trailing newline


def _moment_gt(videos: Sequence[VideoPlan], float_bounds: bool) -> dict:
    out = {}
    for p in videos:
        if p.clip and p.steps:
            bounds = [list(map(float if float_bounds else int, s["absolute_bounds"])) for s in p.steps]
            out[p.video] = {"captions": [{"start": s["absolute_bounds"][0], "end": s["absolute_bounds"][1],
                                          "sentence": s["heading"]} for s in p.steps], "bounds": bounds}
    return out


def _record(opts: HiRESTOptions) -> dict:
    return {"generator": GENERATOR, "version": GENERATOR_VERSION, "synthetic": True,
            "note": "Synthetic data in the layout of the HiREST release (j-min/HiREST): generated, not real "
                    "videos; numbers on it are not comparable with the paper's.",
            "options": json.loads(json.dumps(dataclasses.asdict(opts)))}


def _options(options: HiRESTOptions | Mapping[str, Any] | None, **fields: Any) -> HiRESTOptions:
    if options is None:
        return HiRESTOptions(**fields)
    if isinstance(options, HiRESTOptions):
        return dataclasses.replace(options, **fields) if fields else options
    return HiRESTOptions(**{**dict(options), **fields})


def generate_hirest(root: str | Path, options: HiRESTOptions | Mapping[str, Any] | None = None, *,
                    overwrite: bool = False, progress: bool = True) -> Path:
    """Write a synthetic HiREST in the official layout to `root`; the same options give the same bytes."""
    from tqdm import tqdm

    opts = _options(options)
    root = Path(root).absolute()
    if root.exists() and not overwrite:
        raise FileExistsError(f"{root} exists; pass overwrite=True (--overwrite) to replace it")
    # Built beside root and renamed at the end: an interrupted generation never leaves a half dataset.
    with atomic_dir(root, replace=overwrite) as work:
        plan = plan_hirest(opts)
        (work / VIDEO_DIR).mkdir(parents=True)
        (work / ASR_DIR).mkdir(parents=True)
        split_videos = [p for s in SPLITS for q in plan.splits[s].values() for p in q.values()]
        for i, p in enumerate(tqdm(plan.videos(), desc="synthetic HiREST", unit="video", disable=not progress)):
            video_rng = np.random.default_rng(np.random.SeedSequence([opts.seed, 4, i]))
            _write_video(work / VIDEO_DIR / p.video, p, opts, video_rng)
        for p in split_videos:  # the authors transcribed the split videos, not the distractors
            write_text(work / ASR_DIR / f"{p.video[:-4]}.srt", srt_text(p.sentences))

        annotations = {s: {q: {v: p.annotation for v, p in videos.items()} for q, videos in plan.splits[s].items()}
                       for s in SPLITS}
        write_text(work / SPLIT_FILE.format(split="train"), _dumps(annotations["train"]))
        write_text(work / SPLIT_FILE.format(split="val"), _dumps(annotations["val"]))
        masked = {q: {v: {**a, "bounds": list(MASKED), "steps": []} for v, a in videos.items()}
                  for q, videos in annotations["test"].items()}
        write_text(work / SPLIT_FILE.format(split="test"), _dumps(masked, indent=2))
        write_text(work / VAL_TESTING_SPLIT_FILE, _dumps(annotations["val"]))
        for split, float_bounds in (("test", True), ("val", False)):  # as in the release
            videos = [p for q in plan.splits[split].values() for p in q.values()]
            write_text(work / MOMENT_GT_FILES[split], _dumps(_moment_gt(videos, float_bounds)))
        write_text(work / NEGATIVES_FILE, _dumps({f"negative video_{i}": {p.video: {}}
                                                  for i, p in enumerate(plan.distractors)}))
        write_text(work / CATEGORIES_FILE, _dumps({
            "prompt_to_cat": {q: next(iter(v.values())).task.category for s in SPLITS
                              for q, v in plan.splits[s].items()},
            "video_to_cat": {p.video: p.task.category for p in split_videos}}))
        write_text(work / RECORD_FILE, json.dumps(_record(opts), indent=4) + "\n")

        _check(work, plan)
    return root


def _check(root: Path, plan: HiRESTPlan) -> None:
    # Validate with the one reader before installing: a generator bug never becomes a dataset.
    data = HiREST(root)
    for split in SPLITS:
        data.split(split)
    for split in MOMENT_GT_FILES:
        data.step_annotations(split)
    if data.videos() != [p.video for p in plan.videos()] or set(durations(data)) != set(data.categories.video_to_cat):
        raise RuntimeError("synthetic HiREST: video lists disagree")
    for p in plan.videos():
        if not (root / VIDEO_DIR / p.video).is_file():
            raise RuntimeError(f"synthetic HiREST: {p.video} was not written")


def ensure_hirest(root: str | Path, options: HiRESTOptions | Mapping[str, Any] | None = None, *,
                  progress: bool = True, **fields: Any) -> Path:
    """The synthetic HiREST at `root`: generated on first use, regenerated when the options changed.

    `options` (a HiRESTOptions or a mapping) and keyword `fields` (which win) give the options. A root
    that exists but was not written by this generator (no synthetic.json of ours) is never touched.
    """
    opts = _options(options, **fields)
    return ensure_generated(root, RECORD_FILE, _record(opts),
                            lambda overwrite: generate_hirest(root, opts, overwrite=overwrite, progress=progress),
                            "a synthetic HiREST")


def open_hirest(root: str | Path | None = None, synthetic_root: str | Path | None = None,
                seed: int = 0, options: dict | None = None) -> HiREST:
    """`data=hirest`: the release at `root`; with root null, the synthetic default at `synthetic_root`,
    generated on first use (`options` are HiRESTOptions fields)."""
    if root is not None:
        return HiREST(root)
    if synthetic_root is None:
        raise ValueError("data.root (a HiREST release) or data.synthetic_root is required")
    return HiREST(ensure_hirest(synthetic_root, {**(options or {}), "seed": seed}))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.hirest.synthetic", description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, type=Path, help="where to write the dataset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing root")
    args = parser.parse_args(argv)
    try:
        generate_hirest(args.root, HiRESTOptions(seed=args.seed), overwrite=args.overwrite)
    except FileExistsError as e:
        parser.exit(1, f"error: {e}\n")


if __name__ == "__main__":
    main()
