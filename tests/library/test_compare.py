"""spacewalk.results.rescore (a run's numbers recomputed from its recorded predictions) and python -m spacewalk.compare
(paired differences of two runs or groups of seeds). The runs are written in-process by the project's own
writers (evaluate_step_recognition, the multiple-choice runner, the official prediction writers) with the config
keys the re-scoring reads, so no end-to-end command runs here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from spacewalk.results import compare
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.results.rescore import recorded_metrics, rescore_run, scored_run

from helpers.run_dir_fakes import Noisy

OPTIONS = BootstrapOptions(n_resamples=200, seed=0)


def write_config(run_dir: Path, task: str, data: dict, overrides: list[str] = (), **top) -> Path:
    """The resolved config re-scoring reads; with `overrides`, Hydra's record too (the model as a config group's
    choice, which the selection language reads)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.resolved.yaml").write_text(yaml.safe_dump({"task": {"name": task}, "data": data, **top}))
    if overrides:
        (run_dir / ".hydra").mkdir(exist_ok=True)
        (run_dir / ".hydra/overrides.yaml").write_text(yaml.safe_dump(list(overrides)))
        choices = {k: v for k, v in (o.split("=", 1) for o in overrides) if k == "model"}
        (run_dir / ".hydra/hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"name": "evaluate"},
                                                                             "runtime": {"choices": choices}}}))
    return run_dir


@pytest.fixture(scope="module")
def step_runs(synthetic_spacewalk18, tmp_path_factory):
    """Step-recognition runs on the synthetic test split: a weak and a strong model, three seeds each."""
    from spacewalk.benchmarks.spacewalk18.evaluation import evaluate_step_recognition
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18

    root = synthetic_spacewalk18()
    data = {"_target_": "spacewalk.benchmarks.spacewalk18.open.open_spacewalk18", "root": str(root),
            "synthetic_root": None, "seed": 0, "synthetic": {}}
    dataset = open_spacewalk18(root)
    base = tmp_path_factory.mktemp("step_runs")
    runs = {}
    for name, skill in (("weak", 0.5), ("strong", 1.5)):
        for seed in range(3):
            run = write_config(base / "sweep" / f"{name}{seed}", "step_recognition", data,
                               [f"model={name}", f"seed={seed}"], split="test", seed=seed)
            evaluate_step_recognition(dataset, Noisy(skill, seed), "test", run, plots=False, bootstrap=OPTIONS)
            runs[name, seed] = run
    return base / "sweep", runs


def test_rescore_reproduces_step_recognition_metrics(step_runs):
    _, runs = step_runs
    rescored = rescore_run(runs["weak", 0])
    assert set(rescored) == {"Accuracy", "mAP", "IoU"}
    assert rescored == recorded_metrics(runs["weak", 0])
    recorded = json.loads((runs["weak", 0] / "metrics.json").read_text())
    assert rescored["Accuracy"] == recorded["Accuracy"]


def test_rescore_notices_changed_predictions(step_runs, tmp_path):
    import shutil

    _, runs = step_runs
    run = tmp_path / "run"
    shutil.copytree(runs["weak", 0], run)
    predictions = json.loads((run / "predictions.json").read_text())
    video = next(iter(predictions))
    for entry in predictions[video]:
        entry["prediction"] = 0
    (run / "predictions.json").write_text(json.dumps(predictions))
    assert rescore_run(run)["Accuracy"] != recorded_metrics(run)["Accuracy"]


def test_a_run_against_itself_differs_by_nothing(step_runs):
    _, runs = step_runs
    run = scored_run(runs["weak", 0])
    differences, notes = compare.compare([run], [run], OPTIONS)
    assert [d.name for d in differences] == ["Accuracy", "mAP", "IoU"] and notes == []
    for d in differences:
        assert d.difference == 0
        recordings = d.claims[compare.NEW_RECORDINGS]
        assert recordings.low == recordings.high == 0 and recordings.p is None  # 2 recordings: no p to give
        if d.name != "IoU":  # IoU's recording samples are not drawn again: no such claim
            samples = d.claims[compare.THESE_RECORDINGS]
            assert samples.low == samples.high == 0 and samples.p == 1.0
    assert compare.THESE_RECORDINGS not in differences[2].claims


