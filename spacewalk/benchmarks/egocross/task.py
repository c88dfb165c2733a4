"""EgoCross as tasks of the harness: CloseQA as a multiple-choice task (spacewalk/multiple_choice/task.py),
and the scoring of both CloseQA and OpenQA replies (the score command and the harness share it).

Items show the frames as the release lists them (pre-extracted at 0.5 fps, 1 fps for CholecTrack20's
.png frames), with their times; the prompt is the authors' (closeqa.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.egocross import closeqa, openqa
from spacewalk.benchmarks.egocross.dataset import EgoCross, Question
from spacewalk.benchmarks.egocross.scoring import grouped_accuracy
from spacewalk.benchmarks.egocross.synthetic import ANSWERS_FILE, ensure_egocross
from spacewalk.benchmarks.release_or_synthetic import dataset_root
from spacewalk.core.errors import ConfigError
from spacewalk.core.io import write_json
from spacewalk.multiple_choice.generation import AnswerLimits, limited, settings
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual, check_limit
from spacewalk.multiple_choice.task import Prompt, Record
from spacewalk.results.bootstrap import BootstrapOptions, accuracy_intervals

PREDICTIONS_FILE = "egocross_closeqa_replies.json"
OPENQA_REPLIES_FILE = "egocross_openqa_replies.json"
OPENQA_JUDGEMENTS_FILE = "egocross_openqa_judgements.json"
# The authors' generation limits (docs/egoschema_egocross.md, EgoCross; their eval_os_* and eval_gpt_* scripts, CloseQA
# and OpenQA alike): open models at most 2048 new tokens (1024 for InternVL, which has no backend here), API models with
# no limit (no max_tokens sent). Their JSON reply cut before its closing brace parses as nothing, so a limit sized for a
# single letter would score a real model near 0.
ANSWER_LIMITS = AnswerLimits(local=2048, api=None, source="EgoCross authors' scripts (open models 2048, API none)")


def score_closeqa(questions: Sequence[Question], replies: Mapping[int, str]) -> dict[str, Any]:
    """The authors' CloseQA success per reply, as accuracy overall and per group; "unparsable" counts the
    replies that name no option (no readable prediction, or one that is not an option letter)."""
    correct = {q.id: closeqa.is_correct(replies[q.id], q.answer.letter) for q in questions}
    unparsable = {q.id: closeqa.choice(replies[q.id], q.letters) is None for q in questions}
    return grouped_accuracy(questions, correct, unparsable)


def domain_intervals(questions: Sequence[Question], correct: Sequence[bool], options: BootstrapOptions,
                     metrics: Mapping[str, Any]) -> dict[str, Any]:
    """metrics.json's "intervals": accuracy over the questions, overall and per domain (spacewalk/results/bootstrap.py),
    beside `metrics` (grouped_accuracy's: the estimates)."""
    estimates = {"accuracy": metrics["accuracy"],
                 "per_domain": {d: m["accuracy"] for d, m in metrics.get("per_domain", {}).items()}}
    return accuracy_intervals(correct, options, groups={"domain": [q.domain for q in questions]}, estimates=estimates)


def openqa_metrics(questions: Sequence[Question], judgements: Sequence[openqa.Judgement],
                   judge: str) -> dict[str, Any]:
    """Accuracy overall and per group, where each score came from ("substring", "judge: mark", "judge: no
    {...} block", ...), the mean score, the judge's name ("none": the substring rule alone, a lower bound)
    and `judge_unreadable`: the ids whose judge reply gave no mark (scored 0, so counted wrong), with why."""
    metrics = grouped_accuracy(questions, {q.id: j.correct for q, j in zip(questions, judgements)})
    sources: dict[str, int] = {}
    for j in judgements:
        sources[j.source] = sources.get(j.source, 0) + 1
    metrics["score_sources"] = dict(sorted(sources.items()))
    metrics["mean_score"] = sum(j.score for j in judgements) / len(judgements) if judgements else 0.0
    metrics["judge"] = judge
    metrics["judge_unreadable"] = {str(q.id): j.source.removeprefix("judge: ") for q, j in zip(questions, judgements)
                                   if j.source.startswith("judge: ") and j.source != "judge: mark"}
    return metrics


def score_openqa(questions: Sequence[Question], replies: Mapping[int, str],
                 generate: Callable[[list[str]], list[str]] | None,
                 judge: str = "given") -> tuple[dict[str, Any], list[openqa.Judgement]]:
    """OpenQA: the substring rule, then the judge through `generate` (None: those items score 0 and the
    metrics say "judge": "none", a lower bound)."""
    judgements = openqa.judge_replies(
        [(q.question, q.answer.text, q.answer.detailed, replies[q.id]) for q in questions], generate)
    return openqa_metrics(questions, judgements, judge if generate is not None else "none"), judgements


def judgements_json(ids: Sequence[str], judgements: Sequence[openqa.Judgement]) -> dict[str, dict[str, Any]]:
    """Every judgement by id: what egocross_openqa_judgements.json holds."""
    return {i: {"prediction": j.prediction, "score": j.score, "correct": j.correct, "source": j.source,
                "judge_prompt": j.judge_prompt, "judge_reply": j.judge_reply} for i, j in zip(ids, judgements)}


def _items(dataset: EgoCross, limit: int | None) -> list[MultipleChoiceItem]:
    questions = dataset.questions[:limit] if limit is not None else dataset.questions
    return [MultipleChoiceItem(
        id=str(q.id), question=q.question, options=q.options, answer=q.answer_index,
        visual=Visual(frames=dataset.frame_paths(q), frame_times=dataset.frame_times(q)),
        meta={"domain": q.domain, "dataset": q.dataset, "category": q.category,
              "question_type": q.question_type, "letters": q.letters, "sampling_fps": q.sampling_fps})
        for q in questions]


class EgoCrossCloseQATask:
    name = "egocross_closeqa"
    answer_limits = ANSWER_LIMITS

    def __init__(self, dataset: EgoCross, limit: int | None = None):
        self.dataset, self.limit = dataset, check_limit(limit, "limit")
        self._by_id = {str(q.id): q for q in dataset.questions}

    def __repr__(self) -> str:
        return f"EgoCrossCloseQATask({self.dataset.file})"

    def items(self) -> list[MultipleChoiceItem]:
        return _items(self.dataset, self.limit)

    def prompt(self, item: MultipleChoiceItem) -> Prompt:
        q = self._by_id[item.id]
        text = closeqa.prompt_text(q.question, q.option_lines, q.original_video_fps, q.sampling_fps)
        return Prompt(parts=(Prompt.VISUAL, text), labels=tuple(q.letters))

    def parse(self, item: MultipleChoiceItem, reply: str) -> int | None:
        return closeqa.choice(reply, self._by_id[item.id].letters)

    def metrics(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]) -> dict[str, Any]:
        by_record = {r.item_id: r for r in records}
        questions = [self._by_id[item.id] for item in items if item.answer is not None]
        correct = {q.id: by_record[str(q.id)].choice == q.answer_index for q in questions}
        unparsable = {q.id: by_record[str(q.id)].choice is None for q in questions}
        return grouped_accuracy(questions, correct, unparsable)

    def correctness(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]
                    ) -> tuple[list[Question], list[bool]]:
        """The answered questions in item order and whether each reply names the answer: the units of the
        intervals and of a paired comparison (spacewalk/results/rescore.py)."""
        by_record = {r.item_id: r for r in records}
        questions = [self._by_id[item.id] for item in items if item.answer is not None]
        return questions, [by_record[str(q.id)].choice == q.answer_index for q in questions]

    def intervals(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], metrics: dict[str, Any],
                  options: BootstrapOptions) -> dict[str, Any]:
        """The accuracy's interval over the answered questions, overall and per domain."""
        return domain_intervals(*self.correctness(items, records), options, metrics)

    def write_outputs(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], out_dir: Path) -> None:
        """The raw replies keyed by id: what `python -m spacewalk.score egocross --task closeqa` reads. A
        backend that chooses without writing text (random, contrastive) has its choice written as the reply
        the authors' prompt asks for, {"prediction": "<letter>"}, so the scorer agrees with metrics.json."""
        by_record = {r.item_id: r for r in records}
        replies = {}
        for item in items:
            record = by_record.get(item.id)
            if record is None:
                continue
            reply = record.reply
            if not reply and record.choice is not None:
                reply = json.dumps({"prediction": self._by_id[item.id].letters[record.choice]})
            replies[item.id] = reply
        write_json(Path(out_dir) / PREDICTIONS_FILE, replies)


