"""The multiple-choice harness: parsing of awkward replies, the runner (records, resume after a crash, several
processes, refusing a foreign run directory), the Spacewalk-18 QA and step-question tasks with their official
files, the scripted (100 %), random (chance) and contrastive text backends."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import hydra
import numpy as np
import pytest
from omegaconf import OmegaConf

from spacewalk import score
from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
from spacewalk.benchmarks.spacewalk18.questions.question_answering import QuestionAnswering
from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import StepRecognitionQuestions
from spacewalk.benchmarks.spacewalk18.scoring.official import step_recognition_metrics
from spacewalk.benchmarks.spacewalk18.scoring.predictions import read_step_predictions
from spacewalk.core.errors import DataError
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.baselines import RandomBackend, ScriptedBackend
from spacewalk.multiple_choice.backends.contrastive import ContrastiveTextBackend, option_queries, split_sentences
from spacewalk.multiple_choice.items import MultipleChoiceItem
from spacewalk.multiple_choice.parsing import parse_letter, parse_number
from spacewalk.multiple_choice.task import Backend, MultipleChoiceTask, Prompt, Reply
from spacewalk.results.layout import METRICS_VERSION

from helpers.commands import REPO, compose_evaluate
from helpers.fakes import FakeText
from helpers.synthetic_presets import QA_HARNESS

OPTIONS = ("open the hatch", "install the battery", "take a photo", "stow the bag")


@pytest.mark.parametrize("reply, expected", [
    ("B", 1), ("b", 1), ("(B)", 1), ("B.", 1), (" [c] ", 2), ("Answer: C", 2), ("The answer is (D).", 3),
    ("```\nA\n```", 0), ("**B**", 1), ("B) install the battery", 1), ("D. Because it happens last.", 3),
    ("I think (C) fits best.", 2), ("install the battery.", 1), ("Install The Battery", 1),
    ("E", None), ("(F)", None), ("", None), ("   ", None), ("a or b", None), ("I cannot tell.", None),
    ("A and then (B) and (C)", None),  # "A" has no separator after it; two distinct bracketed letters
])
def test_parse_letter(reply, expected):
    assert parse_letter(reply, OPTIONS) == expected


@pytest.mark.parametrize("reply, expected", [
    ("3", 3), ("3.", 3), ("(3)", 3), ("Answer: 3.", 3), ("answer is 4", 4), ("The answer is step 2.", 2),
    ("```\n5\n```", 5), ("(4) Install the battery: ...", 4), ("It is step 6", 6), ("0", 0),
    ("12", None), ("Answer: 11", None), ("", None), ("Step 3 or step 4", None), ("no idea", None),
    ("3.5", None),
])
def test_parse_number(reply, expected):
    assert parse_number(reply, 10) == expected


# ---- a generic task for runner tests ----


class ToyTask:
    name = "toy"

    def __init__(self, n: int = 40, options: int = 4):
        rng = np.random.default_rng(0)
        self._items = [MultipleChoiceItem(id=f"q{i}", question=f"question {i}?",
                                          options=tuple(f"option {j}" for j in range(options)),
                                          answer=int(rng.integers(options)), transcript=f"words {i}.")
                       for i in range(n)]

    def items(self):
        return self._items

    def prompt(self, item):
        return Prompt((Prompt.VISUAL, item.question, *[f"({chr(65 + j)}) {o}" for j, o in enumerate(item.options)]))

    def parse(self, item, reply):
        return parse_letter(reply, item.options)

    def metrics(self, items, records):
        correct = [r.correct for r in records]
        return {"Accuracy": 100 * float(np.mean(correct)), "count": len(records),
                "unparsable": sum(r.choice is None for r in records)}

    def write_outputs(self, items, records, out_dir):
        (Path(out_dir) / "choices.json").write_text(json.dumps([r.choice for r in records]))


class Crashing:
    """Scripted replies that raise after `after` items, as a run killed mid-way."""

    name = "scripted"

    def __init__(self, after: int):
        self.inner, self.after, self.seen = ScriptedBackend("letter"), after, 0

    def answer(self, items, prompts):
        if self.seen + len(items) > self.after:
            raise KeyboardInterrupt("killed")
        self.seen += len(items)
        return self.inner.answer(items, prompts)

    def generate(self, prompts):
        raise NotImplementedError


class Mixed:
    """Odd items get an unparsable reply, the rest the right letter."""

    name = "mixed"

    def answer(self, items, prompts):
        return [Reply(text="no idea" if int(i.id[1:]) % 2 else chr(65 + i.answer)) for i in items]

    def generate(self, prompts):
        raise NotImplementedError


def test_protocols_hold():
    assert isinstance(ToyTask(), MultipleChoiceTask)
    for backend in (ScriptedBackend(), RandomBackend(), Crashing(1), Mixed()):
        assert isinstance(backend, Backend)


def test_runner_writes_records_and_counts_unparsable_as_wrong(tmp_path):
    metrics = runner.run(ToyTask(10), Mixed(), tmp_path, chunk_size=3, progress=False)
    assert metrics == {"Accuracy": 50.0, "count": 10, "unparsable": 5}
    records = runner.read_records(tmp_path / runner.RECORDS)
    assert [r.item_id for r in records] == [f"q{i}" for i in range(10)]
    assert records[1].choice is None and records[1].correct is False and records[1].reply == "no idea"
    assert records[1].prompt == "" and len(records[1].prompt_parts) == 6  # compact: the parts by id
    audited = runner.read_run(tmp_path)
    assert audited[1].prompt.startswith(Prompt.VISUAL + "\nquestion 1?\n(A) ")
    assert json.loads((tmp_path / runner.METRICS).read_text()) == {"version": METRICS_VERSION, **metrics}
    assert json.loads((tmp_path / "choices.json").read_text())[:2] == [records[0].choice, None]


def test_a_run_killed_midway_resumes_to_the_same_metrics(tmp_path):
    whole = runner.run(ToyTask(), Mixed(), tmp_path / "whole", progress=False)
    # the same with scripted replies, killed after 16 items, with a cut-off line left by the kill
    task = ToyTask()
    reference = runner.run(task, ScriptedBackend("letter"), tmp_path / "ref", progress=False)
    run_dir = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        runner.run(task, Crashing(after=16), run_dir, chunk_size=8, progress=False)
    assert len(runner.read_records(run_dir / runner.RECORDS)) == 16
    with open(run_dir / runner.RECORDS, "a") as f:
        f.write('{"item_id": "q16", "prompt": "cut off')
    calls = []

    class Counting(ScriptedBackend):
        def answer(self, items, prompts):
            calls.extend(i.id for i in items)
            return super().answer(items, prompts)

    resumed = runner.run(task, Counting("letter"), run_dir, chunk_size=8, progress=False)
    assert calls == [f"q{i}" for i in range(16, 40)]  # only what was not recorded
    assert resumed == reference and resumed["Accuracy"] == 100.0 and whole["Accuracy"] == 50.0
    assert (run_dir / runner.RECORDS).read_text() == (tmp_path / "ref" / runner.RECORDS).read_text()


def test_a_second_record_for_an_item_is_refused_not_scored_once(tmp_path):
    # one copy would win silently (and the other could be a different answer): name the file, item and line
    run_dir = tmp_path / "run"
    runner.run(ToyTask(), ScriptedBackend("letter"), run_dir, progress=False)
    lines = (run_dir / runner.RECORDS).read_text().splitlines(keepends=True)
    (run_dir / runner.RECORDS).write_text("".join(lines + [lines[3]]))
    with pytest.raises(DataError, match=f"line {len(lines) + 1}: a second record.*first is on line 4") as e:
        runner.read_records(run_dir / runner.RECORDS)
    assert (e.value.file, e.value.item, e.value.field) == (run_dir / runner.RECORDS, "q3", "item_id")
    with pytest.raises(DataError, match="a second record"):
        runner.run(ToyTask(), ScriptedBackend("letter"), run_dir, progress=False)


@pytest.mark.parametrize("field,value", [("choice", "2"), ("choice", 1.0), ("choice", True), ("correct", 1),
                                         ("reply", None)])
def test_a_record_field_of_the_wrong_type_is_refused(tmp_path, field, value):
    run_dir = tmp_path / "run"
    runner.run(ToyTask(), ScriptedBackend("letter"), run_dir, progress=False)
    lines = (run_dir / runner.RECORDS).read_text().splitlines(keepends=True)
    record = json.loads(lines[2])
    record[field] = value
    lines[2] = json.dumps(record) + "\n"
    (run_dir / runner.RECORDS).write_text("".join(lines))
    with pytest.raises(DataError, match="line 3: expected") as e:
        runner.read_records(run_dir / runner.RECORDS)
    assert (e.value.file, e.value.item, e.value.field) == (run_dir / runner.RECORDS, "q2", field)


def test_several_processes_split_the_items_and_rank0_merges(tmp_path):
    task = ToyTask(25)
    single = runner.run(task, RandomBackend(seed=3), tmp_path / "one", progress=False)
    run_dir = tmp_path / "two"
    assert runner.run(task, RandomBackend(seed=3), run_dir, rank=1, world_size=2, progress=False) is None
    shard = runner.read_records(run_dir / runner.shard_name(1))
    assert [r.item_id for r in shard] == [f"q{i}" for i in range(1, 25, 2)]
    merged = runner.run(task, RandomBackend(seed=3), run_dir, rank=0, world_size=2, progress=False, wait_seconds=5)
    assert merged == single
    assert (run_dir / runner.RECORDS).read_text() == (tmp_path / "one" / runner.RECORDS).read_text()
    assert not list(run_dir.glob("records.rank*")) and not list(run_dir.glob("prompt_parts.rank*"))
    assert (run_dir / "prompt_parts.jsonl").read_text() == (tmp_path / "one" / "prompt_parts.jsonl").read_text()


def test_records_keep_each_distinct_prompt_part_once_and_read_back_whole(tmp_path, capsys):
    from spacewalk.multiple_choice import records as store

    task = ToyTask(12)  # every prompt: the visual marker, its question, then the same four option lines
    full = runner.run(task, ScriptedBackend("letter"), tmp_path / "full", progress=False, prompts="full")
    compact = runner.run(task, ScriptedBackend("letter"), tmp_path / "parts", chunk_size=5, progress=False)
    assert compact == full and not (tmp_path / "full" / store.PARTS).exists()
    parts = [json.loads(line) for line in (tmp_path / "parts" / store.PARTS).read_text().splitlines()]
    assert len(parts) == 1 + 12 + 4 and len({p["id"] for p in parts}) == len(parts)
    assert [r.prompt for r in runner.read_run(tmp_path / "parts")] == \
        [r.prompt for r in runner.read_records(tmp_path / "full" / runner.RECORDS)]
    store.main([str(tmp_path / "parts"), "q3"])
    out = capsys.readouterr().out
    answer = task.items()[3].answer
    assert out.startswith(f"=== q3: choice {answer}, correct True\n<visual>\nquestion 3?\n(A) option 0\n")
    assert f"--- reply\n{chr(65 + answer)}\n" in out
    # a part cut off by a kill is dropped, and so is every record after it (never written): a re-run asks again
    run_dir = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        runner.run(task, Crashing(after=8), run_dir, chunk_size=4, progress=False)
    with open(run_dir / store.PARTS, "a") as f:
        f.write('{"id": "0123", "text": "cut')
    assert runner.run(task, ScriptedBackend("letter"), run_dir, chunk_size=4, progress=False) == full
    assert (run_dir / store.PARTS).read_text() == (tmp_path / "parts" / store.PARTS).read_text()
    # a run resumed with the other setting holds both forms; each record reads back whole
    mixed_dir = tmp_path / "mixed"
    with pytest.raises(KeyboardInterrupt):
        runner.run(task, Crashing(after=4), mixed_dir, chunk_size=4, progress=False, prompts="full")
    runner.run(task, ScriptedBackend("letter"), mixed_dir, progress=False)
    assert [r.prompt for r in runner.read_run(mixed_dir)] == [r.prompt for r in runner.read_run(tmp_path / "parts")]
    with pytest.raises(ValueError, match="prompts must be one of"):
        runner.run(task, ScriptedBackend("letter"), tmp_path / "bad", progress=False, prompts="none")


def test_rank0_reports_missing_records_of_a_stopped_rank(tmp_path):
    with pytest.raises(RuntimeError, match="have no record"):
        runner.run(ToyTask(6), ScriptedBackend(), tmp_path, rank=0, world_size=2, progress=False,
                   wait_seconds=0.2, poll_seconds=0.05)


_RANK_VARIABLES = ("WORLD_SIZE", "RANK", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_STEP_ID")


@pytest.mark.parametrize("env, missing", [
    ({"SLURM_NTASKS": "2"}, "SLURM_STEP_ID and SLURM_PROCID"),  # an sbatch script's leftovers, no srun
    ({"SLURM_NTASKS": "2", "SLURM_PROCID": "0"}, "SLURM_STEP_ID"),
])
def test_slurm_leftovers_without_srun_are_refused_instead_of_waiting(monkeypatch, env, missing):
    for name in _RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=f"SLURM_NTASKS=2 but {missing} not set.*srun"):
        runner.rank_and_world()


@pytest.mark.parametrize("env, expected", [
    ({"SLURM_NTASKS": "2", "SLURM_PROCID": "1", "SLURM_STEP_ID": "0"}, (1, 2)),  # started by srun
    ({"SLURM_NTASKS": "1"}, (0, 1)),  # a one-task allocation runs as one process
    ({"SLURM_NTASKS": "2", "WORLD_SIZE": "1"}, (0, 1)),  # WORLD_SIZE wins over SLURM's leftovers
    ({}, (0, 1)),
])
def test_rank_and_world_from_the_environment(monkeypatch, env, expected):
    for name in _RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert runner.rank_and_world() == expected


def test_a_run_directory_of_other_settings_is_refused(tmp_path):
    runner.run(ToyTask(4), ScriptedBackend(), tmp_path, identity={"model": {"seed": 1}}, progress=False)
    runner.run(ToyTask(4), ScriptedBackend(), tmp_path, identity={"model": {"seed": 1}}, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        runner.run(ToyTask(4), ScriptedBackend(), tmp_path, identity={"model": {"seed": 2}}, progress=False)


def test_a_run_resumed_after_its_items_changed_is_refused(tmp_path):
    task = ToyTask(8)
    with pytest.raises(KeyboardInterrupt):
        runner.run(task, Crashing(after=4), tmp_path, chunk_size=4, progress=False)
    # the questions file edited between the kill and the resume: one answer moved, same ids and count
    edited = ToyTask(8)
    item = edited._items[2]
    edited._items[2] = MultipleChoiceItem(id=item.id, question=item.question, options=item.options,
                                          answer=(item.answer + 1) % 4, transcript=item.transcript)
    with pytest.raises(ValueError, match=r"other items \(the task's questions.*items_digest.*to start afresh"):
        runner.run(edited, ScriptedBackend("letter"), tmp_path, progress=False)
    # a reworded option is a change too; the unchanged items still resume
    reworded = ToyTask(8)
    reworded._items[0] = MultipleChoiceItem(id="q0", question="question 0?", options=("a", "b", "c", "d"),
                                            answer=reworded._items[0].answer, transcript="words 0.")
    with pytest.raises(ValueError, match="made with other items"):
        runner.run(reworded, ScriptedBackend("letter"), tmp_path, progress=False)
    assert runner.run(ToyTask(8), ScriptedBackend("letter"), tmp_path, progress=False)["Accuracy"] == 100.0
    # a run directory from before the digest cannot be checked: refused, saying so
    identity = json.loads((tmp_path / runner.RUN_FILE).read_text())
    del identity["items_digest"]
    (tmp_path / runner.RUN_FILE).write_text(json.dumps(identity))
    with pytest.raises(ValueError, match="no items_digest.*to start afresh"):
        runner.run(ToyTask(8), ScriptedBackend("letter"), tmp_path, progress=False)


def test_a_records_file_cut_inside_a_utf8_character_drops_the_torn_line(tmp_path):
    task = ToyTask(8)
    reference = runner.run(task, ScriptedBackend("letter"), tmp_path / "ref", progress=False)
    run_dir = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        runner.run(task, Crashing(after=4), run_dir, chunk_size=4, progress=False)
    with open(run_dir / runner.RECORDS, "ab") as f:
        f.write('{"item_id": "q4", "reply": "é'.encode()[:-1])  # the kill came between the two bytes of "é"
    assert len(runner.read_records(run_dir / runner.RECORDS)) == 4
    assert runner.run(task, ScriptedBackend("letter"), run_dir, chunk_size=4, progress=False) == reference
    assert (run_dir / runner.RECORDS).read_bytes() == (tmp_path / "ref" / runner.RECORDS).read_bytes()
    # a line that is not UTF-8 before the last one is damage, not a kill: refused, naming file and line
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"item_id": "q0", "reply": "\xc3"}\n' + (run_dir / runner.RECORDS).read_bytes())
    with pytest.raises(ValueError, match=r"bad.jsonl: line 1 is not UTF-8"):
        runner.read_records(bad)


def answer_items(task, backend, items, chunk_size: int) -> list:
    """The records of `items`, `chunk_size` at a time, from the runner's answering step alone (no run directory)."""
    return [runner._record(task, *answered)[0] for group in runner._replies(task, backend, items, chunk_size)
            for answered in group]


