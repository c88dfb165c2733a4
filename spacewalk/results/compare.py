"""Paired comparison of two runs, or two groups of seeds, on the same items: each headline number's difference
B - A with its paired bootstrap interval and p-value.

    python -m spacewalk.compare RUN_A RUN_B [--json out.json]
    python -m spacewalk.compare --a RUN1 RUN2 RUN3 --b RUN4 RUN5 RUN6        # groups (seeds): their mean
    python -m spacewalk.compare --a SWEEP --a-where model=lfb_avg --b SWEEP --b-where model=lfb_cat

A RUN is a run directory (its config.resolved.yaml), decoded predictions (`<run>/decoded/<name>`), or a folder
holding runs (a multirun sweep: every run directory below it); `--a-where KEY=VALUE` / `--b-where` (repeatable)
keep the runs whose command line (.hydra/overrides.yaml) holds that override.

Each run is re-scored from its recorded predictions by its benchmark's official scoring (spacewalk/results/rescore.py),
and the runs must agree on the task, the split, the items (their ids and ground truth) and the scoring settings:
otherwise the command refuses, naming what differs and in which runs (exit 2).

**Paired bootstrap.** Every resample draws the benchmark's own units once and scores both sides on that same
draw: recordings then samples within them for Spacewalk-18 step recognition (IoU: recordings), samples within
each recording for intra-video retrieval, questions for QA, EgoSchema and EgoCross (per domain: that domain's
questions), queries for HiREST (spacewalk/results/bootstrap.py `grouped_draws`: the draws depend only on the seed and
the units' counts). A side with several runs (seeds) scores each of its runs on the draw and takes their mean:
for accuracy, the number of the seed-averaged per-item scores. The difference's interval is the percentile
interval of the B resampled differences d*_b (Efron & Tibshirani 1993, ch. 13).

**p-value.** The two-sided bootstrap p-value of the centred differences (Efron & Tibshirani 1993, ch. 16;
the paired bootstrap test of Koehn 2004 and Berg-Kirkpatrick et al. 2012, two-sided): centred at the
observed difference d, the resampled differences show how far d moves by chance alone, so
p = (1 + #{b : |d*_b - d| >= |d|}) / (1 + B), the +1 counting the observed data as one resample
(Davison & Hinkley 1997, eq. 4.11), so that p is never 0. With B = 1000 resamples (the default) no p is below
1/1001. The seeds' own spread is not resampled: a group's number is its runs' mean, and the interval is over
the benchmark's units given those runs.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.results.bootstrap import BootstrapOptions, grouped_draws, grouped_replicates
from spacewalk.results.rescore import RUN_CONFIG, ScoredRun, run_overrides, scored_run

# ---- which runs ------------------------------------------------------------------------------------------------

def find_runs(path: Path) -> list[Path]:
    """`path` itself when it is a run (or decoded predictions), else every run directory below it, sorted."""
    if not path.exists():
        raise DataError("no such run directory", file=path)
    if (path / RUN_CONFIG).is_file() or (path.parent.name == "decoded" and (path / "predictions.json").is_file()):
        return [path]
    found = sorted({p.parent for p in path.rglob(RUN_CONFIG)},
                   key=lambda p: [int(x) if x.isdigit() else x for x in p.relative_to(path).parts])
    if not found:
        raise DataError(f"neither a run directory nor a folder holding any (no {RUN_CONFIG} in or below it)",
                        file=path)
    return found


def select_runs(paths: Sequence[Path], where: Sequence[str], side: str) -> list[Path]:
    """The runs of one side: every path's runs, those whose overrides hold each `where` (KEY=VALUE)."""
    for condition in where:
        if "=" not in condition:
            raise ConfigError(f"--{side}-where {condition}: expected KEY=VALUE (an override of the run's command)")
    runs = [run for path in paths for run in find_runs(Path(path))]
    if where:
        runs = [run for run in runs if set(where) <= set(run_overrides(run))]
    if not runs:
        raise ConfigError(f"side {side.upper()}: no run in {', '.join(map(str, paths))}"
                          + (f" whose command holds {' and '.join(where)}" if where else ""))
    return runs


# ---- the comparison ----------------------------------------------------------------------------------------------

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


@dataclass(frozen=True)
class Difference:
    name: str
    a: float
    b: float
    difference: float
    low: float | None
    high: float | None
    p_value: float | None
    unit: str
    n: int
    n_resamples: int


def _side_replicates(runs: Sequence[ScoredRun], name: str, draws) -> np.ndarray:
    """The mean over the side's runs of each run's number on every resample."""
    return np.mean([grouped_replicates(range(len(r.metrics[name].groups)), r.metrics[name].resampled, draws)
                    for r in runs], axis=0)


def centred_p_value(replicates: np.ndarray, observed: float) -> float:
    """Two-sided bootstrap p-value of the centred differences (module docstring)."""
    extreme = np.abs(replicates - observed) >= abs(observed) - 1e-12 * max(1.0, abs(observed))
    return float((1 + extreme.sum()) / (1 + len(replicates)))


