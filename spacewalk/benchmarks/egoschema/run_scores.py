"""EgoSchema runs re-scored from their records.jsonl (spacewalk/results/rescore.py; `Benchmark.rescore` of
spacewalk/benchmarks/egoschema/benchmark.py): the task's own metrics (lmms-eval's parsing, recorded as each record's
choice; accuracy over the questions with a known answer), with the questions as units."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spacewalk.benchmarks.registry import QUESTIONS
from spacewalk.multiple_choice.records import item_records
from spacewalk.results.rescore import ScoredRun, data_arguments, digest, flat_metric, model_label


def rescore(run_dir: Path, config: dict[str, Any]) -> ScoredRun:
    from spacewalk.benchmarks.egoschema.task import open_egoschema

    # the clips are not needed to score the records (check_videos: the run checked them)
    task = open_egoschema(**data_arguments(config, check_videos=False))
    items = task.items()
    records = item_records(run_dir, items)
    official = task.metrics(items, records)
    ids, correct = task.correctness(items, records)
    answered = [item for item in items if item.answer is not None]
    identity = {"task": "egoschema", "split": task.split,
                "items": digest([[i.id, i.answer, list(i.options)] for i in items]),
                "items_summary": f"{len(items)} questions, {len(answered)} with a known answer"}
    return ScoredRun(run_dir, "egoschema", identity,
                     {"accuracy": flat_metric(official["accuracy"], ids, correct, QUESTIONS, ("accuracy",))},
                     model_label(config, run_dir))
