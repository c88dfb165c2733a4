"""Which steps happen at a place, learned from train transcripts and step annotations
(spacewalk/benchmarks/spacewalk18/questions/place_knowledge.py), on small recordings written by hand."""

from __future__ import annotations

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording
from spacewalk.benchmarks.spacewalk18.features import lexical
from spacewalk.benchmarks.spacewalk18.questions.place_knowledge import PlaceKnowledge, steps_named_at
from spacewalk.core.errors import DataError

from helpers.spoken_recordings import spoken_recording

EVEN = lexical.Rarity(np.ones(lexical.FEATURES))  # every word weighs the same


@pytest.fixture
def train(tmp_path) -> list[Recording]:
    """Two spacewalks: the mod kit is installed where P6 is named, the hatch is opened where the airlock is."""
    first = spoken_recording(tmp_path, "a",
                             ["EV1 egress and open hatch", "EV1 install mod kit bracket", "EV2 stow tools"],
                             [(0, 100, -1), (100, 200, 1), (200, 300, 2), (300, 400, 3), (400, 500, 0),
                              (500, 600, -1)],
                             [("EV one is out of the airlock", 120, 130), ("now at the p six truss", 220, 230),
                              ("working at p six", 260, 266), ("tools are stowed", 320, 330),
                              ("looking back at p six", 420, 430)])  # the last over Irrelevant time: not counted
    second = spoken_recording(tmp_path, "b", ["EV2 open hatch", "EV2 install mod kit strut"],
                              [(0, 100, -1), (100, 200, 1), (200, 300, 2), (300, 400, -1)],
                              [("the airlock hatch is open", 110, 120), ("at the P6 now", 210, 220)])
    return [first, second]


def test_steps_named_at_take_the_step_under_each_mention_and_skip_irrelevant_time(train):
    assert steps_named_at(train[0], lexical.place_variants("the P6")) == [2, 2]
    assert steps_named_at(train[0], lexical.place_variants("the airlock")) == [1]
    assert steps_named_at(train[1], lexical.place_variants("the P6")) == [2]
    assert steps_named_at(train[0], lexical.place_variants("the robotic arm")) == []


def test_captions_at_a_place_are_counted_once_per_mention(train):
    knowledge = PlaceKnowledge(train, EVEN)
    assert knowledge.captions_at("the P6") == ["EV1 install mod kit bracket"] * 2 + ["EV2 install mod kit strut"]
    assert knowledge.captions_at("the") == []  # no words to look for


def test_association_ranks_the_work_done_at_the_place_first(train):
    knowledge = PlaceKnowledge(train, EVEN)
    options = ["EV1 install the mod kit cable", "EV2 open the hatch", "EV1 stow tools"]
    at_p6 = knowledge.association("the P6", options)
    assert np.argmax(at_p6) == 0 and at_p6[0] > 0 > at_p6[1]
    at_airlock = knowledge.association("the airlock", options)
    assert np.argmax(at_airlock) == 1
    # the lift over a step in general: words every step has ("ev1", "install") do not make an option associated
    np.testing.assert_allclose(knowledge.association("the P6", ["EV1"]), [0.0], atol=0.35)
    assert knowledge.association("the P6", ["EV1"])[0] < at_p6[0]


def test_affinity_adds_one_for_a_caption_naming_the_place_and_nothing_is_known_of_an_unnamed_place(train):
    knowledge = PlaceKnowledge(train, EVEN)
    options = ["EV1 return to airlock", "EV1 install the mod kit cable"]
    np.testing.assert_allclose(knowledge.affinity("the airlock", options),
                               knowledge.association("the airlock", options) + [1.0, 0.0])
    np.testing.assert_allclose(knowledge.association("the robotic arm", options), [0.0, 0.0])
    np.testing.assert_allclose(knowledge.affinity("the ESP 2", ["EV1 translate to ESP2", "EV1 stow"]), [1.0, 0.0])


def test_no_train_recording_is_an_error():
    with pytest.raises(DataError, match="train split is empty"):
        PlaceKnowledge([], EVEN)
