"""train.py end to end on a tiny synthetic dataset with the real MiniLM text encoder (offline)."""

from __future__ import annotations

import csv
import io
import json
import shlex

import numpy as np
import pytest
import torch

from helpers.commands import run_command
from helpers.end_to_end import metrics, official_scores, run
from helpers.synthetic_presets import TRAIN, TRAIN_TWO_TESTS

pytestmark = pytest.mark.slow


@pytest.fixture
def root(synthetic_spacewalk18):
    return synthetic_spacewalk18(**TRAIN)


@pytest.fixture
def data(spacewalk18_run_data) -> list[str]:
    """train.py's data overrides: the TRAIN set, with the banks its runs share."""
    return spacewalk18_run_data(TRAIN)


# lfb_cat, 3 epochs, seed 0 on the tiny synthetic set (one test recording of 200 samples): what a correct run
# gives. Float32 kernels differ between CPUs: the best val/loss is compared to 1e-3 (relative) and the test
# metrics to 1 point (a sample is 0.5 Accuracy points); a change to the data, its order, the model or the
# scoring moves them more.
PINNED_LFB_CAT = {"best_val_loss": 1.6383154392242432, "Accuracy": 20.0, "mAP": 43.77223767364889,
                  "IoU": 8.975777015816835}


def test_train_selects_on_val_tests_and_evaluate_reproduces(tmp_path, data, root):
    run_dir = tmp_path / "run"
    run("train.py", data, "model=lfb_cat", "context=1min", "trainer.max_epochs=3", f"hydra.run.dir={run_dir}")
    m = metrics(run_dir)
    assert m["split"] == "test" and m["best_val_loss"] is not None
    official = official_scores(root, "test", run_dir / "predictions.json")
    assert {k: m[k] for k in ("Accuracy", "mAP", "IoU", "per_video")} == \
        {k: official[k] for k in ("Accuracy", "mAP", "IoU", "per_video")}
    assert m["best_val_loss"] == pytest.approx(PINNED_LFB_CAT["best_val_loss"], rel=1e-3)
    assert {k: m[k] for k in ("Accuracy", "mAP", "IoU")} == pytest.approx(
        {k: PINNED_LFB_CAT[k] for k in ("Accuracy", "mAP", "IoU")}, abs=1.0)
    assert (run_dir / "predictions.json").is_file() and list((run_dir / "timelines").glob("*.png"))
    assert (run_dir / "csv" / "version_0" / "metrics.csv").is_file()  # CSV log
    assert list((run_dir / "wandb").glob("offline-run-*"))  # W&B, offline by default
    best = [p for p in (run_dir / "checkpoints").glob("epoch*.ckpt")]
    assert len(best) == 1
    assert torch.load(best[0], weights_only=True)["state_dict"]["tau"].isfinite()  # tau travels in the checkpoint

    # the 95 % intervals beside the official numbers (metrics.bootstrap) are over the recordings: this set has one
    # test recording, which says nothing about another, so each is named and has no bounds, and none are logged
    assert set(m["intervals"]) == {"Accuracy", "mAP", "IoU"}
    for name, interval in m["intervals"].items():
        assert interval["estimate"] == m[name] and interval["low"] is None and interval["high"] is None
        assert (interval["level"], interval["n"], interval["values"]) == (0.95, 1, "per_video")
    assert m["intervals"]["Accuracy"]["unit"] == "recordings, then samples within them"
    header = (run_dir / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "test/Accuracy" in header and "test/Accuracy_low" not in header

    again = tmp_path / "again"
    run("evaluate.py", data, f"ckpt_path={best[0]}", f"hydra.run.dir={again}")
    for name in ("Accuracy", "mAP", "IoU"):  # the same checkpoint and batches on the same machine: exact
        assert metrics(again)[name] == metrics(run_dir)[name]
    assert metrics(again)["intervals"] == m["intervals"]  # the same predictions and seed: the same intervals
    # the re-test records its own command; a table reads its keys from the trained run (spacewalk.results.runs)
    from spacewalk.results.runs import read_run

    assert json.loads((again / "provenance.json").read_text())["command"] == \
        f"python evaluate.py ckpt_path={best[0]}"
    retest = read_run(again)
    assert retest.origin.path == run_dir and (retest.value("model"), retest.value("context")) == ("lfb_cat", "1min")


def test_resume_from_last_checkpoint(tmp_path, data, root):
    run_dir = tmp_path / "run"
    run("train.py", data, "model=lfb_avg", "trainer.max_epochs=1", "logger=csv", "plots=false",
        f"hydra.run.dir={run_dir}")
    resumed = run("train.py", data, "model=lfb_avg", "trainer.max_epochs=2", "logger=csv", "plots=false",
                  "ckpt_path=last", f"hydra.run.dir={run_dir}")
    assert "Restoring states from the checkpoint path" in resumed.stdout + resumed.stderr
    def epochs(version):
        rows = [line.split(",") for line in (run_dir / "csv" / version / "metrics.csv").read_text().splitlines()]
        return {row[rows[0].index("epoch")] for row in rows[1:] if "train/loss_epoch" in rows[0]
                and row[rows[0].index("train/loss_epoch")]}

    assert epochs("version_0") == {"0"} and epochs("version_1") == {"1"}  # the second run went on from epoch 1


def test_multirun_writes_a_summary_by_seed_and_the_report_reads_the_sweep(tmp_path, spacewalk18_run_data):
    data = spacewalk18_run_data(TRAIN_TWO_TESTS)
    sweep = tmp_path / "sweep"
    run("train.py", data, "-m", "model=zero_shot,lfb_avg", "seed=0,1", "trainer.max_epochs=1", "logger=csv",
        "plots=false", f"hydra.sweep.dir={sweep}")
    jobs = list(csv.DictReader(io.StringIO((sweep / "summary.csv").read_text())))
    def given(job, key):
        return next(o.split("=", 1)[1] for o in job["overrides"].split() if o.startswith(f"{key}="))

    assert [(j["job"], given(j, "model"), given(j, "seed")) for j in jobs] == [
        ("0", "zero_shot", "0"), ("1", "zero_shot", "1"), ("2", "lfb_avg", "0"), ("3", "lfb_avg", "1")]
    for job in jobs:  # every job's test numbers with their intervals, and the command and commit that made it
        assert float(job["Accuracy_low"]) <= float(job["Accuracy"]) <= float(job["Accuracy_high"])
        provenance = json.loads((sweep / job["job"] / "provenance.json").read_text())
        assert provenance["overrides"] == job["overrides"].split()  # the job's own, as .hydra/overrides.yaml
        assert provenance["command"] == shlex.join(["python", "train.py", *provenance["overrides"]])
        assert len(provenance["commit"]) == 40
    groups = list(csv.DictReader(io.StringIO((sweep / "seeds.csv").read_text())))
    lfb_avg = next(g for g in groups if "model=lfb_avg" in g["overrides"].split() and g["metric"] == "Accuracy")
    values = [float(j["Accuracy"]) for j in jobs[2:]]
    assert (lfb_avg["seeds"], lfb_avg["n"]) == ("0 1", "2")
    assert float(lfb_avg["mean"]) == pytest.approx(np.mean(values))
    assert float(lfb_avg["std"]) == pytest.approx(np.std(values, ddof=1))
    assert float(lfb_avg["low"]) == pytest.approx(np.mean([float(j["Accuracy_low"]) for j in jobs[2:]]))

    # the report's table from the same sweep: one cell per recipe, mean ± std over the two seeds, its command
    result = run_command("-m", "spacewalk.report", sweep, "--csv", tmp_path / "table.csv")
    assert "| model | 5min |" in result.stdout  # the default layout: recipe by window
    cells = list(csv.DictReader(io.StringIO((tmp_path / "table.csv").read_text())))
    cell = next(c for c in cells if c["row"] == "lfb_avg" and c["metric"] == "Accuracy")
    assert (cell["n_seeds"], cell["seeds"]) == ("2", "0 1") and float(cell["value"]) == pytest.approx(np.mean(values))
    assert cell["command"].startswith("python train.py -m ") and cell["command"].endswith(" seed=0,1")
    assert "model=lfb_avg" in cell["command"].split()
    assert len(cell["commits"].split()) == 1  # one commit made both


def test_train_on_external_video_features_without_a_video_encoder(tmp_path, data, root):
    # features "extracted elsewhere" in the bank folder of encoder=external, which has no video encoder
    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18

    from helpers.fakes import write_external_features

    # the features in a data folder of this test's own, so that no other run reads them
    dataset = Spacewalk18(root)
    write_external_features(tmp_path / "data" / "feature_banks" / "synthetic" / "external", dataset, dim=6)
    run_dir = tmp_path / "run"
    own = [o for o in data if not o.startswith("paths.data_dir=")] + [f"paths.data_dir={tmp_path / 'data'}"]
    run("train.py", own, "encoder=external", "modalities=video+text", "model=lfb_avg", "context=1min",
        "trainer.max_epochs=2", "logger=csv", "plots=false", f"hydra.run.dir={run_dir}")
    m = metrics(run_dir)
    assert m["model"] == "LFBAvg"
    official = official_scores(root, "test", run_dir / "predictions.json")
    assert {k: m[k] for k in ("Accuracy", "mAP", "IoU")} == {k: official[k] for k in ("Accuracy", "mAP", "IoU")}
    config = (run_dir / "config.resolved.yaml").read_text()
    assert "modalities: video+text" in config and "video: null" in config


def test_plan_decoding_writes_official_files_and_re_decodes_a_finished_run(tmp_path, synthetic_spacewalk18,
                                                                           spacewalk18_run_data):
    root, data = synthetic_spacewalk18(**TRAIN_TWO_TESTS), spacewalk18_run_data(TRAIN_TWO_TESTS)
    run_dir = tmp_path / "run"
    run("train.py", data, "model=lfb_avg", "context=1min", "trainer.max_epochs=2", "logger=csv",
        "decoding=whole_recording", f"hydra.run.dir={run_dir}")
    decoded_dir = run_dir / "decoded" / "whole_recording"
    decoded = json.loads((decoded_dir / "metrics.json").read_text())
    official = official_scores(root, "test", decoded_dir / "predictions.json")
    assert {k: decoded[k] for k in ("Accuracy", "mAP", "IoU")} == {k: official[k] for k in ("Accuracy", "mAP", "IoU")}
    assert metrics(run_dir)["decoded"]["Accuracy"] == decoded["Accuracy"]
    # the decoded numbers carry intervals (the same bootstrap as the raw ones), which the tables read
    from spacewalk.results.runs import read_run

    for name in ("Accuracy", "mAP", "IoU"):
        interval = decoded["intervals"][name]
        assert interval["estimate"] == decoded[name] and interval["low"] <= decoded[name] <= interval["high"]
        assert interval["unit"] == metrics(run_dir)["intervals"][name]["unit"]
    headline = read_run(run_dir).headline["decoded/Accuracy"]
    assert (headline.value, headline.low) == (decoded["Accuracy"], decoded["intervals"]["Accuracy"]["low"])
    # chosen on val among the configured candidates, each with its val metrics
    assert decoded["settings"] in [{k: c[k] for k in decoded["settings"]} for c in decoded["val_candidates"]]
    assert len(decoded["val_candidates"]) == 8 * 3 * 5 * 3
    assert list((decoded_dir / "timelines").glob("*.png")) and list((run_dir / "confusion").glob("*.png"))
    # the run and its decoded predictions re-score to their metrics.json, and compare paired (decoded - raw)
    from spacewalk.results.rescore import recorded_metrics, rescore_run

    assert rescore_run(run_dir) == recorded_metrics(run_dir)
    assert rescore_run(decoded_dir) == recorded_metrics(decoded_dir)
    compared = run_command("-m", "spacewalk.compare", run_dir, decoded_dir)
    assert "decoded whole_recording" in compared.stdout and "recordings, then samples" in compared.stdout

    again = tmp_path / "again"
    best = next((run_dir / "checkpoints").glob("epoch*.ckpt"))
    # within the window, with the run itself as a second ensemble member (its window is not larger)
    run("evaluate.py", data, f"ckpt_path={best}", "decoding=within_window", f"decoding.ensemble=[{best}]",
        f"hydra.run.dir={again}")
    assert {k: metrics(again)[k] for k in ("Accuracy", "mAP", "IoU")} == \
        {k: metrics(run_dir)[k] for k in ("Accuracy", "mAP", "IoU")}  # the raw test numbers, re-tested
    window = json.loads((again / "decoded" / "within_window" / "metrics.json").read_text())
    assert window["decoding"] == "within_window" and "cell_calibration" in window
    assert window["ensemble"] == [str(best)] and len(window["calibrations"]) == 2
    assert window["emissions"] == {"recording_calibration": "none", "block_fusion": False}  # the default: off

    # the emission options (conf/decoding/), each candidate chosen on val with the grid, in both settings
    # (small grids: the emission candidates are what is tested here)
    options = ["decoding.emissions.recording_calibration=[none,center,standardize]",
               "decoding.emissions.block_fusion=[false,true]", "plots=false", "decoding.grid.rate_scale=[1.0]"]
    grids = {"within_window": ["decoding.grid.emission_weight=[1.0]", "decoding.grid.cell_weight=[0.0,1.0]"],
             "whole_recording": ["decoding.grid.emission_weight=[0.1,1.0]", "decoding.grid.prior_weight=[0.0]",
                                 "decoding.grid.labels=[posterior,balanced]"]}
    for setting, grid_size in (("within_window", 4), ("whole_recording", 4)):
        out = tmp_path / f"options_{setting}"
        run("evaluate.py", data, f"ckpt_path={best}", f"decoding={setting}", *options, *grids[setting],
            f"hydra.run.dir={out}")
        chosen = json.loads((out / "decoded" / setting / "metrics.json").read_text())
        table = chosen["val_candidates"]
        assert len(table) == 6 * grid_size
        best_val = max((c["Accuracy"], c["IoU"]) for c in table)
        assert any((c["Accuracy"], c["IoU"]) == best_val and
                   {k: c[k] for k in chosen["emissions"]} == chosen["emissions"] for c in table)
        official = official_scores(root, "test", out / "decoded" / setting / "predictions.json")
        metric_names = ("Accuracy", "mAP", "IoU")
        assert {k: chosen[k] for k in metric_names} == {k: official[k] for k in metric_names}


def test_selection_runs_stop_before_the_test_split(tmp_path, data, root):
    run_dir = tmp_path / "run"
    run("train.py", data, "model=lfb_avg", "context=1min", "trainer.max_epochs=2", "logger=csv", "plots=false",
        "test=false", f"hydra.run.dir={run_dir}")
    m = metrics(run_dir)
    assert m["split"] == "val" and m["best_val_loss"] is not None and not (run_dir / "predictions.json").exists()
    assert m["Accuracy"] == pytest.approx(np.mean([v["Accuracy"] for v in m["per_video"].values()]))
    header = (run_dir / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0]
    assert "test/Accuracy" not in header
