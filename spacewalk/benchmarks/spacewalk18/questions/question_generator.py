r"""Spacewalk-18 video QA questions from the step annotations, for any recordings (the benchmark's question
templates, App. A.4.2; docs/spacewalk18.md, Video question answering), in the official format of
tasks/question_answering/test.json.

    python -m spacewalk.benchmarks.spacewalk18.questions.question_generator [--root R] --split val --out FILE \
        [--seed 0] [--before-after 20] [--when 11] [--order 10] [--absent-share 0] [--window SECONDS]

Without --root: the synthetic Spacewalk-18 at $SPACEWALK_DATA_DIR/synthetic_spacewalk18 (data/ by default), written
on first use, as train.py's default. The clip length is the root's own unless --window says otherwise: one hour
as in the release, a synthetic root's `qa_window_seconds` (600 s on its 15-25 minute recordings).

The QA task has only a test split; this gives val (and train) recordings questions of their own, scored by
`python -m spacewalk.score --task question_answering --questions FILE` and asked by
`python evaluate.py data=spacewalk18_qa data.questions=FILE`.

What the release's 376 test questions show, and what is followed here (measured on the file with the
release's annotations):
- every question has 4 options and a one-hour clip (video_end - video_start = 3600 s); the paper says the
  clip starts at a segment start (after the authors' label-offset fix none of the file's starts is one any
  more); here: a segment start drawn uniformly among those whose hour fits in the recording;
- "task before/after task": "Which of the following tasks happens {before|after} <caption>?" (half each, 60 /
  60); the answer is a step of the clip all of whose clip segments end before the named step's first clip
  segment starts (or start after its last one ends) (103 of 120 hold with today's annotations); the 3
  distractors are preferably steps of the clip that are wrong answers, else steps of the recording outside
  the clip (54 % and 46 % of the file's 360 distractors);
- "when task": "In which part of the video does the task that <caption> happen?", the options the four fixed
  texts in a random order; the named step's clip segments all lie in one third (66 of 67 hold); the answer is
  never "The task does not happen in the video" in the file (0 of 67), so `absent_share` (the share of when
  questions about a step outside the clip) defaults to 0;
- "task order": "In which order do the tasks happen in the video?", options "(1) A.(2) B.(3) C." over three
  steps of the clip, the answer ordered by first occurrence in the clip (50 of 57 hold), the 3 distractors
  drawn uniformly from the other 5 orders (each drawn 29 to 38 times in the file);
- captions are used verbatim (a trailing space stays: '... "upper triangle" ?' as in the file), the answer's
  position is uniform (the file's per-type counts per position are near even), question ids run in file
  order, the questions grouped by type as the file groups them.
Not generated: "task before/at/after location" (105 test questions: "... while the astronaut is at the P6?"):
its step -> location annotation is not in the release (steps.json has captions and animation times only;
some captions name a place, "move to P6", most do not), so the release does not allow it; and the 27
hand-written questions. Counts per recording default to the test file's means (120 / 6, 67 / 6, 57 / 6).

Deterministic: the same root, recordings, counts and seed give the same file (each recording draws from its
own generator seeded by (seed, video id), so adding a recording does not change another's questions).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import SPLITS, Recording
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.io import load_json, write_json

BEFORE_AFTER, WHEN, ORDER = "task before/after task", "when task", "task order"
TYPES = (BEFORE_AFTER, WHEN, ORDER)
THIRDS = ("The first third of the video", "The middle third of the video", "The last third of the video")
ABSENT = "The task does not happen in the video"
WHEN_OPTIONS = (*THIRDS, ABSENT)
BEFORE_AFTER_TEXT = "Which of the following tasks happens {relation} {caption}?"
WHEN_TEXT = "In which part of the video does the task that {caption} happen?"
ORDER_TEXT = "In which order do the tasks happen in the video?"
WINDOW_SECONDS = 3600.0
# per recording, the test file's means: 120, 67 and 57 questions over its 6 recordings
DEFAULT_COUNTS = {BEFORE_AFTER: 20, WHEN: 11, ORDER: 10}
KEYS = ("video_id", "question_id", "question", "options", "answer", "video_start", "video_end", "type")


def order_option(captions: Sequence[str]) -> str:
    """"(1) A.(2) B.(3) C." as the file writes an order."""
    return "".join(f"({i}) {c}." for i, c in enumerate(captions, start=1))


@dataclass(frozen=True)
class Clip:
    """A recording's steps inside [start, end): each step's clip segments (clipped to the clip), in time order."""

    start: float
    end: float
    spans: Mapping[int, tuple[tuple[float, float], ...]]

    @classmethod
    def of(cls, recording: Recording, start: float, end: float) -> Clip:
        """Keyed by task (`task_labels`): steps that share a caption are one task to a question's reader."""
        task = task_labels(recording)
        spans: dict[int, list[tuple[float, float]]] = {}
        for s in recording.segments:
            if s.label > 0 and s.start < end and s.end > start:
                spans.setdefault(task[s.label], []).append((max(s.start, start), min(s.end, end)))
        return cls(start, end, {k: tuple(v) for k, v in spans.items()})

    def first(self, step: int) -> float:
        return self.spans[step][0][0]

    def last(self, step: int) -> float:
        return self.spans[step][-1][1]

    def third(self, step: int) -> int | None:
        """The third of the clip that holds all of the step's clip segments, None when they touch two."""
        length = self.end - self.start
        touched = {min(2, int((a - self.start) / length * 3)) for a, _ in self.spans[step]} | \
                  {min(2, int((b - 1e-6 - self.start) / length * 3)) for _, b in self.spans[step]}
        return touched.pop() if len(touched) == 1 else None


