"""A tiny HiREST root in the official layout, and features with the answers planted in them: shared by the
DataModule and joint-model tests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.hirest.dataset import HiREST
from spacewalk.core.io import write_json

from helpers.fakes import text_vector

HEADINGS = ("cut the onion", "boil the water", "add some salt")
VIDEO_DIM, QUERY_DIM, ASR_DIM = 8, 4, 6


def _video(split: str, q: int, v: int, rng: np.random.Generator, duration: int = 24) -> dict:
    """A clip video whose steps (3 or 2, boundaries >= 5 s apart, whole seconds) tile its moment."""
    m0 = int(rng.integers(1, 5))
    cuts = [m0]
    for _ in range(int(rng.integers(2, 4))):
        cuts.append(cuts[-1] + int(rng.integers(5, 7)))
    kinds = rng.permutation(len(HEADINGS))[:len(cuts) - 1]
    steps = [{"index": i, "heading": HEADINGS[k] + (" " if i == 0 else ""), "absolute_bounds": [a, b]}
             for i, (k, a, b) in enumerate(zip(kinds, cuts, cuts[1:]))]
    return {"relevant": True, "clip": True, "v_duration": float(duration) - 0.4, "bounds": [cuts[0], cuts[-1]],
            "steps": steps}


def write_hirest_root(root: Path, seed: int = 0, videos: dict[str, int] | None = None) -> Path:
    """Queries with one clip video each (plus a whole-video one per split); val and test formatted GT."""
    rng = np.random.default_rng(seed)
    videos = videos or {"train": 6, "val": 2, "test": 3}
    gt: dict[str, dict] = {}
    for split, n in videos.items():
        data: dict[str, dict] = {}
        for q in range(n):
            ann = _video(split, q, 0, rng)
            name = f"{split}{q}.mp4"
            data[f"how to {split} {q}"] = {name: ann}
            gt.setdefault(split, {})[name] = {
                "captions": [{"start": s["absolute_bounds"][0], "end": s["absolute_bounds"][1],
                              "sentence": s["heading"]} for s in ann["steps"]],
                "bounds": [s["absolute_bounds"] for s in ann["steps"]]}
            if split == "test":
                data[f"how to {split} {q}"] = {name: {**ann, "bounds": [0, 1], "steps": []}}
        # a whole-video annotation (the test split masks it too)
        data[f"whole {split}"] = {f"{split}_whole.mp4": {"relevant": True, "clip": False, "v_duration": 30.0,
                                                         "bounds": [0, 1] if split == "test" else [0, 0],
                                                         "steps": []}}
        write_json(root / f"data/splits/all_data_{split}.json", data)
    write_json(root / "data/evaluation/formatted_moment_evaluation_gt.json", gt["test"])
    write_json(root / "data/val_testing/formated_moment_evaluation_gt.json", gt["val"])
    return root


class FakeFeatures:
    """HiRESTFeatures' interface from the annotations: frame t carries [start mark, end mark, boundary
    mark, one-hot of the step's heading (3), noise (2)] (plus noise); ASR speaks during the moment."""

    video_dim, query_dim, asr_dim = VIDEO_DIM, QUERY_DIM, ASR_DIM

    def __init__(self, hirest: HiREST, num_frames: int = 24, noise: float = 0.05, seed: int = 0):
        self.num_frames, self.calls = num_frames, Counter()
        rng = np.random.default_rng(seed)
        self._frames, self._speech = {}, {}
        for split in ("train", "val", "test"):
            for ann in hirest.annotations(split):
                x = noise * rng.standard_normal((num_frames, VIDEO_DIM)).astype(np.float32)
                self._frames[ann.video] = x
            for ann in hirest.step_annotations(split):
                x = self._frames[ann.video]
                m0, m1 = int(ann.moment[0]), int(ann.moment[1])
                x[m0, 0] += 1.0
                x[min(m1, num_frames - 1), 1] += 1.0
                for step in ann.steps:
                    a, b = int(step.start), int(step.end)
                    if a != m0:
                        x[a, 2] += 1.0
                    x[a:b + 1, 3 + HEADINGS.index(step.heading.strip())] += 1.0
                self._speech[ann.video] = (m0, m1)

    def frames(self, video: str) -> np.ndarray:
        self.calls[video] += 1
        return self._frames[video].copy()

    def asr_per_second(self, video: str, num_frames: int) -> np.ndarray:
        out = np.zeros((num_frames, ASR_DIM), np.float32)
        if video in self._speech:
            m0, m1 = self._speech[video]
            out[m0:m1, 0] = 1.0
        return out

    def query(self, text: str) -> np.ndarray:
        # near one shared direction: the query gates every frame (elementwise), so unseen queries must
        # gate alike for a tiny model to carry what it learnt to val and test
        v = np.ones(QUERY_DIM, np.float32) + 0.2 * text_vector(text, QUERY_DIM)
        return v / np.linalg.norm(v)
