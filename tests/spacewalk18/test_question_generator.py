"""The QA question generator (spacewalk/benchmarks/spacewalk18/questions/question_generator.py): every question
checked against the annotations by rules written here again, determinism, the official format (the real test file's
keys, wording and options), and the command with the scorer reading its file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording, Segment, Spacewalk18, Step, frame_of
from spacewalk.benchmarks.spacewalk18.questions.question_generator import (
    ABSENT,
    BEFORE_AFTER,
    ORDER,
    THIRDS,
    WHEN,
    generate,
    main,
)
from spacewalk.benchmarks.spacewalk18.scoring.official import qa_accuracy
from spacewalk.benchmarks.spacewalk18.scoring.predictions import write_qa_predictions
from spacewalk.core.errors import ConfigError
from spacewalk.score import main as score_main

WHEN_RE = re.compile(r"In which part of the video does the task that (.*) happen\?$", re.S)
BEFORE_AFTER_RE = re.compile(r"Which of the following tasks happens (before|after) (.*)\?$", re.S)
ORDER_OPTION_RE = re.compile(r"\((\d)\) (.*?)\.(?=\(\d\) |$)", re.S)


def recording(labels_and_seconds, num_steps: int, video_id: str = "01012020", same: dict | None = None) -> Recording:
    """A recording whose segments are (label, seconds) in order, -1 at both ends added; `same` {i: j}: step i has
    step j's caption (real step lists repeat captions)."""
    segments, t = [], 0.0
    for label, seconds in [(-1, 60.0), *labels_and_seconds, (-1, 60.0)]:
        segments.append(Segment(t, t + seconds, frame_of(t), frame_of(t + seconds), label))
        t += seconds
    same = same or {}
    steps = tuple([Step(0, "Irrelevant", "", None, None)]
                  + [Step(i, f"EV1 does task {same.get(i, i)} ", "", 1.0, 2.0) for i in range(1, num_steps + 1)])
    return Recording(video_id, tuple(segments), steps, Path("/nonexistent.csv"), Path("/nonexistent.mp4"))


