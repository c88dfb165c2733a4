"""A run directory as the training layer writes and reads it: the resolved config (config.resolved.yaml, what
`evaluate.py ckpt_path=...` rebuilds a run from and the results tools re-score it with), the checkpoint a run
resumes from (checked whole before Lightning reads it), a finished run's config re-loaded, and the bootstrap
settings its intervals are drawn with."""

from __future__ import annotations

from pathlib import Path

import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf, open_dict

from spacewalk.core.errors import ConfigError
from spacewalk.core.io import write_text
from spacewalk.results.layout import RUN_CONFIG

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
