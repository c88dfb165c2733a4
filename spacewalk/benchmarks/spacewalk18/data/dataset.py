"""The Spacewalk-18 release layout (docs/spacewalk18.md, Release layout) read into typed, validated objects.

One reader for every dataset root in the official layout: the real release, the synthetic default,
and a user's own recordings. Everything is validated on load; a problem raises a DataError that names
the file, the video id (or question id) and the field. Nothing is silently dropped or repaired.
"""

from __future__ import annotations

import bisect
import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.fields import as_dict as _as_dict
from spacewalk.core.fields import as_list as _as_list
from spacewalk.core.fields import get as _get
from spacewalk.core.fields import integer as _integer
from spacewalk.core.fields import number as _number
from spacewalk.core.io import load_json

FPS = 29.97
# The text of class 0 ("Irrelevant"), as the authors wrote it.
IRRELEVANT_DESCRIPTION = (
    "The mission control center, noisy shots (e.g. blue screen), or tasks not planned for the spacewalk."
)
NOT_ANNOTATED = -1
SPLITS = ("train", "val", "test")
TRANSCRIPT_ENCODING = "cp1252"
TRANSCRIPT_COLUMNS = ("Sentence", "Global start", "Global end")

ANNOTATION_FILE = "data/annotation.json"
STEPS_FILE = "data/steps.json"
TRANSCRIPT_DIR = "data/transcripts"
VIDEO_DIR = "data/videos"
SPLIT_FILE = "tasks/split.json"
STEP_RECOGNITION_DIR = "tasks/step_recognition"
QUESTION_FILE = "tasks/question_answering/test.json"
RETRIEVAL_DIR = "tasks/intra-video_retrieval"


def frame_of(seconds: float) -> int:
    """The official seconds -> frame rule: round(seconds * 29.97)."""
    return int(round(seconds * FPS))


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    frame_start: int  # half-open [frame_start, frame_end)
    frame_end: int
    label: int  # a step index, or -1 (not annotated)


@dataclass(frozen=True)
class Step:
    index: int
    caption: str
    transcript: str  # narration spoken during the animation clip (may be empty)
    animation_start: float | None  # None for step 0 (Irrelevant), which has no animation
    animation_end: float | None


@dataclass(frozen=True)
class Sentence:
    text: str
    start: float
    end: float


@dataclass(frozen=True)
class StepSample:
    id: int
    timestamp: float
    frame_index: int
    label: int


@dataclass(frozen=True)
class Question:
    video_id: str
    question_id: int
    question: str
    options: tuple[str, ...]
    answer: int
    video_start: float
    video_end: float
    type: str  # "miscellaneous" for the hand-written questions that have no type in the file


@dataclass(frozen=True)
class RetrievalSample:
    id: int
    query_frame_index: int
    candidate_frame_indices: tuple[int, int]
    label: int  # which candidate (0 or 1) comes from the query's step


# --------------------------------------------------------------------------------------------------
# parsers, one per file kind; each validates what it reads


