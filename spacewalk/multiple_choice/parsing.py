"""Reading a choice out of a chat model's reply: a single letter (A, B, ...) or a single number (0..K).

The prompts ask for the letter or number "and nothing else"; models still add prose, brackets, a period,
"Answer:" or a code fence. The rules, in order (the first that yields something decides):

1. Code fences and surrounding markdown emphasis (``` ``` ```, `**`, backticks) are removed; whitespace is
   stripped. An empty reply is unparsable.
2. The whole reply is the choice, optionally bracketed and/or followed by a period or colon:
   "B", "(B)", "B.", "b", "[3]", "3.", "(3):". Lower-case letters are accepted here.
3. An explicit statement: "answer: B", "answer is (B)", "the correct option is 3", "choice: 3"
   (case-insensitive keyword; the first such statement counts).
4. The reply starts with the choice followed by a separator: "B) ...", "B. because ...", "(3) Install ...",
   "3: ...". A letter must be upper case here ("a" starting a sentence is an article).
5. Exactly one distinct bracketed choice in the reply: "I think (C) fits" (letters upper case).
6. Letters only: the reply equals one option's text (case-insensitive, trailing period ignored).
   Numbers only: exactly one distinct integer in the whole reply ("It is step 4").
Otherwise, or when what was read is outside the options (letter "E" of four, number 12 of 0..9), the reply
is unparsable: None. The runner counts it as wrong and counts it apart; it is never dropped.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

_FENCE = re.compile(r"```[a-zA-Z]*\n?|```|`|\*\*|__")
_KEYWORD = r"(?:answer|option|choice)(?:\s+is)?\s*[:=]?\s*"


def clean(reply: str) -> str:
    return _FENCE.sub(" ", reply or "").strip()


def parse_letter(reply: str, options: Sequence[str]) -> int | None:
    """The option index of a letter reply (A = 0), None when unparsable or out of range."""
    n = len(options)
    letters = string.ascii_uppercase[:n]
    text = clean(reply)
    if not text:
        return None

    def index(letter: str) -> int | None:
        letter = letter.upper()
        return letters.index(letter) if letter in letters else None

    m = re.fullmatch(r"[(\[]?\s*([A-Za-z])\s*[)\]]?\s*[.:]?", text)
    if m:
        return index(m.group(1))
    m = re.search(_KEYWORD + r"[(\[]?\s*([A-Za-z])\b(?![a-z'])", text, re.IGNORECASE)
    if m:
        return index(m.group(1))
    m = re.match(r"[(\[]?([A-Z])(?:[)\]]|[.:](?:\s|$))", text)
    if m:
        return index(m.group(1))
    bracketed = set(re.findall(r"[(\[]([A-Z])[)\]]", text))
    if len(bracketed) == 1:
        return index(bracketed.pop())
    normalised = text.rstrip(".").strip().lower()
    for i, option in enumerate(options):
        if normalised == option.rstrip(".").strip().lower():
            return i
    return None


def parse_number(reply: str, num_choices: int) -> int | None:
    """The choice of a number reply in 0..num_choices-1, None when unparsable or out of range."""
    text = clean(reply)
    if not text:
        return None

    def index(number: str) -> int | None:
        value = int(number)
        return value if 0 <= value < num_choices else None

    m = re.fullmatch(r"[(\[]?\s*(\d+)\s*[)\]]?\s*[.:]?", text)
    if m:
        return index(m.group(1))
    m = re.search(_KEYWORD + r"(?:step\s*)?[(\[]?\s*(\d+)\b", text, re.IGNORECASE)
    if m:
        return index(m.group(1))
    m = re.match(r"[(\[]?(\d+)(?:[)\]]|[.:](?:\s|$))", text)
    if m:
        return index(m.group(1))
    bracketed = set(re.findall(r"[(\[](\d+)[)\]]", text))
    if len(bracketed) == 1:
        return index(bracketed.pop())
    numbers = {int(x) for x in re.findall(r"(?<![\d.])\d+(?![\d.]*\d)", text)}
    if len(numbers) == 1:
        return index(str(numbers.pop()))
    return None


def letter(index: int) -> str:
    return string.ascii_uppercase[index]


def fill_unparsable(choice: int | None, answer: int | None, num_options: int) -> int:
    """The index written to an official file that has no "no answer" value: the choice, or for an unparsable
    reply one that is certainly wrong (the option after the answer), so the official scorer counts it wrong
    as metrics.json does; 0 when the answer is hidden (a leaderboard scores it, whatever it is)."""
    if choice is not None:
        return choice
    return 0 if answer is None else (answer + 1) % num_options
