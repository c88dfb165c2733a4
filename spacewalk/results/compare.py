"""Paired comparison of two runs, or two groups of seeds, on the same items: each headline number's difference
B - A, and what it says, claim by claim.

    python -m spacewalk.compare RUN_A RUN_B [--json out.json]
    python -m spacewalk.compare --a RUN1 RUN2 RUN3 --b RUN4 RUN5 RUN6        # groups (seeds): their mean
    python -m spacewalk.compare --a SWEEP --a-where model=lfb_avg --b SWEEP --b-where model=lfb_cat

A RUN is a run directory, plan-decoded predictions (`<run>/decoded/<name>`), or a folder holding runs (a sweep:
every run directory below it; spacewalk/results/runs.py finds them, each once); `--a-where KEY=VALUE` /
`--b-where` (repeatable) keep the runs whose config keys have those values (spacewalk/results/selection.py: the
language of the report's `where`). Each run is re-scored from its recorded predictions by its benchmark's official
scoring (spacewalk/results/rescore.py), and the runs must agree on the task, the split, the items (their ids and
ground truth) and the scoring settings: otherwise the command refuses, naming what differs and in which runs.

**Which claim each number answers** (spacewalk/results/statistics.py says how and why, with references):

- *these runs, these recordings* (a number per recording whose samples can be drawn again: Spacewalk-18's
  Accuracy and mAP, intra-video retrieval): would the difference stay on another draw of the samples of the same
  recordings? A paired bootstrap stratified by recording: every recording kept, its samples drawn with
  replacement, the same draws for A and B (each side the mean of its runs on each draw); the percentile
  interval and the centred two-sided p, p = (1 + #{|d*_b - d| >= |d|}) / (1 + B) (Efron & Tibshirani 1993,
  ch. 16; Davison & Hinkley 1997, eq. 4.11). Many units (thousands of samples), where the bootstrap holds.
- *these runs, new <units>* (a number over flat units: questions, queries): a number that is the mean of its
  units' values (accuracy, recall at k) gets the sign-flip test and Student's t over the per-unit paired
  differences, as recordings do (with few questions answered differently, as in a 27-question type, the
  bootstrap's percentile interval covers less than it says: docs/statistics.md); any other (an official summary
  of the units) the paired bootstrap over them. The claim then reaches other questions like these.
- *these runs, new recordings* (every number that is a mean over recordings): would it hold on other
  recordings? The exact sign-flip test over the per-recording differences and Student's t interval with G - 1
  degrees of freedom. With 5 recordings or fewer no test of this kind can give p < 0.05, and the command says so
  instead of printing p.
- *recipes* (a side of several runs differing only in their seed): is recipe B better than recipe A, seeds and
  recordings (or units) both drawn again? The seeds' spread of each side is added to the recordings' (or the
  units') part, Welch-Satterthwaite t. A side of one run counts its seeds' spread as 0 (said under the table); the
  claim needs 6 recordings for a p, as above. Where side B is side A's runs decoded (`<run>/decoded/<name>`, run
  by run), the two are paired by seed: the differences per seed and recording are the units.

Under the table, the smallest difference each claim detects with 80 % power at 0.05 (two-sided), from these
runs' own spread: how big a difference this split can show at all (`python -m spacewalk.power` for any runs).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.results.bootstrap import BootstrapOptions, grouped_draws, grouped_replicates
from spacewalk.results.rescore import ScoredMetric, ScoredRun, scored_run
from spacewalk.results.statistics import (
    ALPHA,
    MONTE_CARLO,
    POWER,
    detectable_from_se,
    detectable_over_recordings,
    flat_recipes_difference,
    recipes_difference,
    seeds_estimate,
    sign_flip_test,
    smallest_sign_flip_p,
    t_interval,
)

# the claims, in the order printed
THESE_RECORDINGS = "these runs, these recordings"
NEW_UNITS = "these runs, new units"
NEW_RECORDINGS = "these runs, new recordings"
RECIPES = "recipes"
QUESTIONS = {
    THESE_RECORDINGS: "would the difference stay on other samples of the same recordings?",
    NEW_UNITS: "would it stay on other {unit} like these?",
    NEW_RECORDINGS: "would it hold on other recordings?",
    RECIPES: "is recipe B better than recipe A, with other seeds and other {what}?",
}


# ---- which runs ------------------------------------------------------------------------------------------------

def select_runs(paths: Sequence[Path], where: Sequence[str], side: str, one_setting: bool = True) -> list[Path]:
    """The runs of one side (`side` "a" or "b"; "" for the runs of python -m spacewalk.power): every path's runs
    (each once), those whose config keys match `where`; with `one_setting`, runs that differ only in their seed
    (their mean stands for one recipe)."""
    from spacewalk.results.runs import find_runs, read_run
    from spacewalk.results.seed_groups import group_by_seed
    from spacewalk.results.selection import check_keys, select, where_arguments

    flag = f"--{side}-where" if side else "--where"
    conditions = where_arguments(where, flag)
    read = [read_run(r) for r in find_runs(paths)]
    if conditions:
        check_keys(read, conditions, flag)
        read = select(read, conditions)
    which = f"side {side.upper()}: " if side else ""
    if not read:
        raise ConfigError(f"{which}no run in {', '.join(map(str, paths))}"
                          + (f" whose config has {' and '.join(where)}" if where else ""))
    groups = group_by_seed(read)
    if one_setting and len(groups) > 1:
        raise ConfigError(f"{which}the runs hold {len(groups)} settings, not one: "
                          + "; ".join(f"{' '.join(g.overrides) or '(no overrides)'} ({g.runs[0].path})"
                                      for g in groups)
                          + f"; keep one with {flag} KEY=VALUE")
    return [r.path for r in read]


def check_comparable(a: Sequence[ScoredRun], b: Sequence[ScoredRun]) -> None:
    """Refuse runs that differ in task, split, items or scoring settings, naming the key and the runs."""
    runs = [("A", r) for r in a] + [("B", r) for r in b]
    keys = {k for _, r in runs for k in r.identity} - {"items_summary"}
    # the coarsest difference first: another task or split also has other items
    order = {"task": 0, "split": 1, "items": 3}
    for key in sorted(keys, key=lambda k: (order.get(k, 2), k)):
        values: dict[str, list[str]] = {}
        shown: dict[str, str] = {}
        for side, run in runs:
            value = str(run.identity.get(key))
            values.setdefault(value, []).append(f"{side} {run.run_dir}")
            # the items are a digest: say what they are instead
            shown[value] = (f"{run.identity.get('items_summary', '')} (digest {value})" if key == "items"
                            else value)
        if len(values) > 1:
            what = "items (their ids or ground truth)" if key == "items" else key
            detail = "; ".join(f"{shown[value]} in {', '.join(where)}" for value, where in values.items())
            raise ConfigError(f"the runs differ in {what}, so their numbers cannot be paired: {detail}")


# ---- the comparison ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    """One claim's numbers for one metric: the interval of B - A, p (None: none to give, `note` says why), the
    units it is over, and the smallest difference it detects (80 % power, 0.05 two-sided; None: none)."""

    name: str
    low: float | None
    high: float | None
    p: float | None
    n: int
    method: str
    detectable: float | None = None
    note: str | None = None


@dataclass(frozen=True)
class Difference:
    name: str
    a: float
    b: float
    difference: float
    unit: str
    n: int  # the number's top-level units: recordings (or the flat units)
    claims: dict[str, Claim] = field(default_factory=dict)

    def claim(self, preferred: Sequence[str]) -> Claim | None:
        """The first of `preferred` this number has."""
        return next((self.claims[c] for c in preferred if c in self.claims), None)


def _values(runs: Sequence[ScoredRun], name: str) -> np.ndarray:
    """[S, G] each run's value per group (recording)."""
    out = []
    for run in runs:
        metric = run.metrics[name]
        out.append([float(np.asarray(metric.resampled(g, np.ones((1, n), dtype=np.int64)))[0])
                    for g, n in enumerate(metric.sizes)])
    return np.array(out, dtype=np.float64)


