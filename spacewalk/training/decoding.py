"""Plan decoding of a step-recognition run (`decoding=whole_recording|within_window`, conf/decoding/): after the
test with the kept checkpoint, its scores are decoded by spacewalk/benchmarks/spacewalk18/decoding/plan_decoder.py.

Everything the decoder learns comes from train (the plan: transitions and durations; the plan prior) and
val (the calibration of the scores; the settings, chosen from `decoding.grid` by val Accuracy); test is
decoded once with them. `decoding.ensemble` adds other finished runs (their checkpoints): each member's
scores are calibrated on val and the log-probabilities averaged (within the window, a member may not see
more than this run's window). Writes into <run>/decoded/<name>/: predictions.json (official format: the Viterbi
labels and the per-class posteriors as scores), metrics.json (test metrics, the chosen settings and
calibrations, and the val metrics of every candidate), timelines/ (true, raw and decoded rows) and
confusion/ (per test recording).

This module is the orchestration: it reads `cfg.decoding`, runs the models (Lightning, the ensemble's
checkpoints) for their scores, and writes the files. The arithmetic takes plain values and lives beside the
decoder: the calibrations, their ensemble average and the within-window emissions in
spacewalk/benchmarks/spacewalk18/decoding/emissions.py, the plan, the decoders, the cells' labels and the
settings' choice in spacewalk/benchmarks/spacewalk18/decoding/plan_decoder.py.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from spacewalk.benchmarks.spacewalk18.decoding.emissions import (
    Emissions,
    WindowRows,
    block_pairs,
    cell_scores,
    mean_log_probs,
    pair_products,
    within_window_emissions,
)
from spacewalk.benchmarks.spacewalk18.decoding.plan_decoder import (
    DecodeSettings,
    PlanModel,
    WholeRecordingDecoder,
    WithinWindowDecoder,
    cell_labels,
    choose_settings,
    grid_samples,
)
from spacewalk.benchmarks.spacewalk18.decoding.plan_prior import PlanPriorBaseline
from spacewalk.benchmarks.spacewalk18.scoring.official import step_recognition_metrics
from spacewalk.benchmarks.spacewalk18.scoring.predictions import write_step_predictions
from spacewalk.core.errors import ConfigError
from spacewalk.results.layout import PREDICTIONS, write_metrics

log = logging.getLogger(__name__)

SETTINGS = ("whole_recording", "within_window")
GRID = "decoding_grid"  # the DataModule's name for the whole-recording grid samples


def enabled(cfg: DictConfig) -> bool:
    name = (cfg.get("decoding") or {}).get("name")
    if name not in (None, "none") and name not in SETTINGS:
        raise ConfigError(f"decoding.name must be none or one of {SETTINGS}, got {name!r}")
    return name not in (None, "none")


@torch.no_grad()
def score_samples(model, datamodule, name: str) -> dict[str, np.ndarray]:
    """The model's reported scores ([n, K+1] per video, as in the prediction file) of an indexed sample set."""
    model.eval()
    video_ids, raw = datamodule.video_ids[name], {}
    for batch in datamodule.loader(name):
        batch = {k: v.to(model.device) for k, v in batch.items()}
        logits = model(batch).float().cpu().numpy()
        for i, v in enumerate(batch["video_index"].tolist()):
            video = video_ids[v]
            # a batch pads its recordings' classes to the most among them: keep this recording's K + 1
            raw.setdefault(video, []).append(logits[i, :datamodule.dataset.recordings[video].num_classes])
    return model.decide({v: np.stack(rows) for v, rows in raw.items()})[1]


