"""A multiple-choice run's W&B log, offline as by default, read back from the files wandb wrote
(tests/wandb_offline.py): the metrics as numbers, a table of the items (question, options, reply, parsed choice,
answer, correct, frames seen) equal to the run's records, grouped by benchmark and model."""

from __future__ import annotations

import json

from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend
from spacewalk.multiple_choice.records import ITEM_COLUMNS
from spacewalk.training.multiple_choice import flat_numbers, log_to_wandb

from openai_stub import Stub, Task, by_question, toy_items
from wandb_offline import offline_run


def test_flat_numbers_keep_the_numbers_under_joined_keys():
    metrics = {"Accuracy": 50.0, "count": 4, "task": "qa", "per_type": {"a": 25.0, "b": None},
               "intervals": {"Accuracy": {"low": 10.0, "high": 90.0, "unit": "questions"}}, "flag": True}
    assert flat_numbers(metrics) == {"Accuracy": 50.0, "count": 4, "per_type/a": 25.0,
                                     "intervals/Accuracy/low": 10.0, "intervals/Accuracy/high": 90.0}


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
    settings = {"enabled": True, "offline": True, "project": "spacewalk", "group": "toy_benchmark",
                "job_type": "mc_openai"}
    log_to_wandb(settings, task, backend.name, tmp_path, metrics, {"model": {"model": "stub-model"}})

    run = offline_run(tmp_path)
    assert (run["project"], run["group"], run["job_type"], run["name"]) == ("spacewalk", "toy_benchmark", "mc_openai",
                                                                           "openai:stub-model")
    assert set(run["tags"]) == {"toy_benchmark", "mc_openai", "toy"}
    assert run["config"]["model"] == {"model": "stub-model"} and run["config"]["task"] == "toy"
    assert run["logged"]["Accuracy"] == metrics["Accuracy"] and run["logged"]["count"] == 6
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

    from conftest import CONF

    settings = OmegaConf.load(CONF / "task" / "multiple_choice.yaml").multiple_choice.wandb
    assert settings.enabled is True and settings.offline is True
