"""Tables of paired comparisons (their spec: spec.py's ComparisonSpec), laid out as `python -m spacewalk.report`
lays out its tables: each comparison names its sides A and B by config keys over the run directories given, and its
rows are
`python -m spacewalk.compare`'s numbers (spacewalk/results/compare.py: the difference B - A and, for the claim it
answers, its interval, p and the smallest difference the split detects), so that no difference in docs/results.md
is copied by hand.

A table of a report spec (docs/tables/*.yaml) is a comparison table when it has `compare`:

    - title: lfb_cat against lfb_avg, three seeds each
      compare:                                   # one row per comparison and metric, in this order
        - {label: 1 min, a: {model: lfb_avg, context: 1min}, b: {model: lfb_cat, context: 1min}}
        - {label: 5 min, a: {model: lfb_avg, context: 5min}, b: {model: lfb_cat, context: 5min}}
      where: {data: spacewalk18, decoding: none}  # optional: what both sides of every comparison share
      metrics: [Accuracy, mAP, IoU]              # optional: headline names (default: the task's declared ones)
      claim: recipes                             # optional (below)
      label_header: w                            # optional: the first column's header (default: comparison)
      a_header: "`lfb_avg`"                      # optional: side A's column (default: A); likewise b_header
      resamples: 1000                            # optional: as compare's --resamples, --seed, --level
      seed: 0
      level: 0.95
      digits: 2

`claim` says which question the interval and p answer (spacewalk/results/statistics.py): `recipes` (other
recordings and other seeds: a side of several seeds), `recordings` (these runs on other recordings), `samples`
(these runs, other samples of these recordings; for flat units, other questions), or `widest` (the default):
for each row the first of those the row has. The table's `claim` column names the one each row answers.

A side's `predictions: decoded` compares its runs' plan-decoded predictions (`<run>/decoded/<its decoding>/`,
re-scored as runs of their own; their recorded numbers are metrics.json's `decoded/...`) instead of the runs' own:
`{label: lfb_cat 5 min, a: {model: lfb_cat, context: 5min, decoding: within_window}, b: {model: lfb_cat, context:
5min, decoding: within_window, predictions: decoded}}` is what decoding adds on the same runs (paired by seed).

A side is the runs (with a metrics.json) whose config keys match the table's `where` and the side's own keys
(spacewalk/results/selection.py); its seeds are one group, as `python -m spacewalk.compare --a RUN... --b RUN...`
with those runs, the command given under the table. A side that matches two settings (runs that differ in more
than the seed) is refused, naming them: add a key. A comparison with a side that matches no finished run is left
out and named under the table (its runs not there yet), as the report names runs without metrics.json.

The runs are re-scored from their recorded predictions (that is how the paired draws are the same for both
sides), so under `--check` each run's re-scored numbers are also held against its metrics.json, and a row of a run
that no longer reproduces is flagged `(!)`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spacewalk.core.errors import ConfigError
from spacewalk.results.layout import DECODED
from spacewalk.results.report.spec import CLAIMS, PREDICTIONS, SHORT, Comparison, ComparisonSpec
from spacewalk.results.runs import RunDir
from spacewalk.results.seed_groups import SeedGroup, group_by_seed
from spacewalk.results.selection import check_keys, select


@dataclass
class Compared:
    """One comparison made: its sides (a group of seeds each), the differences by metric, compare's notes."""

    comparison: Comparison
    a: SeedGroup
    b: SeedGroup
    differences: dict[str, Any]  # metric -> spacewalk.results.compare.Difference
    notes: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)  # --check: runs whose re-scoring differs from metrics.json
    paths_a: list[Path] = field(default_factory=list)  # what each side scored (the runs, or their decoded predictions)
    paths_b: list[Path] = field(default_factory=list)


@dataclass
class ComparisonTable:
    spec: ComparisonSpec
    metrics: tuple[str, ...]
    compared: list[Compared]
    left_out: list[str] = field(default_factory=list)  # comparisons not made, and why
    unfinished: list[Path] = field(default_factory=list)  # runs of a side without metrics.json

    @property
    def mismatches(self) -> list[str]:
        return [m for c in self.compared for m in c.mismatches]

    @property
    def flags(self) -> list[str]:
        return []

    def header(self) -> list[str]:
        s = self.spec
        return [s.label_header, "metric", s.a_header, s.b_header, f"{s.b_header} - {s.a_header}",
                f"{s.level * 100:g} % interval", "p", "detects", "claim"]

    def rows(self) -> list[list[str]]:
        """The table's rows as printed: one per comparison and metric ("-" where a metric has no difference)."""
        from spacewalk.results.compare import p_text

        digits = self.spec.digits
        out = []
        for c in self.compared:
            flag = " (!)" if c.mismatches else ""
            for name in self.metrics:
                d = c.differences.get(name)
                claim = d.claim(CLAIMS[self.spec.claim]) if d is not None else None
                if d is None:
                    out.append([c.comparison.label, name, "-", "-", "-", "-", "-", "-", "-"])
                    continue
                base = [c.comparison.label, name, f"{d.a:.{digits}f}", f"{d.b:.{digits}f}",
                        f"{d.difference:+.{digits}f}{flag}"]
                if claim is None:
                    out.append([*base, "-", "-", "-", "-"])
                    continue
                interval = "-" if claim.low is None else f"[{claim.low:+.{digits}f}, {claim.high:+.{digits}f}]"
                p = p_text(claim.p) if claim.p is not None else (f"none ({claim.n} recordings)" if claim.note
                                                                 and "cannot give" in claim.note else "-")
                detects = "-" if claim.detectable is None else f">= {claim.detectable:.{digits}f}"
                out.append([*base, interval, p, detects, SHORT[claim.name]])
        return out


