"""Stronger emissions for the plan decoder (spacewalk/benchmarks/spacewalk18/decoding/emissions.py): per-recording
and per-window calibration against brute force, block products, the fused calibration's fit."""

from __future__ import annotations

import numpy as np
import pytest
from test_plan_decoding import noisy_recording, recording

from spacewalk.benchmarks.spacewalk18.data.dataset import NOT_ANNOTATED
from spacewalk.benchmarks.spacewalk18.decoding.emissions import (
    Emissions,
    FusedCalibration,
    WindowRows,
    block_pairs,
    cell_scores,
    distinct_columns,
    mean_log_probs,
    pair_products,
    recording_normalized,
    window_normalized,
    within_window_emissions,
)
from spacewalk.benchmarks.spacewalk18.decoding.plan_decoder import (
    Calibration,
    DecodeSettings,
    PlanModel,
    WithinWindowDecoder,
    cell_labels,
)


def test_recording_normalized_centres_and_scales_against_the_reference():
    rng = np.random.default_rng(0)
    reference = rng.normal(loc=3.0, scale=2.0, size=(50, 6)) + np.arange(6)  # a class bias per column
    scores = rng.normal(size=(7, 6))
    np.testing.assert_array_equal(recording_normalized(scores, reference, "none"), scores)
    np.testing.assert_allclose(recording_normalized(reference, reference, "center").mean(axis=0), 0.0, atol=1e-12)
    standardized = recording_normalized(reference, reference, "standardize")
    assert standardized[:, 1:].std() == pytest.approx(1.0)
    # block products: one spread per product
    blocks = np.stack([reference, 10 * reference], axis=-1)
    out = recording_normalized(blocks, blocks, "standardize")
    np.testing.assert_allclose(out[..., 0], out[..., 1])
    with pytest.raises(ValueError, match="recording_calibration"):
        recording_normalized(scores, reference, "per_video")


@pytest.mark.parametrize("mode", ["none", "center", "standardize"])
@pytest.mark.parametrize("blocks", [False, True])
def test_window_normalized_is_the_recording_rule_applied_to_each_window_alone(mode, blocks):
    rng = np.random.default_rng(1)
    cells = rng.normal(size=(40, 5, 3)) + np.arange(5)[:, None]  # a class bias
    cells = cells if blocks else cells[..., 0]
    first = np.array([0, 3, 10, 33, 39])
    num = np.array([4, 7, 1, 7, 1])
    out = window_normalized(cells, first, num, mode)
    assert out.shape == (5, 7) + cells.shape[1:]
    for i, (f, k) in enumerate(zip(first, num)):
        window = cells[f:f + k]
        np.testing.assert_allclose(out[i, :k], recording_normalized(window, window, mode), atol=1e-6)
        assert not out[i, k:].any()  # past the window: nothing


def test_pair_products_sum_to_the_dot_product_and_pair_only_like_blocks():
    rng = np.random.default_rng(2)
    layout = [("video", 0, 4), ("text", 4, 7), ("text", 7, 10)]
    pairs = block_pairs(layout, layout)
    assert pairs == [(0, 0), (1, 1), (1, 2), (2, 1), (2, 2)]
    x, steps = rng.normal(size=(6, 10)), rng.normal(size=(4, 10))
    products = pair_products(x, steps, layout, layout, pairs)
    assert products.shape == (6, 4, 5)
    diagonal = [p for p, (i, j) in enumerate(pairs) if i == j]
    np.testing.assert_allclose(products[..., diagonal].sum(axis=-1), x @ steps.T)
    np.testing.assert_allclose(products[..., 2], x[:, 4:7] @ steps[:, 7:10].T)  # text block 1 x caption


def test_distinct_columns_drop_copies():
    a = np.random.default_rng(3).normal(size=(5, 4, 3))
    a[..., 2] = a[..., 0]
    assert distinct_columns({"v": a}) == [0, 1]
    b = a.copy()
    b[0, 0, 2] += 1.0  # a copy in one video only is not a copy
    assert distinct_columns({"v": a, "w": b}) == [0, 1, 2]


