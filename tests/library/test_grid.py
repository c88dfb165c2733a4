"""The k-second cell grid (spacewalk/media/grid.py): the one rule for which cells a window covers, shared by the
feature bank, the video decoder's segments and both bank DataModules."""

from __future__ import annotations

import numpy as np

from spacewalk.media.grid import cell_of, cell_span, num_cells
from spacewalk.media.video import segment_timestamps


def test_float_noise_neither_adds_nor_drops_a_cell():
    # (0.1 + 0.2) * 40 is 12.000000000000002 and * 80 is 24.000000000000004: the window [12, 24) is cell 1 alone
    assert (0.1 + 0.2) * 80 > 24.0 and cell_span((0.1 + 0.2) * 40, (0.1 + 0.2) * 80, 12.0) == (1, 1)
    # 0.7 / 0.1 * 12 / 7 lands just below 12: the window still starts in cell 1
    start = 12 * (0.7 / 0.1) / 7
    assert start < 12.0 and cell_span(start, 30.0, 12.0) == (1, 2) and cell_of(start, 12.0) == 1
    assert cell_span(11.9, 12.1, 12.0) == (0, 1)  # real overlap on both sides keeps both cells


def test_edges_and_clipping():
    assert num_cells(120.0, 12) == 10 and num_cells(120.5, 12) == 11 and num_cells(0.0, 12) == 1
    assert cell_span(12.0, 24.0, 12.0) == (1, 1)  # half-open: 24 belongs to the next cell
    assert cell_span(5.0, 5.0, 12.0) == (0, 0)  # an empty window: the cell holding it
    assert cell_span(100.0, 125.0, 12.0, num_cells=11) == (8, 10)
    assert cell_span(120.0, 120.0, 12.0, num_cells=10) == (9, 9)  # the recording's end: its last cell
    assert cell_of(125.0, 12.0, 11) == 10 and cell_of(120.0, 12.0) == 10


def test_the_vectorised_form_is_the_scalar_rule():
    rng = np.random.default_rng(0)
    windows = np.sort(rng.uniform(0, 125, (500, 2)), axis=1)
    windows[:50] = np.round(windows[:50] / 12) * 12  # on the grid's boundaries
    windows[50:100] = np.round(windows[50:100] / 12) * 12 * ((0.1 + 0.2) / 0.3)  # ... and off them by float noise
    first, last = cell_span(windows[:, 0], windows[:, 1], 12.0, 11)
    query = cell_of(windows[:, 0], 12.0, 11)
    assert first.dtype == last.dtype == query.dtype == np.int64
    for (start, end), f, last_cell, q in zip(windows, first, last, query):
        assert cell_span(float(start), float(end), 12.0, 11) == (f, last_cell)
        assert cell_of(float(start), 12.0, 11) == q == f


def test_the_video_decoder_samples_the_same_cells():
    rng = np.random.default_rng(1)
    for start, end in np.sort(rng.uniform(0, 125, (200, 2)), axis=1):
        segments = [s.index for s in segment_timestamps(start, end, 12.0, 1.0, duration=125.0)]
        first, last = cell_span(start, end, 12.0, num_cells(125.0, 12.0))
        assert segments == list(range(first, last + 1))