def _side_replicates(runs: Sequence[ScoredRun], name: str, draws) -> np.ndarray:
    """The mean over the side's runs of each run's number on every draw."""
    return np.mean([grouped_replicates(range(len(r.metrics[name].groups)), r.metrics[name].resampled, draws)
                    for r in runs], axis=0)


def centred_p_value(replicates: np.ndarray, observed: float) -> float:
    """Two-sided bootstrap p-value of the centred differences (module docstring)."""
    extreme = np.abs(replicates - observed) >= abs(observed) - 1e-12 * max(1.0, abs(observed))
    return float((1 + extreme.sum()) / (1 + len(replicates)))


def _unreachable(n: int) -> str:
    return (f"{n} recording{'s' if n != 1 else ''} cannot give p < {ALPHA:g} (the smallest p of an exact test over "
            f"them is {smallest_sign_flip_p(n):.3g}; 6 are needed)")


def paired_by_run(a: Sequence[ScoredRun], b: Sequence[ScoredRun]) -> bool:
    """Whether side B is side A's runs decoded, run by run (`<run>/decoded/<name>`): then paired by seed."""
    return len(a) == len(b) > 1 and all(
        rb.run_dir.parent.name == "decoded" and rb.run_dir.parent.parent.resolve() == ra.run_dir.resolve()
        for ra, rb in zip(a, b, strict=True))


