"""Forward-backward and Viterbi for a hidden Markov model whose transition matrix changes along the sequence.

Observations are not evenly spaced in time (Spacewalk-18's samples are balanced over classes, so they are
dense in short steps and sparse in long ones), so the transition between observation t - 1 and t is one of
a few matrices, `matrices[index[t - 1]]`, e.g. a continuous-time chain's expm(Q dt) for each distinct gap.
hmmlearn and pomegranate take one transition matrix for the whole sequence, hence our own code, tested
against enumerating every path (tests/library/test_hmm.py).

Everything takes several sequences of the same length at once (a leading batch axis N), so the windows of
every sample of a recording decode in one call. Emissions are log-likelihoods [N, T, S] (any additive
constant per step is fine); a step with no observation is a row of zeros.
"""

from __future__ import annotations

import numpy as np


def _checked(log_emissions: np.ndarray, matrices: np.ndarray, index: np.ndarray, initial: np.ndarray):
    e = np.asarray(log_emissions, dtype=np.float64)
    if e.ndim == 2:
        e = e[None]
    n, t, s = e.shape
    matrices = np.asarray(matrices, dtype=np.float64)
    index = np.asarray(index, dtype=np.int64)
    if index.ndim == 1 and index.shape == (t - 1,):
        index = np.broadcast_to(index, (n, t - 1))
    initial = np.asarray(initial, dtype=np.float64)
    if matrices.ndim != 3 or matrices.shape[1:] != (s, s):
        raise ValueError(f"matrices must be [M, {s}, {s}], got {list(matrices.shape)}")
    if index.shape != (n, t - 1):
        raise ValueError(f"index must be [{t - 1}] or [{n}, {t - 1}], got {list(index.shape)}")
    if initial.shape != (s,):
        raise ValueError(f"initial must be [{s}], got {list(initial.shape)}")
    return e, matrices, index, initial


def _propagate(x: np.ndarray, matrices: np.ndarray, index: np.ndarray, transposed: bool = False) -> np.ndarray:
    """x[n] @ matrices[index[n]] (or @ its transpose) for every row n, one product per distinct matrix."""
    if len(matrices) == 1:  # one matrix for the whole chain (a regular grid): no grouping of the rows to do
        return x @ (matrices[0].T if transposed else matrices[0])
    out = np.empty_like(x)
    for m in np.unique(index):
        rows = index == m
        out[rows] = x[rows] @ (matrices[m].T if transposed else matrices[m])
    return out


def forward_backward(log_emissions: np.ndarray, matrices: np.ndarray, index: np.ndarray,
                     initial: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior state probabilities [N, T, S] and log-likelihoods [N] (scaled forward-backward).

    log_emissions [N, T, S] (or [T, S]); matrices [M, S, S], rows summing to 1 (from -> to); index [T - 1]
    or [N, T - 1], which matrix leads into each step; initial [S], the state distribution at step 0."""
    e, matrices, index, initial = _checked(log_emissions, matrices, index, initial)
    n, t, s = e.shape
    # emissions rescaled per step (their constant cancels in the posteriors; added back to the likelihood)
    shift = e.max(axis=2, keepdims=True)
    b = np.exp(e - shift)
    alpha = np.empty((n, t, s))
    scale = np.empty((n, t))
    a = initial[None, :] * b[:, 0]
    scale[:, 0] = a.sum(axis=1)
    alpha[:, 0] = a / scale[:, 0, None]
    for i in range(1, t):
        a = _propagate(alpha[:, i - 1], matrices, index[:, i - 1]) * b[:, i]
        scale[:, i] = a.sum(axis=1)
        alpha[:, i] = a / scale[:, i, None]
    beta = np.ones((n, t, s))
    for i in range(t - 2, -1, -1):
        following = _propagate(b[:, i + 1] * beta[:, i + 1], matrices, index[:, i], transposed=True)
        beta[:, i] = following / scale[:, i + 1, None]
    posterior = alpha * beta
    posterior /= posterior.sum(axis=2, keepdims=True)
    return posterior, np.log(scale).sum(axis=1) + shift[:, :, 0].sum(axis=1)


def viterbi(log_emissions: np.ndarray, matrices: np.ndarray, index: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """The most likely state path [N, T] (ties: the lowest state index)."""
    e, matrices, index, initial = _checked(log_emissions, matrices, index, initial)
    n, t, s = e.shape
    with np.errstate(divide="ignore"):
        log_matrices, log_initial = np.log(matrices), np.log(initial)
    delta = log_initial[None, :] + e[:, 0]
    back = np.empty((n, t, s), dtype=np.int64)
    for i in range(1, t):
        best = np.empty_like(delta)
        for m in np.unique(index[:, i - 1]):
            rows = index[:, i - 1] == m
            candidates = delta[rows][:, :, None] + log_matrices[m][None]  # [rows, from, to]
            back[rows, i] = candidates.argmax(axis=1)
            best[rows] = candidates.max(axis=1)
        delta = best + e[:, i]
    path = np.empty((n, t), dtype=np.int64)
    path[:, -1] = delta.argmax(axis=1)
    for i in range(t - 1, 0, -1):
        path[:, i - 1] = np.take_along_axis(back[:, i], path[:, i][:, None], axis=1)[:, 0]
    return path
