"""What is said during a recording: the transcript (narration of each step, chatter, mentions of other
steps, the preview's plan), spoken the way ASR writes it, and the steps' captions and narrations (steps.json)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import (
    IRRELEVANT_DESCRIPTION,
    TRANSCRIPT_COLUMNS,
)
from spacewalk.benchmarks.spacewalk18.synthetic.plan import Piece
from spacewalk.benchmarks.spacewalk18.synthetic.vocabulary import (
    ACTORS,
    LOCATIONS,
    OBJECTS,
    VERB_ING,
    VOCABULARY,
    Concept,
)

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



def transcript_sentences(rng: np.random.Generator, concepts: Sequence[int], pieces: Sequence[Piece],
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


def steps_json(concepts: Sequence[int], pieces: Sequence[Piece], sentences) -> list[dict]:
    steps = [{"index": 0, "caption": "Irrelevant", "transcript": IRRELEVANT_DESCRIPTION}]
    clips = [p for p in pieces if p.kind == "preview"]
    for i, (concept, clip) in enumerate(zip(concepts, clips), start=1):
        # the narration spoken during the clip, by the context-window rule (strict overlap, file order)
        spoken = " ".join(text for text, s, e in sentences if s < clip.end and e > clip.start)
        steps.append({"index": i, "caption": VOCABULARY[concept].caption, "transcript": spoken,
                      "animation_start": float(clip.start), "animation_end": float(clip.end)})
    return steps


def transcript_csv(sentences) -> str:
    out = io.StringIO()
    writer = csv.writer(out)  # CRLF line ends, minimal quoting, like the release's files
    writer.writerow(TRANSCRIPT_COLUMNS)
    for text, start, end in sentences:
        writer.writerow((text, repr(start), repr(end)))
    return out.getvalue()
