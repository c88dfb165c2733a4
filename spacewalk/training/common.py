"""What every recipe of the training layer does the same way: the trainer with its callbacks and loggers,
the run directory's resolved config, resuming, and re-loading a finished run's config."""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf, open_dict

from spacewalk.core.errors import ConfigError
from spacewalk.core.io import write_text
from spacewalk.results.layout import RUN_CONFIG

log = logging.getLogger(__name__)

# the config with every interpolation resolved, so evaluate.py can rebuild a run outside it
RESOLVED_CONFIG = RUN_CONFIG  # the resolved config every run directory holds (spacewalk/results/layout.py)


def start_run(cfg: DictConfig) -> Path:
    """Seed everything and write the resolved config into the run directory; returns that directory."""
    pl.seed_everything(cfg.seed, workers=True)
    return write_resolved_config(cfg)


def write_resolved_config(cfg: DictConfig, keys: tuple[str, ...] | None = None) -> Path:
    """The resolved config in the run directory (what evaluate.py ckpt_path=... rebuilds a run from, and what
    spacewalk/results/rescore.py re-scores its predictions with); `keys`: only these top-level sections (a run whose
    other sections name what its model does not have: HiREST's baselines and the joint model's DataModule
    settings); returns that directory."""
    output_dir = Path(cfg.paths.output_dir)
    if keys is not None:
        cfg = OmegaConf.create({k: OmegaConf.to_container(cfg[k], resolve=True) if isinstance(cfg[k], DictConfig)
                                else cfg[k] for k in keys if k in cfg})
    write_text(output_dir / RESOLVED_CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
    return output_dir


def build_trainer(cfg: DictConfig, **overrides) -> pl.Trainer:
    callbacks = [hydra.utils.instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c is not None]
    loggers = [hydra.utils.instantiate(c) for c in (cfg.get("logger") or {}).values() if c is not None]
    trainer = hydra.utils.instantiate(cfg.trainer, **({"callbacks": callbacks, "logger": loggers} | overrides))
    for lg in trainer.loggers:
        lg.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
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


def check_checkpoint(path: Path, what: str) -> None:
    """Refuse a checkpoint file that cannot be whole, before Lightning reads it (where an empty or truncated file
    ends in torch's zip-reader error or a bare EOFError that names neither the file nor what to do). torch.save
    writes a zip archive whose directory is at the end, so a file cut short has none."""
    import zipfile

    if not path.is_file():
        raise ConfigError(f"{what}: checkpoint not found: {path}")
    size = path.stat().st_size
    if size == 0:
        problem = "is empty (0 bytes)"
    elif zipfile.is_zipfile(path):
        return
    else:
        try:  # not a zip: torch's legacy format (before 1.6) is still readable; anything else is refused
            import torch

            torch.load(path, map_location="cpu", weights_only=False)
            return
        except Exception:  # noqa: BLE001  (whatever torch raises on a torn file: EOFError, UnpicklingError, ...)
            problem = f"is not a whole checkpoint ({size} bytes: truncated by an interrupted copy or save?)"
    raise ConfigError(f"{what}: {path} {problem}; copy it again from where it was written, or pass another "
                     "checkpoint of the run (its checkpoints/ folder keeps last.ckpt and the best epoch's)")


def resume_path(cfg: DictConfig) -> str | None:
    """The checkpoint train.py resumes from (ckpt_path=last: the run's newest last*.ckpt), checked whole."""
    if cfg.get("ckpt_path") in (None, ""):
        return None
    if cfg.ckpt_path == "last":
        folder = Path(cfg.paths.output_dir) / "checkpoints"
        # the newest "last": a recipe with a second checkpoint callback (all_layer's every 100 steps) has two, since
        # Lightning names the second callback's last-v1.ckpt, and either may be the newer (mid-epoch, epoch end)
        candidates = sorted(folder.glob("last*.ckpt"), key=lambda p: p.stat().st_mtime_ns)
        if not candidates:
            raise ConfigError(f"ckpt_path=last but {folder / 'last.ckpt'} does not exist: pass "
                              "hydra.run.dir=<the run to resume>")
        check_checkpoint(candidates[-1], "ckpt_path=last")
        return str(candidates[-1])
    check_checkpoint(Path(cfg.ckpt_path), f"ckpt_path={cfg.ckpt_path}")
    return str(cfg.ckpt_path)


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


def load_run_config(ckpt: Path, output_dir: str) -> DictConfig:
    """The config of the train.py run that wrote `ckpt` (<run>/checkpoints/<name>.ckpt), writing into
    `output_dir` instead of the run directory."""
    run_cfg_file = ckpt.parent.parent / RESOLVED_CONFIG
    check_checkpoint(ckpt, f"ckpt_path={ckpt}")
    if not run_cfg_file.is_file():
        raise ConfigError(f"{run_cfg_file} not found: ckpt_path must be <train run>/checkpoints/<name>.ckpt")
    run_cfg = OmegaConf.load(run_cfg_file)
    with open_dict(run_cfg):
        run_cfg.paths.output_dir = output_dir
    return run_cfg


def bootstrap_options(cfg: DictConfig):
    """The config's metrics.bootstrap (spacewalk/results/bootstrap.py), None where n_resamples is 0 (no intervals).
    A run directory written before the intervals existed has none: the defaults."""
    from spacewalk.results.bootstrap import BootstrapOptions

    values = OmegaConf.select(cfg, "metrics.bootstrap", default=None)
    options = BootstrapOptions.from_mapping(OmegaConf.to_container(values) if values is not None else None)
    return options if options.enabled else None


def log_intervals(trainer: pl.Trainer, intervals: dict, prefix: str = "test") -> None:
    """The intervals' bounds as `<prefix>/<metric>_low` and `_high` to every logger (CSV, W&B)."""
    values = {f"{prefix}/{name}_{side}": interval[side] for name, interval in intervals.items()
              for side in ("low", "high") if interval.get(side) is not None}
    if not values:
        return
    for lg in trainer.loggers:
        lg.log_metrics(values, step=trainer.global_step)
        lg.save()
