"""A multiple-choice run's W&B log, offline as by default, read back from the files wandb wrote
(tests/helpers/wandb_offline.py): the metrics as numbers, a table of the items (question, options, reply, parsed choice,
answer, correct, frames seen) equal to the run's records, grouped by benchmark and model."""

from __future__ import annotations

import json

from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend
from spacewalk.multiple_choice.records import ITEM_COLUMNS
from spacewalk.results.bootstrap import BootstrapOptions, accuracy_intervals
from spacewalk.training.experiment_loggers import logged_numbers
from spacewalk.training.multiple_choice import log_to_wandb

from helpers.openai_stub import Stub, Task, by_question, toy_items
from helpers.wandb_offline import offline_run


def test_logged_numbers_are_named_so_panels_group_as_meant():
    """Headline numbers and their bounds in the "test" section, a group's in its own section, a "/" inside a
    question type no section of its own; the intervals' settings apart (config, not charts)."""
    interval = {"estimate": 50.0, "low": 10.0, "high": 90.0, "level": 0.95, "unit": "questions", "n": 4,
                "n_resamples": 1000, "seed": 0, "method": "percentile"}
    metrics = {"Accuracy": 50.0, "count": 4, "task": "qa", "per_type": {"a": 25.0, "b": None, "before/after": 75.0},
               "intervals": {"Accuracy": interval, "per_type": {"before/after": {**interval, "low": 5.0}}},
               "flag": True}
    numbers, settings = logged_numbers(metrics)
    assert numbers == {"test/Accuracy": 50.0, "test/count": 4, "per_type/a": 25.0, "per_type/before|after": 75.0,
                       "test/Accuracy_low": 10.0, "test/Accuracy_high": 90.0, "per_type/before|after_low": 5.0,
                       "per_type/before|after_high": 90.0}
    assert settings == {"level": 0.95, "n_resamples": 1000, "seed": 0, "method": "percentile", "unit": "questions"}


def test_metrics_and_the_items_table_are_logged_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    server = Stub()
    server.respond = by_question
    monkeypatch.setenv("TEST_BASE_URL", server.url)
    try:
        task = Task(toy_items(tmp_path, 6))
        backend = OpenAIChatBackend("stub-model", base_url_env="TEST_BASE_URL", num_frames=2, requests_per_minute=None,
                                    concurrency=3)
        metrics = runner.run(task, backend, tmp_path, progress=False)
    finally:
        server.close()
    # the toy task has no intervals of its own: the bootstrap's over its questions, as a benchmark's task gives them
    correct = [r.correct for r in runner.read_run(tmp_path)]
    metrics["intervals"] = accuracy_intervals(correct, BootstrapOptions(n_resamples=200), name="Accuracy")
    settings = {"enabled": True, "offline": True, "project": "spacewalk", "group": "toy_benchmark",
                "job_type": "mc_openai"}
    log_to_wandb(settings, task, backend.name, tmp_path, metrics, {"model": {"model": "stub-model"}})

    run = offline_run(tmp_path)
    assert (run["project"], run["group"], run["job_type"], run["name"]) == ("spacewalk", "toy_benchmark", "mc_openai",
                                                                           "openai:stub-model")
    assert set(run["tags"]) == {"toy_benchmark", "mc_openai", "toy"}
    assert run["config"]["model"] == {"model": "stub-model"} and run["config"]["task"] == "toy"
    assert run["logged"]["test/Accuracy"] == metrics["Accuracy"] and run["logged"]["test/count"] == 6
    # the intervals: bounds beside the number, their settings in the config (no chart of a seed or a level)
    interval = metrics["intervals"]["Accuracy"]
    assert (run["logged"]["test/Accuracy_low"], run["logged"]["test/Accuracy_high"]) == (interval["low"],
                                                                                        interval["high"])
    assert run["config"]["intervals"]["n_resamples"] == interval["n_resamples"]
    assert not any(k.split("/")[-1] in ("n_resamples", "seed", "level") for k in run["logged"])
    # the table, as the run folder holds it for upload
    assert run["logged"]["items/_type"] == "table-file" and run["logged"]["items/nrows"] == 6
    table = json.loads((run["folder"] / "files" / run["logged"]["items/path"]).read_text())
    assert table["columns"] == list(ITEM_COLUMNS)
    records = {r.item_id: r for r in runner.read_run(tmp_path)}
    for row, item in zip(table["data"], task.items()):
        record = records[item.id]
        assert row == [item.id, item.question, "0: x\n1: y\n2: z", record.reply, record.choice, item.answer,
                       record.correct, 2]  # frames seen: the backend's 2 per clip
    assert {row[6] for row in table["data"]} == {True, False}  # both kinds of rows, so the column is read


def test_multiple_choice_runs_log_offline_by_default():
    """As train.py's logger: on, and offline (nothing leaves the machine until `wandb sync`)."""
    from omegaconf import OmegaConf

    from helpers.commands import CONF

    settings = OmegaConf.load(CONF / "task" / "multiple_choice.yaml").multiple_choice.wandb
    assert settings.enabled is True and settings.offline is True
