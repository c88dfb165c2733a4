"""EgoSchema and EgoCross through the multiple-choice harness: the runner with the scripted and random
backends on the synthetic sets, the official files it writes read back by the scorer, and `evaluate.py
data=egoschema|egocross` run as a user runs it."""

from __future__ import annotations

import json
import subprocess

import pytest

from spacewalk.benchmarks.egocross.closeqa import scripted_reply
from spacewalk.benchmarks.egocross.synthetic import Options as EgoCrossOptions
from spacewalk.benchmarks.egocross.synthetic import generate_egocross
from spacewalk.benchmarks.egocross.task import open_egocross
from spacewalk.benchmarks.egoschema.synthetic import Options as EgoSchemaOptions
from spacewalk.benchmarks.egoschema.synthetic import generate_egoschema
from spacewalk.benchmarks.egoschema.task import open_egoschema
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.baselines import RandomBackend, ScriptedBackend
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.score import main as score_main

from helpers.commands import run_command


def near_chance(accuracy: float, n: int, k: int) -> bool:
    p = 1 / k
    return abs(accuracy - 100 * p) <= 3 * 100 * (p * (1 - p) / n) ** 0.5


def test_egoschema_random_backend_is_near_chance_and_the_scorer_agrees(tmp_path, capsys):
    root = generate_egoschema(tmp_path / "es", EgoSchemaOptions(n_questions=150, n_answered=150, seconds=4, fps=1))
    task = open_egoschema(root=root)
    metrics = runner.run(task, RandomBackend(seed=0), tmp_path / "run", progress=False,
                         bootstrap=BootstrapOptions(n_resamples=500))
    assert metrics["total"] == 150 and near_chance(metrics["accuracy"], 150, 5)
    interval = metrics["intervals"]["accuracy"]  # over the 150 questions: about +- 1.96 * sqrt(.2 * .8 / 150)
    assert interval["estimate"] == metrics["accuracy"] and interval["unit"] == "questions" and interval["n"] == 150
    assert interval["low"] < metrics["accuracy"] < interval["high"] and 8 < interval["high"] - interval["low"] < 17
    assert score_main(["egoschema", "--root", str(root), "--predictions", str(tmp_path / "run/submission.csv")]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == metrics["accuracy"]


def test_egocross_scripted_100_random_near_chance_and_the_scorer_agrees(tmp_path, capsys):
    root = generate_egocross(tmp_path / "ec", EgoCrossOptions(per_category=8))
    task = open_egocross(root=root, answers=root / "answers.json")
    for backend, name in ((ScriptedBackend(script=scripted_reply), "scripted"), (RandomBackend(seed=1), "random")):
        metrics = runner.run(task, backend, tmp_path / name, progress=False)
        n = metrics["total"]
        assert n == 160
        assert metrics["accuracy"] == 100.0 if name == "scripted" else near_chance(metrics["accuracy"], n, 4)
        assert score_main(["egocross", "--task", "closeqa", "--data", str(root / "datasets/egocross_testbed_imgs.json"),
                           "--answers", str(root / "answers.json"), "--predictions",
                           str(tmp_path / name / "egocross_closeqa_replies.json")]) == 0
        assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(metrics))
    # bare letters are what a model ignoring the JSON instruction writes: the authors' rule reads none of them
    letters = runner.run(task, ScriptedBackend(style="letter"), tmp_path / "letters", progress=False)
    assert (letters["accuracy"], letters["unparsable"]) == (0.0, 160)


def run_evaluate(*overrides: str) -> subprocess.CompletedProcess:
    return run_command("evaluate.py", *overrides)


@pytest.mark.slow
def test_evaluate_egoschema_writes_metrics_and_both_submission_files(tmp_path):
    out = tmp_path / "run"
    run_evaluate("data=egoschema", f"data.synthetic_root={tmp_path / 'es'}", "model=mc_scripted",
                 f"hydra.run.dir={out}")
    assert json.loads((out / "metrics.json").read_text())["accuracy"] == 100.0
    submission = json.loads((out / "submission.json").read_text())
    assert len(submission) == 20 and (out / "submission.csv").read_text().startswith("q_uid,answer\n")
    assert len((out / "records.jsonl").read_text().splitlines()) == 20