def compare(a: Sequence[ScoredRun], b: Sequence[ScoredRun], options: BootstrapOptions
            ) -> tuple[list[Difference], list[str]]:
    """The difference of each headline number both sides have, and notes on those left out."""
    check_comparable(a, b)
    names = [n for n in a[0].metrics if all(n in r.metrics for r in [*a, *b])]
    notes = [f"{n}: not in every run, left out" for n in {n for r in [*a, *b] for n in r.metrics} - set(names)]
    out = []
    for name in names:
        metrics = [r.metrics[name] for r in [*a, *b]]
        if any(m.value is None for m in metrics):
            notes.append(f"{name}: undefined in some run, left out")
            continue
        first = metrics[0]
        if any(m.items != first.items for m in metrics):
            raise ConfigError(f"the runs differ in the units of {name} ({first.unit}), so it cannot be paired: "
                              + "; ".join(f"{sum(m.sizes)} in {r.run_dir}" for m, r in zip(metrics, [*a, *b])))
        value_a = float(np.mean([r.metrics[name].value for r in a]))
        value_b = float(np.mean([r.metrics[name].value for r in b]))
        d = value_b - value_a
        low = high = p = None
        if options.n_resamples > 0 and sum(first.sizes) >= 2:
            draws = grouped_draws(first.sizes, options, within=first.within, between=first.between)
            replicates = _side_replicates(b, name, draws) - _side_replicates(a, name, draws)
            replicates = replicates[~np.isnan(replicates)]
            if len(replicates):
                alpha = (1 - options.level) / 2
                low, high = (float(x) for x in np.quantile(replicates, [alpha, 1 - alpha]))
                if np.ptp(replicates) > 0 or d == 0:
                    p = centred_p_value(replicates, d)
                else:  # every resample gives d (one recording, resampled whole): no spread to test against
                    notes.append(f"{name}: the difference is the same on every resample (too few units to "
                                 "resample), so it has no p-value")
        n = len(first.groups) if first.between else sum(first.sizes)
        out.append(Difference(name, value_a, value_b, d, low, high, p, first.unit, n, options.n_resamples))
    return out, sorted(notes)


# ---- output -----------------------------------------------------------------------------------------------------

def _side_label(runs: Sequence[ScoredRun]) -> str:
    labels = list(dict.fromkeys(r.label for r in runs))
    return f"{len(runs)} run{'s' if len(runs) > 1 else ''} ({'; '.join(labels)})"


def format_table(a: Sequence[ScoredRun], b: Sequence[ScoredRun], differences: Sequence[Difference],
                 notes: Sequence[str], level: float) -> str:
    identity = a[0].identity
    lines = [f"task {a[0].task}, split {identity.get('split')}, {identity.get('items_summary', '')}",
             f"A: {_side_label(a)}", f"B: {_side_label(b)}", ""]
    ci = f"{level:.0%} CI"
    rows = [("metric", "A", "B", "B - A", ci, "p", "unit")]
    for d in differences:
        interval = "-" if d.low is None else f"[{d.low:+.2f}, {d.high:+.2f}]"
        p = "-" if d.p_value is None else (f"{d.p_value:.3f}" if d.p_value >= 0.001 else f"{d.p_value:.1e}")
        rows.append((d.name, f"{d.a:.2f}", f"{d.b:.2f}", f"{d.difference:+.2f}", interval, p, d.unit))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for row in rows:
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     + "  " + row[6])
    n_resamples = differences[0].n_resamples if differences else 0
    lines.append("")
    lines.append(f"paired bootstrap, {n_resamples} resamples (the same units drawn for A and B); p: two-sided, "
                 "centred differences")
    lines += notes
    return "\n".join(lines)


def as_json(a: Sequence[ScoredRun], b: Sequence[ScoredRun], differences: Sequence[Difference], notes: Sequence[str],
            options: BootstrapOptions) -> dict[str, Any]:
    def clean(x):
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

    return {"task": a[0].task, "identity": a[0].identity,
            "a": [{"run": str(r.run_dir), "label": r.label} for r in a],
            "b": [{"run": str(r.run_dir), "label": r.label} for r in b],
            "bootstrap": {"n_resamples": options.n_resamples, "level": options.level, "seed": options.seed,
                          "interval": "percentile of the paired resampled differences",
                          "p_value": "two-sided, centred differences: (1 + #{|d* - d| >= |d|}) / (1 + B)"},
            "differences": {d.name: {"a": d.a, "b": d.b, "difference": d.difference, "low": clean(d.low),
                                     "high": clean(d.high), "p_value": clean(d.p_value), "unit": d.unit, "n": d.n}
                            for d in differences},
            "notes": list(notes)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.compare", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="RUN_A RUN_B (or use --a and --b)")
    parser.add_argument("--a", nargs="+", type=Path, default=[], help="side A's runs (or folders holding runs)")
    parser.add_argument("--b", nargs="+", type=Path, default=[], help="side B's runs (or folders holding runs)")
    parser.add_argument("--a-where", action="append", default=[], metavar="KEY=VALUE",
                        help="keep side A's runs whose command line holds this override (repeatable)")
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
        if args.resamples < 1:
            raise ConfigError(f"--resamples {args.resamples}: at least 1")
        options = BootstrapOptions(n_resamples=args.resamples, level=args.level, seed=args.seed)
        a = [scored_run(r) for r in select_runs(args.a, args.a_where, "a")]
        b = [scored_run(r) for r in select_runs(args.b, args.b_where, "b")]
        differences, notes = compare(a, b, options)
    print(format_table(a, b, differences, notes, options.level))
    if args.json is not None:
        write_json(args.json, as_json(a, b, differences, notes, options))
    return 0


if __name__ == "__main__":
    sys.exit(main())