def task_labels(recording: Recording) -> list[int]:
    """label -> the task it belongs to: the first label with the same caption. Some step lists repeat a caption
    (10 of the 18 recordings, e.g. 'EV1 reposition foot restraint' twice in 02282021), and a question names a
    task by its caption, so such steps are one task (their segments together), asked about once."""
    first: dict[str, int] = {}
    return [first.setdefault(s.caption, s.index) for s in recording.steps]


def _pick(rng: np.random.Generator, values: Sequence):
    return values[int(rng.integers(len(values)))]


def _shuffled(rng: np.random.Generator, options: Sequence[str], correct: str) -> tuple[list[str], int]:
    options = [options[int(i)] for i in rng.permutation(len(options))]
    return options, options.index(correct)


def before_after(rng: np.random.Generator, clip: Clip, captions: Sequence[str]) -> tuple | None:
    """(key, question, options, answer) or None when the drawn step has no right answer or too few wrong ones."""
    inside = sorted(clip.spans)
    step = _pick(rng, inside)
    relation = "before" if rng.random() < 0.5 else "after"
    if relation == "before":  # all of its clip segments before all of the named step's
        right = [i for i in inside if i != step and clip.last(i) <= clip.first(step)]
    else:
        right = [i for i in inside if i != step and clip.first(i) >= clip.last(step)]
    if not right:
        return None
    wrong = [i for i in inside if i != step and i not in right]
    outside = [i for i in _tasks(captions) if i not in clip.spans]
    distractors = [int(i) for i in rng.permutation(wrong)][:3]
    distractors += [int(i) for i in rng.permutation(outside)][:3 - len(distractors)]
    if len(distractors) < 3:
        return None
    answer = _pick(rng, right)
    options, index = _shuffled(rng, [captions[i] for i in (answer, *distractors)], captions[answer])
    key = (BEFORE_AFTER, clip.start, step, relation)
    return key, BEFORE_AFTER_TEXT.format(relation=relation, caption=captions[step]), options, index


def _tasks(captions: Sequence[str]) -> list[int]:
    """The tasks of a step list (labels 1..K, one per distinct caption)."""
    first: dict[str, int] = {}
    return [i for i in range(1, len(captions)) if first.setdefault(captions[i], i) == i]


def when(rng: np.random.Generator, clip: Clip, captions: Sequence[str], absent_share: float) -> tuple | None:
    outside = [i for i in _tasks(captions) if i not in clip.spans]
    if outside and rng.random() < absent_share:
        step, correct = _pick(rng, outside), ABSENT
    else:
        step = _pick(rng, sorted(clip.spans))
        third = clip.third(step)
        if third is None:  # spans two thirds: no single right answer
            return None
        correct = THIRDS[third]
    options, index = _shuffled(rng, WHEN_OPTIONS, correct)
    return (WHEN, clip.start, step), WHEN_TEXT.format(caption=captions[step]), options, index


def order(rng: np.random.Generator, clip: Clip, captions: Sequence[str]) -> tuple | None:
    inside = sorted(clip.spans)
    if len(inside) < 3:
        return None
    steps = sorted((int(i) for i in rng.choice(inside, size=3, replace=False)), key=clip.first)
    if len({clip.first(i) for i in steps}) < 3:
        return None
    others = [p for p in itertools.permutations(range(3)) if p != (0, 1, 2)]
    chosen = [others[int(i)] for i in rng.choice(len(others), size=3, replace=False)]
    texts = [order_option([captions[steps[j]] for j in p]) for p in [(0, 1, 2), *chosen]]
    options, index = _shuffled(rng, texts, texts[0])
    return (ORDER, clip.start, tuple(steps)), ORDER_TEXT, options, index