def _side(runs: Sequence[RunDir], where: Mapping[str, Any], spec: ComparisonSpec, label: str, side: str
          ) -> tuple[SeedGroup | None, list[Path]]:
    """The side's group of seeds (None: no finished run) and its runs without metrics.json."""
    matching = select(runs, {**spec.where, **where})
    groups = group_by_seed([r for r in matching if r.metrics is not None])
    if len(groups) > 1:
        raise ConfigError(f"{spec.name}, comparison {label!r}: side {side} matches {len(groups)} settings, not one: "
                          + "; ".join(f"{' '.join(g.overrides)} ({g.runs[0].path})" for g in groups)
                          + "; add a key to its mapping that tells them apart")
    return (groups[0] if groups else None), [r.path for r in matching if r.metrics is None]


def _keys(where: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={'|'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in where.items())


def build_comparison_table(spec: ComparisonSpec, runs: Sequence[RunDir], score: Callable[[Path], Any],
                           rescore_check: Callable[[RunDir, Any, Sequence[str], bool], list[str]] | None = None
                           ) -> ComparisonTable:
    """Each comparison of the spec over `runs`; `score(run_dir) -> spacewalk.results.rescore.ScoredRun` (cached by
    the caller); `rescore_check(run, scored, metrics, decoded)`: under --check, what of a run no longer re-scores
    to its metrics.json."""
    from spacewalk.results.bootstrap import BootstrapOptions
    from spacewalk.results.compare import compare
    from spacewalk.results.report.tables import check_one_task, table_metrics

    keys = {k for c in spec.comparisons for side in (c.a, c.b) for k in side}
    check_keys(runs, [*spec.where, *keys], f"{spec.name}: its sides' keys")
    options = BootstrapOptions(n_resamples=spec.resamples, level=spec.level, seed=spec.seed)
    table = ComparisonTable(spec, spec.metrics or (), [])
    for comparison in spec.comparisons:
        (a, unfinished_a), (b, unfinished_b) = (_side(runs, comparison.a, spec, comparison.label, "A"),
                                                _side(runs, comparison.b, spec, comparison.label, "B"))
        table.unfinished += unfinished_a + unfinished_b
        if a is None or b is None:
            sides = [f"{name} ({_keys(keys)})" for name, group, keys in (("A", a, comparison.a), ("B", b, comparison.b))
                     if group is None]
            table.left_out.append(f"{comparison.label}: no finished run for {' nor '.join(sides)}")
            continue
        check_one_task([*a.runs, *b.runs], f"{spec.name}, comparison {comparison.label!r}")
        if not table.metrics:
            table.metrics = table_metrics(spec, [*a.runs, *b.runs])  # type: ignore[arg-type]
        paths_a, paths_b = ([predictions_path(r, decoded) for r in group.runs]
                            for group, decoded in ((a, comparison.a_decoded), (b, comparison.b_decoded)))
        scored_a, scored_b = [score(p) for p in paths_a], [score(p) for p in paths_b]
        differences, notes = compare(scored_a, scored_b, options)
        made = Compared(comparison, a, b, {d.name: d for d in differences}, list(notes), paths_a=paths_a,
                        paths_b=paths_b)
        for name in table.metrics:
            if name not in made.differences:
                made.notes.append(f"{name}: not a headline number both sides have ({', '.join(made.differences)})")
        if rescore_check is not None:
            for run, scored, decoded in [*((r, s, comparison.a_decoded) for r, s in zip(a.runs, scored_a)),
                                         *((r, s, comparison.b_decoded) for r, s in zip(b.runs, scored_b))]:
                made.mismatches += rescore_check(run, scored, table.metrics, decoded)
        table.compared.append(made)
    return table


def predictions_path(run: RunDir, decoded: bool) -> Path:
    """What a side scores of `run`: the run directory, or its decoded predictions (`<run>/decoded/<decoding>`)."""
    if not decoded:
        return run.path
    decoding = run.value("decoding")
    path = run.path / DECODED / str(decoding)
    if decoding in (None, "none") or not path.is_dir():
        raise ConfigError(f"{run.path}: a side with {PREDICTIONS}: {DECODED} needs runs that decoded (decoding="
                          f"{decoding}; no {path}): add decoding=<name> to the side's keys")
    return path


def compare_command(compared: Compared, spec: ComparisonSpec) -> str:
    """The `python -m spacewalk.compare` command that gives the comparison's rows (all its metrics)."""
    import shlex

    extra = []
    for flag, value, default in (("--resamples", spec.resamples, 1000), ("--level", spec.level, 0.95),
                                 ("--seed", spec.seed, 0)):
        extra += [flag, str(value)] if value != default else []
    return shlex.join(["python", "-m", "spacewalk.compare", "--a", *map(str, compared.paths_a),
                       "--b", *map(str, compared.paths_b), *extra])
