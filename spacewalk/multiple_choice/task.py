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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual


@dataclass(frozen=True)
class Prompt:
    """What a chat model is asked: `parts` in order, each
    - a text;
    - the `VISUAL` marker: where the item's own visual (`item.visual`, the clip asked about) goes (a
      backend shows it at the first marker and drops later ones; a text-only backend drops it);
    - a `Visual`: a context visual bound to that place (the mission's animated preview, a step's middle
      frame, ...), shown there as a video (a slice) or an image (a still, `Visual.time`).
    `system` is an optional system message. The task writes the benchmark's official wording; backends
    never rewrite it. `visual_parts(item)` gives every backend the same reading of the parts.
    `labels`: how the prompt names each option (its letter or number, what the task's parser reads as that
    option), for backends that score the options by likelihood (None: a prompt without options to name)."""

    parts: tuple[str | Visual, ...]
    system: str | None = None
    labels: tuple[str, ...] | None = None

    VISUAL = "<visual>"

    @property
    def text(self) -> str:
        """The prompt's texts as one text, every visual left out (what a text-only model reads)."""
        return "\n".join(p for p in self.parts if isinstance(p, str) and p != self.VISUAL)

    @property
    def context_visuals(self) -> tuple[Visual, ...]:
        return tuple(p for p in self.parts if isinstance(p, Visual))

    def visual_parts(self, item: MultipleChoiceItem | None, with_visuals: bool = True) -> list[str | Visual]:
        """The parts with every visual resolved, in order: the item's visual at the first `VISUAL` marker
        (later markers, and every marker when the item has no visual, dropped), context visuals as they are
        (every visual dropped when `with_visuals` is false: text-only models), and texts that end up next to
        each other joined with a newline, as `text` joins them. (Chat templates concatenate a turn's text
        entries with no separator: "...speech is: <transcript>.Answer with..." otherwise.)"""
        out: list[str | Visual] = []
        placed = False
        for part in self.parts:
            if part == self.VISUAL:
                if with_visuals and not placed and item is not None and item.visual is not None:
                    out.append(item.visual)
                placed = True
            elif isinstance(part, Visual):
                if with_visuals:
                    out.append(part)
            elif out and isinstance(out[-1], str):
                out[-1] += "\n" + part
            else:
                out.append(part)
        return out

    def audit_parts(self) -> list[str]:
        """The parts as texts for the record of a run: the item's visual as `<visual>`, a context visual as
        `<video: file [start, end) s>` or `<image: file at t s>`."""
        out = []
        for part in self.parts:
            if isinstance(part, Visual):
                out.append(f"<{'image' if part.is_still else 'video'}: {part.describe()}>")
            else:
                out.append(part)
        return out


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
    """One answered item, as the runner writes it to the run's JSONL: the prompt (its text, visuals as
    `Prompt.audit_parts` names them), the raw reply, the parsed choice (None = unparsable, counted as wrong
    and counted apart, never dropped), and correctness (None when the answer is hidden). `prompt_parts`: the
    ids of the prompt's parts in the run's part store (spacewalk/multiple_choice/records.py), when the
    record is kept compact; a record read back that way has `prompt == ""` until `records.read_run` fills
    it in."""

    item_id: str
    prompt: str
    reply: str
    choice: int | None
    correct: bool | None
    scores: tuple[float, ...] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    prompt_parts: tuple[str, ...] | None = None


@runtime_checkable
class MultipleChoiceTask(Protocol):
    """One benchmark task, as the runner sees it. A task whose replies a model writes also has `answer_limits`
    (an `AnswerLimits`: how many new tokens its answer format needs) and, when it drives models of its own
    (EgoCross OpenQA's judge), `generation_extra()` for run.json: spacewalk/multiple_choice/generation.py.
    A task may also have `intervals(items, records, metrics, options)`: the bootstrap intervals of its headline
    numbers over its own unit (spacewalk/results/bootstrap.py), metrics.json's "intervals".
    (Attributes the runner reads with getattr, left out of the protocol so that a toy task still is one.)"""

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
    the runner hands them a few items at a time so that a killed run loses at most those. A backend may also
    have `answer_as_completed(pairs)`: (item, prompt) pairs in, (item, prompt, reply) out as each reply arrives
    (the OpenAI-compatible one, several requests in flight); the runner then uses it and records each reply as
    it comes (read with getattr, left out of the protocol so that a toy backend still is one)."""

    name: str

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        """One reply per item; the visual comes from `item.visual` (frames sampled by the backend's rule)."""

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        """Free text for prompts tied to no item's visual (an LLM judge, a caption-enhanced text stage).
        A backend that cannot generate (contrastive scoring) raises NotImplementedError saying so."""
