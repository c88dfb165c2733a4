"""spacewalk/results/bootstrap.py: the flat (scipy) and the two-stage (ours) bootstrap intervals, on hand-checked
cases."""

from __future__ import annotations

import numpy as np
import pytest

from spacewalk.core.errors import ConfigError
from spacewalk.results.bootstrap import (
    BootstrapOptions,
    accuracy_intervals,
    flat_interval,
    grouped_draws,
    grouped_interval,
    summary_intervals,
)

OPTS = BootstrapOptions(n_resamples=2000, level=0.95, seed=0)


def test_flat_interval_contains_the_estimate_of_a_symmetric_case_and_names_its_unit():
    values = np.array([0, 1] * 50, dtype=float)  # accuracy 50 % over 100 questions
    interval = flat_interval(values, OPTS, "questions", scale=100).as_dict()
    assert interval["estimate"] == 50.0 and interval["unit"] == "questions" and interval["n"] == 100
    assert interval["low"] < 50 < interval["high"]
    # the normal approximation: 50 +- 1.96 * 5 points
    assert interval["low"] == pytest.approx(40.2, abs=1.5) and interval["high"] == pytest.approx(59.8, abs=1.5)
    assert interval["high"] - 50 == pytest.approx(50 - interval["low"], abs=1.5)
    assert {k: interval[k] for k in ("level", "n_resamples", "seed", "method")} == \
        {"level": 0.95, "n_resamples": 2000, "seed": 0, "method": "percentile"}


def test_same_seed_same_interval_other_seed_or_resamples_another():
    values = np.random.default_rng(1).random(40)
    first, again = flat_interval(values, OPTS, "samples"), flat_interval(values, OPTS, "samples")
    assert first == again
    assert flat_interval(values, BootstrapOptions(n_resamples=500), "samples") != first
    assert flat_interval(values, BootstrapOptions(n_resamples=2000, seed=1), "samples") != first
    assert flat_interval(values, BootstrapOptions(method="BCa"), "samples").low is not None


def test_degenerate_cases():
    same = flat_interval(np.ones(10), OPTS, "questions")
    assert same.low == same.high == same.estimate == 1.0
    one = flat_interval(np.ones(1), OPTS, "questions")
    assert one.estimate == 1.0 and one.low is None and one.high is None


def test_options_are_checked():
    assert not BootstrapOptions(n_resamples=0).enabled
    assert BootstrapOptions.from_mapping(None) == BootstrapOptions()
    assert BootstrapOptions.from_mapping({"n_resamples": 10}).n_resamples == 10
    for bad in ({"n_resamples": -1}, {"level": 95}, {"method": "normal"}, {"resamples": 10}):
        with pytest.raises(ConfigError, match="metrics.bootstrap"):
            BootstrapOptions.from_mapping(bad)


def mean_of_units(group: np.ndarray, counts: np.ndarray) -> np.ndarray:
    return counts @ group / counts.sum(axis=1)


def test_grouped_draws_resample_recordings_then_samples_within_them():
    sizes = [3, 5, 2]
    draws = grouped_draws(sizes, BootstrapOptions(n_resamples=200, seed=0))
    assert draws.outer.shape == (200, 3)
    # each recording is drawn about a third of the time, and some resamples leave one out or repeat one
    assert all(abs(np.mean(draws.outer == g) - 1 / 3) < 0.05 for g in range(3))
    assert any(len(set(row)) < 3 for row in draws.outer.tolist())
    for g, n in enumerate(sizes):
        counts = draws.inner[g]
        assert counts.shape == ((draws.outer == g).sum(), n) and (counts.sum(axis=1) == n).all()
        assert (counts != 1).any()  # samples resampled within, not all taken once
    flat = grouped_draws(sizes, BootstrapOptions(n_resamples=200, seed=0), within=False)
    assert (flat.outer == draws.outer).all()  # the same recordings whatever the inner level
    assert all((c == 1).all() for c in flat.inner)
    # the draws depend on the seed and the sizes only: two runs on the same split are paired
    again = grouped_draws(sizes, BootstrapOptions(n_resamples=200, seed=0))
    assert all((a == b).all() for a, b in zip(again.inner, draws.inner, strict=True))


