r"""EgoCross registered as a benchmark (spacewalk.benchmarks.registry): its release and its `score` subcommand.

    python -m spacewalk.score egocross --task closeqa|openqa --data FILE [--answers FILE] --predictions FILE \
        [--judge openai|transformers --judge-model NAME_OR_DIR [--judgements FILE] | --no-judge]
    python -m spacewalk.download egocross --root data/egocross      # the testbed JSON (no frames, no answers)

Scores the raw replies {id: text}; --data is the testbed JSON with the answers in it, or with --answers (a
map by id, or the testbed JSON with the answer fields added). OpenQA asks an LLM judge (the authors' prompt;
score 0-5, >= 4 correct) for the replies the substring rule leaves open: --judge openai (an OpenAI-compatible
server: $OPENAI_BASE_URL, key in $OPENAI_API_KEY) or a local transformers checkpoint of any family
the harness reads (--judge transformers --judge-model DIR), text only; a judge reply with no readable mark
scores 0 and is listed under "judge_unreadable". --no-judge scores those replies 0 instead and reports the lower
bound as such. A judge that fails (its server unreachable after the retries) ends with exit code 1. The frames and
answers are on the authors' gated dataset: docs/egoschema_egocross.md says how to get them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.registry import (
    QUESTIONS,
    Benchmark,
    Headline,
    LmmsEvalTask,
    Release,
    ScoreCommand,
    ScoringFailed,
    UsageError,
    pinned,
)
from spacewalk.core.arguments import non_negative_number, positive_count

TASKS = ("closeqa", "openqa")

# the head of 2026-01-14 ("Delete .DS_Store")
FILES = pinned("https://raw.githubusercontent.com/MyUniverse0726/EgoCross/f81f41d29df74aa7188a6cadf3fb41b161fc841d", {
    "datasets/egocross_testbed_imgs.json": "4909e9db13890dd82b1493d50423c2917dc9b3f79b0dd5dcb75e040a88fb2218",
})


def validate(root: Path):
    from spacewalk.benchmarks.egocross.dataset import EgoCross

    return EgoCross(root)


class _TextJudge:
    """A harness backend used as a text judge: prompt texts in, reply texts out."""

    def __init__(self, backend):
        self.backend, self.name = backend, backend.name

    def generate_texts(self, texts: list[str]) -> list[str]:
        from spacewalk.multiple_choice.task import Prompt

        return self.backend.generate([Prompt(parts=(text,)) for text in texts])


def egocross_judge(args: argparse.Namespace) -> _TextJudge:
    """The judge backend of --judge: any text backend of the harness (no frames: text only)."""
    if args.judge_model is None:
        raise UsageError("--judge needs --judge-model (the served model's name, or a local checkpoint folder)")
    if args.judge_max_tokens < 1:
        raise UsageError(f"--judge-max-tokens {args.judge_max_tokens}: the judge needs at least 1 new token")
    if args.judge == "openai":
        from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend

        return _TextJudge(OpenAIChatBackend(args.judge_model, text_only=True, max_tokens=args.judge_max_tokens,
                                            requests_per_minute=args.judge_requests_per_minute or None,
                                            concurrency=args.judge_concurrency))
    from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend

    try:
        family = None if args.judge == "transformers" else args.judge  # None: the checkpoint's model_type says
        backend = TransformersVLMBackend(family, model=str(args.judge_model), text_only=True,
                                         max_new_tokens=args.judge_max_tokens)
    except (OSError, ValueError) as e:  # transformers: no such folder, a hub tag not in the local cache
        raise ScoringFailed(f"cannot load the judge {args.judge_model}: {e}") from e
    return _TextJudge(backend)


# the families a judge may be named by (older commands), besides `transformers` (any family, found from the checkpoint)
TRANSFORMERS_FAMILIES = ("qwen2_5_vl", "llava_onevision")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=TASKS, help="required")
    parser.add_argument("--data", type=Path, help="the testbed JSON (datasets/egocross_testbed_imgs.json)")
    parser.add_argument("--answers", type=Path, help="the answers by id (default: those in --data)")
    parser.add_argument("--no-judge", action="store_true",
                        help="openqa: score the replies the substring rule leaves open as 0 (no LLM judge)")
    parser.add_argument("--judge", choices=("openai", "transformers", *TRANSFORMERS_FAMILIES),
                        help="openqa: the LLM judge: an OpenAI-compatible server ($OPENAI_BASE_URL, "
                             "$OPENAI_API_KEY), or a local transformers checkpoint of any family the harness reads "
                             "(`transformers`: the family from the checkpoint's model_type; or a family's name)")
    parser.add_argument("--judge-model", help="openqa: the judge's model name (openai) or checkpoint "
                                              "folder / cached hub tag (transformers)")
    from spacewalk.benchmarks.egocross.openqa import JUDGE_MAX_TOKENS

    parser.add_argument("--judge-max-tokens", type=positive_count, default=JUDGE_MAX_TOKENS,
                        help="openqa: the judge's reply length (default 512, the authors')")
    parser.add_argument("--judge-requests-per-minute", type=non_negative_number, default=60.0,
                        help="openqa, --judge openai: request-rate limit (0: none)")
    parser.add_argument("--judge-concurrency", type=positive_count, default=8,
                        help="openqa, --judge openai: requests in flight at once (the judgements do not depend on it)")
    parser.add_argument("--judgements", type=Path,
                        help="openqa: also write every item's score, its source and the judge's prompt and "
                             "reply to this JSON file")


def score(args: argparse.Namespace) -> dict[str, Any]:
    if args.task not in TASKS:
        raise UsageError(f"egocross needs --task, one of {', '.join(TASKS)}")
    if args.data is None:
        raise UsageError("egocross needs --data (the testbed JSON, with the answers in it or in --answers)")
    from spacewalk.benchmarks.egocross.dataset import EgoCross
    from spacewalk.benchmarks.egocross.scoring import read_replies, require_answers
    from spacewalk.benchmarks.egocross.task import score_closeqa, score_openqa

    dataset = EgoCross(args.data, answers=args.answers)
    require_answers(dataset.questions, args.answers or dataset.file)
    replies = read_replies(args.predictions, dataset.questions)
    if args.task == "closeqa":
        return score_closeqa(dataset.questions, replies)
    if args.no_judge == (args.judge is not None):
        raise UsageError("egocross openqa needs an LLM judge for the replies the substring rule leaves open: "
                         "--judge openai|transformers with --judge-model, or --no-judge to score "
                         "those 0 (a lower bound)")
    judge = None if args.no_judge else egocross_judge(args)
    try:
        metrics, judgements = score_openqa(dataset.questions, replies, judge and judge.generate_texts,
                                           judge.name if judge else "none")
    except RuntimeError as e:  # the backends' "gave up after N attempts", "HTTP 401 ...", ...
        raise ScoringFailed(f"the judge ({judge.name}) failed: {e}") from e
    if args.judgements is not None:
        from spacewalk.benchmarks.egocross.task import judgements_json
        from spacewalk.core.io import write_json

        write_json(args.judgements, judgements_json([str(q.id) for q in dataset.questions], judgements))
    return metrics


def rescore(run_dir: Path, config: dict[str, Any]):
    """A finished run re-scored from its recorded predictions (spacewalk/benchmarks/egocross/run_scores.py)."""
    from spacewalk.benchmarks.egocross.run_scores import rescore as rescore_run

    return rescore_run(run_dir, config)


_CLOSEQA_NOTES = """\
EgoCross CloseQA: the release's frames of each question, then the authors' prompt to the character
(spacewalk/benchmarks/egocross/closeqa.py), which asks for JSON {"prediction": "<letter>", "reason": ...}.
- Parsing: the authors' rule. The whole reply as JSON, else its first {...} block; the prediction is right
  iff it equals the answer's letter after lower-casing. A bare "B", "B: 3" or a reply cut before its closing
  brace is wrong, as in the authors' scripts, where lmms-eval's habit (the first option letter in the reply, a
  random option when none) would read a letter; a reply naming no option is counted in `unparsable`.
