"""Official HiREST scoring (docs/hirest.md, Official scoring rules), equal to the authors' evaluate.py.

Numbers must equal the authors' script on the same files to the last digit, so every formula keeps
their arithmetic and their order of operations (IoU's union is `(e2 - s2 + e1) - s1`, recall is a
Python `sum` over videos in ground-truth order, ...). The low-level functions work on plain Python
values; the `score_*` functions read and validate the files and return percentages, per category and
overall (`"all"`), under the authors' key names.

Semantics taken from the authors' code, some of which the spec leaves implicit:

- Items are those of the ground truth; a GT item without a prediction is an error (their script stops
  with a KeyError), predictions for other items are ignored (as theirs does).
- Categories: video and moment retrieval use `prompt_to_cat[query]`; segmentation and captioning use
  `video_to_cat[video]`. Categories without items are left out.
- Video retrieval: sort by (score, video name) descending; a hit at k if any video the split lists
  for the query is in the top k (every listed video counts, `relevant` is not read).
- IoU is inter / (union + 1e-8), so a geometric overlap of exactly 0.5 or 0.7 falls just short of the
  threshold in both retrieval (inclusive) and segmentation (strict).
- Moment retrieval: every (query, video) with `clip == true`, IoU(gt, pred) >= t counts (inclusive).
  The public test split's moments are all the placeholder [0, 1]; the authors' script would score against
  it, we refuse (DataError).
- Spans that cannot be are refused, in the GT and in the predictions (DataError naming file, item, field):
  a negative time, and a moment, in the split file or predicted, ending past its video (`v_duration` of the
  split file, with the dataset reader's 1 s slack; the step GT has no durations, so segments are not checked
  against it).
  A span ending before it starts is refused too, unless `allow_reversed` (`--allow-reversed`): the authors'
  evaluate.py scores it as given (IoU 0 for a moment), and their model writes its start and end argmaxes as
  they come, so its files may hold such pairs.
- Moment segmentation (with the post-processing on, the authors' `--preprocess_moment_bounds`, which
  their score scripts always pass): the GT moment is [first step start, last step end]; segments not
  strictly inside it are dropped; the rest go through their box NMS, in which two segments overlap
  when `min(e1, e2) - max(s1, s2) + 1 > 0`: with the +1 of pixel boxes, touching segments and segments
  less than 1 s apart overlap too. Their NMS visits the segments in the order numpy's argsort gives a
  constant key, which depends on the numpy version and CPU (see NMS_ORDERS; an option, default the
  authors' own). Gaps are then filled.
  So, unlike what docs/hirest.md, Official scoring rules says, a contiguous partition is not always left unchanged: its
  first and last steps are dropped (not strictly inside); in identity order NMS keeps every other inner step from the
  last one and the gap fill restores the others, except that with an even number of steps the second step is suppressed
  and the first gap merges it with the first; steps under 1 s merge with neighbours; the introsort order merges more.
  The GT scored against itself gets recall@0.5 of 88.14 (introsort) or 88.40 (identity) on val, as the authors' code
  does under the matching numpy.
- Segmentation without post-processing: a video with no predicted segment scores recall = precision
  = 0 (their loop reuses the previous video's counter and divides 0 by it; for the first video it
  crashes instead). With post-processing, their script crashes on a predicted video missing from the
  GT; we ignore it like every other extra item.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.hirest.dataset import DURATION_SLACK, Categories
from spacewalk.core.errors import DataError
from spacewalk.core.io import load_json
from spacewalk.results.bootstrap import BootstrapOptions, summary_intervals

RETRIEVAL_KS = (1, 5, 10, 50)
IOU_THRESHOLDS = (0.5, 0.7)
IOU_EPSILON = 1e-8  # the authors' guard in the IoU denominator
OVERALL = "all"

Interval = Sequence[float]
Source = str | Path | Mapping[str, Any]


# --------------------------------------------------------------------------------------------------
# categories


def load_categories(source: str | Path | Mapping[str, Any] | Categories) -> Categories:
    if isinstance(source, Categories):
        return source
    raw, name = _load(source, "<categories>")
    if not isinstance(raw, dict):
        raise DataError(f"expected an object, got {type(raw).__name__}", file=name)
    tables = []
    for field in ("prompt_to_cat", "video_to_cat"):
        table = raw.get(field)
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise DataError("expected an object mapping names to category strings", file=name, field=field)
        tables.append(table)
    return Categories(tables[0], tables[1], name)


# --------------------------------------------------------------------------------------------------
# building blocks (plain Python values, the authors' arithmetic)


def interval_iou(first: Interval, second: Interval) -> float:
    """The authors' `compute_iou(first, second)`, operation for operation.

    Not exactly symmetric in floating point (the union sums `second`'s length first), so callers pass
    the arguments in the authors' order: (gt, pred) for moments, (pred, gt) for segments.
    """
    start_1, end_1 = first[0], first[1]
    start_2, end_2 = second[0], second[1]
    intersection = max(0, min(end_2, end_1) - max(start_2, start_1))
    union = min(max(end_2, end_1) - min(start_2, start_1), end_2 - start_2 + end_1 - start_1)
    return float(intersection) / (union + IOU_EPSILON)


def rank_videos(videos: Sequence[str], scores: Sequence[float], top: int | None = None) -> list[str]:
    """Videos by score descending, ties by video name descending (the authors sort (score, name) pairs
    and reverse them); only the first `top` when given (a partial sort: same order, less work)."""
    pairs = zip(scores, videos)
    ranked = sorted(pairs, reverse=True) if top is None else heapq.nlargest(top, pairs)
    return [video for _, video in ranked]


def retrieval_hits(ranked: Sequence[str], relevant: Iterable[str], ks: Sequence[int] = RETRIEVAL_KS) -> dict[int, bool]:
    """Hit at k: any relevant video among the first k."""
    relevant = set(relevant)
    return {k: any(v in relevant for v in ranked[:k]) for k in ks}


def moment_hit(gt: Interval, pred: Interval, threshold: float) -> bool:
    """Moment retrieval counts IoU >= threshold (inclusive, unlike segmentation)."""
    return not interval_iou(gt, pred) < threshold


def _box_overlap(kept: tuple[float, float], other: tuple[float, float]) -> bool:
    """The authors' NMS test for `other` against the picked segment `kept`, as boxes (s, 0, e, 1).

    Pixel-box arithmetic (+1 on every side), so overlap > 0 as soon as the gap is below 1 s; the
    ratio's sign and its 0/0 and x/0 cases follow numpy's float64 division (nan > 0 is False).
    """
    width = max(0.0, min(kept[1], other[1]) - max(kept[0], other[0]) + 1)
    height = max(0.0, 1.0 - 0.0 + 1)
    area = (other[1] - other[0] + 1) * (1.0 - 0.0 + 1)
    if area == 0:
        return width * height > 0  # numpy: inf > 0, or nan > 0
    return (width * height) / area > 0


# The authors' NMS visits segments in the order of `np.argsort` of a constant key, and that order depends
# on numpy: its scalar introsort permutes equal keys as soon as there are more than 16 of them (seen with
# numpy 1.23, and numpy 2.4 with SIMD dispatch off), its SIMD sorts keep them in place (seen with numpy
# 2.4 on AVX2 and AVX-512 CPUs). Both are "the official number" somewhere: "introsort" reproduces the
# authors' own environment (2023, numpy 1.2x), "identity" their script run today on a usual x86 machine.
NMS_ORDERS = ("introsort", "identity")
_SMALL_QUICKSORT = 15  # numpy's threshold below which a partition is insertion-sorted (a no-op here)


def constant_key_argsort(n: int) -> list[int]:
    """numpy's scalar introsort argsort (npysort/quicksort.cpp, `aquicksort_`) applied to n equal keys.

    With no key smaller than another, the median-of-3 and insertion sorts never move anything, and each
    partition step swaps the middle element to the end and then mirrors the range around it. Partitions
    stay balanced, so the depth limit that would switch to heapsort is never reached.
    """
    order = list(range(n))
    pending: list[tuple[int, int]] = []
    low, high = 0, n - 1
    while True:
        while high - low > _SMALL_QUICKSORT:
            middle = low + ((high - low) >> 1)
            i, j = low, high - 1
            order[middle], order[j] = order[j], order[middle]
            while True:
                i, j = i + 1, j - 1
                if i >= j:
                    break
                order[i], order[j] = order[j], order[i]
            order[i], order[high - 1] = order[high - 1], order[i]
            # the larger side waits on the stack, the smaller one is sorted next
            if i - low < high - i:
                pending.append((i + 1, high))
                high = i - 1
            else:
                pending.append((low, i - 1))
                low = i + 1
        if not pending:
            return order
        low, high = pending.pop()


def suppress_overlaps(segments: Sequence[tuple[float, float]], order: str = "introsort") -> list[tuple[float, float]]:
    """The authors' NMS with threshold 0: repeatedly pick the last candidate of the visiting order and drop
    the remaining candidates that overlap it (see `_box_overlap`); returns the picked ones in pick order.

    order: "introsort" or "identity", the visiting order of the numpy the official script runs on (see
    NMS_ORDERS above). They differ only when more than 16 segments lie strictly inside the moment.
    """
    if order not in NMS_ORDERS:
        raise ValueError(f"order must be one of {NMS_ORDERS}, got {order!r}")
    candidates = constant_key_argsort(len(segments)) if order == "introsort" else list(range(len(segments)))
    picked = []
    while candidates:
        current = segments[candidates.pop()]
        picked.append(current)
        candidates = [j for j in candidates if not _box_overlap(current, segments[j])]
    return picked


def preprocess_segments(segments: Sequence[Interval], moment: tuple[float, float],
                        order: str = "introsort") -> list[list[float]]:
    """The authors' `--preprocess_moment_bounds` for one video, with the GT moment (m0, m1).

    Keep segments strictly inside (s > m0 and e < m1), suppress overlaps, sort by start (stable, in pick
    order), then fill every gap: [m0, first start] if it starts after m0, [end_i, start_i+1] between
    neighbours (even when empty), [last end, m1] if it ends before m1; nothing left gives [[m0, m1]].
    """
    m0, m1 = moment
    inside = [(float(s), float(e)) for s, e in segments if s > m0 and e < m1]
    kept = sorted(suppress_overlaps(inside, order), key=lambda seg: seg[0])
    if not kept:
        return [[m0, m1]]
    result = []
    if kept[0][0] > m0:
        result.append([m0, kept[0][0]])
    for i, (start, end) in enumerate(kept):
        result.append([start, end])
        if i + 1 < len(kept):
            result.append([end, kept[i + 1][0]])
    if result[-1][1] < m1:
        result.append([result[-1][1], m1])
    return result


def segment_recall_precision(predicted: Sequence[Interval], steps: Sequence[Interval],
                             threshold: float) -> tuple[float, float]:
    """Recall and precision of one video at one threshold, strict (IoU > t), many-to-many.

    A GT step is covered if some predicted segment has IoU > t with it, and vice versa. No prediction
    gives (0, 0), the authors' result for every video but the first (see the module docstring).
    """
    if not steps:
        raise ValueError("a video without GT steps has no recall")
    covered_steps, covered_predictions = set(), set()
    for p, segment in enumerate(predicted):
        for s, step in enumerate(steps):
            if interval_iou(segment, step) > threshold:
                covered_steps.add(s)
                covered_predictions.add(p)
    precision = len(covered_predictions) / len(predicted) if predicted else 0.0
    return len(covered_steps) / len(steps), precision


def _sorted_categories(values: Iterable[str]) -> list[str]:
    return sorted(set(values))


def _by_category(items: Sequence[tuple[str, Any]], summarise: Callable[[list], dict[str, Any]],
                 bootstrap: BootstrapOptions | None = None, unit: str = "queries") -> dict[str, Any]:
    """`{"all": summary of every item, "per_category": {category: summary of its items}}`, items in order;
    with `bootstrap`, `"intervals"`: the interval of each overall number over the items
    (spacewalk/results/bootstrap.py)."""
    per_category = {}
    for category in _sorted_categories(c for c, _ in items):
        per_category[category] = summarise([x for c, x in items if c == category])
    result = {OVERALL: summarise([x for _, x in items]), "per_category": per_category}
    if bootstrap is not None:
        result["intervals"] = summary_intervals([x for _, x in items], summarise, bootstrap, unit)
    return result


@dataclass(frozen=True)
class TaskUnits:
    """A task's scored units in ground-truth order: `ids` (query, "'query' / video" pair, video), `items`
    ((category, the unit's official per-unit scores)), `summarise` (the official aggregation of a list of
    per-unit scores into the task's numbers) and `unit` (what a unit is). The score functions are
    `_by_category` of these; a paired comparison of two runs resamples them
    (spacewalk/benchmarks/hirest/run_scores.py)."""

    ids: list[str]
    items: list[tuple[str, Any]]
    summarise: Callable[[list], dict[str, Any]]
    unit: str


def _scored(units: TaskUnits, bootstrap: BootstrapOptions | None) -> dict[str, Any]:
    return _by_category(units.items, units.summarise, bootstrap, units.unit)


# --------------------------------------------------------------------------------------------------
# file reading and validation


def _load(source: Any, default_name: str) -> tuple[Any, str]:
    """A path is read as JSON and named by its path; an in-memory object is named `default_name`."""
    if isinstance(source, (str, Path)):
        return load_json(source), str(source)
    return source, default_name


def _is_number(value: Any) -> bool:
    # JSON gives int, float, bool, str, None, list, dict: exact types keep bool out; nan/inf are rejected
    return (type(value) is int or type(value) is float) and math.isfinite(value)


def _object(value: Any, file: str, item: str | None, what: str, field: str | None = None) -> dict:
    if not isinstance(value, dict):
        raise DataError(f"expected {what}, got {type(value).__name__}", file=file, item=item, field=field)
    return value


def _field(entry: dict, field: str, file: str, item: str) -> Any:
    if field not in entry:
        raise DataError("missing", file=file, item=item, field=field)
    return entry[field]


def _interval(value: Any, file: str, item: str, field: str) -> list[float]:
    if not (isinstance(value, list) and len(value) == 2 and all(_is_number(x) for x in value)):
        raise DataError(f"expected [start, end] as two finite numbers, got {value!r}", file=file, item=item,
                        field=field)
    return value


def _span(value: Any, file: str, item: str, field: str, allow_reversed: bool = False,
          duration: float | None = None) -> list[float]:
    """[start, end] of seconds in a video: no negative time, start <= end (unless `allow_reversed`), and not
    past `duration` (plus DURATION_SLACK) when it is known."""
    start, end = _interval(value, file, item, field)
    if min(start, end) < 0:
        raise DataError(f"a time before the video's start, got {value!r}", file=file, item=item, field=field)
    if end < start and not allow_reversed:
        raise DataError(f"ends before it starts, got {value!r} (--allow-reversed scores such a span as the "
                        "authors' evaluate.py does)", file=file, item=item, field=field)
    if duration is not None and max(start, end) > duration + DURATION_SLACK:
        raise DataError(f"ends after the video ({duration} s), got {value!r}", file=file, item=item, field=field)
    return value


def _intervals(value: Any, file: str, item: str, field: str, allow_empty: bool,
               allow_reversed: bool = False) -> list[list[float]]:
    if not isinstance(value, list) or (not value and not allow_empty):
        raise DataError(f"expected a {'' if allow_empty else 'non-empty '}list of [start, end], got {value!r}",
                        file=file, item=item, field=field)
    return [_span(x, file, item, f"{field}[{i}]", allow_reversed) for i, x in enumerate(value)]


def read_split_annotations(source: Source) -> tuple[dict[str, dict[str, dict]], str]:
    """A split file `{query: {video: {clip, bounds, ...}}}` (the GT of video and moment retrieval)."""
    raw, name = _load(source, "<ground truth>")
    _object(raw, name, None, "an object mapping queries to videos")
    if not raw:
        raise DataError("no queries", file=name)
    for query, videos in raw.items():
        _object(videos, name, query, "an object mapping video files to annotations")
        if not videos:
            raise DataError("no videos for this query", file=name, item=query)
        for video, annotation in videos.items():
            item = f"{query!r} / {video}"
            _object(annotation, name, item, "an annotation object (is this a split file?)")
            if type(_field(annotation, "clip", name, item)) is not bool:
                raise DataError("expected true or false", file=name, item=item, field="clip")
            duration = annotation.get("v_duration")  # a moment past the video would be scored as given
            _span(_field(annotation, "bounds", name, item), name, item, "bounds",
                  duration=duration if _is_number(duration) else None)
    return raw, name


def read_moment_gt(source: Source, with_captions: bool) -> tuple[dict[str, dict], str]:
    """The formatted step GT `{video: {bounds: [[s, e], ...], captions: [{sentence, ...}]}}`."""
    raw, name = _load(source, "<ground truth>")
    _object(raw, name, None, "an object mapping videos to their steps")
    if not raw:
        raise DataError("no videos", file=name)
    for video, entry in raw.items():
        _object(entry, name, video, "an object with 'bounds' and 'captions' (is this the formatted step GT?)")
        bounds = _intervals(_field(entry, "bounds", name, video), name, video, "bounds", allow_empty=False)
        if with_captions:
            captions = _field(entry, "captions", name, video)
            if not isinstance(captions, list) or len(captions) != len(bounds):
                raise DataError(f"expected one caption per step ({len(bounds)})", file=name, item=video,
                                field="captions")
            for i, caption in enumerate(captions):
                field = f"captions[{i}].sentence"
                if not isinstance(caption, dict) or not isinstance(caption.get("sentence"), str):
                    raise DataError("expected a string", file=name, item=video, field=field)
    return raw, name


def _prediction_entry(pred: dict, key: str, file: str, what: str) -> dict:
    if key not in pred:
        raise DataError(f"no prediction for this {what} of the ground truth", file=file, item=key)
    return _object(pred[key], file, key, "an object")


def _predictions(source: Source) -> tuple[dict, str]:
    raw, name = _load(source, "<predictions>")
    return _object(raw, name, None, "an object keyed by query or video"), name


# --------------------------------------------------------------------------------------------------
# the four tasks, file level (percent)


def _mean_percent(values: list) -> float:
    # the authors: sum(values) / len(values) * 100 with Python's sum, in ground-truth order
    return sum(values) / len(values) * 100


def score_video_retrieval(predictions: Source, gt: Source, categories: Source | Categories,
                          bootstrap: BootstrapOptions | None = None) -> dict[str, Any]:
    """Video retrieval R@1/5/10/50, per query category and overall.

    `predictions`: `{query: {"videos": [...], "scores": [...]}}` (a path or the loaded object); `gt`: the
    split file. The candidate list is the prediction's (4282 videos on the official test set).
    """
    return _scored(video_retrieval_units(predictions, gt, categories), bootstrap)


def video_retrieval_units(predictions: Source, gt: Source, categories: Source | Categories) -> TaskUnits:
    """`score_video_retrieval`'s units: the queries, each with its hits at every k."""
    pred, pred_name = _predictions(predictions)
    split, _ = read_split_annotations(gt)
    cats = load_categories(categories)
    items, ids = [], []
    for query, videos in split.items():
        entry = _prediction_entry(pred, query, pred_name, "query")
        ranked_videos = _field(entry, "videos", pred_name, query)
        scores = _field(entry, "scores", pred_name, query)
        if not isinstance(ranked_videos, list) or not ranked_videos or set(map(type, ranked_videos)) != {str}:
            raise DataError("expected a non-empty list of video names", file=pred_name, item=query, field="videos")
        # (vectorised: 4282 candidates per query on the test set)
        if (not isinstance(scores, list) or not set(map(type, scores)) <= {int, float}
                or not all(map(math.isfinite, scores))):
            raise DataError("expected a list of finite numbers", file=pred_name, item=query, field="scores")
        if len(scores) != len(ranked_videos):
            raise DataError(f"{len(scores)} scores for {len(ranked_videos)} videos", file=pred_name, item=query,
                            field="scores")
        if len(set(ranked_videos)) != len(ranked_videos):
            duplicate = next(v for i, v in enumerate(ranked_videos) if v in ranked_videos[:i])
            raise DataError(f"video {duplicate!r} is listed twice", file=pred_name, item=query, field="videos")
        hits = retrieval_hits(rank_videos(ranked_videos, scores, top=max(RETRIEVAL_KS)), videos)
        items.append((cats.of_prompt(query), hits))
        ids.append(query)

    def summarise(hits: list[dict[int, bool]]) -> dict[str, Any]:
        result: dict[str, Any] = {"total_prompt_count": len(hits)}
        for k in RETRIEVAL_KS:
            result[f"R@{k}"] = (sum(h[k] for h in hits) / len(hits)) * 100
        return result

    return TaskUnits(ids, items, summarise, "queries")


def masked_moments(split: Mapping[str, Mapping[str, dict]]) -> bool:
    """True for the public test split, whose every clippable moment is the placeholder [0, 1]."""
    clips = [a["bounds"] for videos in split.values() for a in videos.values() if a["clip"]]
    return bool(clips) and all(list(b) == [0, 1] for b in clips)


def score_moment_retrieval(predictions: Source, gt: Source, categories: Source | Categories,
                           allow_reversed: bool = False, bootstrap: BootstrapOptions | None = None) -> dict[str, Any]:
    """Moment retrieval R@0.5 and R@0.7 (IoU >= t) over (query, video) pairs with `clip == true`.

    `predictions`: `{query: {video: {"bounds": [s, e]}}}`; `gt`: the split file. The public test split
    hides its moments (every one is [0, 1]): scoring against it would measure overlap with a placeholder,
    so it is refused. `allow_reversed`: score a predicted end before its start as a miss (the authors' way)
    instead of refusing it.
    """
    return _scored(moment_retrieval_units(predictions, gt, categories, allow_reversed), bootstrap)


def moment_retrieval_units(predictions: Source, gt: Source, categories: Source | Categories,
                           allow_reversed: bool = False) -> TaskUnits:
    """`score_moment_retrieval`'s units: the clippable (query, video) pairs, each with its hit at every IoU."""
    pred, pred_name = _predictions(predictions)
    split, gt_name = read_split_annotations(gt)
    if masked_moments(split):
        raise DataError("every moment is the placeholder [0, 1]: this is the masked public test split, whose "
                        "moment GT is not released; score val, or the test split on the authors' server",
                        file=gt_name, field="bounds")
    cats = load_categories(categories)
    items, ids = [], []
    for query, videos in split.items():
        query_pred = None
        for video, annotation in videos.items():
            if not annotation["clip"]:
                continue
            if query_pred is None:
                query_pred = _prediction_entry(pred, query, pred_name, "query")
            item = f"{query!r} / {video}"
            if video not in query_pred:
                raise DataError("no prediction for this clippable video of the ground truth", file=pred_name,
                                item=item)
            entry = _object(query_pred[video], pred_name, item, "an object with 'bounds'")
            duration = annotation.get("v_duration")
            bounds = _span(_field(entry, "bounds", pred_name, item), pred_name, item, "bounds", allow_reversed,
                           duration if _is_number(duration) else None)
            hits = {t: moment_hit(annotation["bounds"], bounds, t) for t in IOU_THRESHOLDS}
            items.append((cats.of_prompt(query), hits))
            ids.append(item)
    if not items:
        raise DataError("no video with clip == true", file=gt_name, field="clip")

    def summarise(hits: list[dict[float, bool]]) -> dict[str, Any]:
        result: dict[str, Any] = {"total_videos": len(hits)}
        for t in IOU_THRESHOLDS:
            result[f"R@{t}"] = (sum(h[t] for h in hits) / len(hits)) * 100
        return result

    return TaskUnits(ids, items, summarise, "queries (each clippable (query, video) pair)")


def read_segment_predictions(predictions: Source, gt: Mapping[str, dict],
                             allow_reversed: bool = False) -> tuple[dict[str, list], str]:
    """`{video: {"bounds": [[s, e], ...]}}` for every GT video, validated."""
    pred, pred_name = _predictions(predictions)
    segments = {}
    for video in gt:
        entry = _prediction_entry(pred, video, pred_name, "video")
        segments[video] = _intervals(_field(entry, "bounds", pred_name, video), pred_name, video, "bounds",
                                     allow_empty=True, allow_reversed=allow_reversed)
    return segments, pred_name


def score_moment_segmentation(predictions: Source, gt: Source, categories: Source | Categories,
                              preprocess: bool = True, nms_order: str = "introsort",
                              allow_reversed: bool = False,
                              bootstrap: BootstrapOptions | None = None) -> dict[str, Any]:
    """Moment segmentation recall and precision at IoU > 0.5 and > 0.7, mean over videos, per video category.

    `gt`: the formatted step GT. `preprocess` is the authors' `--preprocess_moment_bounds` (their score
    scripts always pass it): clip and complete the predicted segments with the GT moment first.
    """
    return _scored(moment_segmentation_units(predictions, gt, categories, preprocess, nms_order, allow_reversed),
                   bootstrap)


def moment_segmentation_units(predictions: Source, gt: Source, categories: Source | Categories,
                              preprocess: bool = True, nms_order: str = "introsort",
                              allow_reversed: bool = False) -> TaskUnits:
    """`score_moment_segmentation`'s units: the videos (each video's moment is the query), each with its recall
    and precision at every IoU."""
    steps, _ = read_moment_gt(gt, with_captions=False)
    segments, _ = read_segment_predictions(predictions, steps, allow_reversed)
    cats = load_categories(categories)
    items = []
    for video, entry in steps.items():
        gt_steps, predicted = entry["bounds"], segments[video]
        if preprocess:
            predicted = preprocess_segments(predicted, (gt_steps[0][0], gt_steps[-1][1]), nms_order)
        scores = {t: segment_recall_precision(predicted, gt_steps, t) for t in IOU_THRESHOLDS}
        items.append((cats.of_video(video), scores))
    ids = list(steps)

    def summarise(scores: list[dict[float, tuple[float, float]]]) -> dict[str, Any]:
        return {"total": len(scores),
                "recall": {f"{t}": _mean_percent([s[t][0] for s in scores]) for t in IOU_THRESHOLDS},
                "precision": {f"{t}": _mean_percent([s[t][1] for s in scores]) for t in IOU_THRESHOLDS}}

    return TaskUnits(ids, items, summarise, "videos (each video's moment: the segmentation's query)")


@dataclass(frozen=True)
class CaptionPair:
    video: str
    candidate: str  # lower-cased, as the authors do before tokenizing
    reference: str
    start: Any  # the GT step's start and end (seconds, the frame indices of CLIPScore)
    end: Any


def read_caption_pairs(predictions: Source, gt: Mapping[str, dict]) -> list[CaptionPair]:
    """One pair per GT step, in GT order; captions are aligned by index with the steps and extra
    predicted captions are ignored (as the authors' loop does)."""
    pred, pred_name = _predictions(predictions)
    pairs = []
    for video, entry in gt.items():
        captions = _field(_prediction_entry(pred, video, pred_name, "video"), "captions", pred_name, video)
        n_steps = len(entry["captions"])
        if not isinstance(captions, list) or len(captions) < n_steps:
            got = len(captions) if isinstance(captions, list) else type(captions).__name__
            raise DataError(f"expected a list of at least {n_steps} captions (one per GT step), got {got}",
                            file=pred_name, item=video, field="captions")
        for i, reference in enumerate(entry["captions"]):
            caption = captions[i]
            if not isinstance(caption, dict) or not isinstance(caption.get("sentence"), str):
                raise DataError("expected a string", file=pred_name, item=video, field=f"captions[{i}].sentence")
            pairs.append(CaptionPair(video, caption["sentence"].lower(), reference["sentence"].lower(),
                                     reference.get("start"), reference.get("end")))
    return pairs


def _clip_inputs(pairs: Sequence[CaptionPair], frame_dir: Path) -> list[Any]:
    """Frames of each pair's video as the authors find them: `<frame_dir>/<video>/*.jpg` by frame number."""
    from spacewalk.benchmarks.hirest.captioning_metrics import ClipInput, frame_sort_key

    frames = {}
    for video in dict.fromkeys(p.video for p in pairs):
        frames[video] = sorted((Path(frame_dir) / video).glob("*.jpg"), key=frame_sort_key)
    return [ClipInput(frames[p.video], p.start, p.end) if _is_number(p.start) and _is_number(p.end) else None
            for p in pairs]


def score_step_captioning(predictions: Source, gt: Source, categories: Source | Categories,
                          scorer: Any = None, per_category: bool = True,
                          frame_dir: str | Path | None = None) -> dict[str, Any]:
    """Step captioning: BLEU-1..4, METEOR, ROUGE-L, CIDEr (x100) and, where available, SPICE, BERTScore
    and CLIPScore; overall and per video category, each category scored on its own captions as the
    authors' `--print_per_category` does (so CIDEr's IDF is the category's). Metrics that cannot be
    computed here are listed under "skipped" with the reason.

    `predictions`: `{video: {"captions": [{"sentence": str}, ...]}}`; `gt`: the formatted step GT.
    `scorer`: a `captioning_metrics.CaptionScorer` to reuse (its METEOR process); one is made otherwise.
    """
    from spacewalk.benchmarks.hirest.captioning_metrics import (
        CaptionScorer,  # Java-backed; imported only for captioning
    )

    steps, _ = read_moment_gt(gt, with_captions=True)
    pairs = read_caption_pairs(predictions, steps)
    cats = load_categories(categories)
    video_category = {video: cats.of_video(video) for video in steps}
    groups = {OVERALL: list(range(len(pairs)))}
    if per_category:
        for category in _sorted_categories(video_category.values()):
            groups[category] = [i for i, p in enumerate(pairs) if video_category[p.video] == category]
    clip_inputs = None if frame_dir is None else _clip_inputs(pairs, Path(frame_dir))
    own_scorer = scorer is None
    scorer = CaptionScorer() if own_scorer else scorer
    try:
        results = scorer.score_groups([p.candidate for p in pairs], [p.reference for p in pairs], groups,
                                      clip_inputs)
    finally:
        if own_scorer:
            scorer.close()
    metrics = {name: {"Total": len({pairs[i].video for i in indices}), **results.metrics[name]}
               for name, indices in groups.items()}
    overall = metrics.pop(OVERALL)
    return {OVERALL: overall, "per_category": metrics, "skipped": results.skipped}
