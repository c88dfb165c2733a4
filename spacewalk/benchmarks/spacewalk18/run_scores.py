"""Spacewalk-18 runs re-scored from what they recorded (spacewalk/results/rescore.py; `Benchmark.rescore` of
spacewalk/benchmarks/spacewalk18/benchmark.py), with the units of each headline number for the paired comparison:

- step recognition (train.py, evaluate.py; `<run>/decoded/<name>/` for the plan decoding): predictions.json,
  scored by `scoring.step_recognition_metrics`; each number of headlines.STEP_RECOGNITION per recording, its
  samples drawn again by the number's `per_recording` (IoU's are not: headlines.py says why);
- intra-video retrieval: predictions.json, `scoring.retrieval_accuracy`; samples resampled within each
  recording, every recording kept;
- video QA (`data=spacewalk18_qa`): records.jsonl, the task's own metrics; questions (overall and per type);
- step recognition as questions (`data=spacewalk18_step_questions`): records.jsonl, the task's own metrics
  (the official step-recognition rules), with the units of step recognition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording, StepSample
from spacewalk.benchmarks.spacewalk18.headlines import (
    INTRA_VIDEO_RETRIEVAL,
    QUESTION_ANSWERING,
    STEP_RECOGNITION,
    RecordingRows,
)
from spacewalk.core.errors import DataError
from spacewalk.core.io import load_json
from spacewalk.multiple_choice.records import item_records
from spacewalk.results.layout import METRICS, PREDICTIONS, read_metrics
from spacewalk.results.rescore import (
    ScoredMetric,
    ScoredRun,
    check_reproduces,
    config_value,
    data_arguments,
    digest,
    flat_metric,
    model_label,
)

QUESTIONS = QUESTION_ANSWERING[0].unit


def _grouped(value: float | None, videos: Sequence[str], items: Sequence[Sequence[str]], per_video, unit: str,
             name: str, within: bool = True, between: bool = True) -> ScoredMetric:
    """A per-recording number (in percent) averaged over recordings; `per_video(g, counts)` gives recording g's
    value on each multiset of its samples. The identity multisets must give the official number."""
    metric = ScoredMetric(value, unit, tuple(videos), tuple(tuple(i) for i in items), per_video, (name,),
                          within=within, between=between)
    if value is not None:
        whole = np.array([per_video(g, np.ones((1, len(i)), dtype=np.int64))[0] for g, i in enumerate(items)])
        check_reproduces(value, float(np.nanmean(whole)), name)
    return metric


def step_recognition_scored(recordings: Mapping[str, Recording], samples: Mapping[str, Sequence[StepSample]],
                            predictions: Mapping[str, np.ndarray], scores: Mapping[str, np.ndarray] | None,
                            official: Mapping[str, Any]) -> dict[str, ScoredMetric]:
    """Each headline number of `official` (step_recognition_metrics' result on these predictions; a number it
    leaves undefined, mAP without scores, is left out) with its units: per recording, on draws of its samples, by
    the number's declared `per_recording` (headlines.STEP_RECOGNITION)."""
    videos = list(predictions)
    rows = [RecordingRows(np.asarray(predictions[v]), np.array([s.label for s in samples[v]], dtype=np.int64),
                          None if scores is None else scores[v], recordings[v].num_classes,
                          official["per_video"][v]) for v in videos]
    items = [[str(s.id) for s in samples[v]] for v in videos]
    return {h.name: _grouped(official[h.name], videos, items,
                             lambda g, counts, h=h: h.per_recording(rows[g], counts), h.unit, h.name,
                             within=h.samples_redrawn)
            for h in STEP_RECOGNITION if official.get(h.name) is not None}


def _samples_digest(samples: Mapping[str, Sequence[Any]]) -> str:
    return digest([[v, [[s.id, s.frame_index, s.label] for s in ss]] for v, ss in samples.items()])


def _items_summary(samples: Mapping[str, Sequence[Any]]) -> str:
    return f"{len(samples)} recordings, {sum(len(s) for s in samples.values())} samples"


def _recorded(run_dir: Path) -> dict[str, Any]:
    return read_metrics(run_dir / METRICS) if (run_dir / METRICS).exists() else {}


def _split(run_dir: Path, config: Mapping[str, Any]) -> str:
    """The split the predictions are of: metrics.json's, else the config's (evaluate.py), else test (train.py)."""
    split = _recorded(run_dir).get("split") or config.get("split") or "test"
    if split == "val" and not (run_dir / PREDICTIONS).is_file():
        raise DataError("a run that stopped after val (test=false) has no test predictions to re-score",
                        file=run_dir / METRICS, field="split")
    return str(split)


def _predictions_file(run_dir: Path) -> Path:
    path = run_dir / PREDICTIONS
    if path.is_dir() or not path.is_file():
        raise DataError(f"the run has no {PREDICTIONS} (unfinished, not scored, or stopped after val)" if not
                        path.exists() else "a folder, where a file is expected", file=path)
    return path


def _dataset(config: Mapping[str, Any]):
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18

    return open_spacewalk18(**{k: v for k, v in data_arguments(config).items()
                               if k in ("root", "synthetic_root", "seed", "synthetic")})


