"""Spacewalk-18 step recognition posed as a multiple-choice question (docs/spacewalk18.md, The paper's models, "Video
LLMs"): each official sample of a split becomes App. C.2's question over its context window of length w
([t - w/2, t + w/2] clipped, data/windows.py), with the K + 1 classes of its recording as
the choices (0: Irrelevant with the DES text; i: the step's caption and narration) and the window's
transcript in the prompt. The reply is parsed as a single number 0..K; the predictions go out in the
official step-recognition format (`predictions.json`, with per-class scores when the backend gives them,
so mAP too) and are scored by the official Accuracy, mAP and IoU (spacewalk/benchmarks/spacewalk18/scoring/official.py).

An unparsable reply is wrong: metrics.json counts it (`unparsable`), and the prediction written for it is
the class after the label (`(label + 1) % (K + 1)`), certainly wrong, so that
`python -m spacewalk.score` on predictions.json gives metrics.json's Accuracy and IoU. (IoU then counts
that interval for a class the model never chose; there is no "no answer" value in the official format.)

`samples_per_video` takes an evenly spaced subset of each video's official samples (in order) for cost
(`max_videos` the first videos, `limit` the first samples in item order);
its metrics are the official rules applied to the subset (IoU's intervals come from the subset's
neighbours), not the official numbers, and the predictions are written to `predictions.subset.json` with
the subset's samples in `samples.subset.json`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import (
    IRRELEVANT_DESCRIPTION,
    Spacewalk18,
    StepSample,
    samples_to_json,
)
from spacewalk.benchmarks.spacewalk18.data.windows import TranscriptIndex, context_window
from spacewalk.benchmarks.spacewalk18.intervals import step_recognition_intervals
from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
from spacewalk.benchmarks.spacewalk18.questions.question_answering import ANSWER_LIMITS, choices_block
from spacewalk.benchmarks.spacewalk18.questions.summaries import check_summary, steps_in_window, summary_parts
from spacewalk.benchmarks.spacewalk18.scoring.official import step_recognition_metrics
from spacewalk.benchmarks.spacewalk18.scoring.predictions import write_step_predictions
from spacewalk.core.durations import parse_duration
from spacewalk.core.errors import ConfigError
from spacewalk.core.io import write_json
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual, check_limit
from spacewalk.multiple_choice.parsing import fill_unparsable, parse_number
from spacewalk.multiple_choice.task import Prompt, Record
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.results.layout import PREDICTIONS

# App. C.2, in order: the video; the mission and transcript sentence; the instruction; the question; the
# choices. Quoted sentences are the paper's; the instruction (reply with one number from 0 to K and nothing
# else, the likeliest when unsure) is only described there (docs/spacewalk18.md, The paper's models), so it is
# written out here.
MISSION = ("You are given a spacewalk video, where the spacewalk mission can be divided into {K} steps. "
           "The transcript of the video speech is: {transcript}.")
INSTRUCTION = ("Answer with a single number from 0 to {K} and nothing else. "
               "If you are not sure, give the most likely answer.")
QUESTION = "Which step does the frame in the middle of this video belong to?"
# Adaptation via summarisation (Table 4): questions/summaries.py. The rating question's wording
# is
# ours (the paper's is not in our copy).
RATING_INSTRUCTION = ("Answer with a single number from 1 to 10 and nothing else. "
                      "If you are not sure, give the most likely answer.")
RATING_QUESTION = ("How likely is it, on a scale from 1 (not at all) to 10 (certainly), that the frame in the "
                   "middle of this video belongs to this step: ({index}) {option}")


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?" else text + "."


def step_options(steps) -> tuple[str, ...]:
    """The choices: "Irrelevant: <DES>" and "<caption_i>: <transcript_i>." (the caption alone when the step
    has no narration)."""
    options = [f"Irrelevant: {IRRELEVANT_DESCRIPTION}"]
    for step in steps[1:]:
        options.append(_sentence(f"{step.caption}: {step.transcript}" if step.transcript.strip() else step.caption))
    return tuple(options)


def subset(samples: Sequence[StepSample], n: int | None) -> list[StepSample]:
    """n samples evenly spaced over the list (all of them when n is None or at least the list's length)."""
    if n is None or n >= len(samples):
        return list(samples)
    if n < 1:
        raise ConfigError(f"samples_per_video must be at least 1, got {n}")
    return [samples[i] for i in np.linspace(0, len(samples) - 1, n).round().astype(int)]


class StepRecognitionQuestions:
    """`summary` (Table 4, questions/summaries.py): "none" (App. C.2's prompt), "animation" (the
    mission's animated preview), "step_oracle" (the steps that occur in the window, captions and middle
    frames) or "step_oracle_captions" (their captions only); the summary goes after the transcript sentence."""

    name = "spacewalk18_step_questions"
    answer_limits = ANSWER_LIMITS  # a number 0..K, or a rating 1-10 (StepRatingQuestions): the QA task's limit

    def __init__(self, dataset: Spacewalk18, split: str = "test", context: float | str = 300.0,
                 samples_per_video: int | None = None, max_videos: int | None = None, summary: str = "none",
                 limit: int | None = None):
        self.summary = check_summary(summary)
        check_limit(samples_per_video, "samples_per_video")
        check_limit(max_videos, "max_videos")
        check_limit(limit, "limit")
        self.dataset = dataset
        self.split = split
        self.w = parse_duration(context)
        if not self.w > 0:  # an empty window asks about no moment of the recording
            raise ConfigError(f"context={context}: the window must be longer than 0 s; write e.g. 30s, 5min")
        self.all_samples = dataset.step_samples(split)
        videos = list(self.all_samples)[:max_videos] if max_videos is not None else list(self.all_samples)
        self.samples = {v: subset(self.all_samples[v], samples_per_video) for v in videos}
        if limit is not None:  # the first N of those samples, in video order (as every data set's data.limit)
            kept, left = {}, limit
            for v, samples in self.samples.items():
                if left > 0:
                    kept[v], left = samples[:left], left - len(samples[:left])
            self.samples = kept
            videos = list(kept)
        self.complete = videos == list(self.all_samples) and all(
            len(self.samples[v]) == len(self.all_samples[v]) for v in videos)
        self._items: list[MultipleChoiceItem] | None = None

    def items(self) -> list[MultipleChoiceItem]:
        if self._items is None:
            items = []
            for video_id, samples in self.samples.items():
                recording = self.dataset.recordings[video_id]
                index = TranscriptIndex(recording.transcript)
                options = step_options(recording.steps)
                for sample in samples:
                    window = context_window(sample.timestamp, self.w, recording.duration)
                    items.append(MultipleChoiceItem(
                        id=f"{video_id}/{sample.id}", question=QUESTION, options=options, answer=sample.label,
                        visual=Visual(video=recording.video_path, start=window.start, end=window.end),
                        transcript=index.text_in(window),
                        meta={"video_id": video_id, "sample_id": sample.id, "timestamp": sample.timestamp,
                              "K": recording.num_classes - 1,
                              "oracle_steps": steps_in_window(recording, window.start, window.end)}))
            self._items = items
        return self._items

    def context_parts(self, item: MultipleChoiceItem) -> list[str | Visual]:
        k = len(item.options) - 1
        recording = self.dataset.recordings[item.meta["video_id"]]
        return [Prompt.VISUAL, MISSION.format(K=k, transcript=item.transcript or ""),
                *summary_parts(self.summary, recording, item.visual.start, item.visual.end)]

    def prompt(self, item: MultipleChoiceItem) -> Prompt:
        k = len(item.options) - 1
        return Prompt((*self.context_parts(item), INSTRUCTION.format(K=k), f"Here is the question: {item.question}",
                       choices_block(item.options, [str(i) for i in range(k + 1)])),
                      labels=tuple(str(i) for i in range(k + 1)))

    def parse(self, item: MultipleChoiceItem, reply: str) -> int | None:
        return parse_number(reply, len(item.options))

    def predictions(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]
                    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
        """Per video, the predictions in sample order (unparsable filled with a wrong class) and the scores
        when every record has K + 1 of them."""
        by_id = {r.item_id: r for r in records}
        predictions: dict[str, list[int]] = {v: [] for v in self.samples}
        scores: dict[str, list] = {v: [] for v in self.samples}
        for item in items:
            record = by_id[item.id]
            video_id = item.meta["video_id"]
            predictions[video_id].append(fill_unparsable(record.choice, item.answer, len(item.options)))
            ok = record.scores is not None and len(record.scores) == len(item.options)
            scores[video_id].append(list(record.scores) if ok else None)
        with_scores = all(s is not None for v in scores.values() for s in v)
        preds = {v: np.asarray(p, dtype=np.int64) for v, p in predictions.items()}
        return preds, ({v: np.asarray(s, dtype=np.float64) for v, s in scores.items()} if with_scores else None)

    def metrics(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]) -> dict[str, Any]:
        predictions, scores = self.predictions(items, records)
        result = step_recognition_metrics(self.dataset.recordings, self.samples, predictions, scores)
        unparsable = sum(r.choice is None for r in records)
        return result | {"split": self.split, "context_seconds": self.w, "count": len(items),
                         "unparsable": unparsable, "official_samples": self.complete}

    def intervals(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], metrics: dict[str, Any],
                  options: BootstrapOptions) -> dict[str, Any]:
        """The step-recognition intervals (over recordings: spacewalk/benchmarks/spacewalk18/intervals.py)."""
        return step_recognition_intervals(metrics, options)

    def write_outputs(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], out_dir: Path) -> None:
        predictions, scores = self.predictions(items, records)
        if self.complete:
            write_step_predictions(Path(out_dir) / PREDICTIONS, predictions, scores)
        else:
            write_step_predictions(Path(out_dir) / "predictions.subset.json", predictions, scores)
            write_json(Path(out_dir) / "samples.subset.json", samples_to_json(self.samples), indent=None)


