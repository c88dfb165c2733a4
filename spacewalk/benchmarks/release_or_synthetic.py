"""The one rule of every benchmark's data config: the release at `root`, else the synthetic one.

Each `conf/data/<benchmark>.yaml` holds the same four keys, read by its opener through `dataset_root`:

    root: null              # the release, in its official layout; null: the synthetic miniature below
    synthetic_root: ...     # where the synthetic one is written on first use (its generator's record
                            # file there says which seed and options made it)
    seed: 0                 # the generator's seed
    synthetic: {}           # the generator's other options, e.g. +data.synthetic.n_train=4

so `data.root=R` means the release and `+data.synthetic.X=...` a generator option for every benchmark.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock

from spacewalk.core.errors import ConfigError


def dataset_root(root: str | Path | None, synthetic_root: str | Path | None, seed: int,
                 synthetic: Mapping[str, Any] | None, ensure: Callable[..., Path], name: str) -> Path:
    """`root` when given; else `ensure(synthetic_root, seed=seed, **synthetic)`, the synthetic `name` written
    on first use. The options of the synthetic set are ignored for a release (they have nothing to say)."""
    if root is not None:
        return Path(root)
    if synthetic_root is None:
        raise ConfigError(f"give data.root (the {name} release) or data.synthetic_root (where the synthetic "
                          f"{name} is written on first use)")
    options = dict(synthetic or {})
    if "seed" in options:  # one place for the seed, so that a run's config says it once
        raise ConfigError(f"data.synthetic.seed={options['seed']!r}: the synthetic {name}'s seed is data.seed")
    # parallel jobs on one machine (hydra/launcher=local) write the same set: the first writes it, the others wait
    # for it here and then find it made, instead of writing it again over the first's. The lock lives in the temp
    # folder, keyed by the set's path, so a refused option leaves nothing behind (ensure_generated still copes with
    # writers on other machines)
    key = hashlib.sha1(str(Path(synthetic_root).absolute()).encode()).hexdigest()
    locks = Path(tempfile.gettempdir()) / "spacewalk-locks"
    locks.mkdir(exist_ok=True)
    with FileLock(locks / f"{key}.lock"):
        return Path(ensure(synthetic_root, seed=seed, **options))
