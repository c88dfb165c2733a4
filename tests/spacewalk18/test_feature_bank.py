from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import IRRELEVANT_DESCRIPTION, Spacewalk18
from spacewalk.benchmarks.spacewalk18.data.windows import TranscriptIndex, Window
from spacewalk.benchmarks.spacewalk18.features.bank import LOCKS, FeatureBank
from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
from spacewalk.benchmarks.spacewalk18.features.load import RecordingBank
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.media.grid import num_cells
from spacewalk.media.video import dense_timestamps, segment_timestamps

from fakes import FakeFrameVideo, FakeText, FakeVideo, text_vector
from window_decoding import decode_window

SYNTHETIC = dict(n_train=1, n_val=1, n_test=1, minutes=(3, 4), steps_per_video=(3, 4), samples_per_video=100,
                 retrieval_samples_per_video=10, questions_per_video=2, progress=False)
SMALL = BankConfig(segment_seconds=12.0, fps=1.0, frame_size=32, video_backend="pyav")


@pytest.fixture
def synthetic_root(synthetic_spacewalk18) -> Path:
    return synthetic_spacewalk18(**SYNTHETIC)


@pytest.fixture
def synthetic_copy(synthetic_root, tmp_path) -> Path:
    return Path(shutil.copytree(synthetic_root, tmp_path / "sw18"))


def folders(directory: Path) -> list[str]:
    """What a bank directory holds, but its lock files (.locks/, empty files that stay: filelock's way)."""
    return sorted(p.name for p in directory.iterdir() if p.name != LOCKS) if directory.exists() else []


# ---- the grid -------------------------------------------------------------------------------------


def grid_bank(duration: float, k: float = 12.0) -> RecordingBank:
    n = num_cells(duration, k)
    z = np.zeros((n, 1), np.float16)
    return RecordingBank("v", k, n, duration, None, z, z[:0], np.zeros(0), np.zeros(0), None, z[:2], z[:2])


def test_cell_grid_at_its_edges():
    bank = grid_bank(125.0)
    assert bank.num_cells == 11 and num_cells(120.0, 12) == 10 and num_cells(120.5, 12) == 11
    # 12 * (0.7 / 0.1) / 7 is 11.999999999999998: float noise, still cell 1
    assert [bank.cell_of(t) for t in (0, 11.999, 12, 12 * (0.7 / 0.1) / 7, 119.99, 120, 125)] == [0, 0, 1, 1, 9, 10, 10]
    assert bank.cells_in(0, 125).tolist() == list(range(11))
    assert bank.cells_in(12, 24).tolist() == [1]  # half-open: 24 belongs to the next cell
    assert bank.cells_in(11.5, 12.5).tolist() == [0, 1]
    assert bank.cells_in(5, 5).tolist() == [0] and bank.cells_in(125, 125).tolist() == [10]
    assert grid_bank(120.0).cells_in(100, 120).tolist() == [8, 9]
    for bad in ((-1, 5), (5, 126), (7, 6)):
        with pytest.raises(ValueError):
            bank.cells_in(*bad)
    with pytest.raises(ValueError):
        bank.cell_of(125.5)
    # the same grid as the video decoder's
    rng = np.random.default_rng(0)
    for start, end in np.sort(rng.uniform(0, 125, (200, 2)), axis=1):
        cells = [s.index for s in segment_timestamps(start, end, 12.0, 1.0, duration=125.0)]
        assert bank.cells_in(start, end).tolist() == cells


# ---- text-only banks (the hand-made root: no videos) ------------------------------------------------


class SlowText(FakeText):
    """Encodes slowly, so that two builders started together both find every recording stale at first."""

    def encode(self, texts):
        time.sleep(0.05)
        return super().encode(texts)


