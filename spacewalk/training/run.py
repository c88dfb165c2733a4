"""The one run sequence behind train.py and evaluate.py, for every task.

    build -> fit (when the model has trainable parameters) -> choose on val (the checkpoint of the best
    val/loss) -> test -> write

(the model and data are checked against the task before, by spacewalk.training.train / evaluate, before
Lightning is imported).

What differs per task is a `Recipe` (a subclass in the module that conf/task/<task>.yaml names as `task.recipe`,
exposed as that module's `RECIPE`): how its DataModule and model are built, what a model that is not a
LightningModule does (baselines, multiple-choice backends), and the files written after the test. Each output
file has one writer in a run: for a LightningModule, the module writes the per-sample predictions of its test
epoch and the recipe's `write` the run's metrics.json (and the task's other files); for a model that is not one,
the recipe's `non_learned` hands the run to the benchmark's own evaluation, which writes both.
"""

from __future__ import annotations

import importlib
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
import pytorch_lightning as pl
from omegaconf import DictConfig, open_dict

from spacewalk.core.errors import ConfigError
from spacewalk.training.choices import model_choice
from spacewalk.training.run_directory import load_run_config, resume_path, start_run
from spacewalk.training.trainer import best_checkpoint, build_trainer, close_loggers, eval_trainer

log = logging.getLogger(__name__)
# trainer keys that say which machine runs (not what is computed): a re-test takes them from its own command
RETEST_HARDWARE = ("accelerator", "devices", "num_nodes", "strategy")


def recipe(cfg: DictConfig) -> Recipe:
    """The task's recipe: the RECIPE of the module named by task.recipe."""
    task = cfg.get("task")
    if task is None or not task.get("recipe"):
        raise ConfigError("the config has no task.recipe (conf/task/): a run directory written before tasks "
                          "existed cannot be re-evaluated by this version")
    return importlib.import_module(task.recipe).RECIPE


def is_lightning(model_cfg: DictConfig) -> bool:
    """Whether the model config builds a LightningModule (fit, validate, test) rather than a non-learned model (a
    class, or a function that builds one: mc_plan's `plan_reading_backend`)."""
    target = hydra.utils.get_object(model_cfg._target_)
    return isinstance(target, type) and issubclass(target, pl.LightningModule)


# ---- what a task adds ------------------------------------------------------------------------------------------

@dataclass
class Run:
    """One run of the sequence, as the recipe's hooks see it."""

    cfg: DictConfig
    output_dir: Path
    trainer: pl.Trainer
    datamodule: Any
    model: pl.LightningModule
    # the weights tested: the kept checkpoint (None: the last weights), or the checkpoint being re-tested
    ckpt: str | None = None
    retest: bool = False  # evaluate.py ckpt_path=...: a finished run's checkpoint, nothing fitted
    results: dict[str, Any] = field(default_factory=dict)


class Recipe:
    """A task's part of the run sequence. The defaults are the common case; a task overrides what differs."""

    # validate the chosen weights once more before the test: retrieval reports their val accuracy beside the test.
    # Weights that were not fitted (nothing to train) are always validated (step recognition fits tau there);
    # step recognition's tau otherwise travels in the checkpoint (re-fitting it on another machine could move it)
    validate_kept = True
    # whether test=false (stop after choosing on val, metrics.json holding the val numbers) is supported
    val_only = True
    # whether train.py runs a model that is not a LightningModule (it predicts val and test) or refuses it
    trains_baselines = False

    def check(self, cfg: DictConfig) -> None:
        """Refuse settings the task cannot run (e.g. the split), before anything is built."""

    def retest_config(self, cfg: DictConfig, run_cfg: DictConfig) -> DictConfig:
        """The finished run's config for evaluate.py ckpt_path=..., with what the command may change (plots, the
        intervals, the machine)."""
        with open_dict(run_cfg):
            run_cfg.plots = cfg.get("plots", True)
            if cfg.get("metrics") is not None:  # the command's intervals (metrics.bootstrap)
                run_cfg.metrics = cfg.metrics
            if cfg.get("trainer") is not None and run_cfg.get("trainer") is not None:
                # the machine is the command's: a run trained on 2 nodes of 4 GPUs re-tests on this one's devices
                # (what the numbers depend on, e.g. the precision, stays the run's)
                for key in RETEST_HARDWARE:
                    if key in cfg.trainer:
                        run_cfg.trainer[key] = cfg.trainer[key]
                    elif key in run_cfg.trainer:
                        del run_cfg.trainer[key]
        return run_cfg

    def build(self, cfg: DictConfig, output_dir: Path) -> tuple[Any, pl.LightningModule]:
        """The DataModule and the LightningModule of a run."""
        raise NotImplementedError

    def non_learned(self, cfg: DictConfig, output_dir: Path, training: bool) -> dict[str, Any]:
        """A model that is not a LightningModule (a baseline, a multiple-choice backend): run and score it (seeding
        and writing the resolved config where it needs them: common.start_run). By default evaluate.py only:
        train.py refuses it."""
        raise NotImplementedError

    def test(self, run: Run) -> None:
        """The test of the chosen weights; results["test"]: the module's test metrics."""
        run.trainer.test(run.model, datamodule=run.datamodule, ckpt_path=run.ckpt)
        run.results["test"] = run.model.test_results

    def after_test(self, run: Run) -> dict[str, Any]:
        """On every process, after the test: what to add to the results (e.g. plan decoding)."""
        return {}

    def write_val(self, run: Run) -> None:
        """test=false, on process 0: metrics.json with the kept weights' val numbers only."""
        raise NotImplementedError

    def write(self, run: Run) -> None:
        """On process 0 after a scored test, before the loggers close: metrics.json and the task's other files."""

    def summarize(self, run: Run) -> None:
        """On process 0 after a scored test, once the loggers have closed: the run's summary in the log."""