class EgoCrossOpenQATask:
    """OpenQA through the harness. The question is asked without its options (the authors' open prompt); the
    substring rule and then `judge` (any backend that can `generate`; None: the substring rule only, a lower
    bound, said so in the metrics) score each reply. OpenQA has no options to choose, so a record's choice
    is the answer's index when the reply is judged correct (score >= 4) and None otherwise: the runner's
    `correct` is then the authors' `success`. Each judgement (prediction, score, where it came from, the
    judge's prompt and reply) is written to egocross_openqa_judgements.json. The judge generates at most
    `judge_max_tokens` new tokens (the authors' 512), whatever limit its backend config holds: with
    `data.judge=${model}` that config is the answering model's, whose limit is the answer's, not the judge's."""

    name = "egocross_openqa"
    answer_limits = ANSWER_LIMITS

    def __init__(self, dataset: EgoCross, judge=None, limit: int | None = None,
                 judge_max_tokens: int = openqa.JUDGE_MAX_TOKENS, judge_agreement: bool = False):
        # also put the replies the substring rule decided to the judge, and count how often it agrees
        # (metrics.json "judge_agreement"; openqa.judge_agreement): a check of the judge, not a score
        self.judge_agreement = bool(judge_agreement)
        self.dataset, self.limit = dataset, check_limit(limit, "limit")
        self.judge_limits = AnswerLimits(local=judge_max_tokens, api=judge_max_tokens,
                                         source=f"EgoCross judge_max_tokens ({judge_max_tokens}; the authors' "
                                                f"{openqa.JUDGE_MAX_TOKENS})")
        self.judge = None if judge is None else limited(judge, self.judge_limits, override=True)
        self._by_id = {str(q.id): q for q in dataset.questions}
        self._judged: dict[tuple[str, str], openqa.Judgement] = {}

    def __repr__(self) -> str:
        return f"EgoCrossOpenQATask({self.dataset.file}, judge={getattr(self.judge, 'name', None)})"

    def generation_extra(self) -> dict[str, Any]:
        """run.json's record of the judge's limit (spacewalk/multiple_choice/generation.py)."""
        return {"judge_limits": self.judge_limits.as_json(),
                "judge": None if self.judge is None else settings(self.judge)}

    def items(self) -> list[MultipleChoiceItem]:
        return _items(self.dataset, self.limit)

    def prompt(self, item: MultipleChoiceItem) -> Prompt:
        q = self._by_id[item.id]
        return Prompt(parts=(Prompt.VISUAL, openqa.prompt_text(q.question, q.original_video_fps, q.sampling_fps)))

    def _generate(self, texts: list[str]) -> list[str]:
        return self.judge.generate([Prompt(parts=(text,)) for text in texts])

    def judgements(self, pairs: Sequence[tuple[str, str]]) -> list[openqa.Judgement]:
        """(item id, reply) -> the judgement, each pair judged once (parse and metrics share them)."""
        todo = [pair for pair in dict.fromkeys(pairs) if pair not in self._judged]
        if todo:
            cases = []
            for qid, reply in todo:
                q = self._by_id[qid]
                cases.append((q.question, q.answer.text, q.answer.detailed, reply))
            for pair, j in zip(todo, openqa.judge_replies(cases, self._generate if self.judge else None)):
                self._judged[pair] = j
        return [self._judged[pair] for pair in pairs]

    def parse(self, item: MultipleChoiceItem, reply: str) -> int | None:
        if item.answer is None:
            return None
        return item.answer if self.judgements([(item.id, reply)])[0].correct else None

    def metrics(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]) -> dict[str, Any]:
        by_record = {r.item_id: r for r in records}
        answered = [item for item in items if item.answer is not None]
        judgements = self.judgements([(item.id, by_record[item.id].reply) for item in answered])
        questions = [self._by_id[item.id] for item in answered]
        judge = getattr(self.judge, "name", "given") if self.judge is not None else "none"
        metrics = openqa_metrics(questions, judgements, judge)
        if self.judge_agreement and self.judge is not None:
            cases = [(q.question, q.answer.text, q.answer.detailed, by_record[str(q.id)].reply) for q in questions]
            metrics["judge_agreement"] = openqa.judge_agreement(cases, judgements, self._generate)
        return metrics

    def correctness(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record]
                    ) -> tuple[list[Question], list[bool]]:
        """The answered questions in item order and whether each reply was judged right (judged once:
        `judgements` keeps them): the units of the intervals and of a paired comparison."""
        by_record = {r.item_id: r for r in records}
        answered = [item for item in items if item.answer is not None]
        judgements = self.judgements([(item.id, by_record[item.id].reply) for item in answered])
        return [self._by_id[item.id] for item in answered], [j.correct for j in judgements]

    def intervals(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], metrics: dict[str, Any],
                  options: BootstrapOptions) -> dict[str, Any]:
        """The accuracy's interval over the answered questions, overall and per domain."""
        return domain_intervals(*self.correctness(items, records), options, metrics)

    def write_outputs(self, items: Sequence[MultipleChoiceItem], records: Sequence[Record], out_dir: Path) -> None:
        by_record = {r.item_id: r for r in records}
        write_json(Path(out_dir) / OPENQA_REPLIES_FILE, {item.id: by_record[item.id].reply for item in items})
        answered = [item for item in items if item.answer is not None]
        judged = self.judgements([(item.id, by_record[item.id].reply) for item in answered])
        write_json(Path(out_dir) / OPENQA_JUDGEMENTS_FILE, judgements_json([item.id for item in answered], judged))


