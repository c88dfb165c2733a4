"""Bootstrap confidence intervals of a benchmark's headline numbers, over the benchmark's own unit, where its units
are many (questions, queries, samples within recordings); a number over recordings has Student's t interval
instead (spacewalk/results/statistics.py says why), in the same shape.

Two cases, one output shape (`Interval.as_dict`: estimate, low, high, level, unit, n, n_resamples, seed, method):

- **flat units** (questions, queries, samples): `flat_interval(values, ...)` is `scipy.stats.bootstrap` on the
  per-unit values (a percentile interval by default, `method="BCa"` where the statistic allows it) with a
  numpy Generator seeded from `seed`, so the same values and options give the same interval.
- **recordings, then units within them** (Spacewalk-18 step recognition, whose official number is a metric per
  video, then the unweighted mean over videos): scipy has no cluster resampling, so `grouped_interval` does the
  two-stage bootstrap itself (our own, not a library's): each resample draws the recordings with replacement,
  then, for each recording drawn, its units with replacement (independently for each draw of the same
  recording); the recording's metric is computed on the drawn units and the resample's value is the mean over
  the drawn recordings (nan ones left out, as the official mean does). The interval is the percentile one of
  those values. `within=False` resamples the recordings only (a metric whose units are not exchangeable, such
  as IoU over a recording's timeline); `between=False` the units within each recording only, every recording
  kept once (stratified: intra-video retrieval, whose unit is the sample but whose number is per video).

The draws depend only on `seed` and the units' counts (group sizes), never on the values: two runs scored on
the same split draw the same resamples, so a paired comparison of two runs can reuse them (`grouped_draws`).

A group's metric receives its units as multiplicities: `metric(group, counts)` with `counts` [m, n_g] integers
(how often each of the group's n_g units is in each of m resamples; the identity resample is all ones) and
returns m values. Counts rather than index lists let a metric be a weighted sum (accuracy) or use one sort
per recording for all resamples (average precision).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from spacewalk.core.errors import ConfigError

METHODS = ("percentile", "basic", "BCa")


@dataclass(frozen=True)
class BootstrapOptions:
    """The config's `metrics.bootstrap`: resamples (0: no intervals), the confidence level, the seed, the method
    of the flat case (the grouped case is always percentile)."""

    n_resamples: int = 1000
    level: float = 0.95
    seed: int = 0
    method: str = "percentile"

    def __post_init__(self):
        if not isinstance(self.n_resamples, int) or self.n_resamples < 0:
            raise ConfigError(f"metrics.bootstrap.n_resamples must be a non-negative integer (0: no intervals), "
                              f"got {self.n_resamples!r}")
        if not 0 < self.level < 1:
            raise ConfigError(f"metrics.bootstrap.level must lie strictly between 0 and 1, got {self.level!r}")
        if self.method not in METHODS:
            raise ConfigError(f"metrics.bootstrap.method must be one of {METHODS}, got {self.method!r}")

    @property
    def enabled(self) -> bool:
        return self.n_resamples > 0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> BootstrapOptions:
        """From the config's mapping (None or missing keys: the defaults); unknown keys are refused."""
        values = dict(values or {})
        unknown = set(values) - {"n_resamples", "level", "seed", "method"}
        if unknown:
            raise ConfigError(f"metrics.bootstrap has unknown keys {sorted(unknown)}: n_resamples, level, seed, "
                              "method")
        return cls(**values)


@dataclass(frozen=True)
class Interval:
    estimate: float | None  # the metric on the data as it is (the official number)
    low: float | None  # None: fewer than two units, or every resample undefined
    high: float | None
    level: float
    unit: str
    n: int  # the number of top-level units (recordings, questions, ...; a stratified bootstrap's: all units)
    n_resamples: int
    seed: int
    method: str
    # where metrics.json holds the per-recording values an interval over recordings is made of ("per_video",
    # beside "intervals"); None for the bootstrap's intervals
    values: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "values" or v is not None}


