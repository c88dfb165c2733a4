"""The HiREST release layout (docs/hirest.md, Format) read into typed, validated objects.

One reader for every root in the official layout (the authors' repository checkout, the synthetic default,
a user's copy fetched by `python -m spacewalk.download hirest`):

    data/splits/all_data_{train,val,test}.json          query -> {"<id>.mp4": annotation}
    data/splits/all_data_test_negative_samples.json     video-retrieval distractors
    data/evaluation/categories.json                     prompt_to_cat, video_to_cat (14 categories)
    data/evaluation/formatted_moment_evaluation_gt.json test step GT (the test split itself is masked)
    data/val_testing/formated_moment_evaluation_gt.json val step GT, under the name the official scoring uses

Everything is validated on load and a problem raises a DataError naming the file, the query or video, and
the field. Two things look odd but are real and load as they are: zero-length steps, and headings with
trailing spaces (the official captioning strips them; `Step.heading` keeps the raw text).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from spacewalk.core.errors import DataError
from spacewalk.core.fields import as_dict, as_list, flag, get, integer, number
from spacewalk.core.io import load_json

SPLITS = ("train", "val", "test")
SPLIT_FILE = "data/splits/all_data_{split}.json"
NEGATIVES_FILE = "data/splits/all_data_test_negative_samples.json"
CATEGORIES_FILE = "data/evaluation/categories.json"
# the step GT the official scoring reads for each split (the val name is misspelt in the release)
MOMENT_GT_FILES = {"test": "data/evaluation/formatted_moment_evaluation_gt.json",
                   "val": "data/val_testing/formated_moment_evaluation_gt.json"}
# the public test split hides every moment behind this placeholder
MASKED_BOUNDS = (0.0, 1.0)
# how far a moment may end past `v_duration`: durations are decoder estimates with two decimals, bounds whole
# seconds (two moments of the real test step GT end 0.07 s and 0.83 s past their video's duration)
DURATION_SLACK = 1.0


@dataclass(frozen=True)
class Step:
    index: int
    heading: str
    start: float
    end: float


@dataclass(frozen=True)
class VideoAnnotation:
    query: str
    video: str  # "<youtube id>.mp4", the key used everywhere in the release
    relevant: bool
    clip: bool
    duration: float
    bounds: tuple[float, float]
    steps: tuple[Step, ...]
    masked: bool = False  # the public test split: bounds and steps are placeholders

    @property
    def video_id(self) -> str:
        return video_id(self.video)

    @property
    def moment(self) -> tuple[float, float]:
        """The relevant part: `bounds` for a clippable video, the whole video otherwise."""
        if self.masked:
            raise DataError("the public test split hides moments; use HiREST.step_annotations('test')",
                            item=f"{self.query!r} / {self.video}", field="bounds")
        return self.bounds if self.clip else (0.0, self.duration)


@dataclass(frozen=True)
class Caption:
    start: float
    end: float
    sentence: str


@dataclass(frozen=True)
class MomentGT:
    """One video of a formatted moment GT file: its steps as captions, and their bounds."""

    video: str
    captions: tuple[Caption, ...]
    bounds: tuple[tuple[float, float], ...]

    @property
    def moment(self) -> tuple[float, float]:
        return (self.captions[0].start, self.captions[-1].end)


@dataclass(frozen=True)
class Categories:
    """`categories.json`: query -> category and video -> category (14 categories)."""

    prompt_to_cat: Mapping[str, str]
    video_to_cat: Mapping[str, str]
    file: str = "<categories>"

    def of_prompt(self, prompt: str) -> str:
        return self._lookup(self.prompt_to_cat, "prompt_to_cat", prompt)

    def of_video(self, video: str) -> str:
        return self._lookup(self.video_to_cat, "video_to_cat", video)

    def _lookup(self, table: Mapping[str, str], field: str, key: str) -> str:
        if key not in table:
            raise DataError("has no category for it", file=self.file, item=key, field=field)
        return table[key]


def video_id(video: str) -> str:
    """"abc.mp4" -> "abc": released feature and ASR files are named by the id."""
    return video[:-4] if video.endswith(".mp4") else video


# --------------------------------------------------------------------------------------------------
# parsers, one per file kind


def _interval(raw: Any, file: Path, item: str, key: str) -> tuple[float, float]:
    if not isinstance(raw, list) or len(raw) != 2 or any(isinstance(x, bool) or not isinstance(x, (int, float))
                                                         for x in raw):
        raise DataError(f"expected [start, end] seconds, got {raw!r}", file=file, item=item, field=key)
    start, end = float(raw[0]), float(raw[1])
    if not 0 <= start <= end:
        raise DataError(f"need 0 <= start <= end, got {raw!r}", file=file, item=item, field=key)
    return start, end


def parse_annotation(raw: Any, query: str, video: str, file: Path, masked: bool = False) -> VideoAnnotation:
    item = f"{query!r} / {video}"
    relevant = flag(raw, "relevant", file, item)
    clip = flag(raw, "clip", file, item)
    duration = number(raw, "v_duration", file, item)
    if duration <= 0:
        raise DataError(f"duration must be positive, got {duration}", file=file, item=item, field="v_duration")
    bounds = _interval(get(raw, "bounds", list, file, item), file, item, "bounds")
    steps = []
    for i, step in enumerate(as_list(get(raw, "steps", list, file, item), file, item, "steps")):
        step_item = f"{item} step {i}"
        index = integer(step, "index", file, step_item)
        if index != i:
            raise DataError(f"steps must be listed in order, expected index {i}, got {index}", file=file,
                            item=step_item, field="index")
        heading = get(step, "heading", str, file, step_item)
        start, end = _interval(get(step, "absolute_bounds", list, file, step_item), file, step_item,
                               "absolute_bounds")
        steps.append(Step(index, heading, start, end))
    if masked:
        # every test video, clippable or not, carries the placeholder
        if bounds != MASKED_BOUNDS or steps:
            raise DataError("the public test split is masked: bounds [0, 1] and no steps", file=file, item=item,
                            field="bounds" if bounds != MASKED_BOUNDS else "steps")
    elif not clip:
        if bounds != (0.0, 0.0) or steps:
            raise DataError("a whole-video annotation (clip false) has bounds [0, 0] and no steps", file=file,
                            item=item, field="bounds" if bounds != (0.0, 0.0) else "steps")
    else:
        if bounds[1] > duration + DURATION_SLACK:
            raise DataError(f"moment {list(bounds)} ends after the video ({duration} s)", file=file, item=item,
                            field="bounds")
        _check_tiling([(s.start, s.end) for s in steps], bounds, file, item)
    return VideoAnnotation(query, video, relevant, clip, duration, bounds, tuple(steps), masked)


def _check_tiling(intervals: list[tuple[float, float]], moment: tuple[float, float], file: Path, item: str):
    """Steps tile the moment exactly: first starts at its start, each ends where the next begins."""
    if not intervals:
        return
    if intervals[0][0] != moment[0] or intervals[-1][1] != moment[1]:
        raise DataError(f"steps cover {intervals[0][0]}..{intervals[-1][1]}, not the moment {list(moment)}",
                        file=file, item=item, field="steps")
    for i, (a, b) in enumerate(zip(intervals, intervals[1:])):
        if a[1] != b[0]:
            raise DataError(f"step {i} ends at {a[1]} but step {i + 1} starts at {b[0]}", file=file, item=item,
                            field="steps")


def load_split(path: str | Path, masked: bool = False) -> dict[str, dict[str, VideoAnnotation]]:
    """query -> video -> annotation, in file order. `masked`: the public test split's placeholders."""
    path = Path(path)
    raw = as_dict(load_json(path), path, "queries to videos")
    out: dict[str, dict[str, VideoAnnotation]] = {}
    for query, videos in raw.items():
        videos = as_dict(videos, path, f"videos of query {query!r}")
        if not videos:
            raise DataError("a query without videos", file=path, item=repr(query))
        out[query] = {video: parse_annotation(ann, query, video, path, masked) for video, ann in videos.items()}
    return out


