"""HiREST features: the released layout reads as the authors' loader does; our extraction writes that same
layout, resumes, and rebuilds when the encoders change."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spacewalk.benchmarks.hirest.features import (
    ASR_FEATURES_DIR,
    FRAMES_DIR,
    HiRESTFeatures,
    extract_features,
    extracted_features,
    per_second,
    released_features,
)
from spacewalk.benchmarks.hirest.subtitles import Subtitle, read_srt, write_srt
from spacewalk.core.errors import DataError
from spacewalk.encoders import ThumbnailVideoEncoder

from helpers.fakes import FakeText
from helpers.lossless_videos import write_video


def test_srt_round_trip(tmp_path):
    subs = [Subtitle(0.5, 2.25, "hello there"), Subtitle(2.25, 7.0, "now add the flour")]
    assert read_srt(write_srt(tmp_path / "a.srt", subs)) == subs


def test_bad_srt_is_a_data_error(tmp_path):
    (tmp_path / "a.srt").write_text("1\nnot a time line\nhello\n")
    with pytest.raises(DataError, match="not a valid SRT") as e:
        read_srt(tmp_path / "a.srt")
    assert e.value.file == tmp_path / "a.srt"


def test_per_second_floors_and_later_subtitles_win():
    emb = np.eye(3, dtype=np.float32)
    subs = [Subtitle(0.9, 3.7, "a"), Subtitle(3.2, 5.0, "b"), Subtitle(8.0, 20.0, "c")]
    out = per_second(subs, emb, 10)
    # seconds [0, 3) from "a", [3, 5) from "b" (it overwrites), silence at 5..7, "c" clipped to the video
    assert out.argmax(1).tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 2, 2]
    assert out[5:8].sum() == 0 and out.shape == (10, 3)


@pytest.fixture
def released(tmp_path):
    """Fabricated files in the authors' released layout: two videos, 1024-d frames, 384-d subtitles."""
    data = tmp_path / "data"
    for sub in ("eva_clip_features", "ASR", ASR_FEATURES_DIR):
        (data / sub).mkdir(parents=True)
    rng = np.random.default_rng(0)
    for vid, seconds in (("aaa", 12), ("bbb", 7)):
        torch.save(torch.from_numpy(rng.standard_normal((seconds, 1024)).astype(np.float32)),
                   data / "eva_clip_features" / f"{vid}.mp4.pt")
        subs = [Subtitle(1.0, 4.5, f"{vid} one"), Subtitle(5.0, 6.0, f"{vid} two")]
        write_srt(data / "ASR" / f"{vid}.srt", subs)
        torch.save(torch.from_numpy(rng.standard_normal((2, 384)).astype(np.float32)),
                   data / ASR_FEATURES_DIR / f"{vid}.pt")
    torch.save({"Make Tea": torch.ones(1024)}, data / "queries.pt")
    return data


def test_released_layout_reads_without_video(released):
    feats = released_features(released, query_features=released / "queries.pt")
    frames = feats.frames("aaa.mp4")
    assert frames.shape == (12, 1024) and frames.dtype == np.float32 and feats.video_dim == 1024
    asr = feats.asr_per_second("aaa.mp4", len(frames))
    emb = torch.load(released / ASR_FEATURES_DIR / "aaa.pt").numpy()
    np.testing.assert_array_equal(asr[1:4], np.repeat(emb[:1], 3, 0))
    np.testing.assert_array_equal(asr[5], emb[1])
    assert not asr[[0, 4, 6, 7, 11]].any()
    assert feats.query("Make Tea").shape == (1024,) and feats.query_dim == 1024
    with pytest.raises(DataError, match="no embedding for this query"):
        feats.query("Make Coffee")