class StepRatingQuestions(StepRecognitionQuestions):
    """Table 4's rating variant: every sample asks K + 1 questions, one per class (Irrelevant included), "rate
    1-10 how likely the middle frame belongs to this step"; the sample's prediction is the best-rated class
    (ties: the lowest index; an unparsable rating counts as 0), its scores the ratings (so mAP too). A sample
    whose every rating is unparsable is unparsable (wrong, counted). Costs K + 1 requests per sample: use
    samples_per_video. The items are the rating questions (item id <video>/<sample>/<class>, no answer);
    the metrics and predictions.json are per sample."""

    name = "spacewalk18_step_rating"
    RATINGS = tuple(str(r) for r in range(1, 11))

    def items(self) -> list[MultipleChoiceItem]:
        if self._items is None:
            samples = super().items()
            self._samples = samples
            self._items = [MultipleChoiceItem(
                id=f"{s.id}/{c}", question=RATING_QUESTION.format(index=c, option=option), options=self.RATINGS,
                answer=None, visual=s.visual, transcript=s.transcript, meta={**s.meta, "class": c, "sample": s.id,
                                                                            "label": s.answer})
                for s in samples for c, option in enumerate(s.options)]
        return self._items

    def prompt(self, item: MultipleChoiceItem) -> Prompt:
        return Prompt((*self.context_parts(item), RATING_INSTRUCTION, f"Here is the question: {item.question}"),
                      labels=self.RATINGS)

    def parse(self, item: MultipleChoiceItem, reply: str) -> int | None:
        value = parse_number(reply, 11)
        return None if value in (None, 0) else value - 1  # the index of rating `value` in RATINGS

    def sample_records(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]
                       ) -> tuple[list[MultipleChoiceItem], list[Record]]:
        """One record per sample: the best-rated class, the ratings as scores."""
        self.items()
        by_id = {r.item_id: r for r in records}
        out = []
        for sample in self._samples:
            ratings = [by_id[f"{sample.id}/{c}"].choice for c in range(len(sample.options))]
            scores = [0.0 if r is None else float(r + 1) for r in ratings]
            choice = None if all(r is None for r in ratings) else int(np.argmax(scores))
            out.append(Record(item_id=sample.id, prompt="", reply="", choice=choice, correct=choice == sample.answer,
                              scores=tuple(scores)))
        return list(self._samples), out

    def metrics(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]) -> dict[str, Any]:
        samples, per_sample = self.sample_records(items, records)
        return super().metrics(samples, per_sample) | {"ratings": len(records),
                                                        "unparsable_ratings": sum(r.choice is None for r in records)}

    def write_outputs(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], out_dir: Path) -> None:
        super().write_outputs(*self.sample_records(items, records), out_dir)


def step_recognition_questions_task(root: str | Path | None = None, synthetic_root: str | Path | None = None,
                                    seed: int = 0, synthetic: Mapping[str, Any] | None = None, split: str = "test",
                                    context: float | str = 300.0, samples_per_video: int | None = None,
                                    max_videos: int | None = None, summary: str = "none",
                                    form: str = "question", limit: int | None = None) -> StepRecognitionQuestions:
    """The `data=spacewalk18_step_questions` config; `form`: "question" (one question with K + 1 choices per
    sample) or "rating" (K + 1 rating questions per sample, StepRatingQuestions); `limit`: the first N
    samples (after `samples_per_video` and `max_videos`), each with its K + 1 ratings in the rating form."""
    forms = {"question": StepRecognitionQuestions, "rating": StepRatingQuestions}
    if form not in forms:
        raise ConfigError(f"form must be one of {sorted(forms)}, got {form!r}")
    check_limit(samples_per_video, "samples_per_video")  # before anything is generated or read
    check_limit(max_videos, "max_videos")
    check_limit(limit, "limit")
    return forms[form](open_spacewalk18(root, synthetic_root, seed, synthetic), split, context, samples_per_video,
                       max_videos, summary, limit)
