"""A finished run's headline numbers, recomputed from what it recorded, and the units they are made of.

    from spacewalk.results.rescore import rescore_run, recorded_metrics
    rescore_run("outputs/train/runs/X")      # {"Accuracy": 41.2, "mAP": ..., "IoU": ...}, from predictions.json
    recorded_metrics("outputs/train/runs/X")  # the same names, as the run's metrics.json holds them

A run directory holds its resolved config (`config.resolved.yaml`: the task, the data, the split) and its
recorded predictions: step recognition's and intra-video retrieval's `predictions.json`, the multiple-choice
tasks' `records.jsonl`, HiREST's official prediction files. Re-scoring reads them with the benchmark's own
reader and scores them with its official scoring code (never a second implementation of a metric); a run whose
re-scored numbers no longer equal its metrics.json has changed under its table (`python -m spacewalk.report
--check`). The same object serves the paired comparison of two runs (`python -m spacewalk.compare`), so each
headline number comes with its units: the recordings (or one group for flat units) and, in each, the items,
with the number recomputed on any multiset of them (`ScoredMetric.resampled`, the form of
`spacewalk.results.bootstrap.grouped_replicates`).

This module names no benchmark: the benchmark a run belongs to is the one whose package holds the run's data
config `_target_` (`spacewalk.<name>.`...), and its registration (`spacewalk/benchmarks/<name>/benchmark.py`,
`Benchmark.rescore`) does the reading and scoring. Decoded step-recognition predictions
(`<run>/decoded/<name>/`) are re-scored as a run of their own, with the config of the run that holds them.
The run config is read with PyYAML (the resolved config has no interpolations left; this library imports no
Hydra or OmegaConf); relative paths in it (the synthetic data's root) are read from the current directory,
as the command that made the run read them from the repository root.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.core.errors import DataError
from spacewalk.results.layout import DECODED, HYDRA, METRICS, OVERRIDES, RUN_CONFIG, read_metrics, read_yaml


@dataclass(frozen=True)
class ScoredMetric:
    """One headline number of a run and its units.

    `groups`: the top-level units' names (recordings; one group, "all", for flat units such as questions);
    `items[g]`: the ids of group g's units, in the order `resampled` takes them; `resampled(g, counts)`: the
    group's number on m multisets of its units at once, counts [m, n_g] (how often each unit is in each), in
    the metric's own scale (percent); the run's number is the nan-ignoring mean over groups (one group: its
    value). `between`: the bootstrap resamples the groups (recordings); `within`: the units inside each group.
    `path`: where metrics.json holds the number."""

    value: float | None
    unit: str
    groups: tuple[str, ...]
    items: tuple[tuple[str, ...], ...]
    resampled: Callable[[int, np.ndarray], np.ndarray]
    path: tuple[str, ...]
    within: bool = True
    between: bool = False

    @property
    def sizes(self) -> list[int]:
        return [len(i) for i in self.items]


@dataclass(frozen=True)
class ScoredRun:
    """A run re-scored: `task` (benchmark and task, e.g. "spacewalk18 step_recognition"), `identity` (what two
    compared runs must share: split, a digest of the items and their ground truth, the scoring settings; every
    value a JSON scalar or string), `metrics` (headline name -> ScoredMetric), `label` (the model, for tables)."""

    run_dir: Path
    task: str
    identity: dict[str, Any]
    metrics: dict[str, ScoredMetric]
    label: str = ""
    notes: list[str] = field(default_factory=list)


# ---- what benchmarks use to build one -------------------------------------------------------------------------

def digest(content: Any) -> str:
    """A short SHA-256 of a JSON-able description of the items (ids and ground truth, in order)."""
    text = json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def flat_metric(value: float | None, ids: Sequence[str], per_unit: Sequence[float] | np.ndarray, unit: str,
                path: Sequence[str], scale: float = 100.0) -> ScoredMetric:
    """A number that is the mean of per-unit values times `scale` (accuracy: 0/1 correctness, percent), over
    independent units. `value`: the official number (the caller's official scoring), which the per-unit values
    must reproduce: a mismatch is a bug here, not the user's."""
    per_unit = np.asarray(per_unit, dtype=np.float64)
    if len(per_unit) != len(ids):
        raise ValueError(f"{len(ids)} units but {len(per_unit)} values")
    if value is not None and len(per_unit):
        check_reproduces(value, float(per_unit.mean()) * scale, "/".join(path))

    def resampled(g: int, counts: np.ndarray) -> np.ndarray:
        return counts @ per_unit / counts.sum(axis=1) * scale

    return ScoredMetric(value, unit, ("all",), (tuple(ids),), resampled, tuple(path), within=True, between=False)


def summary_metric(value: float | None, ids: Sequence[str], units: Sequence[Any],
                   summarise: Callable[[list], float], unit: str, path: Sequence[str]) -> ScoredMetric:
    """A number computed by an official summary of a list of units (HiREST's per-query hits): each multiset is
    handed to `summarise` as the list of its units (a unit drawn twice appears twice)."""
    units = list(units)
    if value is not None and units:
        check_reproduces(value, summarise(units), "/".join(path))

    def resampled(g: int, counts: np.ndarray) -> np.ndarray:
        return np.array([summarise([units[i] for i in np.repeat(np.arange(len(units)), row)]) for row in counts],
                        dtype=np.float64)

    return ScoredMetric(value, unit, ("all",), (tuple(ids),), resampled, tuple(path), within=True, between=False)


def check_reproduces(official: float, from_units: float, name: str) -> None:
    """The per-unit decomposition of a number must give the official number (up to float summation order)."""
    if not math.isclose(official, from_units, rel_tol=1e-9, abs_tol=1e-9):
        raise RuntimeError(f"{name}: the units give {from_units!r} but the official scoring {official!r}")


# ---- reading a run ---------------------------------------------------------------------------------------------

def find_config(run_dir: Path) -> Path:
    """The run's resolved config: in the run directory, or (decoded predictions, <run>/decoded/<name>/) in the
    run that holds it."""
    for folder in (run_dir, *list(run_dir.parents)[:2]):
        if (folder / RUN_CONFIG).exists():
            if folder != run_dir and folder / DECODED != run_dir.parent:
                break
            return folder / RUN_CONFIG
    # a re-test (evaluate.py ckpt_path=<run>/checkpoints/X.ckpt, e.g. a decoding) runs with its trained run's config
    # (what it changes, plots, intervals, devices, the decoding, does not change how predictions are scored)
    holder = run_dir.parent.parent if run_dir.parent.name == DECODED else run_dir
    ckpt = next((o.split("=", 1)[1] for o in run_overrides(holder) if o.split("=", 1)[0] == "ckpt_path"), None)
    if ckpt is not None and (Path(ckpt).parent.parent / RUN_CONFIG).is_file():
        return Path(ckpt).parent.parent / RUN_CONFIG
    raise DataError(f"not a run directory: no {RUN_CONFIG} (written by train.py and evaluate.py into every run "
                    "directory; a run made before it was written cannot be re-scored)", file=run_dir)


def read_run_config(run_dir: str | Path) -> dict[str, Any]:
    path = find_config(Path(run_dir))
    config = read_yaml(path)
    if not isinstance(config, dict) or not isinstance(config.get("data"), dict) or "_target_" not in config["data"]:
        raise DataError("has no data config with a _target_ (what the run read)", file=path, field="data")
    return config


def scored_run(run_dir: str | Path) -> ScoredRun:
    """The run re-scored by its benchmark (found through the registry from the run's data `_target_`)."""
    from spacewalk.benchmarks.registry import discover

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise DataError("no such run directory", file=run_dir)
    config = read_run_config(run_dir)
    target = str(config["data"]["_target_"])
    owners = [b for b in discover().values() if target.startswith(b.package + ".")]
    if not owners or owners[0].rescore is None:
        raise DataError(f"no registered benchmark re-scores runs of data {target}", file=find_config(run_dir),
                        field="data._target_")
    return owners[0].rescore(run_dir, config)


def rescore_run(run_dir: str | Path) -> dict[str, float | None]:
    """The run's headline numbers recomputed from its recorded predictions: {name: value} (percent), the names
    of `recorded_metrics` and of metrics.json's "intervals"."""
    return {name: m.value for name, m in scored_run(run_dir).metrics.items()}


def recorded_metrics(run_dir: str | Path, names: Mapping[str, Sequence[str]] | None = None
                     ) -> dict[str, float | None]:
    """The headline numbers as the run's metrics.json holds them, under `rescore_run`'s names (`names`: name ->
    path in metrics.json; default: the paths the run's benchmark gives). A number metrics.json lacks is None."""
    run_dir = Path(run_dir)
    if names is None:
        names = {name: m.path for name, m in scored_run(run_dir).metrics.items()}
    path = run_dir / METRICS
    if not path.exists():
        raise DataError("the run has no metrics.json", file=path)
    recorded = read_metrics(path)
    out: dict[str, float | None] = {}
    for name, keys in names.items():
        value: Any = recorded
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        out[name] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return out


def config_value(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    value: Any = config
    for key in dotted.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return default
        value = value[key]
    return value


def run_overrides(run_dir: Path) -> list[str]:
    """The command line's overrides of the run (Hydra's .hydra/overrides.yaml in the run directory, or in the run
    holding decoded predictions), [] where there is none."""
    for folder in (run_dir, *list(run_dir.parents)[:2]):
        path = folder / HYDRA / OVERRIDES
        if path.exists():
            values = read_yaml(path)
            if not isinstance(values, list):
                raise DataError("expected a list of overrides", file=path)
            return [str(v) for v in values]
    return []


def model_label(config: Mapping[str, Any], run_dir: Path) -> str:
    """The model of a run, for tables: the command's model= (with its seed=), else the model's class."""
    overrides = run_overrides(run_dir)
    model = next((o.split("=", 1)[1] for o in overrides if o.startswith("model=")), None)
    if model is None:
        target = config_value(config, "model.head._target_") or config_value(config, "model._target_") or "?"
        model = str(target).rsplit(".", 1)[-1]
    seed = config.get("seed")
    return f"{model} seed {seed}" if seed is not None and any(o.startswith("seed=") for o in overrides) else model


def data_arguments(config: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """The run's data config as keyword arguments of its `_target_` (the benchmark's opener), with `overrides`."""
    return {**{k: v for k, v in config["data"].items() if k != "_target_"}, **overrides}
