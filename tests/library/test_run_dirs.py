"""spacewalk.results.runs, layout and provenance: what the results tools read from a run directory, the one run
finder, and each file of a run named once and read with its errors named."""

from __future__ import annotations

import json
import math

import pytest

from spacewalk.core.errors import DataError
from spacewalk.results.layout import METRICS_VERSION, read_metrics, write_metrics
from spacewalk.results.provenance import PROVENANCE, read_provenance, write_provenance
from spacewalk.results.runs import Metric, find_runs, headline_metrics, read_run
from spacewalk.results.statistics import t_interval

from helpers.run_dir_fakes import RECORDINGS, interval, step_metrics, write_run


def test_headline_numbers_of_every_task_are_their_intervals():
    # step recognition (and its plan decoding, which has no interval here), QA with a group per type, EgoCross per
    # domain, HiREST's per split and task: each number named by its path, with its interval's bounds
    step = headline_metrics(step_metrics(20.0, 30.0, 8.0, decoded={"decoding": "within_window", "Accuracy": 25.0,
                                                                    "mAP": 31.0, "IoU": 9.0}))
    assert list(step) == ["Accuracy", "mAP", "IoU", "best_val_loss", "decoded/Accuracy", "decoded/mAP",
                          "decoded/IoU"]
    made = t_interval([19.0, 20.0, 21.0])
    assert step["Accuracy"] == Metric(20.0, made.low, made.high, "recordings, then samples within them", 0.95)
    assert step["Accuracy"].per_recording == tuple(zip(RECORDINGS, (19.0, 20.0, 21.0)))
    assert step["decoded/Accuracy"] == Metric(25.0) and step["best_val_loss"] == Metric(2.5)

    qa = headline_metrics({"Accuracy": 40.0, "per_type": {"when": 50.0}, "count": 10, "intervals": {
        "Accuracy": interval(40.0, 5), "per_type": {"when": interval(50.0, 9)}}})
    assert set(qa) == {"Accuracy", "per_type/when"} and qa["per_type/when"].low == 41.0

    retrieval = headline_metrics({"split": "test", "Accuracy": 55.0, "per_video": {"v": 55.0}, "val": {
        "Accuracy": 48.0}, "context_seconds": 300.0, "intervals": {"Accuracy": interval(55.0, 1.0, "samples")}})
    assert retrieval == {"Accuracy": Metric(55.0, 54.0, 56.0, "samples", 0.95), "val/Accuracy": Metric(48.0)}

    egocross = headline_metrics({"accuracy": 70.0, "per_domain": {"surgery": {"accuracy": 60.0, "correct": 6}},
                                 "intervals": {"accuracy": interval(70.0, 3),
                                               "per_domain": {"surgery": interval(60.0, 4)}}})
    assert egocross["per_domain/surgery"] == Metric(60.0, 56.0, 64.0, "questions", 0.95)

    hirest = headline_metrics({"val": {"moment_segmentation": {"recall/0.5": 30.0, "intervals": {
        "recall/0.5": interval(30.0, 10, "videos")}}}, "test": {"video_retrieval": {"R@1": 12.0, "intervals": {
            "R@1": interval(12.0, 2, "queries")}}, "step_captioning": {"all": {"CIDEr": 30.0, "METEOR": 9.0},
                                                                "per_category": {"cooking": {"CIDEr": 1.0}}}},
        "best_val_loss": 9.0})
    # captioning (corpus metrics, no interval): its overall numbers alone
    assert hirest == {"val/moment_segmentation/recall/0.5": Metric(30.0, 20.0, 40.0, "videos", 0.95),
                      "test/video_retrieval/R@1": Metric(12.0, 10.0, 14.0, "queries", 0.95),
                      "test/step_captioning/CIDEr": Metric(30.0), "test/step_captioning/METEOR": Metric(9.0),
                      "best_val_loss": Metric(9.0)}