def test_released_layout_errors_name_the_file(released):
    feats = released_features(released, query_encoder=FakeText(dim=16))
    with pytest.raises(DataError, match="feature file not found") as e:
        feats.frames("zzz.mp4")
    assert e.value.item == "zzz.mp4"
    torch.save(torch.zeros(3, 384), released / ASR_FEATURES_DIR / "bbb.pt")
    with pytest.raises(DataError, match="3 x 384 embeddings for 2 subtitles") as e:
        feats.asr_per_second("bbb.mp4", 7)
    assert e.value.file == released / ASR_FEATURES_DIR / "bbb.pt"
    torch.save(torch.zeros(5, 512), released / "eva_clip_features" / "bbb.mp4.pt")
    feats.frames("aaa.mp4")
    with pytest.raises(DataError, match="width 512 differs"):
        feats.frames("bbb.mp4")
    (released / "eva_clip_features" / "bbb.mp4.pt").write_bytes(b"truncated")
    with pytest.raises(DataError, match="not a readable torch file"):
        feats.frames("bbb.mp4")


def test_without_asr_every_second_is_silent(released):
    feats = HiRESTFeatures(released / "eva_clip_features", query_encoder=FakeText(dim=8))
    assert not feats.has_asr and not feats.asr_per_second("aaa.mp4", 12).any()
    with pytest.raises(DataError, match="or neither"):
        HiRESTFeatures(released / "eva_clip_features", asr_dir=released / "ASR", query_encoder=FakeText())


def _videos(tmp_path):
    """Two 4 fps videos whose seconds have distinct flat colours, and a subtitle for one of them."""
    vdir = tmp_path / "videos"
    vdir.mkdir()
    colours = {"v1": [(255, 0, 0), (0, 255, 0), (0, 0, 255)], "v2": [(255, 255, 0), (0, 255, 255)]}
    for vid, cols in colours.items():
        frames = np.concatenate([np.full((4, 32, 32, 3), c, np.uint8) for c in cols])
        write_video(vdir / f"{vid}.mp4", frames, rate=4)
    asr = tmp_path / "asr"
    write_srt(asr / "v1.srt", [Subtitle(0.0, 2.0, "pour the red paint")])
    return vdir, asr


def test_extraction_writes_the_released_layout_and_resumes(tmp_path):
    vdir, asr = _videos(tmp_path)
    out, enc, text = tmp_path / "feats", ThumbnailVideoEncoder(grid=2), FakeText(dim=384)
    extract_features(["v1.mp4", "v2.mp4"], ["Paint a wall"], vdir, out, enc, text, asr_source_dir=asr,
                     frame_size=None)
    feats = extracted_features(out)
    f1 = feats.frames("v1.mp4")
    assert f1.shape == (3, 12) and feats.frames("v2.mp4").shape == (2, 12)
    # one row per second, each the colour of that second: red, green, blue are mutually far apart
    assert (f1 @ f1.T)[~np.eye(3, dtype=bool)].max() < 0.5
    a = feats.asr_per_second("v1.mp4", 3)
    assert a[:2].any(axis=1).all() and not a[2].any()
    assert not feats.asr_per_second("v2.mp4", 2).any()
    assert feats.query("Paint a wall").shape == (384,)
    # resume: nothing is encoded again when the meta matches
    calls = text.calls
    (out / FRAMES_DIR / "v2.mp4.pt").unlink()
    extract_features(["v1.mp4", "v2.mp4"], ["Paint a wall"], vdir, out, enc, text, asr_source_dir=asr,
                     frame_size=None)
    assert text.calls == calls and (out / FRAMES_DIR / "v2.mp4.pt").is_file()
    # another encoder: rebuilt
    extract_features(["v1.mp4", "v2.mp4"], ["Paint a wall"], vdir, out, ThumbnailVideoEncoder(grid=4), text,
                     asr_source_dir=asr, frame_size=None)
    assert extracted_features(out).frames("v1.mp4").shape == (3, 48)


def test_extraction_of_a_missing_video_names_it(tmp_path):
    vdir, asr = _videos(tmp_path)
    with pytest.raises(DataError, match="video file not found") as e:
        extract_features(["v3.mp4"], [], vdir, tmp_path / "f", ThumbnailVideoEncoder(2), FakeText(dim=384),
                         frame_size=None)
    assert e.value.item == "v3.mp4"
