"""Tables made from run directories: `python -m spacewalk.report`, so that no number in docs/results.md is typed.

    python -m spacewalk.report RUN_OR_SWEEP_DIR... [--spec docs/tables/results.yaml] [--markdown out.md]
        [--update docs/results.md] [--verify docs/results.md] [--csv out.csv] [--wandb] [--check]
        [--placeholder RUNS=/data/runs ...]

Every run directory given (or every run below a folder: a sweep's jobs, evaluate.py's runs; each run once) is
read (spacewalk/results/runs.py): its config, its headline numbers with their intervals, the command and commit
that produced it. Runs that differ only in their seed are one setting (spacewalk/results/seed_groups.py). A table
is laid out by a **spec**, data rather than code (spec.py): which numbers go in a cell and which config keys make
the rows and the columns. Without `--spec`, one table from the flags `--rows model --columns context` and
`--metrics` (default: the headline numbers the runs' benchmark declares for their task: Accuracy, mAP, IoU for
Spacewalk-18 step recognition). A spec file (YAML) is a list of tables, each a mapping:

    - title: One sample at a time (the benchmark's protocol)
      metrics: [Accuracy, mAP, IoU]      # optional: headline names (runs.py) or any number's path in metrics.json
      rows: [model]                      # config keys: a config group's choice or a dotted config value
      columns: [context]
      where: {decoding: none}            # optional: only the runs whose keys have these values (selection.py)
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
keyed by metric, and a column label's `{n}` is how many units its intervals are over (`"when task ({n})"`: the
questions of that type, from metrics.json). docs/tables/multiple_choice.yaml lays out docs/results.md's
multiple-choice tables so.

**Paired comparisons**: a table with `compare` (comparisons.py) lists, for each comparison of two groups of runs
named by config keys, `python -m spacewalk.compare`'s difference B - A and, for the claim it answers, its interval,
p and the smallest difference the split detects (docs/tables/comparisons.yaml); it goes into its block, `--verify`
and `--check` as any table.

A cell holds its numbers joined by " / ", each `value [low, high]` for one run (its interval) or
`mean ± std [low, high]` over several seeds (the setting's interval over recordings and seeds:
spacewalk/results/seed_groups.py). `quoted` rows are numbers quoted from elsewhere (a paper), printed as given and
marked so. What a table refuses, and what it flags instead of averaging away, is in tables.py.

Outputs: the markdown (stdout, or `--markdown FILE`, a new file or one the report made) with, under each table,
one block of the commands that made its cells (render.py), and the command that made the table; `--update DOC.md`
puts each table into its block of a document (document.py: the text around it stays as written, and nothing is
written unless every block is found whole); `--csv FILE`, one row per (table, row, column, number): value, std,
bounds, claim, seeds, command, commits, run directories; `--wandb`: the same tables as wandb.Table, in a W&B run of
its own (offline unless `--wandb-mode online`, as train.py's logger). `--placeholder NAME=FOLDER` (repeatable)
writes NAME for that folder in the markdown (docs/results.md: `R` for the release, `RUNS` for the runs' root).

`--verify DOC.md` writes nothing: it makes the tables again and names each table row of the document's blocks
that differs from what the runs give now (exit code 1): a number typed by hand, or a run that changed since the
document was made. With `--check` as well, the runs themselves are re-scored too (check.py): together the two are
the guard that every number of docs/results.md still follows from its runs' recorded predictions.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spacewalk.core.errors import DataError
from spacewalk.core.io import write_text
from spacewalk.results.report.check import Rescore, cached, check_scored, check_table, default_rescore
from spacewalk.results.report.comparisons import build_comparison_table
from spacewalk.results.report.document import stale_rows, update_document
from spacewalk.results.report.render import (
    MADE_BY,
    AnyTable,
    Placeholders,
    csv_rows,
    log_to_wandb,
    made_by,
    report_markdown,
    table_markdown,
    to_csv,
)
from spacewalk.results.report.spec import ComparisonSpec, Spec, TableSpec, load_specs
from spacewalk.results.report.tables import build_table
from spacewalk.results.runs import read_runs


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
            tables.append(build_comparison_table(spec, runs, score, check_scored if rescore is not None else None))
            continue
        table = build_table(spec, runs)
        if rescore is not None:
            check_table(table, rescore)
        tables.append(table)
    return tables


def _output(path: Path | None, flag: str) -> Path | None:
    """A file to write: a folder there, or a missing parent folder, is refused before any work."""
    if path is not None and path.is_dir():
        raise DataError(f"{flag}: a folder, where the file to write is expected", file=path)
    return path


def _document(path: Path, flag: str) -> str:
    if path.is_dir():
        raise DataError(f"{flag}: a folder, where a markdown document is expected", file=path)
    if not path.is_file():
        raise DataError(f"{flag}: file not found", file=path)
    return path.read_text(encoding="utf-8")


def _shown_command(argv: Sequence[str]) -> str:
    """The command as the markdown shows it: without the --placeholder definitions (they hold the folders)."""
    words, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == "--placeholder":
            skip = True
        elif not word.startswith("--placeholder="):
            words.append(word)
    return shlex.join(["python", "-m", "spacewalk.report", *words])


def main(argv: Sequence[str] | None = None) -> int:
    from spacewalk.core.command_errors import user_errors_reported

    parser = argparse.ArgumentParser(prog="python -m spacewalk.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run directories and sweep directories (each job of one)")
    parser.add_argument("--spec", type=Path, help="a YAML file of table specs (instead of the flags below)")
    parser.add_argument("--metrics", help="comma-separated (default: the headline numbers the runs' benchmark "
                        "declares for their task)")
    parser.add_argument("--rows", default="model", help="comma-separated config keys (default: %(default)s)")
    parser.add_argument("--columns", default="context", help="comma-separated config keys (default: %(default)s)")
    parser.add_argument("--title", help="the table's title")
    parser.add_argument("--markdown", type=Path, help="write the markdown here (default: print it)")
    parser.add_argument("--update", type=Path, help="replace each table's block in this markdown file "
                        "(<!-- spacewalk.report table=\"TITLE\" --> ... <!-- /spacewalk.report -->)")
    parser.add_argument("--verify", type=Path, help="write nothing: exit 1 naming each table row of this markdown "
                        "file (made by --update) that the runs no longer give")
    parser.add_argument("--csv", type=Path, help="write the CSV here")
    parser.add_argument("--placeholder", action="append", default=[], metavar="NAME=FOLDER",
                        help="write NAME for FOLDER in the markdown (repeatable; docs: R, RUNS)")
    parser.add_argument("--wandb", action="store_true", help="log the tables to W&B (offline by default)")
    parser.add_argument("--wandb-mode", default="offline", choices=("offline", "online"))
    parser.add_argument("--wandb-project", default="spacewalk")
    parser.add_argument("--wandb-dir", type=Path, help="the W&B run's folder (default: ./wandb)")
    parser.add_argument("--check", action="store_true",
                        help="re-score every run from its recorded predictions and flag cells that no longer match")
    args = parser.parse_args(argv)
    command = _shown_command(sys.argv[1:] if argv is None else argv)
    with user_errors_reported():
        placeholders = Placeholders.parse(args.placeholder)
        markdown_file, csv_file = _output(args.markdown, "--markdown"), _output(args.csv, "--csv")
        if args.wandb_dir is not None and args.wandb_dir.exists() and not args.wandb_dir.is_dir():
            raise DataError("--wandb-dir: a file, where a folder is expected", file=args.wandb_dir)
        if markdown_file is not None and markdown_file.is_file() and \
                not markdown_file.read_text(encoding="utf-8").startswith(MADE_BY):
            raise DataError("--markdown: this file exists and was not written by the report (a document?): write the "
                            "tables elsewhere, or into its blocks with --update", file=markdown_file)
        documents = {flag: _document(path, flag) for flag, path in (("--update", args.update),
                                                                     ("--verify", args.verify)) if path is not None}
        if args.spec is not None:
            specs = load_specs(args.spec)
        else:
            specs = [TableSpec.from_mapping({"title": args.title, "rows": args.rows.split(","),
                                             "columns": args.columns.split(","),
                                             **({"metrics": args.metrics.split(",")} if args.metrics else {})},
                                            "the command line")]
        tables = build_report(args.runs, specs, default_rescore() if args.check else None)
        made = [(t.spec.title, table_markdown(t, placeholders)) for t in tables]
        if args.verify is not None:
            stale = stale_rows(documents["--verify"], made, str(args.verify))
            for line in stale:
                print(line)
            print(f"{args.verify}: {len(stale)} table rows differ from their runs" if stale else
                  f"{args.verify}: every table row matches its runs", file=sys.stderr)
            return 1 if stale or any(t.mismatches for t in tables) else 0
        if args.update is not None:
            write_text(args.update, update_document(documents["--update"], made, made_by(command, placeholders),
                                                    str(args.update)))
        markdown = report_markdown(tables, command, placeholders)
        if markdown_file is not None:
            write_text(markdown_file, markdown)
        elif args.update is None:
            print(markdown, end="")
        if csv_file is not None:
            write_text(csv_file, to_csv(csv_rows(tables)))
        if args.wandb:
            folder = log_to_wandb(tables, command, args.wandb_project, args.wandb_mode, args.wandb_dir)
            print(f"W&B ({args.wandb_mode}): {folder}", file=sys.stderr)
    return 1 if any(t.mismatches for t in tables) else 0


if __name__ == "__main__":
    sys.exit(main())
