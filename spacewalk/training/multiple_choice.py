"""Multiple-choice evaluation behind evaluate.py (`task: multiple_choice`, conf/task/multiple_choice.yaml):
the data config builds a benchmark's task (spacewalk/multiple_choice/task.py: items, official prompt,
parsing, metrics, official files), the model config a backend (spacewalk/multiple_choice/backends/), and
spacewalk/multiple_choice/runner.py answers every item into the run directory: records.jsonl as it goes,
then metrics.json and the task's official files.

Re-running the same command resumes: the run directory is a function of the command (conf/task/
multiple_choice.yaml: outputs/evaluate/runs/multiple_choice/<data>/<model>/<digest of the overrides>),
or the one given with hydra.run.dir=.... Several processes (torchrun, srun) split the items.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from spacewalk.io import write_text
from spacewalk.multiple_choice import runner
from spacewalk.training.common import RESOLVED_CONFIG

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, Any]:
    raise ValueError("multiple-choice tasks have nothing to train here: the models answer zero-shot. Run "
                     "`python evaluate.py data=<spacewalk18_qa|spacewalk18_step_questions> model=mc_<backend>` "
                     "(docs/multiple_choice.md)")


def build_backend(model_cfg: DictConfig):
    """The backend of the model config. `model=random` (evaluate.py's default, the step-recognition random
    baseline's config) is the random backend here, with the same seed: one name for chance in every task."""
    if model_cfg.get("_target_") == "models.baselines.RandomBaseline":
        from spacewalk.multiple_choice.backends.baselines import RandomBackend

        return RandomBackend(seed=model_cfg.get("seed", 0))
    backend = hydra.utils.instantiate(model_cfg, _convert_="all")
    if not hasattr(backend, "answer"):
        raise ValueError(f"model {model_cfg.get('_target_')} is not a multiple-choice backend: choose a "
                         "model=mc_* config (conf/model/) or model=random")
    return backend


def evaluate(cfg: DictConfig) -> dict[str, Any] | None:
    settings = cfg.get("multiple_choice") or {}
    output_dir = Path(cfg.paths.output_dir)
    rank, world_size = runner.rank_and_world()
    if rank == 0:
        write_text(output_dir / RESOLVED_CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
    task = hydra.utils.instantiate(cfg.data, _convert_="all")
    backend = build_backend(cfg.model)
    # what the records depend on: a re-run in this directory with anything else here is refused
    identity = {"data": OmegaConf.to_container(cfg.data, resolve=True),
                "model": OmegaConf.to_container(cfg.model, resolve=True)}
    log.info("run directory: %s (re-run the same command to resume)", output_dir)
    metrics = runner.run(task, backend, output_dir, chunk_size=int(settings.get("chunk_size", 8)), identity=identity,
                         rank=rank, world_size=world_size, wait_seconds=float(settings.get("wait_seconds", 86400)),
                         progress=bool(settings.get("progress", True)), prompts=str(settings.get("prompts", "parts")))
    if metrics is not None:
        summary = {k: v for k, v in metrics.items() if not isinstance(v, dict)}
        log.info("%s / %s: %s", task.name, backend.name, json.dumps(summary))
        log.info("wrote %s, %s and the official files to %s", runner.RECORDS, runner.METRICS, output_dir)
    return metrics


def evaluate_checkpoint(cfg: DictConfig, run_cfg: DictConfig, ckpt: Path) -> dict[str, Any]:
    raise ValueError("a multiple-choice run has no checkpoint; re-run its command (it resumes) instead")
