"""Tables of paired comparisons, laid out by a spec as `python -m spacewalk.report` lays out its tables: each
comparison names its sides A and B by config keys over the run directories given, and its rows are
`python -m spacewalk.compare`'s numbers (spacewalk/results/compare.py: the paired bootstrap difference B - A, its
interval and p), so that no difference in docs/results.md is copied by hand.

A table of a report spec (docs/tables/*.yaml) is a comparison table when it has `compare`:

    - title: lfb_cat against lfb_avg, three seeds each
      compare:                                   # one row per comparison and metric, in this order
        - {label: 1 min, a: {model: lfb_avg, context: 1min}, b: {model: lfb_cat, context: 1min}}
        - {label: 5 min, a: {model: lfb_avg, context: 5min}, b: {model: lfb_cat, context: 5min}}
      where: {data: spacewalk18, decoding: none}  # optional: what both sides of every comparison share
      metrics: [Accuracy, mAP, IoU]              # headline names (spacewalk/results/rescore.py)
      label_header: w                            # optional: the first column's header (default: comparison)
      a_header: "`lfb_avg`"                      # optional: side A's column (default: A); likewise b_header
      resamples: 1000                            # optional: as compare's --resamples, --seed, --level
      seed: 0
      level: 0.95
      digits: 2

A side's `predictions: decoded` compares its runs' plan-decoded predictions (`<run>/decoded/<its decoding>/`,
re-scored as runs of their own; their recorded numbers are metrics.json's `decoded/...`) instead of the runs' own:
`{label: lfb_cat 5 min, a: {model: lfb_cat, context: 5min, decoding: within_window}, b: {model: lfb_cat, context:
5min, decoding: within_window, predictions: decoded}}` is what decoding adds on the same runs.

A side is the runs (with a metrics.json) whose config keys match the table's `where` and the side's own keys
(the values as in a report's `where`: spacewalk/results/runs.py `RunDir.matches`); its seeds are one group, the mean
of its runs on each resample, as `python -m spacewalk.compare --a RUN... --b RUN...` with those runs, the command
printed under the table. A side that matches two settings (runs that differ in more than the seed) is refused,
naming them: add a key. A comparison with a side that matches no finished run is left out and named under the
table (its runs not there yet), as the report names runs without metrics.json.

The runs are re-scored from their recorded predictions (that is how the paired bootstrap draws the same units
for both sides), so under `--check` each run's re-scored numbers are also held against its metrics.json, and a
row of a run that no longer reproduces is flagged `(!)`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spacewalk.core.errors import ConfigError
from spacewalk.results.runs import RunDir, check_spec_keys, where_mapping
from spacewalk.results.seed_groups import SeedGroup, commits_text, group_by_seed, seeds_text

CHECK_TOLERANCE = 1e-6  # as the report's --check: float rounding only


PREDICTIONS = "predictions"  # a side's key that is not a config key: `decoded` (module docstring)
DECODED = "decoded"


@dataclass(frozen=True)
class Comparison:
    label: str
    a: dict[str, Any]
    b: dict[str, Any]
    a_decoded: bool = False  # the side's decoded predictions, not the runs' own
    b_decoded: bool = False


def _side_keys(values: Any, where: str) -> tuple[dict[str, Any], bool]:
    """A side's config keys and whether it compares decoded predictions (`predictions: decoded`)."""
    if not isinstance(values, Mapping) or PREDICTIONS not in values:
        return where_mapping(values, where), False
    if values[PREDICTIONS] != DECODED:
        raise ConfigError(f"{where}: {PREDICTIONS} must be {DECODED!r} (the runs' plan-decoded predictions) or left "
                          f"out (their own), got {values[PREDICTIONS]!r}")
    keys = {k: v for k, v in values.items() if k != PREDICTIONS}
    if not keys:
        raise ConfigError(f"{where}: a side needs config keys besides {PREDICTIONS}")
    return where_mapping(keys, where), True


