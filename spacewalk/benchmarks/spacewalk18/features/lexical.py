"""Word matching between a recording's transcript and step texts, beside the sentence encoder's vectors.

The sentence encoder (MiniLM) hears "EV two will install the mid strut" and "EV1 & EV2 install lower strut" as
near neighbours; the words that tell the steps of one spacewalk apart are often its jargon ("mid" against
"lower", "FPMU", "P6", "slot 2"), which a bag of words weighted by rarity keeps. This module gives every 12 s
cell of the bank's grid the words of the transcript sentences overlapping it, and any text (a caption, a
narration, a question's option) the same kind of vector:

- the words are lower-cased, number words become digits ("p six" -> "p6", "EV two" -> "ev2": the ASR spells
  numbers out, the captions write them as digits), a short letter word followed by a number is joined to it, and
  common English words are dropped;
- each word is hashed into a fixed space (sklearn's HashingVectorizer: no vocabulary to fit, so a word first
  seen in a test recording still counts) and weighted by its inverse document frequency over the train
  recordings' cells (`Rarity.fit`; a word never heard there gets the largest weight);
- `pooled` sums a cell's word counts with its neighbours' within the rows given (a clip, a window), as
  `plan_reading.pooled_cells` does for the sentence vectors, and `similarity` is the cosine of the weighted
  vectors.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, HashingVectorizer

NUMBER_WORDS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12"}
# Kept although English stop words: they name things here ("EV one", "the P one truss", "four bravo").
KEPT = set(NUMBER_WORDS)
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS - KEPT)
FEATURES = 2 ** 18


def words(text: str) -> list[str]:
    """The matching words of a text: lower case, number words as digits, a letter word of at most two letters
    joined to the number after it ("ev 1" -> "ev1", "p 6" -> "p6"), stop words dropped."""
    raw = [NUMBER_WORDS.get(w, w) for w in re.findall(r"[a-z]+|\d+", text.casefold())]
    out: list[str] = []
    i = 0
    while i < len(raw):
        w = raw[i]
        if len(w) <= 2 and w.isalpha() and i + 1 < len(raw) and raw[i + 1].isdigit():
            out.append(w + raw[i + 1])
            i += 2
            continue
        if w not in STOP_WORDS:
            out.append(w)
        i += 1
    return out


_HASHER = HashingVectorizer(analyzer=words, n_features=FEATURES, alternate_sign=False, norm=None)


def counts(texts: Sequence[str]) -> sp.csr_matrix:
    """[len(texts), FEATURES] word counts."""
    return _HASHER.transform(list(texts)).tocsr()


def cell_counts(sentences: Sequence, num_cells: int, seconds: float) -> sp.csr_matrix:
    """[num_cells, FEATURES]: the words of every sentence (anything with text, start, end) overlapping each cell
    [j s, (j + 1) s) of the grid, counted in each cell it overlaps."""
    per_sentence = counts([s.text for s in sentences])
    rows, cols = [], []
    for i, s in enumerate(sentences):
        first = max(0, min(num_cells - 1, int(s.start // seconds)))
        last = max(first, min(num_cells - 1, int(np.ceil(s.end / seconds)) - 1))
        for j in range(first, last + 1):
            rows.append(j)
            cols.append(i)
    spread = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(num_cells, len(sentences)))
    out = (spread @ per_sentence).tocsr()
    out.sum_duplicates()
    return out


def pooled(cells: sp.csr_matrix, pool: int) -> sp.csr_matrix:
    """Each row summed with its `pool` neighbours on each side, within the rows given."""
    n = cells.shape[0]
    if pool <= 0 or n == 0:
        return cells
    offsets = list(range(-min(pool, n - 1), min(pool, n - 1) + 1))
    band = sp.diags([np.ones(n - abs(k)) for k in offsets], offsets, shape=(n, n), format="csr")
    return (band @ cells).tocsr()


@dataclass(frozen=True)
class Rarity:
    """Inverse document frequency of each hashed word over a set of documents (smoothed as sklearn's
    TfidfTransformer: log((1 + n) / (1 + df)) + 1, so a word no document holds weighs the most)."""

    idf: np.ndarray  # [FEATURES]

    @classmethod
    def fit(cls, documents: Sequence[sp.csr_matrix]) -> Rarity:
        n, df = 0, np.zeros(FEATURES)
        for m in documents:
            n += m.shape[0]
            df += np.bincount(m.indices, minlength=FEATURES)
        return cls(np.log((1.0 + n) / (1.0 + df)) + 1.0)

    def weigh(self, m: sp.csr_matrix) -> sp.csr_matrix:
        """Counts -> unit-length rarity-weighted vectors (an empty row stays zero)."""
        w = (m @ sp.diags(self.idf)).tocsr()
        norm = np.sqrt(np.asarray(w.multiply(w).sum(axis=1)).ravel())
        scale = np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0)
        return (sp.diags(scale) @ w).tocsr()

    def similarity(self, a: sp.csr_matrix, b: sp.csr_matrix) -> np.ndarray:
        """[len(a), len(b)] cosines of the weighted vectors of two count matrices."""
        return np.asarray((self.weigh(a) @ self.weigh(b).T).todense())


# --------------------------------------------------------------------------------------------------
# places named in the transcript ("the P6", "the four bravo worksite", "the Integrated Electronics Assembly")

# The radio alphabet spells a worksite's letter ("four bravo" is 4B).
RADIO_LETTERS = {"alpha": "a", "bravo": "b", "charlie": "c", "delta": "d", "echo": "e", "foxtrot": "f"}


def _radio(tokens: list[str]) -> list[str]:
    """A number followed by a radio-alphabet word or a lone letter as one name: "4 bravo" -> "4b"."""
    out: list[str] = []
    for w in tokens:
        letter = RADIO_LETTERS.get(w, w if len(w) == 1 and w.isalpha() else None)
        if letter is not None and out and out[-1].isdigit():
            out[-1] += letter
        else:
            out.append(w)
    return out


def place_variants(place: str) -> list[str]:
    """The spellings a sentence may use for the place, each its words run together (number words as digits,
    "four bravo" as "4b", common words dropped): the place's words ("the P1 FPMU" -> "p1fpmu") and, for a
    name of two or more words, its initials with its numbers ("Integrated Electronics Assembly" -> "iea",
    "external support platform 2" -> "esp2")."""
    tokens = _radio(words(place))
    if not tokens:
        return []
    variants = ["".join(tokens)]
    letters = [w for w in tokens if not w.isdigit()]
    if len(letters) >= 2:
        variants.append("".join(w[0] for w in letters) + "".join(w for w in tokens if w.isdigit()))
    return variants


def names_place(text: str, variants: Sequence[str]) -> bool:
    """Whether a sentence, read the same way, spells one of the variants with its words run together, from the
    start of one word to the end of another ("mod kit work site" and "mod kit worksite" are one place)."""
    tokens = _radio(words(text))
    starts, ends, position = set(), set(), 0
    for w in tokens:
        starts.add(position)
        position += len(w)
        ends.add(position)
    joined = "".join(tokens)
    for v in variants:
        for m in re.finditer(re.escape(v), joined):
            if m.start() in starts and m.end() in ends:
                return True
    return False
