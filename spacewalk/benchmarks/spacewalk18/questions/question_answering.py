"""Spacewalk-18 video question answering as a multiple-choice task (docs/spacewalk18.md, Video question answering).

The 376 questions of `tasks/question_answering/test.json` on one-hour clips of the test recordings become
`MultipleChoiceItem`s (the clip as the visual, the clip's transcript, four options, the type as metadata);
the prompt is App. C.2's; the reply is parsed as a single letter (spacewalk/multiple_choice/parsing.py);
the metrics are `scoring.qa_accuracy` (overall and per type) plus the count of unparsable replies; the
official file is `answers.json`, the list of option indices in question-file order that
`python -m spacewalk.score --task question_answering` reads.

An unparsable reply is wrong. The official list has no "no answer" value, so answers.json holds, for an
unparsable reply, the option after the correct one (`(answer + 1) % 4`): a choice that is certainly
wrong, so the scoring tool's number equals metrics.json's. `unparsable` in metrics.json says how many.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import Question, Spacewalk18
from spacewalk.benchmarks.spacewalk18.data.windows import TranscriptIndex, Window
from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
from spacewalk.benchmarks.spacewalk18.questions.summaries import check_summary, summary_parts
from spacewalk.benchmarks.spacewalk18.scoring.official import qa_accuracy
from spacewalk.benchmarks.spacewalk18.scoring.predictions import write_qa_predictions
from spacewalk.core.errors import ConfigError
from spacewalk.multiple_choice.generation import AnswerLimits
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual, check_limit
from spacewalk.multiple_choice.parsing import fill_unparsable, letter, parse_letter
from spacewalk.multiple_choice.task import Prompt, Record
from spacewalk.results.bootstrap import BootstrapOptions, accuracy_intervals

ANSWERS_FILE = "answers.json"

# How long a reply may be, for both Spacewalk-18 question tasks (QA and step recognition as a question, its
# rating form too). The paper asks for "a single letter / number and nothing else" and gives no limit; the
# reply parser reads the choice from a bare letter, "(B) <option text>" or "... the answer is 3", so the limit
# only needs to let a model that adds its option's text or a sentence of reasoning reach its answer: 128
# new tokens (about 90 words) is our choice; a model that obeys stops after a token or two.
ANSWER_LIMITS = AnswerLimits(local=128, api=128, source="Spacewalk-18 single letter/number replies (ours: 128)")

# App. C.2, in order: the video; the instruction; the question; the choices. The quoted sentences are the
# paper's; the instruction (reply with one letter A-D and nothing else, the likeliest when unsure) is only
# described there (docs/spacewalk18.md, Video question answering), so it is written out here in full.
QA_INSTRUCTION = ("Answer with a single letter from A to {last} and nothing else. "
                  "If you are not sure, give the most likely answer.")
TRANSCRIPT_SENTENCE = "The transcript of the video speech is: {transcript}."


def choices_block(options: Sequence[str], labels: Sequence[str]) -> str:
    return "Here are the choices:\n" + "\n".join(f"({label}) {option}" for label, option in zip(labels, options))


class QuestionAnswering:
    """The Spacewalk-18 QA task. `transcript_in_prompt` adds the clip's transcript to the prompt in the words
    of the step-recognition prompt (the paper's QA prompt has the video only; a text-only model needs it).
    `summary` (Table 4, questions/summaries.py): "none", "animation" (the mission's animated
    preview), "step_oracle" (the steps that occur in the clip, captions and middle frames) or
    "step_oracle_captions"; it goes after the clip (and the transcript sentence), before the instruction."""

    name = "spacewalk18_qa"
    answer_limits = ANSWER_LIMITS

    def __init__(self, dataset: Spacewalk18, transcript_in_prompt: bool = False, limit: int | None = None,
                 summary: str = "none", questions: str | Path | None = None):
        check_limit(limit, "limit")
        if questions is not None and not isinstance(questions, (str, Path)):
            raise ConfigError(f"data.questions={questions!r}: the path of a question file in the official format, "
                              "or null for the release's test questions")
        self.dataset = dataset
        self.summary = check_summary(summary)
        self.transcript_in_prompt = transcript_in_prompt
        self.questions_file = questions
        self.all_questions: list[Question] = dataset.questions(questions)
        self.questions: list[Question] = list(self.all_questions)
        if limit is not None:
            self.questions = self.questions[:limit]
        self._items: list[MultipleChoiceItem] | None = None

    def items(self) -> list[MultipleChoiceItem]:
        if self._items is None:
            indexes: dict[str, TranscriptIndex] = {}
            items = []
            for q in self.questions:
                recording = self.dataset.recordings[q.video_id]
                if q.video_id not in indexes:
                    indexes[q.video_id] = TranscriptIndex(recording.transcript)
                items.append(MultipleChoiceItem(
                    id=str(q.question_id), question=q.question, options=tuple(q.options), answer=q.answer,
                    visual=Visual(video=recording.video_path, start=q.video_start, end=q.video_end),
                    transcript=indexes[q.video_id].text_in(Window(q.video_start, q.video_end)),
                    meta={"type": q.type, "video_id": q.video_id, "question_id": q.question_id}))
            self._items = items
        return self._items

    def prompt(self, item: MultipleChoiceItem) -> Prompt:
        labels = [letter(i) for i in range(len(item.options))]
        parts = [Prompt.VISUAL]
        if self.transcript_in_prompt:
            parts.append(TRANSCRIPT_SENTENCE.format(transcript=item.transcript or ""))
        parts += summary_parts(self.summary, self.dataset.recordings[item.meta["video_id"]], item.visual.start,
                               item.visual.end)
        parts += [QA_INSTRUCTION.format(last=labels[-1]), f"Here is the question: {item.question}",
                  choices_block(item.options, labels)]
        return Prompt(tuple(parts), labels=tuple(labels))

    def parse(self, item: MultipleChoiceItem, reply: str) -> int | None:
        return parse_letter(reply, item.options)

    def official_answers(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]) -> list[int]:
        by_id = {r.item_id: r for r in records}
        return [fill_unparsable(by_id[i.id].choice, i.answer, len(i.options)) for i in items]

    def metrics(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]) -> dict[str, Any]:
        by_id = {r.item_id: r for r in records}
        questions = {str(q.question_id): q for q in self.questions}
        result = qa_accuracy(np.array(self.official_answers(items, records)), [questions[i.id] for i in items])
        unparsable_per_type: dict[str, int] = {}
        for item in items:
            if by_id[item.id].choice is None:
                unparsable_per_type[item.meta["type"]] = unparsable_per_type.get(item.meta["type"], 0) + 1
        return result | {"unparsable": sum(unparsable_per_type.values()), "unparsable_per_type": unparsable_per_type}

    def correctness(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]
                    ) -> tuple[list[str], list[bool], list[str]]:
        """Per question, in item order: its id, whether the official answer (unparsable ones filled as scored)
        is right, its type: the units of the intervals and of a paired comparison (spacewalk/results/rescore.py)."""
        questions = {str(q.question_id): q for q in self.questions}
        asked = [questions[i.id] for i in items]
        correct = [a == q.answer for a, q in zip(self.official_answers(items, records), asked, strict=True)]
        return [i.id for i in items], correct, [q.type for q in asked]

    def intervals(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], metrics: dict[str, Any],
                  options: BootstrapOptions) -> dict[str, Any]:
        """Accuracy's interval over the questions (the official answers, unparsable ones filled as scored),
        overall and per question type."""
        _, correct, types = self.correctness(items, records)
        return accuracy_intervals(correct, options, name="Accuracy", groups={"type": types},
                                  estimates={"Accuracy": metrics["Accuracy"], "per_type": metrics["per_type"]})

    def write_outputs(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], out_dir: Path) -> None:
        if len(items) != len(self.all_questions):
            # a limit subset: the official file must cover every question of the file
            write_qa_predictions(Path(out_dir) / "answers.subset.json", self.official_answers(items, records))
            return
        write_qa_predictions(Path(out_dir) / ANSWERS_FILE, self.official_answers(items, records))


def question_answering_task(root: str | Path | None = None, synthetic_root: str | Path | None = None, seed: int = 0,
                            synthetic: Mapping[str, Any] | None = None, transcript_in_prompt: bool = False,
                            limit: int | None = None, summary: str = "none",
                            questions: str | Path | None = None) -> QuestionAnswering:
    """The `data=spacewalk18_qa` config: the task on the release at `root` or on the synthetic default;
    `questions`: another question file in the official format (generated val questions) instead of the root's
    test file."""
    check_limit(limit, "limit")  # before anything is generated or read
    return QuestionAnswering(open_spacewalk18(root, synthetic_root, seed, synthetic), transcript_in_prompt, limit,
                             summary, questions)
