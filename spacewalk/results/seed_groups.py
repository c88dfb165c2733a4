"""Runs that differ only in their seed, as one number each: the mean and standard deviation over the seeds beside
the setting's interval.

**Grouping.** Two runs are the same setting when their entry point (train, evaluate) and their command-line
overrides are the same once `seed=...` is left out (a re-test, `evaluate.py ckpt_path=<run>/...`, is grouped by its
other overrides and its trained run's setting) (`python train.py -m seed=0,1,2 model=lfb_avg,lfb_cat` gives two
groups of three). Overrides that the command line did not change are the config's defaults, the same for every job.

**Per headline number** (spacewalk/results/runs.py) of the group's runs:
- `mean` and `std` over the seeds (the sample standard deviation, n - 1 in the denominator; none for one seed):
  how much the number moves with the training's randomness (initialisation, data order) on this test set;
- the interval `[low, high]` answers "where would this recipe's number fall on other recordings with other
  seeds" (spacewalk/results/statistics.py, `seeds_estimate`): for a number over recordings, from each run's
  per-recording values, its variance the recordings' part (the spread over recordings of the seeds' mean) plus
  the seeds' part (the spread of the seeds' numbers), Welch-Satterthwaite degrees of freedom; for a number over
  many units (questions), the units' part from each run's bootstrap interval plus the seeds' part. One run: its
  own interval (over recordings: Student's t over its per-recording values). A group where a run has no
  interval gets none.

A number that is undefined (NaN) in any of the group's runs, or missing from some of them, is never averaged
away: the summary says which (`undefined`, `missing`) and the tables flag the cell.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from spacewalk.results.runs import Metric, RunDir
from spacewalk.results.statistics import flat_seeds_estimate, se_from_interval, seeds_estimate

RECIPE = "over recordings and seeds"
FLAT_RECIPE = "over the units and seeds"


@dataclass(frozen=True)
class SeedSummary:
    """One headline number over a group's seeds."""

    mean: float  # nan: undefined in some run
    std: float | None  # None: one seed
    n: int
    low: float | None  # the setting's interval (module docstring)
    high: float | None
    values: tuple[float, ...]
    unit: str | None = None
    level: float | None = None
    method: str | None = None  # what the interval is over (RECIPE, FLAT_RECIPE, or one run's own)
    undefined: int = 0  # runs in which the number is NaN
    missing: int = 0  # runs of the group that do not report it at all

    @property
    def flagged(self) -> bool:
        return bool(self.undefined or self.missing)


@dataclass
class SeedGroup:
    """Runs that differ only in their seed."""

    entry: str | None
    overrides: tuple[str, ...]  # without seed=...
    runs: list[RunDir]

    @property
    def seeds(self) -> list:
        """Each run's seed (a re-test's: its trained run's)."""
        return [r.seed for r in self.runs]

    def command(self) -> str | None:
        """One command that runs the whole group: the overrides with `seed=<the seeds>` (a multirun when several)."""
        from spacewalk.results.provenance import command_line

        if self.entry is None:
            return None
        if any(r.origin is not None or r.given("ckpt_path") for r in self.runs):  # a re-test of each seed's run
            return "; ".join(r.command or "not recorded" for r in self.runs)
        seeds = [str(s) for s in self.seeds if s is not None]
        extra = [f"seed={','.join(seeds)}"] if seeds and (len(seeds) > 1 or any(
            o.split("=", 1)[0].lstrip("+~") == "seed" for o in self.runs[0].overrides)) else []
        flag = ["-m"] if len(self.runs) > 1 else []
        return command_line(self.entry, [*flag, *self.overrides, *extra])

    def summary(self) -> dict[str, SeedSummary]:
        """Each headline number the group's runs report (in the first run's order)."""
        names: dict[str, None] = {}
        for run in self.runs:
            names.update(dict.fromkeys(run.headline))
        return {name: summarize([r.headline[name] for r in self.runs if name in r.headline],
                                missing=sum(name not in r.headline for r in self.runs)) for name in names}


def without_seed(overrides: Iterable[str]) -> tuple[str, ...]:
    return tuple(o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in ("seed", "ckpt_path"))


def setting(run: RunDir) -> tuple:
    """What a run's seeds share: its entry point and overrides but the seed, and for a re-test
    (evaluate.py ckpt_path=...), whose checkpoint differs per seed, its trained run's setting instead of the path."""
    return (run.entry, tuple(sorted(without_seed(run.overrides))), setting(run.origin) if run.origin else None)