def test_two_builders_of_one_bank_build_each_recording_once(tiny_root, tmp_path):
    # parallel jobs (hydra/launcher=local) share a bank: the second waits for the first's recording, then uses it
    data = Spacewalk18(tiny_root)
    builders = [FeatureBank(tmp_path / "bank", data, SlowText(), FakeVideo(), SMALL) for _ in range(2)]
    with ThreadPoolExecutor(2) as pool:
        built = [f.result() for f in [pool.submit(b.build, progress=False) for b in builders]]
    assert sorted(built[0] + built[1]) == sorted(data.recordings)
    assert all(builders[0].is_fresh(v) and builders[1].load(v).num_cells > 0 for v in data.recordings)


def test_text_only_bank(tiny_root, tmp_path):
    data = Spacewalk18(tiny_root)
    text = FakeText()
    bank = FeatureBank(tmp_path / "bank", data, text, FakeVideo(), SMALL)
    assert bank.build(progress=False) == list(data.recordings)
    for video_id, rec in data.recordings.items():
        b = bank.load(video_id)
        assert (b.num_cells, b.duration, b.segment_seconds) == (10, 120.0, 12.0)
        assert b.video is None and b.step_video is None  # no video file: text alone
        for name in ("cell_text", "sentence_text", "step_narration", "step_caption"):
            array = getattr(b, name)
            assert isinstance(array, np.memmap) and array.dtype == np.float16 and array.shape[1] == 8
        assert b.cell_text.shape[0] == 10 and b.sentence_text.shape[0] == len(rec.transcript) == 4
        assert b.step_narration.shape[0] == b.step_caption.shape[0] == 3
        index = TranscriptIndex(rec.transcript)
        cell_texts = [index.text_in(Window(j * 12.0, min((j + 1) * 12.0, 120.0))) for j in range(10)]
        assert cell_texts[0] == "first we open the hatch" and cell_texts[5] == "" and cell_texts[9] == "wrapping up"
        expect = lambda texts: np.stack([text_vector(t, 8) for t in texts]).astype(np.float16)  # noqa: E731
        np.testing.assert_array_equal(b.cell_text, expect(cell_texts))
        np.testing.assert_array_equal(b.sentence_text, expect([s.text for s in rec.transcript]))
        np.testing.assert_array_equal(b.sentence_start, [2.0, 12.0, 50.0, 95.0])
        np.testing.assert_array_equal(b.sentence_end, [5.0, 20.0, 60.0, 110.0])
        np.testing.assert_array_equal(b.step_narration, expect([IRRELEVANT_DESCRIPTION, "first we open the hatch", ""]))
        np.testing.assert_array_equal(b.step_caption,
                                      expect([IRRELEVANT_DESCRIPTION, "open the hatch", "install the battery"]))
        meta = json.loads((tmp_path / "bank" / video_id / "meta.json").read_text())
        assert meta["encoders"] == {"text": "fake-text/1", "video": None}
        assert meta["config"] == {"segment_seconds": 12.0} and meta["sources"]["video"] is None
    # each distinct text once per recording (the three share one transcript), the empty one never
    assert "" not in text.texts and len(text.texts) == 3 * len(set(text.texts)) == 3 * 7
    assert bank.build(progress=False) == []


@pytest.mark.parametrize("name", ["cell_text", "sentence_text", "step_narration", "step_caption"])
def test_a_nan_row_in_a_built_banks_text_is_refused_on_load(tiny_root, tmp_path, name):
    # the builder checks what it encodes; a bank damaged or edited afterwards must not train on NaN
    data = Spacewalk18(tiny_root)
    bank = FeatureBank(tmp_path / "bank", data, FakeText(), FakeVideo(), SMALL)
    bank.build(progress=False)
    video_id = next(iter(data.recordings))
    bank.load(video_id)  # intact: loads
    assert_refused_on_load(bank, tmp_path / "bank", video_id, name, (1, 3), np.nan)


def assert_refused_on_load(bank, folder, video_id, name, where, value):
    """Write `value` at `where` of the built bank's array `name`; loading the recording is then refused, naming
    the array's file, the recording, the array and the first bad row."""
    path = folder / video_id / f"{name}.npy"
    array = np.load(path, mmap_mode="r+")
    array[where] = value
    array.flush()
    del array
    with pytest.raises(DataError, match=f"non-finite values.*row {where[0]}") as e:
        bank.load(video_id)
    assert (e.value.file, e.value.item, e.value.field) == (path, video_id, name)