def test_random_backend_is_near_chance_and_reproducible():
    task = ToyTask(4000)
    records = answer_items(task, RandomBackend(seed=0), task.items(), chunk_size=64)
    accuracy = np.mean([r.correct for r in records])
    assert abs(accuracy - 0.25) < 0.03
    again = answer_items(task, RandomBackend(seed=0), task.items()[:10], chunk_size=3)
    assert [r.choice for r in again] == [r.choice for r in records[:10]]


# ---- Spacewalk-18 tasks ----


@pytest.fixture(scope="module")
def synthetic(synthetic_spacewalk18):
    return open_spacewalk18(synthetic_root=synthetic_spacewalk18(**QA_HARNESS), synthetic=QA_HARNESS)


def test_qa_scripted_scores_100_and_the_scoring_tool_agrees(synthetic, tmp_path, capsys):
    task = QuestionAnswering(synthetic)
    assert len(task.items()) == len(synthetic.questions()) >= 4
    item = task.items()[0]
    prompt = task.prompt(item).text
    assert prompt.startswith("Answer with a single letter from A to D and nothing else.")
    assert f"Here is the question: {item.question}\nHere are the choices:\n(A) {item.options[0]}\n(B)" in prompt
    assert "transcript" not in prompt
    assert "The transcript of the video speech is: " in QuestionAnswering(synthetic, transcript_in_prompt=True
                                                                          ).prompt(item).text
    metrics = runner.run(task, ScriptedBackend(), tmp_path, progress=False)
    assert metrics["Accuracy"] == 100.0 and metrics["unparsable"] == 0
    assert set(metrics["per_type"]) == {q.type for q in synthetic.questions()}
    capsys.readouterr()
    assert score.main(["--root", str(synthetic.root), "--task", "question_answering",
                       "--predictions", str(tmp_path / "answers.json")]) == 0
    assert json.loads(capsys.readouterr().out)["Accuracy"] == 100.0


