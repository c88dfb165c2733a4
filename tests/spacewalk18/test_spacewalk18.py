"""The data layer: loading the official layout, and every validation error naming file, item and field."""

from __future__ import annotations

import json

import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, Spacewalk18
from spacewalk.core.errors import DataError


def test_real_release_loads(real_spacewalk18_root):
    ds = Spacewalk18(real_spacewalk18_root)
    assert [len(ds.splits[s]) for s in ("train", "val", "test")] == [10, 2, 6]
    assert sum(r.num_classes - 1 for r in ds.recordings.values()) == 455  # steps in all, per the paper
    rec = ds.recordings["02282021"]
    assert rec.steps[0].caption == "Irrelevant" and rec.steps[0].animation_start is None
    assert rec.segments[0].label == -1 and rec.segments[-1].label == -1
    assert len(rec.transcript) == 5125
    samples = ds.step_samples("test")
    assert list(samples) == ds.splits["test"] and all(len(s) == 2000 for s in samples.values())
    questions = ds.questions()
    assert len(questions) == 376
    assert sum(q.type == "miscellaneous" for q in questions) == 27
    assert {len(v) for v in ds.retrieval_samples("val").values()} == {2000}


def test_tiny_root_loads(tiny_root):
    ds = Spacewalk18(tiny_root)
    rec = ds.recordings["01012020"]
    assert rec.num_classes == 3 and rec.duration == 120.0 and rec.num_frames == round(120 * FPS)
    assert rec.label_at_frame(0) == -1 and rec.label_at_frame(round(15 * FPS)) == 1
    assert rec.transcript[1].text == "hatch is open, caf\u00e9 time"  # cp1252 decoding
    assert len(ds.step_samples("train")["01012020"]) == 30


def _edit(root, rel, fn):
    path = root / rel
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _expect(root, *fragments):
    with pytest.raises(DataError) as info:
        ds = Spacewalk18(root)
        for split in ("train", "val", "test"):
            ds.step_samples(split)
            for rec in ds.split(split):
                rec.transcript  # noqa: B018 - transcripts are read on first use
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return str(info.value)


def test_missing_file(tiny_root):
    (tiny_root / "data/steps.json").unlink()
    _expect(tiny_root, "steps.json", "file not found")


def test_missing_root(tmp_path):
    with pytest.raises(DataError, match="dataset root not found"):
        Spacewalk18(tmp_path / "nowhere")


def test_not_json(tiny_root):
    (tiny_root / "tasks/split.json").write_text("{not json")
    _expect(tiny_root, "split.json", "not valid JSON")


def test_missing_key(tiny_root):
    _edit(tiny_root, "data/annotation.json", lambda d: d["02022020"][3].pop("frame_end"))
    _expect(tiny_root, "annotation.json", "02022020 segment 3", "'frame_end'", "missing key")


def test_wrong_type(tiny_root):
    def edit(d):
        d["01012020"][1]["label"] = "1"
    _edit(tiny_root, "data/annotation.json", edit)
    _expect(tiny_root, "annotation.json", "01012020 segment 1", "'label'", "expected int or float")


def test_label_out_of_range(tiny_root):
    def edit(d):
        d["03032020"][3]["label"] = 3
    _edit(tiny_root, "data/annotation.json", edit)
    _expect(tiny_root, "03032020 segment 3", "'label'", "outside -1..2")


@pytest.mark.parametrize("shift,word", [(-1.0, "overlaps"), (1.0, "gap")])
def test_non_contiguous_segments(tiny_root, shift, word):
    def edit(d):
        d["01012020"][2]["video_start"] += shift
        d["01012020"][2]["frame_start"] = round(d["01012020"][2]["video_start"] * FPS)
    _edit(tiny_root, "data/annotation.json", edit)
    _expect(tiny_root, "01012020 segment 2", "'frame_start'", word)


def test_adjacent_equal_labels(tiny_root):
    def edit(d):
        d["01012020"][2]["label"] = 1
    _edit(tiny_root, "data/annotation.json", edit)
    _expect(tiny_root, "01012020 segment 2", "same label")


def test_frames_must_follow_seconds(tiny_root):
    def edit(d):
        d["01012020"][1]["video_end"] = 41.0
        d["01012020"][2]["video_start"] = 41.0
    _edit(tiny_root, "data/annotation.json", edit)
    _expect(tiny_root, "01012020 segment 1", "'frame_end'", "round(41.0")


def test_first_segment_must_be_unannotated(tiny_root):
    def edit(d):
        d["01012020"][0]["label"] = 2
    _edit(tiny_root, "data/annotation.json", edit)
    _expect(tiny_root, "01012020 segment 0", "'label'", "must be -1")


def test_sample_outside_video(tiny_root):
    def edit(d):
        d["01012020"][-1]["frame_index"] = 10**6
        d["01012020"][-1]["timestamp"] = 10**6 / FPS
    _edit(tiny_root, "tasks/step_recognition/train.json", edit)
    _expect(tiny_root, "train.json", "01012020 sample 29", "'frame_index'", "outside the video")


def test_sample_with_wrong_label(tiny_root):
    def edit(d):
        d["02022020"][0]["label"] = 2
    _edit(tiny_root, "tasks/step_recognition/val.json", edit)
    _expect(tiny_root, "val.json", "02022020 sample 0", "'label'", "annotation has")


def test_sample_in_unannotated_segment(tiny_root):
    def edit(d):
        d["03032020"][0].update(frame_index=5, timestamp=5 / FPS, label=-1)
    _edit(tiny_root, "tasks/step_recognition/test.json", edit)
    _expect(tiny_root, "test.json", "03032020 sample 0", "never sampled")


def test_samples_missing_video(tiny_root):
    _edit(tiny_root, "tasks/step_recognition/test.json", lambda d: d.pop("03032020"))
    _expect(tiny_root, "test.json", "03032020", "has no samples")


def test_split_video_without_annotation(tiny_root):
    _edit(tiny_root, "tasks/split.json", lambda d: d["test"].append("04042020"))
    _expect(tiny_root, "04042020", "has no steps")


def test_steps_out_of_order(tiny_root):
    def edit(d):
        d["01012020"][1]["index"] = 2
    _edit(tiny_root, "data/steps.json", edit)
    _expect(tiny_root, "steps.json", "01012020 step 1", "'index'")


def test_missing_transcript(tiny_root):
    (tiny_root / "data/transcripts/02022020.csv").unlink()
    _expect(tiny_root, "02022020.csv", "transcript file not found")


def test_unreadable_csv(tiny_root):
    (tiny_root / "data/transcripts/01012020.csv").write_bytes(b"Sentence,Global start,Global end\n\x81bad,1,2\n")
    _expect(tiny_root, "01012020.csv", "unreadable CSV")


def test_csv_bad_number(tiny_root):
    (tiny_root / "data/transcripts/01012020.csv").write_text("Sentence,Global start,Global end\nhello,one,2\n",
                                                              encoding="cp1252")
    _expect(tiny_root, "01012020.csv", "01012020 line 2", "'Global start'", "not a number")


def test_csv_bad_header(tiny_root):
    (tiny_root / "data/transcripts/01012020.csv").write_text("text,start,end\nhello,1,2\n", encoding="cp1252")
    _expect(tiny_root, "01012020.csv", "header must be")
