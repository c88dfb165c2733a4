"""EgoCross accuracy, overall and per group (docs/egoschema_egocross.md, EgoCross), for CloseQA and OpenQA alike.

The authors' scripts print the overall accuracy (correct / all items, unparsable replies counted wrong);
the paper reports it per domain, per category and per question type too. Percent, like our other scorers.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.egocross.dataset import Question
from spacewalk.core.errors import DataError
from spacewalk.core.io import load_json

GROUPS = {"domain": lambda q: q.domain, "dataset": lambda q: q.dataset, "category": lambda q: q.category,
          "question_type": lambda q: q.question_type}


def _accuracy(correct: int, total: int) -> float:
    return 100.0 * correct / total if total else 0.0


def grouped_accuracy(questions: Sequence[Question], correct: Mapping[int, bool],
                     unparsable: Mapping[int, bool] | None = None) -> dict[str, Any]:
    """accuracy, correct, total, unparsable overall, and {"per_<group>": {name: {accuracy, correct, total}}}."""
    n_correct = sum(bool(correct[q.id]) for q in questions)
    result: dict[str, Any] = {"accuracy": _accuracy(n_correct, len(questions)), "correct": n_correct,
                              "total": len(questions)}
    if unparsable is not None:
        result["unparsable"] = sum(bool(unparsable.get(q.id)) for q in questions)
    for name, key in GROUPS.items():
        tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for q in questions:
            tally[key(q)][0] += bool(correct[q.id])
            tally[key(q)][1] += 1
        result[f"per_{name}"] = {k: {"accuracy": _accuracy(c, t), "correct": c, "total": t}
                                 for k, (c, t) in sorted(tally.items())}
    return result


def read_replies(path: str | Path, questions: Sequence[Question]) -> dict[int, str]:
    """The raw replies {id: text}, one for every question (a missing one is an error, not a silent zero)."""
    path = Path(path)
    raw = load_json(path)
    if not isinstance(raw, dict):
        raise DataError(f"expected an object {{id: reply text}}, got {type(raw).__name__}", file=path)
    known = {q.id for q in questions}
    replies: dict[int, str] = {}
    for key, text in raw.items():
        try:
            qid = int(key)
        except ValueError:
            raise DataError("not a question id", file=path, item=key, field="id") from None
        if qid not in known:
            raise DataError("not an EgoCross question of the data file", file=path, item=key, field="id")
        if qid in replies:  # "7" and "07" (or " 7") are different keys but the same question
            raise DataError(f"question {qid} has more than one reply", file=path, item=key, field="id")
        if text is None:
            text = ""  # a model that returned nothing: unparsable, counted wrong
        if not isinstance(text, str):
            raise DataError(f"expected the raw reply text, got {type(text).__name__} {json.dumps(text)[:60]}",
                            file=path, item=key, field=key)
        replies[qid] = text
    for q in questions:
        if q.id not in replies:
            raise DataError("no reply for this question", file=path, item=str(q.id), field="id")
    return replies


def require_answers(questions: Sequence[Question], file: Path) -> None:
    for q in questions:
        if q.answer is None:
            raise DataError("no answer (correct_option_letter, answer_text, detailed_answer): scoring needs the "
                            "authors' answers merged in (--answers)", file=file, item=str(q.id),
                            field="correct_option_letter")
