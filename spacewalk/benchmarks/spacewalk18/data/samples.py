"""Write task samples made by our samplers for any dataset root.

    python -m spacewalk.benchmarks.spacewalk18.data.samples --root DIR --split test --out FILE [--per-video 2000]
    python -m spacewalk.benchmarks.spacewalk18.data.samples --root DIR --split train --out FILE --task
    intra_video_retrieval \
        [--seed 43] [--draw query_then_distance|uniform_pair] [--stats]

Step recognition (the default task): the format of tasks/step_recognition/<split>.json, made by the
official deterministic sampler; on the real release it reproduces those files exactly.
Intra-video retrieval: the format of tasks/intra-video_retrieval/<split>.json, made by
spacewalk.benchmarks.spacewalk18.data.retrieval_sampler (docs/spacewalk18.md, Intra-video retrieval; the real release has no train file). `--stats`
prints the statistics of the written samples beside those of the root's own file for that split, if any.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spacewalk.benchmarks.spacewalk18.data.dataset import RETRIEVAL_DIR, SPLITS, Spacewalk18, samples_to_json
from spacewalk.benchmarks.spacewalk18.data.step_sampler import SAMPLES_PER_VIDEO, recording_step_samples
from spacewalk.core.arguments import output_file, positive_count, seed_value
from spacewalk.core.command_errors import user_errors_reported
from spacewalk.core.errors import DataError
from spacewalk.core.io import write_json

TASKS = ("step_recognition", "intra_video_retrieval")


def _retrieval(dataset: Spacewalk18, args: argparse.Namespace) -> dict:
    from spacewalk.benchmarks.spacewalk18.data.retrieval_sampler import (
        RetrievalSamplerConfig,
        recording_retrieval_samples,
        retrieval_samples_to_json,
        retrieval_statistics,
    )

    cfg = RetrievalSamplerConfig(samples_per_video=args.per_video, seed=args.seed, draw=args.draw)
    samples = {}
    for rec in dataset.split(args.split):
        try:
            samples[rec.video_id] = recording_retrieval_samples(rec, cfg)
        except ValueError as e:
            raise DataError(str(e), file=args.root / "data/annotation.json", item=rec.video_id) from e
    if args.stats:
        stats = {"generated": retrieval_statistics(dataset.recordings, samples)}
        if (args.root / RETRIEVAL_DIR / f"{args.split}.json").is_file():
            stats["official"] = retrieval_statistics(dataset.recordings, dataset.retrieval_samples(args.split))
        print(json.dumps(stats, indent=2))
    return samples, retrieval_samples_to_json(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.benchmarks.spacewalk18.data.samples",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, type=Path, help="dataset root in the official layout")
    parser.add_argument("--split", required=True, choices=SPLITS)
    parser.add_argument("--out", required=True, type=output_file, help="JSON file to write")
    parser.add_argument("--task", choices=TASKS, default="step_recognition")
    parser.add_argument("--per-video", type=positive_count, default=SAMPLES_PER_VIDEO,
                        help="samples per video (2000)")
    parser.add_argument("--seed", type=seed_value, default=43,
                        help="intra_video_retrieval: the seed (the authors' 43)")
    parser.add_argument("--draw", choices=("query_then_distance", "uniform_pair"), default="query_then_distance",
                        help="intra_video_retrieval: how a query and its distance are drawn "
                             "(spacewalk/benchmarks/spacewalk18/data/retrieval_sampler.py)")
    parser.add_argument("--stats", action="store_true",
                        help="intra_video_retrieval: print distance, label and Irrelevant statistics")
    args = parser.parse_args(argv)
    with user_errors_reported():  # a bad root or annotation: its message, exit code 2
        dataset = Spacewalk18(args.root)
        if args.task == "intra_video_retrieval":
            samples, content = _retrieval(dataset, args)
        else:
            samples = {}
            for rec in dataset.split(args.split):
                try:
                    samples[rec.video_id] = recording_step_samples(rec, args.per_video)
                except ValueError as e:
                    raise DataError(str(e), file=args.root / "data/annotation.json", item=rec.video_id) from e
            content = samples_to_json(samples)
        write_json(args.out, content, indent=4)
    print(f"wrote {sum(map(len, samples.values()))} samples of {len(samples)} videos to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
