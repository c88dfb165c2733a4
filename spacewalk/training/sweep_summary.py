"""The summary of a multirun: one row per job, then the jobs grouped by everything but the seed.

A Hydra callback (conf/hydra/default.yaml) that runs when a multirun ends, and a command for a sweep directory
that exists already (a sweep still running, or one made before this summary):

    python train.py -m seed=0,1,2 model=lfb_avg,lfb_cat         # ends with the summary
    python -m spacewalk.training.sweep_summary SWEEP_DIR [--out DIR] [--no-write] [--where KEY=VALUE ...]

Both write into the sweep directory (or `--out`):
- `summary.csv`, `summary.md`: one row per job, its overrides and every headline number of its task
  (spacewalk/results/runs.py: those metrics.json gives an interval, for every task: step recognition's Accuracy, mAP,
  IoU; QA's Accuracy and per type; EgoSchema's and EgoCross's accuracy and per domain; intra-video retrieval's
  Accuracy; HiREST's per task and split; plus best_val_loss and the decoded numbers), with each interval's bounds
  (`<name>_low`, `<name>_high`). A job that failed or wrote no metrics.json is listed with empty metrics, so a
  sweep never hides a missing run.
- `seeds.csv`, `seeds.md`: the jobs grouped by everything but the seed, one row per (group, number): the mean and
  standard deviation over the seeds and the setting's interval over recordings and seeds
  (spacewalk/results/seed_groups.py says what it is and why), with the seeds' own values.
`--where` keeps the jobs whose config keys match (spacewalk/results/selection.py: the language of the report's
`where` and compare's `--a-where`). The tables are written by the results layer's renderers
(spacewalk/results/report/render.py). Test numbers: select on val (best_val_loss), never on these.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from spacewalk.core.io import write_text
from spacewalk.results.report.render import markdown_table, to_csv
from spacewalk.results.runs import RunDir, read_runs
from spacewalk.results.seed_groups import SeedGroup, format_summary, group_by_seed

log = logging.getLogger(__name__)


def collect(sweep_dir: Path, where: Sequence[str] = ()) -> list[RunDir]:
    """The sweep's jobs (its run directories, spacewalk/results/runs.py), in job order; with `where`
    (KEY=VALUE), those whose config keys match."""
    from spacewalk.results.selection import check_keys, select, where_arguments

    runs = read_runs([sweep_dir])
    conditions = where_arguments(where, "--where")
    check_keys(runs, conditions, "--where")
    return select(runs, conditions)


def metric_names(runs: Sequence[RunDir]) -> list[str]:
    """Every headline number of the runs, in the order the first run to report each gives them."""
    names: dict[str, None] = {}
    for run in runs:
        names.update(dict.fromkeys(run.headline))
    return list(names)


def _cell(v: Any) -> str:
    return "" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def job_rows(runs: Sequence[RunDir]) -> list[dict[str, Any]]:
    """One dict per job: job, overrides, each number and its interval's bounds (None where absent)."""
    rows = []
    for run in runs:
        row: dict[str, Any] = {"job": run.name, "overrides": " ".join(run.overrides)}
        for name in metric_names(runs):
            metric = run.headline.get(name)
            row[name] = metric.value if metric else None
            row[f"{name}_low"] = metric.low if metric else None
            row[f"{name}_high"] = metric.high if metric else None
        rows.append(row)
    return rows


def group_rows(groups: Sequence[SeedGroup]) -> list[dict[str, Any]]:
    """One dict per (group, number): the setting, the seeds, mean, std, the setting's interval
    (spacewalk/results/seed_groups.py), each seed's value."""
    rows = []
    for group in groups:
        for name, s in group.summary().items():
            seeds = [r.seed for r in group.runs if name in r.headline]  # a failed seed's job has none
            rows.append({"overrides": " ".join(group.overrides), "seeds": " ".join(map(str, seeds)),
                         "metric": name, "n": s.n, "mean": s.mean, "std": s.std, "low": s.low, "high": s.high,
                         "interval": s.method, "unit": s.unit, "values": " ".join(f"{v:.4f}" for v in s.values),
                         "cell": format_summary(s)})
    return rows