@dataclass(frozen=True)
class ComparisonSpec:
    """One comparison table's layout (module docstring)."""

    comparisons: tuple[Comparison, ...]
    title: str | None = None
    metrics: tuple[str, ...] = ("Accuracy", "mAP", "IoU")
    where: dict[str, Any] = field(default_factory=dict)
    label_header: str = "comparison"
    a_header: str = "A"
    b_header: str = "B"
    resamples: int = 1000
    seed: int = 0
    level: float = 0.95
    digits: int = 2

    KEYS = ("title", "compare", "metrics", "where", "label_header", "a_header", "b_header", "resamples", "seed",
            "level", "digits")

    @classmethod
    def from_mapping(cls, values: Any, where: str) -> ComparisonSpec:
        """From a spec file's mapping (one with `compare`); `where` names it in errors (file and table)."""
        check_spec_keys(values, cls.KEYS, where, "a comparison table")
        listed = values.get("compare")
        if not isinstance(listed, list) or not listed:
            raise ConfigError(f"{where}: compare must be a non-empty list of {{label, a, b}}, got {listed!r}")
        comparisons = []
        for i, c in enumerate(listed):
            if not isinstance(c, Mapping) or set(c) != {"label", "a", "b"} or not c["a"] or not c["b"]:
                raise ConfigError(f"{where}: compare[{i}] must be a mapping with label, a and b (each a mapping of "
                                  f"config keys to values, as `where`), got {c!r}")
            (a, a_decoded), (b, b_decoded) = (_side_keys(c[k], f"{where}: compare[{i}].{k}") for k in ("a", "b"))
            comparisons.append(Comparison(str(c["label"]), a, b, a_decoded, b_decoded))
        labels = [c.label for c in comparisons]
        if len(set(labels)) < len(labels):
            raise ConfigError(f"{where}: two comparisons with one label: {labels}")
        metrics = values.get("metrics", cls.metrics)
        metrics = [metrics] if isinstance(metrics, str) else metrics
        if not isinstance(metrics, (list, tuple)) or not metrics or not all(isinstance(m, str) for m in metrics):
            raise ConfigError(f"{where}: metrics must be a non-empty list of names, got {metrics!r}")
        numbers = {k: values.get(k, getattr(cls, k)) for k in ("resamples", "seed", "digits")}
        for key, value in numbers.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "resamples" else 0):
                raise ConfigError(f"{where}: {key} must be a {'positive' if key == 'resamples' else 'non-negative'} "
                                  f"integer, got {value!r}")
        level = values.get("level", cls.level)
        if not isinstance(level, float) or not 0 < level < 1:
            raise ConfigError(f"{where}: level must be a number between 0 and 1, got {level!r}")
        return cls(tuple(comparisons), title=values.get("title"), metrics=tuple(metrics),
                   where=where_mapping(values.get("where"), f"{where}: where"),
                   label_header=str(values.get("label_header", cls.label_header)),
                   a_header=str(values.get("a_header", cls.a_header)),
                   b_header=str(values.get("b_header", cls.b_header)), level=level, **numbers)


@dataclass
class Compared:
    """One comparison made: its sides (a group of seeds each), the differences by metric, compare's notes."""

    comparison: Comparison
    a: SeedGroup
    b: SeedGroup
    differences: dict[str, Any]  # metric -> spacewalk.compare.Difference
    notes: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)  # --check: runs whose re-scoring differs from metrics.json
    paths_a: list[Path] = field(default_factory=list)  # what each side scored (the runs, or their decoded predictions)
    paths_b: list[Path] = field(default_factory=list)


