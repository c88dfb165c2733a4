"""Official prediction files: round trips, and every validation error names file, video, entry and field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import Question, RetrievalSample, Spacewalk18
from spacewalk.benchmarks.spacewalk18.scoring.predictions import (
    read_qa_predictions,
    read_retrieval_predictions,
    read_step_predictions,
    write_qa_predictions,
    write_retrieval_predictions,
    write_step_predictions,
)
from spacewalk.core.errors import DataError

VIDEO = "03032020"  # the test video of conftest's tiny root: K + 1 = 3, 30 samples


@pytest.fixture
def split(tiny_root):
    ds = Spacewalk18(tiny_root)
    return ds.recordings, ds.step_samples("test")


def valid_file(samples, with_scores=True):
    rng = np.random.default_rng(0)
    entries = [{"prediction": int(rng.integers(0, 3))} for _ in samples[VIDEO]]
    if with_scores:
        for entry in entries:
            entry["score"] = rng.random(3).tolist()
    return {VIDEO: entries}


def write_raw(path, obj):
    path.write_text(json.dumps(obj))  # allow_nan: a hand-written file may hold NaN / Infinity
    return path


@pytest.mark.parametrize("with_scores", [True, False])
def test_step_round_trip(tmp_path, split, with_scores):
    recordings, samples = split
    rng = np.random.default_rng(1)
    predictions = {VIDEO: rng.integers(0, 3, len(samples[VIDEO]))}
    scores = {VIDEO: rng.random((len(samples[VIDEO]), 3))} if with_scores else None
    path = write_step_predictions(tmp_path / "p.json", predictions, scores)
    read = read_step_predictions(path, recordings, samples)
    np.testing.assert_array_equal(read.predictions[VIDEO], predictions[VIDEO])
    if with_scores:
        np.testing.assert_array_equal(read.scores[VIDEO], scores[VIDEO])  # floats survive JSON exactly
    else:
        assert read.scores is None
    assert not list(tmp_path.glob(".*tmp"))  # the atomic writer left nothing behind


def test_integer_valued_scores_are_numbers(tmp_path, split):
    recordings, samples = split
    raw = valid_file(samples)
    raw[VIDEO][0]["score"] = [0, 1, 0]
    read = read_step_predictions(write_raw(tmp_path / "p.json", raw), recordings, samples)
    assert read.scores[VIDEO][0].tolist() == [0.0, 1.0, 0.0]


def _set(raw, key, value, entry=4):
    raw[VIDEO][entry][key] = value
    return raw


def _drop(raw, key, entry):
    del raw[VIDEO][entry][key]
    return raw


STEP_ERRORS = {
    "not an object": (lambda r: [r], None, None, "expected an object"),
    "missing video": (lambda r: {}, VIDEO, None, "no predictions for video"),
    "extra video": (lambda r: {**r, "12345678": []}, "12345678", None, "not in this split"),
    "too few entries": (lambda r: {VIDEO: r[VIDEO][:-1]}, VIDEO, None, "29 entries for 30 samples"),
    "too many entries": (lambda r: {VIDEO: r[VIDEO] + r[VIDEO][:1]}, VIDEO, None, "31 entries for 30 samples"),
    "entries not a list": (lambda r: {VIDEO: {"0": 1}}, VIDEO, None, "expected a list"),
    "entry not an object": (lambda r: {VIDEO: [1] + r[VIDEO][1:]}, f"{VIDEO} entry 0", None, "expected an object"),
    "prediction missing": (lambda r: _drop(r, "prediction", 2), f"{VIDEO} entry 2", "prediction", "missing key"),
    "prediction float": (lambda r: _set(r, "prediction", 1.0), f"{VIDEO} entry 4", "prediction", "integer"),
    "prediction bool": (lambda r: _set(r, "prediction", True), f"{VIDEO} entry 4", "prediction", "integer"),
    "prediction string": (lambda r: _set(r, "prediction", "1"), f"{VIDEO} entry 4", "prediction", "integer"),
    "prediction negative": (lambda r: _set(r, "prediction", -1), f"{VIDEO} entry 4", "prediction", "outside 0..2"),
    "prediction too large": (lambda r: _set(r, "prediction", 3), f"{VIDEO} entry 4", "prediction", "outside 0..2"),
    "score too short": (lambda r: _set(r, "score", [0.1, 0.2]), f"{VIDEO} entry 4", "score", "list of 3 numbers"),
    "score too long": (lambda r: _set(r, "score", [0.1] * 4), f"{VIDEO} entry 4", "score", "got 4 values"),
    "score not a list": (lambda r: _set(r, "score", 0.5), f"{VIDEO} entry 4", "score", "list of 3 numbers"),
    "score NaN": (lambda r: _set(r, "score", [0.1, float("nan"), 0.2]), f"{VIDEO} entry 4", "score", "not finite"),
    "score infinite": (lambda r: _set(r, "score", [float("-inf"), 0.1, 0.2]), f"{VIDEO} entry 4", "score",
                       "not finite"),
    "score string": (lambda r: _set(r, "score", [0.1, "0.2", 0.3]), f"{VIDEO} entry 4", "score", "not a number"),
    "score null": (lambda r: _set(r, "score", [0.1, None, 0.3]), f"{VIDEO} entry 4", "score", "not a number"),
    "score bool": (lambda r: _set(r, "score", [0.1, False, 0.3]), f"{VIDEO} entry 4", "score", "not a number"),
    "score missing later": (lambda r: _drop(r, "score", 7), f"{VIDEO} entry 7", "score", "some entries but not"),
}


@pytest.mark.parametrize("case", list(STEP_ERRORS))
def test_step_validation_errors(tmp_path, split, case):
    recordings, samples = split
    edit, item, field, message = STEP_ERRORS[case]
    path = write_raw(tmp_path / "p.json", edit(valid_file(samples)))
    with pytest.raises(DataError, match=message) as info:
        read_step_predictions(path, recordings, samples)
    assert info.value.file == path
    assert info.value.item == item
    assert info.value.field == field
    assert str(path) in str(info.value)


def test_score_present_later_but_absent_first(tmp_path, split):
    recordings, samples = split
    raw = valid_file(samples, with_scores=False)
    raw[VIDEO][3]["score"] = [0.1, 0.2, 0.3]
    with pytest.raises(DataError, match="present here, absent earlier") as info:
        read_step_predictions(write_raw(tmp_path / "p.json", raw), recordings, samples)
    assert (info.value.item, info.value.field) == (f"{VIDEO} entry 3", "score")


def test_unreadable_file(tmp_path, split):
    recordings, samples = split
    with pytest.raises(DataError, match="file not found"):
        read_step_predictions(tmp_path / "missing.json", recordings, samples)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DataError, match="not valid JSON"):
        read_step_predictions(tmp_path / "bad.json", recordings, samples)


def test_write_step_predictions_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="integer"):
        write_step_predictions(tmp_path / "p.json", {VIDEO: np.array([0.5, 1.0])})
    with pytest.raises(ValueError, match="finite"):
        write_step_predictions(tmp_path / "p.json", {VIDEO: np.array([0, 1])}, {VIDEO: np.array([[0, np.nan]] * 2)})
    with pytest.raises(ValueError, match="shape"):
        write_step_predictions(tmp_path / "p.json", {VIDEO: np.array([0, 1])}, {VIDEO: np.zeros((3, 2))})
    with pytest.raises(ValueError, match="different videos"):
        write_step_predictions(tmp_path / "p.json", {VIDEO: np.array([0, 1])}, {})
    assert not (tmp_path / "p.json").exists()


# --------------------------------------------------------------------------------------------------
# video QA


QUESTIONS = [Question("v", i, "?", ("a", "b", "c", "d"), i % 4, 0.0, 3600.0, "when task") for i in range(5)]


def test_qa_round_trip(tmp_path):
    path = write_qa_predictions(tmp_path / "qa.json", np.array([0, 1, 2, 3, 0]))
    np.testing.assert_array_equal(read_qa_predictions(path, QUESTIONS), [0, 1, 2, 3, 0])


@pytest.mark.parametrize("raw, item, message", [
    ({"0": 1}, None, "expected a list"),
    ([0, 1, 2, 3], None, "4 predictions for 5 questions"),
    ([0, 1, 2, 3, 0, 1], None, "6 predictions for 5 questions"),
    ([0, 1, 4, 3, 0], "2 (question 2)", "outside 0..3"),
    ([0, 1, -1, 3, 0], "2 (question 2)", "outside 0..3"),
    ([0, 1, 2.0, 3, 0], "2 (question 2)", "integer"),
    ([0, 1, "C", 3, 0], "2 (question 2)", "integer"),
    ([0, 1, None, 3, 0], "2 (question 2)", "integer"),
])
def test_qa_validation_errors(tmp_path, raw, item, message):
    path = write_raw(tmp_path / "qa.json", raw)
    with pytest.raises(DataError, match=message) as info:
        read_qa_predictions(path, QUESTIONS)
    assert (info.value.file, info.value.item) == (path, item)


# --------------------------------------------------------------------------------------------------
# intra-video retrieval

RETRIEVAL = {"a": [RetrievalSample(i, 10, (5, 15), i % 2) for i in range(3)],
             "b": [RetrievalSample(0, 10, (5, 15), 1)]}


def test_retrieval_round_trip(tmp_path):
    path = write_retrieval_predictions(tmp_path / "r.json", {"a": [0, 1, 1], "b": np.array([1])})
    read = read_retrieval_predictions(path, RETRIEVAL)
    assert {v: p.tolist() for v, p in read.items()} == {"a": [0, 1, 1], "b": [1]}


@pytest.mark.parametrize("raw, item, message", [
    ([0, 1], None, "expected an object"),
    ({"a": [0, 1, 1]}, "b", "no predictions for video"),
    ({"a": [0, 1, 1], "b": [1], "c": [0]}, "c", "not in this split"),
    ({"a": [0, 1], "b": [1]}, "a", "2 predictions for 3 samples"),
    ({"a": [0, 2, 1], "b": [1]}, "a entry 1", "expected 0 or 1"),
    ({"a": [0, True, 1], "b": [1]}, "a entry 1", "expected 0 or 1"),
    ({"a": [0, 1.0, 1], "b": [1]}, "a entry 1", "expected 0 or 1"),
])
def test_retrieval_validation_errors(tmp_path, raw, item, message):
    path = write_raw(tmp_path / "r.json", raw)
    with pytest.raises(DataError, match=message) as info:
        read_retrieval_predictions(path, RETRIEVAL)
    assert (info.value.file, info.value.item) == (path, item)


def test_write_retrieval_rejects_non_binary(tmp_path):
    with pytest.raises(ValueError, match="0/1"):
        write_retrieval_predictions(tmp_path / "r.json", {"a": [0, 2]})
