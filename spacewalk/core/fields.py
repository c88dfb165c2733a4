"""Field access for the annotation readers, with errors that name the file, the item and the field.

Shared by every benchmark's data layer so each reports bad input the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spacewalk.core.errors import DataError


def get(obj: Mapping[str, Any], key: str, types: type | tuple[type, ...], file: Path, item: str) -> Any:
    if not isinstance(obj, Mapping):
        raise DataError(f"expected an object, got {type(obj).__name__}", file=file, item=item)
    if key not in obj:
        raise DataError("missing key", file=file, item=item, field=key)
    value = obj[key]
    # bool is an int in Python; a JSON true/false is never a valid number here
    if isinstance(value, bool) or not isinstance(value, types):
        names = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
        raise DataError(f"expected {names}, got {type(value).__name__} {value!r}", file=file, item=item,
                        field=key)
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(f"not a finite number: {value!r}", file=file, item=item, field=key)
    return value


def number(obj, key, file, item) -> float:
    return float(get(obj, key, (int, float), file, item))


def integer(obj, key, file, item) -> int:
    value = get(obj, key, (int, float), file, item)
    if isinstance(value, float):
        if not value.is_integer():
            raise DataError(f"expected an integer, got {value!r}", file=file, item=item, field=key)
        value = int(value)
    return value


def as_list(value: Any, file: Path, item: str | None, what: str) -> list:
    if not isinstance(value, list):
        raise DataError(f"expected a list of {what}, got {type(value).__name__}", file=file, item=item)
    return value


def as_dict(value: Any, file: Path, what: str) -> dict:
    if not isinstance(value, dict):
        raise DataError(f"expected an object mapping {what}, got {type(value).__name__}", file=file)
    return value


def flag(obj, key, file, item) -> bool:
    """A JSON true/false (get() refuses booleans where numbers are expected, so it cannot do this)."""
    if not isinstance(obj, Mapping):
        raise DataError(f"expected an object, got {type(obj).__name__}", file=file, item=item)
    if key not in obj:
        raise DataError("missing key", file=file, item=item, field=key)
    value = obj[key]
    if not isinstance(value, bool):
        raise DataError(f"expected true or false, got {value!r}", file=file, item=item, field=key)
    return value