def test_grouped_interval_is_the_spread_between_recordings():
    # two recordings, every sample of one right and of the other wrong: the official mean is 50 %; a resample
    # draws recording A twice (25 %), B twice (25 %) or each once (50 %): the 95 % interval is [0, 100]
    groups = [np.ones(4), np.zeros(6)]
    interval = grouped_interval(groups, [4, 6], mean_of_units, OPTS, "recordings, then samples within them",
                                scale=100)
    assert interval.estimate == 50.0 and (interval.low, interval.high) == (0.0, 100.0)
    assert interval.method.startswith("percentile (two-stage")
    # the same recordings with samples that vary within them: narrower within, still centred
    rng = np.random.default_rng(0)
    groups = [rng.random(200) < 0.6 for _ in range(30)]
    wide = grouped_interval(groups, [200] * 30, mean_of_units, OPTS, "recordings, then samples within them")
    assert wide.low < wide.estimate < wide.high
    recordings_only = grouped_interval(groups, [200] * 30, mean_of_units, OPTS, "recordings", within=False)
    assert recordings_only.high - recordings_only.low < wide.high - wide.low  # the inner level adds variance
    assert grouped_interval(groups, [200] * 30, mean_of_units, OPTS, "recordings, then samples within them") == wide
    assert grouped_interval(groups, [200] * 30, mean_of_units, BootstrapOptions(n_resamples=300),
                            "recordings, then samples within them") != wide


def test_grouped_interval_leaves_undefined_recordings_out_of_the_mean():
    def metric(group, counts):
        return np.full(len(counts), group)

    interval = grouped_interval([0.2, np.nan, 0.4], [1, 1, 1], metric, OPTS, "recordings", within=False)
    assert interval.estimate == pytest.approx(0.3)
    assert interval.low == pytest.approx(0.2) and interval.high == pytest.approx(0.4)


def test_accuracy_intervals_overall_and_per_group_carry_the_official_estimates():
    correct = [True, False, True, True] * 10 + [False] * 10
    domains = ["a"] * 40 + ["b"] * 10
    out = accuracy_intervals(correct, OPTS, groups={"domain": domains},
                             estimates={"accuracy": 60.0, "per_domain": {"a": 75.0, "b": 0.0}})
    assert out["accuracy"]["estimate"] == 60.0 and out["accuracy"]["low"] < 60 < out["accuracy"]["high"]
    assert set(out["per_domain"]) == {"a", "b"} and out["per_domain"]["a"]["n"] == 40
    assert out["per_domain"]["b"]["low"] == out["per_domain"]["b"]["high"] == 0.0  # all wrong: no spread
    assert accuracy_intervals(correct, OPTS)["accuracy"]["estimate"] == pytest.approx(60.0)


def test_a_bootstrap_stratified_by_recording_keeps_every_recording_once():
    draws = grouped_draws([3, 5], BootstrapOptions(n_resamples=50, seed=0), between=False)
    assert (draws.outer == [0, 1]).all() and all(len(c) == 50 and (c != 1).any() for c in draws.inner)
    groups = [np.ones(4), np.zeros(6)]  # no spread within a recording: none at all when the recordings are kept
    interval = grouped_interval(groups, [4, 6], mean_of_units, OPTS, "samples", between=False, scale=100)
    assert (interval.estimate, interval.low, interval.high, interval.n) == (50.0, 50.0, 50.0, 10)
    assert interval.method == "percentile (stratified by recording: ours)"
    with pytest.raises(ValueError, match="resamples"):
        grouped_draws([3], OPTS, within=False, between=False)


def test_summary_intervals_cover_every_number_of_a_nested_summary_from_the_same_resamples():
    units = [{"hit": i % 2 == 0, "score": i / 10} for i in range(40)]

    def summarise(xs):
        return {"total": len(xs), "R@1": 100 * sum(x["hit"] for x in xs) / len(xs),
                "mean": {"0.5": sum(x["score"] for x in xs) / len(xs)}}

    out = summary_intervals(units, summarise, OPTS, "queries")
    assert set(out) == {"R@1", "mean/0.5"}  # the count is no metric
    assert out["R@1"]["estimate"] == 50.0 and out["R@1"]["low"] < 50 < out["R@1"]["high"]
    assert out["mean/0.5"]["low"] < 1.95 < out["mean/0.5"]["high"] and out["R@1"]["unit"] == "queries"
    assert summary_intervals(units, summarise, OPTS, "queries") == out
