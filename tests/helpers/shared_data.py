"""The real annotations (SPACEWALK_SHARED_DATA: the folder holding spacewalk18/, hirest/, ...; `make test` sets
it to ../shared/data) and what a test does when they, or Java, are missing: skip, saying why, or under CI
(CI=true, which `.ci/run` sets) fail, naming what is missing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def shared_data_dir() -> Path | None:
    value = os.environ.get("SPACEWALK_SHARED_DATA")
    return Path(value) if value and Path(value).is_dir() else None


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> None:
    """Skip a test whose input is absent on a developer's machine, saying why; under CI (CI=true) fail it
    instead, because there a skip would hide a feature that is no longer tested."""
    if under_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def ci_requirements() -> list[str]:
    """What CI must have for no test to skip: the real annotations and Java (PTB tokenizer, METEOR)."""
    missing = []
    base = shared_data_dir()
    for name in ("spacewalk18", "hirest", "egoschema", "egocross"):
        if base is None or not (base / name).is_dir():
            value = os.environ.get("SPACEWALK_SHARED_DATA")
            missing.append(f"the real {name} annotations (SPACEWALK_SHARED_DATA={value!r}"
                           " must be a folder holding spacewalk18/, hirest/, egoschema/ and egocross/; `make test` "
                           "sets ../shared/data)")
    if shutil.which("java") is None:
        missing.append("java on PATH (HiREST captioning: the PTB tokenizer and METEOR)")
    return missing