def _per_unit(runs: Sequence[ScoredRun], name: str) -> np.ndarray | None:
    """The side's mean per unit of a number over flat units that is the mean of its units' values (accuracy,
    recall at k: each unit's value is the number on that unit alone, and their mean gives the number), else None."""
    out = []
    for run in runs:
        metric = run.metrics[name]
        n = metric.sizes[0]
        values = np.asarray(metric.resampled(0, np.eye(n, dtype=np.int64)), dtype=np.float64)
        if not np.all(np.isfinite(values)) or not math.isclose(float(values.mean()), float(metric.value),
                                                                 rel_tol=1e-9, abs_tol=1e-9):
            return None
        out.append(values)
    return np.mean(out, axis=0)


def _flat_claim(a, b, name: str, metric: ScoredMetric, level: float, seed: int) -> Claim | None:
    """Over flat units whose number is a mean of per-unit values: the sign-flip test and Student's t over the
    per-unit paired differences, as over recordings (the percentile bootstrap of a few dozen questions, few of
    them answered differently, covers less than it says: docs/statistics.md)."""
    values_a, values_b = _per_unit(a, name), _per_unit(b, name)
    if values_a is None or values_b is None:
        return None
    d = values_b - values_a
    t, test = t_interval(d, level), sign_flip_test(d, seed=seed)
    sd = float(np.std(d, ddof=1)) if len(d) > 1 else 0.0
    method = (f"sign-flip test over the {len(d)} {metric.unit} ({'all' if test.exact else MONTE_CARLO} sign "
              f"patterns); Student's t interval over their paired differences")
    return Claim(NEW_UNITS, t.low, t.high, test.p, len(d), method,
                 detectable_from_se(sd / math.sqrt(len(d)), len(d) - 1) if sd > 0 else None)


def _units_claim(a, b, name: str, metric: ScoredMetric, options: BootstrapOptions, d: float) -> Claim | None:
    """The paired bootstrap over the metric's units, every group kept (module docstring); flat units of a mean by
    `_flat_claim`."""
    grouped = len(metric.groups) > 1
    if not metric.within or sum(metric.sizes) < 2:
        return None
    if not grouped:
        flat = _flat_claim(a, b, name, metric, options.level, options.seed)
        if flat is not None:
            return flat
    draws = grouped_draws(metric.sizes, options, within=True, between=False)
    replicates = _side_replicates(b, name, draws) - _side_replicates(a, name, draws)
    replicates = replicates[~np.isnan(replicates)]
    claim_name = THESE_RECORDINGS if grouped else NEW_UNITS
    method = (f"paired bootstrap of the samples within each of the {len(metric.groups)} recordings"
              if grouped else f"paired bootstrap over the {sum(metric.sizes)} {metric.unit}") + \
        f", {options.n_resamples} resamples, the same for A and B"
    if not len(replicates):
        return Claim(claim_name, None, None, None, sum(metric.sizes), method, note="undefined on every resample")
    alpha = (1 - options.level) / 2
    low, high = (float(x) for x in np.quantile(replicates, [alpha, 1 - alpha]))
    spread = float(np.std(replicates, ddof=1)) if len(replicates) > 1 else 0.0
    if spread == 0 and d != 0:  # every draw gives d: no spread to test against
        return Claim(claim_name, low, high, None, sum(metric.sizes), method,
                     note="the same difference on every resample: nothing to test against")
    return Claim(claim_name, low, high, centred_p_value(replicates, d), sum(metric.sizes), method,
                 detectable_from_se(spread) if spread > 0 else None)