def test_a_better_model_is_found_better_on_these_recordings_but_two_recordings_give_no_p(step_runs):
    _, runs = step_runs
    weak, strong = scored_run(runs["weak", 0]), scored_run(runs["strong", 0])
    differences = {d.name: d for d in compare.compare([weak], [strong], OPTIONS)[0]}
    accuracy = differences["Accuracy"]
    assert accuracy.difference == pytest.approx(strong.metrics["Accuracy"].value - weak.metrics["Accuracy"].value)
    samples = accuracy.claims[compare.THESE_RECORDINGS]
    assert accuracy.difference > 5 and samples.low > 0 and samples.p < 0.05
    assert samples.low <= accuracy.difference <= samples.high and samples.n == sum(weak.metrics["Accuracy"].sizes)
    recordings = accuracy.claims[compare.NEW_RECORDINGS]
    assert accuracy.n == recordings.n == 2 and recordings.p is None and "2 recordings cannot give p < 0.05" in \
        recordings.note
    assert compare.RECIPES not in accuracy.claims  # one run a side: no claim about recipes
    # the same runs unpaired (side B resampled on other draws) spread wider than the paired differences
    import dataclasses

    from spacewalk.results.bootstrap import grouped_draws, grouped_replicates

    metric_a, metric_b = weak.metrics["Accuracy"], strong.metrics["Accuracy"]
    draws = grouped_draws(metric_b.sizes, OPTIONS, between=False)
    paired = compare._side_replicates([strong], "Accuracy", draws) - \
        compare._side_replicates([weak], "Accuracy", draws)
    other = grouped_draws(metric_b.sizes, dataclasses.replace(OPTIONS, seed=1), between=False)
    unpaired = grouped_replicates(range(2), metric_b.resampled, other) - \
        compare._side_replicates([weak], "Accuracy", grouped_draws(metric_a.sizes, OPTIONS, between=False))
    assert np.std(paired) < np.std(unpaired)


def test_groups_of_seeds_compare_their_means_and_answer_for_the_recipes(step_runs):
    _, runs = step_runs
    weak = [scored_run(runs["weak", s]) for s in range(3)]
    strong = [scored_run(runs["strong", s]) for s in range(3)]
    accuracy = compare.compare(weak, strong, OPTIONS)[0][0]
    assert accuracy.a == pytest.approx(np.mean([r.metrics["Accuracy"].value for r in weak]))
    assert accuracy.b == pytest.approx(np.mean([r.metrics["Accuracy"].value for r in strong]))
    recipes = accuracy.claims[compare.RECIPES]
    assert recipes.low <= accuracy.difference <= recipes.high and "3 and 3 seeds" in recipes.method
    assert recipes.p is None and "2 recordings cannot give" in recipes.note


def test_six_recordings_give_the_exact_sign_flip_p(synthetic_spacewalk18, tmp_path):
    """A model better on every one of 6 recordings: the exact two-sided p is 2 / 2^6 = 1/32, never less, and two
    models of the same skill get more."""
    from spacewalk.benchmarks.spacewalk18.evaluation import evaluate_step_recognition
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18

    root = synthetic_spacewalk18(n_train=1, n_val=1, n_test=6, minutes=(4, 5), steps_per_video=(3, 5),
                                 samples_per_video=120, retrieval_samples_per_video=20, questions_per_video=2)
    data = {"_target_": "spacewalk.benchmarks.spacewalk18.open.open_spacewalk18", "root": str(root),
            "synthetic_root": None, "seed": 0, "synthetic": {}}
    dataset = open_spacewalk18(root)
    scored = {}
    for name, skill, seed in (("weak", 0.2, 0), ("strong", 3.0, 1), ("same", 0.2, 2)):
        run = write_config(tmp_path / name, "step_recognition", data, split="test", seed=seed)
        evaluate_step_recognition(dataset, Noisy(skill, seed), "test", run, plots=False, bootstrap=OPTIONS)
        scored[name] = scored_run(run)
    accuracy = compare.compare([scored["weak"]], [scored["strong"]], OPTIONS)[0][0]
    recordings = accuracy.claims[compare.NEW_RECORDINGS]
    assert recordings.n == 6 and recordings.p == pytest.approx(1 / 32) and recordings.low > 0
    assert recordings.detectable is not None and recordings.note is None
    noise = compare.compare([scored["weak"]], [scored["same"]], OPTIONS)[0][0].claims[compare.NEW_RECORDINGS]
    assert noise.p > 1 / 32 and noise.low < 0 < noise.high


