"""The parsed `modalities` value (spacewalk/core/modalities.py)."""

from __future__ import annotations

import re

import pytest

from spacewalk.core.modalities import Modalities


def test_each_spelling_parses_to_its_blocks_and_back():
    for name, video, text in (("video", True, False), ("text", False, True), ("video+text", True, True)):
        m = Modalities.parse(name)
        assert (m.video, m.text) == (video, text) and str(m) == name
        assert Modalities.parse(m) is m  # a parsed value passes through
    assert Modalities.parse("video").only_video and Modalities.parse("text").only_text
    assert not Modalities.parse("video+text").only_video and not Modalities.parse("video+text").only_text


def test_a_bad_value_names_itself_and_the_allowed_ones():
    for bad in ("text+video", "audio", "", "Video"):
        with pytest.raises(ValueError, match=rf"modalities must be one of \('video', 'text', 'video\+text'\), "
                                             f"got {re.escape(repr(bad))}"):
            Modalities.parse(bad)
    with pytest.raises(ValueError, match="video, text or both"):
        Modalities(video=False, text=False)


def test_the_value_is_immutable():
    m = Modalities.parse("text")
    with pytest.raises(AttributeError):
        m.video = True  # type: ignore[misc]