def test_fused_calibration_recovers_the_weights_that_made_the_labels_and_generalises_the_temperature():
    rng = np.random.default_rng(4)
    features = {"a": rng.normal(scale=2.0, size=(3000, 6, 2)), "b": rng.normal(scale=2.0, size=(2000, 9, 2))}
    truth = FusedCalibration((1.5, 0.3), irrelevant_bias=1.0)
    labels = {v: np.array([rng.choice(f.shape[1], p=row) for row in np.exp(truth.log_probs(f))])
              for v, f in features.items()}
    fitted = FusedCalibration.fit(features, labels)
    assert fitted.weights == pytest.approx((1.5, 0.3), abs=0.1)
    assert fitted.irrelevant_bias == pytest.approx(1.0, abs=0.2) and fitted.columns == (0, 1)
    # one product: the same likelihood optimum as the temperature calibration
    scores = {v: f[..., 0] for v, f in features.items()}
    one = FusedCalibration.fit({v: s[..., None] for v, s in scores.items()}, labels)
    temperature = Calibration.fit(scores, labels)
    assert one.weights[0] == pytest.approx(1 / temperature.temperature, rel=2e-3)
    assert one.irrelevant_bias == pytest.approx(temperature.irrelevant_bias / temperature.temperature, abs=5e-3)


def test_the_window_decoder_takes_cells_laid_out_per_window():
    rng = np.random.default_rng(5)
    rec, grid, truth, cell_scores = noisy_recording(rng)
    plan = PlanModel.fit([noisy_recording(rng)[0]])
    decoder = WithinWindowDecoder(plan, 12.0)
    cells = Calibration().log_probs(cell_scores)
    n = len(grid)
    first = np.clip(np.arange(n) - 5, 0, None)
    num = np.minimum(np.arange(n) + 5, n - 1) - first + 1
    query = np.arange(n) - first
    samples = np.log(np.full((n, rec.num_classes), 1.0 / rec.num_classes))
    settings = DecodeSettings(cell_weight=1.0, labels="posterior")
    per_cell = decoder.decode(rec, cells, samples, first, num, query, settings)
    laid_out = decoder.decode(rec, window_normalized(cells, first, num, "none"), samples, first, num, query,
                              settings)
    np.testing.assert_allclose(laid_out.posteriors, per_cell.posteriors)


# ------------------------------------------------------------------------- a decoding run's emissions


def test_emission_candidates_put_the_global_calibration_first():
    assert Emissions.candidates() == [Emissions()]
    assert Emissions.candidates(["none", "center"], [False, True]) == [
        Emissions("none", False), Emissions("center", False), Emissions("none", True), Emissions("center", True)]
    with pytest.raises(ValueError, match="recording_calibration must be among"):
        Emissions("per_video")


def scored_members(rng, n_members=2):
    """Members of an ensemble on two videos: val / test scores whose labels follow them, and block products."""
    labels = {v: rng.integers(0, 4, size=n) for v, n in (("a", 300), ("b", 200))}
    members = []
    for scale in (2.0, 5.0)[:n_members]:
        m = {}
        for split in ("val", "test"):
            m[split] = {v: scale * np.eye(4)[y] + rng.normal(size=(len(y), 4)) for v, y in labels.items()}
            m[split + "_blocks"] = {v: np.stack([x / 2, x / 2], axis=-1) for v, x in m[split].items()}
        members.append(m)
    return members, labels


def test_mean_log_probs_average_each_members_own_calibration():
    members, labels = scored_members(np.random.default_rng(6))
    out, calibrations = mean_log_probs(members, labels, "test")
    fitted = [Calibration.fit(m["val"], labels) for m in members]
    assert calibrations == [{"temperature": c.temperature, "irrelevant_bias": c.irrelevant_bias} for c in fitted]
    for v in labels:
        np.testing.assert_allclose(out[v], np.mean([c.log_probs(m["test"][v]) for c, m in zip(fitted, members)],
                                                   axis=0))
    # the weaker member (scale 2) is calibrated to a higher temperature than the stronger one
    assert calibrations[0]["temperature"] > calibrations[1]["temperature"]
    fused, fused_calibrations = mean_log_probs(members, labels, "test", Emissions(block_fusion=True))
    assert set(fused) == set(labels) and "weights" in fused_calibrations[0]
    with pytest.raises(ValueError, match="reference rows"):
        mean_log_probs(members, labels, "test", Emissions("center"))