def parse_segments(raw: Any, num_classes: int, file: Path, video_id: str) -> tuple[Segment, ...]:
    """Segments of one video: contiguous, non-overlapping, labels in -1..K, -1 at both ends."""
    raw = _as_list(raw, file, video_id, "segments")
    if not raw:
        raise DataError("no segments", file=file, item=video_id)
    segments = []
    for i, s in enumerate(raw):
        where = f"{video_id} segment {i}"
        seg = Segment(
            start=_number(s, "video_start", file, where),
            end=_number(s, "video_end", file, where),
            frame_start=_integer(s, "frame_start", file, where),
            frame_end=_integer(s, "frame_end", file, where),
            label=_integer(s, "label", file, where),
        )
        if not NOT_ANNOTATED <= seg.label < num_classes:
            raise DataError(f"label {seg.label} outside -1..{num_classes - 1} (steps.json lists "
                            f"{num_classes} steps for this video)", file=file, item=where, field="label")
        if seg.frame_end <= seg.frame_start or seg.end <= seg.start:
            raise DataError(f"empty or reversed segment [{seg.start}, {seg.end}] s / frames "
                            f"[{seg.frame_start}, {seg.frame_end})", file=file, item=where, field="video_end")
        for key, sec, frame in (("frame_start", seg.start, seg.frame_start), ("frame_end", seg.end, seg.frame_end)):
            if abs(frame - frame_of(sec)) > 1:
                raise DataError(f"{frame} is not round({sec} * {FPS}) = {frame_of(sec)}", file=file,
                                item=where, field=key)
        if i == 0:
            if seg.frame_start != 0 or seg.start != 0:
                raise DataError("the first segment must start at 0", file=file, item=where, field="frame_start")
        else:
            prev = segments[-1]
            if seg.frame_start != prev.frame_end or abs(seg.start - prev.end) > 1e-6:
                kind = "overlaps" if seg.frame_start < prev.frame_end else "leaves a gap after"
                raise DataError(f"segment {kind} the previous one (previous ends at frame {prev.frame_end}, "
                                f"{prev.end} s; this starts at frame {seg.frame_start}, {seg.start} s): "
                                "segments must be contiguous", file=file, item=where, field="frame_start")
            if seg.label == prev.label:
                raise DataError(f"same label {seg.label} as the previous segment (adjacent segments never "
                                "share a label)", file=file, item=where, field="label")
        segments.append(seg)
    for end in (0, len(segments) - 1):
        if segments[end].label != NOT_ANNOTATED:
            raise DataError(f"the first and last segments must be -1 (not annotated), got {segments[end].label}",
                            file=file, item=f"{video_id} segment {end}", field="label")
    return tuple(segments)


def parse_steps(raw: Any, file: Path, video_id: str) -> tuple[Step, ...]:
    raw = _as_list(raw, file, video_id, "steps")
    if len(raw) < 2:
        raise DataError(f"needs Irrelevant plus at least one step, got {len(raw)}", file=file, item=video_id)
    steps = []
    for i, s in enumerate(raw):
        where = f"{video_id} step {i}"
        index = _integer(s, "index", file, where)
        if index != i:
            raise DataError(f"index {index} at position {i}: steps must be listed in index order",
                            file=file, item=where, field="index")
        caption = _get(s, "caption", str, file, where)
        transcript = _get(s, "transcript", str, file, where)
        if i == 0:
            steps.append(Step(0, caption, transcript, None, None))
            continue
        start, end = _number(s, "animation_start", file, where), _number(s, "animation_end", file, where)
        if not 0 <= start <= end:
            raise DataError(f"animation [{start}, {end}] is not an interval of the recording", file=file,
                            item=where, field="animation_end")
        steps.append(Step(index, caption, transcript, start, end))
    return tuple(steps)


def load_transcript(path: Path, video_id: str, duration: float | None = None) -> tuple[Sentence, ...]:
    """ASR sentences of one recording (CSV, cp1252, columns Sentence, Global start, Global end)."""
    if not path.is_file():
        raise DataError("transcript file not found", file=path, item=video_id)
    try:
        with open(path, encoding=TRANSCRIPT_ENCODING, newline="") as f:
            rows = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error) as e:
        raise DataError(f"unreadable CSV ({e})", file=path, item=video_id) from e
    if not rows or tuple(c.strip() for c in rows[0]) != TRANSCRIPT_COLUMNS:
        raise DataError(f"header must be {','.join(TRANSCRIPT_COLUMNS)}, got {rows[0] if rows else 'nothing'}",
                        file=path, item=video_id)
    sentences = []
    for line, row in enumerate(rows[1:], start=2):
        where = f"{video_id} line {line}"
        if len(row) != 3:
            raise DataError(f"expected 3 columns, got {len(row)}: {row!r}", file=path, item=where)
        values = []
        for name, text in zip(TRANSCRIPT_COLUMNS[1:], row[1:]):
            try:
                value = float(text)
            except ValueError:
                raise DataError(f"not a number: {text!r}", file=path, item=where, field=name) from None
            if not math.isfinite(value):
                raise DataError(f"not a finite number: {text!r}", file=path, item=where, field=name)
            values.append(value)
        start, end = values
        if end < start or start < 0:
            raise DataError(f"sentence interval [{start}, {end}] is reversed or negative", file=path, item=where,
                            field="Global end")
        sentences.append(Sentence(row[0], start, end))
    return tuple(sentences)


