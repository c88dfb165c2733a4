"""Score a model on one split without training: `python evaluate.py data=spacewalk18 model=random split=test`,
`python evaluate.py model=zero_shot` (a recipe with nothing to train), `python evaluate.py data=hirest
model=hirest_heuristics split=val` (HiREST's task-specific baselines), or re-test a train.py checkpoint with
its run's config: `python evaluate.py ckpt_path=<run>/checkpoints/X.ckpt` (see conf/evaluate.yaml)."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

import spacewalk.training  # registers the config resolvers before Hydra composes
from spacewalk.core.command_errors import user_errors_reported
from spacewalk.training.sweep_failures import recorded_when_swept
from spacewalk.training.tasks import with_task_defaults


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> dict:
    # a bad input ends with its message, not Hydra's traceback; in a sweep, a job that fails is recorded and the
    # others run on (spacewalk/training/sweep_failures.py)
    with user_errors_reported(), recorded_when_swept():
        return spacewalk.training.evaluate(cfg)


if __name__ == "__main__":
    # a command naming a task but no model runs the task's default model (conf/task/<task>.yaml task.default_model)
    with user_errors_reported():  # a model name with no config: the models this entry point runs
        sys.argv = with_task_defaults(sys.argv, Path(__file__).parent / "conf", "evaluate")
    main()