def _clean(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def flat_interval(values: Sequence[float] | np.ndarray, options: BootstrapOptions, unit: str,
                  statistic: Callable[..., Any] = np.mean, scale: float = 1.0,
                  estimate: float | None = None) -> Interval:
    """The interval of `statistic(values)` over independent units, by scipy.stats.bootstrap. `statistic` takes
    `axis` (vectorised); `scale` multiplies estimate and bounds (100: fractions reported in percent);
    `estimate`: the official number, when the caller has it (the same value up to the order of float operations)."""
    from scipy import stats

    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"need a 1-d array of per-unit values, got shape {values.shape}")
    if estimate is None and len(values):
        estimate = _clean(float(statistic(values, axis=-1)) * scale)
    low = high = None
    if len(values) >= 2 and not np.all(values == values[0]):
        result = stats.bootstrap((values,), statistic, n_resamples=options.n_resamples, vectorized=True,
                                 confidence_level=options.level, method=options.method,
                                 rng=np.random.default_rng(options.seed))
        low, high = (_clean(float(result.confidence_interval.low) * scale),
                     _clean(float(result.confidence_interval.high) * scale))
    elif len(values) >= 2:  # every unit alike: every resample gives the estimate (scipy would warn and give nan)
        low = high = estimate
    return Interval(estimate, low, high, options.level, unit, len(values), options.n_resamples, options.seed,
                    options.method)


