"""The synthetic Spacewalk-18: a small dataset in the official layout, generated from a seed.

It is the project's default dataset, so every command runs on a fresh machine before any download.
It is a miniature of the real release (docs/BENCHMARKS.md section 1): each recording opens with a
not-annotated margin holding an animated preview of its planned steps, then performs the steps (with
Irrelevant shots, repeats, interruptions and not-annotated gaps), then closes with another margin.
Steps come from a fixed vocabulary of concepts; each concept has a visual signature (colour x moving
pattern, two camera views) and a narration (actor + action + object + location, spoken the way ASR
writes it). Both modalities are informative and both are noisy, in different ways: generic shots
and camera views hide the video cue, chatter and mentions of other steps blur the text cue.

    python -m spacewalk.benchmarks.spacewalk18.synthetic --root data/synthetic_spacewalk18 [--seed N] [--overwrite]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import (
    ANNOTATION_FILE,
    FPS,
    IRRELEVANT_DESCRIPTION,
    NOT_ANNOTATED,
    QUESTION_FILE,
    RETRIEVAL_DIR,
    SPLIT_FILE,
    SPLITS,
    STEP_RECOGNITION_DIR,
    STEPS_FILE,
    TRANSCRIPT_COLUMNS,
    TRANSCRIPT_DIR,
    TRANSCRIPT_ENCODING,
    VIDEO_DIR,
    Segment,
    Spacewalk18,
    frame_of,
    samples_to_json,
)
from spacewalk.benchmarks.spacewalk18.data.step_sampler import step_samples
from spacewalk.core.command_errors import user_errors_reported
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.io import atomic_dir, load_json, write_json, write_text

# Written beside the official files so ensure_dataset can tell which generation a root holds.
RECORD_FILE = "synthetic.json"
GENERATOR_VERSION = 1


@dataclass(frozen=True)
class Options:
    n_train: int = 6
    n_val: int = 2
    n_test: int = 2
    steps_per_video: tuple[int, int] = (8, 14)  # K, inclusive range
    minutes: tuple[float, float] = (15.0, 25.0)  # recording length; plans with more steps get longer ones
    # Annotation frames always follow the official round(seconds * 29.97) rule, while decoders address
    # the mp4 by timestamp, so the mp4's own rate is free: a low one keeps generation fast.
    video_fps: float = 2.0
    frame_size: int = 64
    samples_per_video: int = 2000
    retrieval_samples_per_video: int = 2000
    questions_per_video: int = 20  # test videos only, like the release
    qa_window_seconds: float = 600.0  # the release uses one-hour windows on 8-hour recordings

    def __post_init__(self):
        for name in ("steps_per_video", "minutes"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if min(self.n_train, self.n_val, self.n_test) < 0 or self.n_train + self.n_val + self.n_test == 0:
            raise ConfigError("need at least one recording and no negative split size")
        lo, hi = self.steps_per_video
        if not 1 <= lo <= hi <= len(VOCABULARY) - 2:  # two concepts stay free for "unplanned task" shots
            raise ConfigError(f"steps_per_video must lie within 1..{len(VOCABULARY) - 2}, got {self.steps_per_video}")
        if not 0 < self.minutes[0] <= self.minutes[1]:
            raise ConfigError(f"bad minutes range {self.minutes}")
        if self.video_fps <= 0 or self.frame_size < 16 or self.frame_size % 2:
            raise ConfigError("video_fps must be > 0 and frame_size an even number >= 16")


# --------------------------------------------------------------------------------------------------
# the vocabulary: written forms for captions, spoken forms (as ASR writes them) for narration

ACTORS = {
    "EV1": (["EV one", "Eighty one", "the crew member in the red stripes"], "is"),
    "EV2": (["EV two", "the crew member in the plain white suit"], "is"),
    "EV1 & EV2": (["both crew members", "EV one and EV two", "the two spacewalkers"], "are"),
}
OBJECTS = {
    "old battery": ["old battery", "nickel hydrogen battery", "old nickel hydrogen battery"],
    "new battery": ["new battery", "lithium ion battery", "new lithium ion battery"],
    "adapter plate": ["adapter plate", "battery adapter plate"],
    "foot restraint": ["foot restraint", "portable foot restraint", "PFR"],
    "camera": ["camera", "HD camera", "external camera assembly"],
    "thermal cover": ["thermal cover", "insulation blanket", "thermal blanket"],
    "solar array bag": ["solar array bag", "strut bag", "bag with the array struts"],
    "power cable": ["power cable", "jumper cable", "power jumper"],
    "grapple fixture": ["grapple fixture", "grapple pin"],
    "tool bag": ["tool bag", "crew lock bag"],
    "handrail": ["handrail", "new handrail"],
    "mast canister strut": ["mast canister strut", "mid strut", "lower strut"],
    "pump module": ["pump module", "ammonia pump module"],
    "radiator": ["radiator", "radiator panel"],
    "upper triangle": ["upper triangle", "triangle frame"],
}
LOCATIONS = {
    "airlock": ["the airlock", "the Quest airlock"],
    "P6 truss": ["p six", "the port six truss", "the p six worksite"],
    "S4 truss": ["s four", "the starboard four truss"],
    "P1 truss": ["p one", "the port one truss"],
    "Z1 truss": ["z one", "the zenith one truss"],
    "external pallet": ["the external pallet", "the EP"],
    "Columbus module": ["Columbus", "the European Columbus module"],
    "Canadarm2": ["the Canada arm two", "the robotic arm"],
}
VERB_ING = {
    "exit": "exiting", "move": "moving", "remove": "removing", "install": "installing", "stow": "stowing",
    "set up": "setting up", "retrieve": "retrieving", "replace": "replacing", "route": "routing",
    "connect": "connecting", "inspect": "inspecting", "build": "building", "photograph": "photographing",
    "release": "releasing", "return": "returning", "torque": "torquing",
}


@dataclass(frozen=True)
class Concept:
    actor: str
    verb: str
    obj: str  # "" for moves
    prep: str
    loc: str

    @property
    def caption(self) -> str:
        return " ".join(p for p in (self.actor, self.verb, self.obj, self.prep, self.loc) if p)


# Objects, locations and verbs are shared between concepts, so only their combination names a step.
VOCABULARY = tuple(Concept(*c) for c in (
    ("EV1 & EV2", "exit", "", "", "airlock"),
    ("EV1", "move", "", "to", "P6 truss"),
    ("EV2", "move", "", "to", "S4 truss"),
    ("EV1", "remove", "old battery", "from", "P6 truss"),
    ("EV2", "install", "new battery", "on", "P6 truss"),
    ("EV1", "stow", "old battery", "on", "external pallet"),
    ("EV2", "install", "adapter plate", "on", "S4 truss"),
    ("EV1", "set up", "foot restraint", "on", "Canadarm2"),
    ("EV2", "retrieve", "foot restraint", "from", "airlock"),
    ("EV1", "replace", "camera", "on", "Columbus module"),
    ("EV2", "remove", "thermal cover", "from", "Columbus module"),
    ("EV1 & EV2", "install", "solar array bag", "on", "P6 truss"),
    ("EV1", "route", "power cable", "to", "S4 truss"),
    ("EV2", "connect", "power cable", "on", "Z1 truss"),
    ("EV1", "inspect", "grapple fixture", "on", "Canadarm2"),
    ("EV2", "install", "mast canister strut", "on", "P6 truss"),
    ("EV1 & EV2", "build", "upper triangle", "at", "P6 truss"),
    ("EV2", "install", "handrail", "on", "Z1 truss"),
    ("EV1", "remove", "pump module", "from", "S4 truss"),
    ("EV2", "stow", "tool bag", "in", "airlock"),
    ("EV1", "install", "thermal cover", "on", "external pallet"),
    ("EV2", "photograph", "radiator", "on", "P1 truss"),
    ("EV1", "release", "grapple fixture", "from", "Canadarm2"),
    ("EV1 & EV2", "return", "", "to", "airlock"),
))

# Visual signature of concept i: PALETTE[i % 8] x PATTERNS[i % 6]; lcm(8, 6) = 24 keeps all 24 distinct
# while any single cue (colour or pattern) is shared with other concepts.
PALETTE = np.array([
    (0.90, 0.20, 0.20), (0.95, 0.55, 0.10), (0.90, 0.85, 0.20), (0.20, 0.80, 0.30),
    (0.15, 0.75, 0.75), (0.30, 0.50, 0.95), (0.60, 0.30, 0.90), (0.95, 0.40, 0.75),
], dtype=np.float32)
PATTERNS = ("stripes", "checker", "rings", "disc", "dots", "waves")

CHATTER = (
    "The space station is flying about two hundred and sixty miles above the Pacific Ocean.",
    "The station is now in orbital daytime.",
    "We'll see another sunset in about twenty minutes.",
    "The spacewalk is running a little ahead of the timeline.",
    "Mission control in Houston is following every step of the work.",
    "The crew inside the station is monitoring the spacewalk as well.",
    "Flight controllers are looking at the data now.",
    "Both spacewalkers have plenty of oxygen and battery power left.",
    "Houston copies all.",
    "Copy that, standing by.",
    "Stand by for the next step.",
    "We're about two hours into today's spacewalk.",
    "The suit pressure and oxygen numbers look good.",
    "You're looking at a view from one of the external cameras.",
    "Thanks, Houston.",
    "That sounds good to us.",
    "Take your time with that one.",
    "The station sees sixteen sunrises and sunsets a day.",
    "The station moves at almost seventeen thousand five hundred miles per hour.",
    "Let's take a quick look at the timeline.",
    "Okay, I'm ready when you are.",
    "Roger that.",
    "Nice work so far, guys.",
    "Give us a moment to look at that on the ground.",
    "We recommend a short break to drink some water.",
    "The flight director is happy with the progress so far.",
    "All right, moving on.",
    "We'll get back to you on that in a minute.",
    "The camera view will switch in a moment.",
    "Say again, Houston, you were a little broken.",
)
OPENING = (
    "Good morning and welcome to NASA coverage of today's spacewalk.",
    "The two astronauts are getting ready inside the airlock.",
    "Today's spacewalk is expected to last about six and a half hours.",
    "This will be the fourth spacewalk at the station this year.",
)
PREVIEW_INTRO = "Let's take a look at an animation of today's planned tasks."
AFTER_PREVIEW = (
    "That concludes the animation of today's work.",
    "The hatch should be opening in just a few minutes.",
    "The crew has switched their suits to battery power, and the spacewalk is under way.",
)
LOST_SIGNAL = (
    "We've temporarily lost the video signal from the station.",
    "We should get the downlink back in a few minutes.",
    "The station is passing through a gap in satellite coverage.",
    "Audio only for now while we wait for the video to return.",
)
CLOSING = (
    "Both spacewalkers are back inside the airlock.",
    "The hatch is now closed.",
    "Repressurization of the airlock is under way.",
    "That wraps up today's spacewalk, thanks for joining us.",
)
NARRATION = (  # during the step itself
    "{A} {be} {VPing}.",
    "Right now {A} {be} {VPing}.",
    "You can see {A} {VPing} on the helmet camera.",
    "{A} {be} still {VPing}, and that is going well.",
    "Houston, {A} {be} about to {VP}.",
    "{A}, you're go to {VP}.",
)
NARRATION_OBJECT = ("That's the {O} you can see there.", "A good view of the {O} right now.",
                    "Looks like the {O} is giving them a little trouble.")
NARRATION_PLACE = ("We're now at {L}.", "The work site here is {L}.")
PREVIEW = ("{First}, {A} will {VP}.", "In the animation, {A} will {VP}.", "You can see {A} will {VP}.")
PREVIEW_EXTRA = ("That's the {O}.", "This all happens at {L}.", "That should take about an hour.")
MENTION = (  # another step, said during this one: the text cue is not clean
    "Later today {A} will {VP}.", "Earlier we saw {A} {VPing}.", "Coming up, {A} will {VP}.",
    "The team is still reviewing the plan to {VP}.",
)
UNPLANNED = "Originally {A} was going to {VP}, but that task was deferred."


def _pick(rng: np.random.Generator, items: Sequence[str]) -> str:
    return items[int(rng.integers(len(items)))]


def _say(template: str, concept: Concept, rng: np.random.Generator, first: str = "Then") -> str:
    spoken, be = ACTORS[concept.actor]
    obj = _pick(rng, OBJECTS[concept.obj]) if concept.obj else ""
    loc = _pick(rng, LOCATIONS[concept.loc])
    tail = " ".join(p for p in (f"the {obj}" if obj else "", concept.prep, loc) if p)
    text = template.format(A=_pick(rng, spoken), be=be, VP=f"{concept.verb} {tail}",
                           VPing=f"{VERB_ING[concept.verb]} {tail}", O=obj or "work site", L=loc, First=first)
    return text[0].upper() + text[1:]


def _speech_seconds(text: str, rng: np.random.Generator) -> float:
    return float(np.clip(len(text.split()) / 2.6 * rng.uniform(0.85, 1.2), 2.0, 10.0))


# --------------------------------------------------------------------------------------------------
# one recording: pieces of time (label + what is on screen), then segments, transcript, shots


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


def _plan_pieces(rng: np.random.Generator, opts: Options) -> tuple[list[int], list[Piece], float]:
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


def _segments(pieces: Sequence[Piece]) -> list[Segment]:
    merged: list[list] = []
    for p in pieces:
        if merged and merged[-1][2] == p.label:
            merged[-1][1] = p.end
        else:
            merged.append([p.start, p.end, p.label])
    return [Segment(s, e, frame_of(s), frame_of(e), label) for s, e, label in merged]


def _transcript(rng: np.random.Generator, concepts: Sequence[int], pieces: Sequence[Piece],
                duration: float) -> list[tuple[str, float, float]]:
    sentences: list[tuple[str, float, float]] = []
    previews = [p for p in pieces if p.kind == "preview"]
    start_of_preview, end_of_preview = previews[0].start, previews[-1].end
    starts = [p.start for p in pieces]

    def emit(text: str, t: float, seconds: float) -> float:
        sentences.append((text, round(t, 3), round(t + seconds, 3)))
        return t + seconds

    # The narration of the preview: one sentence per clip spoken inside it, sometimes a second one that
    # may run into the next clip (so a step's animation transcript can carry its neighbour's words).
    t = start_of_preview
    for i, clip in enumerate(previews):
        t = max(t, clip.start) + rng.uniform(0.1, 0.6)
        text = _say(_pick(rng, PREVIEW), VOCABULARY[clip.concept], rng, "First" if i == 0 else "Then")
        t = emit(text, t, min(_speech_seconds(text, rng), max(clip.end - t - 0.1, 1.0)))
        if clip.end - t > 2.5 and rng.random() < 0.5:
            text = _say(_pick(rng, PREVIEW_EXTRA), VOCABULARY[clip.concept], rng)
            t = emit(text, t + rng.uniform(0.1, 0.4), _speech_seconds(text, rng))
    after_preview = t
    preview_sentences, sentences = sentences, []

    opening = list(OPENING)
    after = list(AFTER_PREVIEW)
    closing = list(CLOSING)
    t = rng.uniform(0.1, 2.0)
    while t < duration - 2.0:
        t += rng.uniform(8, 30) if rng.random() < 0.12 else rng.uniform(0.2, 2.5)  # silence
        if t < end_of_preview and t + 10.0 > start_of_preview:  # introduce the animation, then let it play
            seconds = _speech_seconds(PREVIEW_INTRO, rng)
            if start_of_preview - t >= seconds + 0.3:
                emit(PREVIEW_INTRO, start_of_preview - 0.3 - seconds, seconds)
            t = max(after_preview, end_of_preview) + rng.uniform(0.3, 1.5)
            continue
        piece = pieces[int(np.searchsorted(starts, t, side="right")) - 1]
        r = rng.random()
        if piece.kind == "step":
            concept = VOCABULARY[piece.concept]
            if r < 0.22:
                text = _say(_pick(rng, NARRATION), concept, rng)
            elif r < 0.3:
                text = _say(_pick(rng, NARRATION_OBJECT if concept.obj else NARRATION_PLACE), concept, rng)
            elif r < 0.35:
                text = _say(_pick(rng, NARRATION_PLACE), concept, rng)
            elif r < 0.55 and len(concepts) > 1:
                other = _pick(rng, [c for c in concepts if c != piece.concept])
                text = _say(_pick(rng, MENTION), VOCABULARY[other], rng)
            else:
                text = _pick(rng, CHATTER)
        elif piece.kind == "irrelevant":
            if piece.concept >= 0 and r < 0.3:
                text = _say(UNPLANNED, VOCABULARY[piece.concept], rng)
            elif r < 0.15:
                text = _say(_pick(rng, MENTION), VOCABULARY[_pick(rng, concepts)], rng)
            else:
                text = _pick(rng, CHATTER)
        elif piece.kind == "gap":
            text = _pick(rng, LOST_SIGNAL) if r < 0.6 else _pick(rng, CHATTER)
        elif t < start_of_preview:
            text = opening.pop(0) if opening else _pick(rng, CHATTER)
        elif piece is pieces[-1]:
            text = closing.pop(0) if closing else _pick(rng, CHATTER)
        else:
            text = after.pop(0) if after else _pick(rng, CHATTER)
        seconds = _speech_seconds(text, rng)
        if t + seconds > duration:
            break
        t = emit(text, t, seconds)
    return sorted(sentences + preview_sentences, key=lambda s: s[1])


def _steps_json(concepts: Sequence[int], pieces: Sequence[Piece], sentences) -> list[dict]:
    steps = [{"index": 0, "caption": "Irrelevant", "transcript": IRRELEVANT_DESCRIPTION}]
    clips = [p for p in pieces if p.kind == "preview"]
    for i, (concept, clip) in enumerate(zip(concepts, clips), start=1):
        # the narration spoken during the clip, by the context-window rule (strict overlap, file order)
        spoken = " ".join(text for text, s, e in sentences if s < clip.end and e > clip.start)
        steps.append({"index": i, "caption": VOCABULARY[concept].caption, "transcript": spoken,
                      "animation_start": float(clip.start), "animation_end": float(clip.end)})
    return steps


def _transcript_csv(sentences) -> str:
    out = io.StringIO()
    writer = csv.writer(out)  # CRLF line ends, minimal quoting, like the release's files
    writer.writerow(TRANSCRIPT_COLUMNS)
    for text, start, end in sentences:
        writer.writerow((text, repr(start), repr(end)))
    return out.getvalue()


# --------------------------------------------------------------------------------------------------
# pictures: every shot is a vectorised function of time; frames are rendered in chunks per shot


@dataclass
class Shot:
    start: float
    kind: str  # "view0", "view1", "suit", "preview", "blue", "control", "noise", "earth", "lost"
    concept: int = -1
    gain: float = 1.0
    tint: tuple[float, float, float] = (0.0, 0.0, 0.0)
    shift: tuple[float, float] = (0.0, 0.0)
    seed: int = 0


def _shots(rng: np.random.Generator, pieces: Sequence[Piece]) -> list[Shot]:
    shots = []

    def add(start, kind, concept=-1):
        shots.append(Shot(start, kind, concept, float(rng.uniform(0.8, 1.15)),
                          tuple(float(x) for x in rng.uniform(-0.06, 0.06, 3)),
                          tuple(float(x) for x in rng.uniform(-0.2, 0.2, 2)), int(rng.integers(2**31))))

    for p in pieces:
        if p.kind == "preview":
            add(p.start, "preview", p.concept)
            continue
        t = p.start
        while t < p.end - 1e-6:  # camera cuts every 6-25 s
            if p.kind == "step" or (p.kind == "irrelevant" and p.concept >= 0):
                # the generic helmet/suit view is the same for every step: video alone cannot be perfect
                kind = str(rng.choice(["view0", "view1", "suit"], p=[0.45, 0.35, 0.2]))
            elif p.kind == "irrelevant":
                kind = str(rng.choice(["blue", "control", "noise", "earth"], p=[0.25, 0.4, 0.1, 0.25]))
            elif p.kind == "gap":
                kind = str(rng.choice(["lost", "earth"]))
            else:
                kind = str(rng.choice(["control", "earth", "suit"], p=[0.5, 0.3, 0.2]))
            add(t, kind, p.concept)
            t += rng.uniform(6, 25)
    return shots


def _signature(concept: int, t: np.ndarray, x: np.ndarray, y: np.ndarray, speed_scale: float = 1.0) -> np.ndarray:
    """The concept's moving pattern in [0, 1], shape [n, H, W]."""
    kind = PATTERNS[concept % len(PATTERNS)]
    freq = 2.0 + (concept * 7 % 5) * 0.6
    speed = (0.05 + 0.04 * (concept % 4)) * speed_scale  # cycles per second: slow enough for a 2 fps video
    angle = math.radians(concept * 37 % 180)
    t = t[:, None, None]
    if kind == "stripes":
        return 0.5 + 0.5 * np.sin(2 * np.pi * (freq * (x * math.cos(angle) + y * math.sin(angle)) - speed * t))
    if kind == "checker":
        return (np.sin(2 * np.pi * freq * (x - speed * t)) * np.sin(2 * np.pi * freq * y) > 0).astype(np.float32)
    if kind == "rings":
        r = np.sqrt((x - 0.5) ** 2 + (y - 0.5) ** 2)
        return 0.5 + 0.5 * np.sin(2 * np.pi * (1.5 * freq * r - speed * t))
    if kind == "disc":
        cx = 0.5 + 0.28 * np.cos(2 * np.pi * speed * t)
        cy = 0.5 + 0.28 * np.sin(2 * np.pi * speed * t)
        return np.clip((0.22 - np.sqrt((x - cx) ** 2 + (y - cy) ** 2)) * 25, 0, 1)
    if kind == "dots":
        return (np.sin(2 * np.pi * freq * (x - speed * t)) * np.sin(2 * np.pi * freq * (y - speed * t)) > 0.4
                ).astype(np.float32)
    return 0.5 + 0.5 * np.sin(2 * np.pi * (freq * x + 0.15 * np.sin(2 * np.pi * (2 * y - speed * t))))


