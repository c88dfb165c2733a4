"""The synthetic HiREST's subtitles: what the person says, Whisper-like segments over the video's timeline."""

from __future__ import annotations

import math

import numpy as np

from spacewalk.benchmarks.hirest.synthetic.video_plan import VideoPlan
from spacewalk.benchmarks.hirest.synthetic.vocabulary import ACTION_SAY, pick

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


def _quantise(t: float) -> float:
    return round(round(t * 50) / 50, 2)  # Whisper's timestamps are multiples of 20 ms


def plan_sentences(plan: VideoPlan, rng: np.random.Generator) -> None:
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
        lines = [pick(rng, INTRO[:3]), f"Today I'm going to show you how to {task.query.lower()}."]
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
            say = pick(rng, ACTION_SAY[k.action]).format(**fill)
            t = pause(speak(t, _sentence(pick(rng, ANNOUNCE).format(say=say), rng), limit))
        while t < limit - 1.5:
            r = rng.random()
            if r < 0.55:
                text = pick(rng, DURING).format(**fill)
            elif r < 0.8:
                text = "Now " + pick(rng, ACTION_SAY[k.action]).format(**fill) + "."
            else:
                text = pick(rng, ASIDE)
            t = pause(speak(t, _sentence(text, rng), limit))
    last = plan.shown[-1].end
    if last < math.floor(plan.duration):
        t = max(t, last + rng.uniform(0.0, 1.0))
        for line in [OUTRO[0], OUTRO[1], *(OUTRO[i] for i in rng.permutation(len(OUTRO) - 2)[:3] + 2)]:
            t = pause(speak(t, _sentence(line.format(thing=task.thing), rng), end_of_video))
    if not out:  # a very short video: one line at least
        out.append((0.0, _quantise(min(2.0, end_of_video)), "Okay."))
    plan.sentences = out

