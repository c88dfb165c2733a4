"""Official scoring from the command line, the authors' evaluation scripts without their path assumptions.

    python -m spacewalk.score [spacewalk18] --root DIR --split test --predictions FILE \
        [--task step_recognition|question_answering|intra_video_retrieval] [--output metrics.json]
    python -m spacewalk.score hirest --task video_retrieval|moment_retrieval|moment_segmentation|step_captioning \
        --predictions FILE (--gt FILE --categories FILE | --root DIR [--split val|test]) [--output metrics.json]
    python -m spacewalk.score egoschema --predictions FILE (--root DIR | --answers FILE [--questions FILE])
    python -m spacewalk.score egocross --task closeqa|openqa --data FILE [--answers FILE] --predictions FILE \
        [--judge openai|qwen2_5_vl|llava_onevision --judge-model NAME_OR_DIR [--judgements FILE] | --no-judge]

Prints the metrics as JSON in percent, as the papers report them (Spacewalk-18's scripts print fractions;
HiREST's print percent under the key names used here). HiREST's `--gt` is the file the authors'
evaluate.py reads for the task: the split file for video and moment retrieval, the formatted step GT for
segmentation and captioning; `--root` (a HiREST root holding data/splits, ...) finds it for `--split`.
EgoSchema: the 500-question subset's accuracy of a server JSON {q_uid: 0-4}, a Kaggle CSV (q_uid,answer) or a
JSON of raw replies {q_uid: text} (read with lmms-eval's parser, which needs --questions or --root).
EgoCross: the raw replies {id: text}; --data is the testbed JSON with the answers in it, or with
--answers (a map by id, or the testbed JSON with the answer fields added). OpenQA asks an LLM judge (the authors' prompt;
score 0-5, >= 4 correct) for the replies the substring rule leaves open: --judge openai (an OpenAI-compatible
server: $OPENAI_BASE_URL, key in $OPENAI_API_KEY) or a local transformers checkpoint (--judge qwen2_5_vl or
llava_onevision, --judge-model DIR), text only; a judge reply with no readable mark scores 0 and is listed
under "judge_unreadable". --no-judge scores those replies 0 instead and reports the lower bound as such.
A bad dataset or prediction file ends with its message on stderr and exit code 2; a missing scorer
(Java, for captioning) or a judge that fails (its server unreachable after the retries) with exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from spacewalk.errors import DataError
from spacewalk.io import write_json

TASKS = ("step_recognition", "question_answering", "intra_video_retrieval")
HIREST_TASKS = ("video_retrieval", "moment_retrieval", "moment_segmentation", "step_captioning")
HIREST_SPLITS = ("val", "test")
EGOCROSS_TASKS = ("closeqa", "openqa")


def score_spacewalk18(root: Path, split: str, task: str, predictions: Path, undefined: str) -> dict[str, Any]:
    # imported here so `--help` and argument errors answer at once
    from spacewalk.spacewalk18 import scoring as metrics
    from spacewalk.spacewalk18 import predictions as pred_files
    from spacewalk.spacewalk18.dataset import Spacewalk18

    dataset = Spacewalk18(root)
    if task == "step_recognition":
        samples = dataset.step_samples(split)
        read = pred_files.read_step_predictions(predictions, dataset.recordings, samples)
        return metrics.step_recognition_metrics(dataset.recordings, samples, read.predictions, read.scores,
                                                undefined=undefined)
    if task == "question_answering":
        if split != "test":
            raise DataError(f"video QA has only a test split, not {split!r}")
        questions = dataset.questions()
        return metrics.qa_accuracy(pred_files.read_qa_predictions(predictions, questions), questions)
    samples = dataset.retrieval_samples(split)
    return metrics.retrieval_accuracy(pred_files.read_retrieval_predictions(predictions, samples), samples)


class UsageError(Exception):
    """A combination of arguments that argparse cannot check by itself."""


class JudgeFailed(Exception):
    """The LLM judge could not answer (a server that stays down, a model that fails to load)."""


def _spacewalk18(args: argparse.Namespace) -> dict[str, Any]:
    task = args.task or "step_recognition"
    if task not in TASKS:
        raise UsageError(f"spacewalk18 has no task {task!r}; choose from {', '.join(TASKS)}")
    if args.root is None:
        raise UsageError("spacewalk18 needs --root")
    return score_spacewalk18(args.root, args.split or "test", task, args.predictions, args.undefined)


def hirest_files(task: str, root: Path | None, split: str | None, gt: Path | None,
                 categories: Path | None) -> tuple[Path, Path]:
    """The GT file and categories file of a HiREST task: given, or the official ones under `root`."""
    from spacewalk.hirest.dataset import CATEGORIES_FILE, MOMENT_GT_FILES, SPLIT_FILE

    if root is None and (gt is None or categories is None):
        raise UsageError("hirest needs --root, or both --gt and --categories")
    if split is not None and split not in HIREST_SPLITS:
        raise UsageError(f"hirest scores the {' or '.join(HIREST_SPLITS)} split, not {split!r}")
    if root is not None and not (root / "data/splits").is_dir():
        raise DataError("not a HiREST root: data/splits/ is missing", file=root)
    if gt is None:
        split = split or "test"
        step_gt = task in ("moment_segmentation", "step_captioning")
        gt = root / (MOMENT_GT_FILES[split] if step_gt else SPLIT_FILE.format(split=split))
    return gt, categories if categories is not None else root / CATEGORIES_FILE


def score_hirest(task: str, predictions: Path, gt: Path, categories: Path, preprocess: bool = True,
                 nms_order: str = "introsort", frame_dir: Path | None = None) -> dict[str, Any]:
    from spacewalk.hirest import scoring

    if task == "moment_segmentation":
        return scoring.score_moment_segmentation(predictions, gt, categories, preprocess=preprocess,
                                                        nms_order=nms_order)
    if task == "step_captioning":
        return scoring.score_step_captioning(predictions, gt, categories, frame_dir=frame_dir)
    return getattr(scoring, f"score_{task}")(predictions, gt, categories)


def _hirest(args: argparse.Namespace) -> dict[str, Any]:
    if args.task not in HIREST_TASKS:
        raise UsageError(f"hirest needs --task, one of {', '.join(HIREST_TASKS)}")
    gt, categories = hirest_files(args.task, args.root, args.split, args.gt, args.categories)
    return score_hirest(args.task, args.predictions, gt, categories, preprocess=not args.no_preprocess,
                        nms_order=args.nms_order, frame_dir=args.frame_dir)


def _egoschema(args: argparse.Namespace) -> dict[str, Any]:
    from spacewalk.egoschema import dataset as files
    from spacewalk.egoschema import scoring
    from spacewalk.egoschema.prompts import parse_lmms_eval

    answers_file = args.answers or (args.root / files.ANSWERS_FILE if args.root is not None else None)
    if answers_file is None:
        raise UsageError("egoschema needs --root, or --answers (subset_answers.json)")
    questions_file = args.questions
    if questions_file is None and args.root is not None and (args.root / files.QUESTIONS_FILE).is_file():
        questions_file = args.root / files.QUESTIONS_FILE
    answers = files.read_answers(answers_file)
    parse, known = None, None
    if questions_file is not None:
        by_uid = {q.q_uid: q for q in files.read_questions(questions_file)}
        known = set(by_uid)
        parse = lambda q_uid, text: parse_lmms_eval(text, by_uid[q_uid].options)  # noqa: E731
    predictions = scoring.read_predictions(args.predictions, parse, known)
    return scoring.score_predictions(predictions, answers, args.predictions)


def _egocross(args: argparse.Namespace) -> dict[str, Any]:
    if args.task not in EGOCROSS_TASKS:
        raise UsageError(f"egocross needs --task, one of {', '.join(EGOCROSS_TASKS)}")
    if args.data is None:
        raise UsageError("egocross needs --data (the testbed JSON, with the answers in it or in --answers)")
    from spacewalk.egocross.dataset import EgoCross
    from spacewalk.egocross.scoring import read_replies, require_answers
    from spacewalk.egocross.task import score_closeqa, score_openqa

    dataset = EgoCross(args.data, answers=args.answers)
    require_answers(dataset.questions, args.answers or dataset.file)
    replies = read_replies(args.predictions, dataset.questions)
    if args.task == "closeqa":
        return score_closeqa(dataset.questions, replies)
    if args.no_judge == (args.judge is not None):
        raise UsageError("egocross openqa needs an LLM judge for the replies the substring rule leaves open: "
                         "--judge openai|qwen2_5_vl|llava_onevision with --judge-model, or --no-judge to score "
                         "those 0 (a lower bound)")
    judge = None if args.no_judge else egocross_judge(args)
    try:
        metrics, judgements = score_openqa(dataset.questions, replies, judge and judge.generate_texts,
                                           judge.name if judge else "none")
    except RuntimeError as e:  # the backends' "gave up after N attempts", "HTTP 401 ...", ...
        raise JudgeFailed(f"the judge ({judge.name}) failed: {e}") from e
    if args.judgements is not None:
        from spacewalk.egocross.task import judgements_json

        write_json(args.judgements, judgements_json([str(q.id) for q in dataset.questions], judgements))
    return metrics


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
    if args.judge == "openai":
        from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend

        return _TextJudge(OpenAIChatBackend(args.judge_model, text_only=True, max_tokens=args.judge_max_tokens,
                                            requests_per_minute=args.judge_requests_per_minute))
    from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend

    try:
        backend = TransformersVLMBackend(args.judge, model=str(args.judge_model), text_only=True,
                                         max_new_tokens=args.judge_max_tokens)
    except (OSError, ValueError) as e:  # transformers: no such folder, a hub tag not in the local cache
        raise JudgeFailed(f"cannot load the judge {args.judge_model}: {e}") from e
    return _TextJudge(backend)


# benchmark name -> scorer of the parsed arguments; the first positional argument picks one
BENCHMARKS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "spacewalk18": _spacewalk18, "hirest": _hirest, "egoschema": _egoschema, "egocross": _egocross}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.score", description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", nargs="?", default="spacewalk18", choices=sorted(BENCHMARKS),
                        help="which benchmark's official scoring (default: spacewalk18)")
    parser.add_argument("--root", type=Path, help="dataset root in the official layout (required for spacewalk18)")
    parser.add_argument("--split", help="split to score (default: test)")
    parser.add_argument("--predictions", type=Path, required=True, help="prediction file in the official format")
    parser.add_argument("--task", choices=TASKS + HIREST_TASKS + EGOCROSS_TASKS,
                        help="spacewalk18: default step_recognition; hirest and egocross: required")
    parser.add_argument("--undefined", choices=("exclude", "error"), default="exclude",
                        help="spacewalk18: a class with no positive sample (AP) or neither GT nor prediction "
                             "(IoU), where the authors' code divides by zero: leave it out of the mean, or fail")
    parser.add_argument("--gt", type=Path, help="hirest: the GT file the official evaluate.py reads for the task "
                                                "(default: the --split one under --root)")
    parser.add_argument("--categories", type=Path,
                        help="hirest: categories.json (default: data/evaluation/categories.json under --root)")
    parser.add_argument("--no-preprocess", action="store_true",
                        help="hirest moment_segmentation: score the segments as given, without the official "
                             "clipping/completion to the GT moment (--preprocess_moment_bounds, on by default)")
    parser.add_argument("--nms-order", choices=("introsort", "identity"), default="introsort",
                        help="hirest moment_segmentation: the order in which the official post-processing's NMS "
                             "visits segments, which depends on numpy: introsort (the authors' numpy 1.2x; "
                             "default) or identity (numpy 2.4 on CPUs with AVX2 or AVX-512, for one)")
    parser.add_argument("--frame-dir", type=Path,
                        help="hirest step_captioning: <dir>/<video>/*.jpg frames at 1 fps for CLIPScore")
    parser.add_argument("--questions", type=Path, help="egoschema: questions.json (needed to parse raw replies; "
                                                       "default: the one under --root)")
    parser.add_argument("--answers", type=Path, help="egoschema: subset_answers.json (default: under --root); "
                                                     "egocross: the answers by id (default: those in --data)")
    parser.add_argument("--data", type=Path, help="egocross: the testbed JSON (datasets/egocross_testbed_imgs.json)")
    parser.add_argument("--no-judge", action="store_true",
                        help="egocross openqa: score the replies the substring rule leaves open as 0 (no LLM judge)")
    parser.add_argument("--judge", choices=("openai", "qwen2_5_vl", "llava_onevision"),
                        help="egocross openqa: the LLM judge: an OpenAI-compatible server ($OPENAI_BASE_URL, "
                             "$OPENAI_API_KEY) or a local transformers checkpoint of that family")
    parser.add_argument("--judge-model", help="egocross openqa: the judge's model name (openai) or checkpoint "
                                              "folder / cached hub tag (transformers)")
    parser.add_argument("--judge-max-tokens", type=int, default=512,
                        help="egocross openqa: the judge's reply length (default 512, the authors')")
    parser.add_argument("--judge-requests-per-minute", type=float, default=60.0,
                        help="egocross openqa, --judge openai: request-rate limit (0: none)")
    parser.add_argument("--judgements", type=Path,
                        help="egocross openqa: also write every item's score, its source and the judge's prompt and "
                             "reply to this JSON file")
    parser.add_argument("--output", type=Path, help="also write the metrics to this JSON file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from spacewalk.hirest.captioning_scores import ScorerUnavailable

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = BENCHMARKS[args.benchmark](args)
    except UsageError as e:
        parser.error(str(e))  # exits 2, like argparse's own checks
    except (DataError, ValueError) as e:
        # bad input, not a bug: the message names the file and the item, a traceback adds nothing
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (ScorerUnavailable, JudgeFailed) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=2)
    print(text)
    if args.output is not None:
        write_json(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