def group_by_seed(runs: Iterable[RunDir]) -> list[SeedGroup]:
    """The runs grouped by everything but the seed, groups in the order of their first run."""
    groups: dict[tuple, SeedGroup] = {}
    for run in runs:
        key = setting(run)
        if key not in groups:
            groups[key] = SeedGroup(run.entry, without_seed(run.overrides), [])
        groups[key].runs.append(run)
    return list(groups.values())


def _per_recording_matrix(metrics: Sequence[Metric]) -> np.ndarray | None:
    """[S, G] per-recording values of the runs, where every run has them for the same recordings."""
    if not all(m.per_recording for m in metrics):
        return None
    recordings = [tuple(r for r, _ in m.per_recording) for m in metrics]
    if len(set(recordings)) > 1:
        return None
    return np.array([[v for _, v in m.per_recording] for m in metrics], dtype=np.float64)


def summarize(metrics: Sequence[Metric], missing: int = 0) -> SeedSummary:
    """Mean, std and the interval (module docstring) of one number's runs (runs.Metric each); `missing`: the
    group's runs that do not report it."""
    values = tuple(m.value for m in metrics)
    if not values:
        raise ValueError("no run reports this number")
    units = {m.unit for m in metrics}
    levels = {m.level for m in metrics}
    unit, level = (units.pop() if len(units) == 1 else None), (levels.pop() if len(levels) == 1 else None)
    undefined = sum(math.isnan(v) for v in values)
    if undefined:
        return SeedSummary(math.nan, None, len(values), None, None, values, unit, level, None, undefined, missing)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else None
    low = high = method = None
    matrix = _per_recording_matrix(metrics)
    if matrix is not None:
        made = seeds_estimate(matrix, level or 0.95, bounds=(0.0, 100.0))  # a number per recording is a percentage
        low, high = made.low, made.high
        method = RECIPE if len(values) > 1 else "over recordings"
    elif all(m.low is not None and m.high is not None for m in metrics):
        if len(values) == 1:
            low, high, method = metrics[0].low, metrics[0].high, "over the units"
        else:
            ses = [se_from_interval(m.low, m.high, m.level or 0.95) for m in metrics]
            ns = [m.n for m in metrics if m.n is not None]
            made = flat_seeds_estimate(values, statistics.fmean(ses), min(ns) if ns else None, level or 0.95)
            low, high, method = made.low, made.high, FLAT_RECIPE
    return SeedSummary(mean, std, len(values), low, high, values, unit, level, method, 0, missing)


def format_summary(s: SeedSummary, digits: int = 2) -> str:
    """`19.09 ± 0.40 [15.12, 23.05]` (several seeds), `19.09 [15.12, 23.05]` (one run); no interval: no brackets;
    `undefined` where a run's number is NaN; a number some runs lack says how many have it."""
    if s.undefined:
        return f"undefined in {s.undefined} of {s.n + s.missing} runs"
    text = f"{s.mean:.{digits}f}"
    if s.std is not None:
        text += f" ± {s.std:.{digits}f}"
    if s.low is not None and s.high is not None and not (math.isnan(s.low) or math.isnan(s.high)):
        text += f" [{s.low:.{digits}f}, {s.high:.{digits}f}]"
    if s.missing:
        text += f" ({s.n} of {s.n + s.missing} runs)"
    return text


def seeds_text(group: SeedGroup) -> str:
    """`seeds 0, 1, 2`, `seed 0`, or `seed not recorded`: a table's note on a cell."""
    seeds = [str(s) for s in group.seeds if s is not None]
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}" if seeds else "seed not recorded"


def commits_text(group: SeedGroup) -> str:
    """The commits the group's runs were made at (12 digits), or `commit not recorded`."""
    commits = sorted({r.commit or "not recorded" for r in group.runs})
    return f"commit{'s' if len(commits) > 1 else ''} {', '.join(short_commit(c) for c in commits)}"


def short_commit(commit: str) -> str:
    """12 digits of a commit, "+dirty" kept (tracked files differed from it)."""
    if commit == "not recorded":
        return commit
    return commit.split("+")[0][:12] + ("+dirty" if commit.endswith("+dirty") else "")
