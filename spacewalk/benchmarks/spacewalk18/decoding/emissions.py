"""Stronger emissions for the plan decoder (plan_decoder.py): per-recording calibration and block fusion.

Both are options of `decoding.emissions` (conf/decoding/), chosen on val against the global calibration;
both default off.

Per-recording calibration (`recording_normalized`, `window_normalized`). A global temperature treats every
recording alike, but recordings differ in how their steps' texts resemble what is said: a step whose
narration is generic scores high everywhere, and recordings with more steps spread their scores
differently. "center" subtracts, per class, the mean score over a reference set of the same recording's
rows; "standardize" also divides by the spread of the centred reference (one number per block). No label is
read; what the reference may hold is the setting's protocol, the caller's to respect:
- whole recording (transductive): the recording's grid of scores, i.e. the whole recording;
- within the window: only the window's own cells (`window_normalized`); the recipe's score of the sample is
  the only recipe score a window holds, so there it is left as it is.

Block fusion (`pair_products`, `FusedCalibration`). The step features are blocks, [narration, caption] (and
the video block first with video); the clip and the cells repeat the window's text in two blocks so that a
dot product scores both. Fusion splits a score into its products of blocks of the same modality (the
embedding's block i against the step features' block j, every pair, so a trained head's cross terms count
too) and weighs them by weights fitted on val together with Irrelevant's bias: log softmax(sum_p w_p x_p +
b e_0), multinomial logistic regression with the classes sharing the weights (convex, so L-BFGS finds its
optimum). With one product and w = 1 / T it is `Calibration`. A trained head needs no such option itself:
its G is a full linear map of the layout, so its output blocks already weigh narration against caption.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax

from spacewalk.benchmarks.spacewalk18.data.dataset import NOT_ANNOTATED
from spacewalk.benchmarks.spacewalk18.decoding.plan_decoder import Calibration
from spacewalk.core.errors import ConfigError

RECORDING_CALIBRATIONS = ("none", "center", "standardize")

Block = tuple[str, int, int]  # (modality, start, stop) of a block in the feature layout


def _check_mode(mode: str) -> None:
    if mode not in RECORDING_CALIBRATIONS:
        raise ConfigError(f"recording_calibration must be one of {RECORDING_CALIBRATIONS}, got {mode!r}")


def recording_normalized(scores: np.ndarray, reference: np.ndarray, mode: str) -> np.ndarray:
    """`scores` [n, K+1] (or [n, K+1, P] block products) of one recording, re-expressed against `reference`
    rows of the same recording ([R, K+1(, P)]): "none" leaves them, "center" subtracts each class's (and
    product's) mean over the reference, "standardize" then divides by the reference's spread over the step
    classes 1..K, one number per product."""
    _check_mode(mode)
    scores = np.asarray(scores, dtype=np.float64)
    if mode == "none":
        return scores
    reference = np.asarray(reference, dtype=np.float64)
    mean = reference.mean(axis=0)
    out = scores - mean
    if mode == "standardize":
        spread = (reference - mean)[:, 1:].std(axis=(0, 1))
        out = out / np.maximum(spread, 1e-8)
    return out


def window_normalized(cell_scores: np.ndarray, first_cell: np.ndarray, num_cells: np.ndarray,
                      mode: str) -> np.ndarray:
    """Each window's cells, normalised against that window's cells alone (`recording_normalized` with the
    window as the reference): [n, M, K+1(, P)], left-aligned, zero past the window. cell_scores [C, K+1(, P)];
    first_cell, num_cells [n] (cells in the window, as the DataModule indexes them)."""
    _check_mode(mode)
    x = np.asarray(cell_scores, dtype=np.float64)
    n, m = len(first_cell), int(np.max(num_cells))
    offsets = np.arange(m)
    inside = offsets[None, :] < num_cells[:, None]
    rows = np.minimum(first_cell[:, None] + offsets[None, :], len(x) - 1)
    windows = np.where(inside.reshape(inside.shape + (1,) * (x.ndim - 1)), x[rows], 0.0)
    if mode == "none":
        return windows
    # per-window sums from cumulative sums over the recording's cells
    csum = np.concatenate([np.zeros((1,) + x.shape[1:]), np.cumsum(x, axis=0)])
    count = num_cells.reshape((n,) + (1,) * (x.ndim - 1)).astype(np.float64)
    last = first_cell + num_cells
    mean = (csum[last] - csum[first_cell]) / count  # [n, K+1(, P)]
    centred = np.where(inside.reshape(inside.shape + (1,) * (x.ndim - 1)), windows - mean[:, None], 0.0)
    if mode == "center":
        return centred
    squares = np.concatenate([np.zeros((1,) + x.shape[1:]), np.cumsum(x ** 2, axis=0)])
    variance = np.clip((squares[last] - squares[first_cell]) / count - mean ** 2, 0.0, None)[:, 1:]
    spread = np.sqrt(variance.mean(axis=1))  # [n(, P)]: over the window's cells and the step classes
    return centred / np.maximum(spread, 1e-8).reshape((n, 1, 1) + spread.shape[1:])


def block_pairs(left: Sequence[Block], right: Sequence[Block]) -> list[tuple[int, int]]:
    """Every (i, j) with left block i and right block j of the same modality and width."""
    return [(i, j) for i, a in enumerate(left) for j, b in enumerate(right)
            if a[0] == b[0] and a[2] - a[1] == b[2] - b[1]]


def pair_products(x: np.ndarray, steps: np.ndarray, left: Sequence[Block], right: Sequence[Block],
                  pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """[n, S, P]: <x_i, steps_j> for each pair (i, j) of blocks; x [n, D], steps [S, D]. Summed over the
    pairs of matching blocks (i = j), the products are the plain dot product x @ steps.T."""
    return np.stack([np.asarray(x[:, left[i][1]:left[i][2]], np.float64)
                     @ np.asarray(steps[:, right[j][1]:right[j][2]], np.float64).T for i, j in pairs], axis=-1)


def cell_scores(cells: np.ndarray, steps: np.ndarray,
                blocks: tuple[Sequence[Block], Sequence[Block]] | None = None) -> np.ndarray:
    """Each cell scored on its own, zero-shot: its features (the DataModule's layout: its transcript, its video)
    against the recording's step features, so a cell's score uses nothing outside it: [C, K+1]; with `blocks`
    (the layout's left and right blocks), split into products of blocks [C, K+1, P] (matching blocks sum to it)."""
    if blocks is None:
        return cells @ steps.T
    left, right = blocks
    return pair_products(cells, steps, left, right, block_pairs(left, right))


def distinct_columns(features: Mapping[str, np.ndarray]) -> list[int]:
    """The products that are not copies of an earlier one on these features (zero-shot's two text blocks of
    the clip are the same text, so its products with a step block come twice): the fit drops the copies."""
    p = next(iter(features.values())).shape[-1]
    keep = []
    for col in range(p):
        if not any(all(np.array_equal(f[..., col], f[..., k]) for f in features.values()) for k in keep):
            keep.append(col)
    return keep


@dataclass(frozen=True)
class FusedCalibration:
    """log p(class) = log softmax(sum_p weights[p] x[..., p] + irrelevant_bias e_0) over the classes; x [..., K+1, P]
    holds the products kept (`columns`) of every product computed."""

    weights: tuple[float, ...]
    irrelevant_bias: float = 0.0
    columns: tuple[int, ...] | None = None

    def logits(self, features: np.ndarray) -> np.ndarray:
        x = np.asarray(features, dtype=np.float64)
        if self.columns is not None:
            x = x[..., list(self.columns)]
        z = x @ np.asarray(self.weights, dtype=np.float64)
        z[..., 0] += self.irrelevant_bias
        return z

    def log_probs(self, features: np.ndarray) -> np.ndarray:
        return log_softmax(self.logits(features), axis=-1)

    @classmethod
    def fit(cls, features: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray]) -> FusedCalibration:
        """Maximum likelihood of the labels (val): features {video: [n, K+1, P]}, labels {video: [n]}."""
        columns = distinct_columns(features)
        xs = {v: np.asarray(f, dtype=np.float64)[..., columns] for v, f in features.items()}
        ys = {v: np.asarray(labels[v]) for v in xs}
        p = len(columns)
        spread = float(np.std(np.concatenate([x[:, 1:].sum(axis=-1).ravel() for x in xs.values()])))
        start = np.r_[np.full(p, 1.0 / max(spread, 1e-3) / p), 0.0]

        def nll_and_grad(params):
            w, b = params[:p], params[p]
            total, grad = 0.0, np.zeros(p + 1)
            for v, x in xs.items():
                y, rows = ys[v], np.arange(len(ys[v]))
                z = x @ w
                z[:, 0] += b
                log_p = log_softmax(z, axis=1)
                total -= log_p[rows, y].sum()
                q = softmax(z, axis=1)
                grad[:p] -= (x[rows, y] - np.einsum("nc,ncp->np", q, x)).sum(axis=0)
                grad[p] -= ((y == 0).astype(np.float64) - q[:, 0]).sum()
            return total, grad

        best = minimize(nll_and_grad, start, jac=True, method="L-BFGS-B", options={"maxiter": 500})
        return cls(tuple(float(x) for x in best.x[:p]), float(best.x[p]), tuple(columns))


# --------------------------------------------------------------------------------------------------
# the emissions a decoding run makes: each member's scores calibrated on val, their log-probabilities averaged


@dataclass(frozen=True)
class Emissions:
    """How the decoder's emissions are made (one candidate of `decoding.emissions`, chosen on val with the
    decoding grid): recording_calibration "none" (one calibration for every recording, fitted on val), "center"
    or "standardize" (each recording's scores first re-expressed against what the setting may see of that
    recording: `recording_normalized`, `window_normalized`); block_fusion: the scores split into products of the
    narration / caption (/ video) blocks, weighed by weights fitted on val (`FusedCalibration`) instead of one
    temperature."""

    recording_calibration: str = "none"
    block_fusion: bool = False

    def __post_init__(self):
        if self.recording_calibration not in RECORDING_CALIBRATIONS:
            raise ConfigError(f"decoding.emissions.recording_calibration must be among {RECORDING_CALIBRATIONS}, "
                              f"got {self.recording_calibration!r}")

    @staticmethod
    def candidates(recording_calibrations: Sequence[str] = ("none",),
                   block_fusions: Sequence[bool] = (False,)) -> list[Emissions]:
        """Every combination, block fusion outermost (the first candidate wins ties: the global calibration)."""
        return [Emissions(str(rc), bool(bf)) for bf in block_fusions for rc in recording_calibrations]


def fit_calibration(block_fusion: bool, scores: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray]):
    """`FusedCalibration` of block products, or one temperature (`Calibration`) of plain scores, fitted on val."""
    return (FusedCalibration if block_fusion else Calibration).fit(scores, labels)


