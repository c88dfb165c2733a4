"""What the end-to-end tests of train.py and evaluate.py share: running a command with a synthetic set's data
overrides, a run's metrics, and the official scorer's numbers for a prediction file."""

from __future__ import annotations

import json
import subprocess

from helpers.commands import run_command


def run(script: str, data: list[str], *overrides: str) -> subprocess.CompletedProcess:
    """`python script` with `data` (train.py only: evaluate.py reads the data from the checkpoint's run); Hydra's
    flags (-m, ...) go before the overrides."""
    flags = [o for o in overrides if o.startswith("-")]
    overrides = tuple(o for o in overrides if not o.startswith("-"))
    return run_command(script, *flags, *(data if script == "train.py" else []), *overrides)


def metrics(run_dir) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def official_scores(root, split: str, predictions) -> dict:
    """What `python -m spacewalk.score` (the authors' evaluation.py) prints for a prediction file."""
    result = run_command("-m", "spacewalk.score", "--root", root, "--split", split, "--predictions", predictions)
    return json.loads(result.stdout)
