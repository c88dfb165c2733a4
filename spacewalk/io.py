"""Small file helpers shared by every reader and writer: strict JSON loading and atomic writes."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from spacewalk.errors import DataError


def load_json(path: str | Path) -> Any:
    """Read a JSON file; a missing or malformed file is a DataError naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError("file not found", file=path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise DataError(f"not valid JSON ({e})", file=path) from e
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text ({e})", file=path) from e


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only if the block succeeds.

    Readers therefore never see a half-written file, and an interrupted writer leaves no debris
    under the final name.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