def common_overrides(runs: Sequence[RunDir]) -> list[str]:
    """The overrides every job shares (the data, its root, the logger...): said once above the markdown tables, so
    that each row shows what tells it apart (the CSV files keep every row's whole list)."""
    if len(runs) < 2:
        return []
    shared = set(runs[0].overrides).intersection(*(r.overrides for r in runs[1:]))
    return [o for o in runs[0].overrides if o in shared]


def _own(overrides: Sequence[str], common: Sequence[str]) -> str:
    return " ".join(o for o in overrides if o not in common) or "(the common overrides only)"


def jobs_markdown(runs: Sequence[RunDir]) -> str:
    """One row per job, each number with its interval (`19.09 [15.12, 23.05]`)."""
    names, common = metric_names(runs), common_overrides(runs)
    rows = []
    for run in runs:
        cells = []
        for name in names:
            m = run.headline.get(name)
            cells.append("" if m is None else f"{m.value:.2f}" + (
                f" [{m.low:.2f}, {m.high:.2f}]" if m.low is not None and m.high is not None else ""))
        rows.append([run.name, _own(run.overrides, common), *cells])
    return "\n".join(markdown_table(["job", "overrides", *names], rows)) + "\n"


def seeds_markdown(groups: Sequence[SeedGroup]) -> str:
    """One row per (group, number): `mean ± std [the setting's interval]`, the seeds and their values."""
    common = common_overrides([r for g in groups for r in g.runs])
    rows = [[_own(r["overrides"].split(" ") if r["overrides"] else [], common), r["seeds"], r["metric"], r["cell"],
             " ".join(f"{float(v):.2f}" for v in r["values"].split())]
            for r in group_rows(groups)]
    return "\n".join(markdown_table(["setting (overrides but the seed)", "seeds", "metric",
                                     "mean ± std [95% interval]", "per seed"], rows)) + "\n"


def _common_line(runs: Sequence[RunDir]) -> str:
    common = common_overrides(runs)
    return f"Every job's overrides include: `{' '.join(common)}`.\n\n" if common else ""


INTRO = ("Test numbers (select on val, never on these). Grouped: mean ± standard deviation over the seeds, then the "
         "setting's 95 % interval (other recordings and other seeds; one run: its own interval: "
         "spacewalk/results/seed_groups.py).\n")


def summary_texts(runs: Sequence[RunDir]) -> dict[str, str]:
    """The summary files' contents, by name."""
    groups = group_by_seed(runs)
    seeds = f"{INTRO}\n{_common_line(runs)}{seeds_markdown(groups)}"
    markdown = f"## Jobs\n\n{_common_line(runs)}{jobs_markdown(runs)}\n## By seed\n\n{seeds}"
    return {"summary.csv": to_csv(job_rows(runs)), "summary.md": markdown,
            "seeds.csv": to_csv(group_rows(groups)), "seeds.md": seeds}


def summarize_sweep(sweep_dir: Path, out_dir: Path | None = None, where: Sequence[str] = ()) -> str:
    """Write the summary files into `out_dir` (None: write nothing); returns summary.md's text."""
    from spacewalk.core.errors import DataError

    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise DataError("a file, where the folder for the summary files is expected (--out)", file=out_dir)
    texts = summary_texts(collect(sweep_dir, where))
    if out_dir is not None:
        for name, text in texts.items():
            write_text(out_dir / name, text)
    return texts["summary.md"]


class SweepSummary(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from spacewalk.core.errors import UserInputError

        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        try:
            summary = summarize_sweep(sweep_dir, sweep_dir)
        except UserInputError as error:  # a job's unreadable file: the jobs' own outputs stand, the summary says why
            log.warning("no sweep summary: %s", error)
            return
        log.info("sweep summary (test split; select on val, never on these):\n%s", summary)


def main(argv: Sequence[str] | None = None) -> int:
    from spacewalk.core.command_errors import user_errors_reported

    parser = argparse.ArgumentParser(prog="python -m spacewalk.training.sweep_summary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path, help="a multirun's directory (hydra.sweep.dir)")
    parser.add_argument("--out", type=Path, help="write the summary files here (default: the sweep directory)")
    parser.add_argument("--no-write", action="store_true", help="print the summary only, write no file")
    parser.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                        help="summarise the jobs whose config key has this value (repeatable)")
    args = parser.parse_args(argv)
    with user_errors_reported():
        out = None if args.no_write else (args.out or args.sweep_dir)
        print(summarize_sweep(args.sweep_dir, out, args.where), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
