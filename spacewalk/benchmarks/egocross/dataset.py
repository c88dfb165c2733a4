"""The EgoCross testbed (docs/egoschema_egocross.md, EgoCross) read into validated questions.

    datasets/egocross_testbed_imgs.json   [{id, dataset, primary_category, question_type, question_text,
                                            options: ["A: ...", ...], original_video_fps, video_path: [...]}]

`video_path` lists pre-extracted frames as absolute-looking paths ("/egocross_testbed/<dataset>/...");
they are resolved under a frames root the user gives (`frames_root / path.lstrip("/")`). The answers
(`correct_option_letter`, `answer_text`, `detailed_answer`) are released separately by the authors and
merged by `id`, from either the testbed JSON with those fields added (the authors' own evaluation file) or
a map {id: {correct_option_letter, answer_text, detailed_answer}}; the testbed JSON itself may carry them.
Every problem is a DataError naming the file, the question id and the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from spacewalk.core.errors import DataError
from spacewalk.core.fields import as_dict, as_list, get, integer
from spacewalk.core.io import load_json

TESTBED_FILE = "datasets/egocross_testbed_imgs.json"
CATEGORIES = ("Identification", "Localization", "Prediction", "Counting")
# source dataset -> domain (the release spells ExtremeSportFPV "ExtrameSportFPV")
DOMAINS = {"CholecTrack20": "surgery", "EgoSurgery": "surgery", "ENIGMA": "industry",
           "ExtrameSportFPV": "extreme_sports", "EgoPet": "animal_perspective"}
ANSWER_FIELDS = ("correct_option_letter", "answer_text", "detailed_answer")
_OPTION = re.compile(r"([A-Z]): (.*)", re.DOTALL)


def sampling_fps(dataset: str, first_frame: str) -> float:
    """The rate the frames were extracted at, as the authors' scripts state it in the prompt: 0.5 fps, but
    1 fps for CholecTrack20's .png frames (eval_os_closedset.py, eval_gpt_*.py)."""
    return 1.0 if dataset == "CholecTrack20" and PurePosixPath(first_frame).suffix.lower() == ".png" else 0.5


@dataclass(frozen=True)
class Answer:
    letter: str
    text: str | int  # the short answer the OpenQA substring rule looks for (a count may be a JSON number)
    detailed: str


@dataclass(frozen=True)
class Question:
    id: int
    dataset: str
    category: str
    question_type: str
    question: str
    letters: tuple[str, ...]
    options: tuple[str, ...]  # the option texts without their "A: " prefix
    original_video_fps: int | float  # as in the JSON: the prompt prints it with str()
    frames: tuple[str, ...]  # the release's paths
    answer: Answer | None = None

    @property
    def domain(self) -> str:
        return DOMAINS[self.dataset]

    @property
    def option_lines(self) -> list[str]:
        """The options as the release writes them: "A: <text>"."""
        return [f"{letter}: {text}" for letter, text in zip(self.letters, self.options)]

    @property
    def sampling_fps(self) -> float:
        return sampling_fps(self.dataset, self.frames[0])

    @property
    def answer_index(self) -> int | None:
        return None if self.answer is None else self.letters.index(self.answer.letter)


def _text(obj, key, file, item) -> str:
    value = get(obj, key, str, file, item)
    if not value.strip():
        raise DataError("empty text", file=file, item=item, field=key)
    return value


def _read_answer(entry: Mapping[str, Any], letters: tuple[str, ...] | None, file: Path, item: str) -> Answer:
    letter = _text(entry, "correct_option_letter", file, item).upper()  # the authors compare lower-cased
    if letters is not None and letter not in letters:
        raise DataError(f"{entry['correct_option_letter']!r} is not one of the options {', '.join(letters)}",
                        file=file, item=item, field="correct_option_letter")
    text = get(entry, "answer_text", (str, int), file, item)
    if isinstance(text, str) and not text.strip():
        raise DataError("empty text", file=file, item=item, field="answer_text")
    return Answer(letter, text, get(entry, "detailed_answer", str, file, item))


