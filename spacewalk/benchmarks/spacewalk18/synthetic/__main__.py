"""python -m spacewalk.benchmarks.spacewalk18.synthetic --root R [--seed N] [--overwrite]: write a synthetic
Spacewalk-18."""

from __future__ import annotations

from collections.abc import Sequence

from spacewalk.benchmarks.spacewalk18.synthetic.generate import generate
from spacewalk.benchmarks.synthetic_command import generator_command


def main(argv: Sequence[str] | None = None) -> None:
    generator_command("python -m spacewalk.benchmarks.spacewalk18.synthetic",
                      "Write a synthetic Spacewalk-18 in the official layout.",
                      lambda root, seed, overwrite: generate(root, seed, overwrite=overwrite), argv)


if __name__ == "__main__":
    main()
