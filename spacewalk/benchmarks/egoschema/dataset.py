"""The EgoSchema release (docs/egoschema_egocross.md, EgoSchema) read into validated questions.

    <root>/questions.json        [{q_uid, google_drive_id, question, "option 0", ..., "option 4"}]  (5031)
    <root>/subset_answers.json   {q_uid: 0-4}   the 500 public answers, the only local scoring
    <root>/uid_to_ego4d.json     {q_uid: {video_uid, starting_sec, ending_sec}}   the Ego4D clip windows
    <root>/videos/<q_uid>.mp4    the 3-minute clips (the authors' download.py writes them there)

Each file can also be given on its own (`questions=`, `answers=`, `uid_map=`), e.g. to score with another
copy of the answers. Every problem is a DataError naming the file, the question (q_uid) and the field.
Videos are not needed to read or score: a question's Visual names its clip whether or not it is there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.fields import as_dict, as_list, get, integer, number
from spacewalk.core.io import load_json

QUESTIONS_FILE = "questions.json"
ANSWERS_FILE = "subset_answers.json"
UID_MAP_FILE = "uid_to_ego4d.json"
VIDEO_DIR = "videos"
N_OPTIONS = 5
OPTION_KEYS = tuple(f"option {i}" for i in range(N_OPTIONS))


@dataclass(frozen=True)
class Question:
    q_uid: str
    google_drive_id: str
    question: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class ClipWindow:
    """Where a question's 3-minute clip sits in its Ego4D video."""
    video_uid: str
    start: float
    end: float


def _text(obj, key: str, file: Path, item: str) -> str:
    value = get(obj, key, str, file, item)
    if not value.strip():
        raise DataError("empty text", file=file, item=item, field=key)
    return value


def read_questions(path: str | Path) -> list[Question]:
    """questions.json in file order (the order the full-set submission follows)."""
    path = Path(path)
    rows = as_list(load_json(path), path, None, "questions")
    questions, seen = [], set()
    for i, row in enumerate(rows):
        label = f"#{i}"
        if isinstance(row, dict) and isinstance(row.get("q_uid"), str):
            label = row["q_uid"]
        q_uid = _text(row, "q_uid", path, label)
        if q_uid in seen:
            raise DataError("duplicate question", file=path, item=q_uid, field="q_uid")
        seen.add(q_uid)
        questions.append(Question(
            q_uid=q_uid,
            google_drive_id=get(row, "google_drive_id", str, path, q_uid),
            question=_text(row, "question", path, q_uid),
            options=tuple(_text(row, key, path, q_uid) for key in OPTION_KEYS)))
    return questions


def read_answers(path: str | Path) -> dict[str, int]:
    """subset_answers.json: q_uid -> the index of the correct option."""
    path = Path(path)
    raw = as_dict(load_json(path), path, "q_uid to an answer 0-4")
    answers = {}
    for q_uid, value in raw.items():
        answer = integer({q_uid: value}, q_uid, path, q_uid)
        if not 0 <= answer < N_OPTIONS:
            raise DataError(f"answer {answer} is not an option index 0-{N_OPTIONS - 1}", file=path, item=q_uid,
                            field=q_uid)
        answers[q_uid] = answer
    return answers


def read_uid_map(path: str | Path) -> dict[str, ClipWindow]:
    path = Path(path)
    raw = as_dict(load_json(path), path, "q_uid to an Ego4D clip window")
    windows = {}
    for q_uid, entry in raw.items():
        start = number(entry, "starting_sec", path, q_uid)
        end = number(entry, "ending_sec", path, q_uid)
        if not 0 <= start < end:
            raise DataError(f"window [{start}, {end}] is empty or negative", file=path, item=q_uid,
                            field="ending_sec")
        windows[q_uid] = ClipWindow(_text(entry, "video_uid", path, q_uid), start, end)
    return windows


class EgoSchema:
    """An EgoSchema root (or the files given one by one); files are read and validated on first use."""

    def __init__(self, root: str | Path | None = None, *, questions: str | Path | None = None,
                 answers: str | Path | None = None, uid_map: str | Path | None = None,
                 videos: str | Path | None = None):
        if root is None and questions is None:
            raise ConfigError("EgoSchema needs a root or a questions file")
        self.root = Path(root) if root is not None else None
        self.questions_file = Path(questions) if questions is not None else self.root / QUESTIONS_FILE
        self.answers_file = Path(answers) if answers is not None else (
            self.root / ANSWERS_FILE if self.root is not None else None)
        self.uid_map_file = Path(uid_map) if uid_map is not None else (
            self.root / UID_MAP_FILE if self.root is not None else None)
        self.video_dir = Path(videos) if videos is not None else (
            self.root / VIDEO_DIR if self.root is not None else self.questions_file.parent / VIDEO_DIR)

    def __repr__(self) -> str:
        return f"EgoSchema({self.questions_file}: {len(self.questions)} questions, {len(self.answers)} answers)"

    @cached_property
    def questions(self) -> list[Question]:
        return read_questions(self.questions_file)

    @cached_property
    def answers(self) -> dict[str, int]:
        """The public answers ({} when there is no answers file: the full set is scored by the server)."""
        if self.answers_file is None or (self.answers_file == self._default(ANSWERS_FILE)
                                         and not self.answers_file.is_file()):
            return {}
        answers = read_answers(self.answers_file)
        if self.uid_map_file is not None and self.uid_map_file.is_file():
            known = self.clip_windows
            for q_uid in answers:
                if q_uid not in known:
                    raise DataError(f"answer for a question EgoSchema does not have (not in {self.uid_map_file})",
                                    file=self.answers_file, item=q_uid, field=q_uid)
        return answers

    @cached_property
    def clip_windows(self) -> dict[str, ClipWindow]:
        """q_uid -> its Ego4D window ({} when uid_to_ego4d.json is absent: it is only metadata)."""
        if self.uid_map_file is None or (self.uid_map_file == self._default(UID_MAP_FILE)
                                         and not self.uid_map_file.is_file()):
            return {}
        return read_uid_map(self.uid_map_file)

    def _default(self, name: str) -> Path | None:
        return self.root / name if self.root is not None else None

    def video(self, q_uid: str) -> Path:
        return self.video_dir / f"{q_uid}.mp4"

    def check_videos(self, questions: list[Question]) -> None:
        """Every clip of `questions` exists (a missing one: DataError naming it)."""
        for q in questions:
            if not self.video(q.q_uid).is_file():
                raise DataError(f"video {self.video(q.q_uid)} not found (see docs/egoschema_egocross.md for "
                                "getting the videos)", file=self.questions_file, item=q.q_uid, field="q_uid")

    def subset(self) -> list[Question]:
        """The questions with a public answer, in questions.json order; every answer must name a question."""
        by_uid = {q.q_uid: q for q in self.questions}
        for q_uid in self.answers:
            if q_uid not in by_uid:
                raise DataError(f"answer for a question not in {self.questions_file}", file=self.answers_file,
                                item=q_uid, field=q_uid)
        return [q for q in self.questions if q.q_uid in self.answers]

    def validate(self) -> EgoSchema:
        """Read every file present and check they agree (the download command's check)."""
        self.questions, self.answers  # noqa: B018
        windows = self.clip_windows
        if windows:
            for q in self.questions:
                if q.q_uid not in windows:
                    raise DataError(f"question has no clip window in {self.uid_map_file}",
                                    file=self.questions_file, item=q.q_uid, field="q_uid")
        return self