def _render(shot: Shot, t: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Frames [n, size, size, 3] in [0, 1] (float32) of one shot at times t (seconds)."""
    grid = (np.arange(size, dtype=np.float32) + 0.5) / size
    x, y = grid[None, None, :], grid[None, :, None]
    n = len(t)
    local = np.random.default_rng(shot.seed)  # per-shot layout, independent of chunking
    noise = 0.05
    if shot.kind in ("view0", "view1", "preview"):
        colour = PALETTE[shot.concept % len(PALETTE)]
        if shot.kind == "view1":  # a second camera: zoomed, shifted, darker, a truss beam across it
            x, y = (x - 0.5) / 1.8 + 0.5 + shot.shift[0], (y - 0.5) / 1.8 + 0.5 + shot.shift[1]
        mask = _signature(shot.concept, t, x, y, 0.5 if shot.kind == "preview" else 1.0)[..., None]
        if shot.kind == "preview":  # the stylised animation: flat render on a light background, framed
            frames = 0.82 * (1 - mask) + colour * mask
            frames[:, :3], frames[:, -3:], frames[:, :, :3], frames[:, :, -3:] = 0.15, 0.15, 0.15, 0.15
            return np.broadcast_to(frames, (n, size, size, 3)).astype(np.float32)
        background = np.array((0.08, 0.08, 0.1) if shot.kind == "view0" else (0.02, 0.03, 0.1), np.float32)
        frames = background * (1 - mask) + colour * mask * (1.0 if shot.kind == "view0" else 0.65)
        if shot.kind == "view1":
            top = int(local.integers(size // 8, size // 2))
            frames[:, top:top + size // 6] = 0.5
    elif shot.kind == "suit":  # a white suit drifting in front of the Earth: the same for every step
        earth = np.broadcast_to(np.stack([0.1 + 0 * y, 0.25 + 0.3 * y, 0.45 + 0.4 * y], -1), (1, size, size, 3))
        cx = 0.5 + shot.shift[0] + 0.05 * np.sin(0.3 * t)[:, None, None]
        suit = np.clip((0.3 - np.sqrt((x - cx) ** 2 / 0.6 + (y - 0.45) ** 2)) * 20, 0, 1)[..., None]
        frames = earth * (1 - suit) + 0.9 * suit
    elif shot.kind == "blue":
        frames = np.empty((n, size, size, 3), np.float32)
        frames[:] = (0.05, 0.12, 0.7)
        for row in local.integers(size // 6, size - size // 6, 3):
            frames[:, row:row + 2, size // 6: size - size // 6] = 0.95
        noise = 0.03
    elif shot.kind == "control":  # mission control: a wall of monitors that flicker
        frames = np.full((n, size, size, 3), 0.15, np.float32)
        frames[:, -size // 5:] = (0.35, 0.25, 0.15)
        cell = size // 5
        for r in range(3):
            for c in range(4):
                level = 0.6 + 0.4 * np.sin(local.uniform(0.5, 2.0) * t + local.uniform(0, 6.3))
                frames[:, r * cell + 2: r * cell + cell, c * cell + 4: c * cell + cell + 2] = \
                    local.uniform(0.2, 1.0, 3).astype(np.float32) * level[:, None, None, None]
    elif shot.kind == "earth":
        clouds = 0.5 + 0.5 * np.sin(2 * np.pi * (3 * x + 2 * np.sin(2 * np.pi * y) - 0.02 * t[:, None, None]))
        frames = np.stack([0.1 + 0.7 * clouds ** 3, 0.3 + 0.6 * clouds ** 3, 0.6 + 0.35 * clouds ** 3], -1)
    elif shot.kind == "noise":
        frames = rng.random((n, size // 2, size // 2, 1), dtype=np.float32).repeat(2, 1).repeat(2, 2).repeat(3, -1)
        noise = 0.0
    elif shot.kind == "lost":
        frames = np.zeros((n, size, size, 3), np.float32)
        noise = 0.1
    else:
        raise ValueError(shot.kind)
    frames = frames * shot.gain + np.asarray(shot.tint, np.float32)
    if noise:
        # coarse (4 x 4 pixel) noise: x264 spends far fewer bytes on it than on per-pixel noise
        coarse = rng.standard_normal((n, size // 4, size // 4, 3), dtype=np.float32) * noise
        frames = frames + coarse.repeat(4, 1).repeat(4, 2)
    return frames


def _write_video(path: Path, shots: Sequence[Shot], duration: float, opts: Options, rng: np.random.Generator):
    import av  # imported here: reading a dataset never needs an encoder

    rate = Fraction(opts.video_fps).limit_denominator(1001)
    # floor(D * fps) + 1 frames: every timestamp in [0, D] has its nearest frame inside the file
    n_frames = math.floor(duration * rate) + 1
    times = np.arange(n_frames, dtype=np.float64) / float(rate)
    starts = np.array([s.start for s in shots])
    owner = np.searchsorted(starts, times, side="right") - 1
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width = stream.height = opts.frame_size
        stream.pix_fmt = "yuv420p"
        stream.codec_context.gop_size = max(1, round(10 * float(rate)))  # a keyframe every 10 s: cheap seeks
        stream.options = {"preset": "ultrafast", "crf": "23"}
        i = 0
        while i < n_frames:
            j = i
            while j < n_frames and owner[j] == owner[i] and j - i < 256:
                j += 1
            frames = _render(shots[owner[i]], times[i:j].astype(np.float32), opts.frame_size, rng)
            pixels = np.clip(frames * 255 + 0.5, 0, 255).astype(np.uint8)
            for k, image in enumerate(pixels, start=i):
                frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
                frame.pts = k  # time base 1/rate: one tick per frame
                container.mux(stream.encode(frame))
            i = j
        container.mux(stream.encode())


# --------------------------------------------------------------------------------------------------
# task files beyond step recognition: intra-video retrieval (1.7) and question answering (1.6)

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
    """Intra-video retrieval samples of one video (BENCHMARKS.md 1.7), grouped by segment pair in time order."""
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
    """"task before/after task" and "when task" questions (BENCHMARKS.md 1.6) on windows of one video."""
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


# --------------------------------------------------------------------------------------------------
# the whole dataset


def _video_ids(seed: int, n: int) -> list[str]:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xDA7E]))
    first, days = date(2010, 1, 1), (date(2024, 12, 31) - date(2010, 1, 1)).days
    return [(first + timedelta(days=int(d))).strftime("%m%d%Y") for d in rng.choice(days, size=n, replace=False)]


def _plan(video_id: str, rng: np.random.Generator, text_rng: np.random.Generator, opts: Options) -> Plan:
    concepts, pieces, duration = _plan_pieces(rng, opts)
    sentences = _transcript(text_rng, concepts, pieces, duration)
    return Plan(video_id, concepts, pieces, duration, _segments(pieces), sentences,
                _steps_json(concepts, pieces, sentences))


def _record(seed: int, opts: Options) -> dict:
    # "spacewalk.synthetic": the record name since version 1 (existing folders keep it), not a module path
    return {"generator": "spacewalk.synthetic", "version": GENERATOR_VERSION, "seed": seed,
            "options": json.loads(json.dumps(dataclasses.asdict(opts)))}


def generate(root: str | Path, seed: int = 0, *, overwrite: bool = False, progress: bool = True,
             **options: Any) -> Path:
    """Write a synthetic dataset in the official layout to `root`; same seed and options, same dataset."""
    from tqdm import tqdm

    opts = Options(**options)
    root = Path(root).absolute()
    if root.exists() and not overwrite:
        raise FileExistsError(f"{root} exists; pass overwrite=True (--overwrite) to replace it")
    # Built beside root and renamed at the end: an interrupted generation never leaves a half dataset.
    with atomic_dir(root, replace=overwrite) as work:
        sizes = {"train": opts.n_train, "val": opts.n_val, "test": opts.n_test}
        ids = _video_ids(seed, sum(sizes.values()))
        splits, i = {}, 0
        for split in SPLITS:
            splits[split] = sorted(ids[i:i + sizes[split]])
            i += sizes[split]
        (work / TRANSCRIPT_DIR).mkdir(parents=True)
        (work / VIDEO_DIR).mkdir(parents=True)
        plans: dict[str, Plan] = {}
        qa_rngs: dict[str, np.random.Generator] = {}
        for index, video_id in enumerate(tqdm(ids, desc="synthetic Spacewalk-18", unit="recording",
                                              disable=not progress)):
            # separate streams, so e.g. a different video option leaves annotations and transcripts as they are
            plan_rng, text_rng, video_rng, qa_rng = (
                np.random.default_rng(s) for s in np.random.SeedSequence([seed, index]).spawn(4))
            plan = plans[video_id] = _plan(video_id, plan_rng, text_rng, opts)
            qa_rngs[video_id] = qa_rng
            write_text(work / TRANSCRIPT_DIR / f"{video_id}.csv", _transcript_csv(plan.sentences),
                       encoding=TRANSCRIPT_ENCODING)
            _write_video(work / VIDEO_DIR / f"{video_id}.mp4", _shots(video_rng, plan.pieces), plan.duration,
                         opts, video_rng)

        write_json(work / ANNOTATION_FILE, {v: [
            {"video_start": s.start, "video_end": s.end, "frame_start": s.frame_start, "frame_end": s.frame_end,
             "label": s.label} for s in plans[v].segments] for v in ids}, indent=4)
        write_json(work / STEPS_FILE, {v: plans[v].steps for v in ids}, indent=4)
        write_json(work / SPLIT_FILE, splits, indent=4)
        for split in SPLITS:
            write_json(work / STEP_RECOGNITION_DIR / f"{split}.json", samples_to_json({
                v: step_samples(plans[v].segments, len(plans[v].steps), opts.samples_per_video)
                for v in splits[split]}), indent=4)
            write_json(work / RETRIEVAL_DIR / f"{split}.json", {
                v: retrieval_samples(plans[v].segments, opts.retrieval_samples_per_video,
                                     np.random.default_rng([RETRIEVAL_SEED, seed, ids.index(v)]))
                for v in splits[split]}, indent=4)
        qa = [q for v in splits["test"]
              for q in questions(plans[v], opts.questions_per_video, opts.qa_window_seconds, qa_rngs[v])]
        for i, q in enumerate(qa):
            q["question_id"] = i
        keys = ("video_id", "question_id", "question", "options", "answer", "video_start", "video_end", "type")
        write_json(work / QUESTION_FILE, [{k: q[k] for k in keys} for q in qa], indent=4)
        write_json(work / RECORD_FILE, _record(seed, opts), indent=4)

        _check(work)
    return root


def _check(root: Path) -> None:
    # Validate with the one reader before installing: a generator bug never becomes a dataset.
    data = Spacewalk18(root)
    for split in SPLITS:
        data.step_samples(split)
        data.retrieval_samples(split)
        for rec in data.split(split):
            rec.transcript  # noqa: B018  (parses and validates the CSV)
    data.questions()


def ensure_dataset(root: str | Path, seed: int = 0, **options: Any) -> Path:
    """The synthetic dataset at `root`, written on first use; an existing root is used as it is."""
    root = Path(root).absolute()
    if not root.exists():
        try:
            return generate(root, seed, **options)
        except FileExistsError:
            if not root.exists():
                raise
            # another process (e.g. a second DDP rank) finished first: the same seed gives the same data
    record = root / RECORD_FILE
    if record.is_file():
        content = {k: v for k, v in options.items() if k != "progress"}  # progress does not change the data
        wanted = _record(seed, Options(**content))
        if load_json(record) != wanted:
            raise DataError(f"holds a synthetic dataset made with other settings ({record}); "
                            "delete it, pick another root, or call generate(..., overwrite=True)", file=root)
    return root


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.benchmarks.spacewalk18.synthetic",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, type=Path, help="where to write the dataset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing root")
    args = parser.parse_args(argv)
    try:
        with user_errors_reported():  # a root holding another dataset, a bad option
            generate(args.root, args.seed, overwrite=args.overwrite)
    except FileExistsError as e:
        parser.exit(1, f"error: {e}\n")


if __name__ == "__main__":
    main()

