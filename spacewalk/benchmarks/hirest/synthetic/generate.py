"""The synthetic HiREST written in the release's layout (the package docstring), checked with the one
reader before it is installed; `ensure_hirest`: generated on first use, regenerated when the options
changed."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.hirest.dataset import (
    CATEGORIES_FILE,
    MOMENT_GT_FILES,
    NEGATIVES_FILE,
    SPLIT_FILE,
    SPLITS,
    HiREST,
    durations,
)
from spacewalk.benchmarks.hirest.subtitles import Subtitle, write_srt
from spacewalk.benchmarks.hirest.synthetic.options import HiRESTOptions, as_options
from spacewalk.benchmarks.hirest.synthetic.plan import HiRESTPlan, plan_hirest
from spacewalk.benchmarks.hirest.synthetic.render import write_video
from spacewalk.benchmarks.hirest.synthetic.video_plan import VideoPlan
from spacewalk.core.io import atomic_dir, ensure_generated, write_text

RECORD_FILE = "synthetic.json"
# the record name since version 1 (existing folders keep it), not this module's path
GENERATOR = "spacewalk.hirest_synthetic"
GENERATOR_VERSION = 1
VIDEO_DIR = "data/videos"  # extraction/video_features/download_videos.py --save_path ./data/videos/
ASR_DIR = "data/ASR"  # extraction/whisper_ASR/README.md --asr_dir ./data/ASR/
VAL_TESTING_SPLIT_FILE = "data/val_testing/all_data_test.json"
MASKED = [0, 1]


def _dumps(obj: Any, indent: int | None = None) -> str:
    return json.dumps(obj, indent=indent)  # the release's style: no trailing newline


def _moment_gt(videos: Sequence[VideoPlan], float_bounds: bool) -> dict:
    out = {}
    for p in videos:
        if p.clip and p.steps:
            bounds = [list(map(float if float_bounds else int, s["absolute_bounds"])) for s in p.steps]
            out[p.video] = {"captions": [{"start": s["absolute_bounds"][0], "end": s["absolute_bounds"][1],
                                          "sentence": s["heading"]} for s in p.steps], "bounds": bounds}
    return out


def _record(opts: HiRESTOptions) -> dict:
    return {"generator": GENERATOR, "version": GENERATOR_VERSION, "synthetic": True,
            "note": "Synthetic data in the layout of the HiREST release (j-min/HiREST): generated, not real "
                    "videos; numbers on it are not comparable with the paper's.",
            "options": json.loads(json.dumps(dataclasses.asdict(opts)))}


def generate_hirest(root: str | Path, options: HiRESTOptions | Mapping[str, Any] | None = None, *,
                    overwrite: bool = False, progress: bool = True) -> Path:
    """Write a synthetic HiREST in the official layout to `root`; the same options give the same bytes."""
    from tqdm import tqdm

    opts = as_options(options)
    root = Path(root).absolute()
    if root.exists() and not overwrite:
        raise FileExistsError(f"{root} exists; pass overwrite=True (--overwrite) to replace it")
    # Built beside root and renamed at the end: an interrupted generation never leaves a half dataset.
    with atomic_dir(root, replace=overwrite) as work:
        plan = plan_hirest(opts)
        (work / VIDEO_DIR).mkdir(parents=True)
        (work / ASR_DIR).mkdir(parents=True)
        split_videos = [p for s in SPLITS for q in plan.splits[s].values() for p in q.values()]
        for i, p in enumerate(tqdm(plan.videos(), desc="synthetic HiREST", unit="video", disable=not progress)):
            video_rng = np.random.default_rng(np.random.SeedSequence([opts.seed, 4, i]))
            write_video(work / VIDEO_DIR / p.video, p, opts, video_rng)
        for p in split_videos:  # the authors transcribed the split videos, not the distractors
            write_srt(work / ASR_DIR / f"{p.video[:-4]}.srt", [Subtitle(*s) for s in p.sentences])

        annotations = {s: {q: {v: p.annotation for v, p in videos.items()} for q, videos in plan.splits[s].items()}
                       for s in SPLITS}
        write_text(work / SPLIT_FILE.format(split="train"), _dumps(annotations["train"]))
        write_text(work / SPLIT_FILE.format(split="val"), _dumps(annotations["val"]))
        masked = {q: {v: {**a, "bounds": list(MASKED), "steps": []} for v, a in videos.items()}
                  for q, videos in annotations["test"].items()}
        write_text(work / SPLIT_FILE.format(split="test"), _dumps(masked, indent=2))
        write_text(work / VAL_TESTING_SPLIT_FILE, _dumps(annotations["val"]))
        for split, float_bounds in (("test", True), ("val", False)):  # as in the release
            videos = [p for q in plan.splits[split].values() for p in q.values()]
            write_text(work / MOMENT_GT_FILES[split], _dumps(_moment_gt(videos, float_bounds)))
        write_text(work / NEGATIVES_FILE, _dumps({f"negative video_{i}": {p.video: {}}
                                                  for i, p in enumerate(plan.distractors)}))
        write_text(work / CATEGORIES_FILE, _dumps({
            "prompt_to_cat": {q: next(iter(v.values())).task.category for s in SPLITS
                              for q, v in plan.splits[s].items()},
            "video_to_cat": {p.video: p.task.category for p in split_videos}}))
        write_text(work / RECORD_FILE, json.dumps(_record(opts), indent=4) + "\n")

        _check(work, plan)
    return root


def _check(root: Path, plan: HiRESTPlan) -> None:
    # Validate with the one reader before installing: a generator bug never becomes a dataset.
    data = HiREST(root)
    for split in SPLITS:
        data.split(split)
    for split in MOMENT_GT_FILES:
        data.step_annotations(split)
    if data.videos() != [p.video for p in plan.videos()] or set(durations(data)) != set(data.categories.video_to_cat):
        raise RuntimeError("synthetic HiREST: video lists disagree")
    for p in plan.videos():
        if not (root / VIDEO_DIR / p.video).is_file():
            raise RuntimeError(f"synthetic HiREST: {p.video} was not written")


def ensure_hirest(root: str | Path, options: HiRESTOptions | Mapping[str, Any] | None = None, *,
                  progress: bool = True, **fields: Any) -> Path:
    """The synthetic HiREST at `root`: generated on first use, regenerated when the options changed.

    `options` (a HiRESTOptions or a mapping) and keyword `fields` (which win) give the options. A root
    that exists but was not written by this generator (no synthetic.json of ours) is never touched.
    """
    opts = as_options(options, **fields)
    return ensure_generated(root, RECORD_FILE, _record(opts),
                            lambda overwrite: generate_hirest(root, opts, overwrite=overwrite, progress=progress),
                            "a synthetic HiREST")
