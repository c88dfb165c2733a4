"""python -m spacewalk.benchmarks.hirest.synthetic --root R [--seed N] [--overwrite]: write a synthetic HiREST."""

from __future__ import annotations

from collections.abc import Sequence

from spacewalk.benchmarks.hirest.synthetic.generate import generate_hirest
from spacewalk.benchmarks.hirest.synthetic.options import HiRESTOptions
from spacewalk.benchmarks.synthetic_command import generator_command


def main(argv: Sequence[str] | None = None) -> None:
    generator_command("python -m spacewalk.benchmarks.hirest.synthetic",
                      "Write a synthetic HiREST in the release's layout.",
                      lambda root, seed, overwrite: generate_hirest(root, HiRESTOptions(seed=seed),
                                                                    overwrite=overwrite),
                      argv)


if __name__ == "__main__":
    main()