def test_qa_unparsable_replies_are_wrong_in_metrics_and_in_the_official_file(synthetic, tmp_path, capsys):
    task = QuestionAnswering(synthetic)
    backend = ScriptedBackend(script=lambda item, prompt: "no idea" if item.id in ("0", "3") else
                              f"The answer is ({chr(65 + item.answer)}).")
    metrics = runner.run(task, backend, tmp_path, progress=False)
    n = len(task.items())
    assert metrics["unparsable"] == 2 and metrics["Accuracy"] == pytest.approx(100 * (n - 2) / n)
    capsys.readouterr()
    score.main(["--root", str(synthetic.root), "--task", "question_answering",
                "--predictions", str(tmp_path / "answers.json")])
    assert json.loads(capsys.readouterr().out)["Accuracy"] == pytest.approx(metrics["Accuracy"])


def test_step_questions_items_prompt_and_official_predictions(synthetic, tmp_path, capsys):
    task = StepRecognitionQuestions(synthetic, "test", "1min")
    samples = synthetic.step_samples("test")
    video_id = next(iter(samples))
    recording = synthetic.recordings[video_id]
    item = task.items()[5]
    sample = samples[video_id][5]
    assert item.id == f"{video_id}/{sample.id}" and item.answer == sample.label
    assert item.visual.start == max(0, sample.timestamp - 30) and item.visual.end == min(recording.duration,
                                                                                          sample.timestamp + 30)
    k = recording.num_classes - 1
    text = task.prompt(item).text
    assert text.startswith(f"You are given a spacewalk video, where the spacewalk mission can be divided into {k} "
                           f"steps. The transcript of the video speech is: {item.transcript}.")
    assert f"Answer with a single number from 0 to {k} and nothing else." in text
    assert "Here is the question: Which step does the frame in the middle of this video belong to?" in text
    assert "\n(0) Irrelevant: The mission control center" in text
    assert f"\n(1) {recording.steps[1].caption}: " in text

    metrics = runner.run(task, ScriptedBackend(), tmp_path, progress=False)
    assert metrics["Accuracy"] == 100.0 and metrics["IoU"] == pytest.approx(
        step_recognition_metrics(synthetic.recordings, samples,
                                 {v: np.array([s.label for s in ss]) for v, ss in samples.items()})["IoU"])
    read_step_predictions(tmp_path / "predictions.json", synthetic.recordings, samples)
    capsys.readouterr()
    score.main(["--root", str(synthetic.root), "--split", "test", "--predictions", str(tmp_path / "predictions.json")])
    scored = json.loads(capsys.readouterr().out)
    assert scored["Accuracy"] == 100.0 and scored["IoU"] == pytest.approx(metrics["IoU"])


