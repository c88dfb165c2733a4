"""Settings given as a mapping (a config's dict: `datamodule.bank_config`, `data.synthetic`, a model's `families`)
made into their dataclass, with a key it does not have, or a value of the wrong type, refused naming the key as the
config spells it (`datamodule.bank_config.segment_secs`) and the keys it takes. Python's own TypeError
("__init__() got an unexpected keyword argument") names neither, and a string where a number belongs would fail
later, deep inside, or never. The dataclass's own `__post_init__` still checks the values' ranges.

    config = from_mapping(BankConfig, cfg.bank_config, "datamodule.bank_config")
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from spacewalk.core.errors import ConfigError

T = TypeVar("T")


def from_mapping(cls: type[T], values: Mapping[str, Any] | None, where: str) -> T:
    """`cls(**values)`, each key a field of the dataclass `cls` and each value of its annotated type; `where` is
    the mapping's name in the config."""
    values = dict(values or {})
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"{where}.{key}: not a setting{hint}; the settings are {', '.join(names)}")
        expected = hints.get(key, Any)
        if not fits(value, expected):
            raise ConfigError(f"{where}.{key}={value!r}: expected {type_name(expected)}")
    return cls(**values)


def fits(value: Any, expected: Any) -> bool:
    """Whether `value` is of the annotated type: the plain types (an int where a float belongs, as YAML writes
    2 for 2.0; never a bool where a number belongs), None, unions, and containers by their kind alone (a tuple
    field takes a list or a config's ListConfig, which is how a config holds one)."""
    if expected is Any or isinstance(expected, TypeVar):
        return True
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, arm) for arm in typing.get_args(expected))
    if origin is typing.Literal:
        return value in typing.get_args(expected)
    if expected is type(None):
        return value is None
    if origin is not None:
        expected = origin
    if isinstance(expected, type) and issubclass(expected, Sequence) and expected not in (str, bytes):
        return isinstance(value, Sequence) and not isinstance(value, (str, bytes))  # a config's ListConfig too
    if isinstance(expected, type) and issubclass(expected, Mapping):
        return isinstance(value, Mapping)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected) if isinstance(expected, type) else True


def type_name(expected: Any) -> str:
    if typing.get_origin(expected) in (typing.Union, types.UnionType):
        return " or ".join(type_name(arm) for arm in typing.get_args(expected))
    if expected is type(None):
        return "null"
    origin = typing.get_origin(expected) or expected
    names = {int: "a whole number", float: "a number", bool: "true or false", str: "a text", tuple: "a list",
             list: "a list", dict: "a mapping"}
    return names.get(origin, getattr(origin, "__name__", str(origin)))
