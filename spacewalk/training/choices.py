"""The config-group choices of a command (`model=...`, `data=...`) as Hydra recorded them: from the composed
config's `hydra` node (the compose API with return_hydra_config) or, inside a Hydra app, from Hydra's runtime. Its
own module because both the (task, model) check (tasks) and the run sequence's refusals (run) name the model."""

from __future__ import annotations

from omegaconf import DictConfig


def group_choices(cfg: DictConfig):
    from hydra.core.hydra_config import HydraConfig

    if "hydra" in cfg:
        return cfg.hydra.runtime.choices
    return HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}


def model_choice(cfg: DictConfig) -> str | None:
    """The conf/model/ config the command chose (`model=...`)."""
    return group_choices(cfg).get("model")