def test_step_questions_contrastive_scores_give_map_and_a_subset_is_marked(synthetic, tmp_path):
    task = StepRecognitionQuestions(synthetic, "test", "5min", samples_per_video=10)
    assert len(task.items()) == 20 and not task.complete
    metrics = runner.run(task, ContrastiveTextBackend(FakeText(dim=16)), tmp_path, chunk_size=7, progress=False)
    assert metrics["mAP"] is not None and metrics["official_samples"] is False
    assert (tmp_path / "predictions.subset.json").is_file() and not (tmp_path / "predictions.json").exists()
    records = runner.read_records(tmp_path / runner.RECORDS)
    assert all(r.scores is not None and r.choice == int(np.argmax(r.scores)) for r in records)


def test_contrastive_text_queries_and_pooling():
    item = MultipleChoiceItem(id="x", question="Which task happens first", options=("a hatch", "a bolt"),
                              transcript="We open the hatch. Then a bolt! And more")
    assert option_queries(item) == ["Question: Which task happens first? Is it a hatch",
                                    "Question: Which task happens first? Is it a bolt"]
    assert split_sentences(item.transcript) == ["We open the hatch.", "Then a bolt!", "And more"]
    # a question ending in '.' gets one '?', and a benchmark's own texts (EgoSchema's) are taken as they are
    statement = MultipleChoiceItem(id="s", question="Describe what C does in the video.", options=("a", "b"))
    assert option_queries(statement)[0] == "Question: Describe what C does in the video? Is it a"
    own = MultipleChoiceItem(id="o", question="q.", options=("a", "b"), meta={"contrastive_texts": ("A!", "B!")})
    assert option_queries(own) == ["A!", "B!"]
    encoder = FakeText(dim=16)
    backend = ContrastiveTextBackend(encoder, pool="max")
    reply = backend.answer([item], [Prompt(("q",))])[0]
    assert reply.choice == int(np.argmax(reply.scores)) and len(reply.scores) == 2
    calls = encoder.calls
    backend.answer([item], [Prompt(("q",))])
    assert encoder.calls == calls  # every text came from the cache
    silent = MultipleChoiceItem(id="y", question="q?", options=("a", "b"), transcript="")
    assert backend.answer([silent], [Prompt(("q",))])[0].scores == (0.0, 0.0)


