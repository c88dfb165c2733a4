"""EgoSchema: the real public files, validation messages, lmms-eval's prompt and parser, the contrastive
texts, the synthetic set, submission files through the scorer, the download command."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest

from spacewalk import download
from spacewalk.benchmarks.egoschema import prompts, scoring
from spacewalk.benchmarks.egoschema.dataset import EgoSchema, read_answers, read_questions, read_uid_map
from spacewalk.benchmarks.egoschema.synthetic import COLOURS, HIDDEN_ANSWERS_FILE, ensure_egoschema
from spacewalk.benchmarks.egoschema.task import EgoSchemaTask, open_egoschema
from spacewalk.benchmarks.registry import find
from spacewalk.core.errors import DataError
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.baselines import RandomBackend
from spacewalk.multiple_choice.task import MultipleChoiceTask, Prompt, Record
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.score import main as score_main


@pytest.fixture
def synthetic_root(synthetic_egoschema_root):
    return synthetic_egoschema_root


def real(dirpath):
    return EgoSchema(questions=dirpath / "sample/questions_first20.json", answers=dirpath / "subset_answers.json",
                     uid_map=dirpath / "uid_to_ego4d.json")


# ------------------------------------------------------------------------------------------------ real files

def test_the_real_files_load_and_validate(real_egoschema_dir):
    data = real(real_egoschema_dir).validate()
    assert len(data.questions) == 20 and len(data.answers) == 500 and len(data.clip_windows) == 5031
    assert all(len(q.options) == 5 for q in data.questions)
    assert set(data.answers.values()) == {0, 1, 2, 3, 4}
    w = data.clip_windows["001934bb-81bd-4cd8-a574-0472ef3f6678"]
    assert (w.video_uid, w.start, w.end) == ("2fa72a4f-b318-4e04-97b8-efdc3b039258", 240, 420)
    # the public answers name questions of the benchmark, not of the 20-question sample: no local subset here
    with pytest.raises(DataError, match="answer for a question not in"):
        data.subset()


def _corrupt(tmp_path, source, name, edit):
    rows = json.loads(source.read_text())
    edit(rows)
    path = tmp_path / name
    path.write_text(json.dumps(rows))
    return path


QUESTION_EDITS = {
    "q_uid": lambda rows: rows[3].pop("q_uid"),
    "question": lambda rows: rows[3].__setitem__("question", 42),
    "option 4": lambda rows: rows[3].pop("option 4"),
    "option 2": lambda rows: rows[3].__setitem__("option 2", "  "),
    "google_drive_id": lambda rows: rows[3].__setitem__("google_drive_id", None),
}


@pytest.mark.parametrize("field", sorted(QUESTION_EDITS))
def test_a_corrupted_question_field_names_file_question_and_field(real_egoschema_dir, tmp_path, field):
    source = real_egoschema_dir / "sample/questions_first20.json"
    q_uid = json.loads(source.read_text())[3]["q_uid"]
    path = _corrupt(tmp_path, source, "questions.json", QUESTION_EDITS[field])
    with pytest.raises(DataError) as e:
        read_questions(path)
    assert (e.value.file, e.value.field) == (path, field)
    assert e.value.item == ("#3" if field == "q_uid" else q_uid)
    assert str(path) in str(e.value) and repr(field) in str(e.value)


def test_a_duplicate_question_is_refused(real_egoschema_dir, tmp_path):
    path = _corrupt(tmp_path, real_egoschema_dir / "sample/questions_first20.json", "q.json",
                    lambda rows: rows.append(dict(rows[0])))
    with pytest.raises(DataError, match="duplicate question") as e:
        read_questions(path)
    assert e.value.item == "001934bb-81bd-4cd8-a574-0472ef3f6678"


@pytest.mark.parametrize("value", [5, -1, "2", True, 1.5, None])
def test_a_corrupted_answer_names_file_and_question(real_egoschema_dir, tmp_path, value):
    source = real_egoschema_dir / "subset_answers.json"
    q_uid = next(iter(json.loads(source.read_text())))
    path = _corrupt(tmp_path, source, "subset_answers.json", lambda d: d.__setitem__(q_uid, value))
    with pytest.raises(DataError) as e:
        read_answers(path)
    assert (e.value.file, e.value.item) == (path, q_uid)


@pytest.mark.parametrize("field,value", [("ending_sec", 10), ("starting_sec", "240"), ("video_uid", "")])
def test_a_corrupted_clip_window_names_file_question_and_field(real_egoschema_dir, tmp_path, field, value):
    source = real_egoschema_dir / "uid_to_ego4d.json"
    q_uid = "001934bb-81bd-4cd8-a574-0472ef3f6678"
    path = _corrupt(tmp_path, source, "uid_to_ego4d.json", lambda d: d[q_uid].__setitem__(field, value))
    with pytest.raises(DataError) as e:
        read_uid_map(path)
    assert (e.value.file, e.value.item, e.value.field) == (path, q_uid, field)


def test_an_answer_for_an_unknown_question_is_refused(real_egoschema_dir, tmp_path):
    path = _corrupt(tmp_path, real_egoschema_dir / "subset_answers.json", "a.json",
                    lambda d: d.__setitem__("not-a-question", 1))
    data = EgoSchema(questions=real_egoschema_dir / "sample/questions_first20.json", answers=path,
                     uid_map=real_egoschema_dir / "uid_to_ego4d.json")
    with pytest.raises(DataError, match="does not have") as e:
        data.answers  # noqa: B018
    assert e.value.item == "not-a-question"


# ------------------------------------------------------------------------------------- prompts and parsing

def test_the_prompt_is_lmms_evals_wording(real_egoschema_dir):
    task = EgoSchemaTask(real(real_egoschema_dir), split="full")
    item = task.items()[1]
    prompt = task.prompt(item)
    assert prompt.parts[0] == Prompt.VISUAL
    assert prompt.parts[1] == (
        "Based on the events of the video, how would you describe c's behavior in the grocery store and its "
        "purpose, without listing every action?\n"
        "A. C shopped carefully, selecting fridge items, interacting with staff, and frequently checking "
        "surroundings.\n"
        "B. " + item.options[1] + "\nC. " + item.options[2] + "\nD. " + item.options[3] + "\nE. " + item.options[4]
        + "\nAnswer with the option's letter from the given choices directly.")
    assert item.meta["contrastive_texts"][0] == (
        "Question: Based on the events of the video, how would you describe c's behavior in the grocery store and "
        "its purpose, without listing every action? Is it C shopped carefully, selecting fridge items, interacting "
        "with staff, and frequently checking surroundings.")
    assert isinstance(task, MultipleChoiceTask)


OPTIONS = ("C cooks dinner", "C washes the dishes", "C folds the laundry", "C reads a book", "C waters plants")


@pytest.mark.parametrize("reply,expected", [
    ("A", 0), ("B.", 1), ("(C)", 2), ("The answer is D.", 3), ("E. C waters plants", 4),
    ("(B) because C washes", 1),
    ("A and B", 0),  # two candidates: the one whose last occurrence comes first
    # candidates "A ", "A.", "C." (the final "." is stripped first); "C." has the earliest last occurrence
    ("Between C. and A. I pick A.", 2),
    ("b", None),  # lmms-eval looks for capital letters only; where it would guess at random we say unparsable
    ("", None),
    # no capital letter candidate and > 5 words: lmms-eval matches its option text, "C. <option>", lower-cased
    ("I think that in this video c. c folds the laundry carefully", 2),
    ("I think that in this video c folds the laundry carefully", None),
    ("I am not sure what happens here at all", None),
])
def test_the_lmms_eval_parser(reply, expected):
    assert prompts.parse_lmms_eval(reply, OPTIONS) == expected


# ------------------------------------------------------------------------------------------------ synthetic

def test_the_synthetic_set_is_in_the_release_layout(synthetic_root):
    data = EgoSchema(synthetic_root).validate()
    assert len(data.questions) == 30 and len(data.answers) == 20 and len(data.clip_windows) == 30
    assert all(data.video(q.q_uid).is_file() for q in data.questions)
    assert set(json.loads((synthetic_root / "questions.json").read_text())[0]) == {
        "q_uid", "google_drive_id", "question", "option 0", "option 1", "option 2", "option 3", "option 4"}
    assert ensure_egoschema(synthetic_root, n_questions=30, n_answered=20) == synthetic_root  # reused as it is


def test_the_pictures_determine_the_synthetic_answers(synthetic_root):
    from spacewalk.media.video import open_video

    data = EgoSchema(synthetic_root)
    answers = {**data.answers, **json.loads((synthetic_root / HIDDEN_ANSWERS_FILE).read_text())}
    checked = 0
    for q in data.questions:
        if "begins" not in q.question and "at the end" not in q.question:
            continue
        with open_video(data.video(q.q_uid), backend="pyav") as video:
            t = 0.0 if "begins" in q.question else video.num_frames / video.fps - 0.3
            pixels = video.frames_at([t])[0].reshape(-1, 3).astype(float)
        corner = np.median(pixels[:20], axis=0)  # a band of the first row: mostly background colour
        seen = min(COLOURS, key=lambda c: np.abs(np.array(COLOURS[c]) - corner).sum())
        assert q.options[answers[q.q_uid]] == f"It is {seen}.", q.q_uid
        checked += 1
    assert checked >= 10


# ------------------------------------------------------------------------- submissions and the score command

def _records(items, choices):
    return [Record(item.id, "", "", choice, None if item.answer is None else choice == item.answer)
            for item, choice in zip(items, choices)]


def test_ground_truth_submissions_round_trip_through_the_scorer(synthetic_root, tmp_path, capsys):
    task = open_egoschema(root=synthetic_root, split="full")
    items = task.items()
    hidden = json.loads((synthetic_root / HIDDEN_ANSWERS_FILE).read_text())
    truth = [item.answer if item.answer is not None else hidden[item.id] for item in items]
    records = _records(items, truth)
    metrics = task.metrics(items, records)
    assert (metrics["accuracy"], metrics["total"], metrics["items"]) == (100.0, 20, 30)
    task.write_outputs(items, records, tmp_path)
    submitted = json.loads((tmp_path / "submission.json").read_text())
    assert list(submitted) == [item.id for item in items] and list(submitted.values()) == truth
    with open(tmp_path / "submission.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["q_uid", "answer"] and rows[1:] == [[item.id, str(a)] for item, a in zip(items, truth)]
    for name in ("submission.json", "submission.csv"):
        assert score_main(["egoschema", "--root", str(synthetic_root), "--predictions", str(tmp_path / name)]) == 0
        assert json.loads(capsys.readouterr().out) == {"accuracy": 100.0, "correct": 20, "total": 20,
                                                       "unparsable": 0}


def test_a_run_over_questions_without_known_answers_has_no_accuracy(synthetic_root, tmp_path):
    """The full split's questions outside the public answers: nothing is measured, so metrics.json's accuracy is
    null (not 0.0, which a table or a seed group would average as a number) and it has no interval."""
    task = open_egoschema(root=synthetic_root, split="full")
    unanswered = [item for item in task.items() if item.answer is None]
    assert unanswered
    task.items = lambda: unanswered  # the run's items: only those of unknown answer
    metrics = runner.run(task, RandomBackend(seed=0), tmp_path / "run", progress=False,
                         bootstrap=BootstrapOptions(n_resamples=50))
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert (written["accuracy"], written["total"], written["items"]) == (None, 0, len(unanswered))
    assert metrics["accuracy"] is None and "accuracy" not in written["intervals"]
    assert (tmp_path / "run" / "submission.json").is_file()  # the answers still go to the server
    # a question with a known answer among them gives a number and its interval again
    answered = next(i for i in open_egoschema(root=synthetic_root, split="full").items() if i.answer is not None)
    records = _records([answered], [answered.answer])
    known = task.metrics([answered], records)
    assert known["accuracy"] == 100.0
    assert "accuracy" in task.intervals([answered], records, known, BootstrapOptions(n_resamples=50))


def test_raw_replies_are_parsed_with_the_questions(synthetic_root, tmp_path, capsys):
    data = EgoSchema(synthetic_root)
    replies = {q.q_uid: "ABCDE"[data.answers.get(q.q_uid, 0)] for q in data.questions}
    first = data.subset()[0].q_uid
    replies[first] = "I cannot tell."
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies))
    assert score_main(["egoschema", "--answers", str(synthetic_root / "subset_answers.json"),
                       "--questions", str(synthetic_root / "questions.json"), "--predictions", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"accuracy": 95.0, "correct": 19, "total": 20, "unparsable": 1}
    # without the questions a reply text cannot be parsed: exit 2 naming the file and the question
    assert score_main(["egoschema", "--answers", str(synthetic_root / "subset_answers.json"),
                       "--predictions", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "needs the questions file" in err


def test_random_choices_score_near_chance_on_the_real_subset(real_egoschema_dir, tmp_path, capsys):
    answers = json.loads((real_egoschema_dir / "subset_answers.json").read_text())
    rng = np.random.default_rng(0)
    path = scoring.write_submission_json(tmp_path / "random.json", {q: int(rng.integers(5)) for q in answers})
    assert score_main(["egoschema", "--answers", str(real_egoschema_dir / "subset_answers.json"),
                       "--predictions", str(path)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["total"] == 500 and abs(result["accuracy"] - 20.0) < 3 * 100 * (0.2 * 0.8 / 500) ** 0.5


@pytest.mark.parametrize("content,item,message", [
    ({"q": 9}, "q", "not an option index"),
    ({"q": True}, "q", "expected an answer index"),
    ([1, 2], None, "expected an object"),
])
def test_bad_prediction_files_exit_2_naming_file_and_question(synthetic_root, tmp_path, capsys, content, item, message):
    data = EgoSchema(synthetic_root)
    preds = {q: a for q, a in data.answers.items()}
    if isinstance(content, dict):
        key = next(iter(preds))
        preds[key] = content["q"]
        content, item = preds, key
    path = tmp_path / "p.json"
    path.write_text(json.dumps(content))
    assert score_main(["egoschema", "--root", str(synthetic_root), "--predictions", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err and (item is None or f"item {item}" in err)


def _with_one_repeat(answers: dict, value) -> tuple[str, str]:
    """The answers as JSON text with the first q_uid given a second time (a dict cannot hold that)."""
    first = next(iter(answers))
    text = json.dumps(answers)
    return first, text[:-1] + f", {json.dumps(first)}: {json.dumps(value)}}}"


@pytest.mark.parametrize("repeat", ["same", "other"])
def test_a_question_answered_twice_in_a_submission_is_refused(synthetic_root, tmp_path, capsys, repeat):
    # json.load keeps the last copy: the repeat would be scored once instead of refused
    answers = EgoSchema(synthetic_root).answers
    first, text = _with_one_repeat(answers, answers[next(iter(answers))] + (repeat == "other"))
    path = tmp_path / "p.json"
    path.write_text(text)
    assert score_main(["egoschema", "--root", str(synthetic_root), "--predictions", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and f"item {first}" in err and "more than once" in err


def test_a_repeated_question_in_the_answers_file_is_refused(real_egoschema_dir, tmp_path):
    answers = json.loads((real_egoschema_dir / "subset_answers.json").read_text())
    first, text = _with_one_repeat(answers, answers[next(iter(answers))])
    path = tmp_path / "subset_answers.json"
    path.write_text(text)
    with pytest.raises(DataError, match="more than once") as e:
        read_answers(path)
    assert (e.value.file, e.value.item, e.value.field) == (path, first, first)


@pytest.mark.parametrize("value", ["0", "2", " 4", "-1"])
def test_an_answer_index_written_as_a_string_is_refused(synthetic_root, tmp_path, capsys, value):
    # lmms-eval's parser reads no letter in "2": scored, every such answer would count wrong (0 %)
    data = EgoSchema(synthetic_root)
    preds = {q: str(a) for q, a in data.answers.items()}
    key = next(iter(preds))
    preds[key] = value
    path = tmp_path / "p.json"
    path.write_text(json.dumps(preds))
    assert score_main(["egoschema", "--root", str(synthetic_root), "--predictions", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and f"item {key}" in err and "--holds indices, or --holds replies" in err
    with pytest.raises(DataError, match="could be an answer index written as a string") as e:  # without questions
        scoring.read_predictions(path)
    assert (e.value.file, e.value.field) == (path, key)


def test_the_user_says_what_a_predictions_file_holds(synthetic_root, tmp_path, capsys):
    """--holds indices: "2" is option 2; --holds replies: every text is a model's reply, "0" included (lmms-eval's
    parser reads no letter in it: unparsable, counted wrong)."""
    data = EgoSchema(synthetic_root)
    uids = list(data.answers)
    as_texts = tmp_path / "indices.json"
    as_texts.write_text(json.dumps({q: str(a) for q, a in data.answers.items()}))
    command = ["egoschema", "--root", str(synthetic_root), "--predictions"]
    assert score_main([*command, str(as_texts), "--holds", "indices"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == 100.0
    replies = tmp_path / "replies.json"
    letters = "ABCDE"
    texts = {q: f"({letters[a]})" for q, a in data.answers.items()}
    texts[uids[0]] = "0"  # a model that answered "0"
    replies.write_text(json.dumps(texts))
    assert score_main([*command, str(replies), "--holds", "replies"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert (scored["correct"], scored["unparsable"]) == (len(uids) - 1, 1)
    assert score_main([*command, str(replies)]) == 2  # auto: "0" is ambiguous
    assert "--holds" in capsys.readouterr().err
    # a file that does not hold what it is said to: named
    assert score_main([*command, str(replies), "--holds", "indices"]) == 2
    assert f"item {uids[1]}" in capsys.readouterr().err
    numbers = tmp_path / "numbers.json"
    numbers.write_text(json.dumps(data.answers))
    assert score_main([*command, str(numbers), "--holds", "replies"]) == 2
    assert "expected a reply text (--holds replies)" in capsys.readouterr().err


def test_a_missing_prediction_and_a_bad_csv_exit_2(synthetic_root, tmp_path, capsys):
    data = EgoSchema(synthetic_root)
    missing = next(iter(data.answers))
    path = tmp_path / "p.json"
    path.write_text(json.dumps({q: a for q, a in data.answers.items() if q != missing}))
    assert score_main(["egoschema", "--root", str(synthetic_root), "--predictions", str(path)]) == 2
    assert f"item {missing}" in capsys.readouterr().err
    bad = tmp_path / "p.csv"
    bad.write_text("uid,answer\nx,1\n")
    assert score_main(["egoschema", "--root", str(synthetic_root), "--predictions", str(bad)]) == 2
    assert "header must be q_uid,answer" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- download

def test_download_from_a_local_copy(real_egoschema_dir, tmp_path, capsys):
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(real_egoschema_dir / "sample/questions_first20.json", source / "questions.json")
    for name in ("subset_answers.json", "uid_to_ego4d.json"):
        shutil.copy(real_egoschema_dir / name, source / name)
    root = tmp_path / "root"
    assert download.main(["egoschema", "--root", str(root), "--source", str(source)]) == 0
    assert "egoschema ready" in capsys.readouterr().out
    for name in (f.path for f in find("egoschema").release.files):
        assert (root / name).read_bytes() == (source / name).read_bytes()
    assert download.main(["egoschema", "--root", str(root), "--source", str(source), "--videos"]) == 2
    assert "docs/egoschema_egocross.md" in capsys.readouterr().err


def test_a_missing_video_is_named_before_the_run(synthetic_root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(synthetic_root, copy)
    victim = EgoSchema(copy).subset()[3]
    EgoSchema(copy).video(victim.q_uid).unlink()
    with pytest.raises(DataError) as e:
        open_egoschema(root=copy)
    assert (e.value.item, e.value.field) == (victim.q_uid, "q_uid") and "not found" in str(e.value)
    assert len(open_egoschema(root=copy, check_videos=False).items()) == 20