@torch.no_grad()
def score_blocks(model, datamodule, name: str) -> dict[str, np.ndarray]:
    """The model's scores of an indexed sample set split into products of blocks ([n, K+1, P] per video,
    emissions.pair_products), scaled as the model scales its logits, so that the products of matching blocks
    sum to its raw score. With a threshold (trained heads) class 0 is not a score (the prediction file holds
    tau there): its products are zero and its level is the fitted Irrelevant bias."""
    import torch.nn.functional as F

    model.eval()
    left, right = datamodule.layout_blocks()
    pairs = block_pairs(left, right)
    video_ids, out = datamodule.video_ids[name], {}
    for batch in datamodule.loader(name):
        batch = {k: v.to(model.device) for k, v in batch.items()}
        embedding, steps = model.head(batch).float(), batch["steps"].float()
        if model.hparams.normalize:
            embedding, steps = F.normalize(embedding, dim=-1), F.normalize(steps, dim=-1)
        embedding, steps = embedding.cpu().numpy(), steps.cpu().numpy()
        video_index, step_row = batch["video_index"].cpu().numpy(), batch["step_row"].cpu().numpy()
        for r in np.unique(step_row):
            rows = np.flatnonzero(step_row == r)
            video = video_ids[video_index[rows[0]]]
            k1 = datamodule.dataset.recordings[video].num_classes
            products = pair_products(embedding[rows], steps[r, :k1], left, right, pairs) / model.hparams.temperature
            if model.hparams.irrelevant == "threshold":
                products[:, 0] = 0.0
            out.setdefault(video, []).append(products)
    # the loader goes through the set in order, so each video's rows arrive in order
    return {v: np.concatenate(parts) for v, parts in out.items()}


def _labels(samples: Mapping[str, list]) -> dict[str, np.ndarray]:
    return {v: np.array([s.label for s in ss]) for v, ss in samples.items()}


def _cell_scores(datamodule, split: str, blocks: bool = False) -> dict[str, np.ndarray]:
    """Each 12 s cell of the split's recordings scored on its own (emissions.cell_scores), in the DataModule's
    layout; with `blocks`, split into products of blocks."""
    layout = datamodule.layout_blocks() if blocks else None
    out = {}
    for r, v in enumerate(datamodule.video_ids[split]):
        bank = datamodule.bank.load(v)
        cells = datamodule.layout(bank.video, bank.cell_text, bank.cell_text)
        out[v] = cell_scores(cells, datamodule.step_features[split][r], layout)
    return out


def _window_rows(datamodule, split: str) -> dict[str, WindowRows]:
    """Each recording's samples' windows in cells, as the DataModule indexed them."""
    ix, out = datamodule.splits[split], {}
    for r, v in enumerate(datamodule.video_ids[split]):
        rows = ix.recording == r
        out[v] = WindowRows(ix.first_cell[rows], ix.num_cells[rows], ix.query_pos[rows])
    return out


def _scores(model, datamodule, whole_recording: bool, grids: Mapping[str, list] | None,
            blocks: bool = False) -> dict[str, Any]:
    """A model's val and test scores (from its last validate / test) and, for the whole recording, its grid's;
    with `blocks`, the same split into products of blocks (key + "_blocks")."""
    scores = {"val": model.split_scores["val"], "test": model.split_scores["test"],
              "context": datamodule.context_seconds}
    if whole_recording:
        datamodule.index_samples(GRID, grids)
        scores["grid"] = score_samples(model, datamodule, GRID)
    if blocks:
        for key in ("val", "test") + (("grid",) if whole_recording else ()):
            scores[f"{key}_blocks"] = score_blocks(model, datamodule, GRID if key == "grid" else key)
    return scores


def _member_scores(ckpt: str, output_dir: Path, whole_recording: bool, grids, blocks: bool) -> dict[str, Any]:
    """Another finished run of the ensemble (`decoding.ensemble`): its own config, data and checkpoint, on
    one process."""
    import pytorch_lightning as pl

    from spacewalk.training.run_directory import load_run_config
    from spacewalk.training.spacewalk18_modules import build_datamodule, build_model

    run_cfg = load_run_config(Path(ckpt), str(output_dir))
    datamodule = build_datamodule(run_cfg)
    model = build_model(run_cfg, datamodule.feature_dim, None, datamodule)
    trainer = pl.Trainer(accelerator=run_cfg.trainer.accelerator, devices=1, logger=False, callbacks=[],
                         enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False,
                         precision=run_cfg.trainer.get("precision", "32-true"))
    trainer.validate(model, datamodule=datamodule, ckpt_path=ckpt, verbose=False)
    trainer.test(model, datamodule=datamodule, ckpt_path=ckpt, verbose=False)
    return _scores(model, datamodule, whole_recording, grids, blocks)


