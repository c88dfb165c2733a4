"""The HiREST joint-model recipe behind `python train.py data=hirest model=hirest_joint` and
`python evaluate.py ckpt_path=<run>/checkpoints/X.ckpt` for such a run.

train: features (extracted once per encoder, or the authors' released files), the round-robin DataModule,
fit with the checkpoint of the lowest val/loss (moment retrieval + captioning) kept, then, with that
checkpoint, predictions in the official formats for
- val (`<run>/val/`): all three tasks, scored against the val GT, as the paper and the official scoring
  report (BENCHMARKS §2.4 gives the released model's val numbers);
- test (`<run>/test/`): segmentation and captioning, scored against the test step GT; moment retrieval is
  predicted but not scored (the public test split hides the moments).
`metrics.json` holds {split: {task: metrics}} and the selection criterion.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import hydra
import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf, open_dict

from spacewalk.hirest import HiREST

log = logging.getLogger(__name__)

JOINT_MODULE = "models.hirest_joint.HiRESTJointModule"
# split -> the tasks its public GT can score
SCORED = {"val": ("moment_retrieval", "moment_segmentation", "step_captioning"),
          "test": ("moment_segmentation", "step_captioning")}


def _check_recipe(cfg: DictConfig) -> None:
    if cfg.model.get("_target_") != JOINT_MODULE:
        raise ValueError(f"data=hirest trains model=hirest_joint (got {cfg.model.get('_target_')}); the "
                         "task-specific baselines run with `python evaluate.py data=hirest model=hirest_heuristics`")


def build_model(cfg: DictConfig, features, output_dir: Path):
    model_cfg = cfg.model.copy()
    with open_dict(model_cfg):
        model_cfg.video_dim, model_cfg.query_dim, model_cfg.asr_dim = (features.video_dim, features.query_dim,
                                                                        features.asr_dim)
    model = hydra.utils.instantiate(model_cfg)
    model.output_dir = str(output_dir)
    return model


def _strategy(cfg: DictConfig) -> None:
    # each batch trains one task's head only: DDP must tolerate parameters without gradients
    if cfg.trainer.get("strategy") == "ddp":
        with open_dict(cfg.trainer):
            cfg.trainer.strategy = "ddp_find_unused_parameters_true"


def score_split(dataset: HiREST, split: str, pred_dir: Path, inference: str) -> dict[str, Any]:
    """Official scores of the prediction files in `pred_dir` for the tasks `split` can score."""
    from models.hirest_joint import PREDICTION_FILES
    from spacewalk.hirest_evaluation import score

    results: dict[str, Any] = {}
    for task in SCORED[split]:
        if task == "step_captioning" and inference == "end_to_end":
            # predicted steps are not the GT steps: the official caption scores align captions by step index
            results[task] = {"skipped": "end-to-end captions do not align with the GT steps one to one; "
                                        "the official captioning scores use model.inference=oracle"}
            continue
        if task == "step_captioning" and shutil.which("java") is None:
            results[task] = {"skipped": "java is not on PATH (METEOR and the PTB tokenizer need it)"}
            continue
        results[task] = score(dataset, task, split, pred_dir / PREDICTION_FILES[task])
    return results


def predict_and_score(trainer: pl.Trainer, model, datamodule, dataset: HiREST, ckpt_path: str | None,
                      output_dir: Path, inference: str) -> dict[str, Any]:
    """Predictions of val (trainer.predict) and test (trainer.test) under <output_dir>/<split>/, scored."""
    results: dict[str, Any] = {}
    model.output_dir = str(output_dir / "val")
    datamodule.predict_split = "val"
    trainer.predict(model, datamodule=datamodule, ckpt_path=ckpt_path, return_predictions=False)
    model.output_dir = str(output_dir / "test")
    trainer.test(model, datamodule=datamodule, ckpt_path=ckpt_path)
    if trainer.is_global_zero:
        from spacewalk.hirest_evaluation import _overall

        for split in ("val", "test"):
            results[split] = score_split(dataset, split, output_dir / split, inference)
            for task, metrics in results[split].items():
                log.info("%s %s: %s", split, task, _overall(metrics) if "all" in metrics else metrics["skipped"])
    return results


def train_hirest(cfg: DictConfig, dataset: HiREST) -> dict[str, Any]:
    from spacewalk.hirest_evaluation import build_features
    from spacewalk.io import write_json, write_text
    from spacewalk.training import RESOLVED_CONFIG, _resume_path, build_trainer

    _check_recipe(cfg)
    pl.seed_everything(cfg.seed, workers=True)
    output_dir = Path(cfg.paths.output_dir)
    write_text(output_dir / RESOLVED_CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
    features = build_features(cfg, dataset)
    datamodule = hydra.utils.instantiate(cfg.datamodule, hirest=dataset, features=features, _convert_="all")
    model = build_model(cfg, features, output_dir)
    _strategy(cfg)
    trainer = build_trainer(cfg)
    for lg in trainer.loggers:
        lg.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    trainer.fit(model, datamodule=datamodule, ckpt_path=_resume_path(cfg))
    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint is not None else ""
    best_val_loss = float(checkpoint.best_model_score) if best else None
    log.info("best checkpoint (val/loss %s): %s", best_val_loss, best or "none: the last weights")
    results = predict_and_score(trainer, model, datamodule, dataset, best or None, output_dir,
                                cfg.model.inference)
    if trainer.is_global_zero:
        write_json(output_dir / "metrics.json", {**results, "best_val_loss": best_val_loss})
        log.info("outputs: %s", output_dir)
    return {**results, "best_val_loss": best_val_loss}


def evaluate_hirest_checkpoint(cfg: DictConfig, run_cfg: DictConfig, ckpt: Path) -> dict[str, Any]:
    """Re-run a train.py HiREST checkpoint's predictions and scores with that run's config."""
    from spacewalk.hirest_evaluation import build_features
    from spacewalk.io import write_json

    dataset = hydra.utils.instantiate(run_cfg.data)
    output_dir = Path(cfg.paths.output_dir)
    features = build_features(run_cfg, dataset)
    datamodule = hydra.utils.instantiate(run_cfg.datamodule, hirest=dataset, features=features, _convert_="all")
    model = build_model(run_cfg, features, output_dir)
    _strategy(run_cfg)
    trainer = hydra.utils.instantiate(run_cfg.trainer, logger=False, callbacks=[], default_root_dir=str(output_dir))
    results = predict_and_score(trainer, model, datamodule, dataset, str(ckpt), output_dir, run_cfg.model.inference)
    if trainer.is_global_zero:
        write_json(output_dir / "metrics.json", results)
    return results
