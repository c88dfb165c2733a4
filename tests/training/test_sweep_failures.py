"""Sweeps in which jobs fail (spacewalk/training/sweep_failures.py), run as a user runs them: with Hydra's own
launcher, with hydra/launcher=local (submitit, parallel processes) and one bad data root, and with a job that is
killed. Every other job runs to its end, the summary lists them all (the failed ones with no numbers), each failed
job is named on one `error:` line with its overrides and its error, and the command exits non-zero: 2 when every
failure was the user's, 1 when a job died. Also the cluster settings that cannot work here: hydra/launcher=slurm
off a cluster, trainer=slurm outside a job or with a variable that is not a count."""

from __future__ import annotations

import csv
import json
import logging
import sys
from pathlib import Path

import pytest

from spacewalk.core.command_errors import user_error_in
from spacewalk.training import slurm

from helpers.commands import compose_train, run_command
from helpers.synthetic_presets import SWEEP

# one recording per split: each job takes seconds


def sweep(tmp_path, script: str, *overrides: str, env: dict | None = None):
    result = run_command(script, "-m", *overrides, f"hydra.sweep.dir={tmp_path / 'sweep'}",
                         f"paths.data_dir={tmp_path / 'data'}", "plots=false", env=env, check=False, timeout=600)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


def error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


def summary_rows(sweep_dir: Path) -> dict[str, dict]:
    with open(sweep_dir / "summary.csv", newline="") as f:
        return {row["job"]: row for row in csv.DictReader(f)}


@pytest.mark.slow
def test_hydras_own_launcher_runs_every_job_and_names_the_failed_ones(tmp_path, synthetic_spacewalk18):
    root = synthetic_spacewalk18(**SWEEP)
    result = sweep(tmp_path, "evaluate.py", f"data.root={root}", "context=7x,5min,0s")
    assert result.returncode == 2, result.stderr[-3000:]  # both failures were the user's
    assert error_lines(result) == [  # each job named by what the command sweeps
        "error: job 0 (context=7x) failed: context=7x: cannot read a duration from '7x'; write e.g. 30s, 5min, 1h",
        "error: job 2 (context=0s) failed: context=0s: the context window must be longer than 0 s; write e.g. 30s, "
        "5min, 1h"]
    record = json.loads((tmp_path / "sweep/failed_jobs/0.json").read_text())  # the whole list is in its record
    assert record["overrides"][:2] == [f"data.root={root}", "context=7x"] and record["user_error"] is True
    rows = summary_rows(tmp_path / "sweep")
    assert set(rows) == {"0", "1", "2"}
    ran = json.loads((tmp_path / "sweep/1/metrics.json").read_text())  # the job after a failure ran
    assert float(rows["1"]["Accuracy"]) == pytest.approx(ran["Accuracy"], abs=0.01)
    assert rows["0"]["Accuracy"] == rows["2"]["Accuracy"] == ""
    # a re-run into the same sweep directory that succeeds leaves no old failure behind
    again = sweep(tmp_path, "evaluate.py", f"data.root={root}", "context=5min")
    assert again.returncode == 0 and not error_lines(again), again.stderr[-2000:]
    assert not list((tmp_path / "sweep/failed_jobs").glob("*.json"))


