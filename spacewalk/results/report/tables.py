"""A report table laid out from run directories by its spec (spec.py): the runs a table's `where` selects, grouped by
seed into one setting per cell (spacewalk/results/seed_groups.py), each cell a summary per number.

What is refused, naming the table and what to fix: a `where`, row or column key that no run has (a misspelt key
would select nothing, or fill the table with "-"); a number no selected run has (a misspelt metric); runs of two
tasks in one table (a multiple-choice run among step-recognition ones: add a `where`); two settings in one cell;
a row or column key that is a config section in some run (a run without Hydra's record of its choices). A number
that is undefined in a run, or missing from some runs of a cell, is flagged in the cell, never averaged away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spacewalk.core.errors import ConfigError
from spacewalk.results.report.spec import QuotedRow, TableSpec
from spacewalk.results.runs import Metric, RunDir, metric_value
from spacewalk.results.seed_groups import SeedGroup, SeedSummary, format_summary, group_by_seed, summarize
from spacewalk.results.selection import check_keys, select


def key_text(values: Sequence[object]) -> str:
    """A row's or column's value(s) as text: `lfb_cat` (model=lfb_cat, no experiment), `lfb_cat, paper_lfb_cat`."""
    return ", ".join(str(v) for v in values if v is not None)


def _duration_order(text: str) -> tuple:
    from spacewalk.core.durations import parse_duration

    try:
        return (0, parse_duration(text), text)
    except (ValueError, TypeError):
        return (1, 0.0, text)


def ordered(found: list[str], order: Sequence[str], natural: bool) -> list[str]:
    first = [k for k in order if k in found]
    rest = [k for k in found if k not in first]
    return first + (sorted(rest, key=_duration_order) if natural else rest)


@dataclass
class Cell:
    """A table cell: the setting (runs differing only in seed) it shows and, per number, its summary."""

    group: SeedGroup
    numbers: dict[str, SeedSummary | None]
    mismatches: list[str] = field(default_factory=list)  # --check: what no longer re-scores as recorded

    @property
    def flags(self) -> list[str]:
        """What the cell cannot show as one number (an undefined or missing number), said under the table."""
        out = []
        for name, s in self.numbers.items():
            if s is not None and s.undefined:
                runs = [str(r.path) for r in self.group.runs if name in r.headline and r.headline[name].undefined]
                out.append(f"{name} is undefined (NaN) in {', '.join(runs)}")
            elif s is not None and s.missing:
                runs = [str(r.path) for r in self.group.runs if name not in r.headline]
                out.append(f"{name} is missing from {', '.join(runs)}: the cell is over the other "
                           f"{s.n} run{'s' if s.n > 1 else ''}")
        return out

    def text(self, metrics: Sequence[str], digits: int) -> str:
        parts = [format_summary(self.numbers[m], digits) if self.numbers.get(m) else "-" for m in metrics]
        flagged = self.mismatches or any(self.numbers.get(m) and self.numbers[m].flagged for m in metrics)
        return " / ".join(parts) + (" (!)" if flagged else "")


@dataclass
class Table:
    spec: TableSpec
    metrics: tuple[str, ...]  # the spec's, or the declared headline numbers of its runs' task
    row_keys: list[str]
    column_keys: list[str]
    cells: dict[tuple[str, str], Cell]
    missing: list[Path] = field(default_factory=list)  # runs of the table's settings without metrics.json

    def row_label(self, key: str) -> str:
        return self.spec.row_labels.get(key, key)

    def cell_metrics(self, column: str) -> list[str]:
        """The numbers of a column's cells: the column's own (`columns: [metric]`), else every metric."""
        return [column] if self.spec.metric_columns else list(self.metrics)

    def units(self, column: str) -> str:
        """How many units (questions, recordings) the column's numbers' intervals are over, for `{n}` in its
        label: "105", or "105/52" where its runs differ, "?" where no run says."""
        found = {run.headline[m].n for (_, c), cell in self.cells.items() if c == column
                 for run in cell.group.runs for m in self.cell_metrics(column)
                 if m in run.headline and run.headline[m].n is not None}
        return "/".join(str(n) for n in sorted(found)) or "?"

    def column_label(self, key: str) -> str:
        own = self.spec.column_labels.get(key)
        if own:
            return own.replace("{n}", self.units(key)) if "{n}" in own else own
        return self.spec.column_label.format(key, n=self.units(key))

    @property
    def mismatches(self) -> list[str]:
        return [m for c in self.cells.values() for m in c.mismatches]

    @property
    def flags(self) -> list[str]:
        return [f for c in self.cells.values() for f in c.flags]

    def layout(self) -> list[tuple[str, list[str], bool]]:
        """The rows as printed: (label, cell texts, quoted). A quoted row follows (`after`) or precedes (`before`)
        the row it names (by value or label) where that row's place in `row_order` is, even when no run fills it;
        the others come last."""
        def quoted_row(q: QuotedRow) -> tuple[str, list[str], bool]:
            return q.label, [q.cells.get(c, "-") for c in self.column_keys], True

        out: list[tuple[str, list[str], bool]] = []
        placed: set[int] = set()
        places = [*self.spec.row_order, *(r for r in self.row_keys if r not in self.spec.row_order)]
        for row in places:
            for i, q in enumerate(self.spec.quoted):
                if i not in placed and q.before is not None and q.before in (row, self.row_label(row)):
                    out.append(quoted_row(q))
                    placed.add(i)
            if row in self.row_keys:
                cells = [self.cells[(row, c)].text(self.cell_metrics(c), self.spec.digits) if (row, c) in self.cells
                         else "-" for c in self.column_keys]
                out.append((self.row_label(row), cells, False))
            for i, q in enumerate(self.spec.quoted):
                if i not in placed and q.after is not None and q.after in (row, self.row_label(row)):
                    out.append(quoted_row(q))
                    placed.add(i)
        out += [quoted_row(q) for i, q in enumerate(self.spec.quoted) if i not in placed]
        return out


def _group_numbers(group: SeedGroup, metrics: Sequence[str]) -> dict[str, SeedSummary | None]:
    out: dict[str, SeedSummary | None] = {}
    for name in metrics:
        found, missing = [], 0
        for run in group.runs:
            metric = run.headline.get(name)
            if metric is None and run.metrics is not None:  # any number of metrics.json, by its path
                value = metric_value(run.metrics, name)
                metric = Metric(value) if value is not None else None
            if metric is None:
                missing += 1
            else:
                found.append(metric)
        out[name] = summarize(found, missing) if found else None
    return out


def _has_number(run: RunDir, name: str) -> bool:
    return name in run.headline or (run.metrics is not None and metric_value(run.metrics, name) is not None)


def table_metrics(spec: TableSpec, runs: Sequence[RunDir]) -> tuple[str, ...]:
    """The numbers of a table: its spec's, each held by some run (a misspelt one is refused); without `metrics`,
    the headline numbers the runs' benchmark declares for their task (else every headline number they have)."""
    if spec.metrics is not None:
        for name in spec.metrics:
            if runs and not any(_has_number(r, name) for r in runs):
                known = list(dict.fromkeys(n for r in runs for n in r.headline))
                raise ConfigError(f"{spec.name}: no run has the number {name!r}; they have {', '.join(known)} (or "
                                  "give any number of metrics.json by its path)")
        return spec.metrics
    from spacewalk.benchmarks.registry import headlines_of

    for run in runs:
        declared = [h.name for h in headlines_of(run.origin.config if run.origin and not run.config.get("data")
                                                  else run.config) if not h.name.endswith("/*")]
        if declared:
            return tuple(declared)
    return tuple(dict.fromkeys(n for r in runs for n in r.headline))