def _counts(indices: np.ndarray, n: int) -> np.ndarray:
    """[m, k] indices into 0..n-1 -> [m, n] multiplicities."""
    m = len(indices)
    flat = (indices + (np.arange(m) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=m * n).reshape(m, n)


@dataclass(frozen=True)
class GroupedDraws:
    """The resamples of a two-stage bootstrap: `outer` [B, G] the groups drawn per resample; `inner[g]` [m_g, n_g]
    the multiplicities of group g's units in each of its m_g draws, in the order of its occurrences in `outer`
    (row-major)."""

    outer: np.ndarray
    inner: list[np.ndarray]


def grouped_draws(sizes: Sequence[int], options: BootstrapOptions, within: bool = True,
                  between: bool = True) -> GroupedDraws:
    """The draws for groups of `sizes` units: recordings with replacement (`between`; otherwise every recording
    once: a bootstrap stratified by recording), then each drawn recording's units with replacement (`within`;
    otherwise all of them once). From `options.seed` and `sizes` alone."""
    if not (within or between):
        raise ValueError("a bootstrap resamples the groups, their units or both")
    rng = np.random.default_rng(options.seed)
    n_groups, b = len(sizes), options.n_resamples
    if between:
        outer = rng.integers(0, n_groups, size=(b, n_groups))
    else:
        outer = np.tile(np.arange(n_groups), (b, 1))
    occurrences = np.bincount(outer.ravel(), minlength=n_groups)
    inner = []
    for g, n in enumerate(sizes):
        m = int(occurrences[g])
        if within:
            inner.append(_counts(rng.integers(0, n, size=(m, n)), n))
        else:
            inner.append(np.ones((m, n), dtype=np.int64))
    return GroupedDraws(outer, inner)


def grouped_replicates(groups: Sequence[Any], metric: Callable[[Any, np.ndarray], np.ndarray],
                       draws: GroupedDraws) -> np.ndarray:
    """The B resampled values: per resample, the nan-ignoring mean of the drawn groups' metrics (nan when none is
    defined)."""
    b, n_groups = draws.outer.shape
    per_slot = np.empty(b * n_groups)
    # the slots of group g, in row-major order, take its draws' values in order
    order = np.argsort(draws.outer.ravel(), kind="stable")
    values = [np.asarray(metric(group, counts), dtype=np.float64).reshape(len(counts))
              for group, counts in zip(groups, draws.inner, strict=True)]
    per_slot[order] = np.concatenate(values) if values else np.empty(0)
    per_slot = per_slot.reshape(b, n_groups)
    defined = ~np.isnan(per_slot)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(defined, per_slot, 0.0).sum(axis=1) / defined.sum(axis=1)


def grouped_interval(groups: Sequence[Any], sizes: Sequence[int], metric: Callable[[Any, np.ndarray], np.ndarray],
                     options: BootstrapOptions, unit: str, within: bool = True, scale: float = 1.0,
                     estimate: float | None = None, between: bool = True) -> Interval:
    """The two-stage (recordings, then units) percentile interval of the mean over groups of `metric`.

    `estimate`: the official number, when the caller has it (otherwise the mean of the groups' metrics on all
    their units, nan groups left out); `scale` multiplies the resampled values (100: percent)."""
    if len(groups) != len(sizes):
        raise ValueError(f"{len(groups)} groups but {len(sizes)} sizes")
    if estimate is None:
        whole = np.array([float(np.asarray(metric(g, np.ones((1, n), dtype=np.int64)))[0])
                          for g, n in zip(groups, sizes, strict=True)])
        estimate = float(np.nanmean(whole)) * scale if (~np.isnan(whole)).any() else None
    low = high = None
    if len(groups) >= 1 and sum(sizes) >= 2:
        replicates = grouped_replicates(groups, metric, grouped_draws(sizes, options, within, between)) * scale
        replicates = replicates[~np.isnan(replicates)]
        if len(replicates):
            alpha = (1 - options.level) / 2
            low, high = (float(x) for x in np.quantile(replicates, [alpha, 1 - alpha]))
    method = "percentile (two-stage: ours)" if between and within else (
        "percentile (recordings: ours)" if between else "percentile (stratified by recording: ours)")
    # n: the top-level units (the recordings; the samples when the recordings are kept)
    return Interval(_clean(estimate), low, high, options.level, unit, len(groups) if between else int(sum(sizes)),
                    options.n_resamples, options.seed, method)


def accuracy_intervals(correct: Sequence[bool] | np.ndarray, options: BootstrapOptions, name: str = "accuracy",
                       unit: str = "questions", groups: Mapping[str, Sequence[Any]] | None = None,
                       estimates: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Percent accuracy's interval over independent units (`flat_interval` of the 0/1 correctness), as
    {name: interval}, and per group value with `groups` ({"domain": each unit's domain, ...}):
    {"per_domain": {value: interval}} (each value's units alone). `estimates`: the official numbers, as
    {name: value, "per_domain": {value: number}}, so that each interval's estimate is the number beside it."""
    correct = np.asarray(correct, dtype=np.float64)
    estimates = estimates or {}
    out: dict[str, Any] = {name: flat_interval(correct, options, unit, scale=100,
                                               estimate=estimates.get(name)).as_dict()}
    for group, keys in (groups or {}).items():
        keys = np.asarray(list(keys), dtype=object)
        if len(keys) != len(correct):
            raise ValueError(f"{len(correct)} units but {len(keys)} {group} values")
        official = estimates.get(f"per_{group}", {})
        out[f"per_{group}"] = {str(value): flat_interval(correct[keys == value], options, unit, scale=100,
                                                         estimate=official.get(value)).as_dict()
                               for value in sorted(set(keys.tolist()), key=str)}
    return out


def _numbers(summary: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The float leaves of a nested summary, keyed by their path ("recall/0.5"); counts (ints) left out."""
    out: dict[str, float] = {}
    for key, value in summary.items():
        if isinstance(value, Mapping):
            out |= _numbers(value, f"{prefix}{key}/")
        elif isinstance(value, float):
            out[f"{prefix}{key}"] = value
    return out


def summary_intervals(units: Sequence[Any], summarise: Callable[[list], Mapping[str, Any]],
                      options: BootstrapOptions, unit: str) -> dict[str, dict[str, Any]]:
    """The interval of every number `summarise(units)` reports (its float leaves, by path), over independent
    units: scipy.stats.bootstrap resamples the units' indices and `summarise` scores each resample, all the
    numbers from the same resamples. The estimates are `summarise(units)`, the official numbers."""
    from scipy import stats

    units = list(units)
    estimates = _numbers(summarise(units))
    names = list(estimates)
    low: dict[str, float | None] = dict.fromkeys(names)
    high: dict[str, float | None] = dict.fromkeys(names)
    if len(units) >= 2 and names:
        def statistic(indices: np.ndarray) -> np.ndarray:
            numbers = _numbers(summarise([units[i] for i in indices]))
            return np.array([numbers[name] for name in names])

        result = stats.bootstrap((np.arange(len(units)),), statistic, n_resamples=options.n_resamples,
                                 vectorized=False, confidence_level=options.level, method=options.method,
                                 rng=np.random.default_rng(options.seed))
        bounds = zip(np.atleast_1d(result.confidence_interval.low), np.atleast_1d(result.confidence_interval.high),
                     strict=True)
        for name, (lo, hi) in zip(names, bounds, strict=True):
            # every resample alike (a constant number): scipy's percentile is that value, BCa nan
            low[name], high[name] = (_clean(float(lo)), _clean(float(hi)))
    return {name: Interval(estimates[name], low[name], high[name], options.level, unit, len(units),
                           options.n_resamples, options.seed, options.method).as_dict() for name in names}