- Frames: every frame the release lists for the question (pre-extracted at 0.5 fps; CholecTrack20 at 1 fps), as
  images in order; a model's own image limit may thin them. `python evaluate.py`'s backends thin them by their
  frame rule; the scoring of a reply is the same.
- Reply length: 2048 new tokens, the authors' limit for open models. Their API scripts send no limit; lmms-eval
  sends `max_new_tokens` to every model, so API models get 2048 here too.
- accuracy: percent over the questions, as the authors' scripts print it; per domain, dataset, category and
  question type come with the imported run (`import`).
"""

BENCHMARK = Benchmark(
    name="egocross",
    release=Release(files=FILES, validate=validate,
                    no_videos="EgoCross's frames are on the authors' gated dataset: see docs/egoschema_egocross.md"),
    scores=(ScoreCommand("egocross", "EgoCross: CloseQA accuracy, OpenQA with an LLM judge", arguments, score,
                         description=__doc__),),
    rescore=rescore,
    # the headline numbers (spacewalk.benchmarks.registry.Headline) of each form of the questions (`data.qa`)
    headlines={qa: (Headline("accuracy", QUESTIONS, f"the share of questions answered right ({how})"),
                    Headline("per_domain/*", QUESTIONS, "the same over each domain's questions"))
               for qa, how in (("closeqa", "the chosen option, the authors' parsing"),
                               ("openqa", "the free answer, judged by the substring rule or the LLM judge"))},
    task_of=lambda config: str((config.get("data") or {}).get("qa", "closeqa")),
    lmms_eval=(LmmsEvalTask("egocross_closeqa", "spacewalk.benchmarks.egocross.task.open_egocross", {"qa": "closeqa"},
                            limit="limit", metrics={"accuracy": True, "unparsable": False}, data_config="egocross",
                            notes=_CLOSEQA_NOTES),),
)