def check_one_task(runs: Sequence[RunDir], where: str) -> None:
    """Refuse runs of two tasks in one table or comparison side, naming them (a multiple-choice run among
    step-recognition ones would land as a row)."""
    tasks: dict[str | None, list[Path]] = {}
    for run in runs:
        tasks.setdefault(run.task, []).append(run.path)
    if len(tasks) > 1:
        raise ConfigError(f"{where}: its runs are of {len(tasks)} tasks: "
                          + "; ".join(f"{task or 'no registered benchmark'} ({paths[0]}"
                                      + (f" and {len(paths) - 1} more" if len(paths) > 1 else "") + ")"
                                      for task, paths in tasks.items())
                          + "; add a `where` (e.g. data: ...) that keeps one")


def build_table(spec: TableSpec, runs: Sequence[RunDir]) -> Table:
    """Lay the runs out by the spec: filter by `where`, group by seed, one setting per cell (per row with
    `columns: [metric]`, its numbers then one per column)."""
    check_keys(runs, spec.where, f"{spec.name}: where")
    matching = select(runs, spec.where)
    chosen = [r for r in matching if r.metrics is not None]
    check_keys(chosen, [*spec.rows, *spec.columns], f"{spec.name}: rows/columns")
    check_one_task(chosen, spec.name)
    metrics = table_metrics(spec, chosen)
    cells: dict[tuple[str, str], Cell] = {}
    rows: list[str] = []
    columns: list[str] = []
    for group in group_by_seed(chosen):
        first = group.runs[0]
        row = key_text([first.label(k) for k in spec.rows])
        column = "" if spec.metric_columns else key_text([first.label(k) for k in spec.columns])
        if (row, column) in cells:
            other = cells[(row, column)].group
            raise ConfigError(
                f"{spec.name}: two settings in the cell ({row}, {column}): "
                f"{' '.join(other.overrides)} ({other.runs[0].path}) and {' '.join(group.overrides)} "
                f"({first.path}); add a key to rows/columns or a `where` that tells them apart")
        cells[(row, column)] = Cell(group, _group_numbers(group, metrics))
        rows += [row] if row not in rows else []
        columns += [column] if column not in columns else []
    if spec.metric_columns:  # the row's cell, one per number
        cells = {(row, m): Cell(cell.group, cell.numbers) for (row, _), cell in cells.items() for m in metrics}
        columns = list(metrics)
    return Table(spec, metrics, ordered(rows, spec.row_order, natural=False),
                 columns if spec.metric_columns else ordered(columns, spec.column_order, natural=True), cells,
                 [r.path for r in matching if r.metrics is None])