def _step_recognition(run_dir: Path, config: Mapping[str, Any]) -> ScoredRun:
    from spacewalk.benchmarks.spacewalk18.scoring.official import step_recognition_metrics
    from spacewalk.benchmarks.spacewalk18.scoring.predictions import read_step_predictions

    dataset = _dataset(config)
    split = _split(run_dir, config)
    path = _predictions_file(run_dir)
    in_file = load_json(path)
    every = dataset.step_samples(split)
    # a limited run scores the whole videos it saw: the file's videos, in the official order
    samples = {v: every[v] for v in every if isinstance(in_file, dict) and v in in_file} or every
    read = read_step_predictions(path, dataset.recordings, samples)
    official = step_recognition_metrics(dataset.recordings, samples, read.predictions, read.scores)
    decoded = run_dir.parent.name == "decoded"
    return ScoredRun(run_dir, "spacewalk18 step_recognition",
                     {"task": "spacewalk18 step_recognition", "split": split, "items": _samples_digest(samples),
                      "items_summary": _items_summary(samples), "undefined": "exclude"},
                     step_recognition_scored(dataset.recordings, samples, read.predictions, read.scores, official),
                     model_label(config, run_dir) + (f" decoded {run_dir.name}" if decoded else ""))


def _intra_video_retrieval(run_dir: Path, config: Mapping[str, Any]) -> ScoredRun:
    from spacewalk.benchmarks.spacewalk18.data.retrieval_sampler import (
        RetrievalSamplerConfig,
        recording_retrieval_samples,
    )
    from spacewalk.benchmarks.spacewalk18.scoring.official import retrieval_accuracy
    from spacewalk.benchmarks.spacewalk18.scoring.predictions import read_retrieval_predictions

    dataset = _dataset(config)
    recorded = _recorded(run_dir)
    split = "test"  # the task scores the test split (val beside it)
    source = (recorded.get("sample_sources") or {}).get(split) or config_value(config, f"datamodule.samples.{split}")
    if source == "official":
        samples = dataset.retrieval_samples(split)
    elif source == "generated":  # our sampler's, as the run's DataModule drew them (its settings and seed)
        sampler = RetrievalSamplerConfig(**(config_value(config, "datamodule.sampler") or {}))
        samples = {}
        for rec in dataset.split(split):
            try:
                samples[rec.video_id] = recording_retrieval_samples(rec, sampler)
            except ValueError:  # a recording with no usable pair has no samples (the DataModule skips it too)
                continue
    else:
        raise DataError("says neither 'official' nor 'generated' for the test samples' source",
                        file=run_dir / METRICS, field="sample_sources")
    path = _predictions_file(run_dir)
    predictions = read_retrieval_predictions(path, samples)
    official = retrieval_accuracy(predictions, samples)
    videos = list(predictions)
    [headline] = INTRA_VIDEO_RETRIEVAL
    rows = [RecordingRows(np.asarray(predictions[v]), np.array([s.label for s in samples[v]], dtype=np.int64),
                          None, 2, {}) for v in videos]
    metric = _grouped(official[headline.name], videos, [[str(s.id) for s in samples[v]] for v in videos],
                      lambda g, counts: headline.per_recording(rows[g], counts), headline.unit, headline.name,
                      within=True, between=False)
    identity = {"task": "spacewalk18 intra_video_retrieval", "split": split, "sample_source": source,
                "items": digest([[v, [[s.id, s.label] for s in samples[v]]] for v in videos]),
                "items_summary": _items_summary({v: samples[v] for v in videos})}
    return ScoredRun(run_dir, identity["task"], identity, {headline.name: metric}, model_label(config, run_dir))


def _question_answering(run_dir: Path, config: Mapping[str, Any]) -> ScoredRun:
    from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task

    task = question_answering_task(**data_arguments(config))
    items = task.items()
    records = item_records(run_dir, items)
    official = task.metrics(items, records)
    ids, correct, types = task.correctness(items, records)
    metrics = {"Accuracy": flat_metric(official["Accuracy"], ids, correct, QUESTIONS, ("Accuracy",))}
    for qtype in official["per_type"]:
        mask = np.asarray(types) == qtype
        metrics[f"per_type/{qtype}"] = flat_metric(official["per_type"][qtype], np.asarray(ids)[mask].tolist(),
                                                   np.asarray(correct)[mask], QUESTIONS, ("per_type", qtype))
    identity = {"task": "spacewalk18 question_answering", "split": "test",
                "items": digest([[i.id, i.answer, list(i.options)] for i in items]),
                "items_summary": f"{len(items)} questions"}
    return ScoredRun(run_dir, identity["task"], identity, metrics, model_label(config, run_dir))


def _step_questions(run_dir: Path, config: Mapping[str, Any]) -> ScoredRun:
    from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import step_recognition_questions_task

    task = step_recognition_questions_task(**data_arguments(config))
    items = task.items()
    records = item_records(run_dir, items)
    official = task.metrics(items, records)
    per_sample = task.sample_records(items, records) if hasattr(task, "sample_records") else (items, records)
    predictions, scores = task.predictions(*per_sample)
    identity = {"task": "spacewalk18 step_recognition", "split": task.split, "items": _samples_digest(task.samples),
                "items_summary": _items_summary(task.samples), "undefined": "exclude"}
    return ScoredRun(run_dir, identity["task"], identity,
                     step_recognition_scored(task.dataset.recordings, task.samples, predictions, scores, official),
                     model_label(config, run_dir))


def rescore(run_dir: Path, config: dict[str, Any]) -> ScoredRun:
    """The Spacewalk-18 run at `run_dir` (its resolved config `config`) re-scored (module docstring)."""
    target = str(config["data"]["_target_"])
    task = config_value(config, "task.name")
    if target.endswith(".question_answering_task"):
        return _question_answering(run_dir, config)
    if target.endswith(".step_recognition_questions_task"):
        return _step_questions(run_dir, config)
    if task == "intra_video_retrieval":
        return _intra_video_retrieval(run_dir, config)
    if task == "step_recognition":
        return _step_recognition(run_dir, config)
    raise DataError(f"no re-scoring of Spacewalk-18 task {task!r} (data {target})", file=run_dir,
                    field="task.name")
