"""Each kind of user error, run as the user runs the command: its message alone on stderr (naming the value, file,
item or field), exit code 2, no traceback. All are refused before any data is written (a value a model, DataModule
or backend checks when it is built reads a tiny synthetic Spacewalk-18 made once per session), so each command
takes seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_command

TORN_RECORDS = [{"item_id": "0", "prompt": "Which step?", "reply": "A", "choice": 0, "correct": True, "scores": None,
                 "meta": {}}]


def hydra_dirs(tmp_path) -> list[str]:
    return [f"hydra.run.dir={tmp_path / 'run'}", f"paths.data_dir={tmp_path / 'data'}"]


# one recording per split, two steps: the smallest set a DataModule and a backend are built on (in a second)
TINY_SPACEWALK18 = dict(n_train=1, n_val=1, n_test=1, minutes=(3, 3), steps_per_video=(2, 2), samples_per_video=50,
                        retrieval_samples_per_video=50, questions_per_video=2)


def torn_run(tmp_path) -> str:
    """A multiple-choice run directory whose records.jsonl was cut inside its first line and appended to after."""
    run_dir = tmp_path / "mc_run"
    run_dir.mkdir()
    line = json.dumps(TORN_RECORDS[0])
    (run_dir / "records.jsonl").write_text(line[:30] + "\n" + line + "\n")
    return str(run_dir)


def empty_folder(tmp_path) -> str:
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    return str(folder)


def a_file(tmp_path) -> Path:
    path = tmp_path / "a_file"
    path.write_text("not a folder")
    return path


CASES = {
    # a config value that cannot be read, and one that reads as an empty window
    "bad_context": (lambda t, sw18: ["train.py", "context=7x", *hydra_dirs(t)],
                    ["context=7x", "cannot read a duration from '7x'"]),
    "empty_context": (lambda t, sw18: ["evaluate.py", "context=0s", *hydra_dirs(t)], ["context=0s", "longer than 0 s"]),
    # a value read by a config resolver (bank_folder), checked before anything resolves it
    "bad_modalities": (lambda t, sw18: ["train.py", "modalities=audio", *hydra_dirs(t)],
                       ["modalities must be one of", "'audio'"]),
    # a file where the run's or the sweep's folder must be (Hydra's own mkdir: a traceback)
    "run_dir_under_a_file": (lambda t, sw18: ["evaluate.py", f"hydra.run.dir={a_file(t) / 'run'}",
                                              f"paths.data_dir={t / 'data'}"],
                             ["hydra.run.dir=", "a_file is a file (above ", "give another hydra.run.dir"]),
    "sweep_dir_a_file": (lambda t, sw18: ["evaluate.py", "-m", f"hydra.sweep.dir={a_file(t)}", "context=1min,2min",
                                          f"paths.data_dir={t / 'data'}"],
                         ["hydra.sweep.dir=", "a_file is a file, where the run's folder must be"]),
    # a key the config's _target_ does not take (Hydra's TypeError, exit 1 before)
    "key_not_taken": (lambda t, sw18: ["evaluate.py", "+model.nonsense=1", f"data.root={sw18()}", *hydra_dirs(t)],
                      ["model: RandomBaseline.__init__() got an unexpected keyword argument 'nonsense'"]),
    "negative_seed": (lambda t, sw18: ["train.py", "seed=-1", *hydra_dirs(t)],
                      ["seed=-1: a seed is a whole number from 0 to 4294967295"]),
    "refused_pair": (lambda t, sw18: ["train.py", "task=intra_video_retrieval", "model=lfb_cat", *hydra_dirs(t)],
                     ["model=lfb_cat does not fit task=intra_video_retrieval", "ivr_zero_shot"]),
    # raised inside Hydra's instantiate of the data config, which wraps it
    "missing_dataset_root": (lambda t, sw18: ["evaluate.py", f"data.root={t / 'missing'}", *hydra_dirs(t)],
                             ["missing: dataset root not found"]),
    "torn_records": (lambda t, sw18: ["-m", "spacewalk.multiple_choice.records", torn_run(t)],
                     ["records.jsonl: line 1 is not JSON"]),
    "score_missing_root": (lambda t, sw18: ["-m", "spacewalk.score", "--root", t / "missing", "--split", "test",
                                      "--predictions", t / "predictions.json"],
                           ["missing: dataset root not found"]),
    # values checked by the constructors Hydra instantiates (a head, a DataModule, a backend, a task, a generator)
    "head_value": (lambda t, sw18: ["train.py", "model=lfb_tf", "model.head.nhead=5", f"data.root={sw18()}",
                                    *hydra_dirs(t)], ["nhead=5 must divide the feature dim"]),
    "datamodule_value": (lambda t, sw18: ["train.py", "datamodule.text_pool=foo", f"data.root={sw18()}",
                                          *hydra_dirs(t)], ["text_pool must be one of", "'foo'"]),
    "backend_value": (lambda t, sw18: ["evaluate.py", "data=spacewalk18_qa", "model=mc_qwen2_5_vl", "model.dtype=foo",
                                       f"data.root={sw18()}", *hydra_dirs(t)], ["dtype must be", "'foo'"]),
    "task_value": (lambda t, sw18: ["evaluate.py", "data=egocross", "data.qa=foo", *hydra_dirs(t)],
                   ["EgoCross qa must be closeqa or openqa", "'foo'"]),
    # multiple choice: a question file that is not a path (mc_plan), a checkpoint folder that is not one
    "questions_not_a_path": (lambda t, sw18: ["evaluate.py", "data=spacewalk18_qa", "model=mc_plan",
                                              "data.questions=[]", f"data.root={sw18()}", *hydra_dirs(t)],
                             ["data.questions=[]: the path of a question file"]),
    "checkpoint_without_config": (lambda t, sw18: ["evaluate.py", "data=spacewalk18_qa", "model=mc_transformers",
                                                   f"model.model={empty_folder(t)}", f"data.root={sw18()}",
                                                   *hydra_dirs(t)], ["a folder without config.json"]),
    # a mapping of settings given to a dataclass: a misspelt key, a value of another type (spacewalk/core/settings.py)
    "misspelt_bank_setting": (lambda t, sw18: ["train.py", "+datamodule.bank_config.segment_secs=10",
                                               f"data.root={sw18()}", *hydra_dirs(t)],
                              ["datamodule.bank_config.segment_secs: not a setting (did you mean segment_seconds?)"]),
    "family_setting_type": (lambda t, sw18: ["evaluate.py", "data=spacewalk18_qa", "model=mc_qwen2_5_vl",
                                             "+model.families.qwen2_5_vl.min_video_frames=abc", f"data.root={sw18()}",
                                             *hydra_dirs(t)],
                            ["families.qwen2_5_vl.min_video_frames='abc': expected a whole number"]),
    "synthetic_option": (lambda t, sw18: ["evaluate.py", "data=hirest", "model=hirest_heuristics",
                                          "data.synthetic.seconds=[10,20]", *hydra_dirs(t)],
                         ["seconds must satisfy 20 <= lo <= hi", "(10, 20)"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_user_error_prints_its_message_alone(case, tmp_path, synthetic_spacewalk18):
    command, expected = CASES[case]
    result = run_command(*command(tmp_path, lambda: synthetic_spacewalk18(**TINY_SPACEWALK18)), check=False,
                         timeout=180)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and all(text in last for text in expected), last
    assert not (tmp_path / "data").exists()  # refused before anything was generated or read