@pytest.mark.slow
def test_evaluate_egocross_writes_metrics_and_the_replies(tmp_path):
    out = tmp_path / "run"
    run_evaluate("data=egocross", f"data.synthetic_root={tmp_path / 'ec'}", "model=mc_scripted_json",
                 f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["accuracy"] == 100.0 and len(metrics["per_domain"]) == 4 and len(metrics["per_category"]) == 4
    intervals = metrics["intervals"]  # every question right: every resample too
    assert (intervals["accuracy"]["low"], intervals["accuracy"]["high"]) == (100.0, 100.0)
    assert set(intervals["per_domain"]) == set(metrics["per_domain"])
    assert all(i["unit"] == "questions" and i["n"] == metrics["per_domain"][d]["total"]
               for d, i in intervals["per_domain"].items())
    assert len(json.loads((out / "egocross_closeqa_replies.json").read_text())) == 60


class FakeJudge:
    """A text backend for the judge: mark 4 when the prediction says "nearly", else 1."""

    name = "fake_judge"

    def __init__(self):
        self.prompts = []

    def answer(self, items, prompts):
        raise NotImplementedError

    def generate(self, prompts):
        self.prompts.extend(p.text for p in prompts)
        return ['{"mark": 4, "reason": "close"}' if "Predicted Answer: nearly" in p.text else '{"mark": 1}'
                for p in prompts]


def test_egocross_openqa_through_the_runner_with_a_judge(tmp_path):
    root = generate_egocross(tmp_path / "ec", EgoCrossOptions(per_category=2))
    judge = FakeJudge()
    task = open_egocross(root=root, answers=root / "answers.json", qa="openqa", judge=judge)
    items = task.items()
    answers = {q.id: q.answer.text for q in task.dataset.questions}

    def reply(item, prompt):
        assert "Options:" not in prompt.text and "'prediction' (your answer as text)" in prompt.text
        k = int(item.id) % 3
        text = [f"It is {answers[int(item.id)]}.", "nearly right", "something else"][k]
        return json.dumps({"prediction": text, "reason": "r"})

    metrics = runner.run(task, ScriptedBackend(script=reply), tmp_path / "run", progress=False,
                         bootstrap=BootstrapOptions(n_resamples=200))
    n = len(items)
    interval = metrics["intervals"]["accuracy"]
    assert interval["estimate"] == metrics["accuracy"] and interval["low"] < metrics["accuracy"] < interval["high"]
    assert set(metrics["intervals"]["per_domain"]) == set(metrics["per_domain"])
    by_kind = [sum(1 for item in items if int(item.id) % 3 == k) for k in range(3)]
    assert metrics["correct"] == by_kind[0] + by_kind[1] and metrics["total"] == n
    assert metrics["score_sources"] == {"substring": by_kind[0], "judge: mark": by_kind[1] + by_kind[2]}
    assert len(judge.prompts) == by_kind[1] + by_kind[2]  # each reply judged once, the substring ones never
    records = [json.loads(line) for line in (tmp_path / "run/records.jsonl").read_text().splitlines()]
    assert sum(r["correct"] for r in records) == metrics["correct"]
    judged = json.loads((tmp_path / "run/egocross_openqa_judgements.json").read_text())
    assert {j["source"] for j in judged.values()} == {"substring", "judge: mark"}
    # the score command without a judge: the substring rule alone, a lower bound said to be one
    assert score_main(["egocross", "--task", "openqa", "--data", str(root / "datasets/egocross_testbed_imgs.json"),
                       "--answers", str(root / "answers.json"), "--no-judge", "--predictions",
                       str(tmp_path / "run/egocross_openqa_replies.json")]) == 0
