"""The one set of renderers of the results tools: markdown (a table, then one command block), CSV (one row per
table, row, column and number) and W&B (the same tables as wandb.Table), for the report's tables of numbers and of
comparisons; the sweep summary (spacewalk/training/sweep_summary.py) writes its markdown and CSV with them too.

**Placeholders.** A document must not carry the folders of the machine its runs were made on: `--placeholder
RUNS=/data/runs` writes `RUNS` wherever that folder begins a path in the markdown (the commands under the tables,
the compare commands, the made-by line), so docs/results.md says `R` for the release and `RUNS` for the runs' root.

**Commands.** Under each table, one fenced block holds the commands that made its cells, each after a comment
naming its cells, their seeds and commits. Commands that differ in one override's value are written as one
multirun (`context=1min,3min,5min`), which Hydra runs as exactly those cells (paths, such as a re-test's
checkpoint, stay one per line).
"""

from __future__ import annotations

import csv
import io
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spacewalk.core.errors import ConfigError
from spacewalk.results.report.comparisons import ComparisonTable, compare_command
from spacewalk.results.report.tables import Table
from spacewalk.results.seed_groups import FLAT_RECIPE, RECIPE, commits_text, seeds_text, short_commit

AnyTable = Table | ComparisonTable
MADE_BY = "<!-- made by `"


# ---- placeholders --------------------------------------------------------------------------------------------------

class Placeholders:
    """Names that stand for folders in what the markdown shows (module docstring)."""

    def __init__(self, pairs: Sequence[tuple[str, str]] = ()):
        self.pairs = sorted(pairs, key=lambda p: -len(p[1]))  # the longest folder first

    @classmethod
    def parse(cls, values: Sequence[str]) -> Placeholders:
        pairs = []
        for value in values:
            name, sep, folder = value.partition("=")
            if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name) or not folder.startswith("/"):
                raise ConfigError(f"--placeholder {value}: expected NAME=/absolute/folder (e.g. RUNS=/data/runs)")
            folder = folder.rstrip("/") or "/"
            pairs.append((name, folder))
            resolved = str(Path(folder).resolve())
            if resolved != folder:
                pairs.append((name, resolved))
        return cls(pairs)

    def __call__(self, text: str) -> str:
        for name, folder in self.pairs:
            text = re.sub(re.escape(folder) + r"(?=$|[/\s'\"`;,)\]])", name, text)
        return text


# ---- markdown ------------------------------------------------------------------------------------------------------

def escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(escape(c) for c in header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]


@dataclass
class Entry:
    """One command of a table's block: the cells it made (row label, column label or None), their seeds and
    commits."""

    cells: list[tuple[str, str | None]]
    command: str
    seeds: str
    commits: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        """`row: column, column; row: column`: the cells, each row named once."""
        rows: dict[str, list[str]] = {}
        for row, column in self.cells:
            rows.setdefault(row, []).extend([column] if column else [])
        return "; ".join(f"{row}: {', '.join(columns)}" if columns else row for row, columns in rows.items())


def _overrides(command: str) -> tuple[list[str], bool, list[str]] | None:
    """A `python train.py|evaluate.py [-m] overrides` command as (prefix, multirun, overrides); None otherwise."""
    if ";" in command:
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) < 2 or words[0] != "python" or not words[1].endswith(".py"):
        return None
    multirun = len(words) > 2 and words[2] == "-m"
    return words[:2], multirun, words[3 if multirun else 2:]


def _merge(a: Entry, b: Entry) -> Entry | None:
    """One multirun for two commands that differ in one override's value (module docstring); None otherwise."""
    pa, pb = _overrides(a.command), _overrides(b.command)
    if pa is None or pb is None or pa[0] != pb[0] or len(pa[2]) != len(pb[2]) or a.seeds != b.seeds:
        return None
    differ = [i for i, (x, y) in enumerate(zip(pa[2], pb[2])) if x != y]
    if len(differ) != 1:
        return None
    (key, sep, x), (key_b, _, y) = pa[2][differ[0]].partition("="), pb[2][differ[0]].partition("=")
    if not sep or key != key_b or not x or not y or "," in y or any(c in x + y for c in "[]{}()'\"/"):
        return None  # a list, a quoted value or a path (a checkpoint per line reads better) stays as it is
    overrides = list(pa[2])
    overrides[differ[0]] = f"{key}={x},{y}"
    return Entry(a.cells + b.cells, shlex.join([*pa[0], "-m", *overrides]), a.seeds, a.commits | b.commits)


def merged(entries: Sequence[Entry]) -> list[Entry]:
    """`entries` with every pair that `_merge` joins joined, until none is left (the order of first appearance)."""
    out = list(entries)
    joined = True
    while joined:
        joined = False
        for i in range(len(out)):
            for j in range(i + 1, len(out)):
                both = _merge(out[i], out[j])
                if both is not None:
                    out[i] = both
                    del out[j]
                    joined = True
                    break
            if joined:
                break
    return out


