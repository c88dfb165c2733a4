"""Which steps happen at a place, learned from the train recordings' transcripts and step annotations.

The release has no step-location annotation, so where a step happens is read off what is said: a transcript
sentence naming a place (features/lexical.py `place_variants` / `names_place`: "p six" is P6, "IEA" the
Integrated Electronics Assembly) is taken to say the astronaut is there, and the step annotated at the
sentence's middle (Irrelevant and not-annotated left out) is counted as a step done at the place, once per
mention. Spacewalks revisit the same places (P6, the airlock, the robotic arm, the IEA) for related work, so the
words of those train steps' captions are what a test caption done there is likely to share.

`PlaceKnowledge.affinity` scores captions (a question's options) for one place:
- the association: the rarity-weighted word cosine (lexical.Rarity, the words' rarity over the train cells) of
  the caption with the captions of the train steps under the place's mentions, minus its cosine with every
  train step's caption (the lift over a step in general: words every step has, "EV1", "install", weigh nothing
  then). A place no train transcript names gives every caption 0;
- plus 1 when the caption names the place itself ("EV1 return to airlock").
The train recordings check it, each held out in turn (questions/location_check.py, `association_auc`): against
the proxy "a sentence naming the place falls under the step", held-out steps rank at mean AUC 0.60, a caption
naming the place alone at 0.56; weak, but the only place knowledge the release allows (docs/results.md,
"Location questions").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording
from spacewalk.benchmarks.spacewalk18.features import lexical
from spacewalk.core.errors import DataError


def mention_times(recording: Recording, variants: Sequence[str]) -> list[float]:
    """The middle of each transcript sentence naming the place (spelt as one of `variants`), in transcript order."""
    return [0.5 * (s.start + s.end) for s in recording.transcript if lexical.names_place(s.text, variants)]


def steps_named_at(recording: Recording, variants: Sequence[str]) -> list[int]:
    """The step (index >= 1) annotated at each mention of the place (`mention_times`), one entry per mention;
    mentions over Irrelevant or not-annotated time count for nothing."""
    labels = (recording.label_at_time(t) for t in mention_times(recording, variants))
    return [label for label in labels if label > 0]


class PlaceKnowledge:
    """Place-to-step associations of a set of (train) recordings, each place's profile built when first asked
    for. `rarity`: the words' weights (lexical.Rarity over the same recordings' cells)."""

    def __init__(self, recordings: Sequence[Recording], rarity: lexical.Rarity):
        if not recordings:
            raise DataError("no recordings to learn where steps happen from (the train split is empty)")
        self.recordings = list(recordings)
        self.rarity = rarity
        self._every_step = lexical.counts([" ".join(s.caption for r in self.recordings for s in r.steps[1:])])
        self._profiles: dict[str, sp.csr_matrix | None] = {}

    def captions_at(self, place: str) -> list[str]:
        """The captions of the train steps under the place's mentions, one per mention."""
        variants = lexical.place_variants(place)
        if not variants:
            return []
        return [r.steps[i].caption for r in self.recordings for i in steps_named_at(r, variants)]

    def _profile(self, place: str) -> sp.csr_matrix | None:
        if place not in self._profiles:
            captions = self.captions_at(place)
            self._profiles[place] = lexical.counts([" ".join(captions)]) if captions else None
        return self._profiles[place]

    def association(self, place: str, captions: Sequence[str]) -> np.ndarray:
        """[len(captions)]: each caption's word cosine with the place's train steps minus that with every train
        step (0 for a place no train transcript names)."""
        profile = self._profile(place)
        if profile is None or not captions:
            return np.zeros(len(captions))
        words = lexical.counts(list(captions))
        return (self.rarity.similarity(words, profile) - self.rarity.similarity(words, self._every_step))[:, 0]

    def affinity(self, place: str, captions: Sequence[str]) -> np.ndarray:
        """[len(captions)]: the association plus 1 for a caption that names the place itself."""
        variants = lexical.place_variants(place)
        names = np.array([bool(variants) and lexical.names_place(c, variants) for c in captions], dtype=np.float64)
        return self.association(place, captions) + names
