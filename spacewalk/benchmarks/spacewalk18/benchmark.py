r"""Spacewalk-18 registered as a benchmark (spacewalk.benchmarks.registry): its release and its `score` subcommand.

    python -m spacewalk.score [spacewalk18] --root DIR --split test --predictions FILE \
        [--task step_recognition|question_answering|intra_video_retrieval] [--output metrics.json] \
        [--questions FILE]  (question_answering: generated questions instead of the release's test file)
    python -m spacewalk.download spacewalk18 --root data/spacewalk18 [--videos] [--source COPY]

The metrics are printed in percent (the authors' evaluation scripts print fractions).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.registry import Benchmark, LmmsEvalTask, Release, ScoreCommand, UsageError, pinned
from spacewalk.benchmarks.spacewalk18.headlines import HEADLINES, task_of
from spacewalk.core.errors import DataError

TASKS = ("step_recognition", "question_answering", "intra_video_retrieval")

_REPO = "https://raw.githubusercontent.com/brown-palm/Spacewalk-18-benchmark"
# The head of 2025-11-25 (after the authors' "label offset fix"), what the project's numbers are computed on.
_COMMIT = "63c39686253439ace49170dc3ae4b6274892d26a"
# The intra-video retrieval files the authors removed from their head (2025-04-01, 7e9e805), fetched from the
# last commit that had them (2024-07-03); an older commit (2024-04-16, 6b227ae) holds other samples.
_RETRIEVAL_COMMIT = "0af9ac604e7e4cb6b74f046ad7cac7821b8bfc08"

# video id -> (YouTube id, as listed by the authors' data/download_videos.py; sha256 of its transcript CSV)
_VIDEOS = {
    "01152020": ("84CRZYioFRs", "00dbb2476f3c6dfe26ebba22aad99ae6140d6138fa68c8d02112081a10540387"),
    "01252020": ("cOzMVW1GdDc", "e22837736414e94f97e9b5fe4c2f0f83309556b99b7cf02b95aa7b9adf6142db"),
    "01272021": ("q3tVWmP0CMc", "c4ae0b91dd270cc52379bfbbf654345cac3867b2c29de6c7964959bc1b2953d2"),
    "02012021": ("XwuRiIh2IlM", "6849936ebe67fab60170339cbd40a0c2eef2f8dcf66ce006c578ff0e7e512aac"),
    "02282021": ("gcv6beMn750", "5963693afa6644cefc84a604b4beaf4a0a834784329fb9d507268fbe2a4bab7a"),
    "03152022": ("s4TVhE8NDLs", "45bb8921286afa02636326be95d6ef2737bdd8abc69f7eff5058a6ca215fd483"),
    "03232022": ("uZqaTsbDcgU", "5375b336884ad05234afefbf0137e7b328e10073f12d60e53244bab35420c5b4"),
    "06092023": ("wS4z42KaeGk", "a60683d8fc452b76313e954fb177a8cc4cfbd57d1f3f5278a270affae5f36115"),
    "06162021": ("gCKsedpraVg", "69981ee7706c0fd4d0253b63b656e28a33a59be12f25f1bbb9119ba9b2f4c635"),
    "06262020": ("KlK_bLnqmas", "31dcbc4dfaac35243b2f372b790f32a4c02052b6fc514b8829575bf6ef5c6f51"),
    "09122021": ("vvsMOSAfHG0", "5a1abb4abfbc84ec9edafc0af416f537743036c89c44b1d31c14260df04d64d0"),
    "10062019": ("z0Ut8daLD6I", "01440ffdd086129594be1194e592aee7202d7705f14a47129dd764a44b33dbd0"),
    "11152019": ("evaBhht5uGA", "d57d8d4c1eae5fce8adea6f0b3643e00860636e23795765d2f4bbf10b37fc87a"),
    "11152022": ("sNvIV3UUcQw", "b108c55d390550ddf895d95d6e01e35b146b7f25d72a2b008061073d1325b50b"),
    "11222019": ("sIpjW-KUcEA", "29dcc7bec05c01eb6ff0ea2922a03ffd8c38af32ea0505080d0e01490584d6c2"),
    "12022019": ("gH1OHoszYcw", "4c461d1fed5d0d14370589aee2de3c9573d2c1c4fca60ae4c8f6f54896441ab0"),
    "12022021": ("ScAtmwgIXwU", "12b5415ea2db41d4b924c90239978474c46805568432a251c900a5481c09a487"),
    "12032022": ("zvxenTNLjWE", "0aa4c7f395f76ed8159451359045f223211e29d8614fd5273a56e2fdbe523d2c"),
}

FILES = pinned(f"{_REPO}/{_COMMIT}", {
    "data/annotation.json": "9524b249f58fb7e4b6a55b3ebdf818b4b9ebee7fa8fd5ecffdc641ca85939516",
    "data/steps.json": "808605708865acbf94bbff12e17d2a4c5defcf72b0442061dd3e9693c1d3d339",
    "tasks/split.json": "f665a7071dc9fee04a7d5c9fd88e298a7f40c148912599a7250f552da4822ffb",
    "tasks/step_recognition/train.json": "3cbb191eb8bcef7ac9da49a0655bbc017847d397685753f1172ace3aeb404491",
    "tasks/step_recognition/val.json": "f8e90182a07fa37494151f92120d972db92f30d20d5f2914f55e01566802b23e",
    "tasks/step_recognition/test.json": "0fb0fd6a3e9f145c6afa0e5f6fa6e9f14e3a9b48c7d1a185aa935584e64d50c5",
    "tasks/question_answering/test.json": "7429c8ecda01b26d788ff120f048b15fa8ce5584330b3e933bbf8ccb51882adb",
    **{f"data/transcripts/{v}.csv": sha for v, (_, sha) in sorted(_VIDEOS.items())},
}) + pinned(f"{_REPO}/{_RETRIEVAL_COMMIT}", {
    "tasks/intra-video_retrieval/val.json": "912be44fa4e2900512c6dc2d056e40187b167a8b5d4bde9e80f9beacfb506167",
    "tasks/intra-video_retrieval/test.json": "aa9ae3b778af3e8bc55b917c97094285b5beee663a69b5e3dfd6db44719e641d",
})


def videos(root: Path) -> dict[str, str]:
    return {v: f"https://www.youtube.com/watch?v={yt}" for v, (yt, _) in _VIDEOS.items()}


def validate(root: Path):
    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18

    dataset = Spacewalk18(root)
    for split in ("train", "val", "test"):
        dataset.step_samples(split)
    return dataset


def score_spacewalk18(root: Path, split: str, task: str, predictions: Path, undefined: str,
                      questions: Path | None = None) -> dict[str, Any]:
    # imported here so `--help` and argument errors answer at once
    from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
    from spacewalk.benchmarks.spacewalk18.scoring import official as metrics
    from spacewalk.benchmarks.spacewalk18.scoring import predictions as pred_files

    dataset = Spacewalk18(root)
    if task == "step_recognition":
        samples = dataset.step_samples(split)
        read = pred_files.read_step_predictions(predictions, dataset.recordings, samples)
        return metrics.step_recognition_metrics(dataset.recordings, samples, read.predictions, read.scores,
                                                undefined=undefined)
    if task == "question_answering":
        if split != "test" and questions is None:
            raise DataError(f"video QA has only a test split, not {split!r} (generated questions of other "
                            "recordings: --questions FILE, from python -m "
                            "spacewalk.benchmarks.spacewalk18.questions.question_generator)")
        asked = dataset.questions(questions)
        return metrics.qa_accuracy(pred_files.read_qa_predictions(predictions, asked), asked)
    samples = dataset.retrieval_samples(split)
    return metrics.retrieval_accuracy(pred_files.read_retrieval_predictions(predictions, samples), samples)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, help="dataset root in the official layout (required)")
    # the release's splits (dataset.SPLITS; not imported here, so that --help answers at once)
    parser.add_argument("--split", default="test", choices=("train", "val", "test"),
                        help="split to score (default: test)")
    parser.add_argument("--task", choices=TASKS, default="step_recognition",
                        help="default step_recognition")
    parser.add_argument("--questions", type=Path, default=None,
                        help="question_answering: a question file in the official format to score against "
                             "(default: the release's tasks/question_answering/test.json); e.g. val questions "
                             "written by python -m spacewalk.benchmarks.spacewalk18.questions.question_generator")
    parser.add_argument("--undefined", choices=("exclude", "error"), default="exclude",
                        help="a class with no positive sample (AP) or neither GT nor prediction (IoU), where the "
                             "authors' code divides by zero: leave it out of the mean, or fail")


def score(args: argparse.Namespace) -> dict[str, Any]:
    if args.root is None:
        raise UsageError("spacewalk18 needs --root")
    if args.questions is not None and args.task != "question_answering":
        raise UsageError("--questions is for --task question_answering")
    return score_spacewalk18(args.root, args.split, args.task, args.predictions, args.undefined, args.questions)


def rescore(run_dir: Path, config: dict[str, Any]):
    """A finished run re-scored from its recorded predictions (spacewalk/benchmarks/spacewalk18/run_scores.py)."""
    from spacewalk.benchmarks.spacewalk18.run_scores import rescore as rescore_run

    return rescore_run(run_dir, config)


_QUESTION_NOTES = """\
- Parsing: the reply is read by the project's ordered rules (spacewalk/multiple_choice/parsing.py: the whole
  reply, an explicit "answer: ...", a leading choice, one bracketed choice, {last_rule}). lmms-eval's
  multiple-choice tasks mostly take the first option {label} found anywhere in the reply and some pick a random
  option when they find none; here a reply that no rule reads (or that names a choice outside the options) is
  wrong, counted in `unparsable`, never guessed.