def test_step_oracle_lists_the_steps_of_the_window(synthetic):
    task = StepRecognitionQuestions(synthetic, "test", "5min", samples_per_video=5, summary="step_oracle_captions")
    for item in task.items():
        recording = synthetic.recordings[item.meta["video_id"]]
        truth = [s.label for s in recording.segments
                 if s.start < item.visual.end and s.end > item.visual.start and s.label > 0]
        assert sorted(item.meta["oracle_steps"]) == sorted(set(truth))
        text = task.prompt(item).text
        if truth:
            assert f"The steps that occur in this video are: {recording.steps[truth[0]].caption}" in text
        else:
            assert "None of the planned steps occurs in this video." in text
    assert "steps that occur" not in StepRecognitionQuestions(synthetic, "test", "5min", 5).prompt(item).text


def test_step_rating_asks_every_class_and_predicts_the_best_rated(synthetic, tmp_path):
    from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import StepRatingQuestions

    task = StepRatingQuestions(synthetic, "test", "1min", samples_per_video=4)
    samples = StepRecognitionQuestions(synthetic, "test", "1min", samples_per_video=4).items()
    assert len(task.items()) == sum(len(s.options) for s in samples)
    first = task.items()[1]
    assert first.id == f"{samples[0].id}/1" and first.options == tuple(str(r) for r in range(1, 11))
    assert "on a scale from 1 (not at all) to 10 (certainly)" in task.prompt(first).text
    assert "Answer with a single number from 1 to 10 and nothing else." in task.prompt(first).text

    def rate(item, prompt):  # 10 for the true class, 3 for the others, garbage for class 0 of one sample
        if item.meta["sample"] == samples[1].id and item.meta["class"] == 0:
            return "no idea"
        return "Rating: 10" if item.meta["class"] == item.meta["label"] else "3"

    metrics = runner.run(task, ScriptedBackend(script=rate), tmp_path, progress=False)
    assert metrics["Accuracy"] == 100.0 and metrics["unparsable"] == 0 and metrics["unparsable_ratings"] == 1
    assert metrics["mAP"] == 100.0 and metrics["count"] == len(samples)
    assert task.parse(first, "0") is None and task.parse(first, "11") is None and task.parse(first, "7") == 6


