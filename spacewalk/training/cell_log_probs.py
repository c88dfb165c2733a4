"""Calibrated step log-probabilities of every 12 s cell of the val and test recordings, from finished
step-recognition runs: what a reader of a whole clip's timeline (Spacewalk-18 QA's `model=mc_plan
model.emission_scores=[...]`) reads instead of its zero-shot recipe.

    python -m spacewalk.training.cell_log_probs --ckpt RUNS/trained/7/checkpoints/X.ckpt [--ckpt ...] --out F.npz

Each run scores the bank's grid of every val and test recording (one sample at each cell's centre, its window
as the run was trained: `decoding.grid_samples`, as the whole-recording decoder observes), its scores are
calibrated on the val recordings' annotated cells (one temperature and Irrelevant's bias,
`plan_decoder.Calibration`, maximum likelihood of the cells' centre labels), and with several runs their
log-probabilities are averaged. The file holds one [cells, K + 1] array per recording (the recording's own step
list: class 0 Irrelevant); beside it, F.json says which runs made it and their calibrations. Nothing of test is
read but its transcripts; train is not scored (the runs were trained on it).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import NOT_ANNOTATED
from spacewalk.benchmarks.spacewalk18.decoding.plan_decoder import Calibration, cell_labels, grid_samples
from spacewalk.core.errors import ConfigError
from spacewalk.core.io import atomic_path, write_json

SPLITS = ("val", "test")


def run_cell_scores(ckpt: Path, work_dir: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], float]:
    """One finished run's scores of every cell of the val and test recordings ({video: [C, K+1]}, as its
    prediction file reports them), the val cells' labels ({video: [C]}) and the grid's seconds."""
    import pytorch_lightning as pl

    from spacewalk.training.decoding import GRID, score_samples
    from spacewalk.training.run_directory import load_run_config
    from spacewalk.training.spacewalk18_modules import build_datamodule, build_model

    run_cfg = load_run_config(ckpt, str(work_dir))
    datamodule = build_datamodule(run_cfg)
    model = build_model(run_cfg, datamodule.feature_dim, None, datamodule)
    trainer = pl.Trainer(accelerator=run_cfg.trainer.accelerator, devices=1, logger=False, callbacks=[],
                         enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False,
                         precision=run_cfg.trainer.get("precision", "32-true"))
    trainer.validate(model, datamodule=datamodule, ckpt_path=str(ckpt), verbose=False)  # sets up, loads the weights
    dataset, seconds = datamodule.dataset, datamodule.bank.config.segment_seconds
    videos = [r.video_id for split in SPLITS for r in dataset.split(split)]
    datamodule.index_samples(GRID, {v: grid_samples(dataset.recordings[v], seconds) for v in videos})
    scores = score_samples(model, datamodule, GRID)
    labels = {r.video_id: cell_labels(r, len(scores[r.video_id]), seconds) for r in dataset.split("val")}
    return scores, labels, seconds


def calibrated(scores: dict[str, np.ndarray], val_labels: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray],
                                                                                           Calibration]:
    """Every recording's log-probabilities under one calibration fitted on the val recordings' annotated cells."""
    keep = {v: y != NOT_ANNOTATED for v, y in val_labels.items()}
    calibration = Calibration.fit({v: scores[v][keep[v]] for v in val_labels},
                                  {v: val_labels[v][keep[v]] for v in val_labels})
    return {v: calibration.log_probs(s) for v, s in scores.items()}, calibration


def export(ckpts: list[Path], out: Path, work_dir: Path, log=print) -> dict:
    """The averaged calibrated log-probabilities of the runs, written to `out` (.npz) and its .json."""
    members, record = [], []
    for ckpt in ckpts:
        scores, labels, seconds = run_cell_scores(ckpt, work_dir)
        log_probs, calibration = calibrated(scores, labels)
        members.append(log_probs)
        record.append({"ckpt": str(ckpt), "calibration": asdict(calibration), "segment_seconds": seconds})
        log(json.dumps(record[-1]))
    if {tuple(sorted(m)) for m in members} != {tuple(sorted(members[0]))}:
        raise ConfigError("the runs do not cover the same recordings: they were trained on different data")
    mean = {v: np.mean([m[v] for m in members], axis=0) for v in members[0]}
    with atomic_path(out) as tmp, open(tmp, "wb") as f:
        np.savez(f, **mean)
    meta = {"runs": record, "recordings": {v: list(x.shape) for v, x in mean.items()}}
    write_json(out.with_suffix(".json"), meta)
    return meta


def main(argv: list[str] | None = None) -> int:
    from spacewalk.core.arguments import output_file
    from spacewalk.core.command_errors import user_errors_reported

    parser = argparse.ArgumentParser(prog="python -m spacewalk.training.cell_log_probs",
                                     description="Calibrated per-cell step log-probabilities of finished runs.")
    parser.add_argument("--ckpt", action="append", required=True, type=Path,
                        help="a run's checkpoint (<run>/checkpoints/X.ckpt); repeat for an ensemble")
    parser.add_argument("--out", required=True, type=output_file, help="the .npz to write")
    parser.add_argument("--work-dir", type=Path, default=None, help="scratch folder (default: beside --out)")
    args = parser.parse_args(argv)
    if args.out.suffix != ".npz":
        parser.error("--out must end in .npz")
    with user_errors_reported():
        export(args.ckpt, args.out, args.work_dir or args.out.parent / (args.out.stem + "_work"),
               log=lambda line: print(line, file=sys.stderr, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
