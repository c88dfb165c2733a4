"""HiREST's part of the run sequence (`task: hirest`, chosen by data=hirest and data=hirest_release;
spacewalk/training/run.py).

train (model=hirest_joint): features (extracted once per encoder, or the authors' released files), the
round-robin DataModule, fit with the checkpoint of the lowest val/loss (moment retrieval + captioning) kept,
then, with that checkpoint, predictions in the official formats for
- val (`<run>/val/`): all three tasks, scored against the val GT, as the paper and the official scoring
  report (docs/hirest.md, Reference numbers gives the released model's val numbers);
- test (`<run>/test/`): segmentation and captioning, scored against the test step GT; moment retrieval is
  predicted but not scored (the public test split hides the moments).
`metrics.json` holds {split: {task: metrics}} and the selection criterion.

evaluate (model=hirest_heuristics): the paper's task-specific baselines on `split`; evaluate.py ckpt_path=...
re-runs a joint-model checkpoint's predictions and scores.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from pathlib import Path
from typing import Any

import hydra
import pytorch_lightning as pl
from omegaconf import DictConfig, open_dict

from spacewalk.benchmarks.hirest.captioning_metrics import CaptionScorer
from spacewalk.benchmarks.hirest.dataset import HiREST
from spacewalk.benchmarks.hirest.evaluation import evaluate_hirest_baselines, overall_summary, score
from spacewalk.benchmarks.hirest.joint_model_io import PREDICTION_FILES
from spacewalk.results.layout import write_metrics
from spacewalk.training.run import Recipe, Run
from spacewalk.training.run_directory import bootstrap_options, write_resolved_config

log = logging.getLogger(__name__)

# split -> the tasks its public GT can score
SCORED = {"val": ("moment_retrieval", "moment_segmentation", "step_captioning"),
          "test": ("moment_segmentation", "step_captioning")}


def build_features(cfg: DictConfig, dataset: HiREST):
    """`cfg.features` with the run's encoders (the video side only when the source is extraction)."""
    extract = cfg.features.source == "extract"
    video = hydra.utils.instantiate(cfg.encoder.video) if cfg.encoder.get("video") else None
    text = hydra.utils.instantiate(cfg.encoder.text) if cfg.encoder.get("text") else None
    if not extract and cfg.features.query_features:
        video = text = None  # nothing to embed
    return hydra.utils.instantiate(cfg.features, dataset=dataset, video_encoder=video, text_encoder=text,
                                   _convert_="all")


def build_model(cfg: DictConfig, features, output_dir: Path):
    model_cfg = cfg.model.copy()
    with open_dict(model_cfg):
        model_cfg.video_dim, model_cfg.query_dim, model_cfg.asr_dim = (features.video_dim, features.query_dim,
                                                                        features.asr_dim)
    model = hydra.utils.instantiate(model_cfg)
    model.output_dir = str(output_dir)
    return model


def _strategy(cfg: DictConfig) -> None:
    # each batch trains one task's head only: DDP must tolerate parameters without gradients
    if cfg.trainer.get("strategy") == "ddp":
        with open_dict(cfg.trainer):
            cfg.trainer.strategy = "ddp_find_unused_parameters_true"


def captions_unscored(inference: str) -> str | None:
    """Why the captions cannot be scored officially, or None."""
    if inference == "end_to_end":
        # predicted steps are not the GT steps: the official caption scores align captions by step index
        return ("end-to-end captions do not align with the GT steps one to one; the official captioning scores use "
                "model.inference=oracle")
    if shutil.which("java") is None:
        return "java is not on PATH (METEOR and the PTB tokenizer need it)"
    return None


def score_split(dataset: HiREST, split: str, pred_dir: Path, inference: str, bootstrap=None,
                caption_scorer=None) -> dict[str, Any]:
    """Official scores of the prediction files in `pred_dir` for the tasks `split` can score (`caption_scorer`: a
    CaptionScorer to reuse, else each split's captions start their own METEOR)."""
    results: dict[str, Any] = {}
    for task in SCORED[split]:
        if task == "step_captioning" and (reason := captions_unscored(inference)):
            results[task] = {"skipped": reason}
            continue
        results[task] = score(dataset, task, split, pred_dir / PREDICTION_FILES[task], bootstrap, caption_scorer)
    return results