def test_contrastive_video_scores_options_against_the_clip_frames(synthetic):
    from spacewalk.multiple_choice.backends.contrastive import ContrastiveVideoBackend
    from spacewalk.multiple_choice.frames import sample_frames

    from helpers.fakes import FakeVideo

    class VideoWithText(FakeVideo):
        def __init__(self):
            super().__init__()
            self.text = FakeText(dim=self.dim)

        def text_encoder(self):
            return self.text

    encoder = VideoWithText()
    backend = ContrastiveVideoBackend(encoder, num_frames=3)
    task = QuestionAnswering(synthetic, limit=2)
    items = task.items()
    replies = backend.answer(items, [task.prompt(i) for i in items])
    assert [s[0] for s in encoder.shapes] == [3, 3]  # one clip of 3 frames per item
    for item, reply in zip(items, replies):
        expected = encoder.text.encode(option_queries(item)) @ FakeVideo.features(
            sample_frames(item.visual, backend.rule)[0])
        assert np.allclose(reply.scores, expected, atol=1e-5) and reply.choice == int(np.argmax(expected))
    assert ContrastiveVideoBackend(VideoWithText()).rule.num_frames == FakeVideo.num_frames  # the encoder's count


def _task_with(name: str, setting: str, value):
    """Each multiple-choice task built with one cost setting; the check comes before the dataset is read, so
    none is given."""
    from spacewalk.benchmarks.egocross.task import EgoCrossCloseQATask, EgoCrossOpenQATask
    from spacewalk.benchmarks.egoschema.task import EgoSchemaTask
    from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import StepRatingQuestions

    tasks = {"egoschema": EgoSchemaTask, "egocross_closeqa": EgoCrossCloseQATask,
             "egocross_openqa": EgoCrossOpenQATask, "spacewalk18_qa": QuestionAnswering,
             "step_questions": StepRecognitionQuestions, "step_rating": StepRatingQuestions}
    return tasks[name](None, **{setting: value})


