"""Spacewalk-18 step recognition behind train.py and evaluate.py (`task: step_recognition`).

train: build the DataModule (the feature bank is built inside fit, split across ranks), fit on train with
the checkpoint of the best val/loss kept, tau fitted on val, then test with that checkpoint. Recipes with
nothing to train (zero-shot) validate (for tau and the val numbers) and test. The test writes
predictions.json (official format) and metrics.json; rank 0 then draws one timeline per test video.

evaluate: a non-learned baseline (models/baselines.py: fit on `fit_split`, scored on `split`), a recipe with
nothing to train (as train does it), or, through `evaluate_checkpoint`, a train.py checkpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import hydra
import pytorch_lightning as pl
from omegaconf import DictConfig, open_dict

from spacewalk.training.common import (best_checkpoint, build_trainer, close_loggers, eval_trainer, resume_path,
                                       start_run)
from spacewalk.training.step_recognition_build import build_datamodule, build_model

log = logging.getLogger(__name__)


def draw_pictures(datamodule, output_dir: Path) -> None:
    """timelines/<video>.png and confusion/<video>.png of the test predictions."""
    from spacewalk.spacewalk18.predictions import read_step_predictions
    from spacewalk.spacewalk18.timeline import plot_confusion, plot_timeline

    samples = datamodule.samples["test"]
    recordings = datamodule.dataset.recordings
    read = read_step_predictions(output_dir / "predictions.json", recordings, samples)
    for video_id, predictions in read.predictions.items():
        plot_timeline(recordings[video_id], samples[video_id], predictions,
                      output_dir / "timelines" / f"{video_id}.png")
        plot_confusion(recordings[video_id], samples[video_id], predictions,
                       output_dir / "confusion" / f"{video_id}.png")


def log_to_wandb(trainer, datamodule, output_dir: Path, decoded: str | None) -> None:
    """The pictures as images and the test predictions as a table (video, sample, time, label, prediction and,
    with decoding, the decoded label), for the runs that log to W&B."""
    from pytorch_lightning.loggers import WandbLogger

    loggers = [lg for lg in trainer.loggers if isinstance(lg, WandbLogger)]
    if not loggers:
        return
    import wandb

    from spacewalk.spacewalk18.predictions import read_step_predictions

    recordings, samples = datamodule.dataset.recordings, datamodule.samples["test"]
    rows = {"raw": read_step_predictions(output_dir / "predictions.json", recordings, samples).predictions}
    folders = {"raw": output_dir}
    if decoded:
        folders["decoded"] = output_dir / "decoded" / decoded
        rows["decoded"] = read_step_predictions(folders["decoded"] / "predictions.json", recordings,
                                                samples).predictions
    images = {f"test/{kind}/{name}": [wandb.Image(str(p), caption=p.stem) for p in sorted((f / kind).glob("*.png"))]
              for name, f in folders.items() for kind in ("timelines", "confusion")}
    columns = ["video", "sample_id", "timestamp", "label", *[f"{name} prediction" for name in rows]]
    table = wandb.Table(columns=columns, data=[
        [v, s.id, s.timestamp, s.label, *[int(rows[name][v][i]) for name in rows]]
        for v in samples for i, s in enumerate(samples[v])])
    for lg in loggers:
        lg.experiment.log({**{k: v for k, v in images.items() if v}, "test/predictions": table})


def _is_lightning_recipe(cfg: DictConfig) -> bool:
    return issubclass(hydra.utils.get_class(cfg.model._target_), pl.LightningModule)


def _fit_or_validate_then_test(cfg: DictConfig, output_dir: Path, training: bool) -> dict[str, Any]:
    datamodule = build_datamodule(cfg)
    model = build_model(cfg, datamodule.feature_dim, str(output_dir), datamodule)
    trainable = any(p.requires_grad for p in model.parameters())
    if trainable and not training:
        raise ValueError(f"this recipe ({type(model.head).__name__} head) is trained: run train.py, or re-test one of "
                         "its checkpoints with `python evaluate.py ckpt_path=<run>/checkpoints/X.ckpt`")
    trainer = build_trainer(cfg)
    best = None
    if trainable:
        trainer.fit(model, datamodule=datamodule, ckpt_path=resume_path(cfg))
        best, best_val_loss = best_checkpoint(trainer)
        log.info("best checkpoint (val/loss %s): %s", best_val_loss, best or "none: testing the last weights")
        if not cfg.get("test", True):
            return _validate_only(cfg, datamodule, model, trainer, best, best_val_loss, output_dir)
        trainer.test(model, datamodule=datamodule, ckpt_path=best)
    else:
        log.info("%s has no trainable parameters: validate (tau) and test", type(model.head).__name__)
        best_val_loss = float(trainer.validate(model, datamodule=datamodule)[0].get("val/loss", float("nan")))
        trainer.test(model, datamodule=datamodule)
    results = {"test": dict(model.test_results or {}), "best_val_loss": best_val_loss}
    results |= _decode(cfg, datamodule, model, trainer, best, output_dir)
    _report(cfg, datamodule, model, trainer, output_dir, results)
    return results


def _validate_only(cfg: DictConfig, datamodule, model, trainer, best: str | None, best_val_loss: float | None,
                   output_dir: Path) -> dict[str, Any]:
    """`test=false`, for choosing a setting: the kept checkpoint's val metrics in metrics.json, no test step
    (so a variant that is not chosen never shows a test number)."""
    trainer.validate(model, datamodule=datamodule, ckpt_path=best, verbose=False)
    val = model.split_results["val"]
    close_loggers(trainer)
    if trainer.is_global_zero:
        from spacewalk.io import write_json
        from spacewalk.spacewalk18.evaluation import format_table

        write_json(output_dir / "metrics.json", {"split": "val", **val, "tau": float(model.tau),
                                                 "best_val_loss": best_val_loss})
        log.info("val split (test=false, no test step):\n%s\noutputs: %s", format_table(val), output_dir)
    return {"val": val, "best_val_loss": best_val_loss}


def _decode(cfg: DictConfig, datamodule, model, trainer, ckpt_path: str | None, output_dir: Path) -> dict[str, Any]:
    """The plan decoding of conf/decoding (none by default): {"decoded": its test metrics} or nothing."""
    from spacewalk.training import decoding

    if not decoding.enabled(cfg):
        return {}
    # the kept checkpoint's val scores (the last validation of fit was the last epoch's), on every process
    trainer.validate(model, datamodule=datamodule, ckpt_path=ckpt_path, verbose=False)
    if not trainer.is_global_zero:
        return {}
    return {"decoded": decoding.decode_run(cfg, datamodule, model, output_dir, plots=cfg.get("plots", True))}


def _report(cfg: DictConfig, datamodule, model, trainer, output_dir: Path, results: dict[str, Any]) -> None:
    """metrics.json with the selection criterion (and the decoded test metrics), pictures, the summary."""
    decoded = results.get("decoded")
    if not results["test"]:
        # only a limited run (limit_*_batches, fast_dev_run) leaves the test unscored: no video seen whole
        close_loggers(trainer)
        log.warning("the test was not scored (a limited run saw no test video whole, or no tau): no metrics.json; "
                    "best val/loss %s; outputs: %s", results.get("best_val_loss"), output_dir)
        return
    if trainer.is_global_zero:
        from spacewalk.io import load_json, write_json

        extra = {k: results[k] for k in ("best_val_loss", "decoded") if k in results}
        write_json(output_dir / "metrics.json", {**load_json(output_dir / "metrics.json"), **extra})
        if cfg.get("plots", True):
            draw_pictures(datamodule, output_dir)
            log_to_wandb(trainer, datamodule, output_dir, decoded["decoding"] if decoded else None)
    close_loggers(trainer)
    if not trainer.is_global_zero:
        return
    from spacewalk.spacewalk18.evaluation import format_table

    also = (f"\ndecoded ({decoded['decoding']}): Accuracy {decoded['Accuracy']:.2f}, IoU {decoded['IoU']:.2f} "
            f"(outputs in decoded/{decoded['decoding']}/)" if decoded else "")
    log.info("test split:\n%s%s\noutputs: %s", format_table(results["test"]), also, output_dir)


def train(cfg: DictConfig) -> dict[str, Any]:
    output_dir = start_run(cfg)
    return _fit_or_validate_then_test(cfg, output_dir, training=True)


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    if not _is_lightning_recipe(cfg):
        from spacewalk.spacewalk18.evaluation import evaluate_step_recognition

        dataset = hydra.utils.instantiate(cfg.data)
        model = hydra.utils.instantiate(cfg.model)
        return evaluate_step_recognition(dataset, model, cfg.split, cfg.paths.output_dir, fit_split=cfg.fit_split,
                                         plots=cfg.plots)
    if cfg.split != "test":
        raise ValueError(f"a step-recognition recipe fits tau on val and scores the test split (got split={cfg.split})")
    output_dir = start_run(cfg)
    return _fit_or_validate_then_test(cfg, output_dir, training=False)["test"]


def evaluate_checkpoint(cfg: DictConfig, run_cfg: DictConfig, ckpt: Path) -> dict[str, Any]:
    """Reload a train.py checkpoint with its run's own config and score the test split; `decoding=...` on the
    evaluate.py command line decodes it (re-decoding a finished run without retraining)."""
    if cfg.get("split", "test") != "test":
        raise ValueError("evaluate.py ckpt_path=... scores the test split (val is what the checkpoint was chosen on)")
    with open_dict(run_cfg):
        run_cfg.decoding = cfg.get("decoding") or {"name": "none"}
        run_cfg.plots = cfg.get("plots", True)
    output_dir = Path(cfg.paths.output_dir)
    datamodule = build_datamodule(run_cfg)
    model = build_model(run_cfg, datamodule.feature_dim, str(output_dir), datamodule)
    trainer = eval_trainer(run_cfg, output_dir)
    trainer.test(model, datamodule=datamodule, ckpt_path=str(ckpt))
    results = {"test": dict(model.test_results or {})}
    results |= _decode(run_cfg, datamodule, model, trainer, str(ckpt), output_dir)
    _report(run_cfg, datamodule, model, trainer, output_dir, results)
    return results
