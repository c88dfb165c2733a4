"""The harness's multiple-choice tasks in lmms-eval (docs/lmms_eval.md).

    python -m spacewalk.multiple_choice.lmms_eval tasks
    python -m spacewalk.multiple_choice.lmms_eval export DIR [--tasks NAME,...] [--data SCOPE.KEY=VALUE ...]
    python -m spacewalk.multiple_choice.lmms_eval import LMMS_EVAL_OUTPUT RUNS [--tasks NAME,...] [--n-resamples N]
    python -m spacewalk.multiple_choice.lmms_eval environment [--root DIR]

`export` writes one task folder per task under DIR for lmms-eval's `--include_path DIR` (every registered task
unless --tasks names some; the synthetic data unless --data gives a release, e.g. --data spacewalk18.root=R);
`import` turns the sample logs of an lmms-eval run (--log_samples --output_path LMMS_EVAL_OUTPUT) into run
directories under RUNS, which python -m spacewalk.compare and python -m spacewalk.report read; `environment` builds
(once) and prints the Python of a separate environment with lmms-eval (`<python> -m lmms_eval ...`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from spacewalk.core.command_errors import user_errors_reported
from spacewalk.core.errors import ConfigError


def _names(text: str | None) -> list[str] | None:
    return None if not text else [name.strip() for name in text.split(",") if name.strip()]


def export_command(args: argparse.Namespace) -> None:
    from spacewalk.multiple_choice.lmms_eval.specs import data_settings, for_export, registered
    from spacewalk.multiple_choice.lmms_eval.task_folder import export

    specs = registered()
    wanted = _names(args.tasks) or list(specs)
    unknown = sorted(set(wanted) - set(specs))
    if unknown:
        raise ConfigError(f"--tasks: no task {', '.join(unknown)}; the tasks: {', '.join(specs)}")
    chosen = [specs[name] for name in wanted]
    settings = data_settings(args.data, chosen)
    data_dir = Path(args.data_dir or os.environ.get("SPACEWALK_DATA_DIR", "data")).absolute()
    export([for_export(spec, settings[spec.name], data_dir) for spec in chosen], Path(args.dir))
    print(f"lmms-eval --include_path {Path(args.dir).absolute()} --tasks {','.join(wanted)} ...")


def import_command(args: argparse.Namespace) -> None:
    from spacewalk.multiple_choice.lmms_eval.sample_logs import import_output
    from spacewalk.results.bootstrap import BootstrapOptions

    bootstrap = BootstrapOptions(n_resamples=args.n_resamples, seed=args.seed) if args.n_resamples else None
    import_output(args.output, args.runs, _names(args.tasks), bootstrap)


def tasks_command(args: argparse.Namespace) -> None:
    from spacewalk.multiple_choice.lmms_eval.specs import registered

    for name, spec in registered().items():
        settings = {k: v for k, v in spec.data.items() if k != "_target_"}
        print(f"{name:34s} {spec.benchmark:12s} {spec.data['_target_']} {settings or ''}")


def environment_command(args: argparse.Namespace) -> None:
    from spacewalk.multiple_choice.lmms_eval.environment import ensure_environment

    print(ensure_environment(args.root, progress=lambda text: print(text, file=sys.stderr)))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.multiple_choice.lmms_eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    sub = commands.add_parser("tasks", help="list the tasks the benchmarks register")
    sub.set_defaults(run=tasks_command)
    sub = commands.add_parser("export", help="write the task folders for lmms-eval's --include_path")
    sub.add_argument("dir", help="where the task folders go (one per task)")
    sub.add_argument("--tasks", help="comma-separated task names (default: every registered task)")
    sub.add_argument("--data", action="append", default=[], metavar="SCOPE.KEY=VALUE",
                     help="a data setting, as the data config names it, of a benchmark's tasks that take it "
                          "(spacewalk18.root=R, egocross.answers=A, spacewalk18.samples_per_video=50) or of one task "
                          "(spacewalk18_qa.limit=20); repeatable")
    sub.add_argument("--data-dir", help="where the synthetic sets are (default: $SPACEWALK_DATA_DIR, else data/)")
    sub.set_defaults(run=export_command)
    sub = commands.add_parser("import", help="lmms-eval's sample logs -> run directories")
    sub.add_argument("output", help="lmms-eval's --output_path (or a model folder in it, or one results file)")
    sub.add_argument("runs", help="where the run directories go: RUNS/<task>/<model>/<date>/")
    sub.add_argument("--tasks", help="comma-separated task names (default: every exported task found)")
    sub.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples of the intervals (0: none)")
    sub.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (metrics.bootstrap.seed)")
    sub.set_defaults(run=import_command)
    sub = commands.add_parser("environment", help="build (once) and print the Python of an environment with lmms-eval")
    sub.add_argument("--root", help="where environments are kept (default: $SPACEWALK_LMMS_EVAL_ENVS, else "
                                    "<data dir>/lmms_eval_env)")
    sub.set_defaults(run=environment_command)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    with user_errors_reported():
        args.run(args)


if __name__ == "__main__":
    main()
