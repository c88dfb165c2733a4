"""The multirun summary (spacewalk/training/sweep_summary.py) on fake sweeps of every task's metrics.json: one row
per job, then the jobs grouped by everything but the seed; the Hydra callback and the command."""

from __future__ import annotations

import csv
import io
import logging

from omegaconf import OmegaConf

from spacewalk.results.runs import read_runs
from spacewalk.training.sweep_summary import SweepSummary, main, summary_texts

from helpers.commands import run_command
from helpers.run_dir_fakes import cell, interval, step_metrics, write_run


def fake_sweep(root):
    """lfb_avg and lfb_cat with seeds 0, 1, 2 (lfb_cat's seed 2 failed); an EgoSchema job; a HiREST job."""
    job = 0
    for model in ("lfb_avg", "lfb_cat"):
        for seed in (0, 1, 2):
            metrics = None if (model, seed) == ("lfb_cat", 2) else step_metrics(10.0 + seed, 20.0 + seed, 5.0)
            write_run(root / str(job), [f"model={model}", f"seed={seed}"], metrics)
            job += 1
    write_run(root / str(job), ["data=egoschema", "model=random"], {"accuracy": 20.0, "intervals": {
        "accuracy": interval(20.0, 4.0, "questions")}}, entry="evaluate", task="multiple_choice",
              config={"data": {"_target_": "spacewalk.benchmarks.egoschema.task.open_egoschema"}})
    write_run(root / str(job + 1), ["data=hirest", "model=hirest_joint"], {"test": {"video_retrieval": {
        "all": {"R@1": 12.0}, "intervals": {"R@1": interval(12.0, 2.0, "queries")}}, "step_captioning": {
            "all": {"CIDEr": 30.0}}}, "best_val_loss": 9.5}, task="hirest",
              config={"data": {"_target_": "spacewalk.benchmarks.hirest.open.open_hirest"}})
    return root


def test_every_tasks_numbers_by_job_and_by_seed(tmp_path):
    texts = summary_texts(read_runs([fake_sweep(tmp_path / "sweep")]))
    jobs = list(csv.DictReader(io.StringIO(texts["summary.csv"])))
    assert [j["job"] for j in jobs] == [str(i) for i in range(8)]
    one = step_metrics(10.0, 20.0, 5.0)["intervals"]["Accuracy"]  # its t interval over the three recordings
    assert (jobs[0]["Accuracy"], jobs[0]["Accuracy_low"], jobs[0]["Accuracy_high"]) == (
        "10.0", str(one["low"]), str(one["high"]))
    assert jobs[5]["Accuracy"] == "" and jobs[5]["overrides"] == "model=lfb_cat seed=2"  # the failed job is listed
    assert (jobs[6]["accuracy"], jobs[6]["accuracy_low"]) == ("20.0", "16.0")  # EgoSchema
    assert (jobs[7]["test/video_retrieval/R@1"], jobs[7]["test/step_captioning/CIDEr"]) == ("12.0", "30.0")  # HiREST

    groups = list(csv.DictReader(io.StringIO(texts["seeds.csv"])))
    acc = next(g for g in groups if g["overrides"] == "model=lfb_avg" and g["metric"] == "Accuracy")
    setting = cell([[x - 1, x, x + 1] for x in (10.0, 11.0, 12.0)])  # over recordings and seeds
    assert (acc["seeds"], acc["n"], acc["mean"], acc["std"], acc["interval"]) == (
        "0 1 2", "3", "11.0", "1.0", "over recordings and seeds")
    assert acc["cell"] == setting and acc["unit"] == "recordings, then samples within them"
    cat = next(g for g in groups if g["overrides"] == "model=lfb_cat" and g["metric"] == "mAP")
    assert (cat["seeds"], cat["mean"], cat["values"]) == ("0 1", "20.5", "20.0000 21.0000")  # seed 2 failed
    es = next(g for g in groups if g["overrides"] == "data=egoschema model=random")
    assert (es["metric"], es["cell"], es["std"]) == ("accuracy", "20.00 [16.00, 24.00]", "")
    assert f"| model=lfb_avg | 0 1 2 | Accuracy | {setting} | 10.00 11.00 12.00 |" in texts["seeds.md"]
    assert texts["summary.md"].startswith("## Jobs") and texts["seeds.md"] in texts["summary.md"]


def test_the_callback_writes_the_files_into_the_sweep(tmp_path, caplog):
    sweep = fake_sweep(tmp_path / "sweep")
    SweepSummary().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
    assert {p.name for p in sweep.glob("*.*")} == {"summary.csv", "summary.md", "seeds.csv", "seeds.md"}
    (sweep / "3" / "metrics.json").write_text("{torn")  # a bad file ends the summary with a warning, not the sweep
    with caplog.at_level(logging.WARNING):
        SweepSummary().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
    assert "no sweep summary:" in caplog.text and "3/metrics.json: not valid JSON" in caplog.text


def test_the_command_reads_an_existing_sweep(tmp_path, capsys):
    sweep = fake_sweep(tmp_path / "sweep")
    assert main([str(sweep), "--no-write"]) == 0
    assert "| model=lfb_avg | 0 1 2 | Accuracy |" in capsys.readouterr().out and not list(sweep.glob("*.md"))
    assert main([str(sweep), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "seeds.csv").is_file() and not list(sweep.glob("*.md"))
    # as a command: a directory that is no sweep ends with its message
    result = run_command("-m", "spacewalk.training.sweep_summary", str(tmp_path / "nowhere"), check=False)
    assert result.returncode == 2 and "nowhere: no such directory" in result.stderr


def test_where_keeps_the_jobs_of_a_setting_and_a_file_is_no_out_folder(tmp_path, capsys):
    sweep = fake_sweep(tmp_path / "sweep")
    assert main([str(sweep), "--no-write", "--where", "model=lfb_cat"]) == 0
    out = capsys.readouterr().out
    assert "model=lfb_cat" in out and "model=lfb_avg" not in out and "| 6 |" not in out
    (tmp_path / "taken").write_text("a file")
    result = run_command("-m", "spacewalk.training.sweep_summary", str(sweep), "--out", str(tmp_path / "taken"),
                         check=False)
    assert result.returncode == 2 and "taken: a file, where the folder for the summary files is expected" in \
        result.stderr and "Traceback" not in result.stderr
    result = run_command("-m", "spacewalk.training.sweep_summary", str(sweep), "--where", "modle=lfb_cat",
                         check=False)
    assert result.returncode == 2 and "--where: no run has the config key 'modle'" in result.stderr


def test_the_overrides_every_job_shares_are_said_once(tmp_path):
    for job, seed in enumerate((0, 1)):
        write_run(tmp_path / "sweep" / str(job), ["data=spacewalk18", "data.root=/r", "model=lfb_avg", f"seed={seed}"],
                  step_metrics(10.0 + seed, 20.0, 5.0))
    texts = summary_texts(read_runs([tmp_path / "sweep"]))
    assert "Every job's overrides include: `data=spacewalk18 data.root=/r model=lfb_avg`." in texts["seeds.md"]
    setting = cell([[x - 1, x, x + 1] for x in (10.0, 11.0)])
    assert f"| (the common overrides only) | 0 1 | Accuracy | {setting} |" in texts["seeds.md"]
    assert f"| 1 | seed=1 | {cell([[10.0, 11.0, 12.0]])} |" in texts["summary.md"]
    # the CSV keeps each row's whole list
    assert next(csv.DictReader(io.StringIO(texts["seeds.csv"])))["overrides"] == \
        "data=spacewalk18 data.root=/r model=lfb_avg"
