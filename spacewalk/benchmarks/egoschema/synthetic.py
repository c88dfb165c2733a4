"""The synthetic EgoSchema: a small set in the release's layout, generated from a seed, answers included.

It is what `data=egoschema` runs on by default, so the EgoSchema commands work before any download:

    questions.json          [{q_uid, google_drive_id, question, "option 0", ..., "option 4"}]
    subset_answers.json     {q_uid: 0-4} for `n_answered` of the questions (the release: 500 of 5031)
    uid_to_ego4d.json       {q_uid: {video_uid, starting_sec, ending_sec}} (made-up Ego4D windows)
    videos/<q_uid>.mp4      short generated clips
    hidden_answers.json     the answers of the other questions (what the server keeps; synthetic only)
    synthetic.json          how it was generated

Each clip is a run of 3-4 shots, each filling the picture with one colour (a moving square on it), of
different lengths. Every question is about those colours (which one lasts longest, which opens or closes
the clip, in what order they come), so the pictures alone determine the answer; the five options are
colours or colour orders, the wrong ones drawn from the clip's own colours where possible.

    python -m spacewalk.benchmarks.egoschema.synthetic --root data/synthetic_egoschema [--seed N] [--overwrite]
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.egoschema.dataset import (
    ANSWERS_FILE,
    N_OPTIONS,
    OPTION_KEYS,
    QUESTIONS_FILE,
    UID_MAP_FILE,
    VIDEO_DIR,
    EgoSchema,
)
from spacewalk.benchmarks.synthetic_command import generator_command
from spacewalk.core.errors import ConfigError
from spacewalk.core.io import atomic_dir, ensure_generated, write_json
from spacewalk.core.settings import from_mapping
from spacewalk.media.h264 import h264_writer

RECORD_FILE = "synthetic.json"
HIDDEN_ANSWERS_FILE = "hidden_answers.json"
GENERATOR = "spacewalk.egoschema_synthetic"
GENERATOR_VERSION = 1

COLOURS = {"red": (220, 30, 30), "green": (30, 180, 60), "blue": (40, 70, 220), "yellow": (235, 220, 40),
           "purple": (140, 50, 170), "orange": (245, 140, 20), "white": (240, 240, 240)}
KINDS = ("longest", "first", "last", "order")


@dataclass(frozen=True)
class Options:
    seed: int = 0
    n_questions: int = 30
    n_answered: int = 20
    seconds: float = 12.0
    fps: float = 4.0
    frame_size: int = 64

    def __post_init__(self):
        if not 0 <= self.n_answered <= self.n_questions or self.n_questions < 1:
            raise ConfigError("need 1 <= n_questions and 0 <= n_answered <= n_questions")
        if self.seconds < 4 or self.fps <= 0 or self.frame_size < 16 or self.frame_size % 2:
            raise ConfigError("seconds >= 4, fps > 0 and an even frame_size >= 16 are required")


@dataclass(frozen=True)
class Clip:
    colours: tuple[str, ...]  # one per shot, in order, all different
    seconds: tuple[float, ...]  # shot lengths

    def longest(self) -> str:
        return self.colours[int(np.argmax(self.seconds))]


def _uuid(rng: np.random.Generator) -> str:
    h = "".join(f"{b:02x}" for b in rng.integers(0, 256, 16))
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _clip(rng: np.random.Generator, total: float) -> Clip:
    n = int(rng.integers(3, 5))
    colours = tuple(str(c) for c in rng.choice(list(COLOURS), n, replace=False))
    # one shot clearly longest (half the clip), the others share the rest unevenly
    weights = rng.uniform(1.0, 2.0, n)
    weights[int(rng.integers(n))] = weights.sum()
    seconds = tuple(float(s) for s in np.round(weights / weights.sum() * total, 2))
    return Clip(colours, seconds)


def _colour_options(right: str, clip: Clip, rng: np.random.Generator) -> tuple[list[str], int]:
    others = [c for c in clip.colours if c != right]
    others += [c for c in rng.permutation(list(COLOURS)) if c not in clip.colours]
    names = [right] + list(others[:N_OPTIONS - 1])
    order = rng.permutation(N_OPTIONS)
    return [names[i] for i in order], int(np.where(order == 0)[0][0])


def _question(kind: str, clip: Clip, rng: np.random.Generator) -> tuple[str, list[str], int]:
    if kind == "order":
        right = clip.colours
        wrong = [p for p in itertools.permutations(clip.colours) if p != right]
        picks = [right] + [wrong[i] for i in rng.choice(len(wrong), N_OPTIONS - 1, replace=False)]
        order = rng.permutation(N_OPTIONS)
        options = [", then ".join(picks[i]).capitalize() + "." for i in order]
        return ("Taking the whole video into account, in what order do the colours that fill c's view appear?",
                options, int(np.where(order == 0)[0][0]))
    right = {"longest": clip.longest(), "first": clip.colours[0], "last": clip.colours[-1]}[kind]
    text = {"longest": "Over the whole video, which colour fills c's view for the longest time?",
            "first": "What colour fills c's view when the video begins?",
            "last": "What colour fills c's view at the end of the video?"}[kind]
    names, answer = _colour_options(right, clip, rng)
    return text, [f"The view is mostly {name}." if kind == "longest" else f"It is {name}." for name in names], answer


def _render(clip: Clip, t: np.ndarray, size: int) -> np.ndarray:
    """(len(t), size, size, 3) uint8: each shot's colour with a dark square circling on it."""
    bounds = np.cumsum(clip.seconds)
    shot = np.minimum(np.searchsorted(bounds, t, side="right"), len(clip.colours) - 1)
    frames = np.empty((len(t), size, size, 3), dtype=np.uint8)
    side = size // 4
    for k, (time, s) in enumerate(zip(t, shot)):
        frames[k] = COLOURS[clip.colours[s]]
        cx = int((size - side) * (0.5 + 0.4 * math.cos(time)))
        cy = int((size - side) * (0.5 + 0.4 * math.sin(time)))
        frames[k, cy:cy + side, cx:cx + side] = 30
    return frames