def load_moment_gt(path: str | Path) -> dict[str, MomentGT]:
    """video -> its steps, from a formatted moment GT file (`{video: {captions, bounds}}`)."""
    path = Path(path)
    raw = as_dict(load_json(path), path, "videos to step GT")
    out = {}
    for video, entry in raw.items():
        captions = []
        for i, cap in enumerate(as_list(get(entry, "captions", list, path, video), path, video, "captions")):
            cap_item = f"{video} caption {i}"
            start, end = number(cap, "start", path, cap_item), number(cap, "end", path, cap_item)
            if not 0 <= start <= end:
                raise DataError(f"need 0 <= start <= end, got {start}, {end}", file=path, item=cap_item,
                                field="end")
            captions.append(Caption(start, end, get(cap, "sentence", str, path, cap_item)))
        if not captions:
            raise DataError("no captions", file=path, item=video, field="captions")
        bounds = tuple(_interval(b, path, video, "bounds")
                       for b in as_list(get(entry, "bounds", list, path, video), path, video, "bounds"))
        if bounds != tuple((c.start, c.end) for c in captions):
            raise DataError("bounds must list the captions' [start, end] in order", file=path, item=video,
                            field="bounds")
        _check_tiling(list(bounds), (captions[0].start, captions[-1].end), path, video)
        out[video] = MomentGT(video, tuple(captions), bounds)
    return out


