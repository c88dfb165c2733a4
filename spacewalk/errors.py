"""One error type for bad benchmark input, so every message names the file, the item and the field."""

from __future__ import annotations

from pathlib import Path


class DataError(ValueError):
    """Bad input: the message says which file, which item (video id, question id, ...) and which field."""

    def __init__(self, message: str, *, file: str | Path | None = None, item: str | None = None,
                 field: str | None = None):
        parts = []
        if file is not None:
            parts.append(str(file))
        if item is not None:
            parts.append(f"item {item!s}")
        if field is not None:
            parts.append(f"field {field!r}")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.file, self.item, self.field = file, item, field