def _recordings_claim(values_a: np.ndarray, values_b: np.ndarray, level: float, seed: int) -> Claim:
    """The exact sign-flip test and Student's t over the per-recording differences of the sides' means."""
    d = values_b.mean(axis=0) - values_a.mean(axis=0)
    d = d[np.isfinite(d)]
    n = len(d)
    t = t_interval(d, level)
    test = sign_flip_test(d, seed=seed)
    patterns = f"all {2 ** n} sign patterns" if test.exact else f"{MONTE_CARLO} random sign patterns"
    df = max(n - 1, 0)
    method = (f"exact sign-flip test over the {n} recordings ({patterns}); Student's t interval, {df} "
              f"degree{'s' if df != 1 else ''} of freedom")
    sd = float(np.std(d, ddof=1)) if n > 1 else None
    detectable = detectable_over_recordings(sd, n) if sd else None
    if not test.reachable():
        return Claim(NEW_RECORDINGS, t.low, t.high, None, n, method, None, _unreachable(n))
    return Claim(NEW_RECORDINGS, t.low, t.high, test.p, n, method, detectable)


def _recipes_claim(a, b, values_a, values_b, units: Claim | None, level: float, grouped: bool) -> Claim | None:
    """Recipe B against recipe A, seeds and recordings (or units) both drawn again (module docstring)."""
    if max(len(a), len(b)) < 2:
        return None
    paired = paired_by_run(a, b)
    if grouped:
        made = seeds_estimate(values_b - values_a, level, None) if paired else \
            recipes_difference(values_a, values_b, level)
        n = int(np.all(np.isfinite(np.vstack([values_a, values_b])), axis=0).sum())
        what = f"the {n} recordings"
    else:
        if units is None or units.low is None:
            return None
        from scipy import stats

        se_units = (units.high - units.low) / (2 * float(stats.norm.ppf(0.5 + level / 2)))
        run_a, run_b = values_a.mean(axis=1), values_b.mean(axis=1)
        made = flat_recipes_difference(np.zeros(len(run_a)) if paired else run_a,
                                       run_b - run_a if paired else run_b, se_units, units.n, level)
        n = units.n
        what = f"the {n} units"
    method = (f"{len(a)} and {len(b)} seeds{', paired by seed (B decodes A)' if paired else ''}; the spread over "
              f"{what} plus the seeds', Welch-Satterthwaite t"
              + (f" ({made.df:.1f} degrees of freedom)" if made.df is not None and math.isfinite(made.df) else ""))
    notes = [f"side {s}: one run, its seeds' spread counted as 0" for s, runs in (("A", a), ("B", b))
             if len(runs) == 1 and not paired]
    detectable = detectable_from_se(made.se, made.df) if made.se else None
    if grouped and smallest_sign_flip_p(n) > ALPHA:
        return Claim(RECIPES, made.low, made.high, None, n, method, None, "; ".join([_unreachable(n), *notes]))
    return Claim(RECIPES, made.low, made.high, made.p, n, method, detectable, "; ".join(notes) or None)