def _write_video(path: Path, clip: Clip, opts: Options) -> None:
    rate = Fraction(opts.fps).limit_denominator(1001)
    n_frames = math.floor(opts.seconds * rate)
    pixels = _render(clip, np.arange(n_frames) / float(rate), opts.frame_size)
    with h264_writer(path, rate, opts.frame_size, opts.frame_size,
                     options={"preset": "ultrafast", "crf": "18"}) as write:
        write(pixels)


def _record(opts: Options) -> dict:
    return {"generator": GENERATOR, "version": GENERATOR_VERSION, "synthetic": True,
            "options": json.loads(json.dumps(dataclasses.asdict(opts)))}


def generate_egoschema(root: str | Path, options: Options | None = None, *, overwrite: bool = False) -> Path:
    """Write the synthetic set to `root` (built beside it and renamed: never half a set under the name)."""
    opts = options or Options()
    root = Path(root).absolute()
    if root.exists() and not overwrite:
        raise FileExistsError(f"{root} exists; pass overwrite=True (--overwrite) to replace it")
    rng = np.random.default_rng([opts.seed, 11])
    with atomic_dir(root, replace=overwrite) as work:
        (work / VIDEO_DIR).mkdir()
        questions, answers, windows = [], {}, {}
        for i in range(opts.n_questions):
            q_uid = _uuid(rng)
            clip = _clip(rng, opts.seconds)
            text, options, answer = _question(KINDS[i % len(KINDS)], clip, rng)
            drive_id = "".join(rng.choice(list("abcdefghijkLMNOPQ0123_-"), 33))
            questions.append({"q_uid": q_uid, "google_drive_id": drive_id,
                              "question": text, **dict(zip(OPTION_KEYS, options))})
            answers[q_uid] = answer
            start = 60 * int(rng.integers(0, 40))
            windows[q_uid] = {"video_uid": _uuid(rng), "starting_sec": start, "ending_sec": start + 180}
            _write_video(work / VIDEO_DIR / f"{q_uid}.mp4", clip, opts)
        answered = set(rng.choice([q["q_uid"] for q in questions], opts.n_answered, replace=False).tolist())
        write_json(work / QUESTIONS_FILE, questions)
        write_json(work / ANSWERS_FILE, {q: a for q, a in answers.items() if q in answered})
        write_json(work / HIDDEN_ANSWERS_FILE, {q: a for q, a in answers.items() if q not in answered})
        write_json(work / UID_MAP_FILE, windows)
        write_json(work / RECORD_FILE, _record(opts))
        EgoSchema(work).validate()  # a generator bug never becomes a dataset
    return root


def ensure_egoschema(root: str | Path, **fields: Any) -> Path:
    """The synthetic set at `root`: written on first use, rewritten when the options changed; a root that
    this generator did not write is never touched."""
    opts = from_mapping(Options, fields, "data.synthetic")
    return ensure_generated(root, RECORD_FILE, _record(opts),
                            lambda overwrite: generate_egoschema(root, opts, overwrite=overwrite),
                            "a synthetic EgoSchema")


def main(argv: Sequence[str] | None = None) -> None:
    generator_command("python -m spacewalk.benchmarks.egoschema.synthetic", __doc__.split("\n")[0],
                      lambda root, seed, overwrite: generate_egoschema(root, Options(seed=seed), overwrite=overwrite),
                      argv)


if __name__ == "__main__":
    main()
