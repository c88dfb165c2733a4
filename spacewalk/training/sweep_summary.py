"""A Hydra callback that tabulates a multirun: one row per job with its overrides and test metrics.

Writes summary.csv and summary.md into the sweep directory when the multirun ends. Rows come from each
job's metrics.json (written by evaluate.py and train.py); a job that failed or wrote none is listed
with empty metrics, so a sweep never hides a missing run.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from spacewalk.io import write_text

log = logging.getLogger(__name__)

METRICS = ("Accuracy", "mAP", "IoU")


def collect(sweep_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for job in sorted((p for p in sweep_dir.iterdir() if (p / ".hydra").is_dir()), key=lambda p: (len(p.name), p.name)):
        overrides_file = job / ".hydra" / "overrides.yaml"
        overrides = OmegaConf.to_container(OmegaConf.load(overrides_file)) if overrides_file.is_file() else []
        row: dict[str, Any] = {"job": job.name, "overrides": " ".join(overrides)}
        metrics_file = job / "metrics.json"
        metrics = json.loads(metrics_file.read_text()) if metrics_file.is_file() else {}
        for name in METRICS:
            row[name] = metrics.get(name)
        row["best_val_loss"] = metrics.get("best_val_loss")
        rows.append(row)
    return rows


def to_markdown(rows: list[dict[str, Any]]) -> str:
    columns = ["job", "overrides", *METRICS, "best_val_loss"]

    def cell(v):
        return "" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["job", "overrides", *METRICS, "best_val_loss"])
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


class SweepSummary(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        rows = collect(sweep_dir)
        write_text(sweep_dir / "summary.csv", to_csv(rows))
        write_text(sweep_dir / "summary.md", to_markdown(rows))
        log.info("sweep summary (test split; select on val, never on these):\n%s", to_markdown(rows))