@pytest.mark.slow
def test_the_local_launcher_with_a_bad_data_root_summarises_the_good_job(tmp_path, synthetic_spacewalk18):
    root = synthetic_spacewalk18(**SWEEP)
    missing = tmp_path / "no_such_root"
    result = sweep(tmp_path, "evaluate.py", "hydra/launcher=local", "hydra.launcher.gpus_per_node=0",
                   f"data.root={root},{missing}", env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 2, result.stderr[-3000:]
    assert error_lines(result) == [f"error: job 1 (data.root={missing}) failed: {missing}: dataset root not found "
                                   "(generate the synthetic set or run `python -m spacewalk.download spacewalk18 "
                                   "--root DIR`)"]
    rows = summary_rows(tmp_path / "sweep")
    assert rows["0"]["Accuracy"] != "" and rows["1"]["Accuracy"] == ""



@pytest.mark.slow
def test_a_killed_job_is_named_and_the_sweep_exits_1(tmp_path, synthetic_spacewalk18):
    """submitit's UncompletedJobError for a job killed without a result: recorded, the other job summarised."""
    root = synthetic_spacewalk18(**SWEEP)
    result = sweep(tmp_path, "evaluate.py", "hydra/launcher=local", "hydra.launcher.gpus_per_node=0",
                   "data=spacewalk18_qa", f"data.root={root}", "model=mc_scripted", "multiple_choice.progress=false",
                   "multiple_choice.chunk_size=1",
                   "model._target_=helpers.multiple_choice_fakes.KilledAfter,"
                   "spacewalk.multiple_choice.backends.baselines.ScriptedBackend",
                   env={"SPACEWALK_TEST_KILL_AFTER": "0", "OMP_NUM_THREADS": "1"})
    assert result.returncode == 1, result.stderr[-3000:]  # not the user's: a job died
    [line] = error_lines(result)
    assert line.startswith("error: job 0 (") and "model._target_=helpers.multiple_choice_fakes.KilledAfter" in line
    assert "the job ended without a result (" in line and f"its output: {tmp_path / 'sweep' / '.submitit'}" in line
    rows = summary_rows(tmp_path / "sweep")
    assert rows["1"]["Accuracy"] != "" and rows["0"]["Accuracy"] == ""


def test_the_slurm_launcher_off_a_cluster_is_one_line(tmp_path):
    # PATH without SLURM's commands (the interpreter is run by its full path)
    result = run_command("train.py", "-m", "hydra/launcher=slurm", "model=lfb_avg,lfb_cat",
                         f"hydra.sweep.dir={tmp_path / 'sweep'}", env={"PATH": str(Path(sys.executable).parent)},
                         check=False, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        "error: hydra/launcher=slurm submits the sweep's jobs to SLURM, but this machine has no SLURM (srun is not "
        "on PATH): run the command on the cluster's login node, or use hydra/launcher=local to run the jobs here")
    assert not (tmp_path / "sweep").exists()  # refused before anything was written


def test_slurm_trainer_outside_a_job_says_so_once(monkeypatch, caplog):
    for name in ("SLURM_NTASKS_PER_NODE", "SLURM_NNODES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(slurm, "_told_outside", False)
    with caplog.at_level(logging.WARNING, logger="spacewalk.training.slurm"):
        for _ in range(2):
            trainer = compose_train("trainer=slurm").trainer
            assert (trainer.devices, trainer.num_nodes) == (1, 1)
    assert [r.getMessage() for r in caplog.records] == [
        "trainer=slurm outside a SLURM job (SLURM_NTASKS_PER_NODE is not set): one process on this machine. In an "
        "sbatch script start train.py with srun; for several GPUs of one machine use trainer=ddp (docs/cluster.md)"]


@pytest.mark.parametrize("variable, value", [("SLURM_NTASKS_PER_NODE", "abc"), ("SLURM_NNODES", "0")])
def test_a_slurm_variable_that_is_not_a_count_is_named(monkeypatch, variable, value):
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "2")
    monkeypatch.setenv("SLURM_NNODES", "1")
    monkeypatch.setenv(variable, value)
    trainer = compose_train("trainer=slurm").trainer
    with pytest.raises(Exception) as error:
        trainer.devices, trainer.num_nodes  # noqa: B018  (resolved as they are read)
    cause = user_error_in(error.value)  # what the command prints, on one line with exit code 2
    assert cause is not None and str(cause).startswith(f"{variable}={value!r}: trainer=slurm reads the job's ")


def test_train_refuses_a_bad_slurm_variable_before_anything_is_built(tmp_path):
    result = run_command("train.py", "trainer=slurm", f"hydra.run.dir={tmp_path / 'run'}",
                         f"paths.data_dir={tmp_path / 'data'}", env={"SLURM_NTASKS_PER_NODE": "abc"}, check=False,
                         timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith("error: SLURM_NTASKS_PER_NODE='abc': trainer=slurm ")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("launcher, submitit", [("local", True), ("slurm", True), ("submitit_local", True),
                                                ("basic", False)])
def test_the_launchers_that_need_waiting_for_are_submitits_by_class(launcher, submitit):
    # ours (local, slurm), the plugin's own (submitit_local), Hydra's basic one: told apart by the class launched
    from spacewalk.training.sweep_failures import launches_with_submitit

    config = compose_train(f"hydra/launcher={launcher}")
    assert launches_with_submitit(config.hydra.launcher) is submitit