def predict_and_score(trainer: pl.Trainer, model, datamodule, dataset: HiREST, ckpt_path: str | None,
                      output_dir: Path, inference: str, bootstrap=None) -> dict[str, Any]:
    """Predictions of val (trainer.predict) and test (trainer.test) under <output_dir>/<split>/, scored."""
    results: dict[str, Any] = {}
    model.output_dir = str(output_dir / "val")
    datamodule.predict_split = "val"
    trainer.predict(model, datamodule=datamodule, ckpt_path=ckpt_path, return_predictions=False)
    model.output_dir = str(output_dir / "test")
    trainer.test(model, datamodule=datamodule, ckpt_path=ckpt_path)
    if trainer.is_global_zero:
        # one METEOR process for both splits' captions: each start costs about 7 s of CPU (loading its paraphrase
        # table), and the process scores one request after another without carrying anything over
        with CaptionScorer() if captions_unscored(inference) is None else contextlib.nullcontext() as caption_scorer:
            for split in ("val", "test"):
                results[split] = score_split(dataset, split, output_dir / split, inference, bootstrap, caption_scorer)
                for task, metrics in results[split].items():
                    log.info("%s %s: %s", split, task,
                             overall_summary(metrics) if "all" in metrics else metrics["skipped"])
    return results


class HiRESTRecipe(Recipe):
    validate_kept = False  # the kept checkpoint predicts val (all three tasks) and test instead
    val_only = False  # val and test are predicted and scored together

    def build(self, cfg: DictConfig, output_dir: Path):
        dataset = hydra.utils.instantiate(cfg.data)
        features = build_features(cfg, dataset)
        datamodule = hydra.utils.instantiate(cfg.datamodule, hirest=dataset, features=features, _convert_="all")
        model = build_model(cfg, features, output_dir)
        _strategy(cfg)
        return datamodule, model

    def test(self, run: Run) -> None:
        run.results |= predict_and_score(run.trainer, run.model, run.datamodule, run.datamodule.hirest, run.ckpt,
                                         run.output_dir, run.cfg.model.inference, bootstrap_options(run.cfg))

    def write(self, run: Run) -> None:
        """metrics.json: {split: {task: metrics}} and the selection criterion (a training run's)."""
        scores = {k: v for k, v in run.results.items() if k != "best_val_loss"}
        write_metrics(run.output_dir, scores if run.retest else
                   {**scores, "best_val_loss": run.results["best_val_loss"]})

    def summarize(self, run: Run) -> None:
        log.info("outputs: %s", run.output_dir)

    def non_learned(self, cfg: DictConfig, output_dir: Path, training: bool) -> dict[str, Any]:
        """The baselines `model=hirest_heuristics` configures, on `cfg.split`."""
        # what spacewalk/results/rescore.py re-scores the prediction files with (the DataModule's settings name the
        # joint model's, which this model has not: left out)
        write_resolved_config(cfg, keys=("task", "data", "split", "seed", "model", "metrics"))
        dataset = hydra.utils.instantiate(cfg.data)
        baselines = hydra.utils.instantiate(cfg.model).by_task()
        if cfg.split == "test" and baselines.get("moment_retrieval") is not None:
            log.warning("moment retrieval is left out on test: the public test split hides its moments (use "
                        "split=val)")
            baselines["moment_retrieval"] = None
        needs_features = any(baselines.get(t) is not None for t in ("video_retrieval", "moment_retrieval"))
        features = build_features(cfg, dataset) if needs_features else None
        videos_dir = cfg.features.videos_dir or dataset.path("data/videos")
        return evaluate_hirest_baselines(dataset, baselines, cfg.split, str(output_dir), features, videos_dir,
                                         bootstrap_options(cfg))


RECIPE = HiRESTRecipe()
