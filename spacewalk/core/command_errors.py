"""How every command ends on an error: the user's (a bad file, config value or argument: a
`spacewalk.core.errors.UserInputError`) as `error: <message>` on stderr and exit code 2, with no traceback, since it
would only point into this project's code; anything else is a bug and keeps its full traceback.

    with user_errors_reported():
        run(cfg)

train.py, evaluate.py and each `python -m spacewalk....` command wrap their work in it, the one place this is
decided. SPACEWALK_TRACEBACK=1 shows the traceback of a user error too (to debug the check itself).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from spacewalk.core.errors import ConfigError, UserInputError

EXIT_USER_ERROR = 2  # as argparse exits on a bad argument
TRACEBACK_VARIABLE = "SPACEWALK_TRACEBACK"

# Libraries that re-raise an error of ours inside their own: Hydra's instantiate (`raise ... from e`) and
# OmegaConf's resolvers, which raise their error inside the `except` block with the cause hidden (only in
# __context__) unless OC_CAUSE=1.
_WRAPPING_LIBRARIES = ("hydra", "omegaconf")


def user_error_in(error: BaseException) -> UserInputError | None:
    """The user's error that `error` is or wraps, else None (a bug). Follows explicit causes (`raise X from e`)
    and, for the wrapping libraries' exceptions only, the exception being handled when they raised: an error
    of ours raised while handling a user error is a bug, not that user error. A config key its target does not
    take is the user's too (`config_key_not_taken`)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, UserInputError):
            return error
        seen.add(id(error))
        wrapper = type(error).__module__.split(".")[0] in _WRAPPING_LIBRARIES
        if wrapper and (not_taken := config_key_not_taken(error)) is not None:
            return not_taken
        error = error.__cause__ or (error.__context__ if wrapper else None)
    return None


def config_key_not_taken(error: BaseException) -> UserInputError | None:
    """Hydra's instantiate calling a config's `_target_` with a key it does not take (`+model.tempreature=0`) or
    without one it needs: Python's TypeError at the call itself, which Hydra wraps naming the target and the key
    (`full_key: model`). It is the user's when the TypeError's innermost frame is Hydra's own (the arguments did
    not bind, so the target never ran); a TypeError raised inside the target is a bug."""
    cause = error.__cause__
    if not isinstance(cause, TypeError) or "target" not in str(error):
        return None
    frame = cause.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is None or not str(frame.tb_frame.f_globals.get("__name__", "")).startswith("hydra."):
        return None
    lines = str(error).splitlines()
    key = next((line.removeprefix("full_key: ") for line in lines if line.startswith("full_key: ")), None)
    target = lines[0].split("'")[1] if lines and lines[0].count("'") >= 2 else "its _target_"
    return ConfigError(f"{key or 'the config'}: {cause} ({target} does not take a key of this config, or needs one "
                       "it lacks: check the keys' spelling, or drop a key that belongs to another model or data)")


@contextmanager
def user_errors_reported() -> Iterator[None]:
    """Turn a user error raised inside into `error: <message>` and exit code 2; let every other exception through."""
    try:
        yield
    except Exception as error:  # noqa: BLE001 -- re-raised unless it is the user's
        cause = user_error_in(error)
        if cause is None or os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
            raise
        print(f"error: {cause}", file=sys.stderr)
        raise SystemExit(EXIT_USER_ERROR) from None
