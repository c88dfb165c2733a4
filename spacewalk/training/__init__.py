"""The training layer: everything that knows Lightning or Hydra beyond the LightningModules (models/) and
DataModules (datamodules/). The rest of `spacewalk` imports neither (tests/test_architecture.py).

`train.py` and `evaluate.py` call `train(cfg)` and `evaluate(cfg)` here: the one run sequence of `run` (check
the model against the task, fit, choose on val, test, write). What differs per task comes from the composed
config: `task.recipe` (conf/task/, chosen by each data config or `task=`) names a module of this package whose
`RECIPE` (a `run.Recipe`) holds the task's hooks; each model config says which tasks it serves (`_tasks_`,
checked by `tasks`). A new task adds a conf/task/ file and such a module, nothing here.

Modules: `run` (the sequence, the Recipe hooks, what each entry point refuses), `choices` (the command's group
choices as Hydra recorded them), `tasks` (the (task, model, data) check and the task's defaults, before Lightning is
imported), `trainer` (the Lightning Trainer, its callbacks and loggers), `run_directory` (the resolved config,
resume, a finished run's config), `spacewalk18_modules` (a Spacewalk-18 run's DataModule and LightningModule), the
recipes `step_recognition` (with its plan `decoding`), `intra_video_retrieval`, `hirest`, `multiple_choice`, and
`sweep_summary` (the Hydra multirun callback). This module registers the config resolvers (`${seconds:5min}`, the
bank folders, the run digest).
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from spacewalk.core.durations import parse_duration
from spacewalk.core.errors import ConfigError
from spacewalk.core.modalities import Modalities
from spacewalk.training.slurm import slurm_count

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
    text_only = not Modalities.parse(modalities).video
    return (TEXT_ONLY_BANK_FOLDER if text_only else str(encoder)) + text_bank_suffix(text_encoder)


OmegaConf.register_new_resolver("bank_folder", bank_folder, replace=True)


# trainer=slurm's devices and nodes, read from the job's variables and checked (docs/cluster.md)
OmegaConf.register_new_resolver("slurm_count", slurm_count, replace=True)


def check_values(cfg: DictConfig) -> None:
    """Refuse the values the configs' resolvers read (`context`, `modalities`, trainer=slurm's SLURM variables)
    before anything is built or read: a context window that cannot be read or is not positive (context=7x,
    context=0s: an empty window has no cell, and the windows' loops would never end on it), modalities that are
    not video, text or video+text, SLURM_NTASKS_PER_NODE=abc; and the seeds (seed=-1). Read later, inside a
    resolver or numpy, they would fail only after Lightning is imported and the run directory made."""
    if cfg.get("context") is not None:
        value = cfg.context
        try:
            seconds = parse_duration(value)
        except ValueError as error:
            raise ConfigError(f"context={value}: {error}") from None
        if not seconds > 0:
            raise ConfigError(f"context={value}: the context window must be longer than 0 s; write e.g. 30s, 5min, "
                              "1h")
    if cfg.get("modalities") is not None:
        Modalities.parse(cfg.modalities)  # a ConfigError naming the value and the allowed ones
    for key in ("devices", "num_nodes"):  # trainer=slurm reads them from the job (spacewalk/training/slurm.py)
        OmegaConf.select(cfg, f"trainer.{key}")
    for key in ("seed", "data.seed"):  # numpy's (and Lightning's) seeds: a negative one fails deep inside
        value = OmegaConf.select(cfg, key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32):
            raise ConfigError(f"{key}={value!r}: a seed is a whole number from 0 to {2**32 - 1}")


def train(cfg: DictConfig) -> dict[str, Any]:
    from spacewalk.training.tasks import check_model

    check_values(cfg)
    check_model(cfg)  # before Lightning is imported: a wrong pair fails in a second
    from spacewalk.training.run import train as run_train

    return run_train(cfg)


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Score what needs no training on `cfg.split`, or re-test a train.py checkpoint with its run's config."""
    from spacewalk.training.tasks import check_model

    if not cfg.get("ckpt_path"):
        check_values(cfg)  # a re-test reads its run's own values, checked when it trained
        check_model(cfg)  # before Lightning is imported: a wrong pair fails in a second
    from spacewalk.training.run import evaluate as run_evaluate

    return run_evaluate(cfg)
