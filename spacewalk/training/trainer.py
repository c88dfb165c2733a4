"""The Lightning Trainer of a run, built from conf/trainer/ with the callbacks and loggers of conf/callbacks/ and
conf/logger/; the checkpoint ModelCheckpoint kept; the loggers closed before the run's summary; the intervals'
bounds logged; and a warning where bf16 autocast would be emulated on a CPU without bfloat16 units."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import hydra
import pytorch_lightning as pl
from omegaconf import DictConfig

log = logging.getLogger(__name__)


# loggers whose package is an extra of the install (pyproject.toml): left out, with a warning, where it is missing
OPTIONAL_LOGGERS = {"pytorch_lightning.loggers.WandbLogger": ("wandb", "tracking")}


def installed_loggers(configs) -> list:
    """The configured loggers that can be built here: one whose package is an extra not installed (W&B without
    `pip install -e '.[tracking]'`) is left out, saying so, so that the core install trains with the CSV log."""
    kept = []
    for c in configs:
        package, extra = OPTIONAL_LOGGERS.get(str(c.get("_target_")), (None, None))
        if package is not None and importlib.util.find_spec(package) is None:
            log.warning("logger %s left out: %s is not installed (pip install -e '.[%s]'; logger=csv to say so)",
                        c._target_, package, extra)
            continue
        kept.append(c)
    return kept


def build_trainer(cfg: DictConfig, **overrides) -> pl.Trainer:
    callbacks = [hydra.utils.instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c is not None]
    loggers = [hydra.utils.instantiate(c)
               for c in installed_loggers([c for c in (cfg.get("logger") or {}).values() if c is not None])]
    trainer = hydra.utils.instantiate(cfg.trainer, **({"callbacks": callbacks, "logger": loggers} | overrides))
    if trainer.loggers:  # the resolved config and provenance.json (spacewalk/training/experiment_loggers.py)
        from spacewalk.training.experiment_loggers import run_params, tag_provenance

        params = run_params(cfg, cfg.paths.output_dir)
        for lg in trainer.loggers:
            lg.log_hyperparams(params)
        tag_provenance(trainer.loggers, params)
    warn_slow_bf16(trainer)
    return trainer


def cpu_bf16_units() -> list[str] | None:
    """The CPU's bfloat16 units that torch sees (avx512_bf16, amx), [] without any, None if torch cannot tell
    (its probes are private: None rather than a guess if they go)."""
    import torch

    probes = {"avx512_bf16": "_is_avx512_bf16_supported", "amx": "_is_amx_tile_supported"}
    found = {unit: getattr(torch.cpu, name, None) for unit, name in probes.items()}
    if any(probe is None for probe in found.values()):
        return None
    return [unit for unit, probe in found.items() if probe()]


def warn_slow_bf16(trainer: pl.Trainer) -> None:
    """bf16 autocast on a CPU without bfloat16 units is emulated: more than 10x slower than float32 for the
    MiniLM tower on an AVX2-only CPU (docs/speed.md). Allowed (the numbers are the same recipe's), but said."""
    on_cpu = isinstance(trainer.accelerator, pl.accelerators.CPUAccelerator)
    if on_cpu and str(trainer.precision).startswith("bf16") and cpu_bf16_units() == []:
        log.warning("trainer.precision=%s on a CPU without bfloat16 units (no avx512_bf16 or AMX): autocast emulates "
                    "bfloat16 and runs much slower than 32-bit here (docs/speed.md); drop the precision "
                    "override unless you need this exact setting", trainer.precision)


def eval_trainer(run_cfg: DictConfig, output_dir: Path) -> pl.Trainer:
    """A trainer to re-test a finished run: its trainer settings, no loggers, no callbacks."""
    return hydra.utils.instantiate(run_cfg.trainer, logger=False, callbacks=[], default_root_dir=str(output_dir))


def best_checkpoint(trainer: pl.Trainer) -> tuple[str | None, float | None]:
    """The checkpoint ModelCheckpoint kept (best val/loss) and its score; (None, None) without one."""
    # the callback that monitors (a recipe may add one that only writes last.ckpt every N steps: all_layer)
    monitoring = [c for c in trainer.checkpoint_callbacks if getattr(c, "monitor", None)]
    checkpoint = monitoring[0] if monitoring else trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint is not None else ""
    return (best, float(checkpoint.best_model_score)) if best else (None, None)


def close_loggers(trainer: pl.Trainer) -> None:
    """Finish the W&B run now (not at interpreter exit), so its closing lines come before the run's summary."""
    from pytorch_lightning.loggers import WandbLogger

    for lg in trainer.loggers:
        if isinstance(lg, WandbLogger):
            lg.experiment.finish()


def log_intervals(trainer: pl.Trainer, intervals: dict, prefix: str = "test") -> None:
    """The intervals' bounds as `<prefix>/<metric>_low` and `_high` to every logger (CSV, W&B)."""
    values = {f"{prefix}/{name}_{side}": interval[side] for name, interval in intervals.items()
              for side in ("low", "high") if interval.get(side) is not None}
    if not values:
        return
    for lg in trainer.loggers:
        lg.log_metrics(values, step=trainer.global_step)
        lg.save()
