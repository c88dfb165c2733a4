"""Backends that need no model: `ScriptedBackend` answers from the ground truth (or a given script of
replies), for tests of the runner, parsers and scorers, which must then score 100 %; `RandomBackend` picks
uniformly (seeded per item, so the same item gets the same choice whatever the chunking, the number of
processes or a resume), near chance."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from spacewalk.core.errors import ConfigError
from spacewalk.multiple_choice.items import MultipleChoiceItem
from spacewalk.multiple_choice.task import Prompt, Reply


class ScriptedBackend:
    """Replies with the ground truth as the prompt asks for it (`style`: "letter" = "B", "number" = "3",
    "auto" = a number when the prompt lists its choices as "(0) ...", else a letter), or with
    `script(item, prompt)` when given. An item without an answer is an error: nothing to script."""

    name = "scripted"

    def __init__(self, style: str = "auto", script: Callable[[MultipleChoiceItem, Prompt], str] | None = None):
        if style not in ("auto", "letter", "number"):
            raise ConfigError(f"style must be 'auto', 'letter' or 'number', got {style!r}")
        self.style, self.script = style, script

    def _reply(self, item: MultipleChoiceItem, prompt: Prompt) -> str:
        if self.script is not None:
            return self.script(item, prompt)
        if item.answer is None:
            raise ConfigError(f"item {item.id} has no answer to script")
        style = self.style
        if style == "auto":
            style = "number" if "\n(0) " in prompt.text else "letter"
        return chr(ord("A") + item.answer) if style == "letter" else str(item.answer)

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        return [Reply(text=self._reply(item, prompt)) for item, prompt in zip(items, prompts)]

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        raise NotImplementedError("the scripted backend answers items only")


def item_seed(seed: int, item_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{item_id}".encode()).digest()[:8], "little")


class RandomBackend:
    """A uniformly random choice per item (no text to parse), seeded by (seed, item id)."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        replies = []
        for item in items:
            rng = np.random.default_rng(item_seed(self.seed, item.id))
            scores = rng.random(len(item.options))
            replies.append(Reply(text="", choice=int(np.argmax(scores)), scores=tuple(float(s) for s in scores)))
        return replies

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        raise NotImplementedError("the random backend answers items only")