def test_an_older_runs_interval_over_recordings_is_made_by_todays_rule():
    # a metrics.json without "version" (1) holds the two-stage bootstrap interval over 3 recordings; the tables
    # show Student's t over its per-recording values, as for every run
    old = {"Accuracy": 20.0, "per_video": {"a": {"Accuracy": 10.0}, "b": {"Accuracy": 20.0}, "c": {"Accuracy": 30.0}},
           "intervals": {"Accuracy": {**interval(20.0, 5.0), "unit": "recordings, then samples within them"}}}
    made = t_interval([10.0, 20.0, 30.0], bounds=(0.0, 100.0))
    metric = headline_metrics(old)["Accuracy"]
    assert (metric.low, metric.high, metric.n) == (made.low, made.high, 3) and metric.high - metric.low > 10


def test_an_undefined_number_stays_undefined():
    metrics = step_metrics(20.0, 30.0, 8.0)
    metrics["intervals"]["mAP"]["estimate"] = math.nan
    assert headline_metrics(metrics)["mAP"].undefined


def test_without_intervals_the_top_level_numbers_stand_alone():
    assert headline_metrics({"Accuracy": 20.0, "mAP": 30.0, "IoU": 8.0, "tau": 1.0}) == {
        "Accuracy": Metric(20.0), "mAP": Metric(30.0), "IoU": Metric(8.0)}
    assert headline_metrics({"accuracy": 10.0, "correct": 2, "total": 20}) == {"accuracy": Metric(10.0)}


def test_a_run_directory_reads_its_keys_command_and_commit(tmp_path):
    run = read_run(write_run(tmp_path / "0", ["model=lfb_avg", "context=1min", "seed=2"], step_metrics(1, 2, 3),
                             provenance={"command": "python train.py model=lfb_avg context=1min seed=2",
                                         "commit": "abc", "dirty": True}))
    assert (run.value("model"), run.value("context"), run.seed, run.value("decoding")) == ("lfb_avg", "1min", 2,
                                                                                           "none")
    assert run.value("model._target_") == "models.Fake" and run.value("no.such.key") is None
    assert run.has("model.temperature") is False and run.has("model._target_")
    assert run.command == "python train.py model=lfb_avg context=1min seed=2" and run.commit == "abc+dirty"
    assert run.task == "spacewalk18 step_recognition"  # through the registry, from its data config
    # a run made before provenance.json: its command from .hydra/overrides.yaml (quoted for a shell), no commit
    old = read_run(write_run(tmp_path / "1", ["data.synthetic.minutes=[4,5]"], None, entry="evaluate"))
    assert old.command == "python evaluate.py 'data.synthetic.minutes=[4,5]'" and old.commit is None
    assert old.metrics is None and old.headline == {}


def test_a_re_test_takes_its_trained_runs_keys(tmp_path):
    trained = write_run(tmp_path / "train", ["model=lfb_avg", "context=3min", "seed=1"], step_metrics(1, 2, 3))
    retest = read_run(write_run(tmp_path / "decode", [f"ckpt_path={trained}/checkpoints/epoch=3.ckpt",
                                                      "decoding=within_window"], step_metrics(4, 5, 6),
                                entry="evaluate", model="random", decoding="within_window"))
    assert retest.origin is not None and retest.origin.path == trained
    assert (retest.value("model"), retest.value("context"), retest.seed) == ("lfb_avg", "3min", 1)
    assert retest.value("decoding") == "within_window"  # its own command line's


def test_find_runs_takes_runs_and_sweeps_and_names_what_is_neither(tmp_path):
    sweep = tmp_path / "sweep"
    for job in (10, 2, 0):
        write_run(sweep / str(job), [f"seed={job}"], step_metrics(1, 2, 3))
    (sweep / "multirun.yaml").write_text("{}")
    single = write_run(tmp_path / "single", [], step_metrics(1, 2, 3))
    assert find_runs([sweep, single]) == [sweep / "0", sweep / "2", sweep / "10", single]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="empty: neither a run directory"):
        find_runs([tmp_path / "empty"])
    with pytest.raises(DataError, match="missing: no such directory"):
        find_runs([tmp_path / "missing"])