# ---- the sequence --------------------------------------------------------------------------------------------

def _nothing_to_train(cfg: DictConfig) -> ConfigError:
    return ConfigError(f"model={model_choice(cfg)} has nothing to train: score it with `python evaluate.py "
                       f"model={model_choice(cfg)} ...` (task {cfg.task.name})")


def _trained(cfg: DictConfig) -> ConfigError:
    return ConfigError(f"model={model_choice(cfg)} is trained: run train.py, or re-test one of its checkpoints "
                       "with `python evaluate.py ckpt_path=<run>/checkpoints/X.ckpt`")


def _check_test_split(cfg: DictConfig, why: str) -> None:
    if cfg.get("split", "test") != "test":
        raise ConfigError(f"{why} (got split={cfg.split})")


def run_sequence(cfg: DictConfig, recipe: Recipe, output_dir: Path, training: bool,
                 ckpt: str | None = None, resume: str | None = None) -> dict[str, Any]:
    """fit (when trainable and training) -> choose on val -> test -> write. `ckpt`: re-test that checkpoint of a
    finished run (cfg is that run's config); `resume`: the checkpoint fit resumes from (common.resume_path)."""
    retest = ckpt is not None
    if not is_lightning(cfg.model):
        if retest:
            raise ConfigError(f"model {cfg.model._target_} is not a LightningModule: it has no checkpoint")
        return recipe.non_learned(cfg, output_dir, training)
    if not retest:
        start_run(cfg)  # the seed and the resolved config evaluate.py ckpt_path=... rebuilds the run from
    # test=false: a selection run of train.py (a re-tested checkpoint is tested whatever its run said)
    val_only = training and not cfg.get("test", True)
    if val_only and not recipe.val_only:
        raise ConfigError(f"task {cfg.task.name} has no test=false: its runs write val and test together")
    datamodule, model = recipe.build(cfg, output_dir)
    trainable = any(p.requires_grad for p in model.parameters())
    if trainable and not training and not retest:
        raise _trained(cfg)
    trainer = eval_trainer(cfg, output_dir) if retest else build_trainer(cfg)
    run = Run(cfg, output_dir, trainer, datamodule, model, ckpt=ckpt, retest=retest)
    if not retest:
        run.results["best_val_loss"] = None
    if trainable and not retest:
        trainer.fit(model, datamodule=datamodule, ckpt_path=resume)
        run.ckpt, run.results["best_val_loss"] = best_checkpoint(trainer)
        log.info("best checkpoint (val/loss %s): %s", run.results["best_val_loss"],
                 run.ckpt or "none: testing the last weights")
    if val_only or recipe.validate_kept or (not trainable and not retest):
        val_loss = float(trainer.validate(model, datamodule=datamodule, ckpt_path=run.ckpt,
                                          verbose=False)[0].get("val/loss", math.nan))
        if retest:
            run.results["val_loss"] = val_loss
        elif run.results["best_val_loss"] is None:  # nothing fitted (or no checkpoint kept): this validation's
            run.results["best_val_loss"] = val_loss
    if val_only:
        close_loggers(trainer)
        if trainer.is_global_zero:
            recipe.write_val(run)
        return {"val": model.split_results.get("val"), "best_val_loss": run.results["best_val_loss"]}
    recipe.test(run)
    run.results |= recipe.after_test(run)
    # only a limited run (limit_*_batches, fast_dev_run) leaves the test unscored: no video seen whole
    scored = bool(run.results.get("test"))
    if trainer.is_global_zero and scored:
        recipe.write(run)
    close_loggers(trainer)
    if trainer.is_global_zero:
        if scored:
            recipe.summarize(run)
        else:
            log.warning("the test was not scored (a limited run saw no test video whole, or no tau): no "
                        "metrics.json; best val/loss %s; outputs: %s", run.results.get("best_val_loss"), output_dir)
    return run.results


