"""`python -m spacewalk.score`: end to end in a subprocess, and in-process for the other tasks."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from spacewalk.metrics import qa_accuracy, retrieval_accuracy, step_recognition_metrics
from spacewalk.predictions import write_qa_predictions, write_retrieval_predictions, write_step_predictions
from spacewalk.score import main
from spacewalk.spacewalk18 import Spacewalk18


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "spacewalk.score", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_step_recognition_end_to_end(tiny_root, tmp_path):
    ds = Spacewalk18(tiny_root)
    samples = ds.step_samples("test")
    rng = np.random.default_rng(0)
    predictions = {v: rng.integers(0, ds.recordings[v].num_classes, len(s)) for v, s in samples.items()}
    scores = {v: rng.random((len(s), ds.recordings[v].num_classes)) for v, s in samples.items()}
    path = write_step_predictions(tmp_path / "pred.json", predictions, scores)

    done = run_cli("spacewalk18", "--root", tiny_root, "--split", "test", "--predictions", path,
                   "--output", tmp_path / "metrics.json")
    assert done.returncode == 0, done.stderr
    expected = json.loads(json.dumps(step_recognition_metrics(ds.recordings, samples, predictions, scores)))
    assert json.loads(done.stdout) == expected
    assert json.loads((tmp_path / "metrics.json").read_text()) == expected
    assert set(expected) == {"Accuracy", "mAP", "IoU", "per_video"}


def test_bad_prediction_file_exits_2_without_traceback(tiny_root, tmp_path):
    ds = Spacewalk18(tiny_root)
    video_id, samples = next(iter(ds.step_samples("test").items()))
    entries = [{"prediction": 0} for _ in samples]
    entries[5]["prediction"] = 7
    path = tmp_path / "pred.json"
    path.write_text(json.dumps({video_id: entries}))

    done = run_cli("--root", tiny_root, "--predictions", path)  # benchmark and split by default
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert str(path) in done.stderr and f"{video_id} entry 5" in done.stderr and "'prediction'" in done.stderr


def test_argument_errors_exit_2(tiny_root, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["nosuchbenchmark", "--root", str(tiny_root), "--predictions", "x.json"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["--root", str(tiny_root), "--predictions", "x.json", "--task", "captioning"])
    assert info.value.code == 2


def test_missing_files_exit_2(tiny_root, tmp_path, capsys):
    assert main(["--root", str(tmp_path / "nowhere"), "--predictions", "x.json"]) == 2
    assert "dataset root not found" in capsys.readouterr().err
    assert main(["--root", str(tiny_root), "--predictions", str(tmp_path / "x.json")]) == 2
    assert "file not found" in capsys.readouterr().err
    # the tiny root has no question file
    assert main(["--root", str(tiny_root), "--predictions", "x.json", "--task", "question_answering"]) == 2


def test_real_test_split_all_tasks(real_spacewalk18_root, tmp_path, capsys):
    ds = Spacewalk18(real_spacewalk18_root)
    rng = np.random.default_rng(0)
    root = str(real_spacewalk18_root)

    samples = ds.step_samples("test")
    predictions = {v: rng.integers(0, ds.recordings[v].num_classes, len(s)) for v, s in samples.items()}
    write_step_predictions(tmp_path / "steps.json", predictions)
    assert main(["--root", root, "--predictions", str(tmp_path / "steps.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == json.loads(json.dumps(step_recognition_metrics(ds.recordings, samples, predictions)))
    assert out["mAP"] is None and list(out["per_video"]) == ds.splits["test"]

    questions = ds.questions()
    answers = rng.integers(0, 4, len(questions))
    write_qa_predictions(tmp_path / "qa.json", answers)
    assert main(["--root", root, "--task", "question_answering", "--predictions", str(tmp_path / "qa.json")]) == 0
    assert json.loads(capsys.readouterr().out) == qa_accuracy(answers, questions)
    assert main(["--root", root, "--split", "val", "--task", "question_answering",
                 "--predictions", str(tmp_path / "qa.json")]) == 2
    assert "only a test split" in capsys.readouterr().err

    retrieval = ds.retrieval_samples("test")
    picks = {v: rng.integers(0, 2, len(s)) for v, s in retrieval.items()}
    write_retrieval_predictions(tmp_path / "ret.json", picks)
    assert main(["--root", root, "--task", "intra_video_retrieval", "--predictions", str(tmp_path / "ret.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == retrieval_accuracy(picks, retrieval)
    assert abs(out["Accuracy"] - 50) < 3
