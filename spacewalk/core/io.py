"""Small file helpers shared by every reader and writer: strict JSON loading, atomic files and folders."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spacewalk.core.errors import DataError


def load_json(path: str | Path) -> Any:
    """Read a JSON file; a missing or malformed file is a DataError naming it, and so is an object with a
    repeated key (json.load would keep the last copy silently: a question id answered twice would be scored
    once, whichever copy came last)."""
    path = Path(path)
    if not path.is_file():
        raise DataError("is a folder, not a file" if path.is_dir() else "file not found", file=path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f, object_pairs_hook=lambda pairs: _unique_keys(pairs, path))
    except json.JSONDecodeError as e:
        raise DataError(f"not valid JSON ({e})", file=path) from e
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text ({e})", file=path) from e


def _unique_keys(pairs: list[tuple[str, Any]], path: Path) -> dict[str, Any]:
    """One JSON object as a dict, refusing a key that occurs twice in it (the keys repeat only in the text)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DataError("this key occurs more than once in the same object: refused rather than keeping "
                            "one copy", file=path, item=key, field=key)
        out[key] = value
    return out


def file_in_the_way(folder: str | Path) -> Path | None:
    """The first of `folder` and its parents (from the top) that exists and is not a folder: what stops `folder`
    from being made; None when nothing does."""
    folder = Path(folder)
    return next((p for p in [*reversed(folder.parents), folder] if p.exists() and not p.is_dir()), None)


def make_folder(folder: str | Path) -> Path:
    """`mkdir -p folder`, a file where a folder must be refused naming that file (os.makedirs raises
    NotADirectoryError or FileExistsError with a path that may be a temporary name of ours)."""
    folder = Path(folder)
    blocker = file_in_the_way(folder)
    if blocker is not None:
        needed = "" if blocker == folder else f" (to hold {folder})"
        raise DataError(f"is a file, where a folder is needed{needed}", file=blocker)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only if the block succeeds.

    Readers therefore never see a half-written file, and an interrupted writer leaves no debris
    under the final name. A folder at `path`, or a file where one of its folders must be, is refused before
    the block runs.
    """
    path = Path(path)
    if path.is_dir():
        raise DataError("is a folder, where a file is to be written: give a file's path", file=path)
    make_folder(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        # mkstemp makes the file private (0600); give it the permissions a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_dir(path: str | Path, replace: bool = True) -> Iterator[Path]:
    """Yield an empty folder beside `path`; rename it to `path` only if the block succeeds.

    A dataset or feature bank is built whole in the work folder, so an interrupted build never leaves
    half a folder under the final name (the work folder is deleted on failure). An existing `path` is
    replaced (moved aside, then deleted) when `replace`; otherwise it is a FileExistsError. A file at `path` is
    never replaced (a folder is what is asked for there: a path given for the wrong thing).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise DataError("is a file, where a folder is to be written: give a folder's path", file=path)
    make_folder(path.parent)
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    try:
        yield work
        _install_dir(work, path, replace)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def remove_leftover_work(path: str | Path) -> list[Path]:
    """Delete the work folders `atomic_dir(path)` left beside `path` when its process was killed (a signal ends it
    without the cleanup) and return them. Call it only where no other writer of `path` can be running (under the
    lock its writers share): a live writer's work folder looks the same."""
    path = Path(path)
    leftovers = sorted(path.parent.glob(f".{glob.escape(path.name)}.*.partial")) if path.parent.is_dir() else []
    for folder in leftovers:
        shutil.rmtree(folder, ignore_errors=True)
    return leftovers


def _install_dir(work: Path, path: Path, replace: bool) -> None:
    if not path.exists():
        try:
            os.rename(work, path)
            return
        except OSError:
            if not path.exists():  # not a race with another writer: a real error
                raise
    if not replace:
        raise FileExistsError(f"{path} appeared while it was being written; not replacing it")
    old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
    os.rename(path, old / path.name)
    os.rename(work, path)
    shutil.rmtree(old, ignore_errors=True)


def write_json(path: str | Path, obj: Any, indent: int | None = 2) -> Path:
    """Write JSON atomically (write to a temporary file, then rename)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=indent)
            f.write("\n")
    return Path(path)


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding=encoding, newline="") as f:
            f.write(text)
    return Path(path)


def ensure_generated(root: str | Path, record_file: str, wanted: dict, generate: Callable[[bool], Path],
                     what: str) -> Path:
    """A generated dataset at `root`: written on first use (no folder, or an empty one), used as it is when
    its record file equals `wanted`, rewritten when the options changed (a record of the same generator,
    `wanted["generator"]`); a folder that generator did not write is never touched. `generate(overwrite)`
    writes the set and returns its root. Two processes may race to write it (DDP ranks): the same options
    give the same data, so the one that finishes second uses the first one's."""
    root = Path(root).absolute()
    if not root.exists() or (root.is_dir() and not any(root.iterdir())):
        try:
            return generate(root.exists())
        except FileExistsError:
            if not root.exists():
                raise
    record = root / record_file
    found = load_json(record) if record.is_file() else None
    if found == wanted:
        return root
    if not isinstance(found, dict) or found.get("generator") != wanted["generator"]:
        raise DataError(f"exists and is not {what} (no {record_file} written by {wanted['generator']}); not "
                        "replacing it: pick another root", file=root)
    logging.getLogger(__name__).info("%s was generated with other options; regenerating it", root)
    return generate(True)
