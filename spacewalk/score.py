"""Official scoring from the command line, the authors' evaluation.py without their path assumptions.

    python -m spacewalk.score [spacewalk18] --root DIR --split test --predictions FILE \
        [--task step_recognition|question_answering|intra_video_retrieval] [--output metrics.json]

Prints the metrics as JSON (percent, as the paper reports them; the authors' scripts print fractions).
A bad dataset or prediction file ends with its message on stderr and exit code 2.
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


def score_spacewalk18(root: Path, split: str, task: str, predictions: Path, undefined: str) -> dict[str, Any]:
    # imported here so `--help` and argument errors answer at once
    from spacewalk import metrics
    from spacewalk import predictions as pred_files
    from spacewalk.spacewalk18 import Spacewalk18

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


# benchmark name -> scorer; the first positional argument picks one
BENCHMARKS: dict[str, Callable[..., dict[str, Any]]] = {"spacewalk18": score_spacewalk18}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.score", description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", nargs="?", default="spacewalk18", choices=sorted(BENCHMARKS),
                        help="which benchmark's official scoring (default: spacewalk18)")
    parser.add_argument("--root", type=Path, required=True, help="dataset root in the official layout")
    parser.add_argument("--split", default="test", help="split to score (default: test)")
    parser.add_argument("--predictions", type=Path, required=True, help="prediction file in the official format")
    parser.add_argument("--task", choices=TASKS, default="step_recognition")
    parser.add_argument("--undefined", choices=("exclude", "error"), default="exclude",
                        help="a class with no positive sample (AP) or neither GT nor prediction (IoU), where "
                             "the authors' code divides by zero: leave it out of the mean, or fail")
    parser.add_argument("--output", type=Path, help="also write the metrics to this JSON file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = BENCHMARKS[args.benchmark](args.root, args.split, args.task, args.predictions, args.undefined)
    except (DataError, ValueError) as e:
        # bad input, not a bug: the message names the file and the item, a traceback adds nothing
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(result, indent=2)
    print(text)
    if args.output is not None:
        write_json(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
