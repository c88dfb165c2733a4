"""The one language that selects runs by their config keys: a report table's `where`, a comparison side's keys
(docs/tables/*.yaml), `python -m spacewalk.compare --a-where` / `--b-where`, `python -m spacewalk.power --where`
and the sweep summary's `--where`.

A selection maps config keys to what they must be. A key is a config group's choice (`model`, `data`,
`decoding`, `experiment`) or a dotted path of the run's config (`context`, `seed`, `model.temperature`), as
`spacewalk.results.runs.RunDir.value` reads it (a re-test's keys are its trained run's). A value is text matched
as a shell pattern (`data.questions: "*.json"`; text without `*?[` is the value itself), null (the key is not
set), or a list (any of its values). On the command line it is `KEY=VALUE`, a comma-separated VALUE meaning any
of several and `null` not set. A key that no run has at all is refused, naming it: a misspelt key would
otherwise select nothing, or fill a table with "-".
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from spacewalk.core.errors import ConfigError
from spacewalk.results.runs import RunDir


def matches(value: Any, wanted: Any) -> bool:
    """Whether a config value is what a selection asks for: None, the key is not set; a tuple, any of its
    values; text, a shell-style pattern of the value as text (text without `*?[` is the value itself)."""
    if isinstance(wanted, tuple):
        return any(matches(value, w) for w in wanted)
    if wanted is None:
        return value is None
    return value is not None and fnmatch.fnmatchcase(str(value), str(wanted))


def where_mapping(value: Any, where: str) -> dict[str, Any]:
    """A selection from a spec (a report table's or a comparison side's `where`): config key -> None (not set),
    a value or pattern (as text), or a list of them (any of); `where` names it in errors."""
    value = value or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping of config keys to values, got {value!r}")

    def one(v: Any) -> str | None:
        if v is not None and not isinstance(v, (str, int, float)):
            raise ConfigError(f"{where}: a value must be text, a number, null or a list of them, got {v!r}")
        return None if v is None else str(v)

    return {str(k): tuple(one(x) for x in v) if isinstance(v, list) else one(v) for k, v in value.items()}


def where_arguments(conditions: Sequence[str], where: str) -> dict[str, Any]:
    """A selection from the command line (`--a-where KEY=VALUE`, repeatable): the same language as a spec's
    `where`, a comma-separated VALUE being any of its values and `null` the key not set."""
    out: dict[str, Any] = {}
    for condition in conditions:
        key, sep, value = condition.partition("=")
        if not sep or not key:
            raise ConfigError(f"{where} {condition}: expected KEY=VALUE (a config key: model, context, "
                              "model.temperature, ...)")
        if key in out:
            raise ConfigError(f"{where}: {key} is given twice; a comma-separated value gives any of several")
        values = tuple(None if v == "null" else v for v in value.split(","))
        out[key] = values[0] if len(values) == 1 else values
    return out


def select(runs: Sequence[RunDir], where: Mapping[str, Any]) -> list[RunDir]:
    """The runs whose config keys have the values `where` asks for."""
    return [r for r in runs if all(matches(r.value(k), w) for k, w in where.items())]


def check_keys(runs: Sequence[RunDir], keys: Iterable[str], where: str) -> None:
    """Refuse a config key that no run has (a misspelt `where` or row key would select nothing, or give rows of
    "-"), naming it and the keys the runs do have."""
    if not runs:
        return
    for key in keys:
        if key != "metric" and not any(r.has(key) for r in runs):
            known = sorted({k for r in runs for k in (*r.choices, *r.config)} - {"hydra"})
            raise ConfigError(f"{where}: no run has the config key {key!r}; their keys include "
                              f"{', '.join(known[:30])}")
