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

from spacewalk.core.errors import UserInputError

EXIT_USER_ERROR = 2  # as argparse exits on a bad argument
TRACEBACK_VARIABLE = "SPACEWALK_TRACEBACK"

# Libraries that re-raise an error of ours inside their own: Hydra's instantiate (`raise ... from e`) and
# OmegaConf's resolvers, which raise their error inside the `except` block with the cause hidden (only in
# __context__) unless OC_CAUSE=1.
_WRAPPING_LIBRARIES = ("hydra", "omegaconf")


def user_error_in(error: BaseException) -> UserInputError | None:
    """The user's error that `error` is or wraps, else None (a bug). Follows explicit causes (`raise X from e`)
    and, for the wrapping libraries' exceptions only, the exception being handled when they raised: an error
    of ours raised while handling a user error is a bug, not that user error."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, UserInputError):
            return error
        seen.add(id(error))
        wrapper = type(error).__module__.split(".")[0] in _WRAPPING_LIBRARIES
        error = error.__cause__ or (error.__context__ if wrapper else None)
    return None


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
