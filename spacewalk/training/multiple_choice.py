"""Multiple-choice evaluation's part of the run sequence behind evaluate.py (`task: multiple_choice`,
conf/task/multiple_choice.yaml; spacewalk/training/run.py): the data config builds a benchmark's task
(spacewalk/multiple_choice/task.py: items, official prompt, parsing, metrics, official files), the model config a
backend (spacewalk/multiple_choice/backends/), and spacewalk/multiple_choice/runner.py answers every item into the
run directory: records.jsonl as it goes,
then metrics.json and the task's official files.

Re-running the same command resumes: the run directory is a function of the command (conf/task/
multiple_choice.yaml: outputs/evaluate/runs/multiple_choice/<data>/<model>/<digest of the overrides>),
or the one given with hydra.run.dir=.... Several processes (torchrun, srun) split the items.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from spacewalk.core.errors import ConfigError
from spacewalk.core.io import write_text
from spacewalk.multiple_choice import runner
from spacewalk.training.experiment_loggers import log_finished_run, logged_numbers
from spacewalk.training.run import Recipe
from spacewalk.training.run_directory import RESOLVED_CONFIG, bootstrap_options

log = logging.getLogger(__name__)


class MultipleChoice(Recipe):
    """The backends are not LightningModules and nothing is fitted: the run sequence hands the whole run to
    `non_learned`, the runner (train.py refuses: the models answer zero-shot)."""

    def retest_config(self, cfg: DictConfig, run_cfg: DictConfig) -> DictConfig:
        raise ConfigError("a multiple-choice run has no checkpoint; re-run its command (it resumes) instead")

    def non_learned(self, cfg: DictConfig, output_dir: Path, training: bool) -> dict[str, Any] | None:
        settings = cfg.get("multiple_choice") or {}
        rank, world_size = runner.rank_and_world()
        if rank == 0:
            write_text(output_dir / RESOLVED_CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
        task = hydra.utils.instantiate(cfg.data, _convert_="all")
        backend = hydra.utils.instantiate(cfg.model, _convert_="all")
        if not hasattr(backend, "answer"):
            raise ConfigError(f"model {cfg.model.get('_target_')} is not a multiple-choice backend (no answer())")
        # what the records depend on: a re-run in this directory with anything else here is refused
        # (less the settings that change how fast, never what: a resume may change them)
        model = {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items()
                 if k not in runner.SPEED_SETTINGS}
        identity = {"data": OmegaConf.to_container(cfg.data, resolve=True), "model": model}
        log.info("run directory: %s (re-run the same command to resume)", output_dir)
        metrics = runner.run(task, backend, output_dir, chunk_size=int(settings.get("chunk_size", 8)),
                             identity=identity, rank=rank, world_size=world_size,
                             wait_seconds=float(settings.get("wait_seconds", 86400)),
                             progress=bool(settings.get("progress", True)),
                             prompts=str(settings.get("prompts", "parts")), bootstrap=bootstrap_options(cfg))
        if metrics is not None:
            summary = {k: v for k, v in metrics.items() if not isinstance(v, dict)}
            log.info("%s / %s: %s", task.name, backend.name, json.dumps(summary))
            for name, interval in (metrics.get("intervals") or {}).items():
                if "unit" in interval and interval["low"] is not None:  # the headline numbers (not per group)
                    log.info("%s %.2f, %.0f%% interval %.2f-%.2f (bootstrap over %s)", name, interval["estimate"],
                             100 * interval["level"], interval["low"], interval["high"], interval["unit"])
            log.info("wrote %s, %s and the official files to %s", runner.RECORDS, runner.METRICS, output_dir)
            # the experiment loggers of the config (logger=tensorboard, logger=mlflow, ...): its config, provenance and
            # the finished numbers, named as a training run's (spacewalk/training/experiment_loggers.py)
            log_finished_run(cfg, output_dir, metrics)
            wandb_settings = settings.get("wandb") or {}
            if wandb_settings.get("enabled", False):
                log_to_wandb(wandb_settings, task, backend.name, output_dir, metrics, identity)
        return metrics


def log_to_wandb(settings: Mapping[str, Any], task, backend_name: str, output_dir: Path, metrics: Mapping[str, Any],
                 config: Mapping[str, Any]) -> None:
    """The finished run's metrics (as numbers: summary and one logged step, named by experiment_loggers.
    logged_numbers: test/<metric> with _low / _high, <group>/<value>) and a table of its items (question, options,
    reply, parsed choice, answer, correct, frames seen: records.item_rows) to W&B, in the run directory's wandb/;
    offline unless `settings.offline` is false (`wandb sync` uploads an offline run later). The intervals' settings
    (level, n_resamples, seed, ...) go to the config, not to charts. Grouped by benchmark (`group`) and model
    (`job_type`), named by the backend (which served model, which checkpoint)."""
    import wandb

    from spacewalk.multiple_choice.records import ITEM_COLUMNS, item_rows, read_run

    items = list(task.items())
    numbers, interval_settings = logged_numbers(metrics)
    table = wandb.Table(columns=list(ITEM_COLUMNS), data=item_rows(items, read_run(output_dir)))
    run = wandb.init(project=settings.get("project", "spacewalk"), dir=str(output_dir),
                     mode="offline" if settings.get("offline", True) else "online",
                     group=settings.get("group"), job_type=settings.get("job_type"), name=backend_name,
                     tags=[t for t in (settings.get("group"), settings.get("job_type"), task.name) if t],
                     config={"task": task.name, "backend": backend_name, **config,
                             **({"intervals": interval_settings} if interval_settings else {})},
                     settings=wandb.Settings(console="off"))
    try:
        run.log({**numbers, "items": table})
        run.summary.update(numbers)
    finally:
        run.finish()
    log.info("logged the metrics and the items' table to W&B (%s)", "offline: " + str(output_dir / "wandb")
             if settings.get("offline", True) else "online")


RECIPE = MultipleChoice()
