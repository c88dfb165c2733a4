"""Write step-recognition samples made by the official sampler for any dataset root.

    python -m spacewalk.samples --root DIR --split test --out FILE [--per-video 2000]

The output has the format of tasks/step_recognition/<split>.json; on the real release it reproduces
those files exactly.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spacewalk.errors import DataError
from spacewalk.io import write_json
from spacewalk.spacewalk18.sampler import SAMPLES_PER_VIDEO, recording_step_samples
from spacewalk.spacewalk18.dataset import SPLITS, Spacewalk18, samples_to_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.samples", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, type=Path, help="dataset root in the official layout")
    parser.add_argument("--split", required=True, choices=SPLITS)
    parser.add_argument("--out", required=True, type=Path, help="JSON file to write")
    parser.add_argument("--per-video", type=int, default=SAMPLES_PER_VIDEO, help="samples per video (2000)")
    args = parser.parse_args(argv)
    try:
        dataset = Spacewalk18(args.root)
        samples = {}
        for rec in dataset.split(args.split):
            try:
                samples[rec.video_id] = recording_step_samples(rec, args.per_video)
            except ValueError as e:
                raise DataError(str(e), file=args.root / "data/annotation.json", item=rec.video_id) from e
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_json(args.out, samples_to_json(samples), indent=4)
    print(f"wrote {sum(map(len, samples.values()))} samples of {len(samples)} videos to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