def mean_log_probs(members: Sequence[Mapping[str, Any]], labels: Mapping[str, np.ndarray], key: str,
                   emissions: Emissions = Emissions(), reference: str | None = None) -> tuple[
        dict[str, np.ndarray], list[dict]]:
    """Each member's scores calibrated on val (`labels`), then averaged: the ensemble's log-probabilities of
    `key` ("val", "test" or "grid"), and the calibrations. A member is {key: {video: scores}}, with key +
    "_blocks" the same split into block products. With a recording calibration, each video's scores (val's
    too, before the fit) are first normalised against its `reference` rows (the grid: whole recording)."""
    suffix = "_blocks" if emissions.block_fusion else ""
    mode = emissions.recording_calibration
    if mode != "none" and reference is None:
        raise ValueError("a recording calibration needs the reference rows of each recording")

    def normalized(m, k):
        if mode == "none":
            return m[k + suffix]
        return {v: recording_normalized(s, m[reference + suffix][v], mode) for v, s in m[k + suffix].items()}

    calibrations, per_member = [], []
    for m in members:
        c = fit_calibration(emissions.block_fusion, normalized(m, "val"), labels)
        calibrations.append(c)
        per_member.append({v: c.log_probs(s) for v, s in normalized(m, key).items()})
    out = {v: np.mean([p[v] for p in per_member], axis=0) for v in per_member[0]}
    return out, [asdict(c) for c in calibrations]


