"""How small a difference a split can show: for each headline number, the smallest true difference between two runs
that a paired test finds with 80 % power at 0.05 (two-sided), from the runs' own spread and the split's unit counts.

    python -m spacewalk.power RUN... [--where KEY=VALUE] [--power 0.8] [--alpha 0.05] [--json out.json]

The RUNs (run directories, or folders holding runs: spacewalk/results/runs.py) must be of one task, split and set
of items, as for `python -m spacewalk.compare`; `--where` keeps those whose config keys match
(spacewalk/results/selection.py). The spread of a paired difference is measured on every pair of the runs given
(their per-unit differences, pooled over the pairs), so give runs that differ the way the comparisons you plan
will differ (two recipes, or seeds of one). One run gives only its own per-unit spread, and the difference of two
unrelated runs would have twice its variance: that upper bound is used, and said. Per number, for each claim
spacewalk/results/compare.py makes (spacewalk/results/statistics.py, `detectable_over_recordings` and
`detectable_from_se`):

- *new recordings* (a mean over recordings): the exact sign-flip test over the G recordings, for normal
  per-recording differences of the measured standard deviation; none at all with 5 recordings or fewer;
- *these recordings* / *new units* (the samples within the recordings, or flat units such as questions): from
  the standard error of the paired bootstrap of the difference.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.results.bootstrap import BootstrapOptions, grouped_draws, grouped_replicates
from spacewalk.results.compare import NEW_RECORDINGS, NEW_UNITS, THESE_RECORDINGS, _values, check_comparable
from spacewalk.results.rescore import ScoredRun, scored_run
from spacewalk.results.statistics import ALPHA, POWER, detectable_from_se, detectable_over_recordings


@dataclass(frozen=True)
class Detectable:
    """One number's smallest detectable difference under one claim (None: none can be found, `note` says why)."""

    metric: str
    claim: str
    n: int  # the claim's units
    sd: float | None  # the standard deviation of a per-unit paired difference (recordings), or the difference's se
    smallest: float | None
    note: str = ""


def _pairs(runs: Sequence[ScoredRun]) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(len(runs)), 2))


def detectable(runs: Sequence[ScoredRun], options: BootstrapOptions, alpha: float = ALPHA,
               power: float = POWER) -> list[Detectable]:
    """Each headline number's smallest detectable difference, claim by claim (module docstring)."""
    check_comparable(runs, runs)
    names = [n for n in runs[0].metrics if all(n in r.metrics for r in runs)]
    pairs = _pairs(runs)
    one = "" if pairs else "one run: the spread of two unrelated runs (twice its variance), an upper bound"
    out = []
    for name in names:
        metric = runs[0].metrics[name]
        if any(r.metrics[name].value is None or math.isnan(r.metrics[name].value) for r in runs):
            continue
        values = _values(runs, name)
        if len(metric.groups) > 1:
            if pairs:
                variances = [np.nanvar(values[j] - values[i], ddof=1) for i, j in pairs]
            else:
                variances = [2 * np.nanvar(values[0], ddof=1)]
            n = int(np.isfinite(values).all(axis=0).sum())
            sd = math.sqrt(float(np.mean(variances))) if n > 1 else None
            smallest = detectable_over_recordings(sd, n, alpha, power) if sd else None
            note = one if smallest is not None else (
                f"{n} recordings cannot give p < {alpha:g} (6 are needed)" if n > 1 else "one recording")
            out.append(Detectable(name, NEW_RECORDINGS, n, sd, smallest, note))
        if metric.within and sum(metric.sizes) > 1:
            draws = grouped_draws(metric.sizes, options, within=True, between=False)
            replicates = [grouped_replicates(range(len(metric.groups)), r.metrics[name].resampled, draws)
                          for r in runs]
            if pairs:
                ses = [np.nanvar(replicates[j] - replicates[i], ddof=1) for i, j in pairs]
            else:
                ses = [2 * np.nanvar(replicates[0], ddof=1)]
            se = math.sqrt(float(np.mean(ses)))
            claim = THESE_RECORDINGS if len(metric.groups) > 1 else NEW_UNITS
            out.append(Detectable(name, claim, sum(metric.sizes), se,
                                  detectable_from_se(se, None, alpha, power) if se > 0 else None, one))
    return out


def format_power(runs: Sequence[ScoredRun], found: Sequence[Detectable], alpha: float, power: float) -> str:
    identity = runs[0].identity
    pairs = len(_pairs(runs))
    lines = [f"task {runs[0].task}, split {identity.get('split')}: {identity.get('items_summary', '')}",
             f"{len(runs)} run{'s' if len(runs) > 1 else ''}"
             + (f" ({pairs} pair{'s give' if pairs > 1 else ' gives'} the spread of a paired difference)"
                if pairs else ""),
             "", f"the smallest true difference a paired test finds with {power:.0%} power at {alpha:g} (two-sided):",
             ""]
    rows = [("metric", "claim", "units", "spread", "detects", "")]
    for d in found:
        unit = "recordings" if d.claim == NEW_RECORDINGS else "samples" if d.claim == THESE_RECORDINGS else "units"
        spread = "-" if d.sd is None else (f"sd {d.sd:.2f}" if d.claim == NEW_RECORDINGS else f"se {d.sd:.2f}")
        rows.append((d.metric, d.claim.replace("these runs, ", ""), f"{d.n} {unit}", spread,
                     "none" if d.smallest is None else f">= {d.smallest:.2f} points", d.note))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines += ["", "spread: sd, of a per-recording difference; se, the standard error of the difference (paired "
              "bootstrap, every recording kept)"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from spacewalk.core.command_errors import user_errors_reported
    from spacewalk.core.io import write_json
    from spacewalk.results.compare import select_runs

    parser = argparse.ArgumentParser(prog="python -m spacewalk.power", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories or folders of runs")
    parser.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                        help="keep the runs whose config key has this value (repeatable)")
    parser.add_argument("--power", type=float, default=POWER, help="the wanted power (default %(default)s)")
    parser.add_argument("--alpha", type=float, default=ALPHA, help="the test's level (default %(default)s)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="the resamples' seed (default 0)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    with user_errors_reported():
        for flag, value in (("--power", args.power), ("--alpha", args.alpha)):
            if not 0 < value < 1:
                raise ConfigError(f"{flag} {value!r}: a number between 0 and 1")
        from spacewalk.results.compare import options_from

        options = options_from(args.resamples, 0.95, args.seed, "--")
        if args.json is not None and args.json.is_dir():
            raise DataError("a folder, where the JSON file to write is expected", file=args.json)
        runs = [scored_run(r) for r in select_runs(args.runs, args.where, "", one_setting=False)]
        found = detectable(runs, options, args.alpha, args.power)
        print(format_power(runs, found, args.alpha, args.power))
        if args.json is not None:
            write_json(args.json, {"runs": [str(r.run_dir) for r in runs], "alpha": args.alpha, "power": args.power,
                                   "detectable": [asdict(d) for d in found]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
