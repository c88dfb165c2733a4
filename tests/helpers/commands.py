"""The repository's paths, its configs composed as a command line would compose them, and `run_command`, the one
way a test runs one of the project's commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"


def compose_config(config_name: str, *overrides: str):
    """conf/<config_name>.yaml composed with `overrides` as the command line would (Hydra's compose API, the
    resolvers registered), without running anything."""
    from hydra import compose, initialize_config_dir

    import spacewalk.training  # noqa: F401  (registers the config resolvers)

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)


def compose_train(*overrides: str):
    return compose_config("train", *overrides)


def compose_evaluate(*overrides: str):
    return compose_config("evaluate", *overrides)


# offline (no hub, W&B offline): no test reaches the network
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def run_command(*args, env: dict | None = None, check: bool = True, timeout: float | None = None
                ) -> subprocess.CompletedProcess:
    """`python ARGS` in the repository, as a user runs the project's commands (train.py, evaluate.py, -m
    spacewalk.score, ...): offline, with tests/ importable (backends a test names by _target_); with `check`, a
    non-zero exit fails the test showing the end of stderr."""
    path = os.pathsep.join([str(REPO), str(REPO / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])])
    environment = os.environ | OFFLINE | {"PYTHONPATH": path} | (env or {})
    result = subprocess.run([sys.executable, *map(str, args)], cwd=REPO, capture_output=True, text=True,
                            env=environment, timeout=timeout)
    if check:
        assert result.returncode == 0, result.stderr[-4000:]
    return result
