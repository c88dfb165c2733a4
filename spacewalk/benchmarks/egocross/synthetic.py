"""The synthetic EgoCross: a small testbed in the release's layout, generated from a seed, answers included.

It is what `data=egocross` runs on by default, so the EgoCross commands work before any download:

    datasets/egocross_testbed_imgs.json     the questions, exactly as the release writes them (no answers)
    egocross_testbed/<dataset>/generated/<clip>/frames/<type>_q<n>/frame_00000.jpg   the frames (0.5 fps;
                                            CholecTrack20 also has .png clips, which the authors sample at 1 fps)
    answers.json                            {id: {correct_option_letter, answer_text, detailed_answer}}
    synthetic.json                          how it was generated

Every source dataset of the release (so all four domains) gets questions of all four categories, about
coloured discs on a plain background: how many distinct discs there are (Counting, "object counting"),
which colour the one disc has (Identification, "dominant held-object identification"), in which quarter
of the picture a disc sits (Localization, "object spatial localization"), and where a disc moving steadily
across the frames goes next (Prediction, "next direction prediction"). The frames alone determine each
answer; four options "A: ..." to "D: ...", the right one placed at random.

    python -m spacewalk.benchmarks.egocross.synthetic --root data/synthetic_egocross [--seed N] [--overwrite]
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.egocross.dataset import DOMAINS, TESTBED_FILE, EgoCross
from spacewalk.benchmarks.synthetic_command import generator_command
from spacewalk.core.errors import ConfigError
from spacewalk.core.io import atomic_dir, atomic_path, ensure_generated, write_json
from spacewalk.core.settings import from_mapping

RECORD_FILE = "synthetic.json"
ANSWERS_FILE = "answers.json"
GENERATOR = "spacewalk.egocross_synthetic"
GENERATOR_VERSION = 1
LETTERS = ("A", "B", "C", "D")
COLOURS = {"red": (220, 30, 30), "green": (30, 180, 60), "blue": (40, 70, 220), "yellow": (235, 220, 40),
           "purple": (140, 50, 170), "white": (245, 245, 245)}
BACKGROUND = (70, 70, 70)
QUARTERS = {"top-left": (0, 0), "top-right": (0, 1), "bottom-left": (1, 0), "bottom-right": (1, 1)}
DIRECTIONS = {"left": (0, -1), "right": (0, 1), "up": (-1, 0), "down": (1, 0)}
# category -> (question_type, short code used in frame folder names like the release's "oc_q1")
TYPES = {"Counting": ("object counting", "oc"), "Identification": ("dominant held-object identification", "hi"),
         "Localization": ("object spatial localization", "sl"), "Prediction": ("next direction prediction", "nd")}


@dataclass(frozen=True)
class Options:
    seed: int = 0
    per_category: int = 3  # questions of each category in each source dataset
    frames: tuple[int, int] = (4, 8)  # frames per clip, inclusive range
    frame_size: int = 48

    def __post_init__(self):
        object.__setattr__(self, "frames", tuple(self.frames))
        if self.per_category < 1 or not 2 <= self.frames[0] <= self.frames[1] or self.frame_size < 32:
            raise ConfigError("per_category >= 1, 2 <= frames[0] <= frames[1] and frame_size >= 32 are required")


def _disc(image: np.ndarray, cy: float, cx: float, r: float, colour) -> None:
    y, x = np.mgrid[:image.shape[0], :image.shape[1]]
    image[(y - cy) ** 2 + (x - cx) ** 2 <= r * r] = colour


def _question(category: str, n_frames: int, size: int, rng: np.random.Generator):
    """(question, options, answer index, answer text, detailed answer, frames)."""
    frames = np.empty((n_frames, size, size, 3), dtype=np.uint8)
    frames[:] = BACKGROUND
    r = size / 10
    names = list(COLOURS)
    if category == "Counting":
        k = int(rng.integers(1, 5))
        colours = rng.choice(names, k, replace=False)
        spots = rng.choice(4, k, replace=False)  # one disc per quarter, jittering a little from frame to frame
        for f in range(n_frames):
            for colour, spot in zip(colours, spots):
                cy, cx = (spot // 2 + 0.5) * size / 2, (spot % 2 + 0.5) * size / 2
                _disc(frames[f], cy + rng.uniform(-2, 2), cx + rng.uniform(-2, 2), r, COLOURS[str(colour)])
        values, right = ["1", "2", "3", "4"], str(k)
        question = "How many distinct objects are visible in the video segment?"
        detailed = f"{k} distinct discs ({', '.join(map(str, colours))}) stay in view in every frame."
    elif category == "Identification":
        colour = str(rng.choice(names))
        for f in range(n_frames):
            _disc(frames[f], size / 2 + rng.uniform(-6, 6), size / 2 + rng.uniform(-6, 6), 1.5 * r, COLOURS[colour])
        right = colour
        values = [colour] + [str(c) for c in rng.choice([c for c in names if c != colour], 3, replace=False)]
        question = "What is the colour of the object that stays in view throughout the video?"
        detailed = f"A single {colour} disc is visible in every frame."
    elif category == "Localization":
        colour = str(rng.choice(names))
        right = str(rng.choice(list(QUARTERS)))
        qy, qx = QUARTERS[right]
        for f in range(n_frames):
            _disc(frames[f], (qy + 0.5) * size / 2 + rng.uniform(-3, 3), (qx + 0.5) * size / 2 + rng.uniform(-3, 3),
                  r, COLOURS[colour])
        values = list(QUARTERS)
        question = f"In which part of the frame does the {colour} object appear?"
        detailed = f"The {colour} disc stays in the {right} quarter of the picture."
    else:
        colour = str(rng.choice(names))
        right = str(rng.choice(list(DIRECTIONS)))
        dy, dx = DIRECTIONS[right]
        step = (size - 4 * r) / max(n_frames, 1)
        y0 = size / 2 - dy * step * n_frames / 2
        x0 = size / 2 - dx * step * n_frames / 2
        for f in range(n_frames):
            _disc(frames[f], y0 + dy * step * f, x0 + dx * step * f, r, COLOURS[colour])
        values = list(DIRECTIONS)
        question = f"Based on its motion so far, in which direction will the {colour} object move next?"
        detailed = f"The {colour} disc moves steadily {right} from frame to frame, so it keeps moving {right}."
    order = rng.permutation(4)
    options = [values[i] for i in order]
    return question, options, options.index(right), right, detailed, frames


def _save(path: Path, image: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        Image.fromarray(image).save(tmp, format="PNG" if path.suffix == ".png" else "JPEG", quality=95)


def _record(opts: Options) -> dict:
    return {"generator": GENERATOR, "version": GENERATOR_VERSION, "synthetic": True,
            "options": json.loads(json.dumps(dataclasses.asdict(opts)))}


def generate_egocross(root: str | Path, options: Options | None = None, *, overwrite: bool = False) -> Path:
    opts = options or Options()
    root = Path(root).absolute()
    if root.exists() and not overwrite:
        raise FileExistsError(f"{root} exists; pass overwrite=True (--overwrite) to replace it")
    rng = np.random.default_rng([opts.seed, 12])
    with atomic_dir(root, replace=overwrite) as work:
        rows, answers, qid = [], {}, 0
        for dataset in DOMAINS:
            fps = 25.0 if dataset in ("CholecTrack20", "EgoSurgery") else 30.0
            for category, (question_type, code) in TYPES.items():
                for n in range(1, opts.per_category + 1):
                    qid += 1
                    n_frames = int(rng.integers(opts.frames[0], opts.frames[1] + 1))
                    question, values, answer, text, detailed, frames = _question(category, n_frames,
                                                                                 opts.frame_size, rng)
                    suffix = ".png" if dataset == "CholecTrack20" and n % 2 == 0 else ".jpg"
                    folder = f"/egocross_testbed/{dataset}/generated/clip{qid:03d}/frames/{code}_q{n}"
                    paths = [f"{folder}/frame_{i:05d}{suffix}" for i in range(n_frames)]
                    for path, image in zip(paths, frames):
                        _save(work / path.lstrip("/"), image)
                    rows.append({"id": qid, "dataset": dataset, "primary_category": category,
                                 "question_type": question_type, "question_text": question,
                                 "options": [f"{LETTERS[i]}: {v}" for i, v in enumerate(values)],
                                 "original_video_fps": fps, "video_path": paths})
                    answers[str(qid)] = {"correct_option_letter": LETTERS[answer], "answer_text": text,
                                         "detailed_answer": detailed}
        write_json(work / TESTBED_FILE, rows)
        write_json(work / ANSWERS_FILE, answers)
        write_json(work / RECORD_FILE, _record(opts))
        EgoCross(work, answers=work / ANSWERS_FILE)  # a generator bug never becomes a dataset
    return root


def ensure_egocross(root: str | Path, **fields: Any) -> Path:
    """The synthetic testbed at `root`: written on first use, rewritten when the options changed; a root
    that this generator did not write is never touched."""
    opts = from_mapping(Options, fields, "data.synthetic")
    return ensure_generated(root, RECORD_FILE, _record(opts),
                            lambda overwrite: generate_egocross(root, opts, overwrite=overwrite),
                            "a synthetic EgoCross")


def main(argv: Sequence[str] | None = None) -> None:
    generator_command("python -m spacewalk.benchmarks.egocross.synthetic", __doc__.split("\n")[0],
                      lambda root, seed, overwrite: generate_egocross(root, Options(seed=seed), overwrite=overwrite),
                      argv)


if __name__ == "__main__":
    main()
