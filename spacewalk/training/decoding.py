"""Plan decoding of a step-recognition run (`decoding=whole_recording|within_window`, conf/decoding/): after the
test with the kept checkpoint, its scores are decoded by spacewalk/spacewalk18/plan_decoding.py.

Everything the decoder learns comes from train (the plan: transitions and durations; the plan prior) and
val (the calibration of the scores; the settings, chosen from `decoding.grid` by val Accuracy); test is
decoded once with them. `decoding.ensemble` adds other finished runs (their checkpoints): each member's
scores are calibrated on val and the log-probabilities averaged (within the window, a member may not see
more than this run's window). Writes into <run>/decoded/<name>/: predictions.json (official format: the Viterbi
labels and the per-class posteriors as scores), metrics.json (test metrics, the chosen settings and
calibrations, and the val metrics of every candidate), timelines/ (true, raw and decoded rows) and
confusion/ (per test recording).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from spacewalk.io import write_json
from spacewalk.spacewalk18.dataset import NOT_ANNOTATED, frame_of
from spacewalk.spacewalk18.plan_decoding import (Calibration, DecodeSettings, PlanModel, WholeRecordingDecoder,
                                                 WithinWindowDecoder, choose_settings, grid_samples)
from spacewalk.spacewalk18.plan_prior import PlanPriorBaseline
from spacewalk.spacewalk18.predictions import write_step_predictions
from spacewalk.spacewalk18.scoring import step_recognition_metrics

log = logging.getLogger(__name__)

SETTINGS = ("whole_recording", "within_window")
GRID = "decoding_grid"  # the DataModule's name for the whole-recording grid samples


def enabled(cfg: DictConfig) -> bool:
    name = (cfg.get("decoding") or {}).get("name")
    if name not in (None, "none") and name not in SETTINGS:
        raise ValueError(f"decoding.name must be none or one of {SETTINGS}, got {name!r}")
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


def _labels(samples: Mapping[str, list]) -> dict[str, np.ndarray]:
    return {v: np.array([s.label for s in ss]) for v, ss in samples.items()}


def _cell_scores(datamodule, split: str) -> dict[str, np.ndarray]:
    """Each 12 s cell scored on its own, zero-shot: the cell's features (its transcript; its video) against the
    recording's step features, in the DataModule's layout, so a cell's score uses nothing outside it."""
    out = {}
    for r, v in enumerate(datamodule.video_ids[split]):
        bank = datamodule.bank.load(v)
        cells = datamodule.layout(bank.video, bank.cell_text, bank.cell_text)
        out[v] = cells @ datamodule.step_features[split][r].T
    return out


def _cell_labels(recording, num_cells: int, seconds: float) -> np.ndarray:
    centres = np.minimum((np.arange(num_cells) + 0.5) * seconds, recording.duration - 1e-6)
    return np.array([recording.label_at_frame(min(frame_of(t), recording.num_frames - 1)) for t in centres])


def _scores(model, datamodule, whole_recording: bool, grids: Mapping[str, list] | None) -> dict[str, Any]:
    """A model's val and test scores (from its last validate / test) and, for the whole recording, its grid's."""
    scores = {"val": model.split_scores["val"], "test": model.split_scores["test"],
              "context": datamodule.context_seconds}
    if whole_recording:
        datamodule.index_samples(GRID, grids)
        scores["grid"] = score_samples(model, datamodule, GRID)
    return scores


def _member_scores(ckpt: str, output_dir: Path, whole_recording: bool, grids) -> dict[str, Any]:
    """Another finished run of the ensemble (`decoding.ensemble`): its own config, data and checkpoint, on
    one process."""
    import pytorch_lightning as pl

    from spacewalk.training.common import load_run_config
    from spacewalk.training.step_recognition_build import build_datamodule, build_model

    run_cfg = load_run_config(Path(ckpt), str(output_dir))
    datamodule = build_datamodule(run_cfg)
    model = build_model(run_cfg, datamodule.feature_dim, None, datamodule)
    trainer = pl.Trainer(accelerator=run_cfg.trainer.accelerator, devices=1, logger=False, callbacks=[],
                         enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False,
                         precision=run_cfg.trainer.get("precision", "32-true"))
    trainer.validate(model, datamodule=datamodule, ckpt_path=ckpt, verbose=False)
    trainer.test(model, datamodule=datamodule, ckpt_path=ckpt, verbose=False)
    return _scores(model, datamodule, whole_recording, grids)


def _mean_log_probs(members: list[dict[str, Any]], labels: Mapping[str, np.ndarray], key: str) -> tuple[
        dict[str, np.ndarray], list[dict]]:
    """Each member's scores calibrated on val (`labels`), then averaged: the ensemble's log-probabilities of
    `key` ("val", "test" or "grid"), and the calibrations."""
    calibrations = [Calibration.fit(m["val"], labels) for m in members]
    videos = members[0][key]
    out = {v: np.mean([c.log_probs(m[key][v]) for c, m in zip(calibrations, members)], axis=0) for v in videos}
    return out, [asdict(c) for c in calibrations]


