"""The one command line of every synthetic generator, `python -m spacewalk.benchmarks.<name>.synthetic --root R
[--seed N] [--overwrite]`: each benchmark passes its generator, and the options, refusals and exit codes are the same
for all (a root holding another dataset or a bad option: `error:` and exit 2; an existing root without
--overwrite: the same)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spacewalk.core.arguments import output_folder, seed_value
from spacewalk.core.command_errors import EXIT_USER_ERROR, user_errors_reported


def generator_command(prog: str, description: str, generate: Callable[[Path, int, bool], Any],
                      argv: Sequence[str] | None = None) -> None:
    """Parse `argv` and call `generate(root, seed, overwrite)`."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--root", required=True, type=output_folder, help="where to write the dataset")
    parser.add_argument("--seed", type=seed_value, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing root")
    args = parser.parse_args(argv)
    try:
        with user_errors_reported():  # a root holding another dataset, a bad option
            generate(args.root, args.seed, args.overwrite)
    except FileExistsError as e:
        parser.exit(EXIT_USER_ERROR, f"error: {e}\n")  # a root that exists: the user's to choose