LIMITS = [("egoschema", "limit"), ("egocross_closeqa", "limit"), ("egocross_openqa", "limit"),
          ("spacewalk18_qa", "limit"), ("step_questions", "samples_per_video"),
          ("step_questions", "max_videos"), ("step_questions", "limit"), ("step_rating", "max_videos"),
          ("step_rating", "limit")]


@pytest.mark.parametrize("task, setting", LIMITS)
@pytest.mark.parametrize("value, message", [(0, "=0 leaves no item to score"), (-1, "=-1 leaves no item to score"),
                                            ("3", "='3': must be a whole number")])
def test_a_limit_that_leaves_no_item_is_refused_naming_the_setting(task, setting, value, message):
    # limit=0 used to score nothing and report 0 % with exit 0; limit=-1 silently dropped the last question
    with pytest.raises(ValueError, match=f"^{setting}{message}"):
        _task_with(task, setting, value)


@pytest.mark.parametrize("loader, setting", [("egoschema", "limit"), ("egocross", "limit"),
                                             ("spacewalk18_qa", "limit"), ("step_questions", "max_videos")])
def test_the_loaders_refuse_an_empty_limit_before_reading_anything(loader, setting, tmp_path):
    from spacewalk.benchmarks.egocross.task import open_egocross
    from spacewalk.benchmarks.egoschema.task import open_egoschema
    from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task
    from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import step_recognition_questions_task

    loaders = {"egoschema": open_egoschema, "egocross": open_egocross, "spacewalk18_qa": question_answering_task,
               "step_questions": step_recognition_questions_task}
    with pytest.raises(ValueError, match=f"^{setting}=0 leaves no item"):
        loaders[loader](synthetic_root=tmp_path / "synthetic", **{setting: 0})
    assert not (tmp_path / "synthetic").exists()  # nothing generated