@dataclass
class ComparisonTable:
    spec: ComparisonSpec
    compared: list[Compared]
    left_out: list[str] = field(default_factory=list)  # comparisons not made, and why
    unfinished: list[Path] = field(default_factory=list)  # runs of a side without metrics.json

    @property
    def mismatches(self) -> list[str]:
        return [m for c in self.compared for m in c.mismatches]

    def header(self) -> list[str]:
        s = self.spec
        return [s.label_header, "metric", s.a_header, s.b_header, f"{s.b_header} - {s.a_header}",
                f"{s.level * 100:g} % interval", "p"]

    def rows(self) -> list[list[str]]:
        """The table's rows as printed: one per comparison and metric ("-" where a metric has no difference)."""
        digits = self.spec.digits
        out = []
        for c in self.compared:
            flag = " (!)" if c.mismatches else ""
            for name in self.spec.metrics:
                d = c.differences.get(name)
                if d is None:
                    out.append([c.comparison.label, name, "-", "-", "-", "-", "-"])
                    continue
                interval = "-" if d.low is None else f"[{d.low:+.{digits}f}, {d.high:+.{digits}f}]"
                p = "-" if d.p_value is None else _p_text(d.p_value)
                out.append([c.comparison.label, name, f"{d.a:.{digits}f}", f"{d.b:.{digits}f}",
                            f"{d.difference:+.{digits}f}{flag}", interval, p])
        return out


def _p_text(p: float) -> str:
    """p to 3 decimals: the smallest p of 1000 resamples, 1/1001, is 0.001; below that (more resamples) 1.0e-04."""
    return f"{p:.3f}" if round(p, 3) >= 0.001 else f"{p:.1e}"


def _side(runs: Sequence[RunDir], where: Mapping[str, Any], spec: ComparisonSpec, label: str, side: str
          ) -> tuple[SeedGroup | None, list[Path]]:
    """The side's group of seeds (None: no finished run) and its runs without metrics.json."""
    matching = [r for r in runs if r.matches({**spec.where, **where})]
    groups = group_by_seed([r for r in matching if r.metrics is not None])
    if len(groups) > 1:
        which = f"table {spec.title!r}" if spec.title else "the table"
        raise ConfigError(f"{which}, comparison {label!r}: side {side} matches {len(groups)} settings, not one: "
                          + "; ".join(f"{' '.join(g.overrides)} ({g.runs[0].path})" for g in groups)
                          + "; add a key to its mapping that tells them apart")
    return (groups[0] if groups else None), [r.path for r in matching if r.metrics is None]