def open_egocross(root: str | Path | None = None, synthetic_root: str | Path | None = None, seed: int = 0,
                  synthetic: Mapping[str, Any] | None = None, frames_root: str | Path | None = None,
                  answers: str | Path | None = None, limit: int | None = None, qa: str = "closeqa",
                  judge=None, check_frames: bool = True, judge_max_tokens: int = openqa.JUDGE_MAX_TOKENS,
                  judge_agreement: bool = False) -> EgoCrossCloseQATask | EgoCrossOpenQATask:
    """`data=egocross`: the testbed at `root` (a root holding datasets/egocross_testbed_imgs.json, or that
    file) with its frames and answers; with root null, the synthetic EgoCross at `synthetic_root`, written on
    first use, answers included (`synthetic`: spacewalk/benchmarks/egocross/synthetic.py Options fields; the keys every
    data config shares, spacewalk/benchmarks/release_or_synthetic.py). `qa`: closeqa or openqa (with `judge`, a backend
    whose `generate` scores the replies the substring rule leaves open, at most `judge_max_tokens` new tokens
    whatever its own config says). `check_frames`: fail at once, naming the question, when a listed frame is
    missing (false: text-only)."""
    if qa not in ("closeqa", "openqa"):
        raise ConfigError(f"EgoCross qa must be closeqa or openqa, got {qa!r}")
    if isinstance(judge_max_tokens, bool) or not isinstance(judge_max_tokens, int) or judge_max_tokens < 1:
        raise ConfigError(f"EgoCross judge_max_tokens={judge_max_tokens!r}: must be a whole number of new tokens, "
                          f"at least 1 (the authors': {openqa.JUDGE_MAX_TOKENS})")
    check_limit(limit, "limit")  # before anything is generated or read
    synthetic_set = root is None
    data = dataset_root(root, synthetic_root, seed, synthetic, ensure_egocross, "EgoCross")
    if synthetic_set and answers is None:  # the generator writes the answers beside the testbed
        answers = data / ANSWERS_FILE
    dataset = EgoCross(data, frames_root=frames_root, answers=answers)
    if check_frames:
        dataset.check_frames()
    if qa == "openqa":
        return EgoCrossOpenQATask(dataset, judge=judge, limit=limit, judge_max_tokens=judge_max_tokens,
                                  judge_agreement=judge_agreement)
    return EgoCrossCloseQATask(dataset, limit=limit)
