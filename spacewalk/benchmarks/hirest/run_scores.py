"""HiREST runs re-scored from their official prediction files (spacewalk/results/rescore.py; `Benchmark.rescore` of
spacewalk/benchmarks/hirest/benchmark.py): the task-specific baselines' run (evaluate.py, `predictions_<task>.json` in
the
run directory, metrics.json {"split": s, task: ...}) and the joint model's (train.py, `<run>/val/` and
`<run>/test/`, metrics.json {split: {task: ...}}). Every overall number that has an interval (video retrieval
R@k over queries, moment retrieval R@t over the clippable (query, video) pairs, segmentation recall and precision
over videos) is re-scored by the official scoring (`scoring.<task>_units`, the same units and aggregation as
`score_<task>`), named `<split>/<task>/<number>` ("val/moment_retrieval/R@0.5"). Step captioning's corpus
metrics have no per-query units and are not re-scored here.

The split is part of each number's name, so a baseline run on val and a joint-model run compare on the numbers
they share; their items are checked number by number (python -m spacewalk.compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spacewalk.core.errors import DataError
from spacewalk.results.bootstrap import _numbers
from spacewalk.results.layout import METRICS, read_metrics
from spacewalk.results.rescore import ScoredMetric, ScoredRun, data_arguments, model_label, summary_metric

TASKS = ("video_retrieval", "moment_retrieval", "moment_segmentation")


def _task_units(dataset, task: str, split: str, predictions: Path):
    from spacewalk.benchmarks.hirest import scoring
    from spacewalk.benchmarks.hirest.dataset import CATEGORIES_FILE
    from spacewalk.benchmarks.hirest.evaluation import gt_file

    units = getattr(scoring, f"{task}_units")
    return units(predictions, gt_file(dataset, task, split), dataset.path(CATEGORIES_FILE))


def _scored(dataset, task: str, split: str, pred_dir: Path, path: tuple[str, ...]) -> dict[str, ScoredMetric]:
    from spacewalk.benchmarks.hirest.predictions import PREDICTION_FILES

    file = pred_dir / PREDICTION_FILES.get(task, f"predictions_{task}.json")
    if not file.is_file():
        raise DataError(f"metrics.json scores {task} on {split} but its prediction file is missing", file=file)
    units = _task_units(dataset, task, split, file)
    values = [x for _, x in units.items]
    out = {}
    for leaf, value in _numbers(units.summarise(values)).items():
        def number(chosen: list, leaf=leaf, summarise=units.summarise) -> float:
            return _numbers(summarise(chosen))[leaf]

        out[f"{split}/{task}/{leaf}"] = summary_metric(value, units.ids, values, number, units.unit,
                                                        (*path, "all", *leaf.split("/")))
    return out


def rescore(run_dir: Path, config: dict[str, Any]) -> ScoredRun:
    from spacewalk.benchmarks.hirest.open import open_hirest

    dataset = open_hirest(**{k: v for k, v in data_arguments(config).items()
                             if k in ("root", "synthetic_root", "seed", "synthetic")})
    path = run_dir / METRICS
    if not path.exists():
        raise DataError("the run has no metrics.json (which tasks and splits it scored)", file=path)
    recorded = read_metrics(path)
    metrics: dict[str, ScoredMetric] = {}
    if isinstance(recorded.get("split"), str):  # the baselines: one split, files in the run directory
        split = recorded["split"]
        for task in TASKS:
            if isinstance(recorded.get(task), dict) and "all" in recorded[task]:
                metrics |= _scored(dataset, task, split, run_dir, (task,))
    else:  # the joint model: val and test, files in <run>/<split>/
        for split in ("val", "test"):
            for task in TASKS:
                if isinstance((recorded.get(split) or {}).get(task), dict) and "all" in recorded[split][task]:
                    metrics |= _scored(dataset, task, split, run_dir / split, (split, task))
    # the items are checked number by number (the split is in each name), not by one digest of the run's
    identity = {"task": "hirest", "items_summary": ", ".join(sorted({name.rsplit("/", 1)[0] for name in metrics}))}
    return ScoredRun(run_dir, "hirest", identity, metrics, model_label(config, run_dir))