def _emission_candidates(cfg: DictConfig) -> list[Emissions]:
    e = cfg.decoding.get("emissions") or {}
    return Emissions.candidates(e.get("recording_calibration", ["none"]), e.get("block_fusion", [False]))


def _decoder_and_runners(cfg: DictConfig, datamodule, model, output_dir: Path):
    """The decoder the settings ask for and, per emission candidate (`Emissions.candidates`), what it learned
    and `run(split, settings) -> {video: Decoded}`: [(emissions, fitted, run)]."""
    dc = cfg.decoding
    dataset = datamodule.dataset
    samples = datamodule.samples
    whole = dc.name == "whole_recording"
    variants = _emission_candidates(cfg)
    blocks = any(e.block_fusion for e in variants)
    plan = PlanModel.fit(dataset.split("train"), max_offset=dc.max_offset, smoothing=dc.smoothing)
    seconds = datamodule.bank.config.segment_seconds
    grids = ({v: grid_samples(dataset.recordings[v], seconds) for split in ("val", "test") for v in samples[split]}
             if whole else None)
    members = [_scores(model, datamodule, whole, grids, blocks)]
    for ckpt in dc.get("ensemble") or []:
        members.append(_member_scores(str(ckpt), output_dir / "ensemble", whole, grids, blocks))
        if not whole and members[-1]["context"] > datamodule.context_seconds:
            raise ConfigError(f"decoding=within_window keeps to the sample's window: ensemble member {ckpt} sees "
                              f"{members[-1]['context']:g} s, more than this run's {datamodule.context_seconds:g} s")
    val_labels = _labels(samples["val"])
    common = {"plan": asdict(plan), "ensemble": [str(c) for c in dc.get("ensemble") or []]}
    runners = []
    if whole:
        decoder = WholeRecordingDecoder(plan, PlanPriorBaseline().fit(dataset, "train"))
        for emissions in variants:
            fitted = dict(common)
            grid_log_probs, fitted["calibrations"] = mean_log_probs(members, val_labels, "grid", emissions, "grid")

            def run(split, settings, grid_log_probs=grid_log_probs):
                return {v: decoder.decode(dataset.recordings[v], grids[v], grid_log_probs[v], samples[split][v],
                                          settings, seconds) for v in samples[split]}

            runners.append((emissions, fitted, run))
        return runners
    decoder = WithinWindowDecoder(plan, seconds)
    cells = {split: _cell_scores(datamodule, split) for split in ("val", "test")}
    cell_blocks = {split: _cell_scores(datamodule, split, blocks=True) for split in ("val", "test")} if blocks else None
    val_cells = {v: cell_labels(dataset.recordings[v], len(c), seconds) for v, c in cells["val"].items()}
    windows = {split: _window_rows(datamodule, split) for split in ("val", "test")}
    for emissions in variants:
        sample_log_probs, cell_log_probs, fitted = within_window_emissions(
            members, val_labels, cell_blocks if emissions.block_fusion else cells, val_cells, windows, emissions)
        fitted = common | fitted

        def run(split, settings, cell_log_probs=cell_log_probs, sample_log_probs=sample_log_probs):
            return {v: decoder.decode(dataset.recordings[v], cell_log_probs[split][v], sample_log_probs[split][v],
                                      w.first_cell, w.num_cells, w.query_pos, settings)
                    for v, w in windows[split].items()}

        runners.append((emissions, fitted, run))
    return runners


