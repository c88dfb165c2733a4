"""Durations written for people: "5min" -> 300.0 seconds. The config's `${seconds:...}` resolver
(`context=5min`) and the step-recognition questions' context read them; nothing here knows a benchmark."""

from __future__ import annotations

import re

from spacewalk.core.errors import ConfigError

_UNITS = {"s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600}


def parse_duration(text: str | float | int) -> float:
    """'5min' -> 300.0, '30s' -> 30.0, '1.5h' -> 5400.0; a bare number is seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", str(text).lower())
    if not m or m.group(2) not in _UNITS | {"": 1}:
        raise ConfigError(f"cannot read a duration from {text!r}; write e.g. 30s, 5min, 1h")
    return float(m.group(1)) * _UNITS.get(m.group(2), 1)
