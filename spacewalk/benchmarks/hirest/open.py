"""`data=hirest` and `data=hirest_release`: the HiREST release at `root`, else the synthetic HiREST written on
first use (spacewalk/benchmarks/release_or_synthetic.py: the keys every benchmark's data config shares)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.hirest.dataset import HiREST
from spacewalk.benchmarks.hirest.synthetic.generate import ensure_hirest
from spacewalk.benchmarks.release_or_synthetic import dataset_root


def open_hirest(root: str | Path | None = None, synthetic_root: str | Path | None = None, seed: int = 0,
                synthetic: Mapping[str, Any] | None = None) -> HiREST:
    """The release at `root`; with root null, the synthetic HiREST at `synthetic_root` (`synthetic`:
    HiRESTOptions fields), generated on first use."""
    return HiREST(dataset_root(root, synthetic_root, seed, synthetic, ensure_hirest, "HiREST"))