def test_a_run_reached_twice_is_refused_naming_it(tmp_path):
    # a sweep given together with one of its jobs would count that job twice in every mean
    sweep = tmp_path / "sweep"
    for job in (0, 1):
        write_run(sweep / str(job), [f"seed={job}"], step_metrics(1, 2, 3))
    with pytest.raises(DataError, match=r"sweep/1: this run is given itself and inside .*sweep: each run is counted "
                                        r"once"):
        find_runs([sweep, sweep / "1"])
    with pytest.raises(DataError, match="sweep/0: this run is given twice"):
        find_runs([sweep / "0", sweep / "0"])


def test_metrics_json_carries_its_version_and_a_newer_one_is_refused(tmp_path):
    written = write_metrics(tmp_path, {"Accuracy": 1.0, "version": 99})
    assert written == {"version": METRICS_VERSION, "Accuracy": 1.0} == read_metrics(tmp_path)
    (tmp_path / "metrics.json").write_text(json.dumps({"version": METRICS_VERSION + 1, "Accuracy": 1.0}))
    with pytest.raises(DataError, match=r"metrics.json: field 'version': version 3: this code reads versions 1 to 2"):
        read_metrics(tmp_path)


@pytest.mark.parametrize("name, content, message", [
    ("metrics.json", "{not json", "metrics.json: not valid JSON"),
    ("metrics.json", "[1, 2]", "metrics.json: expected a JSON object, found list"),
    ("provenance.json", '{"command": ', "provenance.json: not valid JSON"),
    ("provenance.json", '"text"', "provenance.json: expected a JSON object, found str"),
    (".hydra/overrides.yaml", "model: lfb_cat\n", "overrides.yaml: expected a list of overrides"),
    (".hydra/overrides.yaml", "- [unclosed\n", "overrides.yaml: not valid YAML"),
    (".hydra/hydra.yaml", "- a list\n", r"hydra.yaml: expected a mapping \(Hydra's record\), found list"),
    (".hydra/hydra.yaml", "hydra: {runtime: {choices: [model]}}\n", r"hydra.yaml: expected a mapping "
                                                                     r"\(hydra.runtime.choices\), found list"),
    (".hydra/config.yaml", "just text\n", r"config.yaml: expected a mapping \(the run's config\), found str"),
])
def test_a_torn_or_malformed_run_file_is_named(tmp_path, name, content, message):
    run = write_run(tmp_path / "run", [], step_metrics(1, 2, 3))
    (run / name).write_text(content)
    with pytest.raises(DataError, match=message):
        read_run(run)


@pytest.mark.parametrize("name", ["metrics.json", "provenance.json", ".hydra/overrides.yaml"])
def test_a_folder_where_a_run_file_is_expected_is_named(tmp_path, name):
    run = write_run(tmp_path / "run", [], None)
    (run / name).unlink(missing_ok=True)
    (run / name).mkdir()
    with pytest.raises(DataError, match=f"{name}: a folder, where a file is expected"):
        read_run(run)


def test_provenance_records_the_jobs_command_and_keeps_an_earlier_one(tmp_path):
    first = write_provenance(tmp_path, "train", ["model=lfb_cat", "data.synthetic.minutes=[4,5]"],
                             argv=["train.py", "-m", "model=lfb_cat,lfb_avg"])
    assert first["command"] == "python train.py model=lfb_cat 'data.synthetic.minutes=[4,5]'"
    assert first["argv"] == "python train.py -m model=lfb_cat,lfb_avg"
    assert len(first["commit"]) == 40 and isinstance(first["dirty"], bool)  # the tests run in a git checkout
    write_provenance(tmp_path, "train", ["model=lfb_cat", "ckpt_path=last"], argv=["train.py"])
    again = read_provenance(tmp_path)
    assert again["command"].endswith("ckpt_path=last") and again["previous"][0]["command"] == first["command"]
    assert json.loads((tmp_path / PROVENANCE).read_text()) == again
    assert read_provenance(tmp_path / "nothing") is None
