"""The run directory: the contract between the run sequence (spacewalk/training/run.py, the evaluation loops) and
every results tool. Each file a run leaves is named here once, and metrics.json is written and read here.

    <run>/
      .hydra/overrides.yaml  .hydra/config.yaml  .hydra/hydra.yaml   Hydra's record of the job (train.py,
                                                                     evaluate.py): its command-line overrides, the
                                                                     composed config, the job name and the config
                                                                     groups' choices
      config.resolved.yaml   the config the run ran with, every interpolation resolved (what re-scoring reads)
      metrics.json           the run's numbers (`write_metrics`): "version", the official metrics, "intervals"
      predictions.json       the per-sample predictions in the benchmark's official format (step recognition,
                             intra-video retrieval); the multiple-choice tasks keep records.jsonl instead
                             (spacewalk/multiple_choice/records.py), HiREST its official prediction files
      provenance.json        the command, commit and time (spacewalk/results/provenance.py)
      decoded/<decoding>/    plan-decoded predictions: predictions.json and metrics.json of their own

A sweep directory holds one run per job (`0/`, `1/`, ...); spacewalk/results/runs.py finds them.

**metrics.json's version.** `METRICS_VERSION` says how its intervals were made: 2, a number whose unit is the
recording has Student's t interval over its per-recording values (spacewalk/results/statistics.py); a file
without "version" (1) is older, with the two-stage bootstrap over recordings there, and the tables recompute
those from the per-recording values beside them. A version newer than this code knows is refused.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from spacewalk.core.errors import DataError
from spacewalk.core.io import load_json, write_json

METRICS = "metrics.json"
PREDICTIONS = "predictions.json"
RUN_CONFIG = "config.resolved.yaml"
PROVENANCE = "provenance.json"
HYDRA = ".hydra"
OVERRIDES = "overrides.yaml"
HYDRA_CONFIG = "hydra.yaml"
COMPOSED_CONFIG = "config.yaml"
DECODED = "decoded"
METRICS_VERSION = 2
VERSION_KEY = "version"


def write_metrics(folder: str | Path, metrics: dict[str, Any]) -> dict[str, Any]:
    """`<folder>/metrics.json` (written whole, then renamed), with this code's version first; returns what it
    wrote."""
    written = {VERSION_KEY: METRICS_VERSION, **{k: v for k, v in metrics.items() if k != VERSION_KEY}}
    write_json(Path(folder) / METRICS, written)
    return written


def metrics_version(metrics: dict[str, Any]) -> int:
    version = metrics.get(VERSION_KEY, 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else -1


def check_file(path: Path) -> Path:
    """`path` when it is a file; a folder where a file is expected, or nothing there, is the user's error."""
    if path.is_dir():
        raise DataError("a folder, where a file is expected", file=path)
    if not path.is_file():
        raise DataError("file not found", file=path)
    return path


def read_metrics(path: str | Path) -> dict[str, Any]:
    """A metrics.json (or the one in a run directory): a JSON object of a version this code reads."""
    path = Path(path)
    path = path / METRICS if path.is_dir() and path.name != METRICS else path
    metrics = load_json(check_file(path))
    if not isinstance(metrics, dict):
        raise DataError(f"expected a JSON object, found {type(metrics).__name__}", file=path)
    version = metrics_version(metrics)
    if version < 1 or version > METRICS_VERSION:
        raise DataError(f"{VERSION_KEY} {metrics.get(VERSION_KEY)!r}: this code reads versions 1 to {METRICS_VERSION} "
                        "(a newer spacewalk wrote it?)", file=path, field=VERSION_KEY)
    return metrics


def read_yaml(path: str | Path) -> Any:
    """A YAML file of a run (Hydra's, the resolved config), its error naming the file."""
    import yaml

    path = check_file(Path(path))
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:  # one line: where, and what the parser expected
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise DataError(f"not valid YAML ({where}{getattr(e, 'problem', None) or e})", file=path) from None
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text ({e})", file=path) from None


def read_json_object(path: str | Path) -> dict[str, Any]:
    path = check_file(Path(path))
    value = load_json(path)
    if not isinstance(value, dict):
        raise DataError(f"expected a JSON object, found {type(value).__name__}", file=path)
    return value


def is_run_dir(path: Path) -> bool:
    """A run directory: Hydra's record, a metrics.json or a resolved config in it."""
    return path.is_dir() and any((path / name).exists() for name in (HYDRA, METRICS, RUN_CONFIG))


def is_decoded(path: Path) -> bool:
    """Plan-decoded predictions inside a run: `<run>/decoded/<decoding>/` with a predictions.json."""
    return path.parent.name == DECODED and (path / PREDICTIONS).is_file()


def decoded_dir(run: Path, decoding: str) -> Path:
    return run / DECODED / decoding


def number(x: Any) -> float | None:
    """A JSON number as a float (NaN kept: an undefined number is shown as one, never dropped); None otherwise."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def is_undefined(x: float | None) -> bool:
    return x is not None and math.isnan(x)
