"""Decoding is checked exactly: the videos are lossless RGB (libx264rgb, qp 0), so every frame read back
must equal the frame written."""

import pickle
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.media import video
from spacewalk.media.video import (
    GridSegment,
    VideoReader,
    dense_timestamps,
    open_video,
    segment_timestamps,
    sparse_timestamps,
)

from helpers.lossless_videos import write_video
from helpers.window_decoding import Clip, decode_window

BACKENDS = ["decord", "pyav"]
H, W = 24, 40  # W is not a multiple of 32, so row padding in the decoders would show


def random_frames(n, seed):
    return np.random.default_rng(seed).integers(0, 256, (n, H, W, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    v10, v2997, v12s = random_frames(20, 0), random_frames(30, 1), random_frames(120, 2)
    return {
        "10fps": (write_video(root / "10fps.mp4", v10, 10), v10, 10.0),
        "29.97fps": (write_video(root / "2997.mp4", v2997, Fraction(30000, 1001)), v2997, 30000 / 1001),
        "12s": (write_video(root / "12s.mp4", v12s, 10, {"g": "10"}), v12s, 10.0),
        "faststart": write_video(root / "faststart.mp4", v10, 10, container_options={"movflags": "faststart"}),
        "root": root,
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["10fps", "29.97fps"])
def test_frames_at_returns_the_written_frames(videos, backend, name):
    path, frames, fps = videos[name]
    with open_video(path, backend) as reader:
        assert reader.path == path and reader.num_frames == len(frames)
        assert reader.fps == pytest.approx(fps) and reader.duration == pytest.approx(len(frames) / fps)
        np.testing.assert_array_equal(reader.frames_at(np.arange(len(frames)) / fps), frames)


@pytest.mark.parametrize("backend", BACKENDS)
def test_benchmark_timestamps_map_back_to_their_frames(videos, backend):
    path, frames, _ = videos["29.97fps"]
    with open_video(path, backend, timestamp_fps=29.97) as reader:
        np.testing.assert_array_equal(reader.frames_at(np.arange(30) / 29.97), frames)


def test_the_benchmark_clock_matters_on_long_recordings():
    # 8 h at 30000/1001: frame / 29.97 read on the stream's clock lands one frame late past ~4.6 h.
    reader = VideoReader(Path("long.mp4"), 30000 / 1001, 900_000, timestamp_fps=None)
    assert reader.frame_indices([863_000 / 29.97])[0] == 863_001  # one late
    benchmark = VideoReader(Path("long.mp4"), 30000 / 1001, 900_000, timestamp_fps=29.97)
    assert benchmark.frame_indices([862_999 / 29.97, 100 / 29.97]).tolist() == [862_999, 100]


@pytest.mark.parametrize("backend", BACKENDS)
def test_unsorted_and_duplicate_timestamps_come_back_in_request_order(videos, backend):
    path, frames, _ = videos["10fps"]
    with open_video(path, backend) as reader:
        got = reader.frames_at([1.0, 0.0, 1.0, 0.5, 1.9, 0.0])
    np.testing.assert_array_equal(got, frames[[10, 0, 10, 5, 19, 0]])


def test_timestamps_round_to_the_nearest_frame_and_clamp():
    reader = VideoReader(Path("v.mp4"), 10.0, 20, timestamp_fps=None)
    # round, not floor: 0.149 s is frame 1.49 -> 1, 0.151 s is 1.51 -> 2; the end clamps to the last frame
    assert reader.frame_indices([0.0, 0.149, 0.151, 1.96, 2.0, 2.1]).tolist() == [0, 1, 2, 19, 19, 19]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [-0.01, 2.1001, float("nan")])
def test_timestamps_outside_the_video_are_data_errors(videos, backend, bad):
    path = videos["10fps"][0]
    with open_video(path, backend) as reader, pytest.raises(DataError, match="timestamp") as error:
        reader.frames_at([0.5, bad])
    assert str(path) in str(error.value) and str(bad) in str(error.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_resize_at_decode(videos, backend):
    path = videos["10fps"][0]
    with open_video(path, backend, size=(12, 20)) as reader:
        assert reader.frames_at([0.0, 1.0]).shape == (2, 12, 20, 3)
        assert reader.frames_at([]).shape == (0, 12, 20, 3)


def test_both_backends_resize_alike(videos):
    path = videos["10fps"][0]
    decoded = [open_video(path, b, size=(12, 20)).frames_at([0.3, 1.7]) for b in BACKENDS]
    np.testing.assert_array_equal(*decoded)  # both bilinear


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_timestamps_gives_an_empty_batch(videos, backend):
    with open_video(videos["10fps"][0], backend) as reader:
        got = reader.frames_at([])
    assert got.shape == (0, H, W, 3) and got.dtype == np.uint8


class SeekSpy:
    """Stands in for a PyAV container, recording seeks and counting decoded frames."""

    def __init__(self, container):
        self.container, self.seeks, self.decoded = container, [], 0

    def seek(self, offset, **kwargs):
        self.seeks.append(offset)
        return self.container.seek(offset, **kwargs)

    def decode(self, *args):
        for frame in self.container.decode(*args):
            self.decoded += 1
            yield frame

    def __getattr__(self, name):
        return getattr(self.container, name)


def spied_pyav(path):
    reader = open_video(path, "pyav")
    spy = reader._container = SeekSpy(reader._container)
    return reader, spy


def test_pyav_serves_requests_in_time_order(videos):
    path, frames, _ = videos["12s"]
    order = [11.5, 0.0, 0.5, 11.0, 0.2, 0.5]
    reader, spy = spied_pyav(path)
    np.testing.assert_array_equal(reader.frames_at(order), frames[[115, 0, 5, 110, 2, 5]])
    # one seek to the start, one across the 10 s gap, forward only; each frame decoded at most once
    assert len(spy.seeks) == 2 and spy.seeks == sorted(spy.seeks)
    assert spy.decoded <= 6 + 2 * 10  # the requested frames plus at most a keyframe interval per seek


@pytest.mark.parametrize("gap, seeks", [(video.SEEK_GAP_SECONDS - 1, 1), (video.SEEK_GAP_SECONDS + 1, 2)])
def test_pyav_decodes_forward_over_short_gaps(videos, gap, seeks):
    reader, spy = spied_pyav(videos["12s"][0])
    reader.frames_at([0.0, gap])
    assert len(spy.seeks) == seeks


def test_pyav_continues_across_calls_in_time_order(videos):
    path, frames, _ = videos["12s"]
    reader, spy = spied_pyav(path)
    for t in [0.0, 0.5, 1.0, 2.9]:
        np.testing.assert_array_equal(reader.frames_at([t]), frames[[round(t * 10)]])
    assert len(spy.seeks) == 1
    np.testing.assert_array_equal(reader.frames_at([0.2]), frames[[2]])  # backwards: seek again
    assert len(spy.seeks) == 2


def test_decord_gets_each_frame_once_in_time_order(videos, monkeypatch):
    path, frames, _ = videos["10fps"]
    reader = open_video(path, "decord")
    calls = []
    get_batch = reader._reader.get_batch
    monkeypatch.setattr(reader._reader, "get_batch", lambda idx: calls.append(list(idx)) or get_batch(idx))
    np.testing.assert_array_equal(reader.frames_at([1.5, 0.2, 1.5, 0.9]), frames[[15, 2, 15, 9]])
    assert calls == [[2, 9, 15]]


def test_readers_stay_in_the_process_that_opened_them(videos):
    reader = open_video(videos["10fps"][0], "pyav")
    with pytest.raises(TypeError, match="inside the worker"):
        pickle.dumps(reader)
    reader._pid = -1  # as if a forked worker had inherited it
    with pytest.raises(RuntimeError, match="inside the DataLoader worker"):
        reader.frames_at([0.0])


def test_close_releases_the_container(videos):
    with open_video(videos["10fps"][0], "pyav") as reader:
        pass
    assert reader._container is None


# ---- errors name the file and what is wrong ----

def broken_files(videos):
    root = videos["root"]
    data = videos["10fps"][0].read_bytes()
    (root / "random.mp4").write_bytes(np.random.default_rng(0).bytes(4000))
    (root / "truncated.mp4").write_bytes(data[: len(data) // 2])  # the index (moov) is at the end: lost
    (root / "empty.mp4").write_bytes(b"")
    write_video(root / "zero.avi", random_frames(0, 0), 10)
    write_video(root / "zero.mp4", random_frames(0, 0), 10)  # mp4 drops a stream with no samples
    return {
        "missing.mp4": "no such video file",
        "random.mp4": "Invalid data",
        "truncated.mp4": "Invalid data",
        "empty.mp4": "Invalid data|End of file",
        "zero.avi": "no frames",
        "zero.mp4": "no video stream",
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_unreadable_files_are_data_errors(videos, backend):
    for name, reason in broken_files(videos).items():
        path = videos["root"] / name
        with pytest.raises(DataError, match=reason) as error:
            open_video(path, backend)
        assert str(path) in str(error.value), name


def test_a_truncated_stream_fails_where_it_breaks(videos):
    data = videos["faststart"].read_bytes()  # index up front: it opens, then decoding runs out
    path = videos["root"] / "faststart_truncated.mp4"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="cannot open video with decord") as error:  # it reads every packet
        open_video(path, "decord")
    assert str(path) in str(error.value)
    with open_video(path, "pyav") as reader:
        reader.frames_at([0.0])  # the first half still decodes
        with pytest.raises(DataError, match="cannot decode|stream ends") as error:
            reader.frames_at([1.9])
    assert str(path) in str(error.value)


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown video backend"):
        open_video("x.mp4", "opencv")


def test_decoding_on_a_gpu_is_decords_and_says_what_it_needs(videos):
    path, frames, _ = videos["10fps"]
    with pytest.raises(ConfigError, match="the PyAV reader decodes on the cpu only"):
        open_video(path, "pyav", device="cuda")
    with pytest.raises(ConfigError, match="decode_device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'"):
        open_video(path, "decord", device="gpu")
    try:
        reader = open_video(path, "decord", device="cuda:0")
    except ConfigError as e:  # decord from PyPI: built without CUDA
        assert "this decord was built without CUDA" in str(e) and "-DUSE_CUDA=ON" in str(e)
        return
    # a decord built with CUDA, on a GPU machine: NVDEC's frames, close to the written ones (lossy colour
    # conversion on the GPU, so not bit for bit)
    with reader:
        got = reader.frames_at([0.0, 1.0])
    assert np.abs(got.astype(int) - frames[[0, 10]]).mean() < 3


# ---- sampling ----

def test_sparse_takes_the_centres_of_equal_bins():
    np.testing.assert_allclose(sparse_timestamps(0, 10, 5), [1, 3, 5, 7, 9])
    np.testing.assert_allclose(sparse_timestamps(2, 4, 1), [3])
    np.testing.assert_allclose(sparse_timestamps(5, 5, 3), [5, 5, 5])


def test_dense_steps_from_the_window_start_and_stops_before_its_end():
    np.testing.assert_allclose(dense_timestamps(0, 3), [0, 1, 2])
    np.testing.assert_allclose(dense_timestamps(0.5, 3), [0.5, 1.5, 2.5])
    np.testing.assert_allclose(dense_timestamps(0, 3.2), [0, 1, 2, 3])
    np.testing.assert_allclose(dense_timestamps(0, 1, fps=4), [0, 0.25, 0.5, 0.75])
    assert len(dense_timestamps(0, 0.1 * 30)) == 3  # 3.0000000000000004 adds no frame
    assert len(dense_timestamps(2, 2)) == 0


def test_segments_are_whole_cells_of_the_grid_at_zero():
    def cells(*args, **kwargs):
        return [(s.index, s.start, s.end, s.timestamps.tolist()) for s in segment_timestamps(*args, **kwargs)]

    assert cells(0, 24) == [(0, 0, 12, list(range(12))), (1, 12, 24, list(range(12, 24)))]
    assert [c[0] for c in cells(5, 13)] == [0, 1]  # cells overlapping the window, not clipped to it
    assert [c[0] for c in cells(12, 24)] == [1]  # a window ending on a boundary takes no extra cell
    assert [c[0] for c in cells(13, 13)] == [1]  # an empty window still sits in one cell
    # float noise adds no cell: (0.1 + 0.2) * 80 is 24.000000000000004 (0.1 * 240 would be exactly 24.0)
    assert (0.1 + 0.2) * 80 > 24 and [c[0] for c in cells((0.1 + 0.2) * 40, (0.1 + 0.2) * 80)] == [1]
    assert cells(0, 8, seconds=4, fps=0.5) == [(0, 0, 4, [0, 2]), (1, 4, 8, [4, 6])]
    # the recording's last cell is partial; cells wholly past its end are dropped
    assert cells(0, 40, duration=30)[-1] == (2, 24, 36, list(range(24, 30)))
    assert [c[0] for c in cells(0, 48, duration=24)] == [0, 1]
    assert isinstance(segment_timestamps(0, 1)[0], GridSegment)


@pytest.mark.parametrize("call", [lambda: sparse_timestamps(0, 1, 0), lambda: sparse_timestamps(2, 1, 3),
                                  lambda: dense_timestamps(-1, 1), lambda: dense_timestamps(0, 1, fps=0),
                                  lambda: segment_timestamps(0, 1, seconds=0)])
def test_bad_sampling_arguments(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_window(videos, backend, monkeypatch):
    path, frames, _ = videos["10fps"]
    (clip,) = decode_window(path, 0, 2, "sparse", k=5, backend=backend)
    assert isinstance(clip, Clip) and clip.index == 0
    np.testing.assert_allclose(clip.timestamps, [0.2, 0.6, 1.0, 1.4, 1.8])
    np.testing.assert_array_equal(clip.frames, frames[[2, 6, 10, 14, 18]])

    (clip,) = decode_window(path, 0.5, 1.0, "dense", fps=5, backend=backend)
    np.testing.assert_array_equal(clip.frames, frames[[5, 7, 9]])

    calls = []
    frames_at = VideoReader.frames_at
    monkeypatch.setattr(VideoReader, "frames_at", lambda self, t: calls.append(t) or frames_at(self, t))
    clips = decode_window(path, 0.4, 2.0, "segments", seconds=1, fps=2, backend=backend)
    assert [c.index for c in clips] == [0, 1] and len(calls) == 1  # one pass for all cells
    np.testing.assert_array_equal(clips[0].frames, frames[[0, 5]])
    np.testing.assert_array_equal(clips[1].frames, frames[[10, 15]])
    # a 12 s cell on a 2 s video stops at the video's end
    (clip,) = decode_window(path, 0, 2, "segments", backend=backend)
    np.testing.assert_array_equal(clip.frames, frames[[0, 10]])

    with pytest.raises(ValueError, match="unknown sampling"):
        decode_window(path, 0, 2, "random", backend=backend)
    with pytest.raises(DataError, match="timestamp 30.0"):
        decode_window(path, 30, 40, "segments", backend=backend)
