"""What made a run: the command, the code's commit, when. `provenance.json` in the run directory.

Written by the run sequence (spacewalk/training/run.py) on process 0 before anything is built, for every task, so
that a table made from run directories (python -m spacewalk.report) can say which command and which commit
produced each number. `command` is the job's own command line (`python train.py` and the job's overrides: one job
of a multirun, with its values); `argv` is what was typed (a multirun's `-m` and its lists). A later command in the
same directory (a resume, `ckpt_path=last`) keeps the earlier records under `"previous"`: the newest first.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from spacewalk.core.io import write_json
from spacewalk.results.layout import PROVENANCE, read_json_object

_REPO = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str | None:
    try:
        result = subprocess.run(["git", "-C", str(_REPO), *args], capture_output=True, text=True, timeout=10,
                                check=False)
    except (OSError, subprocess.SubprocessError):  # no git on the machine: the record says null, the run goes on
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def code_commit() -> dict[str, Any]:
    """The commit of the code that runs, and whether tracked files differ from it (`dirty`); nulls outside a git
    checkout (an installed copy)."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def command_line(entry: str, overrides: Sequence[str]) -> str:
    """`python <entry>.py <overrides>`, quoted for a POSIX shell."""
    return shlex.join(["python", f"{entry}.py", *overrides])


def record(entry: str, overrides: Sequence[str] | None, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The provenance of the command now running: `entry` train or evaluate, `overrides` the job's (Hydra's
    overrides.task; None where Hydra did not compose the config, e.g. a test calling the sequence directly)."""
    argv = list(sys.argv if argv is None else argv)
    return {"command": command_line(entry, overrides) if overrides is not None else None,
            "overrides": list(overrides) if overrides is not None else None,
            "argv": shlex.join(["python", *argv]),
            **code_commit(),
            "python": sys.version.split()[0],
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def write_provenance(run_dir: str | Path, entry: str, overrides: Sequence[str] | None,
                     argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Write `<run_dir>/provenance.json` for the command now running, keeping an earlier command's record."""
    path = Path(run_dir) / PROVENANCE
    now = record(entry, overrides, argv)
    if path.exists():
        earlier = read_json_object(path)
        now["previous"] = [{k: v for k, v in earlier.items() if k != "previous"}, *earlier.get("previous", [])]
    write_json(path, now)
    return now


def read_provenance(run_dir: str | Path) -> dict[str, Any] | None:
    """The run's provenance.json, None for a run written before it existed; a torn one is named."""
    path = Path(run_dir) / PROVENANCE
    return read_json_object(path) if path.exists() else None
