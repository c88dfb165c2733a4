"""What a task runs: conf/task/<task>.yaml lists its models (`task.models`), its default data config
(`task.default_data`) and its default model per entry point (`task.default_model`); each data config lists the
tasks that read it (`data_tasks`: so a fifth benchmark's data config needs no edit of a task config). A command
that pairs the task with another model or data is refused before anything is built or read, naming the ones that
fit; a command that names the task (task=..., or a data config that chooses it) but no model gets the task's
default. Light on
purpose (Hydra and OmegaConf only): train.py and evaluate.py run this before Lightning and torch are imported."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig

from spacewalk.core.errors import ConfigError

# the groups whose sweep (`-m task=a,b`) leaves the task open until each job composes: no default is added then
_TASK_CHOOSERS = ("task", "data", "experiment")


def _choices(cfg: DictConfig):
    """The config-group choices of the command (`model=...`, `data=...`), from the composed config's hydra node
    or, inside a Hydra app, from Hydra's runtime."""
    from hydra.core.hydra_config import HydraConfig

    if "hydra" in cfg:
        return cfg.hydra.runtime.choices
    return HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}


def model_choice(cfg: DictConfig) -> str | None:
    """The conf/model/ config the command chose (`model=...`)."""
    return _choices(cfg).get("model")


def check_model(cfg: DictConfig) -> None:
    """Refuse a model the composed task does not run (conf/task/<task>.yaml: task.models), or a data config the
    task does not read (conf/data/<data>.yaml: data_tasks), before anything is built or read, naming the ones that
    fit."""
    task = cfg.task
    entry, defaults = cfg.get("task_name"), task.get("default_model") or {}
    if entry in ("train", "evaluate") and defaults and entry not in defaults:  # multiple choice under train.py
        raise ConfigError(f"model={model_choice(cfg)} has nothing to train: task={task.name} scores its models with "
                          f"`python evaluate.py` (conf/task/{task.name}.yaml: task.default_model has no {entry})")
    choice, accepted = model_choice(cfg), list(task.get("models") or [])
    if choice is not None and choice not in accepted:
        raise ConfigError(f"model={choice} does not fit task={task.name}; the models of {task.name} "
                          f"(conf/task/{task.name}.yaml task.models): {', '.join(accepted)}")
    data, readers = _choices(cfg).get("data"), list(cfg.get("data_tasks") or [])
    if readers and task.name not in readers:
        raise ConfigError(f"data={data} is not read by task={task.name}; the tasks that read it "
                          f"(conf/data/{data}.yaml data_tasks): {', '.join(readers)}")


def with_task_defaults(argv: list[str], config_dir: str | Path, config_name: str) -> list[str]:
    """`argv` (train.py's or evaluate.py's command line) with the task's defaults added where the command names a
    task but not its data or model: `python train.py task=intra_video_retrieval` runs that task's default model
    (task.default_model.train), `python evaluate.py data=hirest` HiREST's (task.default_model.evaluate),
    `python train.py task=hirest` reads HiREST's data (task.default_data). A model or data config on the
    command line, or one an experiment config sets that fits the task, is never replaced.

    The entry points' own defaults lists cannot say this (Hydra lets a config override only the groups before
    it, and the model group is merged after the task so that a model's DataModule settings win), so it is
    decided here, on the command line, before Hydra composes: the run's .hydra/overrides.yaml then holds what
    was run. A command Hydra cannot parse or compose is returned as it is, for Hydra to report."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        args, _ = get_args_parser().parse_known_args(argv[1:])
        overrides = OverridesParser.create().parse_overrides(args.overrides)
    except Exception:  # noqa: BLE001 -- Hydra parses it again and says what is wrong
        return argv
    if args.config_name or args.config_path or args.config_dir or args.help or args.hydra_help:
        return argv
    given = {o.key_or_group for o in overrides}
    if {"model", "data"} <= given or (given & {"ckpt_path"}):  # a re-test reads its run's own config
        return argv
    if any(o.is_sweep_override() and o.key_or_group in _TASK_CHOOSERS for o in overrides):
        return argv  # each job's task differs: a job without a fitting model is refused, naming the task's models
    plain = [o.input_line for o in overrides if not o.is_sweep_override() and not o.key_or_group.startswith("hydra")]
    try:
        with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=plain, return_hydra_config=True)
    except Exception:  # noqa: BLE001 -- Hydra composes it again and says what is wrong
        return argv
    task, choices, added = cfg.task, cfg.hydra.runtime.choices, []
    data = task.get("default_data")
    if "data" not in given and data and task.name not in list(cfg.get("data_tasks") or [task.name]):
        added.append(f"data={data}")
    default = (task.get("default_model") or {}).get(config_name)
    if "model" not in given and default and choices.get("model") not in list(task.get("models") or []):
        added.append(f"model={default}")
    if added:
        print(f"task={task.name}: {' '.join(added)} (the task's defaults, conf/task/{task.name}.yaml)",
              file=sys.stderr)
    # beside the command's own overrides (argparse takes them as one run of positional arguments: not after --cfg)
    at = argv.index(args.overrides[0], 1) if added else len(argv)
    return [*argv[:at], *added, *argv[at:]]