def test_changes_mark_only_the_affected_recordings_stale(tiny_root, tmp_path):
    data = Spacewalk18(tiny_root)
    ids = list(data.recordings)
    FeatureBank(tmp_path / "bank", data, FakeText(), None, SMALL).build(progress=False)
    bank = FeatureBank(tmp_path / "bank", data, FakeText(), None, SMALL)
    assert all(bank.is_fresh(v) for v in ids)

    with open(data.recordings[ids[1]].transcript_path, "a", encoding="cp1252", newline="") as f:
        f.write("one more sentence,100.0,104.0\r\n")
    assert [bank.is_fresh(v) for v in ids] == [True, False, True]
    with pytest.raises(DataError, match="stale"):
        bank.load(ids[1])
    assert bank.build(progress=False) == [ids[1]]
    assert bank.load(ids[1]).sentence_text.shape[0] == 5

    # video settings do not touch a bank without video; the grid and the text encoder do
    assert FeatureBank(tmp_path / "bank", data, FakeText(), FakeVideo(), BankConfig(12.0, fps=2.0)).build(
        progress=False) == []
    assert FeatureBank(tmp_path / "bank", data, FakeText("fake-text/2"), None, SMALL).build(progress=False) == ids
    coarse = FeatureBank(tmp_path / "bank", data, FakeText("fake-text/2"), None, BankConfig(30.0))
    assert coarse.build(progress=False) == ids and coarse.load(ids[0]).num_cells == 4

    steps_file = tiny_root / "data/steps.json"
    steps = json.loads(steps_file.read_text())
    steps[ids[2]][1]["caption"] = "open the outer hatch"
    steps_file.write_text(json.dumps(steps))
    edited = FeatureBank(tmp_path / "bank", Spacewalk18(tiny_root), FakeText("fake-text/2"), None, BankConfig(30.0))
    assert [edited.is_fresh(v) for v in ids] == [True, True, False]


def test_interrupted_build_leaves_nothing_half_written(tiny_root, tmp_path):
    data = Spacewalk18(tiny_root)
    ids = list(data.recordings)
    directory = tmp_path / "bank"
    with pytest.raises(RuntimeError, match="died"):
        FeatureBank(directory, data, FakeText(fail_on_call=2), texts_per_batch=4).build(progress=False)
    assert folders(directory) == []  # no final folder, no partial one

    bank = FeatureBank(directory, data, FakeText())
    bank.build(progress=False)
    before = {v: (directory / v / "meta.json").read_text() for v in ids}
    # a rebuild that dies keeps the previous bank whole
    with pytest.raises(RuntimeError):
        FeatureBank(directory, data, FakeText("fake-text/2", fail_on_call=1)).build(progress=False)
    assert folders(directory) == ids
    assert {v: (directory / v / "meta.json").read_text() for v in ids} == before
    assert all(bank.is_fresh(v) for v in ids)


def test_ranks_partition_the_recordings(tiny_root, tmp_path):
    data = Spacewalk18(tiny_root)
    ids = list(data.recordings)
    for world_size in (2, 4):
        directory = tmp_path / f"bank{world_size}"
        built = [FeatureBank(directory, data, FakeText()).build(progress=False, rank=r, world_size=world_size)
                 for r in range(world_size)]
        assert built == [ids[r::world_size] for r in range(world_size)]
        assert folders(directory) == sorted(ids)
    with pytest.raises(ValueError):
        FeatureBank(tmp_path, data, FakeText()).build(rank=2, world_size=2)
    with pytest.raises(ValueError, match="unknown"):
        FeatureBank(tmp_path, data, FakeText()).build(["12312099"])