def test_a_limit_of_one_keeps_the_first_item(synthetic):
    assert len(QuestionAnswering(synthetic, limit=1).items()) == 1


@pytest.mark.parametrize("data", sorted(p.stem for p in (REPO / "conf" / "data").glob("*.yaml")
                                        if "multiple_choice" in (OmegaConf.load(p).get("data_tasks") or [])))
def test_every_multiple_choice_data_set_takes_data_limit(data):
    # the same setting under the same name whatever the benchmark: the first N questions (or samples)
    cfg = compose_evaluate(f"data={data}", "data.limit=3")
    assert cfg.data.limit == 3
    assert "limit" in inspect.signature(hydra.utils.get_method(cfg.data._target_)).parameters


def test_data_limit_keeps_the_first_step_samples_in_video_order(synthetic):
    full = StepRecognitionQuestions(synthetic, samples_per_video=4)
    first = list(full.samples)[0]
    limited = StepRecognitionQuestions(synthetic, samples_per_video=4, limit=6)
    assert [i.id for i in limited.items()] == [i.id for i in full.items()][:6]
    assert list(limited.samples) == list(full.samples)[:2] and limited.samples[first] == full.samples[first]
    assert not limited.complete


def test_a_run_made_before_a_null_setting_existed_still_resumes(tmp_path):
    def identity(**data):
        return {"data": {"root": None, "seed": 0, **data}, "model": {"a": 1}, "items_digest": "d"}

    runner.check_run_identity(tmp_path, identity(max_items=None))
    runner.check_run_identity(tmp_path, identity(limit=None))
    with pytest.raises(ValueError, match="other settings"):
        runner.check_run_identity(tmp_path, identity(limit=5))
