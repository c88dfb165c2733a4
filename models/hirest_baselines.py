"""The task-specific HiREST baselines of the paper (docs/hirest.md, The paper's models), no training:

- video retrieval: mean of `num_frames` uniformly spaced frame embeddings, cosine with the query embedding
  (CLIP / EVA-CLIP with 20 frames in the paper);
- moment retrieval: per-second frame-query similarity; from the best second, grow while the score stays
  within `threshold` of the best ("threshold" mode, the paper's 0.10), or take `window` seconds on each
  side ("window" mode, the paper's 8 frames);
- moment segmentation: SSIM between adjacent frames of `num_frames` frames spread over the moment; a step
  boundary wherever SSIM < `threshold` (the paper tries 0.75 and 0.85 with 32 frames).

Retrieval needs frame and query embeddings in one space (an image-text model such as `encoder=clip_vit_b32`
or the authors' EVA-CLIP features with matching query embeddings); a mismatch is refused, never scored.
Segmentation reads pixels, so it needs the videos themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spacewalk.core.errors import ConfigError, DataError


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _same_space(frames: np.ndarray, query: np.ndarray, video: str) -> None:
    if frames.shape[1] != query.shape[0]:
        raise DataError(f"frame embeddings are {frames.shape[1]}-d but query embeddings {query.shape[0]}-d: "
                        "retrieval by similarity needs an image-text model's two towers (e.g. "
                        "encoder=clip_vit_b32), not a video-only encoder", item=video)


def video_embedding(frames: np.ndarray, num_frames: int) -> np.ndarray:
    """Mean of `num_frames` uniformly spaced unit frame embeddings (all frames if there are fewer)."""
    idx = np.unique(np.linspace(0, len(frames) - 1, num_frames).round().astype(int))
    return _unit(_unit(frames[idx]).mean(0))


@dataclass
class VideoRetrievalBaseline:
    num_frames: int = 20

    def predict(self, features, queries: Sequence[str], candidates: Sequence[str]) -> dict:
        """{query: {"videos": [...], "scores": [...]}} over every candidate, best first."""
        from tqdm import tqdm

        videos = list(candidates)
        bank = np.stack([video_embedding(features.frames(v), self.num_frames)
                         for v in tqdm(videos, desc="video embeddings", unit="video")])
        out = {}
        for q in queries:
            query = _unit(features.query(q))
            _same_space(bank, query, videos[0])
            scores = bank @ query
            order = np.argsort(-scores, kind="stable")
            out[q] = {"videos": [videos[i] for i in order], "scores": [float(scores[i]) for i in order]}
        return out


def grow_moment(similarity: np.ndarray, threshold: float) -> tuple[int, int]:
    """[first, last] seconds: from the best second, extend while neighbours score >= best - threshold."""
    best = int(np.argmax(similarity))
    floor = similarity[best] - threshold
    first, last = best, best
    while first > 0 and similarity[first - 1] >= floor:
        first -= 1
    while last < len(similarity) - 1 and similarity[last + 1] >= floor:
        last += 1
    return first, last


@dataclass
class MomentRetrievalBaseline:
    mode: str = "threshold"  # threshold | window
    threshold: float = 0.10
    window: int = 8

    def __post_init__(self):
        if self.mode not in ("threshold", "window"):
            raise ConfigError(f"mode must be 'threshold' or 'window', got {self.mode!r}")

    def bounds(self, frames: np.ndarray, query: np.ndarray, video: str) -> list[float]:
        _same_space(frames, query, video)
        similarity = _unit(frames) @ _unit(query)
        if self.mode == "threshold":
            first, last = grow_moment(similarity, self.threshold)
        else:
            best = int(np.argmax(similarity))
            first, last = max(0, best - self.window), min(len(similarity) - 1, best + self.window)
        return [float(first), float(last + 1)]  # second `last` ends at last + 1

    def predict(self, features, pairs: Iterable[tuple[str, str]]) -> dict:
        """{query: {video: {"bounds": [s, e]}}} for each (query, video)."""
        out: dict[str, dict] = {}
        for query, video in pairs:
            out.setdefault(query, {})[video] = {"bounds": self.bounds(features.frames(video),
                                                                       features.query(query), video)}
        return out


@dataclass
class SSIMSegmentationBaseline:
    num_frames: int = 32
    threshold: float = 0.75
    frame_size: int = 112  # SSIM on grey frames of this size: structure, not compression noise
    backend: str = "decord"

    def boundaries(self, frames: np.ndarray, times: np.ndarray) -> list[float]:
        from skimage.metrics import structural_similarity

        grey = frames.astype(np.float32).mean(-1) / 255.0
        cuts = []
        for i in range(len(grey) - 1):
            if structural_similarity(grey[i], grey[i + 1], data_range=1.0) < self.threshold:
                cuts.append(float((times[i] + times[i + 1]) / 2))
        return cuts

    def segment(self, video_path: Path, moment: tuple[float, float]) -> list[list[float]]:
        from spacewalk.media.video import open_video

        start, end = moment
        with open_video(video_path, backend=self.backend, size=(self.frame_size, self.frame_size)) as reader:
            end = min(end, reader.duration)
            times = np.linspace(start, end, self.num_frames + 2)[1:-1]  # inside the moment, ends excluded
            frames = reader.frames_at(times)
        edges = [start, *(round(c) for c in self.boundaries(frames, times)), end]
        edges = sorted(set(edges))
        return [[float(a), float(b)] for a, b in zip(edges, edges[1:])] or [[float(start), float(end)]]

    def predict(self, videos_dir: Path, moments: dict[str, tuple[float, float]]) -> dict:
        """{video: {"bounds": [[s, e], ...]}} for each video and its (given) moment."""
        from tqdm import tqdm

        out = {}
        for video, moment in tqdm(moments.items(), desc="SSIM segmentation", unit="video"):
            path = Path(videos_dir) / video
            if not path.is_file():
                raise DataError("video file not found: SSIM segmentation reads pixels", file=path, item=video)
            out[video] = {"bounds": self.segment(path, moment)}
        return out


@dataclass
class HiRESTBaselines:
    """model=hirest_heuristics: one baseline per task, None where a task is left out (model.<task>=null)."""

    video_retrieval: VideoRetrievalBaseline | None = None
    moment_retrieval: MomentRetrievalBaseline | None = None
    moment_segmentation: SSIMSegmentationBaseline | None = None

    def by_task(self) -> dict[str, object | None]:
        """{task: baseline}, as spacewalk.benchmarks.hirest.evaluation.evaluate_hirest_baselines takes them."""
        return {"video_retrieval": self.video_retrieval, "moment_retrieval": self.moment_retrieval,
                "moment_segmentation": self.moment_segmentation}