def test_a_foreign_folder_is_never_replaced(tiny_root, tmp_path):
    data = Spacewalk18(tiny_root)
    video_id = next(iter(data.recordings))
    (tmp_path / "bank" / video_id).mkdir(parents=True)
    (tmp_path / "bank" / video_id / "video.npy").write_bytes(b"mine")
    with pytest.raises(DataError, match="no meta.json") as e:
        FeatureBank(tmp_path / "bank", data, FakeText()).build(progress=False)
    assert e.value.item == video_id
    assert (tmp_path / "bank" / video_id / "video.npy").read_bytes() == b"mine"


# ---- video (the synthetic set has real mp4s) --------------------------------------------------------


def test_video_bank_on_the_synthetic_set(synthetic_root, tmp_path):
    data = Spacewalk18(synthetic_root)
    video = FakeVideo()
    bank = FeatureBank(tmp_path / "bank", data, FakeText(), video, SMALL, frames_per_batch=50)
    assert bank.build(progress=False) == list(data.recordings)
    assert max(video.shapes[i][0] for i in range(len(video.shapes))) <= 50
    for video_id, rec in data.recordings.items():
        b = bank.load(video_id)
        n = num_cells(rec.duration, 12.0)
        assert isinstance(b.video, np.memmap) and b.video.dtype == np.float16 and b.video.shape == (n, 6)
        assert b.step_video.shape == (len(rec.steps), 6) and not b.step_video[0].any()
        frames = b.video[:, 3] * 10  # the fake encoder's clip length: 12 frames a full cell, fewer at the end
        np.testing.assert_allclose(frames[:-1], 12)
        assert frames[-1] == len(dense_timestamps(12.0 * (n - 1), rec.duration))
        np.testing.assert_allclose(b.video[:, 4:], 0.32, atol=1e-3)  # decoded at 32 x 32
        for step in rec.steps[1:]:
            assert b.step_video[step.index, 3] * 10 == pytest.approx(
                len(dense_timestamps(step.animation_start, step.animation_end)))
        # the same frames as decoding the cell on its own
        for j in (0, n // 2, n - 2):
            (clip,) = decode_window(rec.video_path, 12.0 * j, 12.0 * (j + 1), "segments", seconds=12.0,
                                    size=(32, 32), backend="pyav")
            np.testing.assert_array_equal(b.video[j], FakeVideo.features(clip.frames).astype(np.float16))
        step = rec.steps[1]
        (clip,) = decode_window(rec.video_path, step.animation_start, step.animation_end, "dense", size=(32, 32),
                                backend="pyav")
        np.testing.assert_array_equal(b.step_video[1], FakeVideo.features(clip.frames).astype(np.float16))
        meta = json.loads((tmp_path / "bank" / video_id / "meta.json").read_text())
        assert meta["config"] == {"segment_seconds": 12.0, "fps": 1.0, "frame_size": 32, "video_backend": "pyav"}
        assert set(meta["sources"]["video"]) == {"size", "mtime_ns"} and meta["dims"] == {"text": 8, "video": 6}

    # the default backend decodes the same cells
    decord = FeatureBank(tmp_path / "decord", data, FakeText(), FakeVideo(), BankConfig(frame_size=None))
    video_id = next(iter(data.recordings))
    assert decord.build([video_id], progress=False) == [video_id]
    np.testing.assert_allclose(decord.load(video_id).video[:, 3:], bank.load(video_id).video[:, 3:] * [1, 2, 2])


@pytest.mark.parametrize("name", ["video", "step_video"])
def test_a_nan_row_in_a_built_banks_video_is_refused_on_load(synthetic_root, tmp_path, name):
    data = Spacewalk18(synthetic_root)
    bank = FeatureBank(tmp_path / "bank", data, FakeText(), FakeVideo(), SMALL)
    video_id = next(iter(data.recordings))
    bank.build([video_id], progress=False)
    assert bank.load(video_id).video is not None
    assert_refused_on_load(bank, tmp_path / "bank", video_id, name, (2, 0), np.inf)


def test_a_frame_averaging_encoder_keeps_per_frame_features(synthetic_root, tmp_path):
    # for sparse frame sampling: every 1 fps frame's feature, and the cells derived from them
    data = Spacewalk18(synthetic_root)
    video_id, rec = next(iter(data.recordings.items()))
    encoder = FakeFrameVideo()
    bank = FeatureBank(tmp_path / "bank", data, FakeText(), encoder, SMALL, frames_per_batch=30)
    bank.build([video_id], progress=False)
    b = bank.load(video_id)
    # the cells' frames went in one by one (the steps' animations as whole clips), 30 at most per call
    assert sum(shape[0] == 1 for shape in encoder.shapes) >= len(b.frame_time) > 30
    n = num_cells(rec.duration, 12.0)
    np.testing.assert_array_equal(b.frame_time, dense_timestamps(0.0, rec.duration))
    assert b.frame_video.shape == (len(b.frame_time), FakeFrameVideo.dim) and b.video.shape == (n, FakeFrameVideo.dim)
    for j in (0, n // 2, n - 1):
        (clip,) = decode_window(rec.video_path, 12.0 * j, min(12.0 * (j + 1), rec.duration), "segments",
                                seconds=12.0, size=(32, 32), backend="pyav")
        np.testing.assert_allclose(b.video[j], encoder.encode([clip.frames])[0], atol=2e-3)  # = the cell as one clip
        np.testing.assert_allclose(b.frame_video[12 * j], encoder.encode([clip.frames[:1]])[0], atol=2e-3)
    meta = json.loads((tmp_path / "bank" / video_id / "meta.json").read_text())
    assert meta["config"]["frame_features"] is True
    # a clip encoder's bank keeps none (and its meta is what it always was: such banks stay fresh)
    clips = FeatureBank(tmp_path / "clips", data, FakeText(), FakeVideo(), SMALL)
    clips.build([video_id], progress=False)
    assert clips.load(video_id).frame_video is None and not (tmp_path / "clips" / video_id / "frame_video.npy").exists()


def test_video_changes_and_a_recording_without_video(synthetic_copy, tmp_path, caplog):
    data = Spacewalk18(synthetic_copy)
    ids = list(data.recordings)
    data.recordings[ids[0]].video_path.unlink()
    directory = tmp_path / "bank"
    with caplog.at_level(logging.WARNING, logger="spacewalk.benchmarks.spacewalk18.features.bank"):
        bank = FeatureBank(directory, data, FakeText(), FakeVideo(), SMALL)
        assert bank.build(progress=False) == ids
        assert bank.load(ids[0]).video is None and bank.load(ids[1]).video is not None
    warnings = [r for r in caplog.records if "no video file" in r.getMessage()]
    assert len(warnings) == 1 and ids[0] in warnings[0].getMessage()

    with_video = ids[1:]
    assert FeatureBank(directory, data, FakeText(), FakeVideo("fake-video/2"), SMALL).build(progress=False) \
        == with_video
    half_fps = BankConfig(12.0, fps=0.5, frame_size=32, video_backend="pyav")
    assert FeatureBank(directory, data, FakeText(), FakeVideo("fake-video/2"), half_fps).build(progress=False) \
        == with_video
    # touching a video file (a new download) makes only that recording stale
    bank = FeatureBank(directory, data, FakeText(), FakeVideo("fake-video/2"), half_fps)
    path = data.recordings[ids[2]].video_path
    path.write_bytes(path.read_bytes())
    assert [bank.is_fresh(v) for v in ids] == [True, True, False]
    # a video encoder dying halfway leaves the old bank
    with pytest.raises(RuntimeError, match="died"):
        FeatureBank(directory, data, FakeText(), FakeVideo("fake-video/2", fail_on_call=2), half_fps,
                    frames_per_batch=30).build(progress=False)
    assert folders(directory) == sorted(ids)
    assert bank.build(progress=False) == [ids[2]]
    # a text-only run reads the text of a bank with video instead of rebuilding it without video
    text_only = FeatureBank(directory, data, FakeText(), None, SMALL)
    assert text_only.build(progress=False) == [] and text_only.load(ids[1]).video is None
    assert bank.is_fresh(ids[1])


# ---- bring-your-own features ------------------------------------------------------------------------


def write_external(folder: Path, rows: int, steps: int, dim: int = 5, meta: dict | None = None) -> np.ndarray:
    folder.mkdir(parents=True, exist_ok=True)
    video = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
    np.save(folder / "video.npy", video)
    np.save(folder / "step_video.npy", np.ones((steps, dim), np.float16))
    meta = {"external": True, "encoder": "egovlp-test", "segment_seconds": 12.0} | (meta or {})
    (folder / "meta.json").write_text(json.dumps(meta))
    return video


def test_external_video_features_load_like_our_own(tiny_root, tmp_path):
    data = Spacewalk18(tiny_root)
    ids = list(data.recordings)
    directory = tmp_path / "bank"
    external = write_external(directory / ids[0], rows=10, steps=3)
    bank = FeatureBank(directory, data, FakeText(), None, SMALL)
    assert bank.build(progress=False) == ids  # the external one gets text arrays
    b = bank.load(ids[0])
    np.testing.assert_array_equal(b.video, external)
    assert b.step_video.shape == (3, 5) and b.cell_text.shape == (10, 8)
    assert (directory / ids[0] / "text" / "meta.json").is_file()
    np.testing.assert_array_equal(b.cell_text, bank.load(ids[1]).cell_text)  # same transcripts
    assert bank.build(progress=False) == [] and bank.is_fresh(ids[0])
    # a new text encoder rebuilds its text, never the external features
    stamp = (directory / ids[0] / "video.npy").stat().st_mtime_ns
    assert FeatureBank(directory, data, FakeText("fake-text/2"), None, SMALL).build(progress=False) == ids
    assert (directory / ids[0] / "video.npy").stat().st_mtime_ns == stamp

    # text arrays shipped with the features are used as they are
    bank = FeatureBank(directory, data, FakeText("fake-text/2"), None, SMALL)
    theirs = directory / ids[2]
    shutil.rmtree(theirs)
    write_external(theirs, rows=10, steps=3)
    for name in ("cell_text", "sentence_text", "step_narration", "step_caption", "sentence_start", "sentence_end"):
        np.save(theirs / f"{name}.npy", np.asarray(getattr(b, name)))
    assert bank.build(progress=False) == [] and not (theirs / "text").exists()
    np.testing.assert_array_equal(bank.load(ids[2]).sentence_text, b.sentence_text)


@pytest.mark.parametrize("breakage, file, field", [
    (dict(rows=9), "video.npy", "video"),
    (dict(nan=True), "video.npy", "video"),
    (dict(step_dim=4), "step_video.npy", "step_video"),
    (dict(meta={"segment_seconds": 10.0}), "meta.json", "segment_seconds"),
    (dict(meta={"encoder": None}), "meta.json", "encoder"),
    (dict(meta={"dim": 7}), "video.npy", "video"),
    (dict(no_video=True), "video.npy", "video"),
    (dict(partial_text=True), "sentence_text.npy", "sentence_text"),
    (dict(int_dtype=True), "video.npy", "video"),
])
def test_bad_external_features_name_the_file_the_video_and_the_field(tiny_root, tmp_path, breakage, file, field):
    data = Spacewalk18(tiny_root)
    video_id = next(iter(data.recordings))
    folder = tmp_path / "bank" / video_id
    write_external(folder, rows=breakage.get("rows", 10), steps=3, meta=breakage.get("meta"))
    if breakage.get("nan"):
        video = np.load(folder / "video.npy")
        video[4, 2] = np.nan
        np.save(folder / "video.npy", video)
    if "step_dim" in breakage:
        np.save(folder / "step_video.npy", np.zeros((3, breakage["step_dim"]), np.float16))
    if breakage.get("no_video"):
        (folder / "video.npy").unlink()
    if breakage.get("partial_text"):
        np.save(folder / "cell_text.npy", np.zeros((10, 8), np.float16))
    if breakage.get("int_dtype"):
        np.save(folder / "video.npy", np.zeros((10, 5), np.int64))
    bank = FeatureBank(tmp_path / "bank", data, FakeText(), None, SMALL)
    for attempt in (lambda: bank.build(progress=False), lambda: bank.load(video_id)):
        with pytest.raises(DataError) as e:
            attempt()
        assert Path(e.value.file).name == file and e.value.item == video_id and e.value.field == field
        assert file in str(e.value) and video_id in str(e.value) and repr(field) in str(e.value)


def test_external_widths_must_agree_across_recordings(tiny_root, tmp_path):
    data = Spacewalk18(tiny_root)
    ids = list(data.recordings)
    write_external(tmp_path / "bank" / ids[0], rows=10, steps=3, dim=5)
    write_external(tmp_path / "bank" / ids[1], rows=10, steps=3, dim=6)
    with pytest.raises(DataError, match=ids[0]) as e:
        FeatureBank(tmp_path / "bank", data, FakeText(), None, SMALL).build(progress=False)
    assert e.value.item == ids[1] and e.value.field == "video"


# ---- the real annotations ---------------------------------------------------------------------------


def test_real_annotations_build_text_only(real_spacewalk18_root, tmp_path):
    data = Spacewalk18(real_spacewalk18_root)
    video_id = data.splits["val"][0]
    rec = data.recordings[video_id]
    bank = FeatureBank(tmp_path / "bank", data, FakeText(dim=16), FakeVideo())
    assert bank.build([video_id], progress=False) == [video_id]
    assert folders(tmp_path / "bank") == [video_id]
    b = bank.load(video_id)
    n = num_cells(rec.duration, 12.0)
    assert b.video is None and b.cell_text.shape == (n, 16) and n > 1000  # hours of recording
    assert b.sentence_text.shape == (len(rec.transcript), 16) and b.step_caption.shape == (len(rec.steps), 16)
    index = TranscriptIndex(rec.transcript)
    for j in np.random.default_rng(0).choice(n, 20, replace=False):
        text = index.text_in(Window(12.0 * j, min(12.0 * (j + 1), rec.duration)))
        np.testing.assert_array_equal(b.cell_text[j], text_vector(text, 16).astype(np.float16))
    assert b.cells_in(*[w for w in (300.0, 600.0)]).tolist() == list(range(25, 50))
    assert bank.build([video_id], progress=False) == []


def write_painted_video(path: Path, n: int) -> Path:
    """A lossless 29.97 fps video whose frame i is painted with i, so decoded frames name themselves."""
    from fractions import Fraction

    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264rgb", rate=Fraction(30000, 1001))
        stream.width, stream.height, stream.pix_fmt = 40, 24, "rgb24"  # decord mishandles tiny widths
        stream.options = {"qp": "0", "preset": "ultrafast"}
        for i in range(n):
            frame = np.zeros((24, 40, 3), np.uint8)
            frame[..., 0], frame[..., 1] = i % 256, i // 256
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return path


class FrameIds(FakeVideo):
    def encode(self, clips):
        self.shapes += [[int(f[0, 0, 0]) + 256 * int(f[0, 0, 1]) for f in clip] for clip in clips]
        return np.zeros((len(clips), self.dim), np.float32)


def test_a_29_97_fps_recording_is_read_on_the_benchmark_clock(tiny_root, tmp_path, monkeypatch):
    from spacewalk.benchmarks.spacewalk18.features import build as bank_build

    data = Spacewalk18(tiny_root)
    rec = data.recordings["01012020"]
    write_painted_video(rec.video_path, rec.num_frames + 3)  # a hair longer than the annotation, as downloads are
    clocks = []
    opened = bank_build.open_video
    monkeypatch.setattr(bank_build, "open_video", lambda *a: clocks.append(a[3]) or opened(*a))
    video = FrameIds()
    bank = FeatureBank(tmp_path / "bank", data, FakeText(), video, BankConfig(frame_size=None))
    assert bank.build(["01012020"], progress=False) == ["01012020"]
    assert clocks == [29.97]
    steps, cells = video.shapes[:2], video.shapes[2:]
    assert steps == [[round(t * 29.97) for t in dense_timestamps(s.animation_start, s.animation_end)]
                     for s in rec.steps[1:]]
    assert cells == [[round((12 * j + m) * 29.97) for m in range(12)] for j in range(10)]

    # a video that ends well before its annotation is an error, not silently repeated frames
    short = data.recordings["02022020"]
    write_painted_video(short.video_path, short.num_frames - 100)
    with pytest.raises(DataError, match="annotation runs to") as e:
        bank.build(["02022020"], progress=False)
    assert e.value.item == "02022020" and e.value.field == "duration"
    assert folders(tmp_path / "bank") == ["01012020"]


# ---- decoding ahead (spacewalk/media/frame_prefetch.py) gives today's serial bank ---------------------------


class DigestVideo(FakeVideo):
    """FakeVideo that also keeps a digest of every clip's pixels, in the order the clips came (uint8 pixels
    decoded on this machine by either builder: integers, so their digests compare them exactly)."""

    def __init__(self, averages_frames: bool):
        super().__init__()
        self.averages_frames, self.digests = averages_frames, []

    def encode(self, clips):
        self.digests += [hashlib.sha1(np.ascontiguousarray(c).tobytes()).hexdigest() for c in clips]
        return super().encode(clips)


@pytest.mark.parametrize("backend", ["pyav", "decord"])
@pytest.mark.parametrize("averages_frames", [False, True])
def test_decoding_ahead_builds_the_serial_builders_bank(synthetic_root, tmp_path, backend, averages_frames):
    data = Spacewalk18(synthetic_root)
    video_id = next(iter(data.recordings))
    banks = {}
    for prefetch, decoders in ((0, 1), (2, 1), (1, 3)):  # (0, 1): decode, then encode, in turn (the serial builder)
        config = dataclasses.replace(SMALL, video_backend=backend, prefetch=prefetch, decoders=decoders)
        encoder = DigestVideo(averages_frames)
        bank = FeatureBank(tmp_path / f"{prefetch}-{decoders}", data, FakeText(), encoder, config, frames_per_batch=25)
        assert bank.build([video_id], progress=False) == [video_id]
        folder = tmp_path / f"{prefetch}-{decoders}" / video_id
        calls = encoder.calls
        banks[prefetch, decoders] = (encoder.digests, {f.name: np.load(f) for f in sorted(folder.glob("*.npy"))})
        # how a bank was built is not what it holds: meta.json does not record it, so either build is fresh
        assert "prefetch" not in json.loads((folder / "meta.json").read_text())["config"]
        assert FeatureBank(tmp_path / f"{prefetch}-{decoders}", data, FakeText(), encoder, SMALL if backend == "pyav"
                           else dataclasses.replace(SMALL, video_backend=backend)).is_fresh(video_id)
    serial_digests, serial_arrays = banks[0, 1]
    assert calls >= 6 and "video.npy" in serial_arrays  # several batches for 3 decoders; every pixel compared
    assert ("frame_video.npy" in serial_arrays) == averages_frames
    for key, (digests, arrays) in banks.items():
        assert digests == serial_digests, key
        assert arrays.keys() == serial_arrays.keys()
        for name, array in arrays.items():
            np.testing.assert_array_equal(array, serial_arrays[name], err_msg=f"{key} {name}")


def test_a_bad_decoder_setting_is_a_config_error():
    with pytest.raises(ConfigError, match="decoders=4 decode ahead of the encoder, which prefetch=0 turns off"):
        BankConfig(decoders=4, prefetch=0)
    with pytest.raises(ConfigError, match="decode_device='cuda' needs video_backend='decord'"):
        BankConfig(decode_device="cuda", video_backend="pyav")
    with pytest.raises(ConfigError, match="decode_device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu0'"):
        BankConfig(decode_device="gpu0")
    BankConfig(decode_device="cuda:1")  # decord's GPU decoding, where decord was built with CUDA
