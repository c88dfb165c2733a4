"""HiREST heuristic baselines on hand-made features and a hand-made video."""

from __future__ import annotations

import numpy as np
import pytest

from models.hirest_baselines import (
    MomentRetrievalBaseline,
    SSIMSegmentationBaseline,
    VideoRetrievalBaseline,
    grow_moment,
    video_embedding,
)
from spacewalk.core.errors import DataError

from helpers.lossless_videos import write_video


class TableFeatures:
    def __init__(self, frames: dict, queries: dict):
        self._frames, self._queries = frames, queries

    def frames(self, video):
        return self._frames[video]

    def query(self, text):
        return self._queries[text]


def _onehots(rows):
    return np.eye(4, dtype=np.float32)[rows]


def test_grow_moment_stops_where_the_score_drops():
    sim = np.array([0.1, 0.50, 0.55, 0.62, 0.60, 0.45, 0.58])
    assert grow_moment(sim, 0.10) == (2, 4)  # 0.50 < 0.52 stops the left side, 0.45 the right
    assert grow_moment(sim, 0.20) == (1, 6)
    assert grow_moment(np.array([0.3]), 0.1) == (0, 0)


def test_moment_retrieval_modes():
    frames = _onehots([1, 1, 0, 0, 0, 1, 1, 1, 1, 1])
    feats = TableFeatures({"v.mp4": frames}, {"q": np.array([1, 0, 0, 0], np.float32)})
    predicted = MomentRetrievalBaseline("threshold").predict(feats, [("q", "v.mp4")])
    assert predicted == {"q": {"v.mp4": {"bounds": [2.0, 5.0]}}}
    # window mode: 8 seconds each side of the best (the first best, second 2), clipped to the video
    assert MomentRetrievalBaseline("window", window=8).bounds(frames, feats.query("q"), "v.mp4") == [0.0, 10.0]
    assert MomentRetrievalBaseline("window", window=1).bounds(frames, feats.query("q"), "v.mp4") == [1.0, 4.0]
    with pytest.raises(ValueError):
        MomentRetrievalBaseline("grow")


def test_video_retrieval_ranks_by_mean_frame_similarity():
    feats = TableFeatures({"a.mp4": _onehots([0, 0, 1]), "b.mp4": _onehots([0, 0, 0]), "c.mp4": _onehots([2, 3])},
                          {"q": np.array([2.0, 0, 0, 0], np.float32)})
    out = VideoRetrievalBaseline(num_frames=20).predict(feats, ["q"], ["a.mp4", "b.mp4", "c.mp4"])
    assert out["q"]["videos"] == ["b.mp4", "a.mp4", "c.mp4"]
    assert out["q"]["scores"][0] == pytest.approx(1.0) and out["q"]["scores"][2] == pytest.approx(0.0)
    assert video_embedding(_onehots([0, 1, 2, 3]), 2) == pytest.approx(_onehots([0, 3]).mean(0) / np.sqrt(0.5))


def test_retrieval_refuses_embeddings_from_two_spaces():
    feats = TableFeatures({"a.mp4": np.ones((3, 192), np.float32)}, {"q": np.ones(384, np.float32)})
    with pytest.raises(DataError, match="192-d but query embeddings 384-d"):
        VideoRetrievalBaseline().predict(feats, ["q"], ["a.mp4"])
    with pytest.raises(DataError, match="image-text model"):
        MomentRetrievalBaseline().predict(feats, [("q", "a.mp4")])


def test_ssim_finds_the_cuts_between_visually_distinct_steps(tmp_path):
    rng = np.random.default_rng(0)
    # 4 fps, 30 s: three 10 s shots with different random textures (a cut between two is a big SSIM drop)
    shots = [rng.integers(0, 256, (1, 48, 48, 3), dtype=np.uint8) for _ in range(3)]
    frames = np.concatenate([np.repeat(s, 40, 0) for s in shots])
    write_video(tmp_path / "v.mp4", frames, rate=4)
    out = SSIMSegmentationBaseline(num_frames=32, frame_size=32).predict(tmp_path, {"v.mp4": (0.0, 30.0)})
    assert out == {"v.mp4": {"bounds": [[0.0, 10.0], [10.0, 20.0], [20.0, 30.0]]}}
    with pytest.raises(DataError, match="reads pixels"):
        SSIMSegmentationBaseline().predict(tmp_path, {"missing.mp4": (0.0, 5.0)})
