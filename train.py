"""Train, select on val, test: `python train.py model=lfb_cat context=5min` (see conf/train.yaml)."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

import spacewalk.training  # registers the config resolvers before Hydra composes
from spacewalk.core.command_errors import user_errors_reported
from spacewalk.training.sweep_failures import recorded_when_swept
from spacewalk.training.tasks import with_task_defaults


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    # a bad input ends with its message, not Hydra's traceback (which it prints for what escapes this function)
    # in a sweep, a job that fails is recorded and the others run on (spacewalk/training/sweep_failures.py)
    with user_errors_reported(), recorded_when_swept():
        # the value a Hydra sweeper (e.g. Optuna) minimises: the best validation loss, never a test number
        return spacewalk.training.train(cfg)["best_val_loss"]


if __name__ == "__main__":
    # a command naming a task but no model runs the task's default model (conf/task/<task>.yaml task.default_model)
    with user_errors_reported():  # a model name with no config: the models this entry point runs
        sys.argv = with_task_defaults(sys.argv, Path(__file__).parent / "conf", "train")
    main()
