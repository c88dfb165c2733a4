"""Score a model on one split without training: `python evaluate.py data=spacewalk18 model=random split=test`,
`python evaluate.py data=hirest model=hirest_heuristics split=val` (HiREST's task-specific baselines),
or re-test a train.py checkpoint with its run's config: `python evaluate.py ckpt_path=<run>/checkpoints/X.ckpt`."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> dict:
    if cfg.get("ckpt_path"):
        from spacewalk.training import evaluate_checkpoint

        return evaluate_checkpoint(cfg)
    from spacewalk.evaluation import evaluate_step_recognition
    from spacewalk.hirest import HiREST

    dataset = hydra.utils.instantiate(cfg.data)
    if isinstance(dataset, HiREST):
        from spacewalk.hirest_evaluation import run_baselines

        return run_baselines(cfg, dataset)
    model = hydra.utils.instantiate(cfg.model)
    return evaluate_step_recognition(dataset, model, cfg.split, cfg.paths.output_dir, fit_split=cfg.fit_split,
                                     plots=cfg.plots)


if __name__ == "__main__":
    main()
