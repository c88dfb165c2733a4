"""Tables made from run directories: `python -m spacewalk.report`, so that no number in docs/results.md is typed.

    python -m spacewalk.report RUN_OR_SWEEP_DIR... [--spec docs/tables/results.yaml] [--markdown out.md]
        [--update docs/results.md] [--verify docs/results.md] [--csv out.csv] [--wandb] [--check]

Every run directory given (or every run below a folder: a sweep's jobs, evaluate.py's runs) is read
(spacewalk/results/runs.py): its config, its headline numbers with their intervals, the command and commit that
produced it. Runs that differ only in their seed are one setting (spacewalk/results/seed_groups.py). A table is laid out
by a **spec**, data rather than code: which numbers go in a cell and which config keys make the rows and the columns.
Without `--spec`, one table from the flags `--rows model --columns context --metrics Accuracy,mAP,IoU` (the
defaults: Spacewalk-18 step recognition, recipe by window). A spec file (YAML) is a list of tables, each a mapping:

    - title: One sample at a time (the benchmark's protocol)
      metrics: [Accuracy, mAP, IoU]      # headline names (run_dirs.py) or any number's path in metrics.json
      rows: [model]                      # config keys: a config group's choice or a dotted config value
      columns: [context]
      where: {decoding: none}            # optional: only the runs whose keys have these values (null: not set;
                                         # a list: any of them; text may be a pattern: "*.json")
      row_header: recipe                 # optional: the first column's header (default: the row keys)
      row_labels: {lfb_avg: "`lfb_avg`, ours (MiniLM, text only)"}   # optional, by the row's value(s) joined ", "
      column_label: "w = {}"             # optional: format of a column's value(s)
      column_labels: {1min: w = 1 min}   # optional: a column's own label (before column_label)
      row_order: [zero_shot, lfb_avg]    # optional: these first, in this order (else as found)
      column_order: [1min, 3min, 5min]   # optional (else durations by length, other values as found)
      quoted: [{label: InternVideo LFB Avg (paper, V+T), after: lfb_avg, cells: {5min: 12.37 / 17.25 / 3.73}}]
                                         # (or before: a row; cells by column value, or by metric: see below)
      digits: 2                          # optional

**One number per column**: `columns: [metric]` makes each number of `metrics` a column (the multiple-choice
tables: overall and per question type, `per_type/when task`), the rows one setting each; `quoted` cells are then
keyed by metric, and a column label's `{n}` is how many units its intervals resampled (`"when task ({n})"`:
the questions of that type, from metrics.json). docs/tables/multiple_choice.yaml lays out docs/results.md's
multiple-choice tables so.

**Paired comparisons**: a table with `compare` (spacewalk/results/report/comparisons.py) lists, for each comparison of
two groups of runs named by config keys, `python -m spacewalk.compare`'s difference B - A, its interval and p
(docs/tables/comparisons.yaml); it goes into its block, `--verify` and `--check` as any table.

A cell holds its numbers joined by " / ", each `value [low, high]` for one run (its bootstrap interval) or
`mean ± std [low, high]` over several seeds (the pooled interval: spacewalk/results/seed_groups.py). Two settings that
fall into one cell (they differ in an override the spec's keys do not name) are refused, naming them: add a key
or a `where`. `quoted` rows are numbers quoted from elsewhere (a paper), printed as given and marked so.

Outputs: the markdown (stdout, or `--markdown FILE`) with, under each table, the command and commit of every cell
and the command that made the table; `--update DOC.md` puts each table into its block of a document, between
`<!-- spacewalk.report table="TITLE" -->` and `<!-- /spacewalk.report -->` (the text around it stays as written, the
markers too, so the next run replaces the table again: docs/results.md's tables are made so); `--csv FILE`, one
row per (table, row, column, number): value, std, bounds, seeds, command, commits, run directories; `--wandb`:
the same tables as wandb.Table, in a W&B run of its own (offline unless `--wandb-mode online`, as train.py's
logger).

`--verify DOC.md` writes nothing: it makes the tables again and names each table row of the document's blocks
that differs from what the runs give now (exit code 1): a number typed by hand, or a run that changed since the
document was made. With `--check` as well, the runs themselves are re-scored too: together the two are the guard
that every number of docs/results.md still follows from its runs' recorded predictions.

`--check` re-scores each run from its recorded predictions and flags (`(!)` in the cell, a list under the table,
exit code 1) a cell whose run no longer gives the numbers its metrics.json holds. The re-scoring is
`spacewalk.results.rescore.rescore_run(run_dir) -> {headline name: number}` (issue 23, item 6), imported only when
`--check` is given; `build_report(..., rescore=...)` takes any function of that shape.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.io import write_text
from spacewalk.results.report.comparisons import (
    ComparisonSpec,
    ComparisonTable,
    build_comparison_table,
    compare_command,
    comparison_markdown,
)
from spacewalk.results.runs import Metric, RunDir, check_spec_keys, metric_value, read_runs, where_mapping
from spacewalk.results.seed_groups import (
    SeedGroup,
    SeedSummary,
    commits_text,
    format_summary,
    group_by_seed,
    seeds_text,
    summarize,
)

Rescore = Callable[[Path], Mapping[str, Any]]
METRIC_COLUMNS = "metric"  # `columns: [metric]`: the numbers of `metrics` are the columns
CHECK_TOLERANCE = 1e-6  # a re-scored number may differ from metrics.json's by float rounding only


# ---- the spec -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class QuotedRow:
    label: str
    cells: dict[str, str]  # column label's value (as in column_order) -> the quoted text
    after: str | None = None  # the row label (or row value) it follows; None: at the end
    before: str | None = None  # or the one it precedes (a paper's chance level above the runs)


@dataclass(frozen=True)
class TableSpec:
    """One table's layout (module docstring)."""

    metrics: tuple[str, ...] = ("Accuracy", "mAP", "IoU")
    rows: tuple[str, ...] = ("model",)
    columns: tuple[str, ...] = ("context",)
    title: str | None = None
    where: dict[str, Any] = field(default_factory=dict)
    row_header: str | None = None
    row_labels: dict[str, str] = field(default_factory=dict)
    column_label: str = "{}"
    column_labels: dict[str, str] = field(default_factory=dict)
    row_order: tuple[str, ...] = ()
    column_order: tuple[str, ...] = ()
    quoted: tuple[QuotedRow, ...] = ()
    digits: int = 2

    KEYS = ("title", "metrics", "rows", "columns", "where", "row_header", "row_labels", "column_label", "column_labels",
            "row_order", "column_order", "quoted", "digits")

    @classmethod
    def from_mapping(cls, values: Any, where: str) -> TableSpec:
        """From a spec file's mapping; `where` names it in errors (file and table)."""
        check_spec_keys(values, cls.KEYS, where, "a table spec")

        def names(key: str, default: tuple) -> tuple[str, ...]:
            value = values.get(key, default)
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, (list, tuple)) or not value and key in ("metrics", "rows", "columns") \
                    or not all(isinstance(v, (str, int, float)) for v in value):
                raise ConfigError(f"{where}: {key} must be a non-empty list of names, got {value!r}")
            return tuple(str(v) for v in value)

        def conditions() -> dict[str, Any]:
            return where_mapping(values.get("where"), f"{where}: where")

        def mapping(key: str) -> dict[str, str]:
            value = values.get(key) or {}
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {key} must be a mapping, got {value!r}")
            return {str(k): str(v) for k, v in value.items()}

        quoted = []
        for i, q in enumerate(values.get("quoted") or []):
            if not isinstance(q, Mapping) or "label" not in q or not isinstance(q.get("cells", {}), Mapping) or \
                    set(q) - {"label", "cells", "after", "before"} or q.get("after") is not None and \
                    q.get("before") is not None:
                raise ConfigError(f"{where}: quoted[{i}] must be a mapping with label, cells (column -> text) and "
                                  f"optionally after or before, got {q!r}")
            quoted.append(QuotedRow(str(q["label"]), {str(k): str(v) for k, v in (q.get("cells") or {}).items()},
                                    None if q.get("after") is None else str(q["after"]),
                                    None if q.get("before") is None else str(q["before"])))
        digits = values.get("digits", 2)
        if not isinstance(digits, int) or digits < 0:
            raise ConfigError(f"{where}: digits must be a non-negative integer, got {digits!r}")
        spec = cls(metrics=names("metrics", cls.metrics), rows=names("rows", cls.rows),
                   columns=names("columns", cls.columns), title=values.get("title"), where=conditions(),
                   row_header=values.get("row_header"), row_labels=mapping("row_labels"),
                   column_label=str(values.get("column_label", "{}")),
                   column_labels=mapping("column_labels"), row_order=names("row_order", ()),
                   column_order=names("column_order", ()), quoted=tuple(quoted), digits=digits)
        if "seed" in spec.rows + spec.columns:
            raise ConfigError(f"{where}: seed cannot be a row or column key: runs that differ only in their seed "
                              "are one cell (mean ± std over the seeds)")
        if METRIC_COLUMNS in spec.rows or METRIC_COLUMNS in spec.columns and len(spec.columns) > 1:
            raise ConfigError(f"{where}: `{METRIC_COLUMNS}` stands alone as `columns: [{METRIC_COLUMNS}]` (one column "
                              "per number of `metrics`), never a row key or beside another column key")
        return spec

    @property
    def metric_columns(self) -> bool:
        """One column per number (`columns: [metric]`), one number per cell."""
        return self.columns == (METRIC_COLUMNS,)


