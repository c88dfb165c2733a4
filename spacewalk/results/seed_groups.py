"""Runs that differ only in their seed, as one number each: the mean and standard deviation over the seeds beside a
pooled interval.

**Grouping.** Two runs are the same setting when their entry point (train, evaluate) and their command-line
overrides are the same once `seed=...` is left out (a re-test, `evaluate.py ckpt_path=<run>/...`, is grouped by its
other overrides and its trained run's setting) (`python train.py -m seed=0,1,2 model=lfb_avg,lfb_cat` gives two
groups of three). Overrides that the command line did not change are the config's defaults, the same for every job.

**Per headline number** (spacewalk/results/runs.py) of the group's runs that have it:
- `mean` and `std` over the seeds (the sample standard deviation, n - 1 in the denominator; none for one seed):
  how much the number moves with the training's randomness (initialisation, data order) on this test set;
- the **pooled interval** `[low, high]`: the mean over the seeds of each run's bootstrap bounds. Every seed is
  scored on the same items, and the bootstrap draws the same resamples for every run of a split
  (spacewalk/results/bootstrap.py), so the seeds' resampled numbers move together; where they move exactly together the
  percentile interval of the seeds' mean is the mean of their bounds, and where they move less than that (roughly
  normal resamples) it is narrower: the pooled interval is then conservative (measurements/pooled_interval_check.py
  compares the two on real runs: docs/architecture.md). It says how much the mean could move
  with another sample of the benchmark's units (recordings, questions, ...); the std says how much one run moves
  with another seed. They answer different questions, so both are printed, never added. (The exact bootstrap of the
  seeds' mean, from each run's per-item predictions and the shared resamples, is what a paired comparison computes:
  `python -m spacewalk.compare`.) A group where one seed has no interval gets none.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from spacewalk.results.runs import RunDir


@dataclass(frozen=True)
class SeedSummary:
    """One headline number over a group's seeds."""

    mean: float
    std: float | None  # None: one seed
    n: int
    low: float | None  # the pooled interval (module docstring)
    high: float | None
    values: tuple[float, ...]
    unit: str | None = None
    level: float | None = None


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
        """Each headline number the group's runs report (in the first run's order), over the runs that have it."""
        names: dict[str, None] = {}
        for run in self.runs:
            names.update(dict.fromkeys(run.headline))
        return {name: summarize([r.headline[name] for r in self.runs if name in r.headline]) for name in names}


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


def summarize(metrics: Sequence) -> SeedSummary:
    """Mean, std and the pooled interval (module docstring) of one number's runs (run_dirs.Metric each)."""
    values = tuple(m.value for m in metrics)
    if not values:
        raise ValueError("no run reports this number")
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else None
    bounded = all(m.low is not None and m.high is not None for m in metrics)
    low = statistics.fmean(m.low for m in metrics) if bounded else None
    high = statistics.fmean(m.high for m in metrics) if bounded else None
    units = {m.unit for m in metrics}
    levels = {m.level for m in metrics}
    return SeedSummary(mean, std, len(values), low, high, values, units.pop() if len(units) == 1 else None,
                       levels.pop() if len(levels) == 1 else None)


def format_summary(s: SeedSummary, digits: int = 2) -> str:
    """`19.09 ± 0.40 [15.12, 23.05]` (several seeds), `19.09 [15.12, 23.05]` (one run); no interval: no brackets."""
    text = f"{s.mean:.{digits}f}"
    if s.std is not None:
        text += f" ± {s.std:.{digits}f}"
    if s.low is not None and s.high is not None and not (math.isnan(s.low) or math.isnan(s.high)):
        text += f" [{s.low:.{digits}f}, {s.high:.{digits}f}]"
    return text


def seeds_text(group: SeedGroup) -> str:
    """`seeds 0, 1, 2`, `seed 0`, or `seed not recorded`: a table's note on a cell."""
    seeds = [str(s) for s in group.seeds if s is not None]
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}" if seeds else "seed not recorded"


def commits_text(group: SeedGroup) -> str:
    """The commits the group's runs were made at (12 digits), or `commit not recorded`."""
    commits = sorted({r.commit or "not recorded" for r in group.runs})
    return f"commit{'s' if len(commits) > 1 else ''} {', '.join(c[:12] if c != 'not recorded' else c for c in commits)}"
