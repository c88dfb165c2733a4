"""The step-recognition DataModule: windows sliced from the bank, batches in the module's contract."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from datamodules.bank_windows import window_text_features
from datamodules.step_recognition import StepRecognitionDataModule
from models.heads import LinearHead
from models.step_recognition import StepRecognitionModule
from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
from spacewalk.benchmarks.spacewalk18.data.windows import TranscriptIndex, context_window
from spacewalk.core.errors import DataError

from fakes import FakeFrameVideo, FakeText, FakeVideo, text_vector, write_external_features

SYNTHETIC = dict(n_train=1, n_val=1, n_test=1, minutes=(3, 4), steps_per_video=(3, 4), samples_per_video=100,
                 retrieval_samples_per_video=10, questions_per_video=2, progress=False)
BANK = dict(segment_seconds=12.0, fps=1.0, frame_size=32, video_backend="pyav")


@pytest.fixture(scope="module")
def dataset(synthetic_spacewalk18) -> Spacewalk18:
    return Spacewalk18(synthetic_spacewalk18(**SYNTHETIC))


def make(dataset, bank_dir, modalities="text", context=60.0, text=None, video=None, **kw):
    dm = StepRecognitionDataModule(dataset, bank_dir, text_encoder=text or FakeText(), video_encoder=video,
                                   bank_config=BANK, context_seconds=context, modalities=modalities, **kw)
    dm.setup()
    return dm


def normalise(x):
    return x / np.linalg.norm(x)


def test_text_batch_follows_the_window_rule(dataset, tmp_path):
    dm = make(dataset, tmp_path / "bank", batch_size=7)
    batch = next(iter(dm.train_dataloader()))
    assert batch["clip"].shape == (7, 16) and batch["cells"].shape[0] == 7
    # one train recording: its steps once, every sample on row 0
    assert batch["steps"].shape == (1, dataset.split("train")[0].num_classes, 16)
    assert batch["step_mask"].all() and (batch["step_row"] == 0).all()
    rec = dataset.split("test")[0]
    samples = dataset.step_samples("test")[rec.video_id]
    index = TranscriptIndex(rec.transcript)
    full = dm.collate("test", list(range(len(samples))))
    for i in (0, 37, len(samples) - 1):
        s = samples[i]
        window = context_window(s.timestamp, 60.0, rec.duration)
        sentences = index.indices_in(window)
        expected = normalise(np.sum([text_vector(rec.transcript[j].text, 8) for j in sentences], axis=0))
        np.testing.assert_allclose(full["clip"][i, :8].numpy(), expected, atol=2e-3)  # float16 bank
        np.testing.assert_array_equal(full["clip"][i, :8], full["clip"][i, 8:])  # [t, t]
        cells = [j for j in range(int(np.ceil(rec.duration / 12)))
                 if j * 12 < window.end and (j + 1) * 12 > window.start]
        assert full["cell_mask"][i].sum() == len(cells)
        assert cells[int(full["query_pos"][i])] == int(s.timestamp // 12)
        assert int(full["label"][i]) == s.label and int(full["sample_id"][i]) == s.id
    # padding cells are zero, real ones carry the cell's text
    assert (full["cells"][~full["cell_mask"]] == 0).all()
    # step rows: [narration, caption]; row 0 is the Irrelevant description
    steps = dm.step_features["test"][0]
    np.testing.assert_allclose(steps[1, :8], text_vector(rec.steps[1].transcript, 8), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(steps[1, 8:], text_vector(rec.steps[1].caption, 8), rtol=1e-3, atol=1e-3)


def test_changing_the_context_never_reencodes(dataset, tmp_path):
    text = FakeText()
    make(dataset, tmp_path / "bank", context=60.0, text=text)
    calls = text.calls
    dm = make(dataset, tmp_path / "bank", context=1200.0, text=text)
    assert text.calls == calls
    # a 20-minute window covers every cell of these 3-4 minute recordings
    rec = dataset.split("val")[0]
    assert dm.splits["val"].num_cells.max() == int(np.ceil(rec.duration / 12))


def test_video_and_text_layout(dataset, tmp_path):
    dm = make(dataset, tmp_path / "bank", modalities="video+text", video=FakeVideo())
    batch = dm.collate("val", [0, 1])
    assert batch["clip"].shape[1] == FakeVideo.dim + 16 == batch["steps"].shape[2] == batch["cells"].shape[2]
    assert (batch["steps"][:, 0, :FakeVideo.dim] == 0).all()  # Irrelevant has no animation


@pytest.fixture(scope="module")
def two_recordings(synthetic_spacewalk18) -> Spacewalk18:
    options = SYNTHETIC | dict(n_train=2, steps_per_video=(3, 6), samples_per_video=40)
    return Spacewalk18(synthetic_spacewalk18(seed=3, **options))


def test_steps_come_once_per_recording_with_a_row_per_sample(two_recordings, tmp_path):
    dm = make(two_recordings, tmp_path / "bank")
    ix = dm.splits["train"]
    classes = [two_recordings.recordings[v].num_classes for v in dm.video_ids["train"]]
    assert classes[0] != classes[1]  # padding is exercised
    idx = [int(np.flatnonzero(ix.recording == 1)[0]), int(np.flatnonzero(ix.recording == 0)[0]),
           int(np.flatnonzero(ix.recording == 1)[-1])]
    batch = dm.collate("train", idx)
    assert batch["steps"].shape == (2, max(classes), 16) and batch["step_row"].tolist() == [1, 0, 1]
    for i, j in enumerate(idx):
        r = int(ix.recording[j])
        row = int(batch["step_row"][i])
        assert int(batch["video_index"][i]) == r
        np.testing.assert_array_equal(batch["steps"][row, :classes[r]].numpy(), dm.step_features["train"][r])
        assert batch["step_mask"][row].sum() == classes[r] and (batch["steps"][row, classes[r]:] == 0).all()
    one = dm.collate("train", idx[1:2])  # a batch of one recording has one row
    assert one["steps"].shape == (1, classes[0], 16) and one["step_row"].tolist() == [0]


def test_cells_are_left_out_for_heads_that_do_not_read_them(dataset, tmp_path):
    with_cells = make(dataset, tmp_path / "bank")
    without = make(dataset, tmp_path / "bank", cells=False)
    a, b = with_cells.collate("val", [0, 5, 9]), without.collate("val", [0, 5, 9])
    assert set(a) - set(b) == {"cells", "cell_mask", "query_pos"}
    for key in b:
        assert torch.equal(a[key], b[key])
    assert without.cell_features["val"] == []  # not even held in memory
    assert make(dataset, tmp_path / "bank", cells=None).cells  # the config's null, outside train.py


def test_video_modality_needs_a_video_encoder_or_external_features(dataset, tmp_path):
    with pytest.raises(DataError, match="no video encoder to build them") as e:
        StepRecognitionDataModule(dataset, tmp_path, text_encoder=FakeText(), modalities="video")
    assert e.value.item == dataset.splits["train"][0] and "encoder=external" in str(e.value)


@pytest.mark.parametrize("with_dim", [True, False])
def test_external_video_features_train_a_head_without_a_video_encoder(dataset, tmp_path, with_dim):
    video = write_external_features(tmp_path / "bank", dataset, dim=5, with_dim=with_dim)
    dm = StepRecognitionDataModule(dataset, tmp_path / "bank", text_encoder=FakeText(), bank_config=BANK,
                                   context_seconds=60.0, modalities="video+text", batch_size=64, cells=False)
    assert dm.feature_dim == 5 + 16  # before any bank is built: from meta.json's dim or video.npy's header
    module = StepRecognitionModule(LinearHead(dm.feature_dim), optimizer=partial(torch.optim.Adam, lr=1e-2))
    trainer = pl.Trainer(accelerator="cpu", max_epochs=2, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(module, datamodule=dm)
    trainer.test(module, datamodule=dm)
    assert all(0 <= module.test_results[k] <= 100 for k in ("Accuracy", "mAP", "IoU"))
    # the clip's video block is the normalised mean of the window's external cells; text came from FakeText
    ix, rec = dm.splits["test"], dataset.split("test")[0]
    first, n = int(ix.first_cell[0]), int(ix.num_cells[0])
    expected = normalise(video[rec.video_id][first:first + n].astype(np.float32).mean(0))
    np.testing.assert_allclose(ix.clip[0, :5], expected, atol=1e-6)
    assert all((tmp_path / "bank" / v / "text" / "meta.json").is_file() for v in dataset.recordings)


def test_external_features_without_step_video_train_with_text_and_are_refused_video_only(dataset, tmp_path):
    # step_video.npy is optional: beside text the steps' video block is zero (they are matched by their text);
    # with video alone there would be nothing to match, so that is refused before any bank is built
    write_external_features(tmp_path / "bank", dataset, dim=5)
    for v in dataset.recordings:
        (tmp_path / "bank" / v / "step_video.npy").unlink()
    with pytest.raises(DataError, match="has none: add step_video.npy") as e:
        StepRecognitionDataModule(dataset, tmp_path / "bank", text_encoder=FakeText(), modalities="video")
    assert e.value.field == "step_video" and e.value.file.name == "step_video.npy"
    assert not any((tmp_path / "bank" / v / "text").exists() for v in dataset.recordings)  # nothing built
    dm = StepRecognitionDataModule(dataset, tmp_path / "bank", text_encoder=FakeText(), bank_config=BANK,
                                   context_seconds=60.0, modalities="video+text", batch_size=64, cells=False)
    module = StepRecognitionModule(LinearHead(dm.feature_dim), optimizer=partial(torch.optim.Adam, lr=1e-2))
    trainer = pl.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(module, datamodule=dm)
    trainer.test(module, datamodule=dm)
    assert all(0 <= module.test_results[k] <= 100 for k in ("Accuracy", "mAP", "IoU"))
    steps = dm.step_features["test"][0]
    assert steps.shape[1] == 5 + 16 and not steps[:, :5].any() and steps[1:, 5:].any()


def test_external_video_features_of_two_widths_are_refused(dataset, tmp_path):
    write_external_features(tmp_path / "bank", dataset, dim=5)
    other = dataset.splits["test"][0]
    np.save(tmp_path / "bank" / other / "video.npy", np.zeros((3, 7), np.float16))
    (tmp_path / "bank" / other / "meta.json").write_text(json.dumps({"external": True, "encoder": "x",
                                                                     "segment_seconds": 12.0}))
    with pytest.raises(DataError, match="one bank holds one feature width") as e:
        StepRecognitionDataModule(dataset, tmp_path / "bank", text_encoder=FakeText(), modalities="video")
    assert e.value.item == other and e.value.field == "video"


# three sentences: [0, 10) "a", [10, 12) "b", [40, 41) "c"; unit vectors along axes 0, 1, 2
SENTENCES = np.eye(3, dtype=np.float32)
STARTS, ENDS = np.array([0.0, 10.0, 40.0]), np.array([10.0, 12.0, 41.0])


def features(t, w, pool="mean", empty="zero", duration=100.0):
    return window_text_features(SENTENCES, STARTS, ENDS, np.array(t, dtype=float), w, duration, pool, empty)


def test_window_text_mean_counts_each_sentence_once_and_duration_weighs_seconds_inside():
    # window [2, 12): 8 s of "a", 2 s of "b"
    np.testing.assert_allclose(features([7.0], 10.0)[0], normalise(np.array([1.0, 1.0, 0.0])), atol=1e-6)
    np.testing.assert_allclose(features([7.0], 10.0, "duration")[0], normalise(np.array([8.0, 2.0, 0.0])),
                               atol=1e-6)
    # window [-10, 10) is clipped to [0, 10); "b" starts at its end: strict overlap leaves it out
    np.testing.assert_allclose(features([0.0], 20.0, "duration")[0], [1.0, 0.0, 0.0], atol=1e-6)


def test_window_text_duration_falls_back_to_counting_zero_length_sentences():
    starts, ends = np.array([5.0, 5.0]), np.array([5.0, 5.0])  # zero-length, inside the window
    out = window_text_features(SENTENCES[:2], starts, ends, np.array([5.0]), 4.0, 100.0, "duration")
    np.testing.assert_allclose(out[0], normalise(np.array([1.0, 1.0, 0.0])), atol=1e-6)


def test_window_text_without_speech_zero_nearest_or_widened():
    # t = 30: [28, 32) is silent; the nearest sentence is "c" (10 s away) rather than "b" (18 s)
    np.testing.assert_array_equal(features([30.0, 5.0], 4.0)[0], 0.0)
    nearest = features([30.0, 5.0], 4.0, empty="nearest")
    np.testing.assert_allclose(nearest[0], [0.0, 0.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(nearest[1], [1.0, 0.0, 0.0], atol=1e-6)  # had speech: unchanged
    # widened 4 -> 8 -> 16 -> 32 s: [14, 46) holds "c" only; [22, 38) at 16 s is still silent
    np.testing.assert_allclose(features([30.0], 4.0, "mean", "widen")[0], [0.0, 0.0, 1.0], atol=1e-6)
    # 4 -> 8 s: [36, 44) holds "c"; clipped at the recording's end (42) it still does
    np.testing.assert_allclose(features([38.0], 4.0, "mean", "widen", duration=42.0)[0], [0, 0, 1], atol=1e-6)
    # a recording without any sentence stays zero
    empty = window_text_features(np.zeros((0, 3), np.float32), np.zeros(0), np.zeros(0), np.array([5.0]), 4.0,
                                 10.0, "duration", "widen")
    np.testing.assert_array_equal(empty, 0.0)


@pytest.mark.parametrize("w", [0.0, -60.0])
def test_window_text_refuses_an_empty_window_instead_of_widening_it_forever(w):
    # "widen" doubles the window until it hears speech: 0 s doubled stays 0 s, and the loop never ended
    with pytest.raises(ValueError, match=f"context_seconds must be positive, got {w}"):
        features([30.0], w, "mean", "widen")


def test_window_text_options_reach_the_clip_feature(dataset, tmp_path):
    plain = make(dataset, tmp_path / "bank", context=30.0)
    weighted = make(dataset, tmp_path / "bank", context=30.0, text_pool="duration", empty_text="widen")
    assert (weighted.text_pool, weighted.empty_text) == ("duration", "widen")
    assert not np.allclose(plain.splits["test"].clip, weighted.splits["test"].clip)
    with pytest.raises(ValueError, match="text_pool"):
        StepRecognitionDataModule(dataset, tmp_path, text_encoder=FakeText(), text_pool="joined")
    with pytest.raises(ValueError, match="empty_text"):
        StepRecognitionDataModule(dataset, tmp_path, text_encoder=FakeText(), empty_text="skip")


def test_each_process_collates_its_share_of_the_global_batch(dataset, tmp_path):
    dm = make(dataset, tmp_path / "bank", batch_size=7)
    label = dm.splits["train"].label
    global_batch = list(range(10, 17))
    whole = dm.collate_share("train", 0, 1, global_batch)
    parts = [dm.collate_share("train", r, 2, global_batch) for r in range(2)]
    assert [len(p["label"]) for p in parts] == [4, 3]
    for key in ("sample_id", "label", "clip"):
        np.testing.assert_array_equal(np.concatenate([p[key].numpy() for p in parts]), whole[key].numpy())
    assert all(int(p["labelled_total"]) == int((label[10:17] > 0).sum()) for p in parts + [whole])
    # a one-sample last batch: the second process gets a padding copy that carries no loss
    pad = dm.collate_share("train", 1, 2, [int(np.flatnonzero(label > 0)[0])])
    assert len(pad["label"]) == 1 and int(pad["label"][0]) == 0 and int(pad["labelled_total"]) == 1


# ---- sparse and dense frame sampling ----------------------------------------------------------------


def test_sparse_sampling_is_k_frames_over_the_window_encoded_as_one_clip(dataset, tmp_path):
    from spacewalk.benchmarks.spacewalk18.features.build import probe_video, resized
    from spacewalk.media.video import open_video, sparse_timestamps

    encoder = FakeFrameVideo()
    dm = make(dataset, tmp_path / "bank", modalities="video+text", video=encoder, frame_sampling="sparse")
    assert dm.num_frames == FakeFrameVideo.num_frames  # the encoder's count by default
    rec = dataset.split("test")[0]
    bank = dm.bank.load(rec.video_id)
    assert len(bank.frame_video) == len(bank.frame_time) == int(np.ceil(rec.duration))  # 1 fps
    samples = dataset.step_samples("test")[rec.video_id]
    height, width, _ = probe_video(rec.video_path, rec.video_id)
    with open_video(rec.video_path, "pyav", resized(height, width, BANK["frame_size"])) as reader:
        for i in (0, 41, len(samples) - 1):
            t = samples[i].timestamp
            start, end = max(t - 30.0, 0.0), min(t + 30.0, rec.duration)
            # each of the k timestamps lands on the nearest 1 fps frame, as the bank stores them
            times = np.ceil(sparse_timestamps(start, end, dm.num_frames) - 0.5)  # ties: the earlier frame
            expected = encoder.encode([reader.frames_at(np.minimum(times, rec.duration))])[0]
            np.testing.assert_allclose(dm.splits["test"].clip[i, :4], expected, atol=2e-3)  # float16 bank
    dense = make(dataset, tmp_path / "bank", modalities="video+text", video=encoder)
    assert not np.allclose(dense.splits["test"].clip[:, :4], dm.splits["test"].clip[:, :4], atol=1e-2)
    np.testing.assert_array_equal(dense.splits["test"].clip[:, 4:], dm.splits["test"].clip[:, 4:])  # text alike
    # the cells (what LFB heads read) are the mean of their frames, as encoding the cell as one clip gives
    cell = dm.dataset.recordings[rec.video_id]
    np.testing.assert_allclose(np.asarray(bank.video[1], np.float32),
                               encoder.encode([reader_frames(cell, np.arange(12.0, 24.0))])[0], atol=2e-3)
    more = make(dataset, tmp_path / "bank", modalities="video+text", video=encoder, frame_sampling="sparse",
                num_frames=7)
    assert more.num_frames == 7 and not np.allclose(more.splits["test"].clip, dm.splits["test"].clip)


def reader_frames(rec, times):
    from spacewalk.benchmarks.spacewalk18.features.build import probe_video, resized
    from spacewalk.media.video import open_video

    height, width, _ = probe_video(rec.video_path, rec.video_id)
    with open_video(rec.video_path, "pyav", resized(height, width, BANK["frame_size"])) as reader:
        return reader.frames_at(times)


def test_sparse_sampling_needs_a_frame_averaging_encoder(dataset, tmp_path):
    with pytest.raises(ValueError, match="use datamodule.frame_sampling=dense") as e:
        make(dataset, tmp_path / "bank", modalities="video", video=FakeVideo(), frame_sampling="sparse")
    assert "fake-video/1" in str(e.value)
    write_external_features(tmp_path / "external", dataset, dim=5)
    with pytest.raises(ValueError, match="external video features"):
        make(dataset, tmp_path / "external", modalities="video", frame_sampling="sparse")
    with pytest.raises(ValueError, match="frame_sampling must be one of"):
        make(dataset, tmp_path / "bank", frame_sampling="every")
    with pytest.raises(ValueError, match="num_frames"):
        make(dataset, tmp_path / "bank", num_frames=0)


def test_frame_sampling_leaves_text_only_features_alone(dataset, tmp_path):
    # text only: sparse asks nothing of a video encoder and changes nothing
    dense, sparse = make(dataset, tmp_path / "bank"), make(dataset, tmp_path / "bank", frame_sampling="sparse")
    for split in ("train", "val", "test"):
        np.testing.assert_array_equal(dense.splits[split].clip, sparse.splits[split].clip)
