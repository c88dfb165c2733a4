"""`logger=tensorboard` and `logger=mlflow` (conf/logger/) for a training run (train.py) and a multiple-choice run
(evaluate.py), read back with each tool's own reader (TensorBoard's event accumulator, MLflow's client on the
run's local store): the numbers of metrics.json with their intervals' bounds, under the names every logger shares
(spacewalk/training/experiment_loggers.py), and for MLflow the run's config and provenance as parameters."""

from __future__ import annotations

import json

import pytest

from helpers.commands import run_command
from helpers.synthetic_presets import TRAIN, TRAIN_TWO_TESTS, overrides

pytestmark = pytest.mark.slow


def tensorboard_scalars(folder) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = list(folder.glob("tensorboard/version_*"))
    assert len(runs) == 1, runs
    events = EventAccumulator(str(runs[0]))
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def mlflow_run(log_dir):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{log_dir}/mlflow.db")
    experiment = client.get_experiment_by_name("spacewalk")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1, runs
    return client, runs[0]


@pytest.fixture(autouse=True)
def local_mlflow(monkeypatch):
    """The default local store, whatever tracking server the environment names."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def multiple_choice(tmp_path, synthetic_spacewalk18, logger: str):
    log_dir = tmp_path / "logs"
    run_dir = tmp_path / "run"
    run_command("evaluate.py", "data=spacewalk18_qa", f"data.synthetic_root={synthetic_spacewalk18(**TRAIN)}",
                *overrides(TRAIN),
                "model=mc_scripted", f"logger={logger}", "multiple_choice.progress=false",
                "multiple_choice.wandb.enabled=false", f"hydra.run.dir={run_dir}",
                env={"SPACEWALK_LOG_DIR": str(log_dir)})
    return log_dir, run_dir, json.loads((run_dir / "metrics.json").read_text())


def test_tensorboard_holds_a_multiple_choice_runs_metrics_and_intervals(tmp_path, synthetic_spacewalk18):
    _, run_dir, metrics = multiple_choice(tmp_path, synthetic_spacewalk18, "tensorboard")
    scalars = tensorboard_scalars(run_dir)
    interval = metrics["intervals"]["Accuracy"]
    assert scalars["test/Accuracy"] == [pytest.approx(metrics["Accuracy"])] == [pytest.approx(100.0)]
    assert scalars["test/Accuracy_low"] == [pytest.approx(interval["low"])]
    assert scalars["test/Accuracy_high"] == [pytest.approx(interval["high"])]
    for question_type, value in metrics["per_type"].items():
        assert scalars[f"per_type/{question_type.replace('/', '|')}"] == [pytest.approx(value)]
    assert not [tag for tag in scalars if tag.rsplit("/", 1)[-1] in ("n_resamples", "seed", "level")]
    hparams = (next(run_dir.glob("tensorboard/version_*")) / "hparams.yaml").read_text()
    assert "mc_scripted" in hparams and "provenance" in hparams and "n_resamples" in hparams


def test_mlflow_holds_a_multiple_choice_runs_metrics_config_and_provenance(tmp_path, synthetic_spacewalk18):
    log_dir, run_dir, metrics = multiple_choice(tmp_path, synthetic_spacewalk18, "mlflow")
    client, run = mlflow_run(log_dir)
    assert run.data.metrics["test/Accuracy"] == pytest.approx(metrics["Accuracy"])
    interval = metrics["intervals"]["Accuracy"]
    assert run.data.metrics["test/Accuracy_low"] == pytest.approx(interval["low"])
    assert run.data.metrics["test/Accuracy_high"] == pytest.approx(interval["high"])
    provenance = json.loads((run_dir / "provenance.json").read_text())
    params = run.data.params
    # parameters keep 250 characters (Lightning's MLFlowLogger), the tags the whole provenance
    assert params["provenance/command"] == provenance["command"][:250]
    assert run.data.tags["provenance.command"] == provenance["command"]
    assert run.data.tags["provenance.commit"] == str(provenance["commit"]) == params["provenance/commit"]
    assert params["model/_target_"].endswith("ScriptedBackend") and params["intervals/n_resamples"] == str(
        interval["n_resamples"])
    assert run.data.tags["model"] == "mc_scripted" and run.data.tags["data"] == "spacewalk18_qa"
    assert run.info.status == "FINISHED"


def test_training_logs_to_tensorboard_and_mlflow(tmp_path, spacewalk18_run_data):
    data = spacewalk18_run_data(TRAIN_TWO_TESTS)  # two test recordings: the recordings' interval is defined
    log_dir, run_dir = tmp_path / "logs", tmp_path / "run"
    run_command("train.py", *data, "model=lfb_avg", "trainer.max_epochs=1", "plots=false", "logger=tensorboard",
                f"hydra.run.dir={run_dir}", env={"SPACEWALK_LOG_DIR": str(log_dir)})
    metrics = json.loads((run_dir / "metrics.json").read_text())
    scalars = tensorboard_scalars(run_dir)
    assert scalars["test/Accuracy"][-1] == pytest.approx(metrics["Accuracy"], abs=1e-4)
    assert scalars["test/Accuracy_low"][-1] == pytest.approx(metrics["intervals"]["Accuracy"]["low"], abs=1e-4)
    assert "train/loss_epoch" in scalars and "val/loss" in scalars

    mlflow_dir = tmp_path / "mlflow_run"
    run_command("train.py", *data, "model=lfb_avg", "trainer.max_epochs=1", "plots=false", "logger=mlflow",
                f"hydra.run.dir={mlflow_dir}", env={"SPACEWALK_LOG_DIR": str(log_dir)})
    metrics = json.loads((mlflow_dir / "metrics.json").read_text())
    client, run = mlflow_run(log_dir)
    assert run.data.metrics["test/Accuracy"] == pytest.approx(metrics["Accuracy"], abs=1e-4)
    assert run.data.metrics["test/Accuracy_high"] == pytest.approx(metrics["intervals"]["Accuracy"]["high"], abs=1e-4)
    assert [m.step for m in client.get_metric_history(run.info.run_id, "train/loss_epoch")]  # logged as it trained
    assert run.data.tags["provenance.command"].startswith("python train.py")
    assert run.data.tags["provenance.command"] == json.loads((mlflow_dir / "provenance.json").read_text())["command"]
    assert run.data.params["model/_target_"] and run.data.tags["model"] == "lfb_avg"