@dataclass(frozen=True)
class WindowRows:
    """The samples of one recording as the DataModule indexes their windows: first_cell, num_cells and
    query_pos [n] (the window's cells and the sample's own cell within them)."""

    first_cell: np.ndarray
    num_cells: np.ndarray
    query_pos: np.ndarray


def within_window_emissions(members: Sequence[Mapping[str, Any]], val_labels: Mapping[str, np.ndarray],
                            cells: Mapping[str, Mapping[str, np.ndarray]], val_cell_labels: Mapping[str, np.ndarray],
                            windows: Mapping[str, Mapping[str, WindowRows]], emissions: Emissions):
    """The within-window decoder's emissions of val and test: (sample_log_probs, cell_log_probs, fitted), each
    {split: {video: log-probabilities}}. The recipe's score of a sample is the only one of its kind a window
    holds, so it is calibrated as it is (no recording calibration). `cells` {split: {video: [C, K+1(, P)]}}
    are each cell's own scores (block products with block fusion); `val_cell_labels` {video: [C]} their
    labels on val (NOT_ANNOTATED cells left out of the fit). Without a recording calibration the cells get one
    calibration fitted on val's annotated cells; with one, each sample's window's cells are normalised against
    that window alone and the calibration is fitted at val samples' own cells against their labels.
    `fitted`: {"calibrations": the members', "cell_calibration": the cells'}."""
    fitted: dict[str, Any] = {}
    sample_log_probs = {}
    for split in ("val", "test"):
        sample_log_probs[split], fitted["calibrations"] = mean_log_probs(
            members, val_labels, split, Emissions(block_fusion=emissions.block_fusion))
    mode = emissions.recording_calibration
    if mode == "none":
        annotated = {v: labels != NOT_ANNOTATED for v, labels in val_cell_labels.items()}
        cell_calibration = fit_calibration(emissions.block_fusion,
                                           {v: cells["val"][v][annotated[v]] for v in val_cell_labels},
                                           {v: val_cell_labels[v][annotated[v]] for v in val_cell_labels})
        cell_log_probs = {split: {v: cell_calibration.log_probs(c) for v, c in cells[split].items()}
                          for split in ("val", "test")}
    else:
        laid_out = {split: {v: window_normalized(cells[split][v], w.first_cell, w.num_cells, mode)
                            for v, w in windows[split].items()} for split in ("val", "test")}
        at_query = {v: laid_out["val"][v][np.arange(len(w.query_pos)), w.query_pos]
                    for v, w in windows["val"].items()}
        cell_calibration = fit_calibration(emissions.block_fusion, at_query, val_labels)
        cell_log_probs = {split: {v: cell_calibration.log_probs(x) for v, x in laid_out[split].items()}
                          for split in ("val", "test")}
    fitted["cell_calibration"] = asdict(cell_calibration)
    return sample_log_probs, cell_log_probs, fitted