def _decoder_and_runner(cfg: DictConfig, datamodule, model, output_dir: Path):
    """The decoder the settings ask for, what it learned, and `run(split, settings) -> {video: Decoded}`."""
    dc = cfg.decoding
    dataset = datamodule.dataset
    samples = datamodule.samples
    whole = dc.name == "whole_recording"
    plan = PlanModel.fit(dataset.split("train"), max_offset=dc.max_offset, smoothing=dc.smoothing)
    seconds = datamodule.bank.config.segment_seconds
    grids = ({v: grid_samples(dataset.recordings[v], seconds) for split in ("val", "test") for v in samples[split]}
             if whole else None)
    members = [_scores(model, datamodule, whole, grids)]
    for ckpt in dc.get("ensemble") or []:
        members.append(_member_scores(str(ckpt), output_dir / "ensemble", whole, grids))
        if not whole and members[-1]["context"] > datamodule.context_seconds:
            raise ValueError(f"decoding=within_window keeps to the sample's window: ensemble member {ckpt} sees "
                             f"{members[-1]['context']:g} s, more than this run's {datamodule.context_seconds:g} s")
    val_labels = _labels(samples["val"])
    fitted = {"plan": asdict(plan), "ensemble": [str(c) for c in dc.get("ensemble") or []]}
    if whole:
        grid_log_probs, fitted["calibrations"] = _mean_log_probs(members, val_labels, "grid")
        decoder = WholeRecordingDecoder(plan, PlanPriorBaseline().fit(dataset, "train"))

        def run(split, settings):
            return {v: decoder.decode(dataset.recordings[v], grids[v], grid_log_probs[v], samples[split][v], settings,
                                      seconds) for v in samples[split]}

        return fitted, run
    sample_log_probs = {}
    for split in ("val", "test"):
        sample_log_probs[split], fitted["calibrations"] = _mean_log_probs(members, val_labels, split)
    cell_scores = {split: _cell_scores(datamodule, split) for split in ("val", "test")}
    val_cells = {v: _cell_labels(dataset.recordings[v], len(s), seconds) for v, s in cell_scores["val"].items()}
    annotated = {v: labels != NOT_ANNOTATED for v, labels in val_cells.items()}
    cell_calibration = Calibration.fit({v: cell_scores["val"][v][annotated[v]] for v in val_cells},
                                       {v: val_cells[v][annotated[v]] for v in val_cells})
    fitted["cell_calibration"] = asdict(cell_calibration)
    decoder = WithinWindowDecoder(plan, seconds)

    def run(split, settings):
        ix, out = datamodule.splits[split], {}
        for r, v in enumerate(datamodule.video_ids[split]):
            rows = ix.recording == r
            out[v] = decoder.decode(dataset.recordings[v], cell_calibration.log_probs(cell_scores[split][v]),
                                    sample_log_probs[split][v], ix.first_cell[rows], ix.num_cells[rows],
                                    ix.query_pos[rows], settings)
        return out

    return fitted, run


def decode_run(cfg: DictConfig, datamodule, model, output_dir: Path, plots: bool = True) -> dict[str, Any]:
    """Fit the decoder (train, val), choose its settings on val, decode test; write and return its results.
    Called on rank 0 once the kept checkpoint has been tested and validated (`model.split_scores`)."""
    name = cfg.decoding.name
    fitted, run = _decoder_and_runner(cfg, datamodule, model, output_dir)
    recordings = datamodule.dataset.recordings
    samples = datamodule.samples

    def metrics(split, decoded):
        return step_recognition_metrics({v: recordings[v] for v in decoded}, samples[split],
                                        {v: d.labels for v, d in decoded.items()},
                                        {v: d.posteriors for v, d in decoded.items()})

    candidates = DecodeSettings.grid(**OmegaConf.to_container(cfg.decoding.grid))
    chosen, table = choose_settings(candidates, lambda settings: metrics("val", run("val", settings)))
    log.info("decoding=%s: chosen on val %s", name, chosen)
    decoded = run("test", chosen)
    result = metrics("test", decoded)
    out_dir = output_dir / "decoded" / name
    write_step_predictions(out_dir / "predictions.json", {v: d.labels for v, d in decoded.items()},
                           {v: d.posteriors for v, d in decoded.items()})
    raw = {v: model.split_scores["test"][v] for v in decoded}
    write_json(out_dir / "metrics.json", {"split": "test", "decoding": name, "settings": asdict(chosen), **fitted,
                                          **result, "val_candidates": table})
    if plots:
        from spacewalk.timeline import plot_confusion, plot_timeline

        raw_predictions = read_raw_predictions(output_dir, datamodule, raw)
        for v, d in decoded.items():
            plot_timeline(recordings[v], samples["test"][v], {"raw": raw_predictions[v], "decoded": d.labels},
                          out_dir / "timelines" / f"{v}.png")
            plot_confusion(recordings[v], samples["test"][v], d.labels, out_dir / "confusion" / f"{v}.png")
    log.info("decoded (%s) test: Accuracy %.2f, mAP %s, IoU %.2f -> %s", name, result["Accuracy"],
             f"{result['mAP']:.2f}" if result["mAP"] is not None else "-", result["IoU"], out_dir)
    return {"decoding": name, "settings": asdict(chosen), **result}


def read_raw_predictions(output_dir: Path, datamodule, fallback: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The run's own test predictions (predictions.json), for the raw row of the pictures."""
    from spacewalk.spacewalk18.predictions import read_step_predictions

    path = output_dir / "predictions.json"
    if not path.is_file():
        return {v: s.argmax(axis=1) for v, s in fallback.items()}
    return read_step_predictions(path, datamodule.dataset.recordings, datamodule.samples["test"]).predictions
