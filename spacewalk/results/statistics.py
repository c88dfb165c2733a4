"""The tests and intervals of the results tools, chosen for how few recordings the benchmarks have.

**Two claims, said apart.** A difference between two runs can answer two questions, and each number the tools
print says which:

- *these runs, these recordings*: would the same two runs differ on another draw of the samples of the same
  recordings? The recordings and the trained models are fixed; only the samples within the recordings vary
  (units: thousands of samples). A paired bootstrap stratified by recording answers it (spacewalk/results/
  bootstrap.py, `grouped_draws(between=False)`): every recording kept, its samples drawn again, the same draws
  for both runs. This is where the samples-within-recordings stage of the bootstrap belongs. A number whose
  recording has no sampled units (Spacewalk-18's IoU: a recording's samples tile its timeline) has no such claim.
- *on new recordings* (and *recipes*, where seeds are given): would the difference hold on other recordings
  (and, for a recipe, other seeds)? The unit is the recording: the official step-recognition numbers are a
  metric per recording, then the mean, so each recording gives one paired difference d_g (its within-recording
  sampling noise included), and G recordings give G of them.

**Recordings as the unit** (Spacewalk-18 step recognition: 6 test recordings, 2 in the synthetic default).

- *p*: the exact paired randomization test (Fisher 1935, section 21; Good 2005, ch. 3): under the null
  hypothesis that the two sides are exchangeable within each recording, each d_g is as likely to have the
  other sign, so the observed mean is compared with the means of all 2^G sign patterns of the d_g (what
  `scipy.stats.permutation_test(permutation_type="samples")` computes; `sign_flip_test` says why it enumerates
  them itself): every pattern while G <= 16, a Monte Carlo sample of 9999 beyond (p = (1 + k) / (1 + B), never
  0). It needs no
  assumption about the shape of the d_g, and it cannot be more confident than the recordings allow: the
  smallest two-sided p is 2 / 2^G, so 5 recordings or fewer can never reach 0.05 (`SignFlip.reachable`). The
  tools then say so instead of printing a p.
- *interval*: Student's t over the d_g (or a run's per-recording values), G - 1 degrees of freedom:
  mean +- t_{G-1} s / sqrt(G). Why not the bootstrap over recordings: it draws from the G values as if they
  were the population, so its spread is the plug-in variance (divisor G, not G - 1) and its quantiles are the
  normal's, not t's; both shrink the interval most where G is small (measurements/paired_test_calibration.py,
  docs/statistics.md: at G = 6 its 95 % interval held the true difference of 90 % of the pairs, 82 % for groups
  of seeds, and it called 10 % and 17 % of null pairs different at 0.05; at G = 2, 75 % and 47 %). A studentized
  bootstrap needs a variance estimate inside each resample, which a resample of 2 to 6 recordings cannot give
  (Davison & Hinkley 1997, section 5.2.1; Field & Welsh 2007 on cluster bootstraps with few clusters). t is exact
  for normal d_g and, by the simulation, keeps its coverage at G = 2 to 50 for differences spread as the
  earlier real runs' were (2.5 points between recordings). The interval is cut to the metric's range (0 to 100
  for a percentage): the truth lies inside it, so the coverage is unchanged.

**Many units** (samples within recordings kept, questions, queries): the bootstrap stays (spacewalk/results/
bootstrap.py: scipy.stats.bootstrap, or our stratified one) for a run's interval in metrics.json and for the
samples of these recordings, with a percentile interval and the centred two-sided p; the same simulation shows
it holds there (false positives near 5 %, coverage near 95 %). A paired comparison over flat units whose number
is a mean of per-unit values (questions) uses the sign-flip test and t over the per-unit differences instead:
with few questions answered differently (a 27-question type), the percentile interval of the paired bootstrap
covers 86 %, t 94 % (docs/statistics.md).

**Recipes** (seeds and recordings both vary; a side of several runs differing only in their seed): the
difference of the sides' means D = mean over recordings of (mean of B's seeds - mean of A's seeds), with
Var(D) estimated as the recordings' part, s^2(seed-mean differences over recordings) / G, plus each side's
seeds' part, s^2(its runs' numbers) / S. The degrees of freedom are Welch-Satterthwaite's (Satterthwaite 1946;
Welch 1947), the interval and the test t's, never narrower (nor p smaller) than either part's own t interval
(the pooled degrees of freedom can exceed a part's, so adding a part could otherwise narrow it). The seeds' part
also holds the seeds-by-recordings spread that the recordings' part holds already, so the estimate errs on the
wide side. A side of one run adds no seeds' part
(a run that trains nothing, such as zero-shot, has none; for a trained one the claim then holds for that run).
The seed groups of a table (spacewalk/results/seed_groups.py) give one setting's number the same way.

**Power** (`detectable_difference`): the smallest true difference found at the given level with the given
probability, from a difference's spread and the unit counts: over recordings, for the exact sign-flip test,
by simulating normal d_g (G <= 10) or from the non-central t (beyond, where the two tests agree to a few
percent: at G = 8 and 10 the t-test needs 1.15 and 0.99 standard deviations, the sign-flip test 1.18 and 1.01);
over many units, (z_{1-alpha/2} + z_{power}) times the standard error.

References: R. A. Fisher, The Design of Experiments (1935); P. Good, Permutation, Parametric and Bootstrap Tests of
Hypotheses (2005); A. C. Davison & D. V. Hinkley, Bootstrap Methods and their Application (1997); C. A. Field &
A. H. Welsh, Bootstrapping clustered data, JRSS B 69 (2007); F. E. Satterthwaite, Biometrics Bulletin 2 (1946);
B. L. Welch, Biometrika 34 (1947); B. Efron & R. Tibshirani, An Introduction to the Bootstrap (1993).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from spacewalk.results.bootstrap import Interval

EXACT_UP_TO = 16  # recordings: every sign pattern up to 2^16 = 65536 of them
MONTE_CARLO = 9999  # sign patterns drawn beyond
SIMULATED_UP_TO = 10  # the power of the sign-flip test simulated up to 10 recordings, the t-test's beyond
ALPHA = 0.05
POWER = 0.8
T_METHOD = "Student's t over recordings (G - 1 degrees of freedom)"


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return values[np.isfinite(values)]


# ---- over recordings ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SignFlip:
    """The exact paired sign-flip test of per-recording differences."""

    p: float
    n: int  # recordings with a difference (a recording undefined on either side is left out)
    exact: bool  # every sign pattern (else a Monte Carlo sample of them)
    smallest_p: float  # the smallest p any data could give with these recordings

    def reachable(self, alpha: float = ALPHA) -> bool:
        """Whether any data could reach p <= alpha with these recordings (2 / 2^G <= alpha: G >= 6 at 0.05)."""
        return self.smallest_p <= alpha + 1e-12


def smallest_sign_flip_p(n: int) -> float:
    """The smallest two-sided p of the sign-flip test over n recordings: the observed pattern and its mirror."""
    return 1.0 if n < 1 else min(1.0, math.ldexp(1.0, 1 - n))  # 2 / 2^n, 0.0 far below float's range


@cache
def _sign_patterns(n: int) -> np.ndarray:
    """[2^n, n] every pattern of n signs (+-1)."""
    return (((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1) * 2 - 1).astype(np.float64)


def sign_flip_test(differences: Sequence[float] | np.ndarray, seed: int = 0) -> SignFlip:
    """Two-sided p of the mean of `differences` (one per recording) against all its sign patterns (module
    docstring); non-finite differences are left out. The same p as scipy.stats.permutation_test(
    permutation_type="samples") (tests/library/test_statistics.py holds them equal), enumerated here as one
    matrix product: scipy's loop takes half a second at 16 recordings, and the calibration simulation runs
    the test tens of thousands of times."""
    d = _finite(differences)
    n = len(d)
    if n == 0:
        return SignFlip(1.0, 0, True, 1.0)
    if not np.any(d):
        return SignFlip(1.0, n, True, smallest_sign_flip_p(n))
    observed = abs(d.sum())
    tolerance = 1e-9 * max(1.0, float(np.abs(d).sum()))  # equal sums that float addition tells apart
    if n <= EXACT_UP_TO:
        extreme = np.abs(_sign_patterns(n) @ d) >= observed - tolerance
        return SignFlip(float(extreme.mean()), n, True, smallest_sign_flip_p(n))
    signs = np.random.default_rng(seed).integers(0, 2, size=(MONTE_CARLO, n)) * 2.0 - 1.0
    extreme = np.abs(signs @ d) >= observed - tolerance
    return SignFlip(float((1 + extreme.sum()) / (1 + MONTE_CARLO)), n, False, smallest_sign_flip_p(n))


def t_quantile(level: float, df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2, df))


@dataclass(frozen=True)
class Estimate:
    """A number with its standard error, degrees of freedom and interval (None where there is too little data)."""

    estimate: float
    se: float | None
    df: float | None
    low: float | None
    high: float | None
    level: float
    p_value: float | None = None  # set where the interval is not estimate +- t(df) se (`_from_parts`)

    @property
    def p(self) -> float | None:
        """The two-sided t-test p of estimate = 0."""
        if self.p_value is not None:
            return self.p_value
        if self.se is None or self.df is None:
            return None
        return _t_p(self.estimate, self.se, self.df)


def _t_p(estimate: float, se: float, df: float) -> float:
    from scipy import stats

    if se == 0:
        return 1.0 if estimate == 0 else 0.0
    return float(2 * stats.t.sf(abs(estimate) / se, df))


def _clip(x: float | None, bounds: tuple[float, float] | None) -> float | None:
    if x is None or bounds is None:
        return x
    return min(max(x, bounds[0]), bounds[1])


def t_interval(values: Sequence[float] | np.ndarray, level: float = 0.95,
               bounds: tuple[float, float] | None = None) -> Estimate:
    """The mean of per-recording `values` with Student's t interval, G - 1 degrees of freedom (module
    docstring); `bounds`: the metric's range, the interval cut to it. Fewer than two finite values: no
    interval."""
    values = _finite(values)
    if len(values) == 0:
        return Estimate(math.nan, None, None, None, None, level)
    mean = float(values.mean())
    if len(values) < 2:
        return Estimate(mean, None, None, None, None, level)
    se = float(values.std(ddof=1) / math.sqrt(len(values)))
    half = t_quantile(level, len(values) - 1) * se
    return Estimate(mean, se, len(values) - 1, _clip(mean - half, bounds), _clip(mean + half, bounds), level)


def recording_interval(values: Sequence[float | None], level: float, unit: str, estimate: float | None = None,
                       bounds: tuple[float, float] | None = (0.0, 100.0), where: str = "per_video") -> Interval:
    """A run's number over recordings, as metrics.json's "intervals" holds it: `estimate` (the official number;
    default the mean of the defined values), Student's t interval over the per-recording `values` (None or nan:
    undefined, left out as the official mean leaves them out); `where`: where metrics.json keeps the values."""
    clean = np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    t = t_interval(clean, level, bounds)
    n = int(np.isfinite(clean).sum())
    if estimate is None and n:
        estimate = t.estimate
    return Interval(estimate, t.low, t.high, level, unit, n, 0, 0, T_METHOD, where)


# ---- seeds and recordings ----------------------------------------------------------------------------------------

def satterthwaite(parts: Sequence[tuple[float, float]]) -> tuple[float, float | None]:
    """Welch-Satterthwaite: the parts (variance of a mean, its degrees of freedom) summed, and the degrees of
    freedom of the sum (None where every part is 0)."""
    total = sum(v for v, _ in parts)
    denominator = sum(v * v / df for v, df in parts if v > 0)
    return total, (total * total / denominator if denominator > 0 else None)


def _per_recording(runs: np.ndarray) -> np.ndarray:
    """[S, G] per-recording values of S runs (nan: undefined) -> [S, G'] over the recordings every run defines."""
    runs = np.atleast_2d(np.asarray(runs, dtype=np.float64))
    return runs[:, np.all(np.isfinite(runs), axis=0)]


def seeds_estimate(runs: np.ndarray, level: float = 0.95, bounds: tuple[float, float] | None = None) -> Estimate:
    """One setting's number over S runs that differ in their seed, from their [S, G] per-recording values: the
    mean over seeds and recordings, its variance the recordings' part plus the seeds' (module docstring)."""
    runs = _per_recording(runs)
    s, g = runs.shape
    if g == 0:
        return Estimate(math.nan, None, None, None, None, level)
    mean = float(runs.mean())
    parts = []
    if g >= 2:
        parts.append((float(runs.mean(axis=0).var(ddof=1)) / g, g - 1))
    if s >= 2:
        parts.append((float(runs.mean(axis=1).var(ddof=1)) / s, s - 1))
    return _from_parts(mean, parts, level, bounds, complete=g >= 2)


def _from_parts(estimate: float, parts: list[tuple[float, float]], level: float,
                bounds: tuple[float, float] | None, complete: bool = True) -> Estimate:
    """The Welch-Satterthwaite t interval and p of a sum of variance parts, each (variance of the mean, df),
    never narrower (nor p smaller) than any part's own t interval: the pooled degrees of freedom can exceed a
    part's, so adding a part (another seed's spread) could otherwise narrow the interval."""
    if not parts or not complete:
        return Estimate(estimate, None, None, None, None, level)
    variance, df = satterthwaite(parts)
    if df is None:  # no spread at all: every recording and seed alike
        return Estimate(estimate, 0.0, math.inf, _clip(estimate, bounds), _clip(estimate, bounds), level, 1.0
                        if estimate == 0 else 0.0)
    se = math.sqrt(variance)
    half = max([t_quantile(level, df) * se] + [t_quantile(level, d) * math.sqrt(v) for v, d in parts if v > 0])
    p = max([_t_p(estimate, se, df)] + [_t_p(estimate, math.sqrt(v), d) for v, d in parts if v > 0])
    return Estimate(estimate, se, df, _clip(estimate - half, bounds), _clip(estimate + half, bounds), level, p)


def recipes_difference(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> Estimate:
    """B - A for two settings of S_A and S_B seeds, from their [S, G] per-recording values on the same
    recordings: the recordings' part from the seed-mean differences, each side's seeds' part (module
    docstring). Recordings undefined in any run are left out."""
    a, b = np.atleast_2d(np.asarray(a, dtype=np.float64)), np.atleast_2d(np.asarray(b, dtype=np.float64))
    both = _per_recording(np.vstack([a, b]))
    a, b = both[: len(a)], both[len(a):]
    g = both.shape[1]
    if g == 0:
        return Estimate(math.nan, None, None, None, None, level)
    d = b.mean(axis=0) - a.mean(axis=0)
    parts = [(float(d.var(ddof=1)) / g, g - 1)] if g >= 2 else []
    for side in (a, b):
        if len(side) >= 2:
            parts.append((float(side.mean(axis=1).var(ddof=1)) / len(side), len(side) - 1))
    return _from_parts(float(d.mean()), parts, level, None, complete=g >= 2)


def flat_recipes_difference(a: Sequence[float], b: Sequence[float], se_units: float, n_units: int,
                            level: float = 0.95) -> Estimate:
    """B - A for two settings whose number is over many units (questions): the paired units' standard error of
    the difference of the seeds' means (`se_units`, from the paired bootstrap; n_units - 1 degrees of freedom)
    plus each side's seeds' part."""
    a, b = _finite(a), _finite(b)
    parts = [(se_units ** 2, max(1, n_units - 1))]
    for side in (a, b):
        if len(side) >= 2:
            parts.append((float(side.var(ddof=1)) / len(side), len(side) - 1))
    return _from_parts(float(b.mean() - a.mean()), parts, level, None)


def flat_seeds_estimate(values: Sequence[float], se_units: float | None, n_units: int | None, level: float = 0.95,
                        bounds: tuple[float, float] | None = None) -> Estimate:
    """One setting's number over S seeds where the unit is many (questions, samples): the units' standard error
    of one run (`se_units`, from its bootstrap interval: `se_from_interval`; n_units - 1 degrees of freedom)
    plus the seeds' part."""
    values = _finite(values)
    if len(values) == 0:
        return Estimate(math.nan, None, None, None, None, level)
    parts = []
    if se_units is not None:
        parts.append((se_units ** 2, max(1, (n_units or 2) - 1)))
    if len(values) >= 2:
        parts.append((float(values.var(ddof=1)) / len(values), len(values) - 1))
    return _from_parts(float(values.mean()), parts, level, bounds, complete=se_units is not None)


def se_from_interval(low: float | None, high: float | None, level: float) -> float | None:
    """The standard error a bootstrap interval of many units stands for: its width over 2 z_{level}."""
    from scipy import stats

    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    return (high - low) / (2 * float(stats.norm.ppf(0.5 + level / 2)))


# ---- power ---------------------------------------------------------------------------------------------------------

@cache
def _sign_flip_power_factor(n: int, alpha: float, power: float, draws: int = 4000, seed: int = 0) -> float | None:
    """delta / sigma at which the exact sign-flip test over n normal differences N(delta, sigma^2) rejects at
    `alpha` with probability `power` (simulated: every sign pattern of each draw); None where it never can."""
    if smallest_sign_flip_p(n) > alpha + 1e-12:
        return None
    patterns = _sign_patterns(n)
    noise = np.random.default_rng(seed).standard_normal((draws, n))

    def rejects(shift: float) -> float:
        d = noise + shift
        observed = np.abs(d.sum(axis=1))
        flipped = np.abs(d @ patterns.T)  # [draws, 2^n]
        p = (flipped >= observed[:, None] - 1e-9).mean(axis=1)
        return float((p <= alpha + 1e-12).mean())

    low, high = 0.0, 1.0
    while rejects(high) < power:
        high *= 2
        if high > 1e3:
            return None
    for _ in range(16):  # to 1/65536 of the bracket
        middle = (low + high) / 2
        low, high = (middle, high) if rejects(middle) < power else (low, middle)
    return high


def _t_power_factor(df: float, n_eff: float, alpha: float, power: float) -> float:
    """delta / sigma at which a two-sided one-sample t-test (df, noncentrality delta sqrt(n_eff) / sigma) has
    `power` (scipy's non-central t)."""
    from scipy import optimize, stats

    critical = float(stats.t.ppf(1 - alpha / 2, df))

    def gap(effect: float) -> float:
        nc = effect * math.sqrt(n_eff)  # the far tail (a significant difference of the wrong sign) is below 1e-6 here
        return float(stats.nct.sf(critical, df, nc)) - power

    return float(optimize.brentq(gap, 1e-9, 10.0))


def detectable_over_recordings(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest true mean difference the exact sign-flip test over `n` recordings finds at `alpha` with
    probability `power`, for per-recording differences of standard deviation `sd` (None: no difference can
    be found, n <= 5 at 0.05)."""
    if n < 2 or smallest_sign_flip_p(n) > alpha + 1e-12:
        return None
    factor = (_sign_flip_power_factor(n, alpha, power) if n <= SIMULATED_UP_TO
              else _t_power_factor(n - 1, n, alpha, power))
    return None if factor is None else factor * sd


def detectable_from_se(se: float, df: float | None = None, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference a two-sided test with this standard error finds at `alpha` with
    probability `power`: (q_{1-alpha/2} + q_{power}) se, q the t quantiles with `df` (None: normal)."""
    from scipy import stats

    if df is None or not math.isfinite(df):
        return (float(stats.norm.ppf(1 - alpha / 2)) + float(stats.norm.ppf(power))) * se
    return (float(stats.t.ppf(1 - alpha / 2, df)) + float(stats.t.ppf(power, df))) * se
