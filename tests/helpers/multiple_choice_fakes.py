"""Backends for end-to-end tests of evaluate.py's multiple-choice runs (imported by _target_ in a subprocess)."""

from __future__ import annotations

import os
import signal

from spacewalk.multiple_choice.backends.baselines import ScriptedBackend


class KilledAfter(ScriptedBackend):
    """The scripted backend, whose process is killed (SIGKILL, no clean-up) once it has answered
    $SPACEWALK_TEST_KILL_AFTER items; without that variable, the scripted backend."""

    def __init__(self, style: str = "auto"):
        super().__init__(style)
        self.answered = 0

    def answer(self, items, prompts):
        limit = os.environ.get("SPACEWALK_TEST_KILL_AFTER")
        if limit is not None and self.answered + len(items) > int(limit):
            os.kill(os.getpid(), signal.SIGKILL)
        self.answered += len(items)
        return super().answer(items, prompts)
