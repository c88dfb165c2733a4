"""The contract between a benchmark's multiple-choice task and the harness that runs models on it.

A task (one per benchmark task: Spacewalk-18 QA, Spacewalk-18 step recognition as a question, EgoSchema,
EgoCross CloseQA) lives in its benchmark's package and knows its official files, prompt, reply parsing,
scoring and submission files. A backend (`spacewalk/multiple_choice/backends/`) knows a model and nothing
of any benchmark. The runner (`spacewalk/multiple_choice/runner.py`) asks the task for items and prompts,
the backend for replies, the task for the parse and the metrics, and keeps one JSONL record per item.

This is the lmms-eval split (a task's doc_to_visual / doc_to_text / process_results / aggregation, backends
apart), without its registry: a data config names the task's factory with `_target_`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from spacewalk.multiple_choice.items import MultipleChoiceItem


@dataclass(frozen=True)
class Prompt:
    """What a chat model is asked: `parts` in order, each a text or the `VISUAL` marker where the item's
    frames go (a backend that takes one image list puts them at the first marker; a text-only backend drops
    the marker). `system` is an optional system message. The task writes the benchmark's official wording;
    backends never rewrite it."""

    parts: tuple[str, ...]
    system: str | None = None

    VISUAL = "<visual>"

    @property
    def text(self) -> str:
        """The prompt as one text, the visual marker left out (text-only backends, the JSONL record)."""
        return "\n".join(p for p in self.parts if p != self.VISUAL)


@dataclass(frozen=True)
class Reply:
    """A backend's answer to one item: the raw `text` (what a generative model said), or, for backends that
    choose without generating (contrastive scoring), `choice`, the option index they picked, with the
    per-option `scores`; the runner parses `text` with the task's parser only when `choice` is None."""

    text: str = ""
    choice: int | None = None
    scores: tuple[float, ...] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Record:
    """One answered item, as the runner writes it to the run's JSONL: the prompt, the raw reply, the parsed
    choice (None = unparsable, counted as wrong and counted apart, never dropped), and correctness (None when
    the answer is hidden)."""

    item_id: str
    prompt: str
    reply: str
    choice: int | None
    correct: bool | None
    scores: tuple[float, ...] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class MultipleChoiceTask(Protocol):
    """One benchmark task, as the runner sees it."""

    name: str

    def items(self) -> Sequence[MultipleChoiceItem]:
        """The task's items in the official order (the order official list-shaped outputs follow)."""

    def prompt(self, item: MultipleChoiceItem) -> Prompt:
        """The benchmark's official prompt for `item`."""

    def parse(self, item: MultipleChoiceItem, reply: str) -> int | None:
        """The option index the benchmark's official parsing reads from `reply`, None when it reads none."""

    def metrics(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]) -> dict[str, Any]:
        """The official metrics of `records` (overall and per group the benchmark reports), with the number of
        unparsable replies."""

    def write_outputs(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], out_dir: Path) -> None:
        """The files the benchmark's scorer or leaderboard reads (official formats), written atomically."""


@runtime_checkable
class Backend(Protocol):
    """A model: items and their prompts in, one `Reply` per item out, in order. Backends batch as they like;
    the runner hands them a few items at a time so that a killed run loses at most those."""

    name: str

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        """One reply per item; the visual comes from `item.visual` (frames sampled by the backend's rule)."""

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        """Free text for prompts tied to no item's visual (an LLM judge, a caption-enhanced text stage).
        A backend that cannot generate (contrastive scoring) raises NotImplementedError saying so."""
