"""EgoSchema as a multiple-choice task of the harness (spacewalk/multiple_choice/task.py).

`split="subset"`: the 500 questions with public answers, scored locally. `split="full"`: all 5031 (no
answers but those 500); the run's submission files are what the server and Kaggle score, and the metrics
cover the answered subset inside it. The prompt is lmms-eval's (spacewalk/benchmarks/egoschema/prompts.py); each item
also carries the contrastive texts "Question: <q>? Is it <option>" in `meta["contrastive_texts"]` for
backends that score options against the video instead of generating.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.egoschema import prompts, scoring
from spacewalk.benchmarks.egoschema.dataset import EgoSchema
from spacewalk.benchmarks.egoschema.synthetic import ensure_egoschema
from spacewalk.benchmarks.release_or_synthetic import dataset_root
from spacewalk.core.errors import ConfigError
from spacewalk.multiple_choice.generation import AnswerLimits
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual, check_limit
from spacewalk.multiple_choice.task import Prompt, Record
from spacewalk.results.bootstrap import BootstrapOptions, accuracy_intervals

SPLITS = ("subset", "full")
SUBMISSION_JSON = "submission.json"
SUBMISSION_CSV = "submission.csv"
# lmms-eval's egoschema task, whose prompt and parser these are, generates at most 16 new tokens (its
# _default_template_yaml generation_kwargs, API models included); the prompt asks for the letter directly
ANSWER_LIMITS = AnswerLimits(local=prompts.LMMS_EVAL_MAX_NEW_TOKENS, api=prompts.LMMS_EVAL_MAX_NEW_TOKENS,
                             source="lmms-eval egoschema generation_kwargs (max_new_tokens 16)")


class EgoSchemaTask:
    name = "egoschema"
    answer_limits = ANSWER_LIMITS

    def __init__(self, dataset: EgoSchema, split: str = "subset", limit: int | None = None):
        if split not in SPLITS:
            raise ConfigError(f"EgoSchema split must be one of {SPLITS}, got {split!r}")
        self.dataset, self.split, self.limit = dataset, split, check_limit(limit, "limit")

    def __repr__(self) -> str:
        return f"EgoSchemaTask({self.dataset.questions_file}, split={self.split!r})"

    def items(self) -> list[MultipleChoiceItem]:
        questions = self.dataset.subset() if self.split == "subset" else self.dataset.questions
        if self.limit is not None:
            questions = questions[:self.limit]
        answers, windows = self.dataset.answers, self.dataset.clip_windows
        items = []
        for q in questions:
            meta: dict[str, Any] = {"contrastive_texts": prompts.contrastive_texts(q.question, q.options)}
            if q.q_uid in windows:
                w = windows[q.q_uid]
                meta.update(video_uid=w.video_uid, starting_sec=w.start, ending_sec=w.end)
            items.append(MultipleChoiceItem(id=q.q_uid, question=q.question, options=q.options,
                                            answer=answers.get(q.q_uid),
                                            visual=Visual(video=self.dataset.video(q.q_uid)), meta=meta))
        return items

    def prompt(self, item: MultipleChoiceItem) -> Prompt:
        return Prompt(parts=(Prompt.VISUAL, prompts.lmms_eval_text(item.question, item.options)),
                      labels=prompts.LETTERS[:len(item.options)])

    def parse(self, item: MultipleChoiceItem, reply: str) -> int | None:
        return prompts.parse_lmms_eval(reply, item.options)

    def metrics(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]) -> dict[str, Any]:
        choices = {r.item_id: r.choice for r in records}
        answers = {item.id: item.answer for item in items if item.answer is not None}
        result = scoring.accuracy(choices, answers)
        result["items"] = len(items)
        result["unparsable_all"] = sum(1 for r in records if r.choice is None)
        return result

    def correctness(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]
                    ) -> tuple[list[str], list[bool]]:
        """The questions with a known answer (those `metrics` counts), in item order: ids and correctness, the
        units of the intervals and of a paired comparison (spacewalk/results/rescore.py)."""
        choices = {r.item_id: r.choice for r in records}
        answered = [item for item in items if item.answer is not None]
        return [item.id for item in answered], [choices.get(item.id) == item.answer for item in answered]

    def intervals(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], metrics: dict[str, Any],
                  options: BootstrapOptions) -> dict[str, Any]:
        """The accuracy's interval over the questions with a known answer (those `metrics` counts); none when no
        question has one (the accuracy is then None)."""
        if metrics["accuracy"] is None:
            return {}
        return accuracy_intervals(self.correctness(items, records)[1], options,
                                  estimates={"accuracy": metrics["accuracy"]})

    def write_outputs(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], out_dir: Path) -> None:
        answers = scoring.submission({r.item_id: r.choice for r in records}, [item.id for item in items])
        scoring.write_submission_json(Path(out_dir) / SUBMISSION_JSON, answers)
        scoring.write_submission_csv(Path(out_dir) / SUBMISSION_CSV, answers)


def open_egoschema(root: str | Path | None = None, synthetic_root: str | Path | None = None, seed: int = 0,
                   synthetic: Mapping[str, Any] | None = None, split: str = "subset", limit: int | None = None,
                   videos: str | Path | None = None, check_videos: bool = True) -> EgoSchemaTask:
    """`data=egoschema`: the release at `root`; with root null, the synthetic EgoSchema at `synthetic_root`,
    written on first use (`synthetic`: spacewalk/benchmarks/egoschema/synthetic.py Options fields; the keys every data
    config shares, spacewalk/benchmarks/release_or_synthetic.py). `check_videos`: fail at once, naming the question,
    when
    a clip the run will show is missing (false: text-only backends)."""
    check_limit(limit, "limit")  # before anything is generated or read
    root = dataset_root(root, synthetic_root, seed, synthetic, ensure_egoschema, "EgoSchema")
    task = EgoSchemaTask(EgoSchema(root, videos=videos), split=split, limit=limit)
    if check_videos:
        questions = task.dataset.subset() if split == "subset" else task.dataset.questions
        task.dataset.check_videos(questions[:limit] if limit is not None else questions)
    return task
