"""evaluate.py's multiple-choice runs as a user runs them: the default command on the synthetic data, a run
killed mid-way and re-run with the same command (the run directory is found again and the metrics equal an
uninterrupted run's), the step questions' official predictions, and train.py's refusal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.baselines import ScriptedBackend
from spacewalk.results.bootstrap import BootstrapOptions

from helpers.commands import REPO, command_environment, python_for, run_command, stopped_at_exit
from helpers.synthetic_presets import QA_TWO_TESTS, overrides

SMALL = [*overrides(QA_TWO_TESTS), "multiple_choice.progress=false"]


def run(script: str, *overrides: str, log_dir: Path, env: dict | None = None, check: bool = True):
    return run_command(script, *overrides, check=check,
                       env={"SPACEWALK_LOG_DIR": str(log_dir), "OMP_NUM_THREADS": "1"} | (env or {}))


def only_run_dir(log_dir: Path) -> Path:
    runs = [p.parent for p in log_dir.glob("evaluate/runs/multiple_choice/*/*/*/run.json")]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture(scope="module")
def default_run(synthetic_spacewalk18, tmp_path_factory) -> tuple[list[str], Path]:
    """The default command (the random backend on the default data config) on the synthetic set, run once: its
    overrides and the log folder it wrote; the tests below read it."""
    command = ["data=spacewalk18_qa", f"data.synthetic_root={synthetic_spacewalk18(**QA_TWO_TESTS)}", *SMALL]
    log_dir = tmp_path_factory.mktemp("default")
    run("evaluate.py", *command, log_dir=log_dir)
    return command, log_dir


@pytest.mark.slow
def test_evaluate_default_and_a_killed_run_resumes_to_the_same_metrics(tmp_path, synthetic_spacewalk18, default_run):
    root = synthetic_spacewalk18(**QA_TWO_TESTS)
    data = [f"data.synthetic_root={root}", *SMALL]
    # the default backend (random) on the default data config
    default_dir = only_run_dir(default_run[1])
    assert default_dir.parts[-3:-1] == ("spacewalk18_qa", "random")
    assert {"records.jsonl", "metrics.json", "answers.json", "run.json"} <= {p.name for p in default_dir.iterdir()}
    default = json.loads((default_dir / "metrics.json").read_text())
    interval = default["intervals"]["Accuracy"]  # the questions are the unit
    assert (interval["estimate"], interval["unit"], interval["n"]) == (default["Accuracy"], "questions",
                                                                       default["count"])
    assert interval["low"] <= default["Accuracy"] <= interval["high"]
    assert set(default["intervals"]["per_type"]) == set(default["per_type"])

    command = ["data=spacewalk18_qa", *data, "model=mc_scripted",
               "model._target_=helpers.multiple_choice_fakes.KilledAfter", "multiple_choice.chunk_size=4"]
    # the uninterrupted run, through the library (the same task and backend as the command builds)
    whole = tmp_path / "whole"
    task = question_answering_task(None, root, 0, QA_TWO_TESTS)
    runner.run(task, ScriptedBackend(), whole, chunk_size=4, progress=False, bootstrap=BootstrapOptions())

    killed = run("evaluate.py", *command, log_dir=tmp_path / "killed", env={"SPACEWALK_TEST_KILL_AFTER": "8"},
                 check=False)
    assert killed.returncode != 0
    run_dir = only_run_dir(tmp_path / "killed")
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 8 and not (run_dir / "metrics.json").exists()
    run("evaluate.py", *command, log_dir=tmp_path / "killed")  # the same command: finds run_dir, resumes
    assert only_run_dir(tmp_path / "killed") == run_dir
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics == json.loads((whole / "metrics.json").read_text()) and metrics["Accuracy"] == 100.0
    assert (run_dir / "records.jsonl").read_text() == (whole / "records.jsonl").read_text()
    assert (run_dir / "answers.json").read_text() == (whole / "answers.json").read_text()

    # other settings in the same directory are refused
    other = run("evaluate.py", *command, f"hydra.run.dir={run_dir}", "data.transcript_in_prompt=true",
                log_dir=tmp_path / "killed", check=False)
    assert other.returncode != 0 and "other settings" in other.stderr


@pytest.mark.slow
def test_step_questions_give_official_predictions_and_train_refuses(tmp_path, synthetic_spacewalk18):
    root = synthetic_spacewalk18(**QA_TWO_TESTS)
    out = tmp_path / "run"
    run("evaluate.py", "data=spacewalk18_step_questions", f"data.synthetic_root={root}", *SMALL,
        "model=mc_scripted", "context=1min", f"hydra.run.dir={out}", log_dir=tmp_path)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["Accuracy"] == 100.0 and metrics["count"] == 80 and metrics["official_samples"] is True
    assert metrics["intervals"]["Accuracy"]["unit"] == "recordings, then samples within them"
    assert metrics["intervals"]["Accuracy"]["low"] == metrics["intervals"]["Accuracy"]["high"] == 100.0
    scored = run_command("-m", "spacewalk.score", "--root", root, "--split", "test",
                         "--predictions", out / "predictions.json")
    assert json.loads(scored.stdout)["IoU"] == pytest.approx(metrics["IoU"])
    from hydra import compose, initialize_config_dir

    from spacewalk.training import train

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=["data=spacewalk18_step_questions", "model=mc_scripted"],
                      return_hydra_config=True)
    with pytest.raises(ValueError, match="model=mc_scripted has nothing to train"):
        train(cfg)


@pytest.mark.slow
def test_two_processes_split_the_items_and_rank0_merges(tmp_path, default_run):
    """Two evaluate.py processes started as torchrun starts them (RANK, WORLD_SIZE), the same command: they
    find the same run directory, each answers its share, rank 0 merges; the result equals one process's (the
    default command's run, random answers)."""
    command, one_log_dir = default_run
    environment = command_environment() | {"SPACEWALK_LOG_DIR": str(tmp_path / "two"), "OMP_NUM_THREADS": "1",
                                           "WORLD_SIZE": "2"}
    processes = [subprocess.Popen([python_for(environment), "evaluate.py", *command], cwd=REPO,
                                  env=environment | {"RANK": r}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for r in ("1", "0")]
    with stopped_at_exit(processes):
        for p in processes:
            _, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-3000:]
    one, two = only_run_dir(one_log_dir), only_run_dir(tmp_path / "two")
    assert (two / "metrics.json").read_text() == (one / "metrics.json").read_text()
    assert (two / "records.jsonl").read_text() == (one / "records.jsonl").read_text()
    assert (two / "answers.json").read_text() == (one / "answers.json").read_text()
    assert not list(two.glob("records.rank*"))
