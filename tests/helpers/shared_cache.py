"""What a test run builds once and every module and xdist worker of the run reads: the synthetic data sets, the tiny
checkpoints, an extracted model. Each is built in a folder of pytest's temporary folder of the run, named by the
value it is built from, under a file lock, by whichever worker asks first while the others wait."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from filelock import FileLock


def shared_run_dir(tmp_path_factory) -> Path:
    """pytest's temporary folder of this run: with xdist, the one above every worker's own (`popen-gw<N>`)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_cache(tmp_path_factory, kind: str, build):
    """make(options) -> the folder `build(folder, options)` made for an equal `options` (a frozen dataclass) in
    this run: built once, by whichever worker asks first, while the others wait on its lock."""
    made: dict = {}

    def make(options) -> Path:
        if options not in made:
            digest = hashlib.sha256(repr(options).encode("utf-8")).hexdigest()[:16]
            folder = shared_run_dir(tmp_path_factory) / "shared" / kind / digest
            folder.mkdir(parents=True, exist_ok=True)
            with FileLock(str(folder) + ".lock"):
                made[options] = build(folder, options)
        return made[options]

    return make