def recording_seed(seed: int, video_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{video_id}".encode()).digest()[:8], "little")


def recording_questions(recording: Recording, counts: Mapping[str, int], seed: int = 0,
                        window: float = WINDOW_SECONDS, absent_share: float = 0.0,
                        tries_per_question: int = 200) -> dict[str, list[dict]]:
    """Up to counts[type] questions of each type on one recording (fewer when its annotations do not allow
    that many distinct ones), without question_id. A recording shorter than the window gets none."""
    rng = np.random.default_rng(recording_seed(seed, recording.video_id))
    captions = [s.caption for s in recording.steps]  # index = label; 0 (Irrelevant) is never asked about
    starts = [s.start for s in recording.segments if s.label >= 0 and s.start + window <= recording.duration + 1e-6]
    out: dict[str, list[dict]] = {t: [] for t in TYPES}
    if not starts:
        return out
    for qtype in TYPES:
        seen = set()
        for _ in range(tries_per_question * counts.get(qtype, 0)):
            if len(out[qtype]) == counts.get(qtype, 0):
                break
            start = _pick(rng, starts)
            clip = Clip.of(recording, start, start + window)
            if not clip.spans:
                continue
            made = (before_after(rng, clip, captions) if qtype == BEFORE_AFTER else
                    when(rng, clip, captions, absent_share) if qtype == WHEN else order(rng, clip, captions))
            if made is None or made[0] in seen:
                continue
            key, text, options, answer = made
            seen.add(key)
            out[qtype].append({"video_id": recording.video_id, "question": text, "options": options,
                               "answer": answer, "video_start": float(start), "video_end": float(start + window),
                               "type": qtype})
    return out


def generate(recordings: Sequence[Recording], counts: Mapping[str, int] | None = None, seed: int = 0,
             window: float = WINDOW_SECONDS, absent_share: float = 0.0) -> list[dict]:
    """The questions of every recording in the official format, grouped by type (the file's order: before/after,
    when, order), recordings in the given order within a type, question ids 0.. in that order."""
    counts = dict(DEFAULT_COUNTS if counts is None else counts)
    unknown = set(counts) - set(TYPES)
    if unknown:
        raise ConfigError(f"unknown question types {sorted(unknown)}; the generator writes {list(TYPES)}")
    if any(not isinstance(n, int) or n < 0 for n in counts.values()):
        raise ConfigError(f"question counts must be whole numbers of at least 0, got {counts}")
    if not window > 0:
        raise ConfigError(f"window must be positive, got {window}")
    if not 0 <= absent_share <= 1:
        raise ConfigError(f"absent_share must be in [0, 1], got {absent_share}")
    per_recording = [recording_questions(r, counts, seed, window, absent_share) for r in recordings]
    questions = [q for qtype in TYPES for made in per_recording for q in made[qtype]]
    return [{k: (i if k == "question_id" else q[k]) for k in KEYS} for i, q in enumerate(questions)]


def root_window(root: Path) -> float:
    """The QA clip length of a dataset root: a synthetic root's own (its generator's qa_window_seconds, in the
    record it writes beside the official files), else the release's hour."""
    from spacewalk.benchmarks.spacewalk18.synthetic.generate import RECORD_FILE

    record = Path(root) / RECORD_FILE
    if record.is_file():
        return float(load_json(record).get("options", {}).get("qa_window_seconds", WINDOW_SECONDS))
    return WINDOW_SECONDS


def main(argv: list[str] | None = None) -> int:
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
    from spacewalk.core.arguments import count, output_file
    from spacewalk.core.command_errors import user_errors_reported

    parser = argparse.ArgumentParser(prog="python -m spacewalk.benchmarks.spacewalk18.questions.question_generator",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=None,
                        help="dataset root in the official layout (default: the synthetic Spacewalk-18 at "
                             "$SPACEWALK_DATA_DIR/synthetic_spacewalk18, data/ by default, written on first use)")
    parser.add_argument("--split", required=True, choices=SPLITS, help="whose recordings get questions")
    parser.add_argument("--out", required=True, type=output_file, help="JSON file to write (the official QA format)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--before-after", type=count, default=DEFAULT_COUNTS[BEFORE_AFTER],
                        help="'task before/after task' questions per recording (default: the test file's mean)")
    parser.add_argument("--when", type=count, default=DEFAULT_COUNTS[WHEN], help="'when task' per recording")
    parser.add_argument("--order", type=count, default=DEFAULT_COUNTS[ORDER], help="'task order' per recording")
    parser.add_argument("--absent-share", type=float, default=0.0,
                        help="share of 'when task' questions whose step is outside the clip (the file: 0)")
    parser.add_argument("--window", type=float, default=None,
                        help="clip length in seconds (default: the root's own: 3600 as the release, a synthetic "
                             "root's qa_window_seconds)")
    args = parser.parse_args(argv)
    with user_errors_reported():
        synthetic_root = Path(os.environ.get("SPACEWALK_DATA_DIR", "data")) / "synthetic_spacewalk18"
        dataset = open_spacewalk18(args.root, synthetic_root)
        window = args.window if args.window is not None else root_window(dataset.root)
        recordings = dataset.split(args.split)
        questions = generate(recordings, {BEFORE_AFTER: args.before_after, WHEN: args.when, ORDER: args.order},
                             args.seed, window, args.absent_share)
        if not questions:
            raise DataError(f"no question could be made for the {args.split} recordings (shorter than the "
                            f"{window:g} s window, or too few annotated steps)", file=dataset.root)
        write_json(args.out, questions, indent=4)
    counts = {t: sum(q["type"] == t for q in questions) for t in TYPES}
    print(f"wrote {len(questions)} questions ({', '.join(f'{t}: {n}' for t, n in counts.items())}) on "
          f"{len(recordings)} recordings to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
