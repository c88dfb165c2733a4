"""Which task a command runs, with which data and model, checked before anything is built or read.

The wiring lives in one place per side:
- a model config says which tasks it serves (`_tasks_: [step_recognition]` in conf/model/<model>.yaml, inside
  `model:`), so adding a model edits that one file; the key is the config's, not the model's, and is taken out
  of the composed config before anything is instantiated (`take_served_tasks`);
- a data config says which tasks read it (`data_tasks:` in conf/data/<data>.yaml);
- a task config (conf/task/<task>.yaml) says its default data (`task.default_data`) and its default model per
  entry point (`task.default_model`).

A command pairing a task with a model or data that does not serve it is refused, naming those that do; a model
name with no config is refused naming the models of the command's task that its entry point runs. A command
that names a task (task=..., or a data config that chooses one) but no model or data gets the task's defaults
(`with_task_defaults`): Hydra lets a config override only the groups listed before it, and the model is listed
after the task so that its DataModule and trainer settings win, so no defaults list can say this; the defaults
are added to the command line before Hydra composes (with Hydra's public compose API and override parser), the
run's .hydra/overrides.yaml then holding what was run. Light on purpose (Hydra, OmegaConf and PyYAML only):
train.py and evaluate.py run this before Lightning and torch are imported.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from omegaconf import DictConfig, open_dict

from spacewalk.core.errors import ConfigError
from spacewalk.training.choices import group_choices, model_choice

# the groups whose sweep (`-m task=a,b`) leaves the task open until each job composes: no default is added then
_TASK_CHOOSERS = ("task", "data", "experiment")
# Hydra's own flags that choose another config or print help: the command is handed to Hydra as it is
_HYDRA_CONFIG_FLAGS = ("--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd", "--help", "-h",
                       "--hydra-help", "--version", "--info", "-i", "--shell-completion", "-sc")
SERVED_KEY = "_tasks_"
# the configs beside train.py and evaluate.py
CONF = Path(__file__).resolve().parents[2] / "conf"


def served_tasks(model_file: Path) -> list[str]:
    """The tasks a model config file says it serves (`_tasks_`, at its top or inside `model:`)."""
    node = yaml.safe_load(model_file.read_text()) or {}
    tasks = node.get(SERVED_KEY)
    if tasks is None and isinstance(node.get("model"), dict):  # a `# @package _global_` config
        tasks = node["model"].get(SERVED_KEY)
    return list(tasks or [])


def models_serving(task: str, conf: Path = CONF) -> list[str]:
    """The conf/model/ configs that serve `task`, in file-name order."""
    return [p.stem for p in sorted((conf / "model").glob("*.yaml")) if task in served_tasks(p)]


def take_served_tasks(cfg: DictConfig) -> list[str] | None:
    """`model._tasks_` of the composed config, removed from it (it describes the config, and would otherwise reach
    the model's constructor and the records' identity); None where the config has none (a run's resolved
    config)."""
    model = cfg.get("model")
    if model is None or SERVED_KEY not in model:
        return None
    with open_dict(model):
        return list(model.pop(SERVED_KEY) or [])


def check_model(cfg: DictConfig) -> None:
    """Refuse a model that does not serve the composed task (conf/model/<model>.yaml: _tasks_), or a data config
    the task does not read (conf/data/<data>.yaml: data_tasks), before anything is built or read, naming the ones
    that fit. Takes `model._tasks_` out of `cfg`."""
    task = cfg.task
    entry, defaults = cfg.get("task_name"), task.get("default_model") or {}
    choice, served = model_choice(cfg), take_served_tasks(cfg)
    if entry in ("train", "evaluate") and defaults and entry not in defaults:  # multiple choice under train.py
        raise ConfigError(f"model={choice} has nothing to train: task={task.name} scores its models with "
                          f"`python evaluate.py` (conf/task/{task.name}.yaml: task.default_model has no {entry})")
    if served is None:
        raise ConfigError(f"model={choice} does not say which tasks it serves: add `{SERVED_KEY}: [{task.name}]` "
                          f"to conf/model/{choice}.yaml (inside `model:` for a `# @package _global_` config)")
    if task.name not in served:
        raise ConfigError(f"model={choice} does not fit task={task.name}; the models of {task.name} (conf/model/ "
                          f"configs whose {SERVED_KEY} names it): {', '.join(models_serving(task.name))}")
    data, readers = group_choices(cfg).get("data"), list(cfg.get("data_tasks") or [])
    if readers and task.name not in readers:
        raise ConfigError(f"data={data} is not read by task={task.name}; the tasks that read it "
                          f"(conf/data/{data}.yaml data_tasks): {', '.join(readers)}")


def _split_command(argv: list[str]):
    """The command's overrides (Hydra's public override parser) and whether a flag hands the command to Hydra
    as it is; None where an override does not parse (Hydra reports it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    # a token that is not a flag and not a flag's value: Hydra's flags that take a value (--cfg job, -p model,
    # --info searchpath, --experimental-rerun FILE) take a word without `=`, and every override has one
    # (`key=value`, `+key=value`, `~key`)
    tokens = [a for a in argv[1:] if not a.startswith("-") and ("=" in a or a.startswith("~"))]
    to_hydra = any(a.split("=", 1)[0] in _HYDRA_CONFIG_FLAGS for a in argv[1:] if a.startswith("-"))
    try:
        return OverridesParser.create().parse_overrides(tokens), tokens, to_hydra
    except Exception:  # noqa: BLE001 -- Hydra parses it again and says what is wrong
        return None, tokens, True


def _compose(config_dir: str | Path, config_name: str, overrides: list[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides, return_hydra_config=True)


def entry_models(config_dir: str | Path, config_name: str, overrides: list[str]) -> tuple[str, list[str]]:
    """The task the command composes to and the models of that task its entry point runs (each composed and put
    to the entry point's own refusal, spacewalk.training.run.entry_refusal: this imports Lightning)."""
    from spacewalk.training.run import entry_refusal

    cfg = _compose(config_dir, config_name, overrides)
    task = cfg.task.name
    if config_name not in (cfg.task.get("default_model") or {config_name: None}):
        return task, []
    runs = []
    for model in models_serving(task, Path(config_dir)):
        candidate = _compose(config_dir, config_name, [*overrides, f"model={model}"])
        take_served_tasks(candidate)
        if entry_refusal(candidate, config_name) is None:
            runs.append(model)
    return task, runs


def with_task_defaults(argv: list[str], config_dir: str | Path, config_name: str) -> list[str]:
    """`argv` (train.py's or evaluate.py's command line) with the task's defaults added where the command names a
    task but not its data or model: `python train.py task=intra_video_retrieval` runs that task's default model
    (task.default_model.train), `python evaluate.py data=hirest` HiREST's (task.default_model.evaluate),
    `python train.py task=hirest` reads HiREST's data (task.default_data). A model or data config on the
    command line, or one an experiment config sets that fits the task, is never replaced. A model name with no
    config is refused (ConfigError) naming the models of the command's task that this entry point runs. A
    command Hydra cannot parse or compose is returned as it is, for Hydra to report."""
    overrides, tokens, to_hydra = _split_command(argv)
    if to_hydra:
        return argv
    given = {o.key_or_group for o in overrides}
    plain = [o.input_line for o in overrides if not o.is_sweep_override() and not o.key_or_group.startswith("hydra")]
    models = [o.value() for o in overrides if o.key_or_group == "model" and not o.is_sweep_override()]
    if models and isinstance(models[0], str) and not (Path(config_dir) / "model" / f"{models[0]}.yaml").is_file():
        without = [o for o in plain if not o.startswith("model=")]
        try:
            task, runs = entry_models(config_dir, config_name, without)
        except ConfigError:
            raise
        except Exception:  # noqa: BLE001 -- the rest does not compose: Hydra says what is wrong
            return argv
        which = f"the models of task={task} that {config_name}.py runs: {', '.join(runs)}" if runs else \
            f"{config_name}.py runs no model of task={task}"
        raise ConfigError(f"model={models[0]}: there is no conf/model/{models[0]}.yaml; {which}")
    if {"model", "data"} <= given or (given & {"ckpt_path"}):  # a re-test reads its run's own config
        return argv
    if any(o.is_sweep_override() and o.key_or_group in _TASK_CHOOSERS for o in overrides):
        return argv  # each job's task differs: a job without a fitting model is refused, naming the task's models
    try:
        cfg = _compose(config_dir, config_name, plain)
    except Exception:  # noqa: BLE001 -- Hydra composes it again and says what is wrong
        return argv
    task, added = cfg.task, []
    data = task.get("default_data")
    if "data" not in given and data and task.name not in list(cfg.get("data_tasks") or [task.name]):
        added.append(f"data={data}")
    default = (task.get("default_model") or {}).get(config_name)
    served = list((cfg.get("model") or {}).get(SERVED_KEY) or [])
    if "model" not in given and default and task.name not in served:
        added.append(f"model={default}")
    if added:
        print(f"task={task.name}: {' '.join(added)} (the task's defaults, conf/task/{task.name}.yaml)",
              file=sys.stderr)
    # beside the command's own overrides (Hydra reads them as one run of positional arguments: not after --cfg)
    at = argv.index(tokens[0], 1) if added and tokens else len(argv)
    return [*argv[:at], *added, *argv[at:]]