- Reply length: 128 new tokens (`max_new_tokens`), the project's choice for a single {label} (the paper gives
  none).
- The clip: the slice of the recording the item asks about, handed to lmms-eval's model as a video with its
  start and end time; the model's own frame rule samples it (lmms-eval's `openai` model: `max_frames_num`
  frames, by qwen-vl-utils). A simple (non-chat) lmms-eval model gets the slice's frames as images instead,
  `num_frames` of them uniformly (the task's `lmms_eval_specific_kwargs`). The frames a model sees may differ
  from `python evaluate.py`'s backends; the scoring of a reply does not.
"""

_QA_NOTES = """\
Spacewalk-18 video question answering (the release's questions on one-hour clips of the test recordings),
App. C.2's prompt: the clip, the instruction, the question and the choices (A) to (D).
- Accuracy: the official accuracy over the questions (percent); metrics.json's per-type accuracies come with
  the imported run (`import`).
""" + _QUESTION_NOTES.format(last_rule="the reply that is one option's text", label="letter")

_STEP_NOTES = """\
Spacewalk-18 step recognition posed as a question (App. C.2): every official sample of the test split asks
which of its recording's K + 1 classes the middle of its window of length w shows, with the window's
transcript in the prompt and the classes as the choices (0) to (K).
- Accuracy and IoU are the official step-recognition numbers: per recording, then the mean over the
  recordings (lmms-eval's usual `mean` over documents would weigh the long recordings more). IoU takes, for
  an unparsable reply, a class that is certainly wrong (the official prediction file has no "no answer"). mAP
  needs per-class scores, which a generated reply does not give: it is not reported.
""" + _QUESTION_NOTES.format(last_rule="exactly one integer in the reply", label="number")


def _step_task(context: str) -> LmmsEvalTask:
    return LmmsEvalTask(
        f"spacewalk18_step_questions_{context}",
        "spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions.step_recognition_questions_task",
        {"split": "test", "context": context}, limit="limit",
        metrics={"Accuracy": True, "IoU": True, "unparsable": False}, data_config="spacewalk18_step_questions",
        cluster="video_id",
        group="spacewalk18_step_questions", notes=_STEP_NOTES + f"- w = {context}.\n")


BENCHMARK = Benchmark(
    name="spacewalk18",
    release=Release(files=FILES, validate=validate, videos=videos),
    scores=(ScoreCommand("spacewalk18", "Spacewalk-18: step recognition, video QA, intra-video retrieval",
                         arguments, score, default=True, description=__doc__),),
    rescore=rescore,
    headlines=HEADLINES,
    task_of=task_of,
    lmms_eval=(
        LmmsEvalTask("spacewalk18_qa",
                     "spacewalk.benchmarks.spacewalk18.questions.question_answering.question_answering_task",
                     {}, limit="limit", metrics={"Accuracy": True, "unparsable": False},
                     data_config="spacewalk18_qa", notes=_QA_NOTES),
        *(_step_task(context) for context in ("1min", "3min", "5min")),
    ),
)
