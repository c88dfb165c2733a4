"""The errors of the user's input, told apart from bugs: a command prints their message alone (no traceback,
spacewalk.core.command_errors), and each names what to fix. `DataError` is a bad file (it names the file, the item and
the field), `ConfigError` a bad config value or command-line argument (its message names the key and the value)."""

from __future__ import annotations

from pathlib import Path


class UserInputError(Exception):
    """Something the user gave (a file, a config value, an argument) is wrong: the message says what and where;
    a traceback would only point into this project's code."""


class DataError(UserInputError, ValueError):
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


class ConfigError(UserInputError, ValueError):
    """A config value or command-line argument that cannot be used (context=7x, a model that does not fit the
    task, a checkpoint that is not there): the message names the key as the user wrote it (`context=7x: ...`).
    A ValueError, as the checks raised before it existed."""
