"""evaluate.py end to end on a small synthetic dataset, run as a user runs it."""

from __future__ import annotations

import json
import subprocess

import pytest

from spacewalk import score
from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
from spacewalk.benchmarks.spacewalk18.scoring.predictions import read_step_predictions
from spacewalk.results.rescore import recorded_metrics, rescore_run

from helpers.commands import run_command

SMALL = ["+data.synthetic.n_train=2", "+data.synthetic.n_val=1", "+data.synthetic.n_test=2",
         "+data.synthetic.minutes=[4,5]", "+data.synthetic.steps_per_video=[3,5]",
         "+data.synthetic.samples_per_video=300", "+data.synthetic.retrieval_samples_per_video=20",
         "+data.synthetic.questions_per_video=2"]


def run_evaluate(*overrides: str) -> subprocess.CompletedProcess:
    return run_command("evaluate.py", *overrides)


@pytest.mark.slow
def test_evaluate_generates_data_scores_and_writes_artefacts(tmp_path, capsys):
    root, out = tmp_path / "synthetic", tmp_path / "run"
    result = run_evaluate(f"data.synthetic_root={root}", *SMALL, "model=plan_prior", f"hydra.run.dir={out}")
    dataset = Spacewalk18(root)  # generated on first use, in the official layout
    test_ids = dataset.splits["test"]
    assert "mean" in result.stderr + result.stdout

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["split"] == "test" and list(metrics["per_video"]) == test_ids
    assert all(0 <= metrics[k] <= 100 for k in ("Accuracy", "mAP", "IoU"))
    for name, interval in metrics["intervals"].items():  # beside each number, over recordings then samples
        assert interval["estimate"] == metrics[name] and interval["low"] <= metrics[name] <= interval["high"]
    assert set(metrics["intervals"]) == {"Accuracy", "mAP", "IoU"} and "95% CI" in result.stderr + result.stdout
    samples = dataset.step_samples("test")
    predictions = read_step_predictions(out / "predictions.json", dataset.recordings, samples)
    assert predictions.scores is not None
    assert sorted(p.name for p in (out / "timelines").iterdir()) == sorted(f"{v}.png" for v in test_ids)

    # the scoring tool gives the same numbers from the written file
    capsys.readouterr()
    assert score.main(["--root", str(root), "--split", "test", "--predictions", str(out / "predictions.json")]) == 0
    scored = json.loads(capsys.readouterr().out)
    for name in ("Accuracy", "mAP", "IoU"):
        assert scored[name] == pytest.approx(metrics[name], abs=1e-12)

    # a second run reuses the dataset, and the random baseline is reproducible
    first = run_evaluate(f"data.synthetic_root={root}", *SMALL, "model=random", "plots=false",
                         f"hydra.run.dir={tmp_path / 'r1'}")
    second = run_evaluate(f"data.synthetic_root={root}", *SMALL, "model=random", "plots=false",
                          f"hydra.run.dir={tmp_path / 'r2'}")
    for run in (first, second):
        assert "synthetic Spacewalk-18" not in run.stderr  # no progress bar: nothing was generated
    assert (tmp_path / "r1/predictions.json").read_bytes() == (tmp_path / "r2/predictions.json").read_bytes()
    intervals = [json.loads((tmp_path / r / "metrics.json").read_text())["intervals"] for r in ("r1", "r2")]
    assert intervals[0] == intervals[1] and intervals[0]["Accuracy"]["low"] < intervals[0]["Accuracy"]["high"]
    assert not (tmp_path / "r1/timelines").exists()

    # each run re-scores to its metrics.json from its predictions and resolved config (spacewalk/results/rescore.py),
    # and the paired comparison of the two runs of one command finds no difference; against another model it finds one
    for run in (out, tmp_path / "r1"):
        assert rescore_run(run) == recorded_metrics(run)
    same = run_command("-m", "spacewalk.compare", tmp_path / "r1", tmp_path / "r2")
    assert "Accuracy  [+0.00, +0.00]  1.000" in same.stdout  # these recordings: no difference on any draw
    other = run_command("-m", "spacewalk.compare", tmp_path / "r1", out, "--json", tmp_path / "cmp.json")
    differences = json.loads((tmp_path / "cmp.json").read_text())["differences"]
    assert differences["Accuracy"]["difference"] == pytest.approx(metrics["Accuracy"] - json.loads(
        (tmp_path / "r1/metrics.json").read_text())["Accuracy"])
    assert "Accuracy" in other.stdout and "IoU" in other.stdout


def test_real_data_random_baseline_matches_the_paper(real_spacewalk18_root, tmp_path):
    out = tmp_path / "run"
    run_evaluate("data=spacewalk18", f"data.root={real_spacewalk18_root}", "model=random", "split=test",
                 "plots=false", f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["Accuracy"] == pytest.approx(4.22, abs=0.3)
    assert metrics["IoU"] == pytest.approx(1.51, abs=0.2)


def test_fit_split_must_differ_from_the_scored_split(tiny_root, tmp_path):
    result = run_command("evaluate.py", "data=spacewalk18", f"data.root={tiny_root}", "split=train",
                         f"hydra.run.dir={tmp_path}", check=False)
    assert result.returncode != 0 and "never takes statistics from the split it is scored on" in result.stderr


def test_an_unknown_split_is_refused_before_the_synthetic_set_is_written(tmp_path):
    result = run_command("evaluate.py", "split=foo", f"paths.data_dir={tmp_path / 'data'}",
                         f"hydra.run.dir={tmp_path / 'run'}", check=False)
    assert result.returncode != 0 and "split=foo: step recognition scores one of train, val, test" in result.stderr
    assert not (tmp_path / "data").exists()  # nothing read or written first
