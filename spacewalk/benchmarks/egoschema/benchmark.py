"""EgoSchema registered as a benchmark (spacewalk.benchmarks.registry): its release and its `score` subcommand.

    python -m spacewalk.score egoschema --predictions FILE (--root DIR | --answers FILE [--questions FILE])
    python -m spacewalk.download egoschema --root data/egoschema    # questions, subset answers, Ego4D windows

Scores the 500-question subset's accuracy of a server JSON {q_uid: 0-4}, a Kaggle CSV (q_uid,answer) or a
JSON of raw replies {q_uid: text} (read with lmms-eval's parser, which needs --questions or --root). A text that
reads as a number ("0") is refused unless `--holds indices` or `--holds replies` says which it is. The
videos (Google Drive) need the user's own access: docs/egoschema_egocross.md says how to get them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.registry import QUESTIONS, Benchmark, Headline, Release, ScoreCommand, UsageError, pinned

# the head of 2024-12-30 ("connection to ego4d"). questions.json (the 5031 questions) has no hash: no copy of
# it was at hand offline (the project's test data holds its first 20 questions only).
FILES = pinned("https://raw.githubusercontent.com/egoschema/EgoSchema/505c787376b5e066d0ae406d0e0d41245cebba15", {
    "questions.json": None,
    "subset_answers.json": "a38d0aefcf8bcd5fb8888c7598b4550dc9ac6f6ad11cb2e1eae7b93e4c72468d",
    "uid_to_ego4d.json": "b6aa6b7b5e77863fa1ec725df8646ccb7915bdfe5f053991ba55d610b23e78a6",
})


def validate(root: Path):
    from spacewalk.benchmarks.egoschema.dataset import EgoSchema

    return EgoSchema(root).validate()


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, help="an EgoSchema root (questions.json, subset_answers.json)")
    parser.add_argument("--questions", type=Path, help="questions.json (needed to parse raw replies; "
                                                       "default: the one under --root)")
    parser.add_argument("--answers", type=Path, help="subset_answers.json (default: under --root)")
    parser.add_argument("--holds", choices=("auto", "indices", "replies"), default="auto",
                        help="what the predictions JSON's texts are: indices (\"2\" is option 2), replies (a "
                             "model's text, \"0\" included, read by lmms-eval's parser), or auto (numbers are "
                             "indices, texts replies; a text that reads as a number is refused as ambiguous)")


def score(args: argparse.Namespace) -> dict[str, Any]:
    from spacewalk.benchmarks.egoschema import dataset as files
    from spacewalk.benchmarks.egoschema import scoring
    from spacewalk.benchmarks.egoschema.prompts import parse_lmms_eval

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
    predictions = scoring.read_predictions(args.predictions, parse, known, args.holds)
    return scoring.score_predictions(predictions, answers, args.predictions)


def rescore(run_dir: Path, config: dict[str, Any]):
    """A finished run re-scored from its recorded predictions (spacewalk/benchmarks/egoschema/run_scores.py)."""
    from spacewalk.benchmarks.egoschema.run_scores import rescore as rescore_run

    return rescore_run(run_dir, config)


BENCHMARK = Benchmark(
    name="egoschema",
    release=Release(files=FILES, validate=validate,
                    no_videos="EgoSchema's clips are on Google Drive (the authors' download.py fetches them): "
                              "see docs/egoschema_egocross.md"),
    scores=(ScoreCommand("egoschema", "EgoSchema: the 500-question subset's accuracy", arguments, score,
                         description=__doc__),),
    rescore=rescore,
    # the headline number (spacewalk.benchmarks.registry.Headline); every EgoSchema run is its one task
    headlines={"egoschema": (Headline("accuracy", QUESTIONS, "the share of the questions with a known answer whose "
                                      "chosen option is it (lmms-eval's parsing of the reply)"),)},
    task_of=lambda config: "egoschema",
)
