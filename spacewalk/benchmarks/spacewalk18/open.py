"""`data=synthetic`, `data=spacewalk18` and the Spacewalk-18 multiple-choice tasks: the release at `root`, else
the synthetic Spacewalk-18 written on first use (spacewalk/benchmarks/release_or_synthetic.py: the keys every
benchmark's
data config shares)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.release_or_synthetic import dataset_root
from spacewalk.benchmarks.spacewalk18.data.dataset import Spacewalk18
from spacewalk.benchmarks.spacewalk18.synthetic.generate import ensure_dataset


def open_spacewalk18(root: str | Path | None = None, synthetic_root: str | Path | None = None, seed: int = 0,
                     synthetic: Mapping[str, Any] | None = None) -> Spacewalk18:
    """The release at `root`; with root null, the synthetic Spacewalk-18 at `synthetic_root` (`synthetic`: the
    generator's Options fields, spacewalk/benchmarks/spacewalk18/synthetic/), generated on first use."""
    return Spacewalk18(dataset_root(root, synthetic_root, seed, synthetic, ensure_dataset, "Spacewalk-18"))
