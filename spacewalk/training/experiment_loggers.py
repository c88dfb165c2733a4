"""What the experiment loggers (conf/logger/: CSV, W&B, TensorBoard, MLflow) are given, the same for training
runs and multiple-choice runs: the run's parameters (its resolved config and provenance.json: command, commit,
time) and its numbers under one naming.

Names. W&B groups panels by the part of a key before its first "/" (TensorBoard and MLflow show the same
prefixes), so a key's "/" are its sections and nothing else: the headline numbers of a finished run are
`test/<metric>` beside their intervals' bounds `test/<metric>_low` and `_high` (as a training run logs them,
spacewalk/training/trainer.py log_intervals); a group's numbers are `<group>/<value>` (`per_type/when`), their
bounds `<group>/<value>_low` / `_high`; a "/" inside a name (a question type such as "task before/at/after
location") is written "|", so it makes no section of its own. The intervals' settings (level, n_resamples,
seed, method, unit) are the same for every number: they are parameters (W&B config), not charts.

Multiple-choice runs fit nothing, so no Lightning Trainer drives their loggers: `log_finished_run` instantiates
the config's `logger` entries and gives each the parameters and the finished metrics once (step 0).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from spacewalk.core.io import load_json
from spacewalk.results.layout import PROVENANCE, VERSION_KEY

log = logging.getLogger(__name__)

INTERVAL_SETTINGS = ("level", "n_resamples", "seed", "method", "unit")


def key_part(name: Any) -> str:
    """One part of a logged key: a "/" in it written "|" (a section is a key's first part, nothing inside a name)."""
    return str(name).replace("/", "|")


def run_params(cfg: DictConfig, output_dir: str | Path) -> dict[str, Any]:
    """The run's parameters for the loggers: its resolved config and, under "provenance", provenance.json (the
    command, the commit and whether the tree was dirty, the start time) when the run sequence wrote it."""
    params = OmegaConf.to_container(cfg, resolve=True)
    path = Path(output_dir) / PROVENANCE
    if path.is_file():
        provenance = load_json(path)
        params["provenance"] = {k: v for k, v in provenance.items() if k != "previous"}
    return params


def tag_provenance(loggers, params: Mapping[str, Any]) -> None:
    """MLflow keeps a parameter's first 250 characters (Lightning's MLFlowLogger cuts them), which a command line
    often exceeds: the provenance's command, argv and commit also go to an MLflow run as tags (`provenance.command`
    ...), whole. Other loggers keep parameters whole."""
    from pytorch_lightning.loggers import MLFlowLogger

    provenance = params.get("provenance") or {}
    for logger in loggers:
        if isinstance(logger, MLFlowLogger):
            for key in ("command", "argv", "commit"):
                if provenance.get(key) is not None:
                    logger.experiment.set_tag(logger.run_id, f"provenance.{key}", str(provenance[key]))


def _is_interval(value: Any) -> bool:
    return isinstance(value, Mapping) and "estimate" in value and "low" in value and "high" in value


def logged_numbers(metrics: Mapping[str, Any], prefix: str = "test") -> tuple[dict[str, float], dict[str, Any]]:
    """(numbers, interval settings) of a metrics.json: its numbers under the names above (texts, booleans and
    nulls left out), and the intervals' settings, the same for all of them (empty without intervals)."""
    numbers: dict[str, float] = {}

    def leaves(value: Any, path: list[str]) -> None:
        if isinstance(value, Mapping):
            for key, sub in value.items():
                leaves(sub, [*path, key_part(key)])
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            numbers["/".join(path if len(path) > 1 else [prefix, *path])] = value

    leaves({k: v for k, v in metrics.items() if k not in ("intervals", VERSION_KEY)}, [])  # the file's, not a number
    settings: dict[str, Any] = {}

    def bounds(value: Any, path: list[str]) -> None:
        if _is_interval(value):
            for side in ("low", "high"):
                if value.get(side) is not None:
                    numbers["/".join(path[:-1] + [f"{path[-1]}_{side}"] if len(path) > 1
                                     else [prefix, f"{path[-1]}_{side}"])] = value[side]
            settings.update({k: value[k] for k in INTERVAL_SETTINGS if k in value})
        elif isinstance(value, Mapping):
            for key, sub in value.items():
                bounds(sub, [*path, key_part(key)])

    bounds(metrics.get("intervals") or {}, [])
    return numbers, settings


def log_finished_run(cfg: DictConfig, output_dir: str | Path, metrics: Mapping[str, Any]) -> list[str]:
    """Give every logger of the config's `logger` group (e.g. logger=tensorboard, logger=mlflow) the run's
    parameters (with the intervals' settings under "intervals") and its finished numbers, once; returns the
    loggers' class names. Nothing when the config has no logger group (evaluate.py's default)."""
    entries = [c for c in (cfg.get("logger") or {}).values() if c is not None]
    numbers, settings = logged_numbers(metrics)
    params = run_params(cfg, output_dir) | ({"intervals": settings} if settings else {})
    names = []
    for entry in entries:
        logger = hydra.utils.instantiate(entry)
        logger.log_hyperparams(params)
        tag_provenance([logger], params)
        logger.log_metrics(numbers, step=0)
        logger.finalize("success")
        names.append(type(logger).__name__)
    if names:
        log.info("logged %d numbers and the run's config to %s", len(numbers), ", ".join(names))
    return names
