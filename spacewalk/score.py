"""Official scoring from the command line, the authors' evaluation scripts without their path assumptions.

    python -m spacewalk.score [BENCHMARK] --predictions FILE [--output metrics.json] ...
    python -m spacewalk.score BENCHMARK --help      # that benchmark's arguments and prediction formats

Each benchmark registers its subcommand(s) in its package (spacewalk/benchmarks/<name>/benchmark.py, found by
spacewalk.benchmarks.registry); without one named, the default benchmark's runs (Spacewalk-18:
`python -m spacewalk.score --root DIR --split test --predictions FILE`). Prints the metrics as JSON in percent,
as the papers report them. A bad dataset or prediction file ends with its message on stderr and exit code 2;
a tool the scoring needs that is missing or fails (Java for captioning, an LLM judge) with exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from spacewalk.benchmarks.registry import ScoreCommand, ScoringFailed, UsageError, discover
from spacewalk.core.arguments import output_file
from spacewalk.core.errors import DataError
from spacewalk.core.io import write_json


def commands() -> dict[str, ScoreCommand]:
    return {c.name: c for b in discover().values() for c in b.scores}


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The command's parser and one subparser per registered subcommand."""
    parser = argparse.ArgumentParser(prog="python -m spacewalk.score", description=__doc__.split("\n\n")[0])
    subparsers = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True,
                                       help="which benchmark's official scoring (default: "
                                            f"{default_command() or 'none'})")
    parsers = {}
    for name, command in sorted(commands().items()):
        sub = subparsers.add_parser(name, help=command.help, description=command.description or command.help,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument("--predictions", type=Path, required=True, help="prediction file in the official format")
        command.arguments(sub)
        sub.add_argument("--output", type=output_file, help="also write the metrics to this JSON file")
        parsers[name] = sub
    return parser, parsers


def default_command() -> str | None:
    return next((c.name for c in commands().values() if c.default), None)


def with_subcommand(argv: Sequence[str]) -> list[str]:
    """argv with the default subcommand put first where it names none (it starts with an option other than
    --help), so `python -m spacewalk.score --root DIR ...` keeps meaning the default benchmark."""
    argv = list(argv)
    default = default_command()
    if default is not None and (not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help"))):
        return [default, *argv]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    parser, parsers = build_parser()
    args = parser.parse_args(with_subcommand(sys.argv[1:] if argv is None else argv))
    try:
        result = commands()[args.benchmark].score(args)
    except UsageError as e:
        parsers[args.benchmark].error(str(e))  # exits 2, like argparse's own checks
    except (DataError, ValueError) as e:
        # bad input, not a bug: the message names the file and the item, a traceback adds nothing
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ScoringFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=2)
    print(text)
    if args.output is not None:
        write_json(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
