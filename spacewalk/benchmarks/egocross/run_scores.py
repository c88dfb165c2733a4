"""EgoCross runs re-scored from what they recorded (spacewalk/results/rescore.py; `Benchmark.rescore` of
spacewalk/benchmarks/egocross/benchmark.py), with the questions as units, overall and per domain:

- CloseQA: records.jsonl, the task's own metrics (the authors' parsing, recorded as each record's choice);
- OpenQA: the judgements the run recorded (egocross_openqa_judgements.json: the substring rule's or the LLM
  judge's score per reply), aggregated by the official `openqa_metrics`. The judge is not asked again:
  re-scoring must not depend on a model's second opinion, and a judge may not be at hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.registry import QUESTIONS
from spacewalk.core.errors import DataError
from spacewalk.core.io import load_json
from spacewalk.multiple_choice.records import item_records
from spacewalk.results.layout import METRICS, read_metrics
from spacewalk.results.rescore import ScoredRun, data_arguments, digest, flat_metric, model_label


def _metrics(official: dict[str, Any], questions, correct) -> dict:
    ids = [str(q.id) for q in questions]
    out = {"accuracy": flat_metric(official["accuracy"], ids, correct, QUESTIONS, ("accuracy",))}
    domains = np.array([q.domain for q in questions], dtype=object)
    for domain, numbers in official.get("per_domain", {}).items():
        mask = domains == domain
        out[f"per_domain/{domain}"] = flat_metric(numbers["accuracy"], np.asarray(ids)[mask].tolist(),
                                                  np.asarray(correct)[mask], QUESTIONS,
                                                  ("per_domain", domain, "accuracy"))
    return out


def _openqa(run_dir: Path, task, items) -> tuple[dict[str, Any], list, list[bool]]:
    from spacewalk.benchmarks.egocross import openqa
    from spacewalk.benchmarks.egocross.task import OPENQA_JUDGEMENTS_FILE, openqa_metrics

    path = run_dir / OPENQA_JUDGEMENTS_FILE
    if not path.is_file():
        raise DataError("an OpenQA run without its judgements cannot be re-scored (the judge is not asked again)",
                        file=path)
    recorded = load_json(path)
    answered = [item for item in items if item.answer is not None]
    judgements = []
    for item in answered:
        entry = recorded.get(item.id) if isinstance(recorded, dict) else None
        if not isinstance(entry, dict) or "score" not in entry:
            raise DataError("no judgement of this answered question", file=path, item=item.id, field="score")
        judgements.append(openqa.Judgement(entry.get("prediction"), float(entry["score"]), str(entry.get("source")),
                                           entry.get("judge_prompt"), entry.get("judge_reply")))
    questions = [task._by_id[item.id] for item in answered]
    judge = (read_metrics(run_dir / METRICS).get("judge") if (run_dir / METRICS).exists() else None) or "given"
    return openqa_metrics(questions, judgements, judge), questions, [j.correct for j in judgements]


def rescore(run_dir: Path, config: dict[str, Any]) -> ScoredRun:
    from spacewalk.benchmarks.egocross.task import EgoCrossOpenQATask, open_egocross

    qa = config["data"].get("qa", "closeqa")
    # no judge (OpenQA's recorded judgements are read instead) and no frames needed to score the records
    task = open_egocross(**data_arguments(config, judge=None, check_frames=False))
    items = task.items()
    if isinstance(task, EgoCrossOpenQATask):
        official, questions, correct = _openqa(run_dir, task, items)
        scoring = {"qa": qa, "judge": official["judge"]}
    else:
        records = item_records(run_dir, items)
        official = task.metrics(items, records)
        questions, correct = task.correctness(items, records)
        scoring = {"qa": qa}
    identity = {"task": f"egocross {qa}", "split": "testbed",
                "items": digest([[i.id, i.answer, list(i.options)] for i in items]),
                "items_summary": f"{len(items)} questions", **scoring}
    return ScoredRun(run_dir, identity["task"], identity, _metrics(official, questions, correct),
                     model_label(config, run_dir))