def compare(a: Sequence[ScoredRun], b: Sequence[ScoredRun], options: BootstrapOptions
            ) -> tuple[list[Difference], list[str]]:
    """The difference of each headline number both sides have, with its claims, and notes on those left out."""
    check_comparable(a, b)
    names = [n for n in a[0].metrics if all(n in r.metrics for r in [*a, *b])]
    notes = [f"{n}: not in every run, left out" for n in {n for r in [*a, *b] for n in r.metrics} - set(names)]
    out = []
    for name in names:
        metrics = [r.metrics[name] for r in [*a, *b]]
        if any(m.value is None or math.isnan(m.value) for m in metrics):
            notes.append(f"{name}: undefined in some run, left out")
            continue
        first = metrics[0]
        if any(m.items != first.items for m in metrics):
            raise ConfigError(f"the runs differ in the units of {name} ({first.unit}), so it cannot be paired: "
                              + "; ".join(f"{sum(m.sizes)} in {r.run_dir}" for m, r in zip(metrics, [*a, *b])))
        value_a = float(np.mean([r.metrics[name].value for r in a]))
        value_b = float(np.mean([r.metrics[name].value for r in b]))
        d = value_b - value_a
        grouped = len(first.groups) > 1
        values_a, values_b = _values(a, name), _values(b, name)
        claims: dict[str, Claim] = {}
        units = _units_claim(a, b, name, first, options, d)
        if units is not None:
            claims[units.name] = units
        if grouped:
            claims[NEW_RECORDINGS] = _recordings_claim(values_a, values_b, options.level, options.seed)
        recipes = _recipes_claim(a, b, values_a, values_b, units, options.level, grouped)
        if recipes is not None:
            claims[RECIPES] = recipes
        n = len(first.groups) if grouped else sum(first.sizes)
        out.append(Difference(name, value_a, value_b, d, first.unit, n, claims))
    return out, sorted(notes)


# ---- output -----------------------------------------------------------------------------------------------------

def _side_label(runs: Sequence[ScoredRun]) -> str:
    labels = list(dict.fromkeys(r.label for r in runs))
    return f"{len(runs)} run{'s' if len(runs) > 1 else ''} ({'; '.join(labels)})"


def p_text(p: float | None) -> str:
    """p to 3 decimals; below 0.001 (more resamples or patterns) as 1.0e-04."""
    if p is None:
        return "-"
    return f"{p:.3f}" if round(p, 3) >= 0.001 else f"{p:.1e}"


def _columns(rows: Sequence[Sequence[str]], right_from: int = 1) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if i >= right_from else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
            .rstrip() for row in rows]


def format_table(a: Sequence[ScoredRun], b: Sequence[ScoredRun], differences: Sequence[Difference],
                 notes: Sequence[str], level: float) -> str:
    identity = a[0].identity
    lines = [f"task {a[0].task}, split {identity.get('split')}: {identity.get('items_summary', '')}",
             f"A: {_side_label(a)}", f"B: {_side_label(b)}", ""]
    lines += _columns([("metric", "A", "B", "B - A", "unit")]
                      + [(d.name, f"{d.a:.2f}", f"{d.b:.2f}", f"{d.difference:+.2f}", d.unit) for d in differences],
                      right_from=1)
    ci = f"{level:.0%} CI"
    for claim in (THESE_RECORDINGS, NEW_UNITS, NEW_RECORDINGS, RECIPES):
        having = [d for d in differences if claim in d.claims]
        if not having:
            continue
        first = having[0].claims[claim]
        unit = having[0].unit.split(" (")[0]
        question = QUESTIONS[claim].format(unit=unit, what="recordings" if having[0].n and any(
            NEW_RECORDINGS in d.claims for d in having) else unit)
        title = claim.replace("new units", f"new {unit}")
        lines += ["", f"{title}: {question}", f"  ({first.method})"]
        rows = [("metric", ci, "p", "detects", "")]
        shown = [d.claims[claim] for d in differences if claim in d.claims]
        shared = shown[0].note if len({c.note for c in shown}) == 1 else None  # said once, under the rows
        for d in differences:
            c = d.claims.get(claim)
            if c is None:
                if claim == THESE_RECORDINGS and NEW_RECORDINGS in d.claims:
                    rows.append((d.name, "-", "-", "-", "a recording's samples tile it: they are not drawn again"))
                continue
            interval = "-" if c.low is None else f"[{c.low:+.2f}, {c.high:+.2f}]"
            detects = "-" if c.detectable is None else f">= {c.detectable:.2f}"
            rows.append((d.name, interval, p_text(c.p), detects, "" if shared else c.note or ""))
        lines += ["  " + line for line in _columns(rows)]
        lines += [f"  {shared}"] if shared else []
    lines += ["", detects_sentence(differences)]
    lines += notes
    return "\n".join(lines)


