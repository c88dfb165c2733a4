"""spacewalk.results.seed_groups: runs that differ only in their seed, as mean ± std beside the pooled interval."""

from __future__ import annotations

import statistics

import pytest

from spacewalk.results.runs import Metric, read_run
from spacewalk.results.seed_groups import format_summary, group_by_seed, summarize

from run_dir_fakes import step_metrics, write_run


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
    assert summary["Accuracy"].values == (10, 12, 14) and summary["Accuracy"].mean == 12
    assert summary["Accuracy"].std == pytest.approx(2.0)  # the sample standard deviation (n - 1)
    # the pooled interval: the mean of the seeds' bounds (each run's is its value ± 2 here)
    assert (summary["Accuracy"].low, summary["Accuracy"].high) == (10.0, 14.0)
    assert summary["Accuracy"].unit == "recordings, then samples within them"


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


def test_summaries_of_one_seed_and_of_missing_bounds():
    one = summarize([Metric(19.094, 15.1, 23.05)])
    assert one.std is None and format_summary(one) == "19.09 [15.10, 23.05]"
    three = summarize([Metric(1.0, 0.0, 2.0), Metric(2.0, 1.0, 3.0), Metric(3.0, 2.0, 4.0)])
    assert format_summary(three) == "2.00 ± 1.00 [1.00, 3.00]"
    assert three.std == statistics.stdev([1.0, 2.0, 3.0])
    partial = summarize([Metric(1.0, 0.0, 2.0), Metric(2.0)])  # one seed without an interval: no pooled one
    assert (partial.low, partial.high) == (None, None) and format_summary(partial) == "1.50 ± 0.71"
    with pytest.raises(ValueError, match="no run reports"):
        summarize([])
