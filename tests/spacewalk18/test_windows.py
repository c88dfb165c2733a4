"""Context windows and their transcript text (docs/spacewalk18.md, Context windows)."""

from __future__ import annotations

import numpy as np
import pytest

from spacewalk.benchmarks.spacewalk18.data.dataset import FPS, Sentence, Spacewalk18
from spacewalk.benchmarks.spacewalk18.data.windows import TranscriptIndex, context_window, context_windows
from spacewalk.core.durations import parse_duration

ALL_LENGTHS = ["5s", "10s", "20s", "30s", "1min", "2min", "3min", "5min", "10min", "15min", "20min"]


def test_window_is_clipped_not_shifted():
    assert context_window(100.0, 60.0, 1000.0) == context_window(100.0, 60, 1000.0)
    w = context_window(10.0, 60.0, 1000.0)
    assert (w.start, w.end) == (0.0, 40.0)
    w = context_window(990.0, 60.0, 1000.0)
    assert (w.start, w.end) == (960.0, 1000.0)
    w = context_window(10.0, 3600.0, 100.0)
    assert (w.start, w.end) == (0.0, 100.0)
    with pytest.raises(ValueError):
        context_window(101.0, 10.0, 100.0)


def test_the_array_form_is_the_same_rule():
    # the DataModules cut every window of a recording at once with context_windows
    t = np.array([[0.0, 10.0], [500.0, 990.0], [1000.0, 30.0]])
    for w in (60.0, 3600.0, 5.0):
        start, end = context_windows(t, w, 1000.0)
        assert start.shape == end.shape == t.shape
        expected = [context_window(float(x), w, 1000.0) for x in t.ravel()]
        assert start.ravel().tolist() == [e.start for e in expected]
        assert end.ravel().tolist() == [e.end for e in expected]


def test_overlap_is_strict_and_in_file_order():
    idx = TranscriptIndex([Sentence("b", 20.0, 30.0), Sentence("a", 0.0, 10.0), Sentence("c", 10.0, 20.0),
                           Sentence("d", 40.0, 40.0)])
    assert idx.text_in(context_window(15.0, 10.0, 100.0)) == "c"  # [10, 20]: touching a and b is not overlap
    assert idx.text_in(context_window(15.0, 10.2, 100.0)) == "b a c"  # file order, single spaces
    assert idx.text_in(context_window(40.0, 2.0, 100.0)) == "d"  # a zero-length sentence inside the window
    assert idx.text_in(context_window(39.0, 2.0, 100.0)) == ""  # ... but not one on its edge


def test_real_windows_match_the_literal_rule(real_spacewalk18_root):
    """Every length from 5 s to 20 min, a spread of samples incl. the first and last of each test video."""
    ds = Spacewalk18(real_spacewalk18_root)
    samples = ds.step_samples("test")
    for rec in ds.split("test")[:3]:
        idx = TranscriptIndex(rec.transcript)
        chosen = samples[rec.video_id][::97] + [samples[rec.video_id][-1]]
        for name in ALL_LENGTHS:
            w = parse_duration(name)
            for s in chosen:
                t = s.frame_index / FPS
                start, end = max(t - w / 2, 0.0), min(t + w / 2, rec.duration)
                expected = " ".join(x.text for x in rec.transcript if x.start < end and x.end > start)
                window = context_window(s.timestamp, w, rec.duration)
                assert (window.start, window.end) == (start, end)
                assert idx.text_in(window) == expected
