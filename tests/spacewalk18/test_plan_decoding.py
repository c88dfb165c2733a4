"""The plan decoder (spacewalk/benchmarks/spacewalk18/decoding/plan_decoder.py): the chain estimated from
annotations, its transitions, the calibration, and both decoders on recordings whose truth is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.special import softmax

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, Recording, Segment, Step, StepSample
from spacewalk.benchmarks.spacewalk18.decoding.plan_decoder import (
    Calibration,
    DecodeSettings,
    PlanModel,
    WholeRecordingDecoder,
    WithinWindowDecoder,
    grid_cell,
    grid_samples,
    transitions,
)


def recording(labels: list[int], seconds: list[float], num_steps: int, video_id: str = "01012020") -> Recording:
    edges = np.r_[0.0, np.cumsum(seconds)]
    segments = tuple(Segment(float(s), float(e), int(round(s * FPS)), int(round(e * FPS)), label)
                     for s, e, label in zip(edges[:-1], edges[1:], labels))
    steps = (Step(0, "Irrelevant", "", None, None),) + tuple(Step(i, f"s{i}", "", 0.0, 1.0)
                                                              for i in range(1, num_steps + 1))
    return Recording(video_id, segments, steps, Path("/nonexistent.csv"), Path("/nonexistent.mp4"))


def test_the_plan_counts_what_the_annotations_do():
    rec = recording([-1, 1, 0, 1, 2, 0, 3, -1, 2, -1], [5, 10, 20, 10, 30, 20, 10, 5, 10, 5], num_steps=3)
    plan = PlanModel.fit([rec], smoothing=0.0)
    # step segments 1, 1, 2, 3, 2 (mean 14 s); interludes 20, 20; the inner -1 is skipped, the chain goes on
    assert plan.step_seconds == pytest.approx(14.0) and plan.irrelevant_seconds == pytest.approx(20.0)
    # after a step: interlude (1 -> 0, 2 -> 0), +1 (1 -> 2), -1 (3 -> 2 across the -1): 2 of 4 to Irrelevant
    assert plan.to_irrelevant == pytest.approx(0.5)
    assert plan.step_offsets[1] == pytest.approx(0.5) and plan.step_offsets[-1] == pytest.approx(0.5)
    # interludes resume the same step (1 after 1) or the next (3 after 2)
    assert plan.resume_offsets[0] == pytest.approx(0.5) and plan.resume_offsets[1] == pytest.approx(0.5)
    assert plan.start_irrelevant == 0.0


def test_the_rate_matrix_is_a_generator_and_interludes_remember_the_step():
    rec = recording([-1, 1, 0, 1, 2, 0, 3, 0, 2, -1], [5, 10, 20, 10, 30, 20, 10, 5, 10, 5], num_steps=3)
    plan = PlanModel.fit([rec])
    q = plan.rate_matrix(4)
    np.testing.assert_allclose(q.sum(axis=1), 0.0, atol=1e-12)
    off = q - np.diag(np.diag(q))
    assert (off >= 0).all()
    classes = PlanModel.state_classes(4)  # S_1..S_4, I_0..I_4
    assert classes.tolist() == [1, 2, 3, 4, 0, 0, 0, 0, 0]
    for k in range(1, 5):
        # a step's only way into Irrelevant is its own memory state; interludes go back to steps only
        assert np.flatnonzero(off[k - 1, 4:]).tolist() == [k]
    assert not off[4:, 4:].any()
    # leaving rates are 1 / the mean segment lengths, scaled
    assert -q[0, 0] == pytest.approx(1.0 / plan.step_seconds)
    assert -q[4, 4] == pytest.approx(1.0 / plan.irrelevant_seconds)
    np.testing.assert_allclose(plan.rate_matrix(4, rate_scale=2.0), 2.0 * q)
    assert plan.initial(4).sum() == pytest.approx(1.0)


def test_transitions_are_distributions_and_a_zero_gap_is_the_identity():
    plan = PlanModel.fit([recording([-1, 1, 0, 2, -1], [5, 30, 10, 30, 5], num_steps=2)])
    matrices, index = transitions(plan.rate_matrix(2), [0.0, 0.2, 12.0, 24.0, 100.0])
    np.testing.assert_allclose(matrices.sum(axis=2), 1.0)
    assert index.tolist() == [0, 1, 1, 2] and np.allclose(matrices[0], np.eye(5))
    with pytest.raises(ValueError, match="decrease"):
        transitions(plan.rate_matrix(2), [0.0, 5.0, 4.0])


def test_calibration_recovers_the_temperature_and_bias_that_made_the_labels():
    rng = np.random.default_rng(0)
    scores = {"a": rng.normal(scale=3.0, size=(4000, 6))}
    truth = Calibration(temperature=2.0, irrelevant_bias=1.5)
    p = np.exp(truth.log_probs(scores["a"]))
    labels = {"a": np.array([rng.choice(6, p=row) for row in p])}
    fitted = Calibration.fit(scores, labels)
    assert fitted.temperature == pytest.approx(2.0, rel=0.1) and fitted.irrelevant_bias == pytest.approx(1.5, abs=0.3)


def noisy_recording(rng, num_steps=5, seconds=120.0):
    labels = [-1] + [x for k in range(1, num_steps + 1) for x in (k, 0)] + [-1]
    rec = recording(labels, [30.0] + [seconds, 24.0] * num_steps + [30.0], num_steps)
    grid = grid_samples(rec, 12.0)
    truth = np.array([rec.label_at_frame(g.frame_index) for g in grid])
    scores = rng.normal(scale=1.0, size=(len(grid), num_steps + 1))
    scores[np.arange(len(grid)), np.maximum(truth, 0)] += 1.2  # weak evidence for the true class
    return rec, grid, truth, scores


def test_the_whole_recording_decoder_beats_the_raw_scores_and_ignores_where_samples_lie():
    rng = np.random.default_rng(1)
    rec, grid, truth, scores = noisy_recording(rng)
    plan = PlanModel.fit([noisy_recording(rng)[0]])
    decoder = WholeRecordingDecoder(plan)
    scores = Calibration().log_probs(scores)
    annotated = truth >= 0
    settings = DecodeSettings(emission_weight=1.0)
    decoded = decoder.decode(rec, grid, scores, grid, settings, 12.0)
    raw = (scores.argmax(axis=1) == truth)[annotated].mean()
    assert (decoded.labels == truth)[annotated].mean() > raw + 0.2
    np.testing.assert_allclose(decoded.posteriors.sum(axis=1), 1.0)
    # two different sets of samples: a sample in both gets the same decoding (its grid cell's)
    some = [StepSample(i, g.timestamp + 3.0, g.frame_index, 0) for i, g in enumerate(grid[10:40])]
    other = [StepSample(0, some[5].timestamp, some[5].frame_index, 0)]
    a = decoder.decode(rec, grid, scores, some, settings, 12.0)
    b = decoder.decode(rec, grid, scores, other, settings, 12.0)
    assert a.labels[5] == b.labels[0] and np.allclose(a.posteriors[5], b.posteriors[0])
    assert grid_cell(some, 12.0, len(grid)).tolist() == list(range(10, 40))


def test_the_window_decoder_uses_only_the_window():
    rng = np.random.default_rng(2)
    rec, grid, truth, cell_scores = noisy_recording(rng)
    plan = PlanModel.fit([noisy_recording(rng)[0]])
    decoder = WithinWindowDecoder(plan, 12.0)
    cell_scores = Calibration().log_probs(cell_scores)
    n = len(grid)
    first = np.clip(np.arange(n) - 5, 0, None)
    last = np.minimum(np.arange(n) + 5, n - 1)
    query = np.arange(n) - first
    sample_scores = np.log(softmax(rng.normal(size=(n, rec.num_classes)), axis=1))  # uninformative samples
    settings = DecodeSettings(emission_weight=1.0, cell_weight=1.0)
    decoded = decoder.decode(rec, cell_scores, sample_scores, first, last - first + 1, query, settings)
    annotated = truth >= 0
    raw = (cell_scores.argmax(axis=1) == truth)[annotated].mean()
    assert (decoded.labels == truth)[annotated].mean() > raw + 0.1
    # a cell outside every window of the first sample changes nothing of its decoding
    changed = cell_scores.copy()
    changed[20:] = np.log(softmax(rng.normal(size=changed[20:].shape) * 10, axis=1))
    again = decoder.decode(rec, changed, sample_scores[:1], first[:1], (last - first + 1)[:1], query[:1], settings)
    assert again.labels[0] == decoded.labels[0] and np.allclose(again.posteriors[0], decoded.posteriors[0])
