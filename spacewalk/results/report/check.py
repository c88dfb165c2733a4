"""`python -m spacewalk.report --check`: each run of a table re-scored from its recorded predictions
(spacewalk.results.rescore.rescore_run, imported only when asked for) and held against its metrics.json; a cell or
comparison row whose run no longer reproduces is flagged `(!)` and named under its table. Numbers agree to float
rounding (`CHECK_TOLERANCE`); a number undefined (NaN) both ways agrees.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from spacewalk.core.errors import ConfigError
from spacewalk.results.layout import DECODED
from spacewalk.results.runs import RunDir

Rescore = Callable[[Path], Mapping[str, Any]]
CHECK_TOLERANCE = 1e-6  # a re-scored number may differ from metrics.json's by float rounding only
DECODED_PREFIX = DECODED + "/"


def default_rescore() -> Rescore:
    try:
        from spacewalk.results.rescore import rescore_run
    except ImportError as e:
        raise ConfigError(f"--check needs spacewalk.results.rescore.rescore_run, not importable here: {e}") from e
    return rescore_run


def cached(function: Callable[[Path], Any]) -> Callable[[Path], Any]:
    """`function` once per run directory: a run in several cells or tables is re-scored once."""
    done: dict[Path, Any] = {}

    def once(path: Path) -> Any:
        if path not in done:
            done[path] = function(path)
        return done[path]

    return once


def _value(value: Any) -> float | None:
    if isinstance(value, Mapping):  # an interval-like dict: its estimate
        value = value.get("estimate", value.get("value"))
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


def _agree(recorded: float, rescored: float | None) -> bool:
    if rescored is None or math.isnan(rescored) or math.isnan(recorded):
        return math.isnan(recorded) and (rescored is None or math.isnan(rescored))
    return math.isclose(rescored, recorded, rel_tol=0, abs_tol=CHECK_TOLERANCE)


def _rescored_run(run: RunDir, metrics: Sequence[str], rescore: Rescore) -> dict[str, Any]:
    """The run's numbers re-scored from its predictions; the plan decoding's (`decoded/...`) from the decoded
    predictions it wrote (`<run>/decoded/<name>/`, re-scored as a run of their own)."""
    rescored = dict(rescore(run.path))
    decoding = (run.metrics or {}).get(DECODED)
    if any(name.startswith(DECODED_PREFIX) for name in metrics) and isinstance(decoding, Mapping):
        folder = run.path / DECODED / str(decoding.get("decoding"))
        if folder.is_dir():
            rescored.update({DECODED_PREFIX + name: value for name, value in rescore(folder).items()})
    return rescored


def check_run(run: RunDir, metrics: Sequence[str], rescore: Rescore) -> list[str]:
    """What of `metrics` no longer comes out of the run's recorded predictions as metrics.json holds it."""
    rescored = _rescored_run(run, metrics, rescore)
    problems = []
    for name in metrics:
        recorded = run.headline.get(name)
        if recorded is None:
            continue
        if name not in rescored:
            problems.append(f"{run.path}: {name} was not re-scored")
            continue
        value = _value(rescored[name])
        if not _agree(recorded.value, value):
            problems.append(f"{run.path}: {name} is {recorded.value!r} in metrics.json, re-scored {value!r}")
    return problems


def check_table(table: Any, rescore: Rescore) -> None:
    """Each cell of a table of numbers (tables.Table) checked: its mismatches filled in."""
    for (_, column), cell in table.cells.items():
        for run in cell.group.runs:
            cell.mismatches += check_run(run, table.cell_metrics(column), rescore)


def check_scored(run: RunDir, scored: Any, metrics: Sequence[str], decoded: bool = False) -> list[str]:
    """A comparison side's run (its re-scored ScoredRun, from its predictions or its decoded ones) against the
    numbers its metrics.json records (`decoded/...` for decoded predictions)."""
    problems = []
    for name in metrics:
        recorded = run.headline.get(f"{DECODED_PREFIX}{name}" if decoded else name)
        rescored = scored.metrics.get(name)
        if recorded is None or rescored is None:
            continue
        if not _agree(recorded.value, rescored.value):
            problems.append(f"{run.path}: {name} is {recorded.value!r} in metrics.json, re-scored {rescored.value!r}")
    return problems
