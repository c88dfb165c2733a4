r"""HiREST registered as a benchmark (spacewalk.benchmarks.registry): its release and its `score` subcommand.

    python -m spacewalk.score hirest --task video_retrieval|moment_retrieval|moment_segmentation|step_captioning \
        --predictions FILE (--gt FILE --categories FILE | --root DIR [--split val|test]) [--output metrics.json]
    python -m spacewalk.download hirest --root data/hirest [--features] [--videos] [--source COPY]

The metrics are printed in percent under the key names of the authors' evaluate.py. `--gt` is the file that
evaluate.py reads for the task: the split file for video and moment retrieval, the formatted step GT for
segmentation and captioning; `--root` (a HiREST root holding data/splits, ...) finds it for `--split`.
A missing scorer (Java, for captioning) ends with exit code 1. `--features` fetches the authors' released
features (EVA-CLIP frames at 1 fps, Whisper ASR, MiniLM ASR embeddings; several GB) into <root>/data/, the
layout `data.features=released` reads; `--videos` fetches every video the annotations name (distractors
included) from YouTube.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.registry import (
    QUERIES,
    Benchmark,
    Headline,
    Release,
    ScoreCommand,
    ScoringFailed,
    UsageError,
    pinned,
)
from spacewalk.core.errors import DataError

TASKS = ("video_retrieval", "moment_retrieval", "moment_segmentation", "step_captioning")
SPLITS = ("val", "test")

# the head of 2025-01-23 ("update np.long -> int"); the annotation files are those of the 2023 release
_BASE = "https://raw.githubusercontent.com/j-min/HiREST/deffc169b4e8d51c1589d5512ad05da61e81bcee"
FILES = pinned(_BASE, {
    "data/splits/all_data_train.json": "3740548ae67c608ee64725d6030f7378bbdd2326e5d5479de0187e76944fc160",
    "data/splits/all_data_val.json": "70d32c5fcdffe66cbf3c732dd274f03378da2082f50c9cec7e67705f529ecb4d",
    "data/splits/all_data_test.json": "a9951c8f6d43349d786f5c0cf929b6760f7158e04aa56a7ac2c8ea9487562b70",
    "data/splits/all_data_test_negative_samples.json":
        "4a66bd7be6db3128c1b0d23d815784870b213fcdef4ac93756eff771eb951509",
    "data/evaluation/categories.json": "157623d50f7b8482f55fa1c4efc500539784c0399fb2dd60bb687b4006d85ca1",
    "data/evaluation/formatted_moment_evaluation_gt.json":
        "47fdaf57e5b43e22ca555d441c78310b98dd07b774b0252960ee70d781288c45",
    "data/val_testing/all_data_test.json": "70d32c5fcdffe66cbf3c732dd274f03378da2082f50c9cec7e67705f529ecb4d",
    "data/val_testing/formated_moment_evaluation_gt.json":
        "3b48521b1c9fcb9b164a8847e9e91a30d6a6883df0cb9123e9c17473ac3c9fb5",
})
# The authors' Hugging Face model repository, at its main branch: no revision hash or archive hash was at hand
# offline to pin them (several GB, never fetched here).
FEATURES = tuple(f"https://huggingface.co/j-min/HiREST-baseline/resolve/main/{name}.zip"
                 for name in ("eva_clip_features", "ASR", "ASR_feats_all-MiniLM-L6-v2"))


def videos(root: Path) -> dict[str, str]:
    """<id>.mp4 -> YouTube URL for every video the HiREST annotations name (distractors included)."""
    from spacewalk.benchmarks.hirest.dataset import HiREST, video_id

    return {v: f"https://www.youtube.com/watch?v={video_id(v)}" for v in HiREST(root).videos()}


def validate(root: Path):
    from spacewalk.benchmarks.hirest.dataset import HiREST

    dataset = HiREST(root)
    for split in ("train", "val", "test"):
        dataset.step_annotations(split)
    dataset.candidates("test"), dataset.categories, dataset.moment_gt("val")
    return dataset


def hirest_files(task: str, root: Path | None, split: str | None, gt: Path | None,
                 categories: Path | None) -> tuple[Path, Path]:
    """The GT file and categories file of a HiREST task: given, or the official ones under `root`."""
    from spacewalk.benchmarks.hirest.dataset import CATEGORIES_FILE, MOMENT_GT_FILES, SPLIT_FILE

    if root is None and (gt is None or categories is None):
        raise UsageError("hirest needs --root, or both --gt and --categories")
    if split is not None and split not in SPLITS:
        raise UsageError(f"hirest scores the {' or '.join(SPLITS)} split, not {split!r}")
    if root is not None and not (root / "data/splits").is_dir():
        raise DataError("not a HiREST root: data/splits/ is missing", file=root)
    if gt is None:
        split = split or "test"
        step_gt = task in ("moment_segmentation", "step_captioning")
        gt = root / (MOMENT_GT_FILES[split] if step_gt else SPLIT_FILE.format(split=split))
    return gt, categories if categories is not None else root / CATEGORIES_FILE


def score_hirest(task: str, predictions: Path, gt: Path, categories: Path, preprocess: bool = True,
                 nms_order: str = "introsort", frame_dir: Path | None = None,
                 allow_reversed: bool = False) -> dict[str, Any]:
    from spacewalk.benchmarks.hirest import scoring

    if task == "moment_segmentation":
        return scoring.score_moment_segmentation(predictions, gt, categories, preprocess=preprocess,
                                                 nms_order=nms_order, allow_reversed=allow_reversed)
    if task == "step_captioning":
        return scoring.score_step_captioning(predictions, gt, categories, frame_dir=frame_dir)
    if task == "moment_retrieval":
        return scoring.score_moment_retrieval(predictions, gt, categories, allow_reversed=allow_reversed)
    return getattr(scoring, f"score_{task}")(predictions, gt, categories)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=TASKS, help="required")
    parser.add_argument("--root", type=Path, help="a HiREST root (data/splits/, data/evaluation/) whose files "
                                                  "--split picks")
    parser.add_argument("--split", help="split to score: val or test (default: test)")
    parser.add_argument("--gt", type=Path, help="the GT file the official evaluate.py reads for the task "
                                                "(default: the --split one under --root)")
    parser.add_argument("--categories", type=Path,
                        help="categories.json (default: data/evaluation/categories.json under --root)")
    parser.add_argument("--no-preprocess", action="store_true",
                        help="moment_segmentation: score the segments as given, without the official "
                             "clipping/completion to the GT moment (--preprocess_moment_bounds, on by default)")
    parser.add_argument("--nms-order", choices=("introsort", "identity"), default="introsort",
                        help="moment_segmentation: the order in which the official post-processing's NMS "
                             "visits segments, which depends on numpy: introsort (the authors' numpy 1.2x; "
                             "default) or identity (numpy 2.4 on CPUs with AVX2 or AVX-512, for one)")
    parser.add_argument("--allow-reversed", action="store_true",
                        help="moment_retrieval, moment_segmentation: score a predicted span that ends before it "
                             "starts as the authors' evaluate.py does (a moment: IoU 0) instead of refusing it")
    parser.add_argument("--frame-dir", type=Path,
                        help="step_captioning: <dir>/<video>/*.jpg frames at 1 fps for CLIPScore")


def score(args: argparse.Namespace) -> dict[str, Any]:
    from spacewalk.benchmarks.hirest.captioning_metrics import ScorerUnavailable

    if args.task not in TASKS:
        raise UsageError(f"hirest needs --task, one of {', '.join(TASKS)}")
    gt, categories = hirest_files(args.task, args.root, args.split, args.gt, args.categories)
    try:
        return score_hirest(args.task, args.predictions, gt, categories, preprocess=not args.no_preprocess,
                            nms_order=args.nms_order, frame_dir=args.frame_dir, allow_reversed=args.allow_reversed)
    except ScorerUnavailable as e:  # Java or pycocoevalcap missing: not the user's files, exit code 1
        raise ScoringFailed(str(e)) from e


def rescore(run_dir: Path, config: dict[str, Any]):
    """A finished run re-scored from its official prediction files (spacewalk/benchmarks/hirest/run_scores.py)."""
    from spacewalk.benchmarks.hirest.run_scores import rescore as rescore_run

    return rescore_run(run_dir, config)


BENCHMARK = Benchmark(
    name="hirest",
    release=Release(files=FILES, validate=validate, videos=videos, features=FEATURES),
    scores=(ScoreCommand("hirest", "HiREST: video and moment retrieval, moment segmentation, step captioning",
                         arguments, score, description=__doc__),),
    rescore=rescore,
    # the headline numbers (spacewalk.benchmarks.registry.Headline), each named `<split>/<task>/<number>`
    headlines={"hirest": (
        Headline("*/video_retrieval/*", QUERIES, "recall at k of the query's video among the ranked videos"),
        Headline("*/moment_retrieval/*", "queries (each clippable (query, video) pair)",
                 "the share of moments found at temporal IoU >= t"),
        Headline("*/moment_segmentation/*", "videos (each video's moment: the segmentation's query)",
                 "recall and precision of the step boundaries at temporal IoU >= t"),
    )},
    task_of=lambda config: "hirest",
)