Spec = TableSpec | ComparisonSpec


def load_specs(path: str | Path) -> list[Spec]:
    """The tables of a spec file: a YAML list of table mappings (or one mapping); one with `compare` is a table
    of paired comparisons (spacewalk/results/report/comparisons.py)."""
    path = Path(path)
    if not path.is_file():
        raise DataError("spec file not found", file=path)
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise DataError(f"not valid YAML ({e})", file=path) from e
    values = [values] if isinstance(values, Mapping) else values
    if not isinstance(values, list) or not values:
        raise DataError("a spec file is a list of tables (mappings)", file=path)
    return [(ComparisonSpec if isinstance(v, Mapping) and "compare" in v else TableSpec).from_mapping(
        v, f"{path}: table {i}") for i, v in enumerate(values)]


# ---- the tables -----------------------------------------------------------------------------------------------------

def _key_text(values: Sequence[Any]) -> str:
    """A row's or column's value(s) as text: `lfb_cat` (model=lfb_cat, no experiment), `lfb_cat, paper_lfb_cat`."""
    return ", ".join(str(v) for v in values if v is not None)


def _duration_order(text: str) -> tuple:
    from spacewalk.core.durations import parse_duration

    try:
        return (0, parse_duration(text), text)
    except (ValueError, TypeError):
        return (1, 0.0, text)