# --------------------------------------------------------------------------------------------------


@dataclass
class Recording:
    """One spacewalk recording: its segments, its step list (the label space) and its transcript."""

    video_id: str
    segments: tuple[Segment, ...]
    steps: tuple[Step, ...]
    transcript_path: Path
    video_path: Path  # may not exist: the real release ships no videos
    _frame_starts: list[int] = field(init=False, repr=False)

    def __post_init__(self):
        self._frame_starts = [s.frame_start for s in self.segments]

    @property
    def num_classes(self) -> int:
        """K + 1: Irrelevant plus the K steps of this recording."""
        return len(self.steps)

    @property
    def duration(self) -> float:
        """The video length used everywhere: the last segment's end, in seconds."""
        return self.segments[-1].end

    @property
    def num_frames(self) -> int:
        return self.segments[-1].frame_end

    @property
    def has_video(self) -> bool:
        return self.video_path.is_file()

    @cached_property
    def transcript(self) -> tuple[Sentence, ...]:
        return load_transcript(self.transcript_path, self.video_id)

    def segment_at_frame(self, frame: int) -> Segment:
        if not 0 <= frame < self.num_frames:
            raise IndexError(f"{self.video_id}: frame {frame} outside [0, {self.num_frames})")
        return self.segments[bisect.bisect_right(self._frame_starts, frame) - 1]

    def label_at_frame(self, frame: int) -> int:
        return self.segment_at_frame(frame).label

    def label_at_time(self, seconds: float) -> int:
        """The label annotated at `seconds`, a time outside the recording read at its first or last frame."""
        return self.label_at_frame(min(max(frame_of(seconds), 0), self.num_frames - 1))


