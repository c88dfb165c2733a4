"""The grid of k-second cells anchored at t = 0 (cell j is [j k, (j + 1) k)), and the one rule for which of
its cells a window [start, end) covers: what the feature bank encodes, what video decoding samples and what
the DataModules slice all agree through it.

Times are seconds as floats, so a boundary computed as (0.1 + 0.2) * 40 is 12.000000000000002: `EPS` keeps such
noise from adding a cell past a boundary the window only touches, or dropping the cell a window starts in.
"""

from __future__ import annotations

import math

import numpy as np

EPS = 1e-9  # float-noise guard on grid positions (in cells)


def num_cells(duration: float, seconds: float) -> int:
    """Cells of the grid that start before the recording ends (the last one is usually partial)."""
    return max(1, math.ceil(duration / seconds - EPS))


def cell_of(t, seconds: float, num_cells: int | None = None):
    """The cell holding time `t` (a float or an array of them), at most the last of `num_cells`."""
    cell = np.floor(np.asarray(t, dtype=np.float64) / seconds + EPS).astype(np.int64)
    if num_cells is not None:
        cell = np.minimum(cell, num_cells - 1)
    return int(cell) if cell.ndim == 0 else cell


def cell_span(start, end, seconds: float, num_cells: int | None = None):
    """(first, last): the cells [first, last] (inclusive) overlapping each window [start, end), for floats or
    arrays of windows. An empty window (start == end) gives the cell holding it. With `num_cells`, both are
    at most the last cell (a window reaching the recording's end)."""
    start, end = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
    first = np.floor(start / seconds + EPS).astype(np.int64)
    last = np.maximum(first, np.ceil(end / seconds - EPS).astype(np.int64) - 1)
    if num_cells is not None:
        first, last = np.minimum(first, num_cells - 1), np.minimum(last, num_cells - 1)
    if first.ndim == 0:
        return int(first), int(last)
    return first, last
