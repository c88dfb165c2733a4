"""Spacewalk-18 step recognition's part of the run sequence (`task: step_recognition`, spacewalk/training/run.py).

The DataModule builds the feature bank inside fit, split across ranks; fit keeps the checkpoint of the best
val/loss, tau fitted on val travels in it; recipes with nothing to train (zero-shot) validate (for tau and the
val numbers) and test. The module's test epoch writes predictions.json (official format); this recipe writes
metrics.json (the module's test metrics, tau, the selection criterion, the decoded metrics), the plan decoding
(conf/decoding/), timelines/ and confusion/ per test video, and the W&B images and table.

A non-learned baseline (models/baselines.py: fit on `fit_split`, scored on `split`) runs under evaluate.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, open_dict

from spacewalk.core.errors import ConfigError
from spacewalk.results.layout import PREDICTIONS
from spacewalk.training.run import Recipe, Run
from spacewalk.training.spacewalk18_modules import build_datamodule, build_model

log = logging.getLogger(__name__)


def draw_pictures(datamodule, output_dir: Path) -> None:
    """timelines/<video>.png and confusion/<video>.png of the test predictions."""
    from spacewalk.benchmarks.spacewalk18.pictures.timeline import plot_confusion, plot_timeline
    from spacewalk.benchmarks.spacewalk18.scoring.predictions import read_step_predictions

    samples = datamodule.samples["test"]
    recordings = datamodule.dataset.recordings
    read = read_step_predictions(output_dir / PREDICTIONS, recordings, samples)
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

    from spacewalk.benchmarks.spacewalk18.scoring.predictions import read_step_predictions

    recordings, samples = datamodule.dataset.recordings, datamodule.samples["test"]
    rows = {"raw": read_step_predictions(output_dir / PREDICTIONS, recordings, samples).predictions}
    folders = {"raw": output_dir}
    if decoded:
        folders["decoded"] = output_dir / "decoded" / decoded
        rows["decoded"] = read_step_predictions(folders["decoded"] / PREDICTIONS, recordings,
                                                samples).predictions
    images = {f"test/{kind}/{name}": [wandb.Image(str(p), caption=p.stem) for p in sorted((f / kind).glob("*.png"))]
              for name, f in folders.items() for kind in ("timelines", "confusion")}
    columns = ["video", "sample_id", "timestamp", "label", *[f"{name} prediction" for name in rows]]
    table = wandb.Table(columns=columns, data=[
        [v, s.id, s.timestamp, s.label, *[int(rows[name][v][i]) for name in rows]]
        for v in samples for i, s in enumerate(samples[v])])
    for lg in loggers:
        lg.experiment.log({**{k: v for k, v in images.items() if v}, "test/predictions": table})


def test_intervals(run: Run) -> dict[str, Any] | None:
    """The intervals of the test metrics (metrics.bootstrap; None when off), over the recordings of the module's
    official per-recording numbers (spacewalk/benchmarks/spacewalk18/intervals.py)."""
    from spacewalk.benchmarks.spacewalk18.intervals import step_recognition_intervals
    from spacewalk.training.run_directory import bootstrap_options

    options = bootstrap_options(run.cfg)
    return None if options is None else step_recognition_intervals(run.results["test"], options)


class StepRecognition(Recipe):
    validate_kept = False  # tau travels in the checkpoint (run.py)

    def check(self, cfg: DictConfig) -> None:
        from spacewalk.benchmarks.spacewalk18.data.dataset import SPLITS
        from spacewalk.training import decoding

        decoding.enabled(cfg)  # a misspelt decoding.name is refused now, not after the whole fit and test
        if cfg.get("split") is not None and cfg.split not in SPLITS:  # before any data is read or written
            raise ConfigError(f"split={cfg.split}: step recognition scores one of {', '.join(SPLITS)}")

    def retest_config(self, cfg: DictConfig, run_cfg: DictConfig) -> DictConfig:
        """`decoding=...` on the evaluate.py command line decodes the checkpoint (re-decoding a finished run)."""
        run_cfg = super().retest_config(cfg, run_cfg)
        with open_dict(run_cfg):
            run_cfg.decoding = cfg.get("decoding") or {"name": "none"}
        self.check(run_cfg)
        return run_cfg

    def build(self, cfg: DictConfig, output_dir: Path):
        datamodule = build_datamodule(cfg)
        return datamodule, build_model(cfg, datamodule.feature_dim, str(output_dir), datamodule)

    def non_learned(self, cfg: DictConfig, output_dir: Path, training: bool) -> dict[str, Any]:
        from spacewalk.benchmarks.spacewalk18.evaluation import evaluate_step_recognition
        from spacewalk.training.run_directory import bootstrap_options, write_resolved_config

        # no seeding here (the baselines seed themselves, and their published numbers stay as they were)
        write_resolved_config(cfg)
        dataset = hydra.utils.instantiate(cfg.data)
        model = hydra.utils.instantiate(cfg.model)
        return evaluate_step_recognition(dataset, model, cfg.split, str(output_dir), fit_split=cfg.fit_split,
                                         plots=cfg.plots, bootstrap=bootstrap_options(cfg))

    def after_test(self, run: Run) -> dict[str, Any]:
        """The plan decoding of conf/decoding (none by default): {"decoded": its test metrics} or nothing."""
        from spacewalk.training import decoding

        if not decoding.enabled(run.cfg):
            return {}
        # the kept checkpoint's val scores (the last validation of fit was the last epoch's), on every process
        run.trainer.validate(run.model, datamodule=run.datamodule, ckpt_path=run.ckpt, verbose=False)
        if not run.trainer.is_global_zero:
            return {}
        return {"decoded": decoding.decode_run(run.cfg, run.datamodule, run.model, run.output_dir,
                                               plots=run.cfg.get("plots", True))}

    def write_val(self, run: Run) -> None:
        """`test=false`: the kept checkpoint's val metrics in metrics.json, no test step (so a variant that is not
        chosen never shows a test number)."""
        from spacewalk.benchmarks.spacewalk18.evaluation import format_table
        from spacewalk.results.layout import write_metrics

        val = run.model.split_results["val"]
        write_metrics(run.output_dir, {"split": "val", **val, "tau": float(run.model.tau),
                                                     "best_val_loss": run.results["best_val_loss"]})
        log.info("val split (test=false, no test step):\n%s\noutputs: %s", format_table(val), run.output_dir)

    def write(self, run: Run) -> None:
        """metrics.json (the module's test record, the selection criterion and the decoded test metrics), the
        pictures and the W&B table."""
        from spacewalk.results.layout import write_metrics
        from spacewalk.training.trainer import log_intervals

        decoded = run.results.get("decoded")
        extra = {k: run.results[k] for k in ("best_val_loss", "decoded") if k in run.results}
        intervals = test_intervals(run)
        if intervals is not None:
            extra["intervals"] = run.results["test"]["intervals"] = intervals
            log_intervals(run.trainer, intervals)
        write_metrics(run.output_dir, {**run.model.test_record(), **extra})
        if run.cfg.get("plots", True):
            draw_pictures(run.datamodule, run.output_dir)
            log_to_wandb(run.trainer, run.datamodule, run.output_dir, decoded["decoding"] if decoded else None)

    def summarize(self, run: Run) -> None:
        results, output_dir = run.results, run.output_dir
        from spacewalk.benchmarks.spacewalk18.evaluation import format_table

        decoded = results.get("decoded")
        also = (f"\ndecoded ({decoded['decoding']}): Accuracy {decoded['Accuracy']:.2f}, IoU {decoded['IoU']:.2f} "
                f"(outputs in decoded/{decoded['decoding']}/)" if decoded else "")
        log.info("test split:\n%s%s\noutputs: %s", format_table(results["test"]), also, output_dir)


RECIPE = StepRecognition()
