"""Intra-video retrieval as a task: the DataModule's windows, the heads, TW-FINCH, the official scoring of
the release's files, and train.py end to end on a tiny synthetic root."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from datamodules.bank_windows import window_text_features
from datamodules.intra_video_retrieval import IntraVideoRetrievalDataModule
from datamodules.step_recognition import StepRecognitionDataModule
from models.intra_video_retrieval import IntraVideoRetrievalModule, SimilarityHead, TwoTowerHead, break_ties
from models.intra_video_retrieval_baselines import TWFinchRetrieval
from spacewalk.algorithms.tw_finch import first_neighbours, tw_finch
from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, Spacewalk18
from spacewalk.benchmarks.spacewalk18.data.retrieval_sampler import RetrievalSamplerConfig
from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
from spacewalk.benchmarks.spacewalk18.scoring.predictions import write_retrieval_predictions
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.io import load_json

from conftest import run_command
from fakes import FakeText

SMALL = dict(n_train=2, n_val=1, n_test=1, minutes=(15, 18), steps_per_video=(4, 6), samples_per_video=50,
             retrieval_samples_per_video=10, questions_per_video=2, video_fps=0.5, frame_size=16, progress=False)


@pytest.fixture
def synthetic_root(synthetic_spacewalk18):
    return synthetic_spacewalk18(**SMALL)


def datamodule(root, bank_dir, encoder, w, **kw):
    return IntraVideoRetrievalDataModule(Spacewalk18(root), bank_dir, text_encoder=encoder,
                                         bank_config=BankConfig(segment_seconds=12.0), context_seconds=w,
                                         sampler=RetrievalSamplerConfig(samples_per_video=100), **kw)


# ---- the DataModule ------------------------------------------------------------------------------

def test_windows_come_from_the_one_bank_for_every_w(synthetic_root, tmp_path):
    encoder = FakeText(dim=8)
    dm = datamodule(synthetic_root, tmp_path / "bank", encoder, 30.0)
    dm.setup()
    calls = encoder.calls
    assert dm.sources == {"train": "generated", "val": "generated", "test": "generated"}  # a synthetic root
    for w in (5.0, 300.0):  # another window length: the same bank, nothing encoded again
        other = datamodule(synthetic_root, tmp_path / "bank", encoder, w)
        other.setup()
        assert encoder.calls == calls
        assert other.samples == dm.samples
    # the features are the step-recognition window transcript feature at each of the three times
    ds, split = dm.dataset, "test"
    video_id = dm.video_ids[split][0]
    rec, bank = ds.recordings[video_id], dm.bank.load(video_id)
    s = dm.samples[split][video_id][7]
    times = np.array([s.query_frame_index, *s.candidate_frame_indices]) / FPS
    expected = window_text_features(bank.sentence_text, bank.sentence_start, bank.sentence_end, times, 30.0,
                                    rec.duration)
    row = int(np.flatnonzero((dm.splits[split].video_index == 0) & (dm.splits[split].sample_id == s.id))[0])
    np.testing.assert_allclose(dm.splits[split].features[row], expected, atol=1e-6)
    batch = dm.collate(split, [row])
    assert batch["query"].shape == (1, 8) and batch["candidates"].shape == (1, 2, 8)
    assert int(batch["label"][0]) == s.label


def test_sample_sources_official_and_errors(synthetic_root, tmp_path):
    dm = datamodule(synthetic_root, tmp_path / "bank", FakeText(dim=8), 30.0, samples={"test": "official"})
    dm.setup()
    assert dm.sources["test"] == "official"
    assert dm.samples["test"] == Spacewalk18(synthetic_root).retrieval_samples("test")
    with pytest.raises(ValueError, match="samples"):
        datamodule(synthetic_root, tmp_path / "bank", FakeText(dim=8), 30.0, samples={"test": "file"})
    # the paper's video modality on a text-only bank: a clear error naming the bank folder
    with pytest.raises(DataError, match="video features are wanted"):
        datamodule(synthetic_root, tmp_path / "bank", FakeText(dim=8), 30.0, modalities="video")


def test_both_bank_data_modules_recheck_the_bank_after_building(synthetic_root, tmp_path, monkeypatch):
    # a build that leaves a recording stale is caught before any window is read (datamodules/bank_windows.py)
    for dm in (datamodule(synthetic_root, tmp_path / "bank", FakeText(dim=8), 30.0),
               StepRecognitionDataModule(Spacewalk18(synthetic_root), tmp_path / "bank", text_encoder=FakeText(dim=8),
                                         bank_config=BankConfig(segment_seconds=12.0))):
        monkeypatch.setattr(dm.bank, "build", lambda *args, **kwargs: [])
        with pytest.raises(RuntimeError, match="still stale after building"):
            dm.setup()
    with pytest.raises(ValueError, match=r"modalities must be one of .* got 'audio'"):
        datamodule(synthetic_root, tmp_path / "bank", FakeText(dim=8), 30.0, modalities="audio")


def test_features_that_know_the_segment_score_100_through_the_module(synthetic_root, tmp_path):
    """The whole chain after the windows: samples -> rows -> scores -> predictions in sample order -> the
    official scorer. Features replaced by the one-hot of the segment at each frame: every sample is right."""
    import pytorch_lightning as pl

    dm = datamodule(synthetic_root, tmp_path / "bank", FakeText(dim=8), 30.0, eval_batch_size=37)
    dm.setup()
    split = dm.splits["test"]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(split.label))  # rows out of order: the module must put them back
    for name in ("video_index", "sample_id", "label", "features"):
        setattr(split, name, getattr(split, name)[order])
    onehot = np.zeros((len(split.label), 3, 64), np.float32)
    for row, (r, sid) in enumerate(zip(split.video_index, split.sample_id)):
        video_id = dm.video_ids["test"][r]
        rec, s = dm.dataset.recordings[video_id], dm.samples["test"][video_id][sid]
        for k, f in enumerate((s.query_frame_index, *s.candidate_frame_indices)):
            onehot[row, k, rec.segments.index(rec.segment_at_frame(f))] = 1.0
    split.features = onehot
    module = IntraVideoRetrievalModule(SimilarityHead(), output_dir=str(tmp_path / "run"))
    pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False).test(module, datamodule=dm,
                                                                                        verbose=False)
    assert module.test_results["Accuracy"] == 100.0
    written = load_json(tmp_path / "run/predictions.json")
    assert written == {v: [s.label for s in ss] for v, ss in dm.samples["test"].items()}


# ---- heads and ties ------------------------------------------------------------------------------

def test_zero_shot_scores_are_cosines_and_ties_are_seeded_coins():
    module = IntraVideoRetrievalModule(SimilarityHead())
    q = torch.tensor([[1.0, 0.0]])
    c = torch.tensor([[[0.6, 0.8], [1.0, 0.0]]])
    assert torch.allclose(module.scores(q, c), torch.tensor([[0.6, 1.0]]))
    scores = np.array([[0.1, 0.2], [0.3, 0.3], [0.3, 0.3], [0.5, 0.1]] * 50)
    a = break_ties(scores, 43)
    assert (a == break_ties(scores, 43)).all() and (a[0::4] == 1).all() and (a[3::4] == 0).all()
    assert 0 < a[1::4].mean() < 1  # ties go both ways


def test_two_tower_starts_as_zero_shot_and_learns():
    torch.manual_seed(0)
    head = TwoTowerHead(4)
    module = IntraVideoRetrievalModule(head, temperature=0.05, normalize=True)
    q, c = torch.randn(8, 4), torch.randn(8, 2, 4)
    zero = IntraVideoRetrievalModule(SimilarityHead(), temperature=0.05, normalize=True)
    assert torch.allclose(module.scores(q, c), zero.scores(q, c), atol=1e-5)
    # a task the identity gets wrong: the same-step candidate is the query with its sign flipped
    q = torch.randn(256, 4)
    c = torch.stack([-q + 0.1 * torch.randn(256, 4), torch.randn(256, 4)], 1)
    label = torch.zeros(256, dtype=torch.long)
    opt = torch.optim.Adam(module.parameters(), lr=0.05)
    for _ in range(200):
        loss = torch.nn.functional.cross_entropy(module.scores(q, c), label)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert (module.scores(q, c).argmax(1) == 0).float().mean() > 0.95


# ---- TW-FINCH ------------------------------------------------------------------------------------

def test_first_neighbours_weigh_feature_distance_by_time():
    f = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.01]], np.float32)
    t = np.array([0.25, 0.5, 0.75, 1.0], np.float32)
    nearest, _ = first_neighbours(f, t)
    # row 0: row 2 is identical (distance 0), row 1 orthogonal: 2 wins despite being farther in time
    assert nearest.tolist()[0] == 2 and nearest[3] == 2


def test_tied_first_neighbours_go_to_the_nearest_in_time_with_a_tolerance():
    from spacewalk.algorithms.tw_finch import _cosine_distance

    f = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], np.float32)
    t = np.array([0.2, 0.4, 0.6, 0.8, 1.0], np.float32)
    # row 4 ties at distance 0 with rows 0, 2 and 3: the reference's argmin takes the lowest index, ours the
    # nearest in time
    assert first_neighbours(f, t)[0][4] == 0 and first_neighbours(f, t, tie_tolerance=1e-6)[0][4] == 3
    # 1 - cos below 0 (float rounding) is clipped: it must not make a far row nearer than an identical one
    a = np.array([[1.0000001, 0.0]], np.float32)
    assert _cosine_distance(a, a, 0.0)[0, 0] < 0 and _cosine_distance(a, a, 1e-6)[0, 0] == 0


def test_a_tolerance_makes_tw_finch_indifferent_to_float_rounding_on_repeated_rows():
    # a transcript bank: long runs of one repeated feature (silence, the same sentences); a perturbation far
    # below float16's rounding must not change the partition
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((12, 16))
    features = np.repeat(centres[rng.integers(0, 12, 40)], rng.integers(1, 30, 40), axis=0).astype(np.float32)
    noisy = (features * (1 + rng.normal(0, 2 ** -14, features.shape))).astype(np.float32)
    for k in (5, 20):
        assert (tw_finch(features, k, 1e-6) == tw_finch(noisy, k, 1e-6)).all()
    with pytest.raises(ConfigError, match="tie_tolerance"):
        tw_finch(features, 5, -1.0)


def test_tw_finch_finds_temporal_blocks():
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((4, 16))
    features = np.concatenate([centres[k] + 0.05 * rng.standard_normal((50, 16)) for k in range(4)])
    labels = tw_finch(features, 4)
    assert [sorted(set(labels[50 * k:50 * (k + 1)])) for k in range(4)] == [[0], [1], [2], [3]]
    assert len(set(tw_finch(features, 2))) == 2
    assert tw_finch(features, 1000).max() + 1 <= 200  # more than FINCH's first partition: that partition
    assert (tw_finch(features[:1], 3) == 0).all()


def test_incremental_merges_equal_the_reference_recomputation():
    from spacewalk.algorithms.tw_finch import _means, _merge_to

    rng = np.random.default_rng(3)
    data = np.concatenate([rng.standard_normal((60, 5)), ((np.arange(60) + 1) / 60)[:, None]], 1).astype(np.float32)
    labels = np.repeat(np.arange(20), 3)
    expected = labels.copy()
    while expected.max() + 1 > 6:  # the reference: all first neighbours of all means, after every merge
        means = _means(data, expected)
        nearest, distance = first_neighbours(means[:, :-1], means[:, -1])
        a = int(np.argmin(distance))
        expected = np.unique(np.where(expected == max(a, nearest[a]), min(a, nearest[a]), expected),
                             return_inverse=True)[1]
    assert (_merge_to(data, labels, 6) == expected).all()


def test_tw_finch_retrieval_picks_the_candidate_in_the_query_cluster(synthetic_root, tmp_path):
    dm = datamodule(synthetic_root, tmp_path / "bank", FakeText(dim=8), 30.0)
    dm.setup()
    model = TWFinchRetrieval(n_clusters=3)
    predictions = model.predict(dm, "test")
    video_id = dm.video_ids["test"][0]
    starts, labels = model.clusters(dm, video_id)
    assert np.allclose(np.diff(starts), 1.0) and labels.max() + 1 <= 3
    for s, p in zip(dm.samples["test"][video_id], predictions[video_id]):
        cluster = [labels[int(np.clip(round(f / FPS - 6), 0, len(labels) - 1))]
                   for f in (s.query_frame_index, *s.candidate_frame_indices)]
        if (cluster[1] == cluster[0]) != (cluster[2] == cluster[0]):
            assert p == (0 if cluster[1] == cluster[0] else 1)


# ---- official scoring of the release's files -----------------------------------------------------

def score(root, split, predictions) -> dict:
    result = run_command("-m", "spacewalk.score", "--root", root, "--split", split, "--task", "intra_video_retrieval",
                         "--predictions", predictions)
    return json.loads(result.stdout)


@pytest.mark.parametrize("split", ["val", "test"])
def test_official_labels_score_100_and_a_fixed_prediction_its_hand_computed_value(real_spacewalk18_root, tmp_path,
                                                                                  split):
    raw = load_json(real_spacewalk18_root / f"tasks/intra-video_retrieval/{split}.json")
    write_retrieval_predictions(tmp_path / "labels.json", {v: [s["label"] for s in ss] for v, ss in raw.items()})
    assert score(real_spacewalk18_root, split, tmp_path / "labels.json")["Accuracy"] == 100.0
    # "always candidate 0": per video the share of label 0, then the mean over videos
    write_retrieval_predictions(tmp_path / "zeros.json", {v: [0] * len(ss) for v, ss in raw.items()})
    per_video = {v: 100 * sum(s["label"] == 0 for s in ss) / len(ss) for v, ss in raw.items()}
    got = score(real_spacewalk18_root, split, tmp_path / "zeros.json")
    assert got["per_video"] == pytest.approx(per_video, abs=1e-9)
    assert got["Accuracy"] == pytest.approx(sum(per_video.values()) / len(per_video), abs=1e-9)
    if split == "val":  # written out: 03152022 has 988 label-0 samples of 2000, 11152022 has 989
        assert got["Accuracy"] == pytest.approx((988 / 2000 + 989 / 2000) / 2 * 100, abs=1e-9)


# ---- train.py end to end -------------------------------------------------------------------------

TINY = ["+data.synthetic.n_train=2", "+data.synthetic.n_val=1", "+data.synthetic.n_test=1",
        "+data.synthetic.minutes=[15,18]", "+data.synthetic.steps_per_video=[4,6]",
        "+data.synthetic.samples_per_video=50", "+data.synthetic.retrieval_samples_per_video=10",
        "+data.synthetic.questions_per_video=2", "+data.synthetic.video_fps=0.5", "+data.synthetic.frame_size=16"]


@pytest.mark.slow
def test_train_py_end_to_end_last_layer_and_the_scorer_agree(tmp_path):
    run_dir = tmp_path / "run"
    cmd = ["train.py", "task=intra_video_retrieval", "model=ivr_last_layer", "context=30s",
           "trainer.max_epochs=2", "logger=csv", "datamodule.sampler.samples_per_video=200",
           f"data.synthetic_root={tmp_path / 'synthetic'}", f"paths.data_dir={tmp_path / 'data'}",
           f"hydra.run.dir={run_dir}",
           *TINY]
    run_command(*cmd)
    m = load_json(run_dir / "metrics.json")
    assert m["split"] == "test"
    assert m["sample_sources"] == {"train": "generated", "val": "generated", "test": "generated"}
    assert m["best_val_loss"] is not None and m["checkpoint"].endswith(".ckpt") and m["val"]["Accuracy"] >= 0
    # the scorer of the release reads our predictions; with the generated test samples in place of the file
    ds = Spacewalk18(tmp_path / "synthetic")
    from spacewalk.benchmarks.spacewalk18.data.retrieval_sampler import (
        recording_retrieval_samples,
        retrieval_samples_to_json,
    )
    from spacewalk.core.io import write_json
    samples = {r.video_id: recording_retrieval_samples(r, RetrievalSamplerConfig(samples_per_video=200))
               for r in ds.split("test")}
    write_json(tmp_path / "synthetic/tasks/intra-video_retrieval/test.json", retrieval_samples_to_json(samples))
    official = score(tmp_path / "synthetic", "test", run_dir / "predictions.json")
    assert official["Accuracy"] == pytest.approx(m["Accuracy"], abs=1e-9) and official["per_video"] == m["per_video"]
    assert sorted(p.name for p in (run_dir / "missed").iterdir()) == [f"{v}.png" for v in sorted(samples)]
    assert list((run_dir / "csv").rglob("metrics.csv"))
    # the step-recognition command line is unchanged by the new task
    result = run_command("train.py", "--cfg", "job", "model=lfb_cat")
    assert "recipe: spacewalk.training.step_recognition" in result.stdout
