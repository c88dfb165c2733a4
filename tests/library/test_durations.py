"""Durations written for people (spacewalk/core/durations.py): what `context=5min` means."""

from __future__ import annotations

import pytest

from spacewalk.core.durations import parse_duration


@pytest.mark.parametrize("text,seconds", [("5s", 5), ("30s", 30), ("1min", 60), ("20min", 1200), ("1.5h", 5400),
                                          (12, 12)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


def test_parse_duration_rejects_garbage():
    with pytest.raises(ValueError, match="cannot read a duration"):
        parse_duration("5 fortnights")
