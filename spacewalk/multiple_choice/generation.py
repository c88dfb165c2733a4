"""How many new tokens a model may write: a limit of the benchmark's answer format, not of the model.

A reply cut before it ends is read as what is left: EgoCross's `{"prediction": ..., "reason": ...}` cut
before its closing brace parses as nothing and scores 0, so a limit sized for a single letter makes a real
model score near 0 there. So each task declares `answer_limits` (its answer format's limit, as the
benchmark's authors set it, or our documented choice where they say nothing), and a generating backend's own
limit (`max_new_tokens` of the transformers backends, `max_tokens` of the OpenAI-compatible one) is None by
default, meaning "the task's"; a number given in the model config overrides the task's. A judge or captioner
that a task or backend drives gets the limit of what it is asked (EgoCross's judge: its own 512, never the
answering model's, even when `data.judge=${model}` copies the answering model's config).

The runner applies the task's limits before the first item (`limited`) and writes what each model then uses
(`settings`) to run.json under "generation", so a reported number says which limit produced it, and a
resume with another limit is refused like any other change of settings.

A backend takes part by having `limited(limits, override=False)` (a shallow copy with the limit set: the
model's weights are shared, and the backend the caller holds is left as it was, which matters when one
backend object answers and judges) and `generation_settings()`; one without them (scripted, random,
contrastive: they write no text or no model text) is used as it is.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any

from spacewalk.core.errors import ConfigError

FROM_CONFIG = "model config"


def check_tokens(value: Any, setting: str, none_means: str) -> int | None:
    """A new-token limit: a whole number of at least 1, or None (`none_means` says what None is there)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{setting}={value!r}: must be a whole number of new tokens, at least 1, or null "
                          f"({none_means})")
    return value


@dataclass(frozen=True)
class AnswerLimits:
    """The new tokens an answer format allows: `local` for a model generating in this process (transformers'
    `max_new_tokens`: a number is needed, generation has no natural end otherwise), `api` for a
    chat-completions server (`max_tokens`; None: the field is not sent, the server's own limit applies, as
    the EgoCross authors' GPT scripts do). `source` says where the numbers come from (written to run.json)."""

    local: int
    api: int | None
    source: str

    def __post_init__(self):
        if isinstance(self.local, bool) or not isinstance(self.local, int) or self.local < 1:
            raise ValueError(f"AnswerLimits.local={self.local!r} ({self.source}): a model generating here needs "
                             "a number of new tokens, at least 1")
        check_tokens(self.api, f"AnswerLimits.api ({self.source})", "no max_tokens sent")

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class TokenLimited:
    """The limit part of a generating backend: its new-token limit in the attribute `LIMIT_FIELD` (the keyword its
    library takes), set from `limits.<LIMITS_SIDE>` by the runner unless the model config gave a number."""

    LIMIT_FIELD: str  # max_new_tokens (transformers) or max_tokens (chat completions)
    LIMITS_SIDE: str  # "local" or "api": which of AnswerLimits' two numbers applies

    def _set_limit(self, value: Any, none_means: str = "the task's answer limit") -> None:
        setattr(self, self.LIMIT_FIELD, check_tokens(value, self.LIMIT_FIELD, none_means))
        self.limit_from = FROM_CONFIG if value is not None else None

    def limited(self, limits: AnswerLimits, override: bool = False):
        """A shallow copy (the model shared) with the task's limit, unless the config gave its own number and
        `override` is false."""
        if self.limit_from == FROM_CONFIG and not override:
            return self
        out = copy.copy(self)
        setattr(out, self.LIMIT_FIELD, getattr(limits, self.LIMITS_SIDE))
        out.limit_from = limits.source
        return out

    def generation_settings(self) -> dict[str, Any]:
        """None for max_tokens: none sent (the server's own limit)."""
        return {self.LIMIT_FIELD: getattr(self, self.LIMIT_FIELD), "from": self.limit_from}


def limited(backend, limits: AnswerLimits, override: bool = False):
    """`backend` with `limits` where its own limit is None (`override`: always, e.g. a judge's limit); a backend
    that has no limits of its own is returned as it is."""
    apply = getattr(backend, "limited", None)
    return backend if apply is None else apply(limits, override)


def settings(backend) -> dict[str, Any] | None:
    """What `backend` generates with (its limit and where it came from), None for a backend with no limit."""
    describe = getattr(backend, "generation_settings", None)
    return None if describe is None else describe()


def generation_record(task, backend) -> tuple[Any, dict[str, Any]]:
    """The backend with the task's answer limits applied, and run.json's "generation" entry: the task's limits,
    what the answering backend uses, and what the task's own models use (`task.generation_extra()`, e.g.
    EgoCross OpenQA's judge). A generating backend on a task that declares no limits is refused: it would
    fall back to whatever its library defaults to."""
    limits = getattr(task, "answer_limits", None)
    if limits is None:
        if getattr(backend, "limited", None) is not None:
            raise ValueError(f"task {task.name} declares no answer_limits, and backend {backend.name} generates "
                             "text: give the task an AnswerLimits (spacewalk/multiple_choice/generation.py)")
        return backend, {"answer": settings(backend)}
    backend = limited(backend, limits)
    extra = getattr(task, "generation_extra", None)
    return backend, {"task_limits": limits.as_json(), "answer": settings(backend), **(extra() if extra else {})}
