"""TW-FINCH: temporally weighted first-neighbour clustering of a video's frames into temporal segments
(Sarfraz et al., "Temporally-Weighted Hierarchical Clustering for Unsupervised Action Segmentation",
CVPR 2021), the clustering baseline of Spacewalk-18's intra-video retrieval (docs/spacewalk18.md, Intra-video
retrieval).

Our own implementation, because no package provides the temporally weighted variant: `finch-clust` on
PyPI is plain FINCH, whose first neighbours ignore time (its `initial_rank` fixes only the first level).
The algorithm, as the authors' reference code runs it:
- every row gets a time coordinate (i + 1) / N; the distance of two rows is their cosine distance (a
  zero row is at distance 1 from everything) times the distance of their times;
- FINCH: link each row to its first neighbour under that distance; the connected components are the
  clusters; replace each cluster by the mean of its rows (features and time); repeat until the number
  of clusters stops falling. This gives a hierarchy of partitions;
- for a required number of clusters K, start from the partition with the fewest clusters that still
  has at least K and merge the closest first-neighbour pair of cluster means, one merge at a time,
  until K remain (the first partition when it already has fewer than K).
First neighbours are computed exactly, in blocks of rows, so a 9-hour recording at one window a second
(about 32,000 rows) needs no N x N matrix in memory.

Ties (ours; `tie_tolerance`): on a transcript bank most windows repeat their neighbour's feature (silence, or
the same sentences), so about half the rows have several first neighbours at distance 0, and the reference's
argmin picks among them by the float rounding of 1 - cos (which can even come out below 0): a perturbation
of the features far below float16's rounding changed the partitions of the real test recordings to an
adjusted Rand index of 0.56-0.69 (docs/results.md, intra-video retrieval), which is why the same command
gave different numbers on banks built on different CPUs. With `tie_tolerance` > 0 the cosine distance is
clipped at 0 and rounded to that grid, and a row's first neighbour is, among those at its smallest distance,
the nearest in time (then the lowest index). 0 keeps the reference's plain argmin.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from spacewalk.core.errors import ConfigError

BLOCK_ROWS = 1024


def _unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def _cosine_distance(a: np.ndarray, b: np.ndarray, tie_tolerance: float) -> np.ndarray:
    """1 - cos of unit rows; with a tolerance, clipped at 0 and rounded to its grid (module docstring)."""
    d = 1.0 - a @ b.T
    if tie_tolerance > 0:
        d = np.round(np.maximum(d, 0.0) / tie_tolerance) * tie_tolerance
    return d


def first_neighbours(features: np.ndarray, times: np.ndarray,
                     tie_tolerance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """For each row, the index of the row nearest under cosine distance x |time difference| (itself
    excluded; on a tie the lowest index, or with `tie_tolerance` > 0 the nearest in time), and that distance."""
    n = len(features)
    unit = _unit(np.asarray(features, dtype=np.float32))
    times = np.asarray(times, dtype=np.float32)
    nearest, distance = np.zeros(n, np.int64), np.zeros(n, np.float32)
    for start in range(0, n, BLOCK_ROWS):
        stop = min(n, start + BLOCK_ROWS)
        apart = np.abs(times[start:stop, None] - times[None, :])
        d = _cosine_distance(unit[start:stop], unit, tie_tolerance) * apart
        rows = np.arange(stop - start)
        d[rows, np.arange(start, stop)] = np.inf
        if tie_tolerance > 0:
            tied = d <= d.min(axis=1, keepdims=True)
            nearest[start:stop] = np.argmin(np.where(tied, apart, np.inf), axis=1)
        else:
            nearest[start:stop] = np.argmin(d, axis=1)
        distance[start:stop] = d[rows, nearest[start:stop]]
    return nearest, distance


def _components(n: int, nearest: np.ndarray) -> np.ndarray:
    graph = coo_matrix((np.ones(n), (np.arange(n), nearest)), shape=(n, n))
    return connected_components(graph, directed=True, connection="weak")[1]


def _means(data: np.ndarray, labels: np.ndarray) -> np.ndarray:
    count = np.bincount(labels)
    sums = np.zeros((len(count), data.shape[1]), np.float64)
    np.add.at(sums, labels, data)
    return (sums / count[:, None]).astype(np.float32)


def tw_finch(features: np.ndarray, n_clusters: int, tie_tolerance: float = 0.0) -> np.ndarray:
    """Cluster labels [N] (0..n_clusters - 1, or fewer when FINCH's first partition has fewer) of the rows
    of `features` [N, D], which are in time order. `tie_tolerance`: the module docstring (0: the reference's)."""
    if tie_tolerance < 0:
        raise ConfigError(f"tie_tolerance must be 0 or positive, got {tie_tolerance}")
    if n_clusters < 1:
        raise ConfigError(f"n_clusters must be positive, got {n_clusters}")
    n = len(features)
    if n <= 1:
        return np.zeros(n, np.int64)
    data = np.concatenate([np.asarray(features, dtype=np.float32),
                           ((np.arange(n) + 1.0) / n).astype(np.float32)[:, None]], axis=1)
    labels = _components(n, first_neighbours(data[:, :-1], data[:, -1], tie_tolerance)[0])  # row -> cluster
    partitions = [labels]
    while True:
        means = _means(data, labels)
        if len(means) <= 1:
            break
        merged = _components(len(means), first_neighbours(means[:, :-1], means[:, -1], tie_tolerance)[0])
        if merged.max() + 1 >= len(means) or merged.max() == 0:
            break  # no merge, or everything in one cluster: FINCH stops before that partition
        labels = merged[labels]
        partitions.append(labels)
    counts = [p.max() + 1 for p in partitions]
    if counts[0] <= n_clusters:
        return partitions[0]
    labels = partitions[max(i for i, c in enumerate(counts) if c >= n_clusters)]
    return _merge_to(data, labels, n_clusters, tie_tolerance)


def _distances(means: np.ndarray, tie_tolerance: float = 0.0) -> np.ndarray:
    """The temporally weighted distance matrix of cluster means [C, D + 1] (diagonal inf)."""
    unit = _unit(means[:, :-1])
    d = _cosine_distance(unit, unit, tie_tolerance) * np.abs(means[:, -1][:, None] - means[:, -1][None, :])
    np.fill_diagonal(d, np.inf)
    return d


def _merge_to(data: np.ndarray, labels: np.ndarray, n_clusters: int, tie_tolerance: float = 0.0) -> np.ndarray:
    """Merge the closest pair of first neighbours, one pair at a time, until n_clusters remain. What the
    reference code recomputes from scratch after each merge (all first neighbours of all means) is updated
    here: only the merged cluster's mean, and so its row and column of the distance matrix, change."""
    counts = np.bincount(labels).astype(np.float64)
    means = _means(data, labels).astype(np.float64)
    d = _distances(means, tie_tolerance)
    while len(means) > n_clusters:
        nearest = np.argmin(d, axis=1)
        a = int(np.argmin(d[np.arange(len(d)), nearest]))
        lo, hi = sorted((a, int(nearest[a])))
        means[lo] = (means[lo] * counts[lo] + means[hi] * counts[hi]) / (counts[lo] + counts[hi])
        counts[lo] += counts[hi]
        means, counts = np.delete(means, hi, axis=0), np.delete(counts, hi)
        d = np.delete(np.delete(d, hi, axis=0), hi, axis=1)
        unit = _unit(means[:, :-1])
        row = _cosine_distance(unit, unit[lo][None], tie_tolerance)[:, 0] * np.abs(means[:, -1] - means[lo, -1])
        row[lo] = np.inf
        d[lo], d[:, lo] = row, row
        labels = np.where(labels == hi, lo, labels)
        labels = np.where(labels > hi, labels - 1, labels)
    return labels.astype(np.int64)