def _ordered(found: list[str], order: Sequence[str], natural: bool) -> list[str]:
    first = [k for k in order if k in found]
    rest = [k for k in found if k not in first]
    return first + (sorted(rest, key=_duration_order) if natural else rest)


@dataclass
class Cell:
    """A table cell: the setting (runs differing only in seed) it shows and, per number, its summary."""

    group: SeedGroup
    numbers: dict[str, SeedSummary | None]
    mismatches: list[str] = field(default_factory=list)  # --check: what no longer re-scores as recorded

    def text(self, metrics: Sequence[str], digits: int) -> str:
        parts = [format_summary(self.numbers[m], digits) if self.numbers.get(m) else "-" for m in metrics]
        return " / ".join(parts) + (" (!)" if self.mismatches else "")


@dataclass
class Table:
    spec: TableSpec
    row_keys: list[str]
    column_keys: list[str]
    cells: dict[tuple[str, str], Cell]
    missing: list[Path] = field(default_factory=list)  # runs of the table's settings without metrics.json

    def row_label(self, key: str) -> str:
        return self.spec.row_labels.get(key, key)

    def cell_metrics(self, column: str) -> list[str]:
        """The numbers of a column's cells: the column's own (`columns: [metric]`), else every metric."""
        return [column] if self.spec.metric_columns else list(self.spec.metrics)

    def units(self, column: str) -> str:
        """How many units (questions, recordings) the column's numbers' intervals resampled, for `{n}` in its
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


AnyTable = Table | ComparisonTable


def _group_numbers(group: SeedGroup, metrics: Sequence[str]) -> dict[str, SeedSummary | None]:
    out: dict[str, SeedSummary | None] = {}
    for name in metrics:
        found = []
        for run in group.runs:
            metric = run.headline.get(name)
            if metric is None and run.metrics is not None:  # any number of metrics.json, by its path
                value = metric_value(run.metrics, name)
                metric = Metric(value) if value is not None else None
            if metric is not None:
                found.append(metric)
        out[name] = summarize(found) if found else None
    return out


def build_table(spec: TableSpec, runs: Sequence[RunDir]) -> Table:
    """Lay the runs out by the spec: filter by `where`, group by seed, one setting per cell (per row with
    `columns: [metric]`, its numbers then one per column)."""
    matching = [r for r in runs if r.matches(spec.where)]
    chosen = [r for r in matching if r.metrics is not None]
    cells: dict[tuple[str, str], Cell] = {}
    rows: list[str] = []
    columns: list[str] = []
    for group in group_by_seed(chosen):
        first = group.runs[0]
        row = _key_text([first.value(k) for k in spec.rows])
        column = "" if spec.metric_columns else _key_text([first.value(k) for k in spec.columns])
        if (row, column) in cells:
            other = cells[(row, column)].group
            which = f"table {spec.title!r}" if spec.title else "the table"
            raise ConfigError(
                f"{which}: two settings in the cell ({row}, {column}): "
                f"{' '.join(other.overrides)} ({other.runs[0].path}) and {' '.join(group.overrides)} "
                f"({first.path}); add a key to rows/columns or a `where` that tells them apart")
        cells[(row, column)] = Cell(group, _group_numbers(group, spec.metrics))
        rows += [row] if row not in rows else []
        columns += [column] if column not in columns else []
    if spec.metric_columns:  # the row's cell, one per number
        cells = {(row, m): Cell(cell.group, cell.numbers) for (row, _), cell in cells.items() for m in spec.metrics}
        columns = list(spec.metrics)
    return Table(spec, _ordered(rows, spec.row_order, natural=False),
                 columns if spec.metric_columns else _ordered(columns, spec.column_order, natural=True), cells,
                 [r.path for r in matching if r.metrics is None])


# ---- --check ------------------------------------------------------------------------------------------------------

def _rescored_value(value: Any) -> float | None:
    if isinstance(value, Mapping):  # an interval-like dict: its estimate
        value = value.get("estimate", value.get("value"))
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


DECODED = "decoded/"


def _rescored_run(run: RunDir, metrics: Sequence[str], rescore: Rescore) -> dict[str, Any]:
    """The run's numbers re-scored from its predictions; the plan decoding's (`decoded/...`) from the decoded
    predictions it wrote (`<run>/decoded/<name>/`, re-scored as a run of their own)."""
    rescored = dict(rescore(run.path))
    decoding = (run.metrics or {}).get("decoded")
    if any(name.startswith(DECODED) for name in metrics) and isinstance(decoding, Mapping):
        folder = run.path / "decoded" / str(decoding.get("decoding"))
        if folder.is_dir():
            rescored.update({DECODED + name: value for name, value in rescore(folder).items()})
    return rescored


def check_run(run: RunDir, metrics: Sequence[str], rescore: Rescore) -> list[str]:
    """What of `metrics` no longer comes out of the run's recorded predictions as metrics.json holds it."""
    rescored = _rescored_run(run, metrics, rescore)
    problems = []
    for name in metrics:
        recorded = run.headline.get(name)
        if recorded is None:
            continue
        if name not in rescored:
            problems.append(f"{run.path}: {name} was not re-scored")
            continue
        value = _rescored_value(rescored[name])
        if value is None or not math.isclose(value, recorded.value, rel_tol=0, abs_tol=CHECK_TOLERANCE):
            problems.append(f"{run.path}: {name} is {recorded.value!r} in metrics.json, re-scored {value!r}")
    return problems


