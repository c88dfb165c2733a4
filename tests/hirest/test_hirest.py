"""The HiREST data layer: the real release loads with the counts its README states; bad input names the
file, the query/video and the field."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from spacewalk.benchmarks.hirest.dataset import HiREST, load_moment_gt, load_split
from spacewalk.core.errors import DataError


def test_real_release_counts(real_hirest_root):
    data = HiREST(real_hirest_root)
    # the authors' README: 546 / 292 / 546 queries, 1507 / 477 / 1391 videos, 2891 distractors
    assert [len(data.split(s)) for s in ("train", "val", "test")] == [546, 292, 546]
    assert [len(data.annotations(s)) for s in ("train", "val", "test")] == [1507, 477, 1391]
    assert len(data.negatives) == 2891
    assert len(data.candidates("test")) == 4282  # docs/hirest.md, Format
    assert len(data.moment_gt("test")) == 507 and len(data.moment_gt("val")) == 78
    assert len(set(data.categories.video_to_cat.values())) == 14


def test_real_quirks_load_as_they_are(real_hirest_root):
    data = HiREST(real_hirest_root)
    steps = [s for ann in data.annotations("train") for s in ann.steps]
    assert any(s.start == s.end for s in steps), "zero-length steps are real"
    assert any(s.heading != s.heading.rstrip() for s in steps), "trailing spaces are kept"
    for ann in data.annotations("val"):
        if ann.steps:
            assert ann.steps[0].start == ann.moment[0] and ann.steps[-1].end == ann.moment[1]
        if not ann.clip:
            assert ann.moment == (0.0, ann.duration)


def test_masked_test_split_takes_steps_from_the_formatted_gt(real_hirest_root):
    data = HiREST(real_hirest_root)
    ann = data.annotations("test")[0]
    assert ann.masked and ann.bounds == (0.0, 1.0)
    with pytest.raises(DataError, match="hides moments"):
        _ = ann.moment
    steps = data.step_annotations("test")
    assert len(steps) == 507
    gt = data.moment_gt("test")
    for a in steps:
        assert [(s.start, s.end) for s in a.steps] == list(gt[a.video].bounds)
        assert a.moment == (a.steps[0].start, a.steps[-1].end)
    # val: the split itself carries the steps, equal to its formatted GT
    val_gt = data.moment_gt("val")
    for a in data.step_annotations("val"):
        assert [s.heading for s in a.steps] == [c.sentence for c in val_gt[a.video].captions]


@pytest.fixture
def tiny(tmp_path):
    split = {"Make Tea": {
        "a.mp4": {"relevant": True, "clip": True, "v_duration": 30.0, "bounds": [5, 20],
                  "steps": [{"index": 0, "heading": "boil water ", "absolute_bounds": [5, 12]},
                            {"index": 1, "heading": "pour", "absolute_bounds": [12, 12]},
                            {"index": 2, "heading": "steep", "absolute_bounds": [12, 20]}]},
        "b.mp4": {"relevant": True, "clip": False, "v_duration": 40.0, "bounds": [0, 0], "steps": []}}}
    return tmp_path, split


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def test_tiny_split_loads(tiny):
    tmp, split = tiny
    out = load_split(_write(tmp / "s.json", split))
    a, b = out["Make Tea"]["a.mp4"], out["Make Tea"]["b.mp4"]
    assert a.moment == (5.0, 20.0) and [s.heading for s in a.steps] == ["boil water ", "pour", "steep"]
    assert b.moment == (0.0, 40.0) and a.video_id == "a"


@pytest.mark.parametrize("edit, field, message", [
    (lambda a: a.pop("v_duration"), "v_duration", "missing key"),
    (lambda a: a.update(relevant=1), "relevant", "true or false"),
    (lambda a: a.update(bounds=[5]), "bounds", r"\[start, end\]"),
    (lambda a: a.update(bounds=[20, 5]), "bounds", "start <= end"),
    (lambda a: a["steps"][1].update(index=5), "index", "in order"),
    (lambda a: a["steps"][2].update(absolute_bounds=[13, 20]), "steps", "ends at 12.0 but step 2 starts at 13.0"),
    (lambda a: a["steps"][2].update(absolute_bounds=[12, 21]), "steps", "not the moment"),
    (lambda a: a["steps"][0].update(heading=None), "heading", "expected str"),
    (lambda a: a.update(bounds=[5, 50], steps=[]), "bounds", "ends after the video"),
    # spans that cannot be: a negative start, a step ending before it starts
    (lambda a: a.update(bounds=[-1, 20]), "bounds", "0 <= start"),
    (lambda a: a["steps"][0].update(absolute_bounds=[-1, 12]), "absolute_bounds", "0 <= start"),
    (lambda a: a["steps"][1].update(absolute_bounds=[12, 11]), "absolute_bounds", "start <= end"),
])
def test_bad_annotation_names_file_item_field(tiny, edit, field, message):
    tmp, split = tiny
    bad = copy.deepcopy(split)
    edit(bad["Make Tea"]["a.mp4"])
    path = _write(tmp / "bad.json", bad)
    with pytest.raises(DataError, match=message) as e:
        load_split(path)
    assert e.value.file == path and "a.mp4" in e.value.item and e.value.field == field


def test_whole_video_annotation_must_have_no_moment(tiny):
    tmp, split = tiny
    bad = copy.deepcopy(split)
    bad["Make Tea"]["b.mp4"]["bounds"] = [3, 9]
    with pytest.raises(DataError, match="clip false") as e:
        load_split(_write(tmp / "bad.json", bad))
    assert e.value.field == "bounds" and "b.mp4" in e.value.item


def test_masked_split_must_be_masked(tiny):
    tmp, split = tiny
    with pytest.raises(DataError, match="masked") as e:
        load_split(_write(tmp / "t.json", split), masked=True)
    assert e.value.field == "bounds"


def test_moment_gt_checks(tmp_path):
    good = {"a.mp4": {"captions": [{"start": 1, "end": 4, "sentence": "x"}, {"start": 4, "end": 9, "sentence": "y"}],
                      "bounds": [[1, 4], [4, 9]]}}
    assert load_moment_gt(_write(tmp_path / "g.json", good))["a.mp4"].moment == (1.0, 9.0)
    bad = copy.deepcopy(good)
    bad["a.mp4"]["bounds"] = [[1, 4], [4, 8]]
    with pytest.raises(DataError, match="captions' \\[start, end\\]") as e:
        load_moment_gt(_write(tmp_path / "b.json", bad))
    assert e.value.item == "a.mp4" and e.value.field == "bounds"
    bad = copy.deepcopy(good)
    del bad["a.mp4"]["captions"][1]["sentence"]
    with pytest.raises(DataError, match="missing key") as e:
        load_moment_gt(_write(tmp_path / "c.json", bad))
    assert e.value.item == "a.mp4 caption 1" and e.value.field == "sentence"


def test_masked_test_steps_past_the_video_are_refused(tmp_path):
    """The public test split hides its moments, so step_annotations("test") checks the step GT's against the
    split's v_duration (with the 1 s slack of decoder-estimated durations the real release needs)."""
    split = {"Make Tea": {"a.mp4": {"relevant": True, "clip": True, "v_duration": 30.0, "bounds": [0, 1],
                                    "steps": []}}}
    for name in ("train", "val", "test"):
        _write(tmp_path / f"data/splits/all_data_{name}.json", split if name == "test" else {})
    gt_path = tmp_path / "data/evaluation/formatted_moment_evaluation_gt.json"

    def gt(end):
        return {"a.mp4": {"captions": [{"start": 5, "end": 12, "sentence": "x"},
                                       {"start": 12, "end": end, "sentence": "y"}], "bounds": [[5, 12], [12, end]]}}

    _write(gt_path, gt(30.8))  # within the slack: the real test GT has two such videos
    assert HiREST(tmp_path).step_annotations("test")[0].moment == (5.0, 30.8)
    _write(gt_path, gt(32))
    with pytest.raises(DataError, match=r"steps end at 32.0, after the video \(30.0 s") as e:
        HiREST(tmp_path).step_annotations("test")
    assert e.value.file == gt_path and e.value.item == "a.mp4" and e.value.field == "bounds"


def test_root_errors(tmp_path, real_hirest_root):
    with pytest.raises(DataError, match="not a HiREST root"):
        HiREST(tmp_path)
    root = tmp_path / "copy"
    shutil.copytree(real_hirest_root, root)
    (root / "data/splits/all_data_val.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON") as e:
        HiREST(root).split("val")
    assert str(e.value.file).endswith("all_data_val.json")
    with pytest.raises(DataError, match="unknown split"):
        HiREST(root).split("dev")