def test_the_command_on_a_sweep_with_filters_prints_and_writes_json(step_runs, tmp_path, capsys):
    sweep, _ = step_runs
    out = tmp_path / "cmp.json"
    assert compare.main(["--a", str(sweep), "--a-where", "model=weak", "--b", str(sweep), "--b-where",
                         "model=strong", "--resamples", "200", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "A: 3 runs (weak seed 0; weak seed 1; weak seed 2)" in printed
    assert "these runs, these recordings: would the difference stay on other samples" in printed
    assert "recipes: is recipe B better than recipe A" in printed and "95% CI" in printed
    assert "2 recordings cannot give p < 0.05" in printed and "This split detects" in printed
    result = json.loads(out.read_text())
    assert len(result["a"]) == len(result["b"]) == 3
    assert set(result["differences"]) == {"Accuracy", "mAP", "IoU"}
    claims = result["differences"]["Accuracy"]["claims"]
    assert set(claims) == {compare.THESE_RECORDINGS, compare.NEW_RECORDINGS, compare.RECIPES}
    assert 0 < claims[compare.THESE_RECORDINGS]["p"] <= 1 and claims[compare.NEW_RECORDINGS]["p"] is None


def test_runs_on_another_split_are_refused_naming_it(step_runs, synthetic_spacewalk18, tmp_path, capsys):
    from spacewalk.benchmarks.spacewalk18.evaluation import evaluate_step_recognition
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18

    _, runs = step_runs
    root = synthetic_spacewalk18()
    data = {"_target_": "spacewalk.benchmarks.spacewalk18.open.open_spacewalk18", "root": str(root),
            "synthetic_root": None, "seed": 0, "synthetic": {}}
    val_run = write_config(tmp_path / "val", "step_recognition", data, split="val")
    evaluate_step_recognition(open_spacewalk18(root), Noisy(1.0, 0), "val", val_run, plots=False)
    with pytest.raises(SystemExit) as exit_:
        compare.main([str(runs["weak", 0]), str(val_run)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "differ in split" in err and "test in A" in err and "val in B" in err


def test_runs_of_other_tasks_are_refused(step_runs, synthetic_egoschema_root, tmp_path, capsys):
    _, runs = step_runs
    egoschema = egoschema_run(synthetic_egoschema_root, tmp_path / "es", seed=0)
    with pytest.raises(SystemExit) as exit_:
        compare.main([str(runs["weak", 0]), str(egoschema)])
    assert exit_.value.code == 2
    assert "differ in task" in capsys.readouterr().err


def test_a_folder_without_runs_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        compare.main([str(tmp_path), str(tmp_path)])
    assert exit_.value.code == 2
    assert "config.resolved.yaml" in capsys.readouterr().err


# ---- the other tasks ---------------------------------------------------------------------------------------------

def mc_run(task, data: dict, run_dir: Path, seed: int) -> Path:
    from spacewalk.multiple_choice import runner
    from spacewalk.multiple_choice.backends.baselines import RandomBackend

    write_config(run_dir, "multiple_choice", data)
    runner.run(task, RandomBackend(seed=seed), run_dir, progress=False, bootstrap=OPTIONS)
    return run_dir


def egoschema_run(root: Path, run_dir: Path, seed: int) -> Path:
    from spacewalk.benchmarks.egoschema.task import open_egoschema

    data = {"_target_": "spacewalk.benchmarks.egoschema.task.open_egoschema", "root": str(root), "split": "subset",
            "check_videos": False}
    return mc_run(open_egoschema(root, split="subset", check_videos=False), data, run_dir, seed)


def test_rescore_reproduces_egoschema_and_compares_two_seeds(synthetic_egoschema_root, tmp_path):
    a = egoschema_run(synthetic_egoschema_root, tmp_path / "a", seed=0)
    b = egoschema_run(synthetic_egoschema_root, tmp_path / "b", seed=1)
    assert rescore_run(a) == recorded_metrics(a) == {"accuracy": json.loads((a / "metrics.json").read_text())[
        "accuracy"]}
    (d,) = compare.compare([scored_run(a)], [scored_run(b)], OPTIONS)[0]
    assert d.unit == "questions" and d.n == 20  # the answered questions
    questions = d.claims[compare.NEW_UNITS]  # the flat bootstrap: other questions like these
    assert set(d.claims) == {compare.NEW_UNITS} and questions.low <= d.difference <= questions.high


def test_rescore_reproduces_egocross_closeqa_per_domain(synthetic_egocross_root, tmp_path):
    from spacewalk.benchmarks.egocross.task import open_egocross

    data = {"_target_": "spacewalk.benchmarks.egocross.task.open_egocross", "root": None,
            "synthetic_root": str(synthetic_egocross_root), "seed": 0, "synthetic": {"per_category": 3},
            "qa": "closeqa", "check_frames": False}
    task = open_egocross(None, synthetic_egocross_root, synthetic={"per_category": 3}, check_frames=False)
    run = mc_run(task, data, tmp_path / "ec", seed=0)
    rescored = rescore_run(run)
    assert any(name.startswith("per_domain/") for name in rescored)
    assert rescored == recorded_metrics(run)


def test_rescore_reproduces_spacewalk18_qa_per_type(synthetic_spacewalk18, tmp_path):
    from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task

    root = synthetic_spacewalk18()
    data = {"_target_": "spacewalk.benchmarks.spacewalk18.questions.question_answering.question_answering_task",
            "root": str(root)}
    run = mc_run(question_answering_task(root), data, tmp_path / "qa", seed=0)
    rescored = rescore_run(run)
    assert "Accuracy" in rescored and any(name.startswith("per_type/") for name in rescored)
    assert rescored == recorded_metrics(run)


def test_rescore_reproduces_intra_video_retrieval(synthetic_spacewalk18, tmp_path):
    from spacewalk.benchmarks.spacewalk18.data.retrieval_sampler import recording_retrieval_samples
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
    from spacewalk.benchmarks.spacewalk18.scoring.official import retrieval_accuracy
    from spacewalk.benchmarks.spacewalk18.scoring.predictions import write_retrieval_predictions
    from spacewalk.core.io import write_json

    root = synthetic_spacewalk18()
    dataset = open_spacewalk18(root)
    samples = {}
    for rec in dataset.split("test"):
        try:
            samples[rec.video_id] = recording_retrieval_samples(rec)
        except ValueError:
            pass
    rng = np.random.default_rng(0)
    predictions = {v: rng.integers(0, 2, len(s)) for v, s in samples.items()}
    run = write_config(tmp_path / "ivr", "intra_video_retrieval",
                       {"_target_": "spacewalk.benchmarks.spacewalk18.open.open_spacewalk18", "root": str(root)})
    write_retrieval_predictions(run / "predictions.json", predictions)
    write_json(run / "metrics.json", {"split": "test", **retrieval_accuracy(predictions, samples),
                                      "sample_sources": {"test": "generated"}})
    assert rescore_run(run) == recorded_metrics(run)
    assert scored_run(run).metrics["Accuracy"].between is False  # every recording kept


def test_rescore_reproduces_hirest_segmentation(synthetic_hirest, tmp_path):
    from spacewalk.benchmarks.hirest.dataset import MOMENT_GT_FILES
    from spacewalk.benchmarks.hirest.evaluation import score
    from spacewalk.benchmarks.hirest.open import open_hirest
    from spacewalk.benchmarks.hirest.predictions import write_task_predictions
    from spacewalk.benchmarks.hirest.synthetic.options import HiRESTOptions
    from spacewalk.core.io import load_json, write_json

    root = synthetic_hirest(HiRESTOptions())
    dataset = open_hirest(root)
    gt = load_json(dataset.path(MOMENT_GT_FILES["val"]))
    # each video's steps, every other boundary dropped: some right, some wrong
    predictions = {v: {"bounds": entry["bounds"][::2]} for v, entry in gt.items()}
    run = write_config(tmp_path / "hirest", "hirest", {"_target_": "spacewalk.benchmarks.hirest.open.open_hirest",
                                                       "root": str(root)})
    path = write_task_predictions(run, "moment_segmentation", predictions)
    write_json(run / "metrics.json", {"split": "val", "moment_segmentation": score(dataset, "moment_segmentation",
                                                                                     "val", path)})
    rescored = rescore_run(run)
    assert "val/moment_segmentation/recall/0.5" in rescored
    assert rescored == recorded_metrics(run)
    (d, *_), _ = compare.compare([scored_run(run)], [scored_run(run)], OPTIONS)
    assert d.difference == 0 and d.claims[compare.NEW_UNITS].p == 1.0


def test_rescore_reproduces_hirest_moment_retrieval(synthetic_hirest, tmp_path):
    from spacewalk.benchmarks.hirest import scoring
    from spacewalk.benchmarks.hirest.evaluation import gt_file, score
    from spacewalk.benchmarks.hirest.open import open_hirest
    from spacewalk.benchmarks.hirest.predictions import write_task_predictions
    from spacewalk.benchmarks.hirest.synthetic.options import HiRESTOptions
    from spacewalk.core.io import write_json

    root = synthetic_hirest(HiRESTOptions())
    dataset = open_hirest(root)
    split, _ = scoring.read_split_annotations(gt_file(dataset, "moment_retrieval", "val"))
    # every other clippable pair found exactly, the others by a quarter of the moment (IoU 0.25: a miss)
    predictions, n = {}, 0
    for query, videos in split.items():
        for video, annotation in videos.items():
            if annotation["clip"]:
                start, end = annotation["bounds"]
                end = end if n % 2 == 0 else start + (end - start) / 4
                predictions.setdefault(query, {})[video] = {"bounds": [start, end]}
                n += 1
    run = write_config(tmp_path / "hirest", "hirest", {"_target_": "spacewalk.benchmarks.hirest.open.open_hirest",
                                                       "root": str(root)})
    path = write_task_predictions(run, "moment_retrieval", predictions)
    write_json(run / "metrics.json", {"split": "val", "moment_retrieval": score(dataset, "moment_retrieval", "val",
                                                                                  path)})
    rescored = rescore_run(run)
    assert set(rescored) == {"val/moment_retrieval/R@0.5", "val/moment_retrieval/R@0.7"}
    assert rescored == recorded_metrics(run) and 0 < rescored["val/moment_retrieval/R@0.5"] < 100


def test_rescore_reproduces_step_questions(synthetic_spacewalk18, tmp_path):
    from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import step_recognition_questions_task

    root = synthetic_spacewalk18()
    data = {"_target_": "spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions."
                           "step_recognition_questions_task",
            "root": str(root), "split": "test", "context": 300.0, "samples_per_video": 15}
    run = mc_run(step_recognition_questions_task(root, split="test", context=300.0, samples_per_video=15), data,
                 tmp_path / "sq", seed=0)
    run_scored = scored_run(run)
    assert run_scored.task == "spacewalk18 step_recognition" and run_scored.identity["items_summary"].endswith(
        "30 samples")
    assert rescore_run(run) == recorded_metrics(run)
    assert run_scored.metrics["Accuracy"].between and run_scored.metrics["Accuracy"].within


def test_decoded_predictions_compare_with_their_run(step_runs, tmp_path):
    import shutil

    _, runs = step_runs
    run = tmp_path / "run"
    shutil.copytree(runs["weak", 0], run)
    decoded = run / "decoded" / "smooth"
    decoded.mkdir(parents=True)
    shutil.copy(runs["strong", 0] / "predictions.json", decoded / "predictions.json")  # stands for decoded ones
    shutil.copy(runs["strong", 0] / "metrics.json", decoded / "metrics.json")
    assert rescore_run(decoded) == recorded_metrics(decoded) != recorded_metrics(run)
    raw, smooth = scored_run(run), scored_run(decoded)
    assert smooth.label == "weak seed 0 decoded smooth"
    accuracy = compare.compare([raw], [smooth], OPTIONS)[0][0]
    assert accuracy.difference == pytest.approx(smooth.metrics["Accuracy"].value - raw.metrics["Accuracy"].value)
    assert not compare.paired_by_run([raw], [smooth])  # one run a side: nothing to pair by seed


def test_rescore_reproduces_egocross_openqa_from_its_recorded_judgements(synthetic_egocross_root, tmp_path):
    from spacewalk.benchmarks.egocross.task import open_egocross

    data = {"_target_": "spacewalk.benchmarks.egocross.task.open_egocross", "root": None,
            "synthetic_root": str(synthetic_egocross_root), "seed": 0, "synthetic": {"per_category": 3},
            "qa": "openqa", "check_frames": False, "judge": {"_target_": "not.imported.Judge"}}
    task = open_egocross(None, synthetic_egocross_root, synthetic={"per_category": 3}, qa="openqa",
                         check_frames=False)
    run = mc_run(task, data, tmp_path / "openqa", seed=0)
    run_scored = scored_run(run)
    assert run_scored.identity["qa"] == "openqa" and run_scored.identity["judge"] == "none"
    assert rescore_run(run) == recorded_metrics(run)


def test_the_centred_p_value_by_hand():
    # d = 1; the resampled differences centred at d exceed |d| = 1 in two of four: p = (1 + 2) / (1 + 4)
    assert compare.centred_p_value(np.array([1.0, 2.5, -0.5, 1.2]), 1.0) == pytest.approx(3 / 5)
    assert compare.centred_p_value(np.zeros(9), 0.0) == 1.0


def test_a_retest_is_read_with_its_trained_runs_config(tmp_path):
    # evaluate.py ckpt_path=<run>/checkpoints/X.ckpt (a decoding) writes no resolved config of its own: its trained
    # run's is the one it ran with, for the re-test and for the predictions it decoded
    from spacewalk.core.errors import DataError
    from spacewalk.results.layout import RUN_CONFIG
    from spacewalk.results.rescore import find_config

    trained = tmp_path / "trained"
    (trained / "checkpoints").mkdir(parents=True)
    (trained / RUN_CONFIG).write_text("data: {_target_: x}\n")
    retest = tmp_path / "retest"
    (retest / ".hydra").mkdir(parents=True)
    (retest / ".hydra" / "overrides.yaml").write_text(
        f"- ckpt_path={trained / 'checkpoints' / 'epoch03.ckpt'}\n- decoding=within_window\n")
    (retest / "decoded" / "within_window").mkdir(parents=True)
    assert find_config(retest) == find_config(retest / "decoded" / "within_window") == trained / RUN_CONFIG
    (trained / RUN_CONFIG).unlink()  # its trained run gone: not a run that can be re-scored, said so
    with pytest.raises(DataError, match="no config.resolved.yaml"):
        find_config(retest)


def test_power_names_the_smallest_difference_each_claim_detects(step_runs, synthetic_spacewalk18, tmp_path, capsys):
    """python -m spacewalk.power: none over 2 recordings; over 6, the sign-flip test's own figure from the pairs'
    per-recording spread; on these recordings, from the paired bootstrap's standard error."""
    from spacewalk.benchmarks.spacewalk18.evaluation import evaluate_step_recognition
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
    from spacewalk.results import power
    from spacewalk.results.statistics import detectable_over_recordings

    _, runs = step_runs
    two = power.detectable([scored_run(runs["weak", s]) for s in range(3)], OPTIONS)
    by_claim = {(d.metric, d.claim): d for d in two}
    assert by_claim["Accuracy", compare.NEW_RECORDINGS].smallest is None
    assert "2 recordings cannot give p < 0.05" in by_claim["Accuracy", compare.NEW_RECORDINGS].note
    assert by_claim["Accuracy", compare.THESE_RECORDINGS].smallest > 0
    assert ("IoU", compare.THESE_RECORDINGS) not in by_claim  # IoU's samples are not drawn again

    root = synthetic_spacewalk18(n_train=1, n_val=1, n_test=6, minutes=(4, 5), steps_per_video=(3, 5),
                                 samples_per_video=120, retrieval_samples_per_video=20, questions_per_video=2)
    data = {"_target_": "spacewalk.benchmarks.spacewalk18.open.open_spacewalk18", "root": str(root),
            "synthetic_root": None, "seed": 0, "synthetic": {}}
    dataset = open_spacewalk18(root)
    paths = []
    for seed in range(2):
        run = write_config(tmp_path / f"r{seed}", "step_recognition", data, split="test", seed=seed)
        evaluate_step_recognition(dataset, Noisy(1.0, seed), "test", run, plots=False, bootstrap=OPTIONS)
        paths.append(run)
    scored = [scored_run(p) for p in paths]
    six = {(d.metric, d.claim): d for d in power.detectable(scored, OPTIONS)}
    accuracy = six["Accuracy", compare.NEW_RECORDINGS]
    values = compare._values(scored, "Accuracy")
    assert accuracy.n == 6 and accuracy.sd == pytest.approx(np.std(values[1] - values[0], ddof=1))
    assert accuracy.smallest == pytest.approx(detectable_over_recordings(accuracy.sd, 6))
    assert power.main([str(p) for p in paths]) == 0
    printed = capsys.readouterr().out
    assert "1 pair gives the spread of a paired difference" in printed and "6 recordings" in printed
    assert f">= {accuracy.smallest:.2f} points" in printed