def command_block(entries: Sequence[Entry], placeholders: Placeholders) -> list[str]:
    lines = ["```bash"]
    for entry in merged(entries):
        commits = sorted(c for c in entry.commits if c)
        commit = (f"commit{'s' if len(commits) > 1 else ''} {', '.join(short_commit(c) for c in commits)}"
                  if commits else "commit not recorded")
        commit += ", some runs' not recorded" if commits and "" in entry.commits else ""
        lines.append(placeholders(f"# {entry.label} ({entry.seeds}; {commit})"))
        lines += [placeholders(c.strip()) for c in entry.command.split("; ")]
    return lines + ["```"]


def _cell_text(table: Table) -> str:
    """What each cell holds, from the intervals its summaries carry."""
    methods = {s.method for c in table.cells.values() for s in c.numbers.values() if s is not None}
    numbers = "its column" if table.spec.metric_columns else " / ".join(table.metrics)
    parts = []
    if RECIPE in methods or FLAT_RECIPE in methods:
        parts.append("several seeds: their mean ± standard deviation, then the setting's 95 % interval "
                     "(other recordings and other seeds, or other questions and seeds: spacewalk/results/"
                     "seed_groups.py)")
    if "over recordings" in methods:
        parts.append("one run: its value and its 95 % interval over the recordings (Student's t)")
    if "over the units" in methods:
        parts.append("one run: its value and its 95 % bootstrap interval over the units")
    return f"Each cell: {numbers}; " + "; ".join(parts or ["the value"]) + "."


