"""Train, select on val, test: `python train.py model=lfb_cat context=5min` (see conf/train.yaml)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    from spacewalk.training import train

    # the value a Hydra sweeper (e.g. Optuna) minimises: the best validation loss, never a test number
    return train(cfg)["best_val_loss"]


if __name__ == "__main__":
    main()
