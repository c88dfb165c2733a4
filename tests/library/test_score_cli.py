"""`python -m spacewalk.score`: end to end in a subprocess, and in-process for the other tasks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
from spacewalk.benchmarks.spacewalk18.scoring.official import qa_accuracy, retrieval_accuracy, step_recognition_metrics
from spacewalk.benchmarks.spacewalk18.scoring.predictions import (
    write_qa_predictions,
    write_retrieval_predictions,
    write_step_predictions,
)
from spacewalk.score import main

from conftest import run_command


def run_cli(*args):
    return run_command("-m", "spacewalk.score", *args, check=False, timeout=120)


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


# --------------------------------------------------------------------------------------------------
# hirest


def write_tiny_hirest(tmp_path):
    """A split file, a step GT and categories, small enough to check by hand."""
    split = {"make tea": {"a.mp4": {"relevant": True, "clip": True, "v_duration": 60, "bounds": [10, 20],
                                    "steps": []}},
             "fix bike": {"b.mp4": {"relevant": True, "clip": False, "v_duration": 60, "bounds": [0, 0],
                                    "steps": []}}}
    steps = {"a.mp4": {"bounds": [[10, 15], [15, 20]],
                       "captions": [{"start": 10, "end": 15, "sentence": "Boil water"},
                                    {"start": 15, "end": 20, "sentence": "Add the tea"}]}}
    categories = {"prompt_to_cat": {"make tea": "Food", "fix bike": "Cars"},
                  "video_to_cat": {"a.mp4": "Food", "b.mp4": "Cars"}}
    paths = {}
    for name, obj in (("split", split), ("steps", steps), ("categories", categories)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(obj))
    return paths


def test_hirest_end_to_end(tmp_path):
    from spacewalk.benchmarks.hirest.scoring import score_moment_segmentation

    paths = write_tiny_hirest(tmp_path)
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"a.mp4": {"bounds": [[10, 14], [14, 17], [17, 20]]}}))
    done = run_cli("hirest", "--task", "moment_segmentation", "--gt", paths["steps"], "--categories",
                   paths["categories"], "--predictions", pred, "--output", tmp_path / "metrics.json")
    assert done.returncode == 0, done.stderr
    expected = json.loads(json.dumps(score_moment_segmentation(pred, paths["steps"], paths["categories"])))
    assert json.loads(done.stdout) == expected == json.loads((tmp_path / "metrics.json").read_text())
    # GT [10, 15], [15, 20]: [10, 14] has IoU 0.8 with the first, [17, 20] 0.6 with the second, [14, 17] < 0.5
    assert expected["all"]["recall"] == {"0.5": 100.0, "0.7": 50.0}
    assert expected["all"]["precision"] == {"0.5": 2 / 3 * 100, "0.7": 1 / 3 * 100}  # the authors' order


def test_hirest_bad_predictions_exit_2(tmp_path):
    paths = write_tiny_hirest(tmp_path)
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"make tea": {"a.mp4": {"bounds": [10]}}}))
    done = run_cli("hirest", "--task", "moment_retrieval", "--gt", paths["split"], "--categories",
                   paths["categories"], "--predictions", pred)
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert str(pred) in done.stderr and "a.mp4" in done.stderr and "'bounds'" in done.stderr


def test_hirest_reversed_moment_is_refused_unless_allowed(tmp_path, capsys):
    paths = write_tiny_hirest(tmp_path)
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"make tea": {"a.mp4": {"bounds": [20, 10]}}}))
    common = ["hirest", "--task", "moment_retrieval", "--gt", str(paths["split"]), "--categories",
              str(paths["categories"]), "--predictions", str(pred)]
    assert main(common) == 2
    err = capsys.readouterr().err
    assert str(pred) in err and "a.mp4" in err and "'bounds'" in err and "ends before it starts" in err
    assert main([*common, "--allow-reversed"]) == 0  # the authors' evaluate.py: a miss
    assert json.loads(capsys.readouterr().out)["all"]["R@0.5"] == 0.0


def test_hirest_argument_errors_exit_2(tmp_path, capsys):
    paths = write_tiny_hirest(tmp_path)
    common = ["--gt", str(paths["split"]), "--categories", str(paths["categories"]), "--predictions", "x.json"]
    for argv in (["hirest", *common],                                        # no --task
                 ["hirest", "--task", "video_retrieval", "--predictions", "x.json"],  # neither --root nor --gt
                 ["hirest", "--task", "video_retrieval", "--split", "train", *common],
                 ["spacewalk18", "--task", "video_retrieval", "--root", str(tmp_path), "--predictions", "x.json"],
                 ["hirest", "--task", "intra_video_retrieval", *common]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2, argv
    assert main(["hirest", "--task", "video_retrieval", "--root", str(tmp_path), "--predictions", "x.json"]) == 2
    assert "not a HiREST root" in capsys.readouterr().err


def test_hirest_captioning_prints_clean_json(tmp_path, capsys, java):
    paths = write_tiny_hirest(tmp_path)
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"a.mp4": {"captions": [{"sentence": "boil the water."}, {"sentence": "Add tea"}]}}))
    assert main(["hirest", "--task", "step_captioning", "--gt", str(paths["steps"]), "--categories",
                 str(paths["categories"]), "--predictions", str(pred)]) == 0
    out = json.loads(capsys.readouterr().out)  # nothing but the JSON on stdout (pycocoevalcap prints)
    assert out["all"]["Total"] == 1 and set(out["per_category"]) == {"Food"}
    assert 0 < out["all"]["CIDEr"] and out["all"]["ROUGE_L"] < 100
    assert "Entailment" in out["skipped"]


def test_hirest_real_root(real_hirest_root, tmp_path, capsys):
    root = str(real_hirest_root)
    gt = json.loads((real_hirest_root / "data/splits/all_data_val.json").read_text())
    pred = {q: {v: {"bounds": a["bounds"]} for v, a in videos.items() if a["clip"]} for q, videos in gt.items()}
    (tmp_path / "mr.json").write_text(json.dumps(pred))
    assert main(["hirest", "--task", "moment_retrieval", "--root", root, "--split", "val",
                 "--predictions", str(tmp_path / "mr.json")]) == 0
    assert json.loads(capsys.readouterr().out)["all"] == {"total_videos": 193, "R@0.5": 100.0, "R@0.7": 100.0}
    # the default split is test, whose moments are masked: refused, naming the file
    assert main(["hirest", "--task", "moment_retrieval", "--root", root,
                 "--predictions", str(tmp_path / "mr.json")]) == 2
    assert "all_data_test.json" in capsys.readouterr().err
    steps = json.loads((real_hirest_root / "data/evaluation/formatted_moment_evaluation_gt.json").read_text())
    (tmp_path / "seg.json").write_text(json.dumps({v: {"bounds": e["bounds"]} for v, e in steps.items()}))
    assert main(["hirest", "--task", "moment_segmentation", "--root", root, "--no-preprocess",
                 "--predictions", str(tmp_path / "seg.json")]) == 0
    assert json.loads(capsys.readouterr().out)["all"]["total"] == 507
    steps = json.loads((real_hirest_root / "data/val_testing/formated_moment_evaluation_gt.json").read_text())
    (tmp_path / "seg.json").write_text(json.dumps({v: {"bounds": e["bounds"]} for v, e in steps.items()}))
    assert main(["hirest", "--task", "moment_segmentation", "--root", root, "--split", "val", "--nms-order",
                 "identity", "--predictions", str(tmp_path / "seg.json")]) == 0
    # the authors' evaluate.py under numpy 2.4.6 on an AVX-512 CPU gives the same (numpy and the CPU set their NMS
    # order, which --nms-order names; the arithmetic is plain Python in their order, alike on every CPU: exact)
    assert json.loads(capsys.readouterr().out)["all"]["recall"] == {"0.5": 88.39662652162653,
                                                                    "0.7": 82.03114015614014}




def test_hirest_missing_scorer_exits_1(tmp_path, capsys, monkeypatch):
    # a scorer the captioning metrics need (Java, pycocoevalcap) is not the user's files: exit 1, its message
    from spacewalk.benchmarks.hirest import scoring
    from spacewalk.benchmarks.hirest.captioning_metrics import ScorerUnavailable

    def unavailable(*args, **kwargs):
        raise ScorerUnavailable("java is not on PATH")

    monkeypatch.setattr(scoring, "score_step_captioning", unavailable)
    paths = write_tiny_hirest(tmp_path)
    assert main(["hirest", "--task", "step_captioning", "--gt", str(paths["steps"]), "--categories",
                 str(paths["categories"]), "--predictions", str(tmp_path / "pred.json")]) == 1
    captured = capsys.readouterr()
    assert captured.err == "error: java is not on PATH\n" and captured.out == ""


def test_each_benchmark_has_its_own_arguments(tiny_root, capsys):
    # a subcommand accepts its benchmark's options only: another benchmark's is an argument error (exit 2)
    with pytest.raises(SystemExit) as info:
        main(["spacewalk18", "--root", str(tiny_root), "--predictions", "x.json", "--gt", "gt.json"])
    assert info.value.code == 2 and "--gt" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in ("spacewalk18", "hirest", "egoschema", "egocross"))
