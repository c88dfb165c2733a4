"""The step-recognition recipe behind train.py and `evaluate.py ckpt_path=...` (needs Lightning; the rest of
the `spacewalk` package does not).

train: build the DataModule (the feature bank is built inside fit, split across ranks), fit on train with
the checkpoint of the best val/loss kept, tau fitted on val, then test with that checkpoint. Zero-shot
models have nothing to train: validate (for the val numbers) and test. The test writes predictions.json
(official format) and metrics.json; rank 0 then draws one timeline per test video.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import hydra
import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)

RESOLVED_CONFIG = "config.resolved.yaml"


def _is_hirest(cfg: DictConfig) -> bool:
    return cfg.data.get("_target_") == "spacewalk.hirest.open_hirest"


def head_reads_cells(cfg: DictConfig) -> bool:
    """Whether the configured recipe's head reads the window cells, asked of its class before anything is
    built (the DataModule is built before the model, which needs its feature dim)."""
    from models.heads import head_reads_cells as reads

    target = (cfg.model.get("head") or {}).get("_target_")
    return reads(hydra.utils.get_class(target)) if target else True


def build_datamodule(cfg: DictConfig):
    dataset = hydra.utils.instantiate(cfg.data)
    text = hydra.utils.instantiate(cfg.encoder.text) if cfg.encoder.get("text") and "text" in cfg.modalities else None
    video = (hydra.utils.instantiate(cfg.encoder.video)
             if cfg.encoder.get("video") and "video" in cfg.modalities else None)
    # datamodule.cells: null (the default, and absent from configs of older runs) = what the head reads
    cells = cfg.datamodule.get("cells")
    return hydra.utils.instantiate(cfg.datamodule, dataset=dataset, text_encoder=text, video_encoder=video,
                                   cells=head_reads_cells(cfg) if cells is None else cells,
                                   _recursive_=False, _convert_="all")


def build_model(cfg: DictConfig, feature_dim: int, output_dir: str | None):
    model_cfg = cfg.model.copy()
    with open_dict(model_cfg):
        model_cfg.head.dim = feature_dim
    model = hydra.utils.instantiate(model_cfg)
    model.output_dir = output_dir
    return model


def build_trainer(cfg: DictConfig) -> pl.Trainer:
    callbacks = [hydra.utils.instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c is not None]
    loggers = [hydra.utils.instantiate(c) for c in (cfg.get("logger") or {}).values() if c is not None]
    return hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers)


def _resume_path(cfg: DictConfig) -> str | None:
    if cfg.get("ckpt_path") in (None, ""):
        return None
    if cfg.ckpt_path == "last":
        path = Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt"
        if not path.is_file():
            raise FileNotFoundError(f"ckpt_path=last but {path} does not exist: pass hydra.run.dir=<the run to resume>")
        return str(path)
    return str(cfg.ckpt_path)


def draw_timelines(datamodule, output_dir: Path) -> None:
    from spacewalk.predictions import read_step_predictions
    from spacewalk.timeline import plot_timeline

    samples = datamodule.samples["test"]
    recordings = datamodule.dataset.recordings
    read = read_step_predictions(output_dir / "predictions.json", recordings, samples)
    for video_id, predictions in read.predictions.items():
        plot_timeline(recordings[video_id], samples[video_id], predictions, output_dir / "timelines" / f"{video_id}.png")


def train(cfg: DictConfig) -> dict[str, Any]:
    if _is_hirest(cfg):
        from spacewalk.hirest_training import train_hirest

        return train_hirest(cfg, hydra.utils.instantiate(cfg.data))
    pl.seed_everything(cfg.seed, workers=True)
    output_dir = Path(cfg.paths.output_dir)
    # the config with every interpolation resolved, so evaluate.py can rebuild this run outside it
    from spacewalk.io import write_text

    write_text(output_dir / RESOLVED_CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
    datamodule = build_datamodule(cfg)
    model = build_model(cfg, datamodule.feature_dim, str(output_dir))
    trainer = build_trainer(cfg)
    for lg in trainer.loggers:
        lg.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    trainable = any(p.requires_grad for p in model.parameters())
    if trainable:
        trainer.fit(model, datamodule=datamodule, ckpt_path=_resume_path(cfg))
        checkpoint = trainer.checkpoint_callback
        best = checkpoint.best_model_path if checkpoint is not None else ""
        best_val_loss = float(checkpoint.best_model_score) if best else None
        log.info("best checkpoint (val/loss %s): %s", best_val_loss, best or "none: testing the last weights")
        trainer.test(model, datamodule=datamodule, ckpt_path=best or None)
    else:
        log.info("%s has no trainable parameters: validate and test only", type(model.head).__name__)
        best_val_loss = float(trainer.validate(model, datamodule=datamodule)[0].get("val/loss", float("nan")))
        trainer.test(model, datamodule=datamodule)
    results = {"test": dict(model.test_results or {}), "best_val_loss": best_val_loss}
    if trainer.is_global_zero:
        # the selection criterion next to the test numbers, for sweep summaries
        from spacewalk.io import load_json, write_json

        metrics = load_json(output_dir / "metrics.json")
        write_json(output_dir / "metrics.json", {**metrics, "best_val_loss": best_val_loss})
        if cfg.get("plots", True):
            draw_timelines(datamodule, output_dir)
        from spacewalk.evaluation import format_table

        log.info("test split:\n%s\noutputs: %s", format_table(results["test"]), output_dir)
    return results


def evaluate_checkpoint(cfg: DictConfig) -> dict[str, Any]:
    """Reload a train.py checkpoint with its run's own config and score the test split."""
    if cfg.get("split", "test") != "test":
        raise ValueError("evaluate.py ckpt_path=... scores the test split (val is what the checkpoint was chosen on)")
    ckpt = Path(cfg.ckpt_path)
    run_cfg_file = ckpt.parent.parent / RESOLVED_CONFIG
    if not ckpt.is_file():
        raise FileNotFoundError(f"checkpoint not found: {ckpt}")
    if not run_cfg_file.is_file():
        raise FileNotFoundError(f"{run_cfg_file} not found: ckpt_path must be <train run>/checkpoints/<name>.ckpt")
    run_cfg = OmegaConf.load(run_cfg_file)
    with open_dict(run_cfg):
        run_cfg.paths.output_dir = cfg.paths.output_dir
    if _is_hirest(run_cfg):
        from spacewalk.hirest_training import evaluate_hirest_checkpoint

        return evaluate_hirest_checkpoint(cfg, run_cfg, ckpt)
    output_dir = Path(cfg.paths.output_dir)
    datamodule = build_datamodule(run_cfg)
    model = build_model(run_cfg, datamodule.feature_dim, str(output_dir))
    trainer = hydra.utils.instantiate(run_cfg.trainer, logger=False, callbacks=[], default_root_dir=str(output_dir))
    trainer.test(model, datamodule=datamodule, ckpt_path=str(ckpt))
    results = dict(model.test_results or {})
    if trainer.is_global_zero and cfg.get("plots", True):
        draw_timelines(datamodule, output_dir)
    return results
