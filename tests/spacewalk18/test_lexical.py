"""Word matching between transcript cells and step texts (spacewalk/benchmarks/spacewalk18/features/lexical.py): how
words are read, which cells a sentence's words land in, pooling, rarity weights, and place names."""

from __future__ import annotations

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import Sentence
from spacewalk.benchmarks.spacewalk18.features import lexical


def test_words_spell_numbers_as_digits_join_short_names_and_drop_common_words():
    assert lexical.words("EV two will head out to p six") == ["ev2", "head", "p6"]
    assert lexical.words("EV1 & EV2 install the mid strut") == ["ev1", "ev2", "install", "mid", "strut"]
    assert lexical.words("slot 2") == ["slot", "2"]  # a longer word stays apart from its number


def test_cell_counts_put_a_sentence_in_every_cell_it_overlaps():
    said = [Sentence("strut", 1.0, 2.0), Sentence("battery", 11.0, 13.0), Sentence("strut strut", 30.0, 31.0)]
    m = lexical.cell_counts(said, num_cells=4, seconds=12.0)
    strut = lexical.counts(["strut"]).indices[0]
    battery = lexical.counts(["battery"]).indices[0]
    assert m.shape == (4, lexical.FEATURES)
    np.testing.assert_array_equal(m[:, strut].toarray().ravel(), [1, 0, 2, 0])
    np.testing.assert_array_equal(m[:, battery].toarray().ravel(), [1, 1, 0, 0])  # 11-13 s spans cells 0 and 1


def test_pooled_sums_neighbours_within_the_rows():
    m = lexical.counts(["a1 strut", "", "battery", "", ""])
    p = lexical.pooled(m, 1)
    battery = lexical.counts(["battery"]).indices[0]
    np.testing.assert_array_equal(p[:, battery].toarray().ravel(), [0, 1, 1, 1, 0])
    assert (lexical.pooled(m, 0) != m).nnz == 0
    assert lexical.pooled(m[:1], 3).shape == (1, lexical.FEATURES)


def test_rarity_weighs_rare_and_unseen_words_most_and_gives_cosines():
    train = lexical.counts(["ev1 install strut", "ev1 install battery", "ev1 install bag", "ev1 move"])
    rarity = lexical.Rarity.fit([train])
    ids = {w: lexical.counts([w]).indices[0] for w in ("ev1", "install", "strut", "irosa")}
    assert rarity.idf[ids["ev1"]] < rarity.idf[ids["install"]] < rarity.idf[ids["strut"]] < rarity.idf[ids["irosa"]]
    cells = lexical.counts(["ev one will install the mid strut", "", "the irosa is out"])
    captions = lexical.counts(["EV1 install mid strut", "EV1 install iROSA"])
    sim = rarity.similarity(cells, captions)
    assert sim.shape == (3, 2)
    assert sim[0, 0] > sim[0, 1] and sim[2, 1] > sim[2, 0]
    np.testing.assert_array_equal(sim[1], [0.0, 0.0])  # a silent cell matches nothing
    assert np.all(sim <= 1.0 + 1e-9)


def test_place_variants_and_names_place():
    assert lexical.place_variants("the P6") == ["p6"]
    assert lexical.place_variants("the four bravo worksite")[0] == "4bworksite"
    assert "iea" in lexical.place_variants("the Integrated Electronics Assembly")
    assert "esp2" in lexical.place_variants("the external support platform 2")
    assert lexical.names_place("he will head out to p six", lexical.place_variants("the P6"))
    assert not lexical.names_place("the P60 truss", lexical.place_variants("the P6"))
    assert lexical.names_place("at the four bravo work site", lexical.place_variants("the four bravo worksite"))
    assert lexical.names_place("Bob moves to the IEA", lexical.place_variants("the Integrated Electronics Assembly"))
    assert lexical.names_place("from ESP two", lexical.place_variants("the external support platform 2"))
    assert not lexical.names_place("a robotic hand on the arm", lexical.place_variants("the robotic arm"))
    assert lexical.place_variants("the") == []