def detects_sentence(differences: Sequence[Difference]) -> str:
    """"This split detects ...": each claim's smallest difference found with 80 % power at 0.05, per metric."""
    parts = []
    for claim in (RECIPES, NEW_RECORDINGS, THESE_RECORDINGS, NEW_UNITS):
        having = [(d.name, d.claims[claim]) for d in differences if claim in d.claims]
        if not having:
            continue
        found = [f"{name} >= {c.detectable:.2f}" for name, c in having if c.detectable is not None]
        title = claim.replace("these runs, ", "")
        unreachable = having[0][1].note and "cannot give" in having[0][1].note
        parts.append(f"{title}: {', '.join(found)} points" if found else
                     f"{title}: none ({having[0][1].n} recordings)" if unreachable else f"{title}: none")
    return (f"This split detects (with {POWER:.0%} power, two-sided {ALPHA:g}; from these runs' own spread): "
            + "; ".join(parts) + ".")


def as_json(a: Sequence[ScoredRun], b: Sequence[ScoredRun], differences: Sequence[Difference], notes: Sequence[str],
            options: BootstrapOptions) -> dict[str, Any]:
    def clean(x):
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

    return {"task": a[0].task, "identity": a[0].identity,
            "a": [{"run": str(r.run_dir), "label": r.label} for r in a],
            "b": [{"run": str(r.run_dir), "label": r.label} for r in b],
            "options": {"n_resamples": options.n_resamples, "level": options.level, "seed": options.seed,
                        "alpha": ALPHA, "power": POWER},
            "differences": {d.name: {"a": d.a, "b": d.b, "difference": d.difference, "unit": d.unit, "n": d.n,
                                     "claims": {name: {k: clean(v) for k, v in asdict(c).items()}
                                                for name, c in d.claims.items()}}
                            for d in differences},
            "notes": list(notes)}


def options_from(resamples: Any, level: Any, seed: Any, where: str) -> BootstrapOptions:
    """The comparison's settings, each checked (a command line's or a spec's), naming the bad one."""
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ConfigError(f"{where}resamples {resamples!r}: a positive integer (the bootstrap's resamples)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"{where}seed {seed!r}: a non-negative integer (the resamples' seed)")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ConfigError(f"{where}level {level!r}: a number between 0 and 1 (the intervals' confidence level)")
    return BootstrapOptions(n_resamples=resamples, level=float(level), seed=seed)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.compare", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="RUN_A RUN_B (or use --a and --b)")
    parser.add_argument("--a", nargs="+", type=Path, default=[], help="side A's runs (or folders holding runs)")
    parser.add_argument("--b", nargs="+", type=Path, default=[], help="side B's runs (or folders holding runs)")
    parser.add_argument("--a-where", action="append", default=[], metavar="KEY=VALUE",
                        help="keep side A's runs whose config key has this value (repeatable)")
    parser.add_argument("--b-where", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="the resamples' seed (default 0)")
    parser.add_argument("--json", type=Path, help="also write the comparison to this JSON file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from spacewalk.core.command_errors import user_errors_reported
    from spacewalk.core.io import write_json

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.runs and (args.a or args.b):
        parser.error("give RUN_A RUN_B, or --a ... --b ..., not both")
    if args.runs:
        if len(args.runs) != 2:
            parser.error(f"expected two runs, RUN_A RUN_B (got {len(args.runs)}); groups: --a ... --b ...")
        args.a, args.b = [args.runs[0]], [args.runs[1]]
    if not (args.a and args.b):
        parser.error("name both sides: RUN_A RUN_B, or --a ... --b ...")
    with user_errors_reported():
        options = options_from(args.resamples, args.level, args.seed, "--")
        if args.json is not None and args.json.is_dir():
            raise DataError("a folder, where the JSON file to write is expected", file=args.json)
        a = [scored_run(r) for r in select_runs(args.a, args.a_where, "a")]
        b = [scored_run(r) for r in select_runs(args.b, args.b_where, "b")]
        differences, notes = compare(a, b, options)
        print(format_table(a, b, differences, notes, options.level))
        if args.json is not None:
            write_json(args.json, as_json(a, b, differences, notes, options))
    return 0


if __name__ == "__main__":
    sys.exit(main())