def spans(rec: Recording, start: float, end: float) -> dict[str, list[tuple[float, float]]]:
    """Each caption's segments inside the clip (steps that share a caption together)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for s in rec.segments:
        if s.label > 0 and s.start < end and s.end > start:
            out.setdefault(rec.steps[s.label].caption, []).append((max(s.start, start), min(s.end, end)))
    return out


def check_question(q: dict, rec: Recording) -> None:
    """The question's answer holds by the benchmark's rules and no distractor does."""
    caption_of = {s.caption: s.caption for s in rec.steps[1:]}  # a KeyError: not a caption of the recording
    inside = spans(rec, q["video_start"], q["video_end"])
    assert len(q["options"]) == 4 and len(set(q["options"])) == 4 and 0 <= q["answer"] < 4
    if q["type"] == BEFORE_AFTER:
        relation, name = BEFORE_AFTER_RE.match(q["question"]).groups()
        ref = caption_of[name]
        assert ref in inside

        def holds(k):
            if k not in inside or k == ref:
                return False
            if relation == "before":
                return inside[k][-1][1] <= inside[ref][0][0]
            return inside[k][0][0] >= inside[ref][-1][1]

        assert [holds(caption_of[o]) for o in q["options"]] == [i == q["answer"] for i in range(4)]
    elif q["type"] == WHEN:
        assert sorted(q["options"]) == sorted([*THIRDS, ABSENT])
        k = caption_of[WHEN_RE.match(q["question"]).group(1)]
        correct = q["options"][q["answer"]]
        if correct == ABSENT:
            assert k not in inside
        else:
            length = q["video_end"] - q["video_start"]
            third = THIRDS.index(correct)
            lo, hi = q["video_start"] + third * length / 3, q["video_start"] + (third + 1) * length / 3
            assert all(lo <= a and b <= hi + 1e-6 for a, b in inside[k])
    else:
        assert q["question"] == "In which order do the tasks happen in the video?"
        orders = [[caption_of[c] for _, c in ORDER_OPTION_RE.findall(o)] for o in q["options"]]
        assert all(len(o) == 3 and sorted(o) == sorted(orders[0]) for o in orders)
        answer = orders[q["answer"]]
        assert [inside[k][0][0] for k in answer] == sorted(inside[k][0][0] for k in answer)


# a recording of 8 steps over about 2 h 40 min, with returns to earlier steps and Irrelevant interludes
PLAN = [(1, 900), (0, 300), (2, 600), (3, 1200), (0, 200), (2, 400), (4, 800), (5, 700), (0, 100), (6, 900),
        (4, 300), (7, 1500), (0, 400), (8, 1000)]


def test_questions_follow_the_rules_on_a_known_recording():
    rec = recording(PLAN, 8)
    questions = generate([rec], {BEFORE_AFTER: 15, WHEN: 8, ORDER: 8}, seed=1, window=3600, absent_share=0.3)
    counts = {t: sum(q["type"] == t for q in questions) for t in (BEFORE_AFTER, WHEN, ORDER)}
    assert counts == {BEFORE_AFTER: 15, WHEN: 8, ORDER: 8}
    assert [q["question_id"] for q in questions] == list(range(len(questions)))
    assert [q["type"] for q in questions] == sorted((q["type"] for q in questions),
                                                    key=[BEFORE_AFTER, WHEN, ORDER].index)
    starts = {s.start for s in rec.segments}
    for q in questions:
        assert q["video_start"] in starts and q["video_end"] - q["video_start"] == 3600
        check_question(q, rec)
    assert any(q["options"][q["answer"]] == ABSENT for q in questions if q["type"] == WHEN)
    # each (clip, step, relation) asked once
    keys = [(q["video_start"], q["question"]) for q in questions if q["type"] != ORDER]
    assert len(keys) == len(set(keys))


def test_steps_that_share_a_caption_are_one_task():
    # step 6 repeats step 2's caption: "before <it>" must be before both, and it is never two options
    rec = recording(PLAN, 8, same={6: 2})
    questions = generate([rec], {BEFORE_AFTER: 20, WHEN: 10, ORDER: 10}, seed=2, window=3600, absent_share=0.3)
    assert len(questions) == 40
    for q in questions:
        check_question(q, rec)


def test_deterministic_by_seed_and_per_recording():
    a, b = recording(PLAN, 8, "01012020"), recording(PLAN, 8, "02022020")
    first = generate([a, b], seed=3, window=3600)
    assert first == generate([a, b], seed=3, window=3600)
    assert first != generate([a, b], seed=4, window=3600)
    # adding a recording leaves another's questions as they were
    alone = [{k: v for k, v in q.items() if k != "question_id"} for q in generate([a], seed=3, window=3600)]
    mixed = [{k: v for k, v in q.items() if k != "question_id"} for q in first if q["video_id"] == a.video_id]
    assert alone == mixed


def test_answer_positions_are_spread():
    rec = recording(PLAN, 8)
    questions = generate([rec], {BEFORE_AFTER: 40, WHEN: 0, ORDER: 40}, seed=0, window=3600)
    positions = np.bincount([q["answer"] for q in questions], minlength=4)
    assert positions.min() >= 8, positions


def test_short_recordings_and_bad_settings():
    rec = recording([(1, 600), (2, 600)], 2)
    assert generate([rec], window=3600) == []  # shorter than the hour
    with pytest.raises(ConfigError, match="unknown question types"):
        generate([rec], {"location": 3})
    with pytest.raises(ConfigError, match="absent_share"):
        generate([rec], absent_share=2.0)
    with pytest.raises(ConfigError, match="counts"):
        generate([rec], {WHEN: -1})


def test_format_matches_the_real_test_file(real_spacewalk18_root):
    """Generated test-split questions have the official file's keys, value types, wording and option forms, every
    one holds by the rules, and the dataset reader and the scorer read the file."""
    official = json.loads((real_spacewalk18_root / "tasks/question_answering/test.json").read_text())
    dataset = Spacewalk18(real_spacewalk18_root)
    generated = generate(dataset.split("test"), seed=0)
    assert len(generated) > 200
    templated = [q for q in official if q.get("type") in (BEFORE_AFTER, WHEN, ORDER)]
    for q in generated:
        assert list(q) == list(official[0])
        assert all(type(q[k]) is type(official[0][k]) for k in q)
        check_question(q, dataset.recordings[q["video_id"]])
    # the official wordings: every official templated question matches our patterns, and ours the same ones
    for q in templated + generated:
        if q["type"] == WHEN:
            assert WHEN_RE.match(q["question"]) and sorted(q["options"]) == sorted([*THIRDS, ABSENT])
        elif q["type"] == BEFORE_AFTER:
            assert BEFORE_AFTER_RE.match(q["question"])
        else:
            assert q["question"] == "In which order do the tasks happen in the video?"
            assert all(len(ORDER_OPTION_RE.findall(o)) == 3 for o in q["options"]), q["options"]
    assert {len(q["options"]) for q in official} == {4}
    assert {round(q["video_end"] - q["video_start"], 6) for q in official + generated} == {3600.0}


def test_command_writes_a_file_the_scorer_reads(real_spacewalk18_root, tmp_path, capsys):
    out = tmp_path / "val.json"
    assert main(["--root", str(real_spacewalk18_root), "--split", "val", "--out", str(out), "--seed", "0"]) == 0
    assert "questions" in capsys.readouterr().out
    dataset = Spacewalk18(real_spacewalk18_root)
    questions = dataset.questions(out)
    assert {q.video_id for q in questions} == set(dataset.splits["val"])
    assert {q.type for q in questions} == {BEFORE_AFTER, WHEN, ORDER}
    answers = np.array([q.answer for q in questions])
    answers[::3] = (answers[::3] + 1) % 4  # a third wrong
    write_qa_predictions(tmp_path / "answers.json", answers)
    assert score_main(["--root", str(real_spacewalk18_root), "--split", "val", "--task", "question_answering",
                       "--questions", str(out), "--predictions", str(tmp_path / "answers.json")]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored == json.loads(json.dumps(qa_accuracy(answers, questions)))
    assert scored["Accuracy"] == pytest.approx(100 * (1 - len(answers[::3]) / len(answers)))


def test_command_refuses_a_missing_root(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--root", str(tmp_path / "missing"), "--split", "val", "--out", str(tmp_path / "q.json")])
    assert exit_info.value.code == 2 and "dataset root not found" in capsys.readouterr().err


def test_the_qa_task_asks_a_generated_file(real_spacewalk18_root, tmp_path):
    """data.questions: the task's items, official answers file and metrics follow the generated file."""
    from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task
    from spacewalk.multiple_choice.task import Record

    out = tmp_path / "val.json"
    assert main(["--root", str(real_spacewalk18_root), "--split", "val", "--out", str(out)]) == 0
    task = question_answering_task(real_spacewalk18_root, questions=out)
    items = task.items()
    assert [i.id for i in items] == [str(q["question_id"]) for q in json.loads(out.read_text())]
    records = [Record(item_id=i.id, prompt="", reply="", choice=i.answer, correct=True) for i in items]
    assert task.metrics(items, records)["Accuracy"] == 100.0
    task.write_outputs(items, records, tmp_path)
    assert json.loads((tmp_path / "answers.json").read_text()) == [i.answer for i in items]


def test_command_on_a_synthetic_root_uses_its_clip_length(synthetic_spacewalk18, tmp_path, capsys):
    # the synthetic recordings (minutes long) hold no one-hour clip: the root's own clip length is the default
    from spacewalk.benchmarks.spacewalk18.questions.question_generator import WINDOW_SECONDS, root_window

    root = synthetic_spacewalk18(seed=2, n_train=1, n_val=2, n_test=1, minutes=(12.0, 14.0), qa_window_seconds=300.0)
    assert root_window(root) == 300.0 and root_window(tmp_path) == WINDOW_SECONDS
    out = tmp_path / "val.json"
    assert main(["--root", str(root), "--split", "val", "--out", str(out)]) == 0
    questions = json.loads(out.read_text())
    assert questions and all(q["video_end"] - q["video_start"] == pytest.approx(300.0) for q in questions)
    assert "wrote" in capsys.readouterr().out