def _keys(where: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={'|'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in where.items())


def build_comparison_table(spec: ComparisonSpec, runs: Sequence[RunDir], score: Callable[[Path], Any],
                           check: bool = False) -> ComparisonTable:
    """Each comparison of the spec over `runs`; `score(run_dir) -> spacewalk.results.rescore.ScoredRun` (cached by the
    caller); `check`: hold each run's re-scored numbers against its metrics.json."""
    from spacewalk.results.bootstrap import BootstrapOptions
    from spacewalk.results.compare import compare

    options = BootstrapOptions(n_resamples=spec.resamples, level=spec.level, seed=spec.seed)
    table = ComparisonTable(spec, [])
    for comparison in spec.comparisons:
        (a, unfinished_a), (b, unfinished_b) = (_side(runs, comparison.a, spec, comparison.label, "A"),
                                                _side(runs, comparison.b, spec, comparison.label, "B"))
        table.unfinished += unfinished_a + unfinished_b
        if a is None or b is None:
            sides = [f"{name} ({_keys(keys)})" for name, group, keys in (("A", a, comparison.a), ("B", b, comparison.b))
                     if group is None]
            table.left_out.append(f"{comparison.label}: no finished run for {' nor '.join(sides)}")
            continue
        paths_a, paths_b = ([predictions_path(r, decoded) for r in group.runs]
                            for group, decoded in ((a, comparison.a_decoded), (b, comparison.b_decoded)))
        scored_a, scored_b = [score(p) for p in paths_a], [score(p) for p in paths_b]
        differences, notes = compare(scored_a, scored_b, options)
        made = Compared(comparison, a, b, {d.name: d for d in differences}, list(notes), paths_a=paths_a,
                        paths_b=paths_b)
        if check:
            for run, scored, decoded in [*((r, s, comparison.a_decoded) for r, s in zip(a.runs, scored_a)),
                                         *((r, s, comparison.b_decoded) for r, s in zip(b.runs, scored_b))]:
                made.mismatches += _check(run, scored, spec.metrics, decoded)
        table.compared.append(made)
    return table


def predictions_path(run: RunDir, decoded: bool) -> Path:
    """What a side scores of `run`: the run directory, or its decoded predictions (`<run>/decoded/<decoding>`)."""
    if not decoded:
        return run.path
    decoding = run.value("decoding")
    path = run.path / "decoded" / str(decoding)
    if decoding in (None, "none") or not path.is_dir():
        raise ConfigError(f"{run.path}: a side with {PREDICTIONS}: {DECODED} needs runs that decoded (decoding="
                          f"{decoding}; no {path}): add decoding=<name> to the side's keys")
    return path


def _check(run: RunDir, scored: Any, metrics: Sequence[str], decoded: bool = False) -> list[str]:
    import math

    problems = []
    for name in metrics:
        recorded = run.headline.get(f"decoded/{name}" if decoded else name)
        rescored = scored.metrics.get(name)
        if recorded is None or rescored is None:
            continue
        if rescored.value is None or not math.isclose(rescored.value, recorded.value, rel_tol=0,
                                                      abs_tol=CHECK_TOLERANCE):
            problems.append(f"{run.path}: {name} is {recorded.value!r} in metrics.json, re-scored {rescored.value!r}")
    return problems


def compare_command(compared: Compared, spec: ComparisonSpec) -> str:
    """The `python -m spacewalk.compare` command that gives the comparison's rows (all its metrics)."""
    import shlex

    extra = []
    for flag, value, default in (("--resamples", spec.resamples, 1000), ("--level", spec.level, 0.95),
                                 ("--seed", spec.seed, 0)):
        extra += [flag, str(value)] if value != default else []
    return shlex.join(["python", "-m", "spacewalk.compare", "--a", *map(str, compared.paths_a),
                       "--b", *map(str, compared.paths_b), *extra])


def comparison_markdown(table: ComparisonTable) -> str:
    spec = table.spec
    lines = [f"### {spec.title}\n"] if spec.title else []

    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    if table.compared:
        lines += [row(table.header()), "|" + "---|" * len(table.header())]
        lines += [row(r) for r in table.rows()]
        lines += ["", f"Paired bootstrap (spacewalk/results/compare.py): {spec.resamples} resamples (seed {spec.seed}) "
                  "of the "
                  "benchmark's units, the same draws for A and B, each side the mean of its seeds on each resample; "
                  "the interval is the percentile interval of the resampled differences, p two-sided from the "
                  "centred differences. Commands:", ""]
        for c in table.compared:
            lines.append(f"- {c.comparison.label}: `{compare_command(c, spec)}`")
            for side, group in (("A", c.a), ("B", c.b)):
                lines.append(f"  - {side} ({seeds_text(group)}; {commits_text(group)}): "
                             f"`{group.command() or 'not recorded'}`")
            lines += [f"  - {note}" for note in c.notes]
    else:
        lines.append("No comparison of this table has runs for both sides.")
    if table.left_out:
        lines += ["", "Left out, no runs yet: " + "; ".join(table.left_out)]
    if table.unfinished:
        lines += ["", "Left out, no metrics.json (failed, or still running): "
                  + ", ".join(str(p) for p in table.unfinished)]
    if table.mismatches:
        lines += ["", "**(!) no longer reproduces from its recorded predictions** (`--check`):", ""]
        lines += [f"- {m}" for m in table.mismatches]
    return "\n".join(lines) + "\n"
