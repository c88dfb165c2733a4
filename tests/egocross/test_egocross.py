"""EgoCross: the real testbed, validation messages, answers merged by id, the authors' CloseQA prompt and
parsing on awkward replies, OpenQA's substring rule and judge, the synthetic testbed through the scorer,
the download command."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from spacewalk import download
from spacewalk.benchmarks.egocross import closeqa, openqa
from spacewalk.benchmarks.egocross.dataset import EgoCross, read_testbed
from spacewalk.benchmarks.egocross.synthetic import ANSWERS_FILE, COLOURS
from spacewalk.benchmarks.egocross.task import EgoCrossCloseQATask, open_egocross, score_openqa
from spacewalk.core.errors import DataError
from spacewalk.multiple_choice.task import MultipleChoiceTask, Prompt, Record
from spacewalk.score import main as score_main

TESTBED = "datasets/egocross_testbed_imgs.json"


@pytest.fixture
def synthetic_root(synthetic_egocross_root):
    return synthetic_egocross_root


# ------------------------------------------------------------------------------------------------ real files

def test_the_real_testbed_loads_and_validates(real_egocross_root):
    data = EgoCross(real_egocross_root)
    qs = data.questions
    assert len(qs) == 957 and all(q.answer is None for q in qs)
    assert Counter(q.domain for q in qs) == {"surgery": 283, "industry": 245, "extreme_sports": 246,
                                             "animal_perspective": 183}
    assert Counter(q.category for q in qs) == {"Identification": 398, "Localization": 284, "Prediction": 161,
                                               "Counting": 114}
    assert len({q.question_type for q in qs}) == 15
    assert Counter(q.sampling_fps for q in qs) == {0.5: 935, 1.0: 22}  # CholecTrack20's .png clips: 1 fps
    q = qs[0]
    frames = real_egocross_root / "egocross_testbed/CholecTrack20/generated/VID01/frames"
    assert data.frame_paths(q)[0] == frames / "oc_q1/frame_00000.jpg"
    assert data.frame_times(q) == (0.0, 2.0, 4.0, 6.0, 8.0)


def test_the_closeqa_prompt_is_the_authors(real_egocross_root):
    task = EgoCrossCloseQATask(EgoCross(real_egocross_root))
    item = task.items()[0]
    prompt = task.prompt(item)
    assert prompt.parts[0] == Prompt.VISUAL
    assert prompt.parts[1] == (
        "Please carefully read the question and its options, then select the most appropriate answer. "
        "Question: How many distinct types of surgical instruments were fully or partially visible in the video "
        "segment from 0.00s to 10.00s?\n\nOptions:\nA: 4\nB: 3\nC: 1\nD: 2"
        "The original FPS of the video is 25.0. This image set is obtained by sampling at 0.5 fps."
        "Respond in JSON format with two fields: 'prediction' (the correct option letter: A, B, C, or D) and "
        "'reason' (a brief explanation of your choice). Do not include any other content.\n\n"
        "Example response:\n{\n    \"prediction\": \"B\",\n"
        "    \"reason\": \"Paris is the capital city of France.\"\n}\n")
    assert item.options == ("4", "3", "1", "2") and item.visual.frame_times[:2] == (0.0, 2.0)
    assert isinstance(task, MultipleChoiceTask)


EDITS = {
    "id": lambda r: r.__setitem__("id", "seven"),
    "dataset": lambda r: r.__setitem__("dataset", "Ego4D"),
    "primary_category": lambda r: r.__setitem__("primary_category", "counting"),
    "options": lambda r: r.__setitem__("options", ["A: 4", "C: 3", "B: 1", "D: 2"]),
    "original_video_fps": lambda r: r.__setitem__("original_video_fps", 0),
    "video_path": lambda r: r.__setitem__("video_path", []),
    "question_text": lambda r: r.pop("question_text"),
    "question_type": lambda r: r.__setitem__("question_type", 3),
}


@pytest.mark.parametrize("field", sorted(EDITS))
def test_a_corrupted_field_names_file_question_and_field(real_egocross_root, tmp_path, field):
    rows = json.loads((real_egocross_root / TESTBED).read_text())
    EDITS[field](rows[6])
    path = tmp_path / "testbed.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(DataError) as e:
        read_testbed(path)
    assert (e.value.file, e.value.item, e.value.field) == (path, "seven" if field == "id" else "7", field)
    assert str(path) in str(e.value)


def _answers(questions, letter_of=lambda q: q.letters[0]):
    return {str(q.id): {"correct_option_letter": letter_of(q), "answer_text": q.options[0], "detailed_answer": "d"}
            for q in questions}


def test_answers_merge_by_id_from_a_map_or_the_testbed_with_answers(real_egocross_root, tmp_path):
    questions = read_testbed(real_egocross_root / TESTBED)
    by_map = tmp_path / "answers.json"
    by_map.write_text(json.dumps(_answers(questions, lambda q: "c")))  # lower case letters are accepted
    rows = json.loads((real_egocross_root / TESTBED).read_text())
    for row in rows:
        row.update(correct_option_letter="C", answer_text=row["options"][2][3:], detailed_answer="d")
    full = tmp_path / "testbed_with_answers.json"
    full.write_text(json.dumps(rows))
    for data in (EgoCross(real_egocross_root / TESTBED, answers=by_map), EgoCross(real_egocross_root / TESTBED,
                                                                                    answers=full), EgoCross(full)):
        assert all(q.answer_index == 2 for q in data.questions)


@pytest.mark.parametrize("edit,item,field", [
    (lambda a: a.__setitem__("99999", a["1"]), "99999", "id"),
    (lambda a: a["5"].__setitem__("correct_option_letter", "E"), "5", "correct_option_letter"),
    (lambda a: a["5"].pop("answer_text"), "5", "answer_text"),
    (lambda a: a["5"].__setitem__("detailed_answer", None), "5", "detailed_answer"),
])
def test_bad_answers_name_file_question_and_field(real_egocross_root, tmp_path, edit, item, field):
    answers = _answers(read_testbed(real_egocross_root / TESTBED))
    edit(answers)
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers))
    with pytest.raises(DataError) as e:
        EgoCross(real_egocross_root, answers=path)
    assert (e.value.file, e.value.item, e.value.field) == (path, item, field)


# ------------------------------------------------------------------------------------------- CloseQA parsing

# (reply, the authors' `success` against the answer "B", our parsed option index with letters A-D)
AWKWARD = [
    ('{"prediction": "B", "reason": "two tools"}', True, 1),
    ('```json\n{\n    "prediction": "B",\n    "reason": "two tools"\n}\n```', True, 1),  # code fence: 2nd try
    ('Looking at the frames, {"prediction": "B", "reason": "two tools"} is my answer.', True, 1),
    ('{"prediction": "A", "reason": "first"}\n{"prediction": "B", "reason": "second"}', False, 0),  # first block
    ('{"prediction": "b", "reason": "lower case"}', True, 1),
    ('{"prediction": "B: 3", "reason": "letter with its option text"}', False, None),
    ('{"prediction": " B"}', False, None),  # exact after lower-casing: no strip
    ('{"prediction": 2, "reason": "an integer"}', False, None),
    ("2", False, None),
    ('{"prediction": null}', False, None),
    ("null", False, None),
    ("{'prediction': 'B', 'reason': 'single quotes'}", False, None),
    ('{"prediction": "B", "reason": "the frames sh', False, None),  # truncated
    ('{"answer": "B"}', False, None),  # an object without "prediction" parses to "", no second try
    ('[{"prediction": "B"}]', True, 1),  # a JSON list: .get fails, the block search finds the object
    ('"B"', False, None),
    ("B", False, None),
    ('{"prediction": "B", "reason": "the {x} set"}', True, 1),  # whole reply is JSON: braces inside are fine
    ('Answer: {"prediction": "B", "reason": "the {x} set"}', False, None),  # non-greedy block ends at "{x}"
    ("", False, None),
]


@pytest.mark.parametrize("reply,success,choice", AWKWARD)
def test_the_closeqa_parser_on_awkward_replies(reply, success, choice):
    assert closeqa.is_correct(reply, "B") is success
    assert closeqa.choice(reply, ("A", "B", "C", "D")) == choice
    assert (choice == 1) is success  # our correctness is the authors' success


# ---------------------------------------------------------------------------------------------------- OpenQA

def test_openqa_substring_rule_and_reading_the_prediction():
    assert openqa.read_prediction('```json\n{"prediction": "Two graspers", "reason": "x"}\n```') == "Two graspers"
    assert openqa.read_prediction("no json here") == ""
    assert openqa.read_prediction('{"prediction": 3}') == 3
    assert openqa.substring_score("grasper", "Two GRASPERS are visible") == 5
    assert openqa.substring_score("grasper", "a hook") is None  # the judge decides
    assert openqa.substring_score("grasper", 3) == 0  # theirs raises on 3.lower() and ends at 0
    assert openqa.substring_score(3, "There are 3 tools") == 5 and openqa.substring_score(3, 3) == 5
    assert openqa.substring_score(3, "four") is None


def test_the_judge_prompt_is_the_authors():
    text = openqa.judge_prompt("How many?", "3", "Three tools in view.", "four")
    assert text.startswith("\n        You are an intelligent chatbot designed for evaluating the correctness of AI "
                           "assistant predictions for question-answer pairs.")
    assert "Here's how you can accomplish the task: \n        ##INSTRUCTIONS: \n        - Focus on" in text
    assert ("        Question: How many? \n        Correct ground truth: 3 \n        Detailed ground truth: "
            "Three tools in view.\n        Predicted Answer: four \n") in text
    assert text.endswith('            "reason": "",  # The reason for the score\n        }\n        ```\n    ')


@pytest.mark.parametrize("judge_reply,score", [
    ('{"mark": 4, "reason": "close"}', 4),
    ('```\n{\n "mark": 5,\n "reason": "same"\n}\n```', 5),
    ('{"mark": 4,  # The score of the prediction\n "reason": ""}', 0),  # their example's comments: invalid JSON
    ("I would give it a 5.", 0),
    ('{"reason": "no mark"}', 0),
    ('{"mark": "4"}', 0),  # their caller's `score >= 4` would raise on a string; we count 0
    ('{"mark": 3.5}', 3.5),
])
def test_reading_the_judges_mark(judge_reply, score):
    assert openqa.read_mark(judge_reply)[0] == score


def test_openqa_scoring_asks_the_judge_only_what_the_substring_rule_leaves_open(synthetic_root):
    data = EgoCross(synthetic_root, answers=synthetic_root / ANSWERS_FILE)
    qs = data.questions[:4]
    replies = {qs[0].id: json.dumps({"prediction": f"It is {qs[0].answer.text}."}),
               qs[1].id: json.dumps({"prediction": "something else"}),
               qs[2].id: "no json at all",
               qs[3].id: json.dumps({"prediction": "something else"})}
    asked = []

    def judge(prompts):
        asked.extend(prompts)
        return ['{"mark": 4, "reason": "ok"}', '{"mark": 1, "reason": "empty"}', '{"mark": 3}'][:len(prompts)]

    metrics, judgements = score_openqa(qs, replies, judge)
    assert len(asked) == 3 and "Predicted Answer:  \n" in asked[1]  # "" goes to the judge, as theirs does
    assert [j.score for j in judgements] == [5, 4, 1, 3]
    assert (metrics["correct"], metrics["total"], metrics["accuracy"]) == (2, 4, 50.0)
    lower_bound, _ = score_openqa(qs, replies, None)
    assert (lower_bound["correct"], lower_bound["judge"]) == (1, "none")


# ------------------------------------------------------------------------------------------------ synthetic

def test_the_synthetic_testbed_is_in_the_release_layout(synthetic_root):
    rows = json.loads((synthetic_root / TESTBED).read_text())
    real_keys = {"id", "dataset", "primary_category", "question_type", "question_text", "options",
                 "original_video_fps", "video_path"}
    assert all(set(r) == real_keys for r in rows)
    data = EgoCross(synthetic_root, answers=synthetic_root / ANSWERS_FILE)
    assert len({q.domain for q in data.questions}) == 4 and len({q.category for q in data.questions}) == 4
    assert all(p.is_file() for q in data.questions for p in data.frame_paths(q))
    assert {q.sampling_fps for q in data.questions} == {0.5, 1.0}


def test_the_frames_determine_the_synthetic_answers(synthetic_root):
    from PIL import Image

    data = EgoCross(synthetic_root, answers=synthetic_root / ANSWERS_FILE)
    checked = 0
    for q in data.questions:
        if q.category != "Identification":
            continue
        pixels = np.asarray(Image.open(data.frame_paths(q)[0]).convert("RGB")).astype(float)
        centre = pixels[pixels.shape[0] // 2, pixels.shape[1] // 2]
        seen = min(COLOURS, key=lambda c: np.abs(np.array(COLOURS[c]) - centre).sum())
        assert q.answer.text == seen and q.options[q.answer_index] == seen
        checked += 1
    assert checked == 15


def _replies(data, letter_of):
    return {str(q.id): json.dumps({"prediction": letter_of(q), "reason": "r"}) for q in data.questions}


def test_ground_truth_replies_score_100_and_random_ones_near_chance(synthetic_root, tmp_path, capsys):
    data = EgoCross(synthetic_root, answers=synthetic_root / ANSWERS_FILE)
    rng = np.random.default_rng(0)
    n = len(data.questions)
    spread = 3 * 100 * (3 / 16 / n) ** 0.5
    for name, letter_of, low, high in [("truth", lambda q: q.answer.letter, 100, 100),
                                       ("random", lambda q: str(rng.choice(list("ABCD"))), 25 - spread, 25 + spread)]:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_replies(data, letter_of)))
        assert score_main(["egocross", "--task", "closeqa", "--data", str(synthetic_root / TESTBED),
                           "--answers", str(synthetic_root / ANSWERS_FILE), "--predictions", str(path)]) == 0
        result = json.loads(capsys.readouterr().out)
        assert low <= result["accuracy"] <= high, (name, result["accuracy"])
        assert set(result["per_domain"]) == {"surgery", "industry", "extreme_sports", "animal_perspective"}
        assert set(result["per_category"]) == {"Identification", "Localization", "Prediction", "Counting"}
        assert sum(g["total"] for g in result["per_question_type"].values()) == n


def test_the_task_scores_records_like_the_scorer(synthetic_root, tmp_path):
    task = open_egocross(synthetic_root=synthetic_root)
    items = task.items()
    replies = {item.id: json.dumps({"prediction": "ABCD"[item.answer] if int(item.id) % 3 else "Z"}) for item in items}
    records = [Record(item.id, task.prompt(item).text, replies[item.id], task.parse(item, replies[item.id]), None)
               for item in items]
    metrics = task.metrics(items, records)
    task.write_outputs(items, records, tmp_path)
    assert score_main(["egocross", "--task", "closeqa", "--data", str(synthetic_root / TESTBED), "--answers",
                       str(synthetic_root / ANSWERS_FILE), "--predictions",
                       str(tmp_path / "egocross_closeqa_replies.json"), "--output", str(tmp_path / "m.json")]) == 0
    assert json.loads((tmp_path / "m.json").read_text()) == json.loads(json.dumps(metrics))
    assert metrics["correct"] == sum(1 for item in items if int(item.id) % 3)


@pytest.mark.parametrize("edit,item,message", [
    (lambda r: r.__setitem__("1", 3), "1", "expected the raw reply text"),
    (lambda r: r.__setitem__("5000", "A"), "5000", "not an EgoCross question"),
    (lambda r: r.pop("7"), "7", "no reply for this question"),
])
def test_bad_reply_files_exit_2_naming_file_and_question(synthetic_root, tmp_path, capsys, edit, item, message):
    data = EgoCross(synthetic_root, answers=synthetic_root / ANSWERS_FILE)
    replies = _replies(data, lambda q: q.answer.letter)
    edit(replies)
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies))
    assert score_main(["egocross", "--task", "closeqa", "--data", str(synthetic_root / TESTBED), "--answers",
                       str(synthetic_root / ANSWERS_FILE), "--predictions", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and f"item {item}" in err and message in err


@pytest.mark.parametrize("how,message", [("repeated key", "occurs more than once"),
                                         ("same number", "question 7 has more than one reply")])
def test_a_question_replied_twice_is_refused(synthetic_root, tmp_path, capsys, how, message):
    # json.load keeps the last copy, and "7" and "07" are one question: either would be scored once
    data = EgoCross(synthetic_root, answers=synthetic_root / ANSWERS_FILE)
    replies = _replies(data, lambda q: q.answer.letter)
    key = '"7"' if how == "repeated key" else '"07"'
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies)[:-1] + f', {key}: "A"}}')
    assert score_main(["egocross", "--task", "closeqa", "--data", str(synthetic_root / TESTBED), "--answers",
                       str(synthetic_root / ANSWERS_FILE), "--predictions", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and f"item {json.loads(key)}" in err and message in err


def test_scoring_without_answers_or_a_judge_says_what_is_missing(synthetic_root, tmp_path, capsys):
    data = EgoCross(synthetic_root, answers=synthetic_root / ANSWERS_FILE)
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(_replies(data, lambda q: q.answer.letter)))
    assert score_main(["egocross", "--task", "closeqa", "--data", str(synthetic_root / TESTBED),
                       "--predictions", str(path)]) == 2
    assert "item 1" in capsys.readouterr().err
    args = ["egocross", "--task", "openqa", "--data", str(synthetic_root / TESTBED), "--answers",
            str(synthetic_root / ANSWERS_FILE), "--predictions", str(path)]
    with pytest.raises(SystemExit) as e:
        score_main(args)
    assert e.value.code == 2 and "--no-judge" in capsys.readouterr().err
    assert score_main(args + ["--no-judge"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["judge"] == "none" and result["total"] == len(data.questions)


# ---------------------------------------------------------------------------------------------------- download

def test_download_from_a_local_copy(real_egocross_root, tmp_path, capsys):
    root = tmp_path / "root"
    assert download.main(["egocross", "--root", str(root), "--source", str(real_egocross_root)]) == 0
    assert "egocross ready" in capsys.readouterr().out
    assert (root / TESTBED).read_bytes() == (real_egocross_root / TESTBED).read_bytes()
    assert download.main(["egocross", "--root", str(root), "--source", str(real_egocross_root), "--videos"]) == 2
    assert "gated" in capsys.readouterr().err


def test_a_missing_frame_is_named_before_the_run(synthetic_root, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(synthetic_root, copy)
    data = EgoCross(copy, answers=copy / ANSWERS_FILE)
    victim = data.frame_paths(data.questions[4])[1]
    victim.unlink()
    with pytest.raises(DataError) as e:
        open_egocross(root=copy, answers=copy / ANSWERS_FILE)
    assert (e.value.item, e.value.field) == ("5", "video_path") and str(victim) in str(e.value)
    assert len(open_egocross(root=copy, answers=copy / ANSWERS_FILE, check_frames=False).items()) == 60
