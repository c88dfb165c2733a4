"""spacewalk.results.statistics: the exact sign-flip test, Student's t and Welch-Satterthwaite intervals, and the
power figures, on hand-checked cases, against scipy, and by a small simulation at the benchmark's size."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from spacewalk.results import statistics as st


@pytest.mark.parametrize("n", [2, 3, 5, 6, 9, 12])
def test_the_sign_flip_test_is_scipys_permutation_test(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        d = rng.normal(0.4, 1.0, n)
        want = stats.permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                                      vectorized=True, n_resamples=2 ** n, alternative="two-sided").pvalue
        got = st.sign_flip_test(d)
        assert got.exact and got.n == n and got.p == pytest.approx(want, abs=1e-12)


def test_the_smallest_p_of_few_recordings_cannot_reach_005():
    # every difference of one sign: only it and its mirror are as extreme, p = 2 / 2^G
    for n in range(1, 9):
        test = st.sign_flip_test(np.arange(1.0, n + 1))
        assert test.p == pytest.approx(st.smallest_sign_flip_p(n)) == pytest.approx(min(1.0, 2 / 2 ** n))
        assert test.reachable() == (n >= 6)
    mixed = st.sign_flip_test([1.0, 2, 3, 4, 5, -0.5])  # one recording the other way: the mirror and one more
    assert mixed.p == pytest.approx(4 / 64)
    assert st.sign_flip_test([0.0, 0.0, 0.0]).p == 1.0 and st.sign_flip_test([]).n == 0
    assert st.sign_flip_test([1.0, math.nan, 2.0]).n == 2  # an undefined recording is left out


def test_thousands_of_units_are_tested_too():
    # questions or samples by the thousand: the smallest p is below any float, the Monte Carlo p is not
    assert st.smallest_sign_flip_p(5000) == 0.0 and st.sign_flip_test(np.ones(5000)).reachable()
    assert st.sign_flip_test(np.random.default_rng(0).normal(0, 1, 3000)).p > 0


def test_beyond_sixteen_recordings_a_monte_carlo_sample_of_sign_patterns():
    d = np.random.default_rng(0).normal(0.0, 1.0, 30)
    test = st.sign_flip_test(d, seed=1)
    assert not test.exact and 0 < test.p <= 1
    assert st.sign_flip_test(d, seed=1).p == test.p  # the same seed, the same patterns
    strong = st.sign_flip_test(np.full(30, 5.0))
    assert strong.p == pytest.approx(1 / (1 + st.MONTE_CARLO))  # never 0


def test_students_t_interval_by_hand():
    made = st.t_interval([1.0, 2.0, 3.0], 0.95)
    half = 4.302652729911275 / math.sqrt(3)  # t(0.975, 2 df) times the standard error 1 / sqrt(3)
    assert (made.estimate, made.df) == (2.0, 2) and (made.low, made.high) == (pytest.approx(2 - half),
                                                                               pytest.approx(2 + half))
    assert st.t_interval([1.0, 2.0, 3.0], 0.95, bounds=(1.0, 100.0)).low == 1.0  # cut to the metric's range
    one = st.t_interval([5.0])
    assert one.estimate == 5.0 and one.low is None  # one recording: no interval over recordings
    interval = st.recording_interval([10.0, None, 20.0, math.nan, 30.0], 0.95, "recordings")
    assert interval.n == 3 and interval.estimate == 20.0 and interval.values == "per_video"


def test_welch_satterthwaite_by_hand_and_never_narrower_than_a_part():
    assert st.satterthwaite([(1.0, 2), (1.0, 2)]) == (2.0, pytest.approx(4.0))
    assert st.satterthwaite([(0.0, 2), (0.0, 3)]) == (0.0, None)
    # one seed a side: the recipes' claim is Student's t over the per-recording differences
    a, b = np.array([[10.0, 12.0, 15.0, 11.0]]), np.array([[12.0, 13.0, 18.0, 12.5]])
    made, t = st.recipes_difference(a, b), st.t_interval((b - a)[0])
    assert (made.low, made.high, made.p) == (pytest.approx(t.low), pytest.approx(t.high),
                                             pytest.approx(2 * stats.t.sf(t.estimate / t.se, 3)))
    # another seed's spread added: never narrower than the recordings' part alone
    seeds_b = np.vstack([b, b + 3.0])
    wider = st.recipes_difference(a, seeds_b)
    assert wider.high - wider.low >= made.high - made.low and wider.p >= made.p


def test_power_over_recordings_matches_the_sign_flip_tests_own_rule():
    # at 6 recordings the exact test rejects only when all 6 differences share a sign: 80 % power needs
    # P(d > 0) = 0.8 ** (1/6) per recording, delta / sigma = Phi^-1 of it (1.79)
    assert st.detectable_over_recordings(1.0, 5) is None  # 5 recordings never give p < 0.05
    assert st.detectable_over_recordings(1.0, 6) == pytest.approx(stats.norm.ppf(0.8 ** (1 / 6)), abs=0.05)
    assert st.detectable_over_recordings(2.0, 6) == pytest.approx(2 * st.detectable_over_recordings(1.0, 6))
    # many recordings: the non-central t's answer, near (z_0.975 + z_0.8) / sqrt(G)
    assert st.detectable_over_recordings(1.0, 50) == pytest.approx((1.96 + 0.8416) / math.sqrt(50), rel=0.03)
    assert st.detectable_from_se(1.0) == pytest.approx(stats.norm.ppf(0.975) + stats.norm.ppf(0.8))


def test_at_six_recordings_the_new_rules_keep_their_promise():
    """A small version of measurements/paired_test_calibration.py: 600 null and 600 shifted sets of 6 per-recording
    differences; the sign-flip test's false positives stay at or below 5 % and the t interval covers 95 %, each
    within three Monte Carlo standard errors."""
    rng = np.random.default_rng(7)
    pairs, se = 600, math.sqrt(0.05 * 0.95 / 600)
    null = rng.normal(0.0, 2.5, (pairs, 6))
    false_positives = np.mean([st.sign_flip_test(d).p <= 0.05 for d in null])
    shifted = rng.normal(2.0, 2.5, (pairs, 6))
    covered = np.mean([(m := st.t_interval(d)).low <= 2.0 <= m.high for d in shifted])
    assert false_positives <= 0.05 + 3 * se
    assert abs(covered - 0.95) <= 3 * se
