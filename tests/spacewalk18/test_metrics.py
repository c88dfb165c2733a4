"""Official Spacewalk-18 scoring: hand-computed cases, a loop-based reference written from the spec
(docs/spacewalk18.md, Official scoring) compared on the real test split, the random baseline, and the DDP Metric."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DistributedSampler

from spacewalk.benchmarks.spacewalk18.data.dataset import (
    FPS,
    Question,
    Recording,
    RetrievalSample,
    Segment,
    Spacewalk18,
    Step,
    StepSample,
)
from spacewalk.benchmarks.spacewalk18.data.step_sampler import step_samples
from spacewalk.benchmarks.spacewalk18.scoring.official import (
    accuracy,
    average_precision,
    class_average_precisions,
    class_ious,
    qa_accuracy,
    retrieval_accuracy,
    step_recognition_metrics,
    video_step_metrics,
)
from spacewalk.benchmarks.spacewalk18.scoring.step_recognition_metric import StepRecognitionMetric

from helpers.ddp_processes import start_method


def make_recording(video_id: str, bounds: list[tuple[int, int, int]], num_classes: int) -> Recording:
    """A recording from (frame_start, frame_end, label) triples; transcript and video are never read."""
    segments = tuple(Segment(s / FPS, e / FPS, s, e, label) for s, e, label in bounds)
    steps = (Step(0, "Irrelevant", "", None, None),) + tuple(
        Step(i, f"step {i}", "", 0.0, 1.0) for i in range(1, num_classes))
    return Recording(video_id, segments, steps, Path(f"/nonexistent/{video_id}.csv"),
                     Path(f"/nonexistent/{video_id}.mp4"))


def make_samples(frames_labels: list[tuple[int, int]]) -> list[StepSample]:
    return [StepSample(i, f / FPS, f, label) for i, (f, label) in enumerate(frames_labels)]


# --------------------------------------------------------------------------------------------------
# AP, by hand from the rule in docs/spacewalk18.md, Official scoring


@pytest.mark.parametrize("scores, positives, expected", [
    # tie between a positive and a negative: the negative goes first -> points (0,0), (1,1/2)
    ([0.5, 0.5], [1, 0], 0.5),
    ([0.5, 0.5, 0.9], [1, 0, 1], 2 / 3 * 1 / 2 + 1 / 2 * 1),  # (1/2,1), (1/2,1/2), (1,2/3)
    # all positives first: perfect
    ([4, 3, 2, 1], [1, 1, 0, 0], 1.0),
    # all positives last: points (1/2,1/3), (1,1/2); the running max carries 1/2 down to recall 0
    ([4, 3, 2, 1], [0, 0, 1, 1], 0.5),
    # a single positive at rank 3 of 4: 1/3
    ([4, 3, 2, 1], [0, 0, 1, 0], 1 / 3),
    ([1, 2, 3], [0, 0, 1], 1.0),
    # every score tied: negatives first, so precision only reaches P / n at the end
    ([7, 7, 7, 7], [0, 1, 0, 1], 0.5),
])
def test_average_precision_by_hand(scores, positives, expected):
    assert average_precision(scores, positives) == pytest.approx(expected, abs=1e-15)


def test_average_precision_differs_from_sklearn_convention():
    # sklearn: sum (R_n - R_{n-1}) P_n = 1/2 * 1/3 + 1/2 * 1/2 = 5/12; the authors' interpolation gives 1/2
    assert average_precision([4, 3, 2, 1], [0, 0, 1, 1]) == 0.5


def test_average_precision_without_positives_is_nan():
    assert math.isnan(average_precision([0.1, 0.2], [0, 0]))


def test_average_precision_rejects_nan_scores():
    with pytest.raises(ValueError, match="finite"):
        average_precision([0.1, float("nan")], [0, 1])


def test_class_average_precisions_equals_one_class_at_a_time():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(300, 6)) / 4  # many ties
    labels = rng.integers(0, 6, size=300)
    ours = class_average_precisions(scores, labels, range(1, 6))
    for c in range(1, 6):
        assert ours[c - 1] == average_precision(scores[:, c], labels == c)


def test_accuracy():
    assert accuracy([1, 2, 3, 0], [1, 2, 0, 0]) == 0.75
    with pytest.raises(ValueError):
        accuracy([1, 2], [1])


# --------------------------------------------------------------------------------------------------
# IoU on a tiny video, by hand

# frames: -1 [0,10) | 1 [10,20) | 0 [20,30) | -1 [30,34) | 3 [34,50) | -1 [50,60); K+1 = 5, max label 3
TINY = make_recording("tiny", [(0, 10, -1), (10, 20, 1), (20, 30, 0), (30, 34, -1), (34, 50, 3), (50, 60, -1)], 5)
TINY_SAMPLES = make_samples([(12, 1), (18, 1), (25, 0), (36, 3), (42, 3), (47, 3)])
# sample intervals: [10,15] [15,21.5] [21.5,30.5] [30.5,39] [39,44.5] [44.5,50]
TINY_PREDICTIONS = [1, 1, 0, 2, 3, 4]
TINY_IOU = [
    8.5 / (10 + 9 - 8.5),  # class 0: GT [20,30], predicted [21.5,30.5]
    10 / (10 + 11.5 - 10),  # class 1: GT [10,20], the two equal neighbours merge into [10,21.5]
    0.0,  # class 2: predicted on [30.5,39] (3.5 frames of it over the -1 segment), absent from GT
    5.5 / (16 + 5.5 - 5.5),  # class 3: GT [34,50], predicted [39,44.5]
]  # class 4 is predicted but above the annotation's max label: no class of its own


def test_iou_by_hand():
    frames = [s.frame_index for s in TINY_SAMPLES]
    np.testing.assert_array_equal(class_ious(TINY.segments, frames, TINY_PREDICTIONS), TINY_IOU)
    m = video_step_metrics(TINY, TINY_SAMPLES, np.array(TINY_PREDICTIONS))
    assert m["IoU"] == np.mean(TINY_IOU)
    assert m["Accuracy"] == 4 / 6
    assert m["mAP"] is None


def test_iou_prediction_over_inner_unannotated_segment_only_adds_to_pred_len():
    # the same video but class 3 predicted from 30.5 on: the 3.5 frames over -1 count against it
    frames = [s.frame_index for s in TINY_SAMPLES]
    ious = class_ious(TINY.segments, frames, [1, 1, 0, 3, 3, 3])
    assert ious[3] == 16 / (16 + 19.5 - 16)


def test_iou_class_neither_annotated_nor_predicted():
    frames = [s.frame_index for s in TINY_SAMPLES]
    predictions = np.array([1, 1, 0, 3, 3, 3])  # nobody predicts class 2, which has no GT: 0 / 0
    ious = class_ious(TINY.segments, frames, predictions)
    assert math.isnan(ious[2])
    assert video_step_metrics(TINY, TINY_SAMPLES, predictions)["IoU"] == np.mean(ious[[0, 1, 3]])
    with pytest.raises(ValueError, match=r"IoU .*classes \[2\]"):
        video_step_metrics(TINY, TINY_SAMPLES, predictions, undefined="error")


def test_iou_duplicate_frames_give_an_empty_interval():
    rec = make_recording("dup", [(0, 10, -1), (10, 20, 1), (20, 30, 2), (30, 40, -1)], 3)
    # three samples on frame 15: intervals [10,15] [15,15] [15,20] [20,30]; the empty one (class 0,
    # otherwise never predicted nor annotated) adds nothing, so class 0 stays 0 / 0
    ious = class_ious(rec.segments, [15, 15, 15, 25], [1, 0, 2, 2])
    np.testing.assert_array_equal(ious, [math.nan, 5 / 10, 10 / 15])


def test_unsorted_samples_are_rejected():
    with pytest.raises(ValueError, match="sorted"):
        class_ious(TINY.segments, [18, 12, 25], [1, 1, 0])


def test_step_recognition_metrics_in_percent_with_scores():
    scores = np.zeros((6, 5))
    scores[np.arange(6), [1, 1, 0, 3, 3, 3]] = 1.0  # the truth, for AP: every class 1..K with samples ranks first
    with pytest.raises(ValueError, match=r"AP .*classes \[2, 4\]"):
        step_recognition_metrics({"tiny": TINY}, {"tiny": TINY_SAMPLES}, {"tiny": TINY_PREDICTIONS},
                                 {"tiny": scores}, undefined="error")
    m = step_recognition_metrics({"tiny": TINY}, {"tiny": TINY_SAMPLES}, {"tiny": TINY_PREDICTIONS}, {"tiny": scores})
    assert m["mAP"] == 100.0  # classes 2 and 4 have no positive sample: excluded
    assert m["Accuracy"] == pytest.approx(100 * 4 / 6)
    assert m["IoU"] == pytest.approx(100 * np.mean(TINY_IOU))
    assert m["per_video"]["tiny"] == {"Accuracy": m["Accuracy"], "mAP": 100.0, "IoU": m["IoU"]}


def test_predictions_outside_the_label_space_are_rejected():
    with pytest.raises(ValueError, match="0..4"):
        video_step_metrics(TINY, TINY_SAMPLES, np.array([1, 1, 0, 3, 3, 5]))
    with pytest.raises(ValueError, match="0..4"):
        video_step_metrics(TINY, TINY_SAMPLES, np.array([1, 1, 0, 3, 3, -1]))


# --------------------------------------------------------------------------------------------------
# an independent reference, written loop by loop from the text of docs/spacewalk18.md, Official scoring


def reference_ap(scores, positives):
    walk = sorted(zip(scores, positives), key=lambda x: (-x[0], x[1]))  # ties: negatives first
    n_pos = sum(positives)
    points, tp, fp = [(0.0, 0.0), (1.0, 0.0)], 0, 0
    for _, positive in walk:
        tp, fp = tp + positive, fp + (1 - positive)
        points.append((tp / n_pos, tp / (tp + fp)))
    points.sort(key=lambda x: (x[0], x[1]), reverse=True)
    total, best = 0.0, points[0][1]
    for prev, cur in zip(points, points[1:]):
        total += (prev[0] - cur[0]) * best
        best = max(best, cur[1])
    return total


def reference_video(recording, samples, predictions, scores):
    labels = [s.label for s in samples]
    frames = [s.frame_index for s in samples]
    acc = sum(p == y for p, y in zip(predictions, labels)) / len(labels)
    ap = None
    if scores is not None:
        ap = float(np.mean([reference_ap([row[c] for row in scores], [int(y == c) for y in labels])
                            for c in range(1, recording.num_classes)]))
    # sample i covers [(f_{i-1} + f_i) / 2, (f_i + f_{i+1}) / 2], clipped to the annotated span
    intervals = []
    for i, p in enumerate(predictions):
        lo = recording.segments[1].frame_start if i == 0 else (frames[i - 1] + frames[i]) / 2
        hi = recording.segments[-2].frame_end if i == len(frames) - 1 else (frames[i] + frames[i + 1]) / 2
        intervals.append((lo, hi, p))
    ious = []
    for c in range(max(s.label for s in recording.segments) + 1):
        gt = [(s.frame_start, s.frame_end) for s in recording.segments if s.label == c]
        pred = [(lo, hi) for lo, hi, p in intervals if p == c]
        inter = sum(max(0, min(g1, p1) - max(g0, p0)) for g0, g1 in gt for p0, p1 in pred)
        gt_len = sum(g1 - g0 for g0, g1 in gt)
        pred_len = sum(p1 - p0 for p0, p1 in pred)
        ious.append(inter / (gt_len + pred_len - inter))
    return acc, ap, float(np.mean(ious))


@pytest.fixture(scope="module")
def real_test(real_spacewalk18_root):
    ds = Spacewalk18(real_spacewalk18_root)
    return ds, ds.step_samples("test")


def random_predictions(ds, samples, seed, tied_scores=False):
    rng = np.random.default_rng(seed)
    predictions, scores = {}, {}
    for video_id, ss in samples.items():
        k1 = ds.recordings[video_id].num_classes
        predictions[video_id] = rng.integers(0, k1, size=len(ss))
        raw = rng.random((len(ss), k1))
        scores[video_id] = np.round(raw, 1) if tied_scores else raw
    return predictions, scores


@pytest.mark.parametrize("seed, tied", [(0, False), (1, True)])
def test_core_equals_reference_on_real_test_split(real_test, seed, tied):
    ds, samples = real_test
    predictions, scores = random_predictions(ds, samples, seed, tied)
    ours = step_recognition_metrics(ds.recordings, samples, predictions, scores)
    per_video = {}
    for video_id in samples:
        acc, ap, iou = reference_video(ds.recordings[video_id], samples[video_id], predictions[video_id].tolist(),
                                       scores[video_id].tolist())
        per_video[video_id] = (acc, ap, iou)
        got = ours["per_video"][video_id]
        assert got["Accuracy"] == pytest.approx(100 * acc, abs=1e-9), video_id
        assert got["mAP"] == pytest.approx(100 * ap, abs=1e-9), video_id
        assert got["IoU"] == pytest.approx(100 * iou, abs=1e-9), video_id
    for i, name in enumerate(("Accuracy", "mAP", "IoU")):
        assert ours[name] == pytest.approx(100 * np.mean([v[i] for v in per_video.values()]), abs=1e-9)


def test_official_splits_never_hit_an_undefined_class(real_spacewalk18_root):
    # where the authors' code would divide by zero; "exclude" and "error" agree on the release
    ds = Spacewalk18(real_spacewalk18_root)
    for split in ("train", "val", "test"):
        for video_id, ss in ds.step_samples(split).items():
            rec = ds.recordings[video_id]
            labels = {s.label for s in ss}
            assert labels >= set(range(1, rec.num_classes)), (split, video_id)
            annotated = {s.label for s in rec.segments}
            assert annotated >= set(range(max(annotated) + 1)), (split, video_id)


def uniform_random_predictions(ds, samples, seed):
    rng = np.random.default_rng(seed)
    return {v: rng.integers(0, ds.recordings[v].num_classes, size=len(ss)) for v, ss in samples.items()}


def test_uniform_random_baseline_on_real_test_split(real_test, record_property):
    # paper: 4.22 / 1.51; one draw has a standard deviation of about 0.15 (Accuracy) and 0.08 (IoU)
    ds, samples = real_test
    chance = 100 * np.mean([1 / ds.recordings[v].num_classes for v in samples])
    assert chance == pytest.approx(4.22, abs=0.005)
    runs = [step_recognition_metrics(ds.recordings, samples, uniform_random_predictions(ds, samples, seed))
            for seed in range(20)]
    assert all(m["mAP"] is None for m in runs)
    acc, iou = np.array([m["Accuracy"] for m in runs]), np.array([m["IoU"] for m in runs])
    print(f"\nuniform random, seed 0: Accuracy {acc[0]:.3f} IoU {iou[0]:.3f}; "
          f"seeds 0-19: Accuracy {acc.mean():.3f} +- {acc.std():.3f}, IoU {iou.mean():.3f} +- {iou.std():.3f}")
    # plain floats: xdist sends a test's properties to the main process, which cannot take numpy scalars
    record_property("random_seed0", {"Accuracy": float(acc[0]), "IoU": float(iou[0])})
    assert abs(acc[0] - 4.22) < 0.3
    assert abs(iou[0] - 1.51) < 0.2
    assert abs(acc.mean() - 4.22) < 0.1
    assert abs(iou.mean() - 1.51) < 0.05


def test_scoring_the_real_test_split_is_fast(real_test):
    import time

    ds, samples = real_test
    predictions, scores = random_predictions(ds, samples, 0)
    # CPU time of this process, not wall time: other jobs on the machine do not count against it
    start = time.process_time()
    step_recognition_metrics(ds.recordings, samples, predictions, scores)
    assert time.process_time() - start < 1.0


# --------------------------------------------------------------------------------------------------
# QA and retrieval


def _question(i, answer, qtype):
    return Question("v", i, "?", ("a", "b", "c", "d"), answer, 0.0, 3600.0, qtype)


def test_qa_accuracy_overall_and_per_type():
    questions = [_question(0, 1, "when task"), _question(1, 2, "when task"), _question(2, 0, "miscellaneous")]
    m = qa_accuracy([1, 0, 0], questions)
    assert m["Accuracy"] == pytest.approx(200 / 3)
    assert m["per_type"] == {"when task": 50.0, "miscellaneous": 100.0}
    assert m["count"] == 3 and m["per_type_count"] == {"when task": 2, "miscellaneous": 1}
    with pytest.raises(ValueError):
        qa_accuracy([1, 0], questions)


def test_qa_random_on_real_questions(real_spacewalk18_root):
    questions = Spacewalk18(real_spacewalk18_root).questions()
    m = qa_accuracy(np.random.default_rng(0).integers(0, 4, len(questions)), questions)
    assert m["count"] == 376
    assert m["per_type_count"] == {"task before/after task": 120, "task before/at/after location": 105,
                                   "when task": 67, "task order": 57, "miscellaneous": 27}
    assert abs(m["Accuracy"] - 25) < 5
    assert qa_accuracy([q.answer for q in questions], questions)["Accuracy"] == 100.0


def test_retrieval_accuracy_is_a_mean_over_videos():
    samples = {"a": [RetrievalSample(i, 0, (1, 2), i % 2) for i in range(4)],
               "b": [RetrievalSample(0, 0, (1, 2), 1)]}
    m = retrieval_accuracy({"a": [0, 1, 1, 1], "b": [1]}, samples)
    assert m["per_video"] == {"a": 75.0, "b": 100.0}
    assert m["Accuracy"] == 87.5  # not the pooled 80


# --------------------------------------------------------------------------------------------------
# StepRecognitionMetric, in one process and in two (gloo)


def synthetic_split():
    recs = {
        "a": make_recording("a", [(0, 100, -1), (100, 300, 1), (300, 400, 0), (400, 600, 2), (600, 650, -1),
                                  (650, 800, 1), (800, 900, -1)], 3),
        "b": make_recording("b", [(0, 50, -1), (50, 200, 3), (200, 260, 4), (260, 300, 0), (300, 420, 1),
                                  (420, 500, 2), (500, 560, -1)], 5),
    }
    samples = {"a": step_samples(recs["a"].segments, 3, 37), "b": step_samples(recs["b"].segments, 5, 40)}
    rng = np.random.default_rng(7)
    predictions = {v: rng.integers(0, recs[v].num_classes, len(samples[v])) for v in recs}
    scores = {v: np.round(rng.random((len(samples[v]), recs[v].num_classes)), 1) for v in recs}  # with ties
    return recs, samples, predictions, scores


def feed(metric, pairs, predictions, scores, video_ids, batch_size=8, with_scores=True):
    for start in range(0, len(pairs), batch_size):
        batch = pairs[start:start + batch_size]
        rows = [scores[video_ids[v]][i] for v, i in batch]
        width = max(len(r) for r in rows)
        padded = torch.full((len(batch), width), -math.inf, dtype=torch.float64)
        for j, r in enumerate(rows):
            padded[j, :len(r)] = torch.from_numpy(r)
        metric.update(torch.tensor([v for v, _ in batch]), torch.tensor([i for _, i in batch]),
                      torch.tensor([int(predictions[video_ids[v]][i]) for v, i in batch]),
                      padded if with_scores else None)


def _plain(result):
    return {k: (v.item() if isinstance(v, torch.Tensor) else v) for k, v in result.items()}


def test_metric_single_process_with_duplicates_in_any_order():
    recs, samples, predictions, scores = synthetic_split()
    video_ids = list(recs)
    pairs = [(vi, i) for vi, v in enumerate(video_ids) for i in range(len(samples[v]))]
    order = np.random.default_rng(0).permutation(len(pairs))
    pairs = [pairs[j] for j in order] + pairs[:5]  # repeated samples, as DistributedSampler pads
    metric = StepRecognitionMetric(video_ids, recs, samples)
    feed(metric, pairs, predictions, scores, video_ids)
    expected = step_recognition_metrics(recs, samples, predictions, scores)
    assert _plain(metric.compute()) == expected

    metric.reset()
    feed(metric, pairs, predictions, scores, video_ids, with_scores=False)
    result = _plain(metric.compute())
    assert result["mAP"] is None
    assert result == step_recognition_metrics(recs, samples, predictions)


def test_metric_scores_only_the_videos_it_saw():
    recs, samples, predictions, scores = synthetic_split()
    metric = StepRecognitionMetric(["a", "b"], recs, samples)
    assert metric(torch.full((37,), 0), torch.arange(37), torch.from_numpy(predictions["a"])) is None
    assert list(metric.compute()["per_video"]) == ["a"]
    strict = StepRecognitionMetric(["a", "b"], recs, samples, require_all_videos=True)
    strict.update(torch.full((37,), 0), torch.arange(37), torch.from_numpy(predictions["a"]))
    with pytest.raises(ValueError, match="video b was never seen"):
        strict.compute()


def test_metric_reports_missing_samples():
    recs, samples, predictions, _ = synthetic_split()
    metric = StepRecognitionMetric(["a", "b"], recs, samples)
    keep = torch.tensor([i for i in range(37) if i not in (3, 30)])
    metric.update(torch.zeros_like(keep), keep, torch.from_numpy(predictions["a"])[keep])
    with pytest.raises(ValueError, match=r"video a has 37 samples; missing ids \[3, 30\]"):
        metric.compute()


def test_metric_rejects_scores_for_only_some_samples():
    recs, samples, predictions, scores = synthetic_split()
    metric = StepRecognitionMetric(["a"], recs, samples)
    metric.update(torch.zeros(10), torch.arange(10), torch.from_numpy(predictions["a"][:10]),
                  torch.from_numpy(scores["a"][:10]))
    metric.update(torch.zeros(27), torch.arange(10, 37), torch.from_numpy(predictions["a"][10:]))
    with pytest.raises(ValueError, match="some samples but not for others"):
        metric.compute()


def _ddp_worker(rank: int, world_size: int, rendezvous: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world_size)
    try:
        recs, samples, predictions, scores = synthetic_split()
        video_ids = list(recs)
        pairs = [(vi, i) for vi, v in enumerate(video_ids) for i in range(len(samples[v]))]
        assert len(pairs) % world_size == 1  # so the sampler has to pad
        sampler = DistributedSampler(pairs, num_replicas=world_size, rank=rank, shuffle=True, seed=3)
        metric = StepRecognitionMetric(video_ids, recs, samples)
        feed(metric, [pairs[j] for j in sampler], predictions, scores, video_ids, batch_size=5)
        result = _plain(metric.compute())
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def test_metric_under_ddp_equals_single_process(tmp_path):
    mp.start_processes(_ddp_worker, args=(2, str(tmp_path / "rendezvous"), str(tmp_path)), nprocs=2, join=True,
                       start_method=start_method())
    recs, samples, predictions, scores = synthetic_split()
    expected = json.loads(json.dumps(step_recognition_metrics(recs, samples, predictions, scores)))
    for rank in range(2):
        assert json.loads((tmp_path / f"rank{rank}.json").read_text()) == expected