def table_markdown(table: AnyTable, placeholders: Placeholders | None = None) -> str:
    placeholders = placeholders or Placeholders()
    if isinstance(table, ComparisonTable):
        return comparison_markdown(table, placeholders)
    spec = table.spec
    header = spec.row_header or ", ".join(spec.rows)
    lines = [f"### {spec.title}\n"] if spec.title else []
    if not table.cells:
        where = ", ".join(f"{k}={'|'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in spec.where.items())
        lines.append(f"No run with a metrics.json matches this table{f' ({where})' if where else ''}.")
        lines += [placeholders(f"Left out, no metrics.json (failed, or still running): "
                               f"{', '.join(map(str, table.missing))}")] if table.missing else []
        return "\n".join(lines) + "\n"
    lines += markdown_table([header, *(table.column_label(c) for c in table.column_keys)],
                            [[label + (" (quoted)" if quoted else ""), *cells] for label, cells, quoted
                             in table.layout()])
    lines += ["", _cell_text(table) + " Commands:", ""]
    entries = []
    for row in table.row_keys:
        for column in table.column_keys[:1] if spec.metric_columns else table.column_keys:  # a row is one setting
            cell = table.cells.get((row, column))
            if cell is not None:
                place = (table.row_label(row), None if spec.metric_columns else table.column_label(column))
                entries.append(Entry([place], cell.group.command() or "not recorded", seeds_text(cell.group),
                                     {r.commit or "" for r in cell.group.runs}))
    lines += command_block(entries, placeholders)
    if table.missing:
        lines += ["", placeholders("Left out, no metrics.json (failed, or still running): "
                                   + ", ".join(str(p) for p in table.missing))]
    flags = list(dict.fromkeys(table.flags))
    if flags:
        lines += ["", "**(!) not one number**:", ""] + [placeholders(f"- {f}") for f in flags]
    mismatches = list(dict.fromkeys(table.mismatches))
    if mismatches:
        lines += ["", "**(!) no longer reproduces from its recorded predictions** (`--check`):", ""]
        lines += [placeholders(f"- {m}") for m in mismatches]
    return "\n".join(lines) + "\n"


def comparison_markdown(table: ComparisonTable, placeholders: Placeholders | None = None) -> str:
    placeholders = placeholders or Placeholders()
    spec = table.spec
    lines = [f"### {spec.title}\n"] if spec.title else []
    if table.compared:
        rows = table.rows()
        lines += markdown_table(table.header(), rows)
        from spacewalk.results.compare import NEW_RECORDINGS, NEW_UNITS, RECIPES, THESE_RECORDINGS
        from spacewalk.results.report.spec import SHORT

        bootstrap = f"paired bootstrap, {spec.resamples} resamples, seed {spec.seed}"
        meanings = {
            SHORT[RECIPES]: "recipes, other recordings (or units) and other seeds (Welch-Satterthwaite t over them "
                            "and the seeds)",
            SHORT[NEW_RECORDINGS]: "new recordings, these runs on other recordings (the exact sign-flip test over the "
                                   "recordings, Student's t interval)",
            SHORT[THESE_RECORDINGS]: f"these recordings, other samples of the same recordings ({bootstrap})",
            SHORT[NEW_UNITS]: f"new units, these runs on other units of the same kind (questions, queries: the "
                              f"sign-flip test and Student's t over the units' paired differences where the number "
                              f"is their mean, otherwise the {bootstrap})"}
        used = {row[-1] for row in rows}  # the claim column: only the claims the table answers
        legend = "; ".join(text for short, text in meanings.items() if short in used)
        lines += ["", f"Paired on the same items (spacewalk/results/compare.py, whose docstring says what each claim "
                  f"asks). claim: {legend}; detects: the smallest difference found with 80 % power at 0.05. "
                  f"Commands:", ""]
        lines.append("```bash")
        for c in table.compared:
            lines.append(f"# {c.comparison.label}: A {seeds_text(c.a)}, B {seeds_text(c.b)} "
                         f"({commits_text(c.a)}; {commits_text(c.b)})")
            lines.append(placeholders(compare_command(c, spec)))
        lines.append("```")
        notes = [f"- {c.comparison.label}: {n}" for c in table.compared for n in c.notes]
        claim_notes = [f"- {c.comparison.label}, {d.name}: {claim.note}" for c in table.compared
                       for d in c.differences.values() if d.name in table.metrics
                       for claim in [d.claim(_claims(spec))] if claim is not None and claim.note
                       and "cannot give" not in claim.note]
        if notes or claim_notes:
            lines += ["", *notes, *claim_notes]
    else:
        lines.append("No comparison of this table has runs for both sides.")
    if table.left_out:
        lines += ["", "Left out, no runs yet: " + "; ".join(table.left_out)]
    if table.unfinished:
        lines += ["", placeholders("Left out, no metrics.json (failed, or still running): "
                                   + ", ".join(str(p) for p in table.unfinished))]
    if table.mismatches:
        lines += ["", "**(!) no longer reproduces from its recorded predictions** (`--check`):", ""]
        lines += [placeholders(f"- {m}") for m in table.mismatches]
    return "\n".join(lines) + "\n"


def _claims(spec) -> tuple[str, ...]:
    from spacewalk.results.report.spec import CLAIMS

    return CLAIMS[spec.claim]


def report_markdown(tables: Sequence[AnyTable], command: str, placeholders: Placeholders | None = None) -> str:
    placeholders = placeholders or Placeholders()
    body = "\n".join(table_markdown(t, placeholders) for t in tables)
    return f"{made_by(command, placeholders)}\n\n{body}"


def made_by(command: str, placeholders: Placeholders) -> str:
    return f"{MADE_BY}{placeholders(command)}`: regenerate it rather than edit -->"


# ---- CSV -----------------------------------------------------------------------------------------------------------

FIELDS = ["table", "row", "column", "metric", "n_seeds", "value", "std", "low", "high", "unit", "level", "claim",
          "p", "seeds", "values", "command", "commits", "runs", "check"]


def _comparison_csv_rows(table: ComparisonTable) -> list[dict[str, Any]]:
    """A comparison's rows: the difference B - A as the value, its claim's interval and p, both sides' runs."""
    rows = []
    for c in table.compared:
        for name in table.metrics:
            d = c.differences.get(name)
            claim = d.claim(_claims(table.spec)) if d is not None else None
            rows.append({
                "table": table.spec.title or "", "row": c.comparison.label, "column": "B - A", "metric": name,
                "n_seeds": f"{len(c.a.runs)} / {len(c.b.runs)}", "value": d.difference if d else None,
                "low": claim.low if claim else None, "high": claim.high if claim else None,
                "unit": d.unit if d else None, "level": table.spec.level, "claim": claim.name if claim else None,
                "p": claim.p if claim else None, "values": f"A {d.a!r} B {d.b!r}" if d else "",
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
                    "claim": s.method if s else None, "p": None,
                    "seeds": " ".join(str(x) for x in cell.group.seeds),
                    "values": " ".join(repr(v) for v in s.values) if s else "",
                    "command": cell.group.command(),
                    "commits": " ".join(sorted({r.commit or "" for r in cell.group.runs})).strip(),
                    "runs": " ".join(str(r.path) for r in cell.group.runs),
                    "check": "; ".join([*cell.mismatches, *cell.flags])})
    return rows


def to_csv(rows: Sequence[dict[str, Any]], fields: Sequence[str] | None = None) -> str:
    """CSV text of `rows` (the columns `fields`, else every key in the rows' order)."""
    if fields is None:
        found: dict[str, None] = {}
        for row in rows:
            found.update(dict.fromkeys(row))
        fields = list(found) or ["table"]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(fields))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


# ---- W&B -----------------------------------------------------------------------------------------------------------

def log_to_wandb(tables: Sequence[AnyTable], command: str, project: str = "spacewalk", mode: str = "offline",
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
            logged["report/cells"] = wandb.Table(columns=FIELDS, data=[[r.get(n) for n in FIELDS] for r in long])
        run.log(logged)
        return Path(run.dir).parent
    finally:
        run.finish()