# ---- the entry points (spacewalk.training.train / evaluate) ----------------------------------------------------

def record_provenance(cfg: DictConfig, entry: str) -> None:
    """provenance.json in the run directory on process 0 (spacewalk/results/provenance.py): the job's command, the
    commit and when, so a table made from run directories (python -m spacewalk.report) names what produced each
    number."""
    from hydra.core.hydra_config import HydraConfig
    from pytorch_lightning.utilities.rank_zero import rank_zero_only

    from spacewalk.results.provenance import write_provenance

    if getattr(rank_zero_only, "rank", 0) != 0:  # the DDP processes Lightning starts (LOCAL_RANK), torchrun's (RANK)
        return
    overrides = None
    if HydraConfig.initialized():  # a test may call the sequence on a composed config, outside @hydra.main
        overrides = list(HydraConfig.get().overrides.task)
    write_provenance(cfg.paths.output_dir, entry, overrides)


def entry_refusal(cfg: DictConfig, entry: str, task_recipe: Recipe | None = None) -> ConfigError | None:
    """Why the entry point (`train` or `evaluate`) does not run the config's model, or None: train.py fits
    LightningModules (and the non-learned models of a recipe that `trains_baselines`), evaluate.py runs what has
    nothing to train (a re-test of a checkpoint aside)."""
    task_recipe = task_recipe or recipe(cfg)
    lightning = is_lightning(cfg.model)
    if entry == "train" and not lightning and not task_recipe.trains_baselines:
        return _nothing_to_train(cfg)
    if entry == "evaluate" and lightning and cfg.model.get("optimizer") is not None:
        return _trained(cfg)  # a model configured with an optimizer trains: refused before any data is read
    return None


def train(cfg: DictConfig) -> dict[str, Any]:
    """train.py, once spacewalk.training.train has checked the values and the (task, model) pair."""
    task_recipe = recipe(cfg)
    task_recipe.check(cfg)
    resume = resume_path(cfg)  # a resume's checkpoint is checked whole before anything is built or read
    if (refused := entry_refusal(cfg, "train", task_recipe)) is not None:
        raise refused
    record_provenance(cfg, "train")
    return run_sequence(cfg, task_recipe, Path(cfg.paths.output_dir), training=True, resume=resume)


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """evaluate.py, once spacewalk.training.evaluate has checked the values and the (task, model) pair: score what
    needs no training on `cfg.split`, or re-test a train.py checkpoint with its run's config."""
    if not cfg.get("ckpt_path"):
        task_recipe = recipe(cfg)
        task_recipe.check(cfg)
        if (refused := entry_refusal(cfg, "evaluate", task_recipe)) is not None:
            raise refused
        if is_lightning(cfg.model):
            _check_test_split(cfg, "a LightningModule's run chooses on val and scores the test split")
        record_provenance(cfg, "evaluate")
        return run_sequence(cfg, task_recipe, Path(cfg.paths.output_dir), training=False)
    _check_test_split(cfg, "evaluate.py ckpt_path=... scores the test split (val is what the checkpoint was "
                           "chosen on)")
    ckpt = Path(cfg.ckpt_path)
    run_cfg = load_run_config(ckpt, cfg.paths.output_dir)
    # the run's model was checked when it trained (its resolved config no longer says which conf/model/ it was)
    task_recipe = recipe(run_cfg)
    run_cfg = task_recipe.retest_config(cfg, run_cfg)
    record_provenance(cfg, "evaluate")
    return run_sequence(run_cfg, task_recipe, Path(cfg.paths.output_dir), training=False, ckpt=str(ckpt))