def load_negatives(path: str | Path) -> list[str]:
    """The distractor videos of video retrieval, in file order."""
    path = Path(path)
    raw = as_dict(load_json(path), path, "negative entries")
    out = []
    for key, videos in raw.items():
        videos = as_dict(videos, path, f"videos of {key!r}")
        if len(videos) != 1:
            raise DataError(f"expected one video, got {len(videos)}", file=path, item=key)
        out.extend(videos)
    return out


def load_categories(path: str | Path) -> Categories:
    path = Path(path)
    raw = load_json(path)
    maps = {}
    for key in ("prompt_to_cat", "video_to_cat"):
        table = as_dict(get(raw, key, dict, path, "categories"), path, key)
        for name, cat in table.items():
            if not isinstance(cat, str):
                raise DataError(f"expected a category name, got {cat!r}", file=path, item=name, field=key)
        maps[key] = dict(table)
    return Categories(maps["prompt_to_cat"], maps["video_to_cat"], str(path))


# --------------------------------------------------------------------------------------------------
# the dataset


class HiREST:
    """A HiREST root in the official layout. Files load lazily (video retrieval needs no step GT)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not (self.root / "data/splits").is_dir():
            raise DataError("not a HiREST root: data/splits/ is missing (fetch it with "
                            "`python -m spacewalk.download hirest`)", file=self.root)
        self._splits: dict[str, dict[str, dict[str, VideoAnnotation]]] = {}
        self._moment_gt: dict[str, dict[str, MomentGT]] = {}

    def __repr__(self) -> str:
        return f"HiREST({str(self.root)!r})"

    def path(self, relative: str) -> Path:
        return self.root / relative

    def split(self, name: str) -> dict[str, dict[str, VideoAnnotation]]:
        if name not in SPLITS:
            raise DataError(f"unknown split {name!r}; HiREST has {', '.join(SPLITS)}")
        if name not in self._splits:
            self._splits[name] = load_split(self.path(SPLIT_FILE.format(split=name)), masked=name == "test")
        return self._splits[name]

    def annotations(self, name: str) -> list[VideoAnnotation]:
        return [ann for videos in self.split(name).values() for ann in videos.values()]

    def moment_gt(self, name: str) -> dict[str, MomentGT]:
        if name not in MOMENT_GT_FILES:
            raise DataError(f"no formatted moment GT for split {name!r} (only {', '.join(MOMENT_GT_FILES)})")
        if name not in self._moment_gt:
            self._moment_gt[name] = load_moment_gt(self.path(MOMENT_GT_FILES[name]))
        return self._moment_gt[name]

    def step_annotations(self, name: str) -> list[VideoAnnotation]:
        """Clippable videos with steps: the inputs of segmentation and captioning.

        The public test split hides moments and steps, so for "test" they come from the formatted moment GT
        (the moment is the hull of the steps, which tile it exactly).
        """
        if name != "test":
            return [ann for ann in self.annotations(name) if ann.clip and ann.steps]
        gt = self.moment_gt("test")
        out = []
        for ann in self.annotations("test"):
            if ann.clip and ann.video in gt:
                entry = gt[ann.video]
                # the masked split cannot check its moments itself: check the step GT's against the duration
                if entry.moment[1] > ann.duration + DURATION_SLACK:
                    raise DataError(f"steps end at {entry.moment[1]}, after the video ({ann.duration} s, the "
                                    f"v_duration of {SPLIT_FILE.format(split='test')})",
                                    file=self.path(MOMENT_GT_FILES["test"]), item=ann.video, field="bounds")
                steps = tuple(Step(i, c.sentence, c.start, c.end) for i, c in enumerate(entry.captions))
                out.append(VideoAnnotation(ann.query, ann.video, ann.relevant, ann.clip, ann.duration,
                                           entry.moment, steps))
        return out

    @cached_property
    def negatives(self) -> list[str]:
        return load_negatives(self.path(NEGATIVES_FILE))

    @cached_property
    def categories(self) -> Categories:
        return load_categories(self.path(CATEGORIES_FILE))

    def candidates(self, name: str) -> list[str]:
        """Video retrieval candidates: every video of the split, plus the distractors for test."""
        seen = dict.fromkeys(ann.video for ann in self.annotations(name))
        if name == "test":
            seen.update(dict.fromkeys(self.negatives))
        return list(seen)

    def videos(self) -> list[str]:
        """Every video the release names (all splits and the distractors), each once."""
        seen: dict[str, None] = {}
        for name in SPLITS:
            seen.update(dict.fromkeys(ann.video for ann in self.annotations(name)))
        seen.update(dict.fromkeys(self.negatives))
        return list(seen)


def durations(dataset: HiREST) -> dict[str, float]:
    """video -> duration in seconds, from every split (distractors carry none in the release)."""
    out: dict[str, float] = {}
    for name in SPLITS:
        for ann in dataset.annotations(name):
            out.setdefault(ann.video, ann.duration)
    return out
