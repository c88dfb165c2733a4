"""python -m spacewalk.benchmarks.spacewalk18.synthetic --root R [--seed N] [--overwrite]: write a synthetic
Spacewalk-18."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from spacewalk.benchmarks.spacewalk18.synthetic.generate import generate
from spacewalk.core.arguments import output_folder, seed_value
from spacewalk.core.command_errors import EXIT_USER_ERROR, user_errors_reported


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.benchmarks.spacewalk18.synthetic",
                                     description="Write a synthetic Spacewalk-18 in the official layout.")
    parser.add_argument("--root", required=True, type=output_folder, help="where to write the dataset")
    parser.add_argument("--seed", type=seed_value, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing root")
    args = parser.parse_args(argv)
    try:
        with user_errors_reported():  # a root holding another dataset, a bad option
            generate(args.root, args.seed, overwrite=args.overwrite)
    except FileExistsError as e:
        parser.exit(EXIT_USER_ERROR, f"error: {e}\n")  # a root that exists: the user's to choose


if __name__ == "__main__":
    main()