def test_within_window_emissions_fit_the_cells_on_annotated_val_cells_or_at_the_samples_own_cells():
    rng = np.random.default_rng(7)
    members, labels = scored_members(rng, n_members=1)
    cell_labels_ = {v: rng.integers(0, 4, size=30) for v in labels}
    cell_labels_["a"][:5] = NOT_ANNOTATED
    cells = {split: {v: 3 * np.eye(4)[np.maximum(y, 0)] + rng.normal(size=(30, 4)) for v, y in cell_labels_.items()}
             for split in ("val", "test")}
    windows = {split: {v: WindowRows(np.clip(np.arange(len(y)) % 30 - 2, 0, None),
                                     np.full(len(y), 3), np.minimum(np.arange(len(y)) % 30, 2))
                       for v, y in labels.items()} for split in ("val", "test")}
    samples, cell_log_probs, fitted = within_window_emissions(members, labels, cells, cell_labels_, windows,
                                                              Emissions())
    expected = Calibration.fit({v: c[cell_labels_[v] != NOT_ANNOTATED] for v, c in cells["val"].items()},
                               {v: y[y != NOT_ANNOTATED] for v, y in cell_labels_.items()})
    assert fitted["cell_calibration"] == {"temperature": expected.temperature,
                                          "irrelevant_bias": expected.irrelevant_bias}
    np.testing.assert_allclose(cell_log_probs["test"]["b"], expected.log_probs(cells["test"]["b"]))
    np.testing.assert_allclose(samples["val"]["a"], mean_log_probs(members, labels, "val")[0]["a"])
    assert len(fitted["calibrations"]) == 1
    # against each window alone: the cells laid out per window, fitted at the samples' own cells
    _, laid_out, _ = within_window_emissions(members, labels, cells, cell_labels_, windows, Emissions("center"))
    assert laid_out["test"]["a"].shape == (len(labels["a"]), 3, 4)


def test_cells_are_scored_alone_and_labelled_at_their_centres():
    rng = np.random.default_rng(8)
    cells, steps = rng.normal(size=(5, 6)), rng.normal(size=(3, 6))
    np.testing.assert_allclose(cell_scores(cells, steps), cells @ steps.T)
    layout = [("text", 0, 3), ("text", 3, 6)]
    products = cell_scores(cells, steps, (layout, layout))
    np.testing.assert_allclose(products[..., 0] + products[..., 3], cells @ steps.T)
    rec = recording([1, 0, 2], [30.0, 6.0, 24.0], num_steps=2)  # 60 s: cells of 12 s centred at 6, 18, 30, 42, 54
    assert cell_labels(rec, 5, 12.0).tolist() == [1, 1, 0, 2, 2]


# ------------------------------------------------------------------------- the recipe's scores in blocks

def test_a_recipes_block_products_sum_to_its_scores(tmp_path):
    import torch

    from datamodules.step_recognition import StepRecognitionDataModule
    from models.heads import LFBCat
    from models.step_recognition import StepRecognitionModule
    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
    from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset
    from spacewalk.training.decoding import score_blocks, score_samples

    from fakes import FakeText

    dataset = Spacewalk18(ensure_dataset(tmp_path / "sw18", seed=0, n_train=1, n_val=1, n_test=1, minutes=(3, 4),
                                         steps_per_video=(3, 4), samples_per_video=100,
                                         retrieval_samples_per_video=10, questions_per_video=2, progress=False))
    dm = StepRecognitionDataModule(dataset, tmp_path / "bank", text_encoder=FakeText(), context_seconds=60.0,
                                   bank_config=dict(segment_seconds=12.0), eval_batch_size=33)
    dm.setup()
    blocks, _ = dm.layout_blocks()
    assert blocks == [("text", 0, 8), ("text", 8, 16)]
    torch.manual_seed(0)
    model = StepRecognitionModule(LFBCat(16, identity_init=False), irrelevant="argmax")  # cross terms non-zero
    products = score_blocks(model, dm, "test")
    scores = score_samples(model, dm, "test")
    for v, p in products.items():
        assert p.shape == scores[v].shape + (4,)  # (t1, narration), (t1, caption), (t2, narration), (t2, caption)
        np.testing.assert_allclose(p[..., 0] + p[..., 3], scores[v], rtol=1e-4, atol=1e-4)
        assert np.abs(p[..., 1]).max() > 1e-3
    model.hparams.irrelevant = "threshold"  # class 0 is tau in the prediction file, not a score: no products
    assert not any(p[:, 0].any() for p in score_blocks(model, dm, "test").values())
