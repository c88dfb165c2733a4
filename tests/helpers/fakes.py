"""Small deterministic stand-ins for the encoders (and for features extracted elsewhere), for tests of what
consumes their output."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


def text_vector(text: str, dim: int) -> np.ndarray:
    if not text:
        return np.zeros(dim, np.float32)
    seed = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


class FakeText:
    def __init__(self, identity: str = "fake-text/1", dim: int = 8, fail_on_call: int | None = None):
        self.identity, self.dim, self.fail_on_call = identity, dim, fail_on_call
        self.calls, self.texts = 0, []

    def encode(self, texts):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("text encoder died")
        self.texts += list(texts)
        return np.stack([text_vector(t, self.dim) for t in texts]).reshape(len(texts), self.dim)


class FakeVideo:
    """A clip's mean colour, its length and its frame size: enough to see which frames went in."""

    dim, num_frames = 6, 12

    def __init__(self, identity: str = "fake-video/1", fail_on_call: int | None = None):
        self.identity, self.fail_on_call = identity, fail_on_call
        self.calls, self.shapes = 0, []

    def encode(self, clips):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("video encoder died")
        self.shapes += [c.shape for c in clips]
        return np.stack([self.features(c) for c in clips])

    @staticmethod
    def features(clip: np.ndarray) -> np.ndarray:
        t, h, w, _ = clip.shape
        return np.concatenate([clip.reshape(-1, 3).mean(0) / 255, [t / 10, h / 100, w / 100]]).astype(np.float32)


def write_external_features(bank_dir: Path, dataset, dim: int, seed: int = 0, with_dim: bool = True) -> dict:
    """Video features "extracted elsewhere" for every recording of `dataset`, as external bank folders
    (docs/feature_bank.md): video.npy on the 12 s grid, step_video.npy (Irrelevant's row zero), meta.json.
    Returns the video arrays by video id."""
    from spacewalk.media.grid import num_cells

    rng = np.random.default_rng(seed)
    out = {}
    for video_id, rec in dataset.recordings.items():
        folder = Path(bank_dir) / video_id
        folder.mkdir(parents=True)
        video = rng.standard_normal((num_cells(rec.duration, 12.0), dim)).astype(np.float16)
        steps = np.vstack([np.zeros((1, dim)), rng.standard_normal((rec.num_classes - 1, dim))]).astype(np.float16)
        np.save(folder / "video.npy", video)
        np.save(folder / "step_video.npy", steps)
        meta = {"external": True, "encoder": "made-up-extractor", "segment_seconds": 12.0}
        (folder / "meta.json").write_text(json.dumps(meta | ({"dim": dim} if with_dim else {})))
        out[video_id] = video
    return out


class FakeFrameVideo:
    """A frame-averaging encoder (like open_clip's): each frame's mean colour and brightness spread, as a
    unit vector; a clip is the normalised mean of its frames' vectors."""

    dim, num_frames, averages_frames = 4, 3, True

    def __init__(self, identity: str = "fake-frame-video/1"):
        self.identity, self.calls, self.shapes = identity, 0, []

    def encode(self, clips):
        self.calls += 1
        self.shapes += [c.shape for c in clips]
        return np.stack([unit(np.stack([unit(self.frame(f)) for f in c]).mean(0)) for c in clips]).astype(np.float32)

    @staticmethod
    def frame(frame: np.ndarray) -> np.ndarray:
        pixels = frame.reshape(-1, 3).astype(np.float64) / 255
        return np.concatenate([pixels.mean(0), [pixels.std() + 0.1]])


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


class RecordingLLM:
    """A text LLM stand-in (the caption-enhanced backend's second stage): remembers the prompts, gives `reply`."""

    name = "fake-llm"

    def __init__(self, reply: str = "B"):
        self.reply, self.prompts = reply, []

    def generate(self, prompts):
        self.prompts += list(prompts)
        return [self.reply] * len(prompts)
