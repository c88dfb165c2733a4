"""The cluster configs (docs/cluster.md): Hydra's submitit launcher as hydra/launcher=slurm and =local, and
trainer=slurm. The SLURM side is checked on the sbatch script submitit would submit (no cluster here); the local
launcher runs a real two-job sweep."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess

import hydra
import pytest
import submitit

from helpers.commands import REPO, command_environment, compose_train, python_for, stopped_at_exit
from helpers.end_to_end import run
from helpers.synthetic_presets import TRAIN, overrides


def test_slurm_trainer_reads_the_nodes_and_devices_from_the_job(monkeypatch):
    monkeypatch.delenv("SLURM_NTASKS_PER_NODE", raising=False)
    monkeypatch.delenv("SLURM_NNODES", raising=False)
    alone = compose_train("trainer=slurm").trainer
    assert (alone.strategy, alone.devices, alone.num_nodes) == ("ddp", 1, 1)  # outside SLURM: one process
    # sbatch --nodes=2 --ntasks-per-node=8: the values Lightning's SLURMEnvironment checks devices and num_nodes
    # against
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "8")
    monkeypatch.setenv("SLURM_NNODES", "2")
    trainer = compose_train("trainer=slurm").trainer
    assert (trainer.strategy, trainer.devices, trainer.num_nodes) == ("ddp", 8, 2)
    assert trainer.use_distributed_sampler is False  # the DataModules share the batches out themselves


def sbatch_script(tmp_path, monkeypatch, *overrides: str) -> tuple[str, dict]:
    """The sbatch script and the parameters with which hydra/launcher=slurm would submit a sweep's job array: the
    plugin's own launch, stopped where submitit would call sbatch."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\nexit 1\n")  # submitit looks for srun on PATH; it is never run
    (fake / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    cfg = compose_train("hydra/launcher=slurm", f"hydra.sweep.dir={tmp_path / 'sweep'}", *overrides)
    launcher = hydra.utils.instantiate(cfg.hydra.launcher)
    launcher.config = cfg
    submitted = {}

    class Submitted(Exception):
        pass

    def map_array(executor, fn, *arguments):
        submitted["executor"] = executor._executor
        raise Submitted

    monkeypatch.setattr(submitit.AutoExecutor, "map_array", map_array)
    with pytest.raises(Submitted):
        launcher.launch([["model=lfb_avg"], ["model=lfb_cat"]], 0)
    executor = submitted["executor"]
    return executor._make_submission_file_text("python -u -m submitit.core._submit DIR", "uid"), executor.parameters


def test_slurm_launcher_defaults(tmp_path, monkeypatch):
    script, parameters = sbatch_script(tmp_path, monkeypatch)
    lines = set(script.splitlines())
    assert {"#SBATCH --nodes=1", "#SBATCH --gpus-per-node=1", "#SBATCH --ntasks-per-node=1",
            "#SBATCH --cpus-per-task=8", "#SBATCH --mem=64GB", "#SBATCH --time=1440"} <= lines
    assert not any(line.startswith("#SBATCH --partition") for line in lines)  # the cluster's default
    assert "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK" in lines  # before srun
    assert script.index("export OMP_NUM_THREADS") < script.index("srun ")
    assert parameters["array_parallelism"] == 32
    assert f"{tmp_path / 'sweep' / '.submitit'}" in script  # the jobs' logs beside the sweep's runs


def test_slurm_launcher_takes_a_cluster_users_settings(tmp_path, monkeypatch):
    script, parameters = sbatch_script(
        tmp_path, monkeypatch, "hydra.launcher.partition=gpu", "hydra.launcher.nodes=2",
        "hydra.launcher.gpus_per_node=8", "hydra.launcher.tasks_per_node=8", "hydra.launcher.cpus_per_task=6",
        "hydra.launcher.mem_gb=256", "hydra.launcher.timeout_min=120", "hydra.launcher.array_parallelism=4",
        "hydra.launcher.setup=[module load cuda/12.4,source .venv/bin/activate]",
        "+hydra.launcher.additional_parameters.account=proj123")
    lines = set(script.splitlines())
    assert {"#SBATCH --partition=gpu", "#SBATCH --nodes=2", "#SBATCH --gpus-per-node=8",
            "#SBATCH --ntasks-per-node=8", "#SBATCH --cpus-per-task=6", "#SBATCH --mem=256GB",
            "#SBATCH --time=120", "#SBATCH --account=proj123", "module load cuda/12.4",
            "source .venv/bin/activate"} <= lines
    assert parameters["array_parallelism"] == 4


def test_launcher_fields_are_checked():
    # the plugin's schema under our settings: a misspelt field is refused when the config is composed
    with pytest.raises(Exception, match="partiton"):
        compose_train("hydra/launcher=slurm", "hydra.launcher.partiton=gpu")


@pytest.mark.slow
def test_local_launcher_runs_a_sweeps_jobs_at_once_and_summarises_both(tmp_path, spacewalk18_run_data):
    sweep = tmp_path / "sweep"
    run("train.py", spacewalk18_run_data(TRAIN), "-m", "hydra/launcher=local", "model=zero_shot", "context=30s,1min",
        "logger=csv", "plots=false", f"hydra.sweep.dir={sweep}")
    jobs = [sweep / "0", sweep / "1"]
    # each job's own start (Hydra writes .hydra/config.yaml as the job starts) and end (its metrics.json, written
    # last): one after the other, as Hydra's basic launcher runs them, the second would start after the first ended
    starts = [(job / ".hydra" / "config.yaml").stat().st_mtime for job in jobs]
    ends = [(job / "metrics.json").stat().st_mtime for job in jobs]
    assert max(starts) < min(ends), f"the jobs did not overlap: starts {starts}, ends {ends}"
    # two processes: submitit's local executor starts one per job, with its own log folder
    assert len([d for d in (sweep / ".submitit").iterdir() if d.is_dir() and d.name.isdigit()]) == 2
    with open(sweep / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for job, context in zip(jobs, ("30s", "1min")):
        row = next(r for r in rows if f"context={context}" in r["overrides"])
        assert float(row["Accuracy"]) == pytest.approx(json.loads((job / "metrics.json").read_text())["Accuracy"],
                                                       abs=0.01)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_slurm_trainer_with_two_tasks_as_srun_starts_them_equals_one_process(tmp_path, synthetic_spacewalk18):
    """trainer=slurm on one machine: two train.py processes with the variables srun gives two tasks of one node
    (gloo on CPU), so Lightning's own SLURMEnvironment sets them up; they build the feature bank between them
    (a fresh bank folder: each rank its share of the recordings) and give one process's numbers."""
    recipe = ["model=zero_shot", "context=1min", "logger=csv", "plots=false", "trainer.accelerator=cpu",
              f"data.synthetic_root={synthetic_spacewalk18(**TRAIN)}", *overrides(TRAIN)]
    one = tmp_path / "one"
    # each process count builds its own bank, in a folder of this test's own (the banks are compared below)
    run("train.py", [], *recipe, f"paths.data_dir={tmp_path / 'data'}", f"hydra.run.dir={one}")
    two = tmp_path / "two"
    command = [*recipe, "trainer=slurm", f"paths.data_dir={tmp_path / 'data2'}", f"hydra.run.dir={two}"]
    # the environment of the one-process run (run_command's): the tasks are forked from the launcher that ran it
    # (python_for) where the thread count is already one (under `make test`'s -n 2 on two cores)
    environment = {k: v for k, v in command_environment().items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    environment |= {"OMP_NUM_THREADS": "1", "SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "spacewalk-test",
                    "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "2", "SLURM_NNODES": "1", "SLURM_NODEID": "0",
                    "SLURM_NODELIST": "127.0.0.1", "SLURM_STEP_ID": "0", "MASTER_PORT": str(free_port())}
    python = python_for(environment)
    processes = [subprocess.Popen([python, "train.py", *command], cwd=REPO, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True,
                                  env=environment | {"SLURM_PROCID": r, "SLURM_LOCALID": r}) for r in ("1", "0")]
    outputs = []
    with stopped_at_exit(processes):
        for p in processes:
            out, err = p.communicate(timeout=900)
            assert p.returncode == 0, err[-3000:]
            outputs.append(out + err)
    for rank, output in zip((1, 0), outputs):
        assert f"GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/2" in output  # each task took its rank from SLURM's
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (one, two))
    # exact: zero_shot trains nothing and each rank encodes whole recordings (the bank is the same, bit for bit);
    # the scores are equal here and 2e-7 apart under other kernels (ATEN_CPU_CAPABILITY=avx2, MKL_CBWR=COMPATIBLE:
    # one thread against two), while a class's nearest positive and negative are 2.7e-6 apart and the nearest
    # call 3e-3 from its runner-up (measured)
    for name in ("Accuracy", "mAP", "IoU"):
        assert a[name] == b[name]
    assert a["per_video"] == b["per_video"]
    bank = [p for p in (tmp_path / "data2" / "feature_banks").rglob("meta.json")]
    assert len(bank) == len([p for p in (tmp_path / "data" / "feature_banks").rglob("meta.json")]) > 1
