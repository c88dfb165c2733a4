"""A backend that answers by scoring every option, with no text to parse: the choice is the best-scoring option,
every option's score is kept in the record (so a step-recognition question also gets mAP), and the rule that
gave the scores goes into the record's meta.

What computes the scores is a *reader* handed in: anything with `name` (the run's backend name) and
`scores(item)` -> (one score per option, the name of the rule used). A reader
that needs a benchmark's own knowledge lives with that benchmark (this package never imports one): mc_plan's,
which reads Spacewalk-18 QA off a decoded step timeline, is
spacewalk/benchmarks/spacewalk18/questions/plan_reading.py. A non-finite score (an option the rule cannot
place) never wins unless every option has one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from spacewalk.multiple_choice.items import MultipleChoiceItem
from spacewalk.multiple_choice.task import Prompt, Reply


class OptionReader(Protocol):
    name: str

    def scores(self, item: MultipleChoiceItem) -> tuple[np.ndarray, str]: ...


class OptionScoresBackend:
    """`reader`: the OptionReader; `meta`: what every record's meta carries besides the rule."""

    def __init__(self, reader: OptionReader, meta: Mapping[str, Any] | None = None):
        self.reader = reader
        self.name = reader.name
        self.meta = dict(meta or {})

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        replies = []
        for item in items:
            scores, rule = self.reader.scores(item)
            scores = np.nan_to_num(np.asarray(scores, dtype=np.float64), neginf=-1e9)
            replies.append(Reply(choice=int(np.argmax(scores)), scores=tuple(float(x) for x in scores),
                                 meta={"rule": rule, **self.meta}))
        return replies

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        raise NotImplementedError(f"{self.name} chooses among options by their scores; it cannot generate text")