def _read_question(row: Any, file: Path, index: int) -> Question:
    label = str(row["id"]) if isinstance(row, dict) and "id" in row else f"#{index}"
    qid = integer(row, "id", file, label)
    label = str(qid)
    dataset = _text(row, "dataset", file, label)
    if dataset not in DOMAINS:
        raise DataError(f"unknown source dataset {dataset!r}; EgoCross has {', '.join(DOMAINS)}", file=file,
                        item=label, field="dataset")
    category = _text(row, "primary_category", file, label)
    if category not in CATEGORIES:
        raise DataError(f"unknown category {category!r}; EgoCross has {', '.join(CATEGORIES)}", file=file,
                        item=label, field="primary_category")
    raw_options = as_list(get(row, "options", list, file, label), file, label, "options")
    letters, options = [], []
    for k, option in enumerate(raw_options):
        match = _OPTION.fullmatch(option) if isinstance(option, str) else None
        if match is None or match.group(1) != chr(ord("A") + k):
            raise DataError(f"option {k} is {option!r}, expected '{chr(ord('A') + k)}: <text>'", file=file,
                            item=label, field="options")
        letters.append(match.group(1))
        options.append(match.group(2))
    if len(options) < 2:
        raise DataError(f"{len(options)} options; a question needs at least 2", file=file, item=label,
                        field="options")
    fps = get(row, "original_video_fps", (int, float), file, label)
    if not fps > 0:
        raise DataError(f"not a frame rate: {fps!r}", file=file, item=label, field="original_video_fps")
    frames = get(row, "video_path", list, file, label)
    if not frames or not all(isinstance(f, str) and f.strip() for f in frames):
        raise DataError("expected a non-empty list of frame paths", file=file, item=label, field="video_path")
    answer = None
    if any(key in row for key in ANSWER_FIELDS):
        answer = _read_answer(row, tuple(letters), file, label)
    return Question(qid, dataset, category, _text(row, "question_type", file, label),
                    _text(row, "question_text", file, label), tuple(letters), tuple(options), fps, tuple(frames),
                    answer)


def read_testbed(path: str | Path) -> list[Question]:
    path = Path(path)
    rows = as_list(load_json(path), path, None, "questions")
    questions, seen = [], set()
    for i, row in enumerate(rows):
        q = _read_question(row, path, i)
        if q.id in seen:
            raise DataError("duplicate id", file=path, item=str(q.id), field="id")
        seen.add(q.id)
        questions.append(q)
    return questions


def read_answers(path: str | Path) -> dict[int, tuple[Answer, Mapping[str, Any]]]:
    """id -> answer from the testbed JSON with the answer fields added (a list) or a map {id: {...}}."""
    path = Path(path)
    raw = load_json(path)
    if isinstance(raw, list):
        entries = []
        for i, row in enumerate(raw):
            label = str(row["id"]) if isinstance(row, dict) and "id" in row else f"#{i}"
            entries.append((integer(row, "id", path, label), row))
    else:
        entries = []
        for key, row in as_dict(raw, path, "question ids to answers").items():
            try:
                entries.append((int(key), row))
            except ValueError:
                raise DataError("not a question id", file=path, item=key, field="id") from None
    answers: dict[int, tuple[Answer, Mapping[str, Any]]] = {}
    for qid, row in entries:
        if qid in answers:
            raise DataError("duplicate id", file=path, item=str(qid), field="id")
        answers[qid] = (_read_answer(row, None, path, str(qid)), row)
    return answers


class EgoCross:
    """The testbed at `data` (a JSON file, or a root holding datasets/egocross_testbed_imgs.json), its
    frames under `frames_root` (default: that root; for a file, the folder above the file's folder, which
    is the root when the file sits in datasets/), and the answers from `answers` when they are not in the
    testbed JSON."""

    def __init__(self, data: str | Path, frames_root: str | Path | None = None, answers: str | Path | None = None):
        data = Path(data)
        self.file = data / TESTBED_FILE if data.is_dir() else data
        self.frames_root = Path(frames_root) if frames_root is not None else (
            data if data.is_dir() else self.file.parent.parent)
        self.answers_file = Path(answers) if answers is not None else None
        self.questions = self._merge(read_testbed(self.file))

    def __repr__(self) -> str:
        answered = sum(q.answer is not None for q in self.questions)
        return f"EgoCross({self.file}: {len(self.questions)} questions, {answered} answered)"

    def _merge(self, questions: list[Question]) -> list[Question]:
        if self.answers_file is None:
            return questions
        answers = read_answers(self.answers_file)
        by_id = {q.id: q for q in questions}
        for qid in answers:
            if qid not in by_id:
                raise DataError(f"answer for a question not in {self.file}", file=self.answers_file, item=str(qid),
                                field="id")
        merged = []
        for q in questions:
            if q.id in answers:
                answer, _ = answers[q.id]
                if answer.letter not in q.letters:
                    raise DataError(f"{answer.letter!r} is not one of the options {', '.join(q.letters)}",
                                    file=self.answers_file, item=str(q.id), field="correct_option_letter")
                q = Question(**{**q.__dict__, "answer": answer})
            merged.append(q)
        return merged

    def frame_paths(self, q: Question) -> tuple[Path, ...]:
        return tuple(self.frames_root / p.lstrip("/") for p in q.frames)

    def check_frames(self) -> None:
        """Every listed frame exists under the frames root (a missing one: DataError naming it)."""
        for q in self.questions:
            for path in self.frame_paths(q):
                if not path.is_file():
                    raise DataError(f"frame {path} not found (frames root {self.frames_root}; see "
                                    "docs/egoschema_egocross.md for getting the frames)", file=self.file,
                                    item=str(q.id), field="video_path")

    def frame_times(self, q: Question) -> tuple[float, ...]:
        """Seconds from the clip's first extracted frame, at the rate the frames were extracted."""
        return tuple(i / q.sampling_fps for i in range(len(q.frames)))
