"""python -m spacewalk.benchmarks.hirest.synthetic --root R [--seed N] [--overwrite]: write a synthetic HiREST."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from spacewalk.benchmarks.hirest.synthetic.generate import generate_hirest
from spacewalk.benchmarks.hirest.synthetic.options import HiRESTOptions
from spacewalk.core.arguments import output_folder, seed_value
from spacewalk.core.command_errors import EXIT_USER_ERROR, user_errors_reported


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.benchmarks.hirest.synthetic",
                                     description="Write a synthetic HiREST in the release's layout.")
    parser.add_argument("--root", required=True, type=output_folder, help="where to write the dataset")
    parser.add_argument("--seed", type=seed_value, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing root")
    args = parser.parse_args(argv)
    try:
        with user_errors_reported():  # a root holding another dataset, a bad option
            generate_hirest(args.root, HiRESTOptions(seed=args.seed), overwrite=args.overwrite)
    except FileExistsError as e:
        parser.exit(EXIT_USER_ERROR, f"error: {e}\n")  # a root that exists: the user's to choose


if __name__ == "__main__":
    main()