class Spacewalk18:
    """A dataset root in the official Spacewalk-18 layout, validated on load.

    `Spacewalk18(root).step_samples("test")` gives the official samples of the test videos, keyed
    by video id in split order; transcripts are read (and validated) when first used.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            what = "is a file, not a dataset root" if self.root.exists() else "dataset root not found"
            raise DataError(f"{what} (generate the synthetic set or run `python -m spacewalk.download spacewalk18 "
                            "--root DIR`)", file=self.root)
        steps_file, annotation_file, split_file = (self.root / p for p in (STEPS_FILE, ANNOTATION_FILE, SPLIT_FILE))
        steps_raw = _as_dict(load_json(steps_file), steps_file, "video ids to step lists")
        annotation_raw = _as_dict(load_json(annotation_file), annotation_file, "video ids to segment lists")
        self.splits = self._parse_splits(load_json(split_file), split_file)

        self.recordings: dict[str, Recording] = {}
        for video_id in (v for split in SPLITS for v in self.splits[split]):
            if video_id not in steps_raw:
                raise DataError(f"video listed in {SPLIT_FILE} has no steps", file=steps_file, item=video_id)
            if video_id not in annotation_raw:
                raise DataError(f"video listed in {SPLIT_FILE} has no annotation", file=annotation_file,
                                item=video_id)
            steps = parse_steps(steps_raw[video_id], steps_file, video_id)
            segments = parse_segments(annotation_raw[video_id], len(steps), annotation_file, video_id)
            duration = segments[-1].end
            for step in steps[1:]:
                if step.animation_end > duration:
                    raise DataError(f"animation ends at {step.animation_end} s, after the video ({duration} s)",
                                    file=steps_file, item=f"{video_id} step {step.index}", field="animation_end")
            transcript_path = self.root / TRANSCRIPT_DIR / f"{video_id}.csv"
            if not transcript_path.is_file():
                raise DataError("transcript file not found", file=transcript_path, item=video_id)
            self.recordings[video_id] = Recording(video_id, segments, steps, transcript_path,
                                                  self.root / VIDEO_DIR / f"{video_id}.mp4")

    @staticmethod
    def _parse_splits(raw: Any, file: Path) -> dict[str, list[str]]:
        raw = _as_dict(raw, file, "split names to video ids")
        splits, seen = {}, {}
        for split in SPLITS:
            if split not in raw:
                raise DataError("missing split", file=file, field=split)
            ids = _as_list(raw[split], file, None, "video ids")
            for v in ids:
                if not isinstance(v, str):
                    raise DataError(f"video id must be a string, got {v!r}", file=file, field=split)
                if v in seen:
                    raise DataError(f"video listed in both {seen[v]!r} and {split!r}", file=file, item=v, field=split)
                seen[v] = split
            splits[split] = list(ids)
        return splits

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={len(self.splits[s])}" for s in SPLITS)
        return f"Spacewalk18(root={str(self.root)!r}, {sizes})"

    def split(self, name: str) -> list[Recording]:
        if name not in SPLITS:
            raise ConfigError(f"unknown split {name!r}; expected one of {SPLITS}")
        return [self.recordings[v] for v in self.splits[name]]

    # ---------------------------------------------------------------------------------------------

    def step_samples(self, split: str) -> dict[str, list[StepSample]]:
        """The official step-recognition samples of a split (tasks/step_recognition/<split>.json)."""
        file = self.root / STEP_RECOGNITION_DIR / f"{split}.json"
        return parse_step_samples(load_json(file), self.split(split), file)

    def questions(self, file: str | Path | None = None) -> list[Question]:
        """The video QA questions, in file order: the release's (tasks/question_answering/test.json), or those of
        `file` in the same format (e.g. written by spacewalk.benchmarks.spacewalk18.questions.question_generator for val)."""
        file = self.root / QUESTION_FILE if file is None else Path(file)
        raw = _as_list(load_json(file), file, None, "questions")
        if not raw:
            raise DataError("holds no questions (an empty list): nothing to ask or score", file=file)
        questions = []
        first_of: dict[int, int] = {}  # question_id -> the index of the question that has it
        for i, q in enumerate(raw):
            where = f"question {i}"
            video_id = _get(q, "video_id", str, file, where)
            where = f"question {i} (video {video_id})"
            if video_id not in self.recordings:
                raise DataError("unknown video", file=file, item=where, field="video_id")
            options = tuple(_as_list(_get(q, "options", list, file, where), file, where, "options"))
            if not options or not all(isinstance(o, str) for o in options):
                raise DataError("options must be a non-empty list of strings", file=file, item=where, field="options")
            answer = _integer(q, "answer", file, where)
            if not 0 <= answer < len(options):
                raise DataError(f"answer {answer} outside 0..{len(options) - 1}", file=file, item=where, field="answer")
            start, end = _number(q, "video_start", file, where), _number(q, "video_end", file, where)
            if not 0 <= start < end <= self.recordings[video_id].duration + 1e-6:
                raise DataError(f"[{start}, {end}] is not inside the video (0 to "
                                f"{self.recordings[video_id].duration} s)", file=file, item=where, field="video_end")
            qtype = _get(q, "type", str, file, where) if "type" in q else "miscellaneous"
            question_id = _integer(q, "question_id", file, where)
            if question_id in first_of:  # answers and records are keyed by it: one would be scored as the other
                raise DataError(f"question_id {question_id} is also question {first_of[question_id]}'s; each "
                                "question needs its own", file=file, item=where, field="question_id")
            first_of[question_id] = i
            questions.append(Question(video_id, question_id, _get(q, "question", str, file, where), options, answer,
                                      start, end, qtype))
        return questions

    def retrieval_samples(self, split: str) -> dict[str, list[RetrievalSample]]:
        """Intra-video retrieval samples (tasks/intra-video_retrieval/<split>.json)."""
        file = self.root / RETRIEVAL_DIR / f"{split}.json"
        raw = _as_dict(load_json(file), file, "video ids to samples")
        out = {}
        for rec in self.split(split):
            if rec.video_id not in raw:
                raise DataError(f"video of the {split} split has no samples", file=file, item=rec.video_id)
            samples = []
            for i, s in enumerate(_as_list(raw[rec.video_id], file, rec.video_id, "samples")):
                where = f"{rec.video_id} sample {i}"
                query = _integer(s, "query_frame_index", file, where)
                cands = _get(s, "candidate_frame_indices", list, file, where)
                if len(cands) != 2 or not all(isinstance(c, int) and not isinstance(c, bool) for c in cands):
                    raise DataError(f"expected two frame indices, got {cands!r}", file=file, item=where,
                                    field="candidate_frame_indices")
                for name, frame in (("query_frame_index", query), ("candidate_frame_indices", cands[0]),
                                    ("candidate_frame_indices", cands[1])):
                    if not 0 <= frame < rec.num_frames:
                        raise DataError(f"frame {frame} outside the video [0, {rec.num_frames})", file=file,
                                        item=where, field=name)
                label = _integer(s, "label", file, where)
                if label not in (0, 1):
                    raise DataError(f"label must be 0 or 1, got {label}", file=file, item=where, field="label")
                samples.append(RetrievalSample(_integer(s, "id", file, where), query, (cands[0], cands[1]), label))
            out[rec.video_id] = samples
        return out


def parse_step_samples(raw: Any, recordings: Sequence[Recording], file: Path) -> dict[str, list[StepSample]]:
    """Validate step-recognition samples against the annotation of each recording.

    Every sample must lie inside its video, carry timestamp == frame_index / 29.97 and the label of
    the segment at its frame; samples are sorted by frame with ids 0..n-1 (the official files are).
    """
    raw = _as_dict(raw, file, "video ids to samples")
    known = {r.video_id for r in recordings}
    extra = sorted(set(raw) - known)
    if extra:
        raise DataError(f"videos not in this split: {extra}", file=file, item=extra[0])
    out = {}
    for rec in recordings:
        if rec.video_id not in raw:
            raise DataError("video of this split has no samples", file=file, item=rec.video_id)
        samples = []
        for i, s in enumerate(_as_list(raw[rec.video_id], file, rec.video_id, "samples")):
            where = f"{rec.video_id} sample {i}"
            frame = _integer(s, "frame_index", file, where)
            timestamp = _number(s, "timestamp", file, where)
            label = _integer(s, "label", file, where)
            sample_id = _integer(s, "id", file, where)
            if not 0 <= frame < rec.num_frames:
                raise DataError(f"frame {frame} outside the video [0, {rec.num_frames})", file=file, item=where,
                                field="frame_index")
            if abs(timestamp - frame / FPS) > 1e-3:
                raise DataError(f"timestamp {timestamp} != frame_index / {FPS} = {frame / FPS}", file=file,
                                item=where, field="timestamp")
            true_label = rec.label_at_frame(frame)
            if true_label == NOT_ANNOTATED:
                raise DataError(f"frame {frame} lies in a -1 (not annotated) segment, which is never sampled",
                                file=file, item=where, field="frame_index")
            if label != true_label:
                raise DataError(f"label {label} but the annotation has {true_label} at frame {frame}", file=file,
                                item=where, field="label")
            if sample_id != i:
                raise DataError(f"id {sample_id} at position {i}: ids must be 0..n-1 in order", file=file,
                                item=where, field="id")
            if samples and frame < samples[-1].frame_index:
                raise DataError("samples must be sorted by frame_index", file=file, item=where, field="frame_index")
            samples.append(StepSample(sample_id, timestamp, frame, label))
        out[rec.video_id] = samples
    return out


def samples_to_json(samples: Mapping[str, Sequence[StepSample]]) -> dict[str, list[dict]]:
    """The official on-disk form of step-recognition samples."""
    return {v: [{"timestamp": s.timestamp, "frame_index": s.frame_index, "label": s.label, "id": s.id}
                for s in ss] for v, ss in samples.items()}