def default_rescore() -> Rescore:
    try:
        from spacewalk.results.rescore import rescore_run
    except ImportError as e:
        raise ConfigError(f"--check needs spacewalk.results.rescore.rescore_run, not importable here: {e}") from e
    return rescore_run


def check_table(table: Table, rescore: Rescore) -> None:
    for (_, column), cell in table.cells.items():
        for run in cell.group.runs:
            cell.mismatches += check_run(run, table.cell_metrics(column), rescore)


def cached(rescore: Rescore) -> Rescore:
    """`rescore` once per run directory: a run in several cells or tables is re-scored once."""
    done: dict[Path, Mapping[str, Any]] = {}

    def once(path: Path) -> Mapping[str, Any]:
        if path not in done:
            done[path] = rescore(path)
        return done[path]

    return once


# ---- outputs ------------------------------------------------------------------------------------------------------

def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def table_markdown(table: AnyTable) -> str:
    if isinstance(table, ComparisonTable):
        return comparison_markdown(table)
    spec = table.spec
    header = spec.row_header or ", ".join(spec.rows)
    lines = [f"### {spec.title}\n"] if spec.title else []
    if not table.cells:
        where = ", ".join(f"{k}={'|'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in spec.where.items())
        lines.append(f"No run with a metrics.json matches this table{f' ({where})' if where else ''}.")
        lines += [f"Left out, no metrics.json (failed, or still running): {', '.join(map(str, table.missing))}"] \
            if table.missing else []
        return "\n".join(lines) + "\n"
    lines.append("| " + " | ".join([_escape(header), *(_escape(table.column_label(c)) for c in table.column_keys)])
                 + " |")
    lines.append("|" + "---|" * (1 + len(table.column_keys)))
    for label, cells, quoted in table.layout():
        lines.append("| " + " | ".join(_escape(x) for x in [label + (" (quoted)" if quoted else ""), *cells]) + " |")
    seeds = any(len(c.group.runs) > 1 for c in table.cells.values())
    lines.append("")
    lines.append(f"Each cell: {'its column' if spec.metric_columns else ' / '.join(spec.metrics)}, "
                 + ("mean ± standard deviation over the seeds, then the pooled 95 % interval in brackets (the mean of "
                    "the seeds' bootstrap bounds, spacewalk/results/seed_groups.py); a single run: its value and "
                    "interval."
                    if seeds else "the value and its 95 % bootstrap interval in brackets.")
                 + " Commands:")
    lines.append("")
    for row in table.row_keys:
        for column in table.column_keys[:1] if spec.metric_columns else table.column_keys:  # a row is one setting
            cell = table.cells.get((row, column))
            if cell is not None:
                where = table.row_label(row) if spec.metric_columns else \
                    f"{table.row_label(row)}, {table.column_label(column)}"
                lines.append(f"- {where} ({seeds_text(cell.group)}; {commits_text(cell.group)}): "
                             f"`{cell.group.command() or 'not recorded'}`")
    if table.missing:
        lines += ["", "Left out, no metrics.json (failed, or still running): "
                  + ", ".join(str(p) for p in table.missing)]
    mismatches = table.mismatches
    if mismatches:
        lines += ["", "**(!) no longer reproduces from its recorded predictions** (`--check`):", ""]
        lines += [f"- {m}" for m in mismatches]
    return "\n".join(lines) + "\n"


def report_markdown(tables: Sequence[Table], command: str) -> str:
    body = "\n".join(table_markdown(t) for t in tables)
    return f"<!-- made by `{command}`: regenerate it rather than edit -->\n\n{body}"


def _block_start(title: str) -> str:
    return f'<!-- spacewalk.report table="{title}" -->'


BLOCK_END = "<!-- /spacewalk.report -->"


def update_document(text: str, tables: Sequence[Table], command: str, name: str) -> str:
    """`text` (a markdown document, `name` in errors) with each table's block replaced: the lines between
    `<!-- spacewalk.report table="TITLE" -->` and `<!-- /spacewalk.report -->` become the table made now (the
    markers stay, so the next run replaces it again). Every table needs a title and its block in the document."""
    for table in tables:
        title = table.spec.title
        if not title:
            raise ConfigError(f"--update {name}: every table of the spec needs a title (its block's name)")
        start = _block_start(title)
        begin = text.find(start)
        end = text.find(BLOCK_END, begin + len(start)) if begin >= 0 else -1
        if begin < 0 or end < 0:
            raise DataError(f"no block for the table {title!r}: put the lines {start} and {BLOCK_END} where it goes",
                            file=name)
        made = table_markdown(table).replace(f"### {title}\n\n", "", 1)  # the document has its own heading
        body = f"{start}\n<!-- made by `{command}`: regenerate it rather than edit -->\n\n{made}"
        text = text[:begin] + body + text[end:]
    return text


def _block(doc: str, start: str) -> str:
    begin = doc.find(start)
    return doc[begin:doc.find(BLOCK_END, begin)]


def _table_lines(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.startswith("|")]


def stale_rows(text: str, tables: Sequence[Table], name: str) -> list[str]:
    """The table rows of `text` (a document made by `--update`) that the runs no longer give: one line per
    row, the document's and the runs' (`--verify`: the guard that no number in the document drifted from its
    runs, or was edited by hand). Only the table lines are compared: the made-by comment may differ."""
    made = update_document(text, tables, "", name)
    stale = []
    for table in tables:
        start = _block_start(table.spec.title)
        have, want = (_table_lines(_block(doc, start)) for doc in (text, made))
        for i in range(max(len(have), len(want))):
            old = have[i] if i < len(have) else "(no row)"
            new = want[i] if i < len(want) else "(no row)"
            if old != new:
                stale.append(f"{name}, table {table.spec.title!r}: the document has\n    {old}\n  its runs give\n"
                             f"    {new}")
    return stale


def _comparison_csv_rows(table: ComparisonTable) -> list[dict[str, Any]]:
    """A comparison's rows: the difference B - A as the value, its interval, the runs of both sides."""
    rows = []
    for c in table.compared:
        for name in table.spec.metrics:
            d = c.differences.get(name)
            rows.append({
                "table": table.spec.title or "", "row": c.comparison.label, "column": "B - A", "metric": name,
                "n_seeds": f"{len(c.a.runs)} / {len(c.b.runs)}", "value": d.difference if d else None,
                "low": d.low if d else None, "high": d.high if d else None, "unit": d.unit if d else None,
                "level": table.spec.level, "values": f"A {d.a!r} B {d.b!r} p {d.p_value!r}" if d else "",
                "seeds": f"A {' '.join(map(str, c.a.seeds))}; B {' '.join(map(str, c.b.seeds))}",
                "command": compare_command(c, table.spec),
                "commits": " ".join(sorted({r.commit or "" for r in [*c.a.runs, *c.b.runs]})).strip(),
                "runs": " ".join(str(r.path) for r in [*c.a.runs, *c.b.runs]), "check": "; ".join(c.mismatches)})
    return rows


def csv_rows(tables: Sequence[AnyTable]) -> list[dict[str, Any]]:
    rows = []
    for table in tables:
        if isinstance(table, ComparisonTable):
            rows += _comparison_csv_rows(table)
            continue
        for (row, column), cell in table.cells.items():
            for name in table.cell_metrics(column):
                s = cell.numbers.get(name)
                rows.append({
                    "table": table.spec.title or "", "row": table.row_label(row), "column": table.column_label(column),
                    "metric": name, "n_seeds": s.n if s else 0, "value": s.mean if s else None,
                    "std": s.std if s else None, "low": s.low if s else None, "high": s.high if s else None,
                    "unit": s.unit if s else None, "level": s.level if s else None,
                    "seeds": " ".join(str(x) for x in cell.group.seeds),
                    "values": " ".join(repr(v) for v in s.values) if s else "",
                    "command": cell.group.command(),
                    "commits": " ".join(sorted({r.commit or "" for r in cell.group.runs})).strip(),
                    "runs": " ".join(str(r.path) for r in cell.group.runs),
                    "check": "; ".join(cell.mismatches)})
    return rows


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    out = io.StringIO()
    fields = ["table", "row", "column", "metric", "n_seeds", "value", "std", "low", "high", "unit", "level", "seeds",
              "values", "command", "commits", "runs", "check"]
    writer = csv.DictWriter(out, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def log_to_wandb(tables: Sequence[Table], command: str, project: str = "spacewalk", mode: str = "offline",
                 directory: str | Path | None = None) -> Path:
    """The tables as wandb.Table in a W&B run of their own (job_type report), and the long rows of the CSV;
    returns the run's local folder."""
    import wandb

    run = wandb.init(project=project, mode=mode, dir=None if directory is None else str(directory),
                     job_type="report", config={"command": command})
    try:
        logged: dict[str, Any] = {}
        for i, table in enumerate(tables):
            if isinstance(table, ComparisonTable):
                logged[f"report/table_{i}"] = wandb.Table(columns=table.header(), data=table.rows())
                continue
            header = table.spec.row_header or ", ".join(table.spec.rows)
            columns = [header, *(table.column_label(c) for c in table.column_keys)]
            logged[f"report/table_{i}"] = wandb.Table(columns=columns, data=[[label, *cells] for label, cells, _
                                                                              in table.layout()])
        long = csv_rows(tables)
        if long:
            names = list(long[0])
            logged["report/cells"] = wandb.Table(columns=names, data=[[r[n] for n in names] for r in long])
        run.log(logged)
        return Path(run.dir).parent
    finally:
        run.finish()


def build_report(paths: Sequence[str | Path], specs: Sequence[Spec], rescore: Rescore | None = None,
                 score: Callable[[Path], Any] | None = None) -> list[AnyTable]:
    """The tables of `specs` from the run (or sweep) directories; with `rescore`, each cell checked (--check).
    Comparison tables re-score their runs with `score(run_dir) -> ScoredRun` (default
    spacewalk.results.rescore.scored_run), and with `rescore` given hold those numbers against metrics.json too."""
    runs = read_runs(paths)
    rescore = cached(rescore) if rescore is not None else None
    if score is None and any(isinstance(s, ComparisonSpec) for s in specs):
        from spacewalk.results.rescore import scored_run as score
    score = cached(score) if score is not None else None
    tables: list[AnyTable] = []
    for spec in specs:
        if isinstance(spec, ComparisonSpec):
            tables.append(build_comparison_table(spec, runs, score, check=rescore is not None))
            continue
        table = build_table(spec, runs)
        if rescore is not None:
            check_table(table, rescore)
        tables.append(table)
    return tables


def main(argv: Sequence[str] | None = None) -> int:
    from spacewalk.core.command_errors import user_errors_reported

    parser = argparse.ArgumentParser(prog="python -m spacewalk.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run directories and sweep directories (each job of one)")
    parser.add_argument("--spec", type=Path, help="a YAML file of table specs (instead of the flags below)")
    parser.add_argument("--metrics", default="Accuracy,mAP,IoU", help="comma-separated (default: %(default)s)")
    parser.add_argument("--rows", default="model", help="comma-separated config keys (default: %(default)s)")
    parser.add_argument("--columns", default="context", help="comma-separated config keys (default: %(default)s)")
    parser.add_argument("--title", help="the table's title")
    parser.add_argument("--markdown", type=Path, help="write the markdown here (default: print it)")
    parser.add_argument("--update", type=Path, help="replace each table's block in this markdown file "
                        "(<!-- spacewalk.report table=\"TITLE\" --> ... <!-- /spacewalk.report -->)")
    parser.add_argument("--verify", type=Path, help="write nothing: exit 1 naming each table row of this markdown "
                        "file (made by --update) that the runs no longer give")
    parser.add_argument("--csv", type=Path, help="write the CSV here")
    parser.add_argument("--wandb", action="store_true", help="log the tables to W&B (offline by default)")
    parser.add_argument("--wandb-mode", default="offline", choices=("offline", "online"))
    parser.add_argument("--wandb-project", default="spacewalk")
    parser.add_argument("--wandb-dir", type=Path, help="the W&B run's folder (default: ./wandb)")
    parser.add_argument("--check", action="store_true",
                        help="re-score every run from its recorded predictions and flag cells that no longer match")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "spacewalk.report", *(sys.argv[1:] if argv is None else argv)])
    with user_errors_reported():
        if args.spec is not None:
            specs = load_specs(args.spec)
        else:
            specs = [TableSpec.from_mapping({"title": args.title, "metrics": args.metrics.split(","),
                                             "rows": args.rows.split(","), "columns": args.columns.split(",")},
                                            "the command line")]
        tables = build_report(args.runs, specs, default_rescore() if args.check else None)
        markdown = report_markdown(tables, command)
        if args.verify is not None:
            if not args.verify.is_file():
                raise DataError("file not found", file=args.verify)
            stale = stale_rows(args.verify.read_text(encoding="utf-8"), tables, str(args.verify))
            for line in stale:
                print(line)
            print(f"{args.verify}: {len(stale)} table rows differ from their runs" if stale else
                  f"{args.verify}: every table row matches its runs", file=sys.stderr)
            return 1 if stale or any(t.mismatches for t in tables) else 0
        if args.update is not None:
            if not args.update.is_file():
                raise DataError("file not found", file=args.update)
            write_text(args.update, update_document(args.update.read_text(encoding="utf-8"), tables, command,
                                                    str(args.update)))
        if args.markdown is not None:
            write_text(args.markdown, markdown)
        elif args.update is None:
            print(markdown, end="")
        if args.csv is not None:
            write_text(args.csv, to_csv(csv_rows(tables)))
        if args.wandb:
            folder = log_to_wandb(tables, command, args.wandb_project, args.wandb_mode, args.wandb_dir)
            print(f"W&B ({args.wandb_mode}): {folder}", file=sys.stderr)
    return 1 if any(t.mismatches for t in tables) else 0


if __name__ == "__main__":
    sys.exit(main())
