"""Argument types of the commands' parsers (argparse `type=`): a path that must be a file or a folder, one to
read or one to write, and a count. argparse refuses a value they reject as it refuses a wrong choice,
`<command>: error: argument --out: <why>` and exit code 2, before any work starts: a folder given where a file
is written would otherwise fail only at the end, after the work, and a negative count would quietly make
nothing.

    parser.add_argument("--out", type=output_file, required=True)
    parser.add_argument("--per-video", type=positive_count, default=2000)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spacewalk.core.io import file_in_the_way


def _blocked(path: Path) -> None:
    blocker = file_in_the_way(path)
    if blocker is not None:
        raise argparse.ArgumentTypeError(f"{blocker} is a file, where a folder is needed (to hold {path})")


def output_file(text: str) -> Path:
    """A file to write: not a folder, and no file where one of its folders must be."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give the path of the file to write")
    _blocked(path.parent)
    return path


def output_folder(text: str) -> Path:
    """A folder to write into (made if missing): not a file, nor under one."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; give a folder")
    _blocked(path.parent)
    return path


def existing_file(text: str) -> Path:
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: file not found")
    return path


def existing_folder(text: str) -> Path:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; give a folder")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: folder not found")
    return path


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def count(text: str) -> int:
    """A whole number of at least 0."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; give a count of 0 or more")
    return value


def positive_count(text: str) -> int:
    """A whole number of at least 1."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a count of 1 or more")
    return value


def non_negative_number(text: str) -> float:
    """A finite number of at least 0 (a rate, where 0 says none)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: give a number of 0 or more")
    return value


def seed_value(text: str) -> int:
    """A random seed as numpy takes it: a whole number from 0 to 2**32 - 1."""
    value = _whole(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"{value}: a seed is a whole number from 0 to {2**32 - 1}")
    return value
