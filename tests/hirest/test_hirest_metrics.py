"""HiREST official scoring (spacewalk/benchmarks/hirest/scoring.py, captioning_metrics.py): hand-computed cases,
the real ground truth scored against itself, and bad input.

Expected numbers marked "official" are what the authors' code prints on the same input; each names the
command that regenerates it (measurements/hirest_official_constants.py, run against a checkout of
github.com/j-min/HiREST). The others are derived in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spacewalk.benchmarks.hirest import scoring as hm
from spacewalk.core.errors import DataError

M = (0, 100)  # the GT moment of the hand-made segmentation cases


@pytest.fixture(scope="module")
def hirest_data(real_hirest_root) -> Path:
    return real_hirest_root / "data"


def load(path: Path):
    return json.loads(path.read_text())


def tiny_categories() -> hm.Categories:
    return hm.Categories({"make tea": "Food", "fix bike": "Cars", "draw": "Arts"},
                         {"a.mp4": "Food", "b.mp4": "Cars", "c.mp4": "Food"}, "cats.json")


# --------------------------------------------------------------------------------------------------
# IoU


def test_interval_iou_by_hand():
    assert hm.interval_iou([0, 10], [5, 15]) == pytest.approx(5 / 15)
    assert hm.interval_iou([0, 10], [2, 4]) == pytest.approx(0.2)
    assert hm.interval_iou([0, 1], [2, 3]) == 0
    assert hm.interval_iou([3, 3], [0, 10]) == 0  # a zero-length step is never covered
    # the union is min(hull, len1 + len2); for reversed intervals the second term is what the authors get
    assert hm.interval_iou([10, 5], [0, 20]) == 0


def test_thresholds_inclusive_for_moments_strict_for_segments():
    # With the 1e-8 in the denominator a geometric half overlap is just below 0.5 at ordinary lengths...
    assert hm.interval_iou([0, 10], [0, 5]) < 0.5
    assert not hm.moment_hit([0, 10], [0, 5], 0.5)
    # ...and exactly 0.5 where 1e-8 is below half an ulp of the union (2**28 s): the only place where
    # inclusive (moment retrieval) and strict (segmentation) differ.
    big, half = [0, 2.0 ** 28], [0, 2.0 ** 27]
    assert hm.interval_iou(big, half) == 0.5
    assert hm.moment_hit(big, half, 0.5)
    assert hm.segment_recall_precision([half], [big], 0.5) == (0.0, 0.0)
    # 0.7 geometrically (a 7 s moment inside 10 s) is 0.6999999993: a miss at 0.7 in both tasks
    assert not hm.moment_hit([0, 10], [0, 7], 0.7)


# --------------------------------------------------------------------------------------------------
# video retrieval


def test_ranking_ties_by_video_name_descending():
    assert hm.rank_videos(["a", "b", "c", "d"], [1, 2, 2, 1.0]) == ["c", "b", "d", "a"]
    assert hm.rank_videos(["a", "b", "c", "d"], [1, 2, 2, 1.0], top=3) == ["c", "b", "d"]
    hits = hm.retrieval_hits(hm.rank_videos(["a", "b", "c", "d"], [1, 2, 2, 1]), {"b"}, ks=(1, 2))
    assert hits == {1: False, 2: True}


def test_video_retrieval_per_category():
    gt = {"make tea": {"a.mp4": {"clip": False, "bounds": [0, 0]}},
          "fix bike": {"b.mp4": {"clip": True, "bounds": [3, 9]}, "c.mp4": {"clip": False, "bounds": [0, 0]}}}
    videos = [f"{i}.mp4" for i in "abcdefg"]
    # make tea: a ties with g at the top and loses the tie (names descending): rank 2
    # fix bike: b and c at ranks 6 and 7 of 7
    pred = {"make tea": {"videos": videos, "scores": [5, 1, 1, 1, 1, 1, 5]},
            "fix bike": {"videos": videos, "scores": [9, 1, 0, 9, 9, 9, 9]}, "extra query": {}}
    result = hm.score_video_retrieval(pred, gt, tiny_categories())
    assert result["all"] == {"total_prompt_count": 2, "R@1": 0.0, "R@5": 50.0, "R@10": 100.0, "R@50": 100.0}
    assert result["per_category"] == {
        "Cars": {"total_prompt_count": 1, "R@1": 0.0, "R@5": 0.0, "R@10": 100.0, "R@50": 100.0},
        "Food": {"total_prompt_count": 1, "R@1": 0.0, "R@5": 100.0, "R@10": 100.0, "R@50": 100.0}}


# --------------------------------------------------------------------------------------------------
# moment retrieval


def test_moment_retrieval_shifted_bounds():
    gt = {"make tea": {"a.mp4": {"clip": True, "bounds": [10, 20]}, "c.mp4": {"clip": False, "bounds": [0, 0]}},
          "fix bike": {"b.mp4": {"clip": True, "bounds": [0, 100]}}}
    # [12, 20] vs [10, 20]: IoU 0.8 (hit at both); [0, 60] vs [0, 100]: IoU 0.6 (hit at 0.5 only)
    pred = {"make tea": {"a.mp4": {"bounds": [12, 20]}}, "fix bike": {"b.mp4": {"bounds": [0, 60]}}}
    result = hm.score_moment_retrieval(pred, gt, tiny_categories())
    assert result["all"] == {"total_videos": 2, "R@0.5": 100.0, "R@0.7": 50.0}
    assert result["per_category"]["Cars"] == {"total_videos": 1, "R@0.5": 100.0, "R@0.7": 0.0}
    # reversed bounds (the authors' independent start/end heads can produce them) are refused, or, asked for, a
    # miss as in the authors' code
    pred["fix bike"]["b.mp4"]["bounds"] = [60, 0]
    with pytest.raises(DataError, match="ends before it starts"):
        hm.score_moment_retrieval(pred, gt, tiny_categories())
    assert hm.score_moment_retrieval(pred, gt, tiny_categories(), allow_reversed=True)["all"]["R@0.5"] == 50.0


@pytest.mark.parametrize("bounds, message", [
    ([20, 12], "ends before it starts"),
    ([-2, 20], "before the video's start"),
    ([12, 31.5], r"ends after the video \(30.0 s\)"),
])
def test_moment_predictions_that_cannot_be_are_refused(tmp_path, bounds, message):
    gt = {"make tea": {"a.mp4": {"clip": True, "bounds": [10, 20], "v_duration": 30.0}}}
    path = tmp_path / "pred.json"
    path.write_text(json.dumps({"make tea": {"a.mp4": {"bounds": bounds}}}))
    with pytest.raises(DataError, match=message) as info:
        hm.score_moment_retrieval(path, gt, tiny_categories())
    assert info.value.file == str(path) and "make tea" in info.value.item and "a.mp4" in info.value.item
    assert info.value.field == "bounds"
    # within the 1 s slack of the durations (decoder estimates) and exactly at the video's end: scored
    for fine in ([12, 30.0], [12, 30.9], [20, 20]):
        path.write_text(json.dumps({"make tea": {"a.mp4": {"bounds": fine}}}))
        assert hm.score_moment_retrieval(path, gt, tiny_categories())["all"]["total_videos"] == 1


@pytest.mark.parametrize("segment, message", [([5, 3], "ends before it starts"), ([-1, 3], "before the video's start")])
def test_segment_predictions_that_cannot_be_are_refused(tmp_path, segment, message):
    steps = {"a.mp4": {"bounds": [[0, 5], [5, 9]]}}
    path = tmp_path / "pred.json"
    path.write_text(json.dumps({"a.mp4": {"bounds": [[0, 2], segment]}}))
    for preprocess in (True, False):
        with pytest.raises(DataError, match=message) as info:
            hm.score_moment_segmentation(path, steps, tiny_categories(), preprocess=preprocess)
        assert info.value.file == str(path) and info.value.item == "a.mp4" and info.value.field == "bounds[1]"
    if segment[0] >= 0:  # asked for, a reversed segment goes through the authors' arithmetic
        hm.score_moment_segmentation(path, steps, tiny_categories(), allow_reversed=True)


@pytest.mark.parametrize("scorer, gt, field", [
    (hm.score_moment_retrieval, {"q": {"a.mp4": {"clip": True, "bounds": [20, 10]}}}, "bounds"),
    (hm.score_moment_retrieval, {"q": {"a.mp4": {"clip": True, "bounds": [-3, 10]}}}, "bounds"),
    (hm.score_moment_segmentation, {"a.mp4": {"bounds": [[0, 5], [9, 5]]}}, "bounds[1]"),
    (hm.score_moment_segmentation, {"a.mp4": {"bounds": [[-1, 5], [5, 9]]}}, "bounds[0]"),
    # a split file's moment past its own v_duration (end 99999 of a 207 s video would be scored as given)
    (hm.score_moment_retrieval, {"q": {"a.mp4": {"clip": True, "bounds": [50, 99999], "v_duration": 207.08}}},
     "bounds"),
    (hm.score_video_retrieval, {"q": {"a.mp4": {"clip": True, "bounds": [50, 99999], "v_duration": 207.08}}},
     "bounds"),
])
def test_ground_truth_spans_that_cannot_be_are_refused(tmp_path, scorer, gt, field):
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(gt))
    with pytest.raises(DataError, match="ends before it starts|before the video's start|ends after the video "
                                        r"\(207.08 s\)") as info:
        scorer({}, path, tiny_categories())
    assert info.value.file == str(path) and "a.mp4" in info.value.item and info.value.field == field


# --------------------------------------------------------------------------------------------------
# segmentation post-processing (the authors' --preprocess_moment_bounds)


@pytest.mark.parametrize("segments, expected", [
    # a contiguous partition with an odd number of steps is unchanged
    ([[0, 10], [10, 20], [20, 100]], [[0, 10], [10, 20], [20, 100]]),
    # even: the inner steps [10, 20] and [20, 30] touch, the later one is picked first and the earlier one
    # suppressed, and the gap fill then merges it with the first step (dropped for touching m0)
    ([[0, 10], [10, 20], [20, 30], [30, 100]], [[0, 20], [20, 30], [30, 100]]),
    # segments not strictly inside the moment are dropped; gaps are filled
    ([[-5, 10], [50, 120], [20, 30]], [[0, 20], [20, 30], [30, 100]]),
    ([[10, 20], [40, 50]], [[0, 10], [10, 20], [20, 40], [40, 50], [50, 100]]),
    # a gap below 1 s counts as overlap (pixel boxes: +1); a gap of exactly 1 s does not
    ([[10, 20], [20.5, 30]], [[0, 20.5], [20.5, 30], [30, 100]]),
    ([[10, 20], [21, 30]], [[0, 10], [10, 20], [20, 21], [21, 30], [30, 100]]),
    # overlapping: the later one in the file wins
    ([[10, 30], [20, 40]], [[0, 20], [20, 40], [40, 100]]),
    ([[20, 40], [10, 30]], [[0, 10], [10, 30], [30, 100]]),
    # nothing survives: the whole moment
    ([[0, 50], [50, 100]], [[0, 100]]),
    ([], [[0, 100]]),
    # zero-length and reversed segments go through the same arithmetic (a zero-length box has area 2)
    ([[40, 40]], [[0, 40.0], [40.0, 40.0], [40.0, 100]]),
])
def test_preprocess_segments(segments, expected):
    assert hm.preprocess_segments(segments, M) == expected


def test_nms_visiting_orders():
    # np.argsort(np.ones(n)) as numpy 1.23.5 returns it (its scalar introsort)
    assert hm.constant_key_argsort(16) == list(range(16))
    assert hm.constant_key_argsort(20) == [0, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 18, 19]
    assert hm.constant_key_argsort(40) == [0, 22, 23, 24, 25, 26, 27, 28, 21, 29, 31, 32, 33, 34, 35, 36, 37, 30, 20,
                                           19, 18, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 38, 39]
    # identity is what the SIMD sorts of current numpy give (numpy 2.4 on AVX2 / AVX-512 CPUs)
    chain = [(float(i), float(i + 1)) for i in range(20)]  # 1 s steps, each touching the next
    # identity: picks from the last, each pick suppresses its left neighbour
    assert hm.suppress_overlaps(chain, "identity") == chain[::-2]
    # introsort visits 19, 18, 1, 2, ..., 17, 0: picks 19 (drops 18), then 1 (drops 0 and 2), 3, ..., 17
    assert hm.suppress_overlaps(chain, "introsort") == [chain[19]] + chain[1:18:2]
    with pytest.raises(ValueError):
        hm.suppress_overlaps(chain, "mergesort")


def test_segment_recall_precision_many_to_many():
    steps = [[0, 10], [10, 25]]
    # second prediction vs second step: IoU 10 / 15 = 0.67
    assert hm.segment_recall_precision([[0, 10], [10, 20]], steps, 0.5) == (1.0, 1.0)
    assert hm.segment_recall_precision([[0, 10], [10, 20]], steps, 0.7) == (0.5, 0.5)
    # one prediction may cover one step twice over: both predictions count, the step once
    assert hm.segment_recall_precision([[0, 10], [0, 10], [50, 60]], steps, 0.5) == (0.5, 2 / 3)
    assert hm.segment_recall_precision([], steps, 0.5) == (0.0, 0.0)


def test_segmentation_file_level_with_and_without_preprocessing():
    # (a's moment starts at 5 s so that a segment can start before it without a negative time, which is refused)
    gt = {"a.mp4": {"bounds": [[5, 15], [15, 25], [25, 35]]}, "b.mp4": {"bounds": [[5, 50]]}}
    pred = {"a.mp4": {"bounds": [[2, 15], [15, 25], [25, 38]]}, "b.mp4": {"bounds": []}}
    raw = hm.score_moment_segmentation(pred, gt, tiny_categories(), preprocess=False)
    # a: IoU 10/13 = 0.77 for the outer two, 1 for the middle: all covered; b: nothing predicted
    assert raw["all"] == {"total": 2, "recall": {"0.5": 50.0, "0.7": 50.0}, "precision": {"0.5": 50.0, "0.7": 50.0}}
    fixed = hm.score_moment_segmentation(pred, gt, tiny_categories())
    # preprocessing clips a to [5, 15], [15, 25], [25, 35] and turns b's empty list into [[5, 50]]
    assert fixed["all"]["recall"] == {"0.5": 100.0, "0.7": 100.0}
    assert fixed["per_category"]["Cars"] == {"total": 1, "recall": {"0.5": 100.0, "0.7": 100.0},
                                             "precision": {"0.5": 100.0, "0.7": 100.0}}


# --------------------------------------------------------------------------------------------------
# bad input


def test_bad_predictions_name_file_item_and_field(tmp_path):
    split = {"make tea": {"a.mp4": {"clip": True, "bounds": [10, 20]}}}
    cats = tiny_categories()
    path = tmp_path / "pred.json"

    def error_of(scorer, pred, gt=split):
        path.write_text(json.dumps(pred))
        with pytest.raises(DataError) as info:
            scorer(path, gt, cats)
        return str(info.value)

    msg = error_of(hm.score_video_retrieval, {})
    assert str(path) in msg and "make tea" in msg and "no prediction" in msg
    msg = error_of(hm.score_video_retrieval, {"make tea": {"videos": ["a.mp4", "b.mp4"], "scores": [1]}})
    assert "make tea" in msg and "'scores'" in msg and "1 scores for 2 videos" in msg
    msg = error_of(hm.score_video_retrieval, {"make tea": {"videos": ["a.mp4"], "scores": [True]}})
    assert "'scores'" in msg
    msg = error_of(hm.score_video_retrieval, {"make tea": {"videos": ["a.mp4", "a.mp4"], "scores": [1, 2]}})
    assert "listed twice" in msg and "'videos'" in msg
    msg = error_of(hm.score_video_retrieval, {"make tea": {"scores": [1]}})
    assert "'videos'" in msg and "missing" in msg
    msg = error_of(hm.score_moment_retrieval, {"make tea": {}})
    assert "a.mp4" in msg and "make tea" in msg
    msg = error_of(hm.score_moment_retrieval, {"make tea": {"a.mp4": {"bounds": [1, "2"]}}})
    assert "'bounds'" in msg and "a.mp4" in msg and str(path) in msg
    msg = error_of(hm.score_moment_retrieval, {"make tea": {"a.mp4": {"bounds": [float("nan"), 2]}}})
    assert "finite" in msg

    steps = {"a.mp4": {"bounds": [[0, 5], [5, 9]], "captions": [{"sentence": "x"}, {"sentence": "y"}]}}
    msg = error_of(hm.score_moment_segmentation, {"a.mp4": {"bounds": [[0, 5], [5]]}}, steps)
    assert "a.mp4" in msg and "'bounds[1]'" in msg
    msg = error_of(hm.score_moment_segmentation, {"b.mp4": {"bounds": []}}, steps)
    assert "a.mp4" in msg and "no prediction" in msg
    msg = error_of(hm.score_step_captioning, {"a.mp4": {"captions": [{"sentence": "x"}]}}, steps)
    assert "a.mp4" in msg and "'captions'" in msg and "at least 2" in msg
    msg = error_of(hm.score_step_captioning, {"a.mp4": {"captions": [{"sentence": "x"}, {"text": "y"}]}}, steps)
    assert "'captions[1].sentence'" in msg


def test_bad_ground_truth_and_categories(tmp_path):
    cats = tiny_categories()
    with pytest.raises(DataError, match="split file"):  # the step GT given where a split file is expected
        hm.score_moment_retrieval({}, {"a.mp4": {"bounds": [[0, 1]], "captions": []}}, cats)
    with pytest.raises(DataError, match="video_to_cat"):
        hm.score_moment_segmentation({"z.mp4": {"bounds": []}}, {"z.mp4": {"bounds": [[0, 1]]}}, cats)
    (tmp_path / "cats.json").write_text(json.dumps({"prompt_to_cat": {}}))
    with pytest.raises(DataError, match="video_to_cat"):
        hm.load_categories(tmp_path / "cats.json")
    with pytest.raises(DataError, match="file not found"):
        hm.score_video_retrieval(tmp_path / "missing.json", {"q": {"a.mp4": {"clip": False, "bounds": [0, 0]}}},
                                 cats)


# --------------------------------------------------------------------------------------------------
# the real ground truth against itself


def test_real_video_retrieval_gt_scores_100(hirest_data):
    negatives = [v for entry in load(hirest_data / "splits/all_data_test_negative_samples.json").values()
                 for v in entry]
    for split in ("val", "test"):
        gt = load(hirest_data / f"splits/all_data_{split}.json")
        candidates = list(dict.fromkeys([v for videos in gt.values() for v in videos]
                                        + (negatives if split == "test" else [])))
        if split == "test":
            assert len(candidates) == 4282
        # every candidate scored, the query's videos highest: every query a hit at 1
        pred = {q: {"videos": candidates, "scores": [float(v in videos) for v in candidates]}
                for q, videos in gt.items()}
        result = hm.score_video_retrieval(pred, gt, hirest_data / "evaluation/categories.json")
        assert result["all"] == {"total_prompt_count": len(gt), "R@1": 100.0, "R@5": 100.0, "R@10": 100.0,
                                 "R@50": 100.0}
        assert sum(c["total_prompt_count"] for c in result["per_category"].values()) == len(gt)


def test_real_moment_retrieval_gt_scores_100_and_masked_test_is_refused(hirest_data):
    cats = hirest_data / "evaluation/categories.json"
    gt = load(hirest_data / "splits/all_data_val.json")
    pred = {q: {v: {"bounds": a["bounds"]} for v, a in videos.items() if a["clip"]} for q, videos in gt.items()}
    assert hm.score_moment_retrieval(pred, gt, cats)["all"] == {"total_videos": 193, "R@0.5": 100.0,
                                                                "R@0.7": 100.0}
    test_file = hirest_data / "splits/all_data_test.json"
    with pytest.raises(DataError, match=r"placeholder \[0, 1\]") as info:
        hm.score_moment_retrieval({}, test_file, cats)
    assert str(test_file) in str(info.value)


# official: the authors' evaluate.py --preprocess_moment_bounds on the GT steps as predictions, under numpy
# 1.23.5 (introsort order) and numpy 2.4.6 on an AVX-512 CPU (identity order). Regenerate with
#   python measurements/hirest_official_constants.py --authors-repo PATH/TO/HiREST
# (it prints the entries of the numpy it runs under; the identity ones were checked that way on 2026-11-24)
# Compared exactly: numpy and the CPU chose the authors' NMS order, which is now an option (NMS_ORDERS); our
# scoring is plain Python arithmetic in their order of operations, which rounds alike on every CPU.
OFFICIAL_SEGMENTATION_GT = {
    ("val", "introsort"): {"total": 78, "recall": {"0.5": 88.13957363299468, "0.7": 81.58451076214233},
                           "precision": {"0.5": 98.65689865689865, "0.7": 89.11700861212644}},
    ("test", "introsort"): {"total": 507, "recall": {"0.5": 89.59052309776084, "0.7": 84.02187354828648},
                            "precision": {"0.5": 99.65002601271311, "0.7": 91.99964181910147}},
    ("val", "identity"): {"total": 78, "recall": {"0.5": 88.39662652162653, "0.7": 82.03114015614014},
                          "precision": {"0.5": 98.65689865689865, "0.7": 89.32737615995529}},
    ("test", "identity"): {"total": 507, "recall": {"0.5": 89.91930078468535, "0.7": 84.51683643991336},
                           "precision": {"0.5": 99.68262287788914, "0.7": 92.21497677760165}},
}
STEP_GT = {"val": "val_testing/formated_moment_evaluation_gt.json",
           "test": "evaluation/formatted_moment_evaluation_gt.json"}


def expected_self_score(steps: list[list[float]], t: float) -> tuple[float, float]:
    """Recall and precision of a partition into steps of >= 1 s scored against itself after the official
    post-processing in identity order: the first and last steps are dropped (not strictly inside the
    moment); of the inner ones, NMS keeps every other one from the last (touching counts as overlap); gap
    filling restores the suppressed ones, except that an even number of steps suppresses the second
    step, which the first gap then merges with the first step."""
    n = len(steps)
    if n % 2 == 1:
        return 1.0, 1.0
    (s0, _), (_, e1) = steps[0], steps[1]
    merged = [s0, e1]
    covered = [hm.interval_iou(merged, step) > t for step in steps[:2]]
    return (n - 2 + sum(covered)) / n, (n - 2 + any(covered)) / (n - 1)


def test_real_segmentation_gt_against_itself(hirest_data):
    cats = hirest_data / "evaluation/categories.json"
    for split, path in STEP_GT.items():
        gt = load(hirest_data / path)
        pred = {v: {"bounds": e["bounds"]} for v, e in gt.items()}
        # unprocessed, only the zero-length steps (never covered: IoU 0) cost anything
        raw = hm.score_moment_segmentation(pred, gt, cats, preprocess=False)["all"]
        zero_length = [sum(e - s == 0 for s, e in v["bounds"]) / len(v["bounds"]) for v in gt.values()]
        assert raw["recall"]["0.5"] == pytest.approx(100 - 100 * np.mean(zero_length))
        # the official post-processing does not leave a partition unchanged: see expected_self_score
        for order in hm.NMS_ORDERS:
            assert (hm.score_moment_segmentation(pred, gt, cats, nms_order=order)["all"]
                    == OFFICIAL_SEGMENTATION_GT[split, order])
        assert hm.score_moment_segmentation(pred, gt, cats) == hm.score_moment_segmentation(
            pred, gt, cats, nms_order="introsort")  # the default: the authors' own numpy
        for video, entry in gt.items():
            steps = entry["bounds"]
            if any(e - s < 1 for s, e in steps):
                continue
            processed = hm.preprocess_segments(steps, (steps[0][0], steps[-1][1]), "identity")
            for t in hm.IOU_THRESHOLDS:
                assert hm.segment_recall_precision(processed, steps, t) == expected_self_score(steps, t), video


# --------------------------------------------------------------------------------------------------
# captioning (Java: PTB tokenizer, METEOR)


@pytest.fixture(scope="module")
def caption_scorer():
    from spacewalk.benchmarks.hirest.captioning_metrics import CaptionScorer

    with CaptionScorer() as scorer:  # SPICE and BERTScore where available: they are skipped in CI
        yield scorer


def test_ptb_tokenization_as_coco_caption(java):
    from spacewalk.benchmarks.hirest.captioning_metrics import ptb_tokenize

    assert ptb_tokenize(["Hello, World.", "", "it's (fine)", "put it on ", "a\rb", "naïve café"]) == [
        "hello world", "", "it 's -lrb- fine -rrb-", "put it on", "a b", "naïve café"]


def test_caption_scores_by_hand(caption_scorer, java):
    result = caption_scorer.score(["a man cuts the onion", "put it on the table"],
                                  ["a man cuts the onion", "put it on the table"]).metrics["all"]
    # identical captions of 5 words each: BLEU = (5 + 1e-15) / (5 + 1e-9) per order, i.e. 1 - 2e-10;
    # ROUGE-L = 1 exactly; CIDEr-D = 10 x mean over n = 1..4 of the cosine (1) = 10 per caption
    for n in range(1, 5):
        assert result[f"Bleu_{n}"] == pytest.approx(100, abs=1e-6)
    assert result["ROUGE_L"] == 100.0
    assert result["CIDEr"] == pytest.approx(1000.0)
    # METEOR 1.5 drops the fragmentation penalty when hypothesis and reference match completely
    assert result["METEOR"] == 100.0


def test_real_captioning_gt_against_itself(hirest_data, caption_scorer, java):
    from spacewalk.benchmarks.hirest.captioning_metrics import ptb_tokenize

    split_file = hirest_data / STEP_GT["val"]
    gt = load(split_file)
    pred = {v: {"captions": [{"sentence": c["sentence"]} for c in e["captions"]]} for v, e in gt.items()}
    result = hm.score_step_captioning(pred, split_file, hirest_data / "evaluation/categories.json",
                                      scorer=caption_scorer)
    overall = result["all"]
    assert overall["Total"] == len(gt) == 78
    for n in range(1, 5):
        assert overall[f"Bleu_{n}"] == pytest.approx(100, abs=1e-6)
    assert overall["ROUGE_L"] == 100.0
    # CIDEr-D of a caption against itself (one reference): 10 x the mean over n = 1..4 of the cosine of its
    # n-gram TF-IDF vectors, which is 1 where the caption has n-grams and 0 (a zero vector) where it is
    # shorter than n tokens. So not 10 but 10 x min(L, 4) / 4 per caption; x100 as reported.
    tokens = [len(t.split()) for t in ptb_tokenize([c["sentence"].lower() for e in gt.values()
                                                    for c in e["captions"]])]
    assert overall["CIDEr"] == pytest.approx(1000 * np.mean([min(n, 4) / 4 for n in tokens]))
    # official: the authors' COCO evaluator (language_evaluation.CocoEvaluator, what their evaluate.py calls) on
    # these captions; `python measurements/hirest_official_constants.py --authors-repo ...` prints it when
    # language_evaluation (github.com/bckim92/language-evaluation, not on PyPI) is installed. Written on one
    # machine: CIDEr-D's IDF weights and norms go through numpy's log and sqrt, and numpy's AVX-512 log differs
    # from libm's in the last bit for about 1 value in 10^4. Every log and sqrt one bit off moves the score by
    # 2.3e-13; replacing one word of any one of the 606 captions moves it by 0.2 or more: 1e-9 lies between
    assert overall["CIDEr"] == pytest.approx(878.7128712871287, rel=0, abs=1e-9)
    assert overall["METEOR"] == 100.0
    skipped = result["skipped"]
    assert {"CLIPScore", "Entailment"} <= set(skipped) and all(skipped.values())
    for optional in ("SPICE", "BERTScore_F1"):  # each one either computed or skipped with a reason
        assert (optional in skipped) != (optional in overall)
    per_category = result["per_category"]
    assert sum(c["Total"] for c in per_category.values()) == 78
    assert all(c["ROUGE_L"] == 100.0 for c in per_category.values())


def test_clip_frame_selection_as_the_authors():
    from spacewalk.benchmarks.hirest.captioning_metrics import clip_frame_indices, frame_sort_key

    # frames sorted by the number after the last '_' (not lexically)
    names = [Path(f"v/frame_{i}.jpg") for i in (10, 2, 1)]
    assert sorted(names, key=frame_sort_key) == [Path("v/frame_1.jpg"), Path("v/frame_2.jpg"), Path("v/frame_10.jpg")]
    # 4 frames from start to min(end, n) - 1, truncated; a step reaching the last frame or beyond is not scored
    assert clip_frame_indices(10, 20, 30) == [10, 13, 16, 19]
    assert clip_frame_indices(10, 29, 30) == [10, 16, 22, 28]
    assert clip_frame_indices(10, 30, 30) is None


def test_optional_metrics_per_group(caption_scorer, monkeypatch, tmp_path, java):
    import torch

    from spacewalk.benchmarks.hirest import captioning_metrics as cm

    # BERTScore glue with the model replaced: per-pair F1, averaged per group as the authors' f.mean()
    monkeypatch.setattr(cm, "bertscore_missing", lambda: None)
    monkeypatch.setattr(cm, "_bertscore_f1", lambda c, r, device: torch.tensor([0.5, 0.75, 1.0]))
    frames = [tmp_path / f"f_{i}.jpg" for i in range(3)]
    result = caption_scorer.score_groups(["a b", "c d", "e f"], ["a b", "c e", "f"], {"all": [0, 1, 2], "x": [1, 2]},
                                         clip_inputs=[cm.ClipInput(frames, 0, 1)] * 3)
    assert result.metrics["all"]["BERTScore_F1"] == pytest.approx(0.75)
    assert result.metrics["x"]["BERTScore_F1"] == pytest.approx(0.875)
    assert "BERTScore_F1" not in result.skipped
    # frames but no local CLIP weights: skipped, with the reason
    assert "CLIP" in result.skipped["CLIPScore"] and "CLIPScore" not in result.metrics["all"]