def decode_run(cfg: DictConfig, datamodule, model, output_dir: Path, plots: bool = True) -> dict[str, Any]:
    """Fit the decoder (train, val), choose its emissions and settings on val, decode test; write and return its
    results. Called on rank 0 once the kept checkpoint has been tested and validated (`model.split_scores`)."""
    name = cfg.decoding.name
    runners = _decoder_and_runners(cfg, datamodule, model, output_dir)
    recordings = datamodule.dataset.recordings
    samples = datamodule.samples

    def metrics(split, decoded):
        return step_recognition_metrics({v: recordings[v] for v in decoded}, samples[split],
                                        {v: d.labels for v, d in decoded.items()},
                                        {v: d.posteriors for v, d in decoded.items()})

    candidates = DecodeSettings.grid(**OmegaConf.to_container(cfg.decoding.grid))
    best, table = None, []
    for emissions, fitted, run in runners:
        chosen, rows = choose_settings(candidates, lambda settings, run=run: metrics("val", run("val", settings)))
        table += [{**asdict(emissions), **row} for row in rows]
        score = max((row["Accuracy"], row["IoU"]) for row in rows)
        if best is None or score > best[0]:  # ties: the earlier candidate (the global calibration comes first)
            best = (score, emissions, fitted, run, chosen)
    _, emissions, fitted, run, chosen = best
    log.info("decoding=%s: chosen on val %s, %s", name, emissions, chosen)
    decoded = run("test", chosen)
    result = metrics("test", decoded)
    intervals = decoded_intervals(cfg, result)
    if intervals is not None:  # the same bootstrap as the raw test numbers, so the two rows compare
        result["intervals"] = intervals
    out_dir = output_dir / "decoded" / name
    write_step_predictions(out_dir / PREDICTIONS, {v: d.labels for v, d in decoded.items()},
                           {v: d.posteriors for v, d in decoded.items()})
    raw = {v: model.split_scores["test"][v] for v in decoded}
    write_metrics(out_dir, {"split": "test", "decoding": name, "settings": asdict(chosen),
                                          "emissions": asdict(emissions), **fitted, **result,
                                          "val_candidates": table})
    if plots:
        from spacewalk.benchmarks.spacewalk18.pictures.timeline import plot_confusion, plot_timeline

        raw_predictions = read_raw_predictions(output_dir, datamodule, raw)
        for v, d in decoded.items():
            plot_timeline(recordings[v], samples["test"][v], {"raw": raw_predictions[v], "decoded": d.labels},
                          out_dir / "timelines" / f"{v}.png")
            plot_confusion(recordings[v], samples["test"][v], d.labels, out_dir / "confusion" / f"{v}.png")
    log.info("decoded (%s) test: Accuracy %.2f, mAP %s, IoU %.2f -> %s", name, result["Accuracy"],
             f"{result['mAP']:.2f}" if result["mAP"] is not None else "-", result["IoU"], out_dir)
    return {"decoding": name, "settings": asdict(chosen), "emissions": asdict(emissions), **result}


def decoded_intervals(cfg: DictConfig, result: dict[str, Any]) -> dict[str, Any] | None:
    """The intervals of the decoded test metrics (metrics.bootstrap; None when off): over the recordings of their
    per-recording values, as the raw test's (spacewalk/benchmarks/spacewalk18/intervals.py)."""
    from spacewalk.benchmarks.spacewalk18.intervals import step_recognition_intervals
    from spacewalk.training.run_directory import bootstrap_options

    options = bootstrap_options(cfg)
    return None if options is None else step_recognition_intervals(result, options)


def read_raw_predictions(output_dir: Path, datamodule, fallback: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The run's own test predictions (predictions.json), for the raw row of the pictures."""
    from spacewalk.benchmarks.spacewalk18.scoring.predictions import read_step_predictions

    path = output_dir / PREDICTIONS
    if not path.is_file():
        return {v: s.argmax(axis=1) for v, s in fallback.items()}
    return read_step_predictions(path, datamodule.dataset.recordings, datamodule.samples["test"]).predictions
