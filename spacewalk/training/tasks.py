"""Which models a task runs: conf/task/<task>.yaml lists them (`task.models`), and a command that pairs the task
with another model is refused before anything is built or read, naming the ones that fit. Light on purpose
(Hydra and OmegaConf only): train.py and evaluate.py check before Lightning and torch are imported."""

from __future__ import annotations

from omegaconf import DictConfig

from spacewalk.errors import ConfigError


def model_choice(cfg: DictConfig) -> str | None:
    """The conf/model/ config the command chose (`model=...`), from the composed config's hydra node or, inside
    a Hydra app, from Hydra's runtime."""
    from hydra.core.hydra_config import HydraConfig

    if "hydra" in cfg:
        return cfg.hydra.runtime.choices.get("model")
    return HydraConfig.get().runtime.choices.get("model") if HydraConfig.initialized() else None


def check_model(cfg: DictConfig) -> None:
    """Refuse a model the composed task does not run (conf/task/<task>.yaml: task.models), before anything is
    built or read, naming the models that fit."""
    task = cfg.task
    choice, accepted = model_choice(cfg), list(task.get("models") or [])
    if choice is not None and choice not in accepted:
        raise ConfigError(f"model={choice} does not fit task={task.name}; the models of {task.name} "
                          f"(conf/task/{task.name}.yaml task.models): {', '.join(accepted)}")
