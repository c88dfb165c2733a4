"""The non-learned baselines of evaluate.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from models.baselines import PlanPriorBaseline, RandomBaseline
from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18


def test_random_is_seeded_per_recording(tiny_root):
    ds = Spacewalk18(tiny_root)
    samples = ds.step_samples("test")["03032020"]
    rec = ds.recordings["03032020"]
    a = RandomBaseline(seed=3).score(rec, samples)
    assert a.shape == (len(samples), rec.num_classes)
    np.testing.assert_array_equal(a, RandomBaseline(seed=3).score(rec, samples))
    assert not np.array_equal(a, RandomBaseline(seed=4).score(rec, samples))
    other = dataclasses.replace(rec, video_id="09092029")
    assert not np.array_equal(a, RandomBaseline(seed=3).score(other, samples))


def test_plan_prior_scores_by_time_likelihood_and_reads_no_test_label(tiny_root):
    ds = Spacewalk18(tiny_root)
    model = PlanPriorBaseline(time_bins=4, position_bins=2)
    with pytest.raises(RuntimeError, match="before fit"):
        model.score(ds.recordings["03032020"], [])
    model.fit(ds, "train")
    samples = ds.step_samples("test")["03032020"]
    scores = model.score(ds.recordings["03032020"], samples)
    np.testing.assert_allclose(model.irrelevant_time.sum(), 1.0)  # P(time bin | class) per class
    np.testing.assert_allclose(model.step_time.sum(axis=1), 1.0)
    assert scores.shape == (len(samples), 3) and (scores > 0).all()
    relabelled = [dataclasses.replace(s, label=0) for s in samples]
    np.testing.assert_array_equal(scores, model.score(ds.recordings["03032020"], relabelled))


def test_plan_prior_learns_the_plan_order(tiny_root):
    # tiny recordings: step 1 during 10-40 s, Irrelevant 40-50 s, step 2 50-80 s, step 1 again 90-100 s
    ds = Spacewalk18(tiny_root)
    model = PlanPriorBaseline(time_bins=6, position_bins=2).fit(ds, "train")
    samples = ds.step_samples("test")["03032020"]
    predictions = model.score(ds.recordings["03032020"], samples).argmax(axis=1)
    by_time = {round(s.timestamp): int(p) for s, p in zip(samples, predictions)}
    assert all(p == 1 for t, p in by_time.items() if t < 40)
    assert all(p == 2 for t, p in by_time.items() if 60 <= t < 80)
