"""The train-only check of mc_plan's location rules (spacewalk/benchmarks/spacewalk18/questions/location_check.py):
the places a question file asks about, the proxy questions made from a recording written by hand, and the
association's ranking of held-out steps."""

from __future__ import annotations

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.features import lexical
from spacewalk.benchmarks.spacewalk18.questions.location_check import association_auc, places_in, proxy_questions
from spacewalk.benchmarks.spacewalk18.questions.plan_reading import LOCATION, LOCATION_RE
from spacewalk.core.errors import DataError

from helpers.spoken_recordings import spoken_recording

EVEN = lexical.Rarity(np.ones(lexical.FEATURES))
CAPTIONS = ["EV1 egress airlock", "EV1 translate out", "EV1 install mod kit", "EV1 torque bolts",
            "EV1 stow bag", "EV1 ingress airlock"]


def test_places_in_reads_the_location_questions_only():
    texts = ["Which of the following tasks happens while the astronaut is at the P6?",
             "Which of the following tasks happens after the astronaut leaves from the airlock ?",
             "Which of the following tasks happens before the astronaut arrives at the P6?",
             "Which of the following tasks happens before EV1 egress?"]
    assert places_in(texts) == ["the P6", "the airlock"]


def test_proxy_questions_follow_the_mentions_of_the_place(tmp_path):
    # six steps in a row, P6 named during step 3 and during the Irrelevant time after it (which puts no step there)
    spans = [(0, 100, -1), (100, 200, 1), (200, 300, 2), (300, 400, 3), (400, 420, 0), (420, 520, 4), (520, 620, 5),
             (620, 720, 6), (720, 800, -1)]
    said = [("now at p six", 330, 340), ("still at p six", 405, 415), ("bag stowed", 530, 540)]
    rec = spoken_recording(tmp_path, "r", CAPTIONS, spans, said)
    items = proxy_questions(rec, "the P6", np.random.default_rng(0))
    right = {"before": {CAPTIONS[0], CAPTIONS[1]}, "at": {CAPTIONS[2]},
             "after": {CAPTIONS[3], CAPTIONS[4], CAPTIONS[5]}}
    wrong = {"before": set(CAPTIONS) - right["before"], "at": set(CAPTIONS) - right["at"],
             "after": set(CAPTIONS) - right["after"]}
    assert {i.meta["relation"] for i in items} == {"before", "at", "after"}
    for item in items:
        relation = item.meta["relation"]
        assert item.meta["type"] == LOCATION and LOCATION_RE.match(item.question).group(2) == "the P6"
        assert item.options[item.answer] in right[relation]
        assert {o for i, o in enumerate(item.options) if i != item.answer} <= wrong[relation]
        assert (item.visual.start, item.visual.end) == (0.0, 800.0)  # the recording is shorter than a clip
    assert len({i.id for i in items}) == len(items)
    assert proxy_questions(rec, "the robotic arm", np.random.default_rng(0)) == []


def test_association_auc_ranks_held_out_steps_under_the_mentions(tmp_path):
    """Two recordings where the mod kit is installed while P6 is named: each, held out, is ranked by the other."""
    said = [("at the p six worksite", 350, 360)]
    spans = [(0, 100, -1), *((100.0 * k, 100.0 * (k + 1), k) for k in range(1, 7)), (700, 800, -1)]
    train = [spoken_recording(tmp_path, name, CAPTIONS, spans, said) for name in ("a", "b")]
    result = association_auc(train, ["the P6", "the robotic arm"], EVEN)
    assert result["pairs"] == 2  # the robotic arm is named nowhere: no pair
    assert result["lift"] == pytest.approx(1.0)  # the other recording's mod kit step ranks first
    assert result["names the place"] == pytest.approx(0.5)  # no caption names P6
    # each recording held out is ranked by the other's P6 work, not by its own: here they differ
    other = spoken_recording(tmp_path, "c", CAPTIONS, spans, [("at the p six worksite", 450, 460)])
    assert association_auc([train[0], other], ["the P6"], EVEN)["lift"] < 0.5
    with pytest.raises(DataError, match="names any of the places"):
        association_auc(train, ["the robotic arm"], EVEN)
