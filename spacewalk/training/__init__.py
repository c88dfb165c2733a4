"""The training layer: everything that knows Lightning or Hydra beyond the LightningModules (models/) and
DataModules (datamodules/). The rest of `spacewalk` imports neither (tests/test_architecture.py).

`train.py` and `evaluate.py` call `train(cfg)` and `evaluate(cfg)` here; which recipe runs comes from the
composed config: `task.recipe` (conf/task/, chosen by each data config) names a module of this package
with `train(cfg)`, `evaluate(cfg)` and `evaluate_checkpoint(cfg, run_cfg, ckpt)`. A new benchmark or task
adds a conf/task/ file and such a module, nothing here.

Modules: `common` (trainer, run directory, resolved config, resume), `step_recognition` (Spacewalk-18),
`hirest` (HiREST's joint model and baselines), `sweep_summary` (the Hydra multirun callback).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from spacewalk.durations import parse_duration

# `context: 5min` in a config, read as seconds where a number is needed: ${seconds:${context}}
OmegaConf.register_new_resolver("seconds", parse_duration, replace=True)


def _digest(text: object) -> str:
    import hashlib

    return hashlib.sha256(str(text).encode()).hexdigest()[:12]


# a short, stable name for a command's overrides: the multiple-choice run directory (conf/task/multiple_choice.yaml)
OmegaConf.register_new_resolver("digest", _digest, replace=True)


def text_bank_suffix(text_encoder: str | None) -> str:
    """What a feature bank's folder adds for its text encoder: nothing for MiniLM (the default, so existing
    banks keep their folders), "+<name>" for any other (text_encoder=mpnet)."""
    return "" if text_encoder in (None, "minilm") else f"+{text_encoder}"


OmegaConf.register_new_resolver("text_bank_suffix", text_bank_suffix, replace=True)


# The folder of the banks a text-only run reads: named after MiniLM, the text encoder they were first built with
# (any other adds its suffix), and kept so that the text banks built before encoder=text_only existed are reused.
TEXT_ONLY_BANK_FOLDER = "minilm"


def bank_folder(encoder: str | None, text_encoder: str | None, modalities: str) -> str:
    """A feature bank's folder under feature_banks/<data>/: the video encoder's name (its encoder= choice) plus the
    text encoder's suffix. A text-only run reads no video feature, so whatever `encoder=` says (encoder=text_only,
    or the video encoder `model=all_layer` picks and `modalities=text` does not use) it reads the one text bank,
    TEXT_ONLY_BANK_FOLDER: the same MiniLM features, built once."""
    return (TEXT_ONLY_BANK_FOLDER if modalities == "text" else str(encoder)) + text_bank_suffix(text_encoder)


OmegaConf.register_new_resolver("bank_folder", bank_folder, replace=True)


def recipe(cfg: DictConfig):
    """The module named by the config's task (conf/task/*.yaml)."""
    task = cfg.get("task")
    if task is None or not task.get("recipe"):
        raise ValueError("the config has no task.recipe (conf/task/): a run directory written before tasks "
                         "existed cannot be re-evaluated by this version")
    return importlib.import_module(task.recipe)


def train(cfg: DictConfig) -> dict[str, Any]:
    return recipe(cfg).train(cfg)


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Score what needs no training on `cfg.split`, or re-test a train.py checkpoint with its run's config."""
    if not cfg.get("ckpt_path"):
        return recipe(cfg).evaluate(cfg)
    from spacewalk.training.common import load_run_config

    ckpt = Path(cfg.ckpt_path)
    run_cfg = load_run_config(ckpt, cfg.paths.output_dir)
    return recipe(run_cfg).evaluate_checkpoint(cfg, run_cfg, ckpt)
