"""spacewalk.results.seed_groups: runs that differ only in their seed, as mean ± std beside the setting's interval over
recordings and seeds."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from spacewalk.results.runs import Metric, read_run
from spacewalk.results.seed_groups import format_summary, group_by_seed, summarize
from spacewalk.results.statistics import satterthwaite, t_quantile

from helpers.run_dir_fakes import step_metrics, write_run


def test_runs_group_by_everything_but_the_seed(tmp_path):
    runs = [read_run(write_run(tmp_path / str(i), [f"model={m}", "context=5min", f"seed={s}"],
                               step_metrics(10 + i, 20, 5)))
            for i, (m, s) in enumerate([("lfb_avg", 0), ("lfb_cat", 0), ("lfb_avg", 1), ("lfb_cat", 1),
                                        ("lfb_avg", 2)])]
    runs.append(read_run(write_run(tmp_path / "other", ["model=lfb_avg", "context=1min", "seed=0"],
                                   step_metrics(1, 2, 3))))
    groups = group_by_seed(runs)
    assert [(g.overrides, g.seeds) for g in groups] == [(("model=lfb_avg", "context=5min"), [0, 1, 2]),
                                                        (("model=lfb_cat", "context=5min"), [0, 1]),
                                                        (("model=lfb_avg", "context=1min"), [0])]
    assert groups[0].command() == "python train.py -m model=lfb_avg context=5min seed=0,1,2"
    assert groups[2].command() == "python train.py model=lfb_avg context=1min seed=0"
    summary = groups[0].summary()
    assert list(summary)[:3] == ["Accuracy", "mAP", "IoU"]
    accuracy = summary["Accuracy"]
    assert accuracy.values == (10, 12, 14) and accuracy.mean == 12 and accuracy.method == "over recordings and seeds"
    assert accuracy.std == pytest.approx(2.0)  # the sample standard deviation (n - 1)
    assert accuracy.unit == "recordings, then samples within them"
    # by hand: the seeds' mean per recording is 11, 12, 13 (variance 1, over 3 recordings: 1/3, 2 df); the seeds'
    # numbers 10, 12, 14 (variance 4, over 3 seeds: 4/3, 2 df); Welch-Satterthwaite, but never narrower than a
    # part's own t interval (here the seeds' part's: 2.94 pooled degrees of freedom would narrow it)
    variance, df = satterthwaite([(1 / 3, 2), (4 / 3, 2)])
    assert variance == pytest.approx(5 / 3) and df == pytest.approx((5 / 3) ** 2 / ((1 / 9 + 16 / 9) / 2))
    assert t_quantile(0.95, df) * math.sqrt(variance) < t_quantile(0.95, 2) * math.sqrt(4 / 3)
    half = t_quantile(0.95, 2) * math.sqrt(4 / 3)
    assert (accuracy.low, accuracy.high) == (pytest.approx(12 - half), pytest.approx(12 + half))


def test_re_tests_of_each_seeds_checkpoint_are_one_setting(tmp_path):
    runs = []
    for seed in (0, 1):
        trained = write_run(tmp_path / f"train{seed}", ["model=lfb_avg", f"seed={seed}"], step_metrics(1, 2, 3))
        runs.append(read_run(write_run(tmp_path / f"decode{seed}", [f"ckpt_path={trained}/checkpoints/e.ckpt",
                                                                    "decoding=whole_recording"],
                                       step_metrics(30 + seed, 2, 3), entry="evaluate")))
    [group] = group_by_seed(runs)
    assert group.seeds == [0, 1]
    assert group.command() == "; ".join(f"python evaluate.py ckpt_path={tmp_path}/train{s}/checkpoints/e.ckpt "
                                        "decoding=whole_recording" for s in (0, 1))


def test_one_run_over_recordings_is_its_t_interval_and_flat_units_add_the_seeds():
    per_recording = tuple(zip("abc", (10.0, 20.0, 30.0)))
    one = summarize([Metric(20.0, 0.0, 1.0, "recordings", 0.95, 3, per_recording)])
    half = t_quantile(0.95, 2) * 10 / math.sqrt(3)
    assert (one.low, one.high, one.std, one.method) == (pytest.approx(max(0, 20 - half)), pytest.approx(20 + half),
                                                        None, "over recordings")
    # questions: each run's bootstrap interval stands for its units' standard error; the seeds' spread is added
    flat = summarize([Metric(40.0, 30.0, 50.0, "questions", 0.95, 100), Metric(44.0, 34.0, 54.0, "questions", 0.95,
                                                                               100)])
    assert flat.method == "over the units and seeds" and flat.high - flat.low > 20  # wider than one run's
    assert format_summary(summarize([Metric(19.094, 15.1, 23.05, "questions", 0.95, 100)])) == "19.09 [15.10, 23.05]"


def test_summaries_of_missing_bounds_undefined_numbers_and_missing_runs():
    three = summarize([Metric(1.0), Metric(2.0), Metric(3.0)])
    assert format_summary(three) == "2.00 ± 1.00" and three.std == statistics.stdev([1.0, 2.0, 3.0])
    partial = summarize([Metric(1.0, 0.0, 2.0, "questions", 0.95, 10), Metric(2.0)])  # one without an interval
    assert (partial.low, partial.high) == (None, None) and format_summary(partial) == "1.50 ± 0.71"
    # a NaN is never averaged away, and a run without the number is said
    undefined = summarize([Metric(1.0), Metric(math.nan)])
    assert undefined.flagged and math.isnan(undefined.mean) and format_summary(undefined) == "undefined in 1 of 2 runs"
    missing = summarize([Metric(1.0), Metric(3.0)], missing=1)
    assert missing.flagged and format_summary(missing) == "2.00 ± 1.41 (2 of 3 runs)"
    with pytest.raises(ValueError, match="no run reports"):
        summarize([])


def test_the_setting_interval_holds_seeds_that_disagree():
    # two seeds that agree on every recording's ranking but sit 4 points apart: the seeds' part widens it
    apart = np.array([[10.0, 20.0, 30.0], [14.0, 24.0, 34.0]])
    metrics = [Metric(float(row.mean()), None, None, "recordings", 0.95, 3, tuple(zip("abc", row))) for row in apart]
    together = [Metric(float(row.mean()), None, None, "recordings", 0.95, 3, tuple(zip("abc", row)))
                for row in apart[[0, 0]]]
    assert summarize(metrics).high - summarize(metrics).low > summarize(together).high - summarize(together).low
